"""Comparison checkers: is the program's stdout an accepted answer, compared in this process?

The kinds a problem names in ``checker`` that compare text (``tokens``, ``code_contests``,
``float``, ``exact_tokens`` and ``float`` with Kattis ``validator_flags``; the line-wise kinds
``lines``, ``lcb`` and ``sandboxfusion`` are in core/line_comparisons.py, on the helpers here);
their rules are in core/checkers.py's docstring, the registry that names them. They live in one
module because they share the tokenising, block-wise reading (bounded memory on any output
shape) and the failure detail the model reads next turn: about 550 lines, over the ~500 a
module aims for.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any, Protocol

from cpfleet.core.errors import CheckerSpecError

CODE_CONTESTS_TOLERANCE = 1e-5
_CLIP_LINE = 120


@dataclass(frozen=True, slots=True)
class CheckResult:
    ok: bool
    detail: str = ""  # on failure: "first difference at line k: expected ..., got ..." (+ the token)


class Checker(Protocol):
    """Compares one test's expected output with what the program printed. ``got`` is the
    program's stdout decoded as UTF-8; bytes that are not UTF-8 arrive as U+DC80..U+DCFF
    (surrogateescape), equal to no character an expected output holds."""

    @property
    def name(self) -> str: ...

    def check(self, expected: str, got: str) -> CheckResult: ...


CheckerFactory = Callable[[Mapping[str, Any]], Checker]


# ---------------------------------------------------------------------------------------------
# Tokenising with positions (only on the failure path: the accept path uses str.split)

# Token separators are the judges' ASCII whitespace, never Python's: str.split() also splits on
# U+001C..U+001F, U+0085, NBSP, U+3000 and the other Unicode spaces, which testlib, the Kattis
# default validator (C isspace) and the CodeContests tester all read as part of a token, so
# "1\u30002" would pass for "1 2" here and fail there. str.split() stays the fast path, taken
# only when the text holds none of those characters.
_C_SPACE = " \t\n\v\f\r"  # C isspace in the "C" locale: tokens, float, the Kattis kinds
_C_TOKEN = re.compile(f"[^{re.escape(_C_SPACE)}]+")
_CC_TOKEN = re.compile(r"[^ \n\t\r\v]+")  # the CodeContests tester's separators (no form feed)
_PY_NOT_C_SPACE = re.compile("[\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_PY_NOT_CC_SPACE = re.compile("[\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_ASCII_EXTRA = {_C_TOKEN: "\x1c\x1d\x1e\x1f", _CC_TOKEN: "\x0c\x1c\x1d\x1e\x1f"}
_PY_EXTRA = {_C_TOKEN: _PY_NOT_C_SPACE, _CC_TOKEN: _PY_NOT_CC_SPACE}
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _splits_alike(text: str, pattern: re.Pattern[str]) -> bool:
    """True when ``text.split()`` cuts ``text`` exactly where ``pattern``'s tokens end: it holds
    no character only Python takes for a space (a few substring scans on ASCII text, far faster
    than the regex)."""
    if text.isascii():
        return not any(c in text for c in _ASCII_EXTRA[pattern])
    return _PY_EXTRA[pattern].search(text) is None


def _c_tokens(text: str) -> list[str]:
    """The tokens of ``text`` split on C whitespace (str.split() when that is the same)."""
    return text.split() if _splits_alike(text, _C_TOKEN) else _C_TOKEN.findall(text)


def _clip(s: str, n: int = _CLIP_LINE) -> str:
    return s if len(s) <= n else s[:n] + "..."


# A program's output can be as large as the stdout cap (64 MiB) and be one line or one token;
# its token list would be ~10x that, and one 'ab ab ...' line split at once ~20x. Everything
# here reads an output one block at a time, keeping only the tokens a comparison needs and
# copying at most a block or a clipped line, so the judge's memory is O(output), whatever its
# shape.
_SPLIT_BLOCK = 1 << 18
_BLOCK_END = re.compile("[ \n]")
_STRIP_CHUNK = 1 << 16


def _blocks(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of consecutive blocks of ``text`` of about ``_SPLIT_BLOCK`` characters, each
    ending at a space or a newline (or the end), which every tokeniser here treats as a
    separator: no token is cut."""
    start, n = 0, len(text)
    while start < n:
        cut = start + _SPLIT_BLOCK
        if cut >= n:
            cut = n
        else:
            sep = _BLOCK_END.search(text, cut)
            cut = n if sep is None else sep.start()
        yield start, cut
        start = cut


