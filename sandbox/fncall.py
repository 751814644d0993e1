"""Function-call problems, the judge's side: a test child's run -> the test's verdict.

The rules (what is compared and how) are in core/fncall.py; the child's side, which
calls the function and writes its value as JSON on stdout, is sandbox/callharness.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpfleet.core.fncall import (
    SHOW,
    Tolerance,
    call_text,
    decode,
    decode_returned,
    printed_difference,
    show,
    text_value_count,
    tolerance_for,
    value_budget,
    value_difference,
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


def judge(rr: RunResult, expected_json: str, tol: Tolerance | None, semantics: str = "python") -> CallOutcome:
    """The verdict of one function-call test from the child's run (its stdout is the value, or
    under ``primeintellect`` the printed text), by the rules of ``semantics`` (core/fncall.py)."""
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
    expected = decode(expected_json)
    if semantics == "primeintellect":
        return _judge_printed(rr.stdout, expected)
    text = rr.stdout.decode("utf-8", errors="replace")
    if not text:
        return CallOutcome(Verdict.RUNTIME_ERROR, "(no value)", "the process ended before the function returned")
    # A value equal to the expected one holds as many values; parsing one that holds far more
    # (up to the output cap: millions of strings or lists) would cost the judge ~30 bytes of
    # objects per byte of text. It is a wrong answer, told without building it. The budget
    # counts each expected dict as it may come back (typed pairs), with slack for tuples' tags.
    n_expected = value_budget(expected)
    most = 2 * n_expected + MAX_EXTRA_VALUES
    # the punctuation, strings' included, bounds the count from above at C speed: the exact
    # count (seconds for tens of MB) runs only for a value that may be too large
    upper = 1 + text.count(",") + text.count("[") + text.count("{")
    n_got = text_value_count(text) if upper > most else 0
    if n_got > most:
        return CallOutcome(Verdict.WRONG_ANSWER, text[:SHOW] + "...",
                           f"the returned value holds {n_got} values, the expected one {n_expected}")
    try:
        got = decode_returned(text)
    except (ValueError, RecursionError) as e:
        return CallOutcome(Verdict.WRONG_ANSWER, "(unreadable value)",
                           f"the result channel held no single JSON value: {str(e)[:SHOW]}")
    diff = value_difference(semantics, expected, got, tol)
    if diff is None:
        return CallOutcome(Verdict.OK, show(got))
    return CallOutcome(Verdict.WRONG_ANSWER, show(got), diff)


def _judge_printed(stdout: bytes, expected: object) -> CallOutcome:
    """PrimeIntellect: the printed text against ``str(expected)``. Bytes that are not UTF-8 match
    nothing (the reference decodes strictly, and a replacement character must not match one in
    the expected text)."""
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError:
        shown = stdout[:SHOW].decode("utf-8", errors="replace")
        return CallOutcome(Verdict.WRONG_ANSWER, f"printed {shown!r}", "the printed text is not UTF-8")
    diff = printed_difference(expected, text)
    shown = text.strip()
    shown = shown if len(shown) <= SHOW else shown[:SHOW] + "..."
    return CallOutcome(Verdict.OK if diff is None else Verdict.WRONG_ANSWER, f"printed {shown!r}", diff or "")
