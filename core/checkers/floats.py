"""``float``: tokens with a numeric tolerance, in two forms.

- ``{"type": "float", "abs": ..., "rel": ...}``: tokens; two integers exactly, a pair with a real
  number within ``abs`` or ``rel`` (relative to the expected value; both default to 1e-6),
  computed exactly in decimal; NaN and infinities never match; words exactly (case-sensitive).
- With Kattis ``validator_flags`` (or the same names as keys: ``float_tolerance``,
  ``float_absolute_tolerance``, ``float_relative_tolerance``, ``case_sensitive``,
  ``space_change_sensitive``): the default validator's rules (exact_tokens.py), without running
  a program: a token of the answer that parses as a finite float must be matched by a finite
  float within the absolute OR the relative tolerance (integers included, as there); other
  tokens compare as strings, case-insensitively unless ``case_sensitive``.

One kind, one factory: the spec's keys choose the form.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping
from typing import Any

from cpfleet.core.checkers.base import (
    _C_TOKEN,
    _DEC_CTX,
    _INT,
    DESCRIPTIVE_KEYS,
    Checker,
    CheckerKind,
    CheckResult,
    _c_tokens,
    _decimal,
    _difference,
    _first_mismatch,
    _is_num,
    _split_bounded,
)
from cpfleet.core.checkers.exact_tokens import KATTIS_FLAG_KEYS, KattisTokensChecker, _kattis_settings
from cpfleet.core.errors import CheckerSpecError


class FloatChecker:
    """Tokens with numeric tolerance: |got - expected| <= max(abs, rel * |expected|), exactly.

    Non-finite values follow testlib's ``doubleCompare``: NaN matches only NaN, an infinity only
    the infinity of the same sign (so an answer printed as ``inf`` or ``nan`` is accepted when
    it is the expected one). The arithmetic runs in one context with the widest exponent range
    and no dependence on the thread's context, and any value beyond even that (an exponent of
    ~10**18, which only a program's output can hold) is a mismatch, never an error."""

    name = "float"

    def __init__(self, abs_tol: float = 1e-6, rel_tol: float = 1e-6) -> None:
        self.abs_tol = decimal.Decimal(repr(float(abs_tol)))
        self.rel_tol = decimal.Decimal(repr(float(rel_tol)))

    def values_match(self, exp: str, got: str) -> bool:
        x, y = _decimal(exp), _decimal(got)
        if x is None or y is None:
            return exp == got and x is None and y is None  # words: exact; a word never equals a number
        if x.is_nan() or y.is_nan():
            return x.is_nan() and y.is_nan()
        if x.is_infinite() or y.is_infinite():
            return x == y
        if _INT.fullmatch(exp) and _INT.fullmatch(got):
            return x == y
        ctx = _DEC_CTX
        try:
            diff = ctx.abs(ctx.subtract(x, y))
            return bool(ctx.compare(diff, self.abs_tol) <= 0
                        or ctx.compare(diff, ctx.multiply(self.rel_tol, ctx.abs(x))) <= 0)
        except decimal.DecimalException:  # beyond even the widest exponent range
            return False

    def check(self, expected: str, got: str) -> CheckResult:
        # identical tokens are the same value, NaN and infinities included, so they always match
        if expected == got:
            return CheckResult(True)
        e = _c_tokens(expected)
        g, n_got = _split_bounded(got, len(e) + 1, _c_tokens)
        n = min(len(e), len(g))
        index = _first_mismatch(e, g, lambda a, b: a == b or self.values_match(a, b))
        if index == n and len(e) == n_got:
            return CheckResult(True)
        return CheckResult(False, _difference(expected, got, _C_TOKEN, index, len(e), n_got) + self.tolerance_note())

    def tolerance_note(self) -> str:
        """The tolerance in words, appended to every mismatch: a model reading "expected 0.5,
        got 0.50001" cannot tell why that failed unless it knows how close is close enough."""
        return f"; numbers match within absolute {float(self.abs_tol):g} or relative {float(self.rel_tol):g}"


def _float_factory(params: Mapping[str, Any]) -> Checker:
    unknown = set(params) - {"abs", "rel"}
    if unknown:
        raise CheckerSpecError(f"checker 'float' accepts 'abs' and 'rel', got unknown {sorted(unknown)}")
    tol: dict[str, float] = {}
    for key in ("abs", "rel"):
        value = params.get(key, 1e-6)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CheckerSpecError(f"checker 'float': {key!r} must be a number, got {value!r}")
        if not (math.isfinite(value) and value >= 0):
            raise CheckerSpecError(f"checker 'float': {key!r} must be finite and >= 0, got {value!r}")
        tol[key] = float(value)
    return FloatChecker(abs_tol=tol["abs"], rel_tol=tol["rel"])


def kattis_float_flags(spec: Mapping[str, Any]) -> tuple[float, float] | None:
    """(absolute, relative) tolerance of a ``float`` spec in Kattis form (-1 = that one off),
    None when the spec uses the plain ``abs``/``rel`` form."""
    if not any(spec.get(k) is not None for k in ("validator_flags", *KATTIS_FLAG_KEYS)):
        return None
    st = _kattis_settings(spec)  # float_tolerance already resolved into both, in the flags' order
    return float(st.get("float_absolute_tolerance", -1.0)), float(st.get("float_relative_tolerance", -1.0))


def _float_or_kattis_factory(params: Mapping[str, Any]) -> Checker:
    flags = kattis_float_flags(params)
    if flags is None:
        return _float_factory({k: v for k, v in params.items() if k not in DESCRIPTIVE_KEYS})
    unknown = set(params) - {"validator_flags", *KATTIS_FLAG_KEYS} - DESCRIPTIVE_KEYS
    if unknown:
        raise CheckerSpecError(f"checker 'float' with Kattis flags: unknown parameters {sorted(unknown)}")
    st = _kattis_settings(params)
    if flags == (-1.0, -1.0):
        raise CheckerSpecError("checker 'float' needs a tolerance (float_tolerance, float_absolute_tolerance or float_relative_tolerance)")
    return KattisTokensChecker("float", case_sensitive=bool(st.get("case_sensitive", False)),
                               space_change_sensitive=bool(st.get("space_change_sensitive", False)),
                               abs_tol=flags[0], rel_tol=flags[1])


def _float_shape(chk: Mapping[str, Any]) -> list[str]:
    errors = [f"checker float: {k!r} must be a finite number"
              for k in ("abs", "rel", "float_tolerance", "float_absolute_tolerance", "float_relative_tolerance")
              if k in chk and not _is_num(chk[k])]
    flags = chk.get("validator_flags")
    if flags is not None and not isinstance(flags, str):
        errors.append("checker float: 'validator_flags' must be a string")
    return errors


KIND = CheckerKind("float", _float_or_kattis_factory, shape=_float_shape)