def _rstrip_end(text: str, start: int, end: int, chars: str | None = None) -> int:
    """``start + len(text[start:end].rstrip(chars))``, copying at most a small chunk at a time."""
    while end > start:
        lo = max(start, end - _STRIP_CHUNK)
        kept = len(text[lo:end].rstrip(chars))
        if kept:
            return lo + kept
        end = lo
    return start


def _line_of(text: str, pos: int) -> tuple[int, str]:
    """1-based line number of the line holding ``pos``, and that line (without trailing
    carriage returns) cut one character past the clip width: ``_clip`` of it is ``_clip`` of the
    whole line, and a 60 MB line is never copied."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    end = _rstrip_end(text, start, len(text) if end < 0 else end, "\r")
    return text.count("\n", 0, pos) + 1, text[start : min(end, start + _CLIP_LINE + 1)]


def _nth_token_pos(text: str, pattern: re.Pattern[str], index: int) -> int | None:
    """Offset of the ``index``-th token, counting tokens block by block (fast on big outputs)
    and stopping there: only one block is ever copied, whatever the size of ``text``."""
    seen = 0
    fast = _splits_alike(text, pattern)  # then str.split counts alike
    for start, end in _blocks(text):
        block = text[start:end]
        n = len(block.split()) if fast else len(pattern.findall(block))
        if seen + n > index:
            for i, m in enumerate(pattern.finditer(block)):
                if seen + i == index:
                    return start + m.start()
        seen += n
    return None


def _token_at(text: str, pattern: re.Pattern[str], pos: int, width: int = 40) -> str:
    """The token starting at ``pos``, cut one character past ``width`` (for ``_clip``)."""
    m = pattern.match(text, pos, min(len(text), pos + width + 1))
    assert m is not None
    return m.group()


def _split_bounded(text: str, keep: int, tokens: Callable[[str], list[str]] = str.split) -> tuple[list[str], int]:
    """The first ``keep`` tokens of ``text`` (all of them when fewer) and its total token count,
    holding one block's tokens at a time."""
    if len(text) <= _SPLIT_BLOCK:
        toks = tokens(text)
        return toks[:keep] if len(toks) > keep else toks, len(toks)
    kept: list[str] = []
    count = 0
    for start, end in _blocks(text):
        toks = tokens(text[start:end])
        if len(kept) < keep:
            kept.extend(toks[: keep - len(kept)])
        count += len(toks)
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
    A substring test on the lowercased text, one block at a time (blocks overlap by two
    characters, so no occurrence is cut): conservative and far faster than a regex."""
    for start in range(0, max(len(text), 1), _SPLIT_BLOCK):
        low = text[start : start + _SPLIT_BLOCK + 2].lower()
        if "nan" in low or "inf" in low:
            return True
    return False


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
        last = _rstrip_end(got, 0, len(got))  # the end of got.rstrip(), without the copy
        g_no = got.count("\n", 0, last) + 2 if last else 1
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
        e_tok = _token_at(expected, pattern, e_pos)
        g_tok = _token_at(got, pattern, g_pos)
        return f"{head} (token {index + 1}: expected {_clip(e_tok, 40)!r}, got {_clip(g_tok, 40)!r})"
    return f"{head} (output has {n_got} tokens, expected {n_expected})"


# ---------------------------------------------------------------------------------------------
# Numbers as the CodeContests tester (absl SimpleAtoi / SimpleAtod) sees them

# ASCII digits only: Python's int(), float() and Decimal() read any Unicode decimal digit
# ("\u0661" is 1 to them), no judge's parser does.
_INT = re.compile(r"[+-]?[0-9]+")
_REAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


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
    """Tokens with numeric tolerance: |got - expected| <= max(abs, rel * |expected|), exactly.

    Non-finite values follow testlib's ``doubleCompare``: NaN matches only NaN, an infinity only
    the infinity of the same sign (so an answer printed as ``inf`` or ``nan`` is accepted when
    it is the expected one). The arithmetic runs in one context with the widest exponent range
    and no dependence on the thread's context, and any value beyond even that (an exponent of
    ~10**18, which only a program's output can hold) is a mismatch, never an error."""

    name = "float"
    _ctx = decimal.Context(prec=200, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)

    def __init__(self, abs_tol: float = 1e-6, rel_tol: float = 1e-6) -> None:
        self.abs_tol = decimal.Decimal(repr(float(abs_tol)))
        self.rel_tol = decimal.Decimal(repr(float(rel_tol)))

    def _number(self, tok: str) -> decimal.Decimal | None:
        if _REAL.fullmatch(tok) is None:
            return None
        try:
            return decimal.Decimal(tok.lstrip("+"))  # the regex admits only Decimal syntax
        except decimal.DecimalException:  # an exponent past ~10**18: a word, equal only to itself
            return None

    def values_match(self, exp: str, got: str) -> bool:
        x, y = self._number(exp), self._number(got)
        if x is None or y is None:
            return exp == got and x is None and y is None  # words: exact; a word never equals a number
        if x.is_nan() or y.is_nan():
            return x.is_nan() and y.is_nan()
        if x.is_infinite() or y.is_infinite():
            return x == y
        if _INT.fullmatch(exp) and _INT.fullmatch(got):
            return x == y
        ctx = self._ctx
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


