"""Helpers for runner tests."""

from __future__ import annotations

import os

from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult


def run(runner: CodeRunner, source: str, stdin: str | bytes = b"", **limits: object) -> RunResult:
    """Load ``source`` (which must compile) and run it once."""
    err = runner.load(source)
    assert err is None, err
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return runner.run(data, Limits(**limits))  # type: ignore[arg-type]


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s children (of all its threads), from /proc."""
    kids: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids += [int(x) for x in f.read().split()]
    return kids
