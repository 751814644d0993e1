"""The subprocess runner: the fork server's zygote and isolation, but each test execs a fresh
``python3 solution.py`` (the reference semantics the fork server's are checked against)."""

from __future__ import annotations

from cpfleet.sandbox.forkserver import ZygoteRunner


class SubprocessRunner(ZygoteRunner):
    """Reference semantics: each test execs a fresh ``python3 solution.py`` (same isolation)."""

    name = "subprocess"
    mode = "exec"
