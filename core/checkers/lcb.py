"""``lcb``: LiveCodeBench's stdin/stdout grading (``grade_stdio``).

Set by ``cpfleet prepare`` and inline problems for LiveCodeBench-shaped stdin tests: both
outputs stripped and cut into lines, each line stripped (the reader of lines.py); equal line
counts, and each line equal as text or all its tokens equal as decimal numbers (``0.50`` is
``0.5``; no tolerance). Line structure counts.
"""

from __future__ import annotations

import decimal

from cpfleet.core.checkers.base import CheckerKind, _c_tokens, _decimal, _no_params, _no_shape, _split_bounded
from cpfleet.core.checkers.lines import LinesChecker


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

    def same_line(self, exp_line: str, got_line: str) -> bool:
        e = _c_tokens(exp_line)
        g, n_got = _split_bounded(got_line, len(e) + 1, _c_tokens)
        if n_got != len(e):
            return False
        for a, b in zip(e, g, strict=True):
            x, y = _decimal(a), _decimal(b)
            if x is None or y is None:
                return False
            try:
                if x != y:
                    return False
            except decimal.DecimalException:  # pragma: no cover - no signalling NaN passes the regex
                return False
        return True


KIND = CheckerKind("lcb", _no_params("lcb", LcbLinesChecker), shape=_no_shape)
