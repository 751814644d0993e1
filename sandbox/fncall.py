"""Function-call problems, the judge's side: a test child's run -> the test's verdict.

The rules (what is compared and how) are in cpfleet/core/fncall.py; the child's side, which
calls the function and writes its value as JSON on stdout, is sandbox/callharness.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpfleet.core.fncall import SHOW, Tolerance, call_text, decode, difference, show, tolerance_for
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.callharness import NO_FUNCTION, UNREPRESENTABLE
from cpfleet.sandbox.runner import RunResult

__all__ = ["NO_FUNCTION", "UNREPRESENTABLE", "CallOutcome", "call_text", "judge", "tolerance_for"]


@dataclass(frozen=True, slots=True)
class CallOutcome:
    verdict: Verdict
    returned: str  # what the feedback shows after "->"
    detail: str = ""


def judge(rr: RunResult, expected_json: str, tol: Tolerance | None) -> CallOutcome:
    """The verdict of one function-call test from the child's run (its stdout is the value)."""
    if rr.status == Verdict.RUNTIME_ERROR and rr.exit_code == UNREPRESENTABLE:
        why = rr.stderr.decode("utf-8", errors="replace").strip().rsplit("\n", 1)[-1]
        return CallOutcome(Verdict.WRONG_ANSWER, "(a value with no JSON form)", why)
    if rr.status == Verdict.RUNTIME_ERROR and rr.exit_code == NO_FUNCTION:
        return CallOutcome(Verdict.RUNTIME_ERROR, "(function not defined)", rr.stderr.decode(errors="replace").strip())
    if rr.status != Verdict.OK:
        tail = rr.stderr.decode("utf-8", errors="replace").strip().rsplit("\n", 1)[-1] if rr.stderr else ""
        if rr.status == Verdict.RUNTIME_ERROR and tail:
            return CallOutcome(rr.status, f"raised {tail[:SHOW]}", rr.error)
        return CallOutcome(rr.status, f"(no value: {rr.error or rr.status})", rr.error)
    if rr.stdout_truncated:
        return CallOutcome(Verdict.OUTPUT_LIMIT, "(value too large)", "return value truncated")
    text = rr.stdout.decode("utf-8", errors="replace")
    if not text:
        return CallOutcome(Verdict.RUNTIME_ERROR, "(no value)", "the process ended before the function returned")
    try:
        got = decode(text)
    except (ValueError, RecursionError):
        return CallOutcome(Verdict.WRONG_ANSWER, "(unreadable value)", "the result channel held no single JSON value")
    expected = decode(expected_json)
    diff = difference(expected, got, tol)
    if diff is None:
        return CallOutcome(Verdict.OK, show(got))
    return CallOutcome(Verdict.WRONG_ANSWER, show(got), diff)
