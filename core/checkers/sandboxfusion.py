"""``sandboxfusion``: SandboxFusion's CommonOJ comparison (``/submit`` with ``provided_data``).

Stripped lines (the reader of lines.py), each equal case-insensitively or as one real number
within relative 1e-5 (an integer answer: the same value exactly).
"""

from __future__ import annotations

import math

from cpfleet.core.checkers.base import (
    _ASCII_LOWER,
    _INT,
    _REAL,
    CheckerKind,
    _decimal,
    _int_key,
    _no_params,
    _no_shape,
)
from cpfleet.core.checkers.lines import LinesChecker


class SandboxFusionLinesChecker(LinesChecker):
    """SandboxFusion's CommonOJ comparison (``sandbox/utils/testing.py``
    ``check_stdio_test_case``, ``lower_cmp`` on), which its ``/submit`` applies to
    ``provided_data`` tests: stripped outputs cut into lines, equal line counts, and each pair of
    lines equal once lowercased and stripped or, failing that, each line one real number and the
    two within a relative 1e-5 of the expected one (``|got - exp| / max(|exp|, 1e-10) < 1e-5``;
    NaN and infinities never match as numbers). Stricter than the reference where it would pay a
    wrong answer: an integer answer is matched only by the same value, exactly (there
    ``1000001`` passes for ``1000000``, and so did ``1000001.0`` here: a wrong integer printed
    as a real was paid where printed as an integer it was not; ``1000000.0`` and ``1e6`` still
    match ``1000000``); and case folding and whitespace are ASCII, numbers ASCII decimal syntax
    (Python's ``lower``, ``strip`` and ``float`` reach further)."""

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
        if _INT.fullmatch(exp_line):  # an integer answer is right or wrong, however it is printed
            if _INT.fullmatch(got_line):
                return _int_key(exp_line) == _int_key(got_line)
            value = _decimal(got_line)
            return value is not None and value.is_finite() and value == _decimal(exp_line)
        e, g = self._real(exp_line), self._real(got_line)
        if e is None or g is None:
            return False
        return abs(g - e) / max(abs(e), 1e-10) < self.REL_TOL


KIND = CheckerKind("sandboxfusion", _no_params("sandboxfusion", SandboxFusionLinesChecker), shape=_no_shape)
