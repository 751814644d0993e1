"""``code_contests``: the official CodeContests tester's ``OutputsMatch`` (execution/
tester_sandboxer.cc).

Tokens split on `` \\n\\t\\r\\v``, ASCII-lowercased; identical token lists match; otherwise,
pairwise, a token that is not a number must be equal, two integers must be equal, and a pair
where either is a real number matches when ``|a - b| < 1e-5`` (in doubles, so NaN and infinities
never match pairwise). One deliberate difference: the tester parses integers into a 32-bit
``int`` and compares bigger ones as doubles (so two 20-digit integers that differ in the last
digit "match" there); here integers of any size are compared exactly, and an integer beside a
real number within the tolerance of its exact value (``999999999999999999`` is not
``1e18``, though both are the same double): else printing a wrong integer answer as a real
(``%.1f`` of a double) was paid where printing it as an integer was not.
"""

from __future__ import annotations

import decimal

from cpfleet.core.checkers.base import (
    _ASCII_LOWER,
    _CC_TOKEN,
    _DEC_CTX,
    _INT,
    CheckerKind,
    CheckResult,
    _as_real,
    _decimal,
    _difference,
    _first_mismatch,
    _int_key,
    _may_hold_non_finite,
    _no_params,
    _no_shape,
    _split_bounded,
    _splits_alike,
)

CODE_CONTESTS_TOLERANCE = 1e-5
_EXACT_TOLERANCE = decimal.Decimal("1e-5")


class CodeContestsChecker:
    """The official CodeContests ``OutputsMatch`` (see the module docstring)."""

    name = "code_contests"

    @staticmethod
    def _tokens(text: str) -> list[str]:
        text = text.lower() if text.isascii() else text.translate(_ASCII_LOWER)
        if _splits_alike(text, _CC_TOKEN):
            return text.split()
        return _CC_TOKEN.findall(text)

    @staticmethod
    def values_match(a: str, b: str) -> bool:
        """One token pair, as the tester's ValuesMatch (integers exact at any size)."""
        a_int, b_int = _INT.fullmatch(a) is not None, _INT.fullmatch(b) is not None
        a_real = None if a_int else _as_real(a)
        b_real = None if b_int else _as_real(b)
        if (not a_int and a_real is None) or (not b_int and b_real is None):
            return a == b  # at least one word: exact (already lowercased)
        if a_int and b_int:
            return _int_key(a) == _int_key(b)
        if a_int or b_int:  # an integer beside a real: its exact value, never its double
            x_exact, y_exact = _decimal(a), _decimal(b)
            if x_exact is None or y_exact is None or not (x_exact.is_finite() and y_exact.is_finite()):
                return False
            try:
                return bool(_DEC_CTX.compare(_DEC_CTX.abs(_DEC_CTX.subtract(x_exact, y_exact)), _EXACT_TOLERANCE) < 0)
            except decimal.DecimalException:  # beyond even the widest exponent range
                return False
        x = float(a) if a_real is None else a_real
        y = float(b) if b_real is None else b_real
        return abs(x - y) < CODE_CONTESTS_TOLERANCE  # NaN/inf: False, as in doubles

    def check(self, expected: str, got: str) -> CheckResult:
        if expected == got:
            return CheckResult(True)
        e = self._tokens(expected)
        g, n_got = _split_bounded(got, len(e) + 1, self._tokens, _CC_TOKEN)
        if e == g:
            return CheckResult(True)
        exact = not (_may_hold_non_finite(expected) or _may_hold_non_finite(got))
        n = min(len(e), len(g))
        index = _first_mismatch(e, g, lambda a, b: (exact and a == b) or self.values_match(b, a), exact)
        if index == n and len(e) == n_got:
            return CheckResult(True)
        return CheckResult(False, _difference(expected, got, _CC_TOKEN, index, len(e), n_got))


KIND = CheckerKind("code_contests", _no_params("code_contests", CodeContestsChecker), shape=_no_shape)