# ---------------------------------------------------------------------------------------------
# Kattis default validator semantics (validator_flags)

_C_SPACE_RUN = re.compile(f"[{re.escape(_C_SPACE)}]+")
_DEC_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
KATTIS_FLAG_KEYS = ("float_tolerance", "float_absolute_tolerance", "float_relative_tolerance",
                    "case_sensitive", "space_change_sensitive")


def parse_validator_flags(flags: Any) -> dict[str, Any]:
    """Kattis ``validator_flags`` (a string or a list of words) -> {flag: value}; unknown flags
    or a tolerance that is not a number raise CheckerSpecError, as the default validator's
    usage error would make every test a judging error."""
    if flags is None:
        return {}
    if isinstance(flags, str):
        words = flags.split()
    elif isinstance(flags, list) and all(isinstance(w, str) for w in flags):
        words = [w for f in flags for w in f.split()]
    else:
        raise CheckerSpecError(f"validator_flags must be a string or a list of strings, got {flags!r}")
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("case_sensitive", "space_change_sensitive"):
            out[w] = True
        elif w in ("float_tolerance", "float_absolute_tolerance", "float_relative_tolerance"):
            value = _as_real(words[i + 1]) if i + 1 < len(words) else None
            if value is None or not math.isfinite(value):
                raise CheckerSpecError(f"validator flag {w} needs a finite number after it")
            out[w] = value
            i += 1
        else:
            raise CheckerSpecError(f"unknown validator flag {w!r} (known: {', '.join(KATTIS_FLAG_KEYS)})")
        i += 1
    return out


