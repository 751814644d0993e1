"""Output checkers: is the program's stdout an accepted answer for this test?

A problem names its checker in its ``checker`` field (``{"type": "tokens"}`` when absent). All
shipped checkers compare whitespace-separated tokens position by position and require the same
token count: never sets, never ``zip`` truncation (both accept wrong answers). On failure the
detail names the first differing line and token, because that is what the model sees next turn.

- ``tokens``: exact token equality (the seed's whitespace-normalised comparison).
- ``code_contests``: the official CodeContests tester's ``OutputsMatch`` (execution/
  tester_sandboxer.cc): tokens split on `` \\n\\t\\r\\v``, ASCII-lowercased; identical token lists
  match; otherwise, pairwise, a token that is not a number must be equal, two integers must be
  equal, and a pair where either is a real number matches when ``|a - b| < 1e-5`` (in doubles,
  so NaN and infinities never match pairwise). One deliberate difference: the tester parses
  integers into a 32-bit ``int`` and compares bigger ones as doubles (so two 20-digit integers
  that differ in the last digit "match" there); here integers of any size are compared exactly.
- ``float``: tokens; two integers exactly, a pair with a real number within ``abs`` or ``rel``
  (relative to the expected value; both default to 1e-6), computed exactly in decimal; NaN and
  infinities never match; words exactly (case-sensitive).

Custom checkers: ``register_checker("mine", factory)`` where ``factory(params) -> Checker`` gets
the spec without its ``type``; problems then say ``{"type": "mine", ...}``.
"""

from __future__ import annotations

import decimal
import json
import math
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cpfleet.core.errors import CheckerSpecError

DEFAULT_CHECKER = "tokens"
CODE_CONTESTS_TOLERANCE = 1e-5
_CLIP_LINE = 120


@dataclass(frozen=True, slots=True)
class CheckResult:
    ok: bool
    detail: str = ""  # on failure: "first difference at line k: expected ..., got ..." (+ the token)


class Checker(Protocol):
    """Compares one test's expected output with what the program printed."""

    name: str

    def check(self, expected: str, got: str) -> CheckResult: ...


CheckerFactory = Callable[[Mapping[str, Any]], Checker]


# ---------------------------------------------------------------------------------------------
# Tokenising with positions (only on the failure path: the accept path uses str.split)

