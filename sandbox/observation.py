"""The feedback text the model reads next turn: per-test status, then clipped input/expected/got.

Public tests are shown in full (clipped); hidden tests only as counts, never their inputs or
outputs. Example::

    === sample test 1/2 [FAIL | WRONG_ANSWER | 12 ms]
    input:
    1 2
    expected:
    3
    got stdout:
    4
    first difference at line 1: expected '3', got '4' (token 1: expected '3', got '4')
    === sample test 2/2 [PASS | OK | 11 ms]
    ...
    (public: 1/2 passed)
    (hidden: 0/7 passed, stopped at the first failure)
"""

from __future__ import annotations

from dataclasses import dataclass

from cpfleet.core.verdict import Verdict

CLIP_CHARS = 512  # per field: enough to see a mismatch, short enough for a model's context
CLIP_MARK = "... [clipped]"


def clip(text: str, limit: int = CLIP_CHARS) -> str:
    """At most ``limit`` characters, saying so when something was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + CLIP_MARK


def display_prefix(text: str) -> str:
    """The part of ``text`` the observation can ever show: ``format_public_test`` renders
    ``display_prefix(t)`` exactly as it renders ``t`` (two extra characters keep both the
    trailing-newline rule and the clip mark right). The judge keeps only this of a test's
    output, so a job's memory does not grow with its number of tests."""
    return text[: CLIP_CHARS + 2]


def _field(text: str) -> str:
    # one trailing newline belongs to the last line, not to the display
    return clip(text[:-1] if text.endswith("\n") else text)


@dataclass(slots=True)
class PublicTestView:
    """What the observation shows about one public test (``verdict`` None: not run, because
    the job's budget stopped it earlier)."""

    verdict: Verdict | None
    ms: float
    input: str
    expected: str
    stdout: str
    stderr: str = ""
    stdout_truncated: bool = False
    detail: str = ""  # checker's first difference (WRONG_ANSWER) or the runner's note (limits)
    call: str = ""  # function-call problems: "twoSum([2, 7, 11, 15], 9)"
    returned: str = ""  # function-call problems: the returned value, or what happened instead


def format_public_test(i: int, n: int, t: PublicTestView) -> str:
    if t.verdict is None:
        return f"=== sample test {i}/{n} [NOT RUN{' | ' + t.detail if t.detail else ''}]\n"
    ok = t.verdict == Verdict.OK
    if t.call:
        return _format_call_test(i, n, t)
    lines = [
        f"=== sample test {i}/{n} [{'PASS' if ok else 'FAIL'} | {t.verdict} | {int(t.ms)} ms]",
        "input:",
        _field(t.input),
        "expected:",
        _field(t.expected),
        "got stdout:",
        _field(t.stdout) + (" [output truncated]" if t.stdout_truncated else ""),
    ]
    if t.stderr:
        lines += ["stderr:", _field(t.stderr)]
    if t.detail and not ok:
        lines.append(clip(t.detail))
    return "\n".join(lines) + "\n"


def _format_call_test(i: int, n: int, t: PublicTestView) -> str:
    """A function-call test: the call and what it returned, the expected value, then whatever
    the program printed (its prints and any traceback go to stderr: stdout carries the value)."""
    ok = t.verdict == Verdict.OK
    lines = [
        f"=== sample test {i}/{n} [{'PASS' if ok else 'FAIL'} | {t.verdict} | {int(t.ms)} ms]",
        clip(f"{t.call} -> {t.returned}"),
        "expected: " + _field(t.expected),
    ]
    if t.stderr:
        lines += ["printed (stdout/stderr):", _field(t.stderr)]
    if t.detail and not ok:
        lines.append(clip(t.detail))
    return "\n".join(lines) + "\n"


def format_observation(
    public: list[PublicTestView],
    *,
    public_passed: int,
    public_total: int,
    hidden_passed: int,
    hidden_total: int,
    hidden_run: int,
    hidden_note: str = "",
    max_shown: int | None = None,
    public_run: bool = True,
) -> str:
    """The whole observation: shown public tests, then the public and hidden counts.
    ``public_run`` False (hidden mode): no public test is shown, and the public line says so."""
    shown = public if max_shown is None else public[:max_shown]
    parts = [format_public_test(i + 1, public_total, t) for i, t in enumerate(shown)]
    unshown = public[len(shown) :]
    unshown_failed = sum(1 for t in unshown if t.verdict is not None and t.verdict != Verdict.OK)
    unshown_not_run = sum(1 for t in unshown if t.verdict is None)
    if unshown:
        more = f"({len(unshown)} more sample tests not shown, {unshown_failed} of them failed"
        parts.append(more + (f", {unshown_not_run} not run)\n" if unshown_not_run else ")\n"))
    if public_run:
        parts.append(f"(public: {public_passed}/{public_total} passed)\n")
    else:
        parts.append("(public: not shown, mode hidden: the reward comes from the hidden tests)\n")
    hidden = f"(hidden: {hidden_passed}/{hidden_total} passed"
    if hidden_run < hidden_total and hidden_note:
        hidden += f", {hidden_note}"
    parts.append(hidden + ")\n")
    return "".join(parts)