def _kattis_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Flags from ``validator_flags`` and from same-named keys (the keys win)."""
    settings = parse_validator_flags(spec.get("validator_flags"))
    for key in KATTIS_FLAG_KEYS:
        if spec.get(key) is None:
            continue
        value = spec[key]
        if key in ("case_sensitive", "space_change_sensitive"):
            if not isinstance(value, bool):
                raise CheckerSpecError(f"{key} must be true or false, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise CheckerSpecError(f"{key} must be a finite number, got {value!r}")
        settings[key] = value
    return settings


def kattis_float_flags(spec: Mapping[str, Any]) -> tuple[float, float] | None:
    """(absolute, relative) tolerance of a ``float`` spec in Kattis form (-1 = that one off),
    None when the spec uses the plain ``abs``/``rel`` form."""
    if not any(spec.get(k) is not None for k in ("validator_flags", *KATTIS_FLAG_KEYS)):
        return None
    st = _kattis_settings(spec)
    abs_tol = float(st.get("float_absolute_tolerance", -1.0))
    rel_tol = float(st.get("float_relative_tolerance", -1.0))
    if "float_tolerance" in st:
        abs_tol = rel_tol = float(st["float_tolerance"])
    return abs_tol, rel_tol


class KattisTokensChecker:
    """The Kattis default output validator's comparison (see the module docstring)."""

    def __init__(self, name: str, *, case_sensitive: bool, space_change_sensitive: bool,
                 abs_tol: float = -1.0, rel_tol: float = -1.0) -> None:
        self.name = name
        self.case_sensitive = case_sensitive
        self.space_change_sensitive = space_change_sensitive
        self.abs_tol = abs_tol
        self.rel_tol = rel_tol
        self.use_floats = abs_tol >= 0 or rel_tol >= 0

    def tolerance_words(self) -> str:
        """The tolerances in force, for the feedback (a model must know how close is close enough)."""
        parts = [f"{what} {tol:g}" for what, tol in (("absolute", self.abs_tol), ("relative", self.rel_tol)) if tol >= 0]
        return "allowed: " + " or ".join(parts)

    @staticmethod
    def _float(tok: str) -> float | None:
        if _DEC_FLOAT.fullmatch(tok) is None:
            return None
        v = float(tok)
        return v if math.isfinite(v) else None

    def _same(self, judge: str, team: str) -> str | None:
        """None if the pair matches, else why not."""
        if self.use_floats:
            j = self._float(judge)
            if j is not None:
                t = self._float(team)
                if t is None:
                    return f"expected a float, got {_clip(team, 40)!r}"
                diff = abs(j - t)
                if diff <= self.abs_tol or diff <= self.rel_tol * abs(j):
                    return None
                return (f"too large difference: expected {_clip(judge, 40)}, got {_clip(team, 40)}"
                        f" ({self.tolerance_words()})")
        # strcasecmp in the "C" locale folds ASCII letters only (str.lower() makes the Kelvin
        # sign a k)
        if judge == team or (not self.case_sensitive and judge.translate(_ASCII_LOWER) == team.translate(_ASCII_LOWER)):
            return None
        return f"expected {_clip(judge, 40)!r}, got {_clip(team, 40)!r}"

    def check(self, expected: str, got: str) -> CheckResult:
        # Both texts are walked lazily (whitespace runs one match at a time, tokens one block at
        # a time), so an output of millions of tokens costs no list of them.
        if self.space_change_sensitive:
            # the whitespace runs, in order, must be the answer's exactly (leading and trailing
            # ones included); the first differing one in the common prefix is named
            runs = zip_longest(_C_SPACE_RUN.finditer(expected), _C_SPACE_RUN.finditer(got))
            runs_differ = False
            for i, (a, b) in enumerate(runs):
                if a is None or b is None:
                    runs_differ = True
                    break
                if a.group() != b.group():
                    return CheckResult(False, f"whitespace differs from the answer's at run {i + 1} (space_change_sensitive)")
        e_toks = _iter_tokens(expected, _C_TOKEN.findall)
        g_toks = _iter_tokens(got, _C_TOKEN.findall)
        n = 0
        for a, b in zip_longest(e_toks, g_toks):
            if a is None:
                assert b is not None
                return CheckResult(False, f"trailing output: {_clip(b, 40)!r}")
            if b is None:
                n_expected = n + 1 + sum(1 for _ in e_toks)
                return CheckResult(False, f"output ends after {n} tokens, expected {n_expected}")
            why = self._same(a, b)
            if why is not None:
                return CheckResult(False, f"token {n + 1}: {why}")
            n += 1
        if self.space_change_sensitive and runs_differ:
            return CheckResult(False, "whitespace differs from the answer's (space_change_sensitive)")
        return CheckResult(True)


def _iter_tokens(text: str, tokens: Callable[[str], list[str]]) -> Iterator[str]:
    """The tokens of ``text``, holding one block's tokens at a time."""
    for start, end in _blocks(text):
        yield from tokens(text[start:end])


DESCRIPTIVE_KEYS = frozenset({"validation", "protocol", "description"})  # data only, never behaviour


def _exact_factory(params: Mapping[str, Any]) -> Checker:
    unknown = set(params) - {"validator_flags", "case_sensitive", "space_change_sensitive"} - DESCRIPTIVE_KEYS
    if unknown:
        raise CheckerSpecError(f"checker 'exact_tokens': unknown parameters {sorted(unknown)}")
    st = _kattis_settings(params)
    if any(k.startswith("float") for k in st):
        raise CheckerSpecError("checker 'exact_tokens' takes no float tolerance: use type 'float'")
    return KattisTokensChecker("exact_tokens", case_sensitive=bool(st.get("case_sensitive", False)),
                               space_change_sensitive=bool(st.get("space_change_sensitive", False)))


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
