"""Runner factory: one place that maps a runner name to an implementation."""

from __future__ import annotations

from cpfleet.sandbox.runner import CodeRunner

RUNNER_KINDS = ("forkserver", "subprocess")


def make_runner(kind: str = "forkserver", *, isolate: bool = True) -> CodeRunner:
    """A ready runner (its zygote started and self-tested). One per process; close() it."""
    from cpfleet.sandbox.forkserver import ForkServerRunner
    from cpfleet.sandbox.subprocess_runner import SubprocessRunner

    if kind == "forkserver":
        return ForkServerRunner(isolate=isolate)
    if kind == "subprocess":
        return SubprocessRunner(isolate=isolate)
    raise ValueError(f"unknown runner kind {kind!r}; choose one of {RUNNER_KINDS}")
