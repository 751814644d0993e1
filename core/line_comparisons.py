"""Line-wise comparison checkers: the references that compare an output line by line.

Some reference judges read outputs as lines, not as a stream of tokens: LiveCodeBench's
``grade_stdio``, open-r1's ``code_reward`` script template, SandboxFusion's CommonOJ
``check_stdio_test_case``. Judged by whitespace tokens instead, ``1 2`` on one line would pass
for the two-line answer ``1`` / ``2`` that those references refuse, and the references' own
leniencies (decimal numbers, case) would be refused. The kinds here (``lines``, ``lcb``,
``sandboxfusion``; registered in core/checkers.py) share one reader: both outputs stripped and
cut at newlines without copying them, each line stripped, equal line counts, then a per-kind
rule for a pair of lines. Whitespace is ASCII and numbers ASCII decimal syntax, as in every
kind of core/comparisons.py, whose helpers these use.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Iterator

from cpfleet.core.comparisons import (
    _ASCII_LOWER,
    _C_SPACE,
    _INT,
    _REAL,
    CheckResult,
    _c_tokens,
    _clip,
    _int_key,
    _rstrip_end,
    _split_bounded,
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


class LcbLinesChecker(LinesChecker):
    """LiveCodeBench's stdin/stdout comparison (``lcb_runner/evaluation/testing_util.py``
    ``grade_stdio``), which LiveCodeBench-style datasets are graded by: both outputs stripped,
    cut into lines at newlines, each line stripped; the line counts must be equal, and each pair
    of lines is equal as text or, failing that, every whitespace-separated token of both lines
    reads as a decimal number and the two lists of numbers are equal (``Decimal`` equality:
    ``0.50`` is ``0.5``, ``1e2`` is ``100``; no tolerance, and NaN never equals NaN).

    So, unlike ``tokens``, the line structure counts (``1 2`` on one line is not ``1``, ``2`` on
    two), and spaces inside a line count unless the line is all numbers. Stricter than the
    reference in one respect only, as every kind here: whitespace is ASCII and numbers are ASCII
    decimal syntax (Python's ``strip``, ``split`` and ``Decimal`` also take U+3000 for a space and
    ``\u0661`` or ``1_000`` for numbers, which a wrong-looking output must not be paid for)."""

    name = "lcb"
    rule = "as text, or when all its tokens are equal numbers"

    @staticmethod
    def _number(tok: str) -> decimal.Decimal | None:
        if _REAL.fullmatch(tok) is None:
            return None
        try:
            return decimal.Decimal(tok)
        except decimal.DecimalException:  # pragma: no cover - the regex admits only Decimal syntax
            return None

    def same_line(self, exp_line: str, got_line: str) -> bool:
        e = _c_tokens(exp_line)
        g, n_got = _split_bounded(got_line, len(e) + 1, _c_tokens)
        if n_got != len(e):
            return False
        for a, b in zip(e, g, strict=True):
            x, y = self._number(a), self._number(b)
            if x is None or y is None:
                return False
            try:
                if x != y:
                    return False
            except decimal.DecimalException:  # pragma: no cover - no signalling NaN passes the regex
                return False
        return True


class SandboxFusionLinesChecker(LinesChecker):
    """SandboxFusion's CommonOJ comparison (``sandbox/utils/testing.py``
    ``check_stdio_test_case``, ``lower_cmp`` on), which its ``/submit`` applies to
    ``provided_data`` tests: stripped outputs cut into lines, equal line counts, and each pair of
    lines equal once lowercased and stripped or, failing that, each line one real number and the
    two within a relative 1e-5 of the expected one (``|got - exp| / max(|exp|, 1e-10) < 1e-5``;
    NaN and infinities never match as numbers). Stricter than the reference where it would pay a
    wrong answer: two integers are compared exactly (there ``1000001`` passes for ``1000000``);
    and case folding and whitespace are ASCII, numbers ASCII decimal syntax (Python's ``lower``,
    ``strip`` and ``float`` reach further)."""

    name = "sandboxfusion"
    rule = "case-insensitively as text, or as one number within relative 1e-5"
    REL_TOL = 1e-5

    @staticmethod
    def _real(line: str) -> float | None:
        if _REAL.fullmatch(line) is None:
            return None
        v = float(line)
        return v if math.isfinite(v) else None

    def same_line(self, exp_line: str, got_line: str) -> bool:
        if exp_line.translate(_ASCII_LOWER) == got_line.translate(_ASCII_LOWER):
            return True
        if _INT.fullmatch(exp_line) and _INT.fullmatch(got_line):
            return _int_key(exp_line) == _int_key(got_line)  # an integer is right or wrong
        e, g = self._real(exp_line), self._real(got_line)
        if e is None or g is None:
            return False
        return abs(g - e) / max(abs(e), 1e-10) < self.REL_TOL