_NON_SPACE = re.compile(r"\S+")
_CC_TOKEN = re.compile(r"[^ \n\t\r\v]+")
# characters str.split() treats as whitespace but the CodeContests tester does not
_PY_ONLY_SPACE = re.compile("[\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _clip(s: str, n: int = _CLIP_LINE) -> str:
    return s if len(s) <= n else s[:n] + "..."


def _line_of(text: str, pos: int) -> tuple[int, str]:
    """1-based line number and text of the line holding ``pos``."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start : len(text) if end < 0 else end]
    return text.count("\n", 0, pos) + 1, line.rstrip("\r")


def _nth_token_pos(text: str, pattern: re.Pattern[str], index: int) -> int | None:
    """Offset of the ``index``-th token, counting tokens line by line (fast on big outputs) and
    stopping there: only one line is ever copied, whatever the size of ``text``."""
    seen, offset = 0, 0
    fast = pattern is _NON_SPACE or _PY_ONLY_SPACE.search(text) is None  # then str.split counts alike
    while offset <= len(text):
        end = text.find("\n", offset)
        end = len(text) if end < 0 else end
        line = text[offset:end]
        n = len(line.split()) if fast else len(pattern.findall(line))
        if seen + n > index:
            for i, m in enumerate(pattern.finditer(line)):
                if seen + i == index:
                    return offset + m.start()
        seen += n
        offset = end + 1
    return None


# A program's output can be as large as the stdout cap (64 MiB); its token list would be ~10x
# that. Outputs are tokenised one block at a time, keeping only the tokens a comparison needs.
_SPLIT_BLOCK = 1 << 20
_BLOCK_END = re.compile("[ \n]")


def _split_bounded(text: str, keep: int, tokens: Callable[[str], list[str]] = str.split) -> tuple[list[str], int]:
    """The first ``keep`` tokens of ``text`` (all of them when fewer) and its total token count,
    holding one block's tokens at a time. Blocks end at a space or newline, which every
    tokeniser here treats as a separator, so no token is cut."""
    if len(text) <= _SPLIT_BLOCK:
        toks = tokens(text)
        return toks[:keep] if len(toks) > keep else toks, len(toks)
    kept: list[str] = []
    count, start = 0, 0
    while start < len(text):
        cut = start + _SPLIT_BLOCK
        if cut >= len(text):
            cut = len(text)
        else:
            sep = _BLOCK_END.search(text, cut)
            cut = len(text) if sep is None else sep.start()
        toks = tokens(text[start:cut])
        if len(kept) < keep:
            kept.extend(toks[: keep - len(kept)])
        count += len(toks)
        start = cut
    return kept, count


_BLOCK = 4096


def _first_mismatch(e: list[str], g: list[str], same: Callable[[str, str], bool], skip_equal: bool = True) -> int:
    """Index of the first pair ``same`` rejects (``min(len)`` if none); equal blocks are skipped at
    C speed when ``skip_equal`` (identical tokens always match then)."""
    n = min(len(e), len(g))
    for i in range(0, n, _BLOCK):
        j = min(n, i + _BLOCK)
        if skip_equal and e[i:j] == g[i:j]:
            continue
        for k in range(i, j):
            if not same(e[k], g[k]):
                return k
    return n


def _may_hold_non_finite(text: str) -> bool:
    """False when no token can be NaN or an infinity (identical tokens then always match).
    A substring test on the lowercased text: conservative and far faster than a regex."""
    low = text.lower()
    return "nan" in low or "inf" in low


def _difference(
    expected: str, got: str, pattern: re.Pattern[str], index: int, n_expected: int, n_got: int
) -> str:
    """Describe the first difference, at token ``index``, by line and by token."""
    e_pos = _nth_token_pos(expected, pattern, index) if index < n_expected else None
    g_pos = _nth_token_pos(got, pattern, index) if index < n_got else None
    if g_pos is not None:
        g_no, g_line = _line_of(got, g_pos)
        got_s = repr(_clip(g_line))
    else:
        g_no = got.rstrip().count("\n") + 2 if got.strip() else 1
        got_s = "end of output"
    if e_pos is not None:
        e_no, e_line = _line_of(expected, e_pos)
        exp_s = repr(_clip(e_line))
        if e_no != g_no:
            exp_s = f"(line {e_no}) " + exp_s
    else:
        exp_s = "end of output"
    head = f"first difference at line {g_no}: expected {exp_s}, got {got_s}"
    if e_pos is not None and g_pos is not None:
        e_tok = pattern.match(expected, e_pos)
        g_tok = pattern.match(got, g_pos)
        assert e_tok is not None and g_tok is not None
        return (
            f"{head} (token {index + 1}: expected {_clip(e_tok.group(), 40)!r}, "
            f"got {_clip(g_tok.group(), 40)!r})"
        )
    return f"{head} (output has {n_got} tokens, expected {n_expected})"


# ---------------------------------------------------------------------------------------------
# Numbers as the CodeContests tester (absl SimpleAtoi / SimpleAtod) sees them

_INT = re.compile(r"[+-]?\d+")
_REAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


def _int_key(tok: str) -> str:
    """Canonical text of an integer token (sign, no leading zeros), exact at any size."""
    neg = tok[0] == "-"
    digits = tok.lstrip("+-").lstrip("0") or "0"
    return ("-" if neg and digits != "0" else "") + digits


def _as_real(tok: str) -> float | None:
    if _REAL.fullmatch(tok) is None:
        return None
    try:
        return float(tok.lstrip("+"))
    except (ValueError, OverflowError):  # pragma: no cover - the regex admits only float() syntax
        return None


# ---------------------------------------------------------------------------------------------
# The shipped checkers


class TokensChecker:
    """Whitespace-token equality, case-sensitive: the seed's normalised comparison."""

    name = "tokens"

    def check(self, expected: str, got: str) -> CheckResult:
        if expected == got:
            return CheckResult(True)
        e = expected.split()
        g, n_got = _split_bounded(got, len(e) + 1)
        if e == g:
            return CheckResult(True)
        index = _first_mismatch(e, g, str.__eq__)
        return CheckResult(False, _difference(expected, got, _NON_SPACE, index, len(e), n_got))


class CodeContestsChecker:
    """The official CodeContests ``OutputsMatch`` (see the module docstring)."""

    name = "code_contests"

    @staticmethod
    def _tokens(text: str) -> list[str]:
        text = text.lower() if text.isascii() else text.translate(_ASCII_LOWER)
        if _PY_ONLY_SPACE.search(text) is None:
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
        x = float(a) if a_real is None else a_real
        y = float(b) if b_real is None else b_real
        return abs(x - y) < CODE_CONTESTS_TOLERANCE  # NaN/inf: False, as in doubles

    def check(self, expected: str, got: str) -> CheckResult:
        if expected == got:
            return CheckResult(True)
        e = self._tokens(expected)
        g, n_got = _split_bounded(got, len(e) + 1, self._tokens)
        if e == g:
            return CheckResult(True)
        exact = not (_may_hold_non_finite(expected) or _may_hold_non_finite(got))
        n = min(len(e), len(g))
        index = _first_mismatch(e, g, lambda a, b: (exact and a == b) or self.values_match(b, a), exact)
        if index == n and len(e) == n_got:
            return CheckResult(True)
        return CheckResult(False, _difference(expected, got, _CC_TOKEN, index, len(e), n_got))


class FloatChecker:
    """Tokens with numeric tolerance: |got - expected| <= max(abs, rel * |expected|), exactly."""

    name = "float"
    _ctx = decimal.Context(prec=200)

    def __init__(self, abs_tol: float = 1e-6, rel_tol: float = 1e-6) -> None:
        self.abs_tol = decimal.Decimal(repr(float(abs_tol)))
        self.rel_tol = decimal.Decimal(repr(float(rel_tol)))

    def _number(self, tok: str) -> decimal.Decimal | None:
        if _REAL.fullmatch(tok) is None:
            return None
        try:
            return decimal.Decimal(tok.lstrip("+"))
        except decimal.InvalidOperation:  # pragma: no cover - the regex admits only Decimal syntax
            return None

    def values_match(self, exp: str, got: str) -> bool:
        x, y = self._number(exp), self._number(got)
        if x is None or y is None:
            return exp == got and x is None and y is None  # words: exact; a word never equals a number
        if not (x.is_finite() and y.is_finite()):
            return False
        if _INT.fullmatch(exp) and _INT.fullmatch(got):
            return x == y
        diff = abs(self._ctx.subtract(x, y))
        return diff <= self.abs_tol or diff <= self._ctx.multiply(self.rel_tol, abs(x))

    def check(self, expected: str, got: str) -> CheckResult:
        exact = not (_may_hold_non_finite(expected) or _may_hold_non_finite(got))
        if exact and expected == got:
            return CheckResult(True)
        e = expected.split()
        g, n_got = _split_bounded(got, len(e) + 1)
        n = min(len(e), len(g))
        index = _first_mismatch(e, g, lambda a, b: (exact and a == b) or self.values_match(a, b), exact)
        if index == n and len(e) == n_got:
            return CheckResult(True)
        return CheckResult(False, _difference(expected, got, _NON_SPACE, index, len(e), n_got))


# ---------------------------------------------------------------------------------------------
# Registry


def _no_params(name: str, cls: Callable[[], Checker]) -> CheckerFactory:
    def factory(params: Mapping[str, Any]) -> Checker:
        if params:
            raise CheckerSpecError(f"checker {name!r} takes no parameters, got {sorted(params)}")
        return cls()

    return factory


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


_lock = threading.Lock()
_FACTORIES: dict[str, CheckerFactory] = {
    "tokens": _no_params("tokens", TokensChecker),
    "code_contests": _no_params("code_contests", CodeContestsChecker),
    "float": _float_factory,
}
_CACHE: dict[str, Checker] = {}


def register_checker(name: str, factory: CheckerFactory, *, replace: bool = False) -> None:
    """Make ``{"type": name, ...}`` usable in problems. ``factory`` validates its params (raise
    CheckerSpecError) and returns a stateless Checker, which is cached per distinct spec."""
    if not name or not isinstance(name, str):
        raise ValueError("a checker needs a non-empty name")
    with _lock:
        if name in _FACTORIES and not replace:
            raise ValueError(f"checker {name!r} is already registered (pass replace=True)")
        _FACTORIES[name] = factory
        for key in [k for k in _CACHE if json.loads(k)[0] == name]:
            del _CACHE[key]


def registered_checkers() -> list[str]:
    return sorted(_FACTORIES)


def get_checker(spec: Mapping[str, Any] | None) -> Checker:
    """The checker a problem's ``checker`` field names; CheckerSpecError when it cannot be built."""
    if spec is None:
        spec = {"type": DEFAULT_CHECKER}
    if not isinstance(spec, Mapping):
        raise CheckerSpecError(f"checker must be an object with a 'type', got {spec!r}")
    kind = spec.get("type", DEFAULT_CHECKER)
    params = {k: v for k, v in spec.items() if k != "type"}
    try:
        key = json.dumps([kind, params], sort_keys=True)
    except (TypeError, ValueError) as e:
        raise CheckerSpecError(f"checker spec is not plain JSON: {e}") from None
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    factory = _FACTORIES.get(kind) if isinstance(kind, str) else None
    if factory is None:
        raise CheckerSpecError(f"unknown checker type {kind!r} (known: {', '.join(registered_checkers())})")
    checker = factory(params)
    with _lock:
        _CACHE[key] = checker
    return checker
