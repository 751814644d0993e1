"""Helpers for runner tests."""

from __future__ import annotations

from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult


def run(runner: CodeRunner, source: str, stdin: str | bytes = b"", **limits: object) -> RunResult:
    """Load ``source`` (which must compile) and run it once."""
    err = runner.load(source)
    assert err is None, err
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return runner.run(data, Limits(**limits))  # type: ignore[arg-type]
