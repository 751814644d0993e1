"""``tokens``, the default kind: exact token equality after splitting on whitespace.

Whitespace-separated tokens compared position by position, case-sensitive, the same token count
required (core/checkers/__init__.py has the shared rules: ASCII whitespace). On failure the
detail names the first differing line and token.
"""

from __future__ import annotations

from cpfleet.core.checkers.base import (
    _C_TOKEN,
    CheckerKind,
    CheckResult,
    _c_tokens,
    _difference,
    _first_mismatch,
    _no_params,
    _no_shape,
    _split_bounded,
)


class TokensChecker:
    """Whitespace-token equality, case-sensitive: the comparison RL environments use by default."""

    name = "tokens"

    def check(self, expected: str, got: str) -> CheckResult:
        if expected == got:
            return CheckResult(True)
        e = _c_tokens(expected)
        g, n_got = _split_bounded(got, len(e) + 1, _c_tokens)
        if e == g:
            return CheckResult(True)
        index = _first_mismatch(e, g, str.__eq__)
        return CheckResult(False, _difference(expected, got, _C_TOKEN, index, len(e), n_got))


KIND = CheckerKind("tokens", _no_params("tokens", TokensChecker), shape=_no_shape)
