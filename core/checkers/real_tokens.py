"""``real_tokens``: tokens, where an answer's real numbers may be printed with other digits.

What ``cpfleet prepare`` and inline tests give TACO / APPS stdin/stdout problems (and the rows
of the trainers that grade those with TACO's code: rLLM's ``stdin_stdout`` label, PrimeIntellect's
``stdin_stdout`` cases). Their reference (hendrycks/apps ``eval/testing_util.py`` ``run_test``,
copied by TACO, verl ``prime_code``, rLLM) pays an output whose lines are numbers through
``np.allclose`` (``|got - exp| <= 1e-8 + 1e-5 * |exp|``), and its later fallbacks pay wrong
answers (``allclose`` pays the integer ``1000001`` for ``1000000``; set equality of lines and of
numbers rounded to 3 decimals pays permuted or inexact answers). ``tokens`` refuses a correct
``0.5000000`` for ``0.5``; this kind pays it, and on each token nothing the reference's float
closeness would refuse (the reference compares numbers only when the whole output is numbers:
here a line mixing words and reals is compared token by token, so ``0.5000000 YES`` is paid
for ``0.5 YES``, the same answer):

- tokens compared one by one, the same count, as ``tokens`` (ASCII whitespace; an output that
  is only whitespace is no tokens, so it matches an empty answer only);
- an answer token that is a real number (ASCII decimal syntax with a ``.`` or an exponent,
  finite: ``0.5``, ``.5``, ``5.``, ``-0.0``, ``1e-7``, ``+2.5E3``, ``1e999999``) is matched by a
  program token that is a finite ASCII decimal number (an integer too: ``1`` for ``1.0``) within
  relative 1e-6 of it, or within absolute 1e-6 where that is also within the reference's
  ``1e-8 + 1e-5 * |exp|`` (absolute 1e-6 alone would pay ``0.000001`` for ``0.0``, which
  ``allclose`` refuses). Computed exactly in decimal, so no exponent overflows a float: a value
  past the widest decimal range is a mismatch;
- every other answer token (integers, words, ``nan``, ``inf``) is matched only by the same text,
  as ``tokens`` does: an integer answer is never paid within a tolerance (``1.0`` is not ``1``),
  and NaN or an infinity is never a number that matches anything.
"""

from __future__ import annotations

import decimal

from cpfleet.core.checkers.base import _DEC_CTX, _INT, CheckerKind, _decimal, _no_params, _no_shape
from cpfleet.core.checkers.floats import FloatChecker

_TOL = decimal.Decimal("1e-6")
_REF_ABS = decimal.Decimal("1e-8")  # np.allclose's atol and rtol, the reference's bound
_REF_REL = decimal.Decimal("1e-5")


class RealTokensChecker(FloatChecker):
    """TACO / APPS stdin/stdout comparison (see the module docstring): tokens, the answer's real
    numbers within 1e-6 and inside the reference's own ``np.allclose`` bound, everything else
    exact. The token walk and the failure detail are ``float``'s."""

    name = "real_tokens"

    def __init__(self) -> None:
        super().__init__(abs_tol=1e-6, rel_tol=1e-6)

    def values_match(self, exp: str, got: str) -> bool:
        if exp == got:
            return True
        x = _decimal(exp)
        if x is None or not x.is_finite() or _INT.fullmatch(exp):
            return False  # a word, an integer, NaN or an infinity: its own text only
        y = _decimal(got)
        if y is None or not y.is_finite():
            return False
        ctx = _DEC_CTX
        try:
            diff = ctx.abs(ctx.subtract(x, y))
            size = ctx.abs(x)
            if ctx.compare(diff, ctx.multiply(_TOL, size)) <= 0:
                return True
            return bool(ctx.compare(diff, _TOL) <= 0
                        and ctx.compare(diff, ctx.add(_REF_ABS, ctx.multiply(_REF_REL, size))) <= 0)
        except decimal.DecimalException:  # beyond even the widest exponent range
            return False

    def tolerance_note(self) -> str:
        return ("; a real number in the answer matches a number within relative 1e-06 or absolute 1e-06"
                " (at most 1e-08 + 1e-05 * |answer|); integers and words must be equal as text")


KIND = CheckerKind("real_tokens", _no_params("real_tokens", RealTokensChecker), shape=_no_shape)
