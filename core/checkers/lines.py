"""``lines``: stripped lines, each equal as text, and the line reader the line-wise kinds share.

Some reference judges read outputs as lines, not as a stream of tokens: LiveCodeBench's
``grade_stdio``, open-r1's ``code_reward`` script template, SandboxFusion's CommonOJ
``check_stdio_test_case``. Judged by whitespace tokens instead, ``1 2`` on one line would pass
for the two-line answer ``1`` / ``2`` that those references refuse, and the references' own
leniencies (decimal numbers, case) would be refused. The line-wise kinds (``lines`` here,
``lcb`` in lcb.py, ``sandboxfusion`` in sandboxfusion.py) share this module's reader: both
outputs stripped and cut at newlines without copying them, each line stripped, equal line
counts, then a per-kind rule for a pair of lines (``same_line``). Whitespace is ASCII and
numbers ASCII decimal syntax, as in every kind (core/checkers/base.py).

``lines`` itself: the same lines, each equal as text only: open-r1's ``code_reward`` script
template's comparison without its ``zip`` truncation (the E2B/Morph router route uses it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from cpfleet.core.checkers.base import (
    _C_SPACE,
    CheckerKind,
    CheckResult,
    _clip,
    _no_params,
    _no_shape,
    _rstrip_end,
)

_C_NOT_SPACE = re.compile(f"[^{re.escape(_C_SPACE)}]")


class LinesChecker:
    """Stripped lines, each equal as text: the comparison of open-r1's ``code_reward`` script
    template (``output.strip()``, cut at newlines, each line stripped) without its ``zip``, which
    pays a program that prints only the first lines of a longer answer. So the line structure
    and the spacing inside a line count; the whitespace is ASCII (a line ending in U+3000 is not
    the line without it). :class:`LcbLinesChecker` adds LiveCodeBench's number rule."""

    name = "lines"
    rule = "as text"  # how a pair of stripped lines matches, for the feedback

    @staticmethod
    def _bounds(text: str) -> tuple[int, int]:
        """(start, end) of ``text.strip()`` in ASCII whitespace, without copying the text."""
        m = _C_NOT_SPACE.search(text)
        if m is None:
            return 0, 0
        return m.start(), _rstrip_end(text, m.start(), len(text), _C_SPACE)

    @staticmethod
    def _lines(text: str, start: int, end: int) -> Iterator[str]:
        """The stripped lines of ``text[start:end]``, one at a time."""
        while True:
            cut = text.find("\n", start, end)
            if cut < 0:
                yield text[start:end].strip(_C_SPACE)
                return
            yield text[start:cut].strip(_C_SPACE)
            start = cut + 1

    def same_line(self, exp_line: str, got_line: str) -> bool:
        """Whether two stripped lines match (here: as text)."""
        return exp_line == got_line

    def check(self, expected: str, got: str) -> CheckResult:
        if expected == got:
            return CheckResult(True)
        e_start, e_end = self._bounds(expected)
        g_start, g_end = self._bounds(got)
        n_e = expected.count("\n", e_start, e_end) + 1
        n_g = got.count("\n", g_start, g_end) + 1
        if n_e != n_g:
            return CheckResult(False, f"the output has {n_g} lines, expected {n_e} "
                                      "(lines are compared one by one, after stripping)")
        for i, (a, b) in enumerate(zip(self._lines(expected, e_start, e_end),
                                       self._lines(got, g_start, g_end), strict=True)):
            if a == b or self.same_line(a, b):
                continue
            return CheckResult(False, f"first difference at line {i + 1}: expected {_clip(a)!r}, got {_clip(b)!r} "
                                      f"(a line matches {self.rule})")
        return CheckResult(True)


KIND = CheckerKind("lines", _no_params("lines", LinesChecker), shape=_no_shape)
