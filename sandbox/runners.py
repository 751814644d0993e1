"""The old home of the runner factory, kept so that code importing it keeps working:
``make_runner`` and ``RUNNER_KINDS`` live in ``cpfleet.sandbox.runner`` beside the interface
they build (one module for "a runner", instead of two modules a letter apart)."""

from __future__ import annotations

from cpfleet.sandbox.runner import RUNNER_KINDS, make_runner

__all__ = ["RUNNER_KINDS", "make_runner"]
