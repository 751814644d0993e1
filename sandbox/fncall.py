"""Function-call problems, the judge's side: a test child's run -> the test's verdict.

The rules (what is compared and how) are in cpfleet/core/fncall.py; the child's side, which
calls the function and writes its value as JSON on stdout, is sandbox/callharness.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpfleet.core.fncall import (
    SHOW,
    Tolerance,
    call_text,
    decode,
    difference,
    show,
    text_value_count,
    tolerance_for,
    value_count,
)
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.callharness import NO_FUNCTION, UNREPRESENTABLE
from cpfleet.sandbox.runner import RunResult

MAX_EXTRA_VALUES = 1000  # values a returned value may hold past twice the expected one's before it is not parsed

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
    expected = decode(expected_json)
    # A value equal to the expected one holds as many values; parsing one that holds far more
    # (up to the output cap: millions of strings or lists) would cost the judge ~30 bytes of
    # objects per byte of text. It is a wrong answer, told without building it. The slack
    # leaves room for object keys that collide in JSON (1 and "1"), which one parse then merges.
    n_expected = value_count(expected)
    most = 2 * n_expected + MAX_EXTRA_VALUES
    # the punctuation, strings' included, bounds the count from above at C speed: the exact
    # count (seconds for tens of MB) runs only for a value that may be too large
    upper = 1 + text.count(",") + text.count("[") + text.count("{")
    n_got = text_value_count(text) if upper > most else 0
    if n_got > most:
        return CallOutcome(Verdict.WRONG_ANSWER, text[:SHOW] + "...",
                           f"the returned value holds {n_got} values, the expected one {n_expected}")
    try:
        got = decode(text)
    except (ValueError, RecursionError):
        return CallOutcome(Verdict.WRONG_ANSWER, "(unreadable value)", "the result channel held no single JSON value")
    diff = difference(expected, got, tol)
    if diff is None:
        return CallOutcome(Verdict.OK, show(got))
    return CallOutcome(Verdict.WRONG_ANSWER, show(got), diff)
