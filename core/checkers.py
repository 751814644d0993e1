"""Output checkers: is the program's stdout an accepted answer for this test?

A problem names its checker in its ``checker`` field (``{"type": "tokens"}`` when absent). All
shipped checkers compare whitespace-separated tokens position by position and require the same
token count: never sets, never ``zip`` truncation (both accept wrong answers). On failure the
detail names the first differing line and token, because that is what the model sees next turn.

- ``tokens``: exact token equality after splitting on whitespace.
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

- ``exact_tokens``: the Kattis default output validator (problemtools default_validator.cc):
  whitespace tokens compared case-insensitively unless ``case_sensitive`` is given, exactly as
  problemtools does (the jury's accepted submissions rely on it: an answer file saying ``NO``
  accepts ``no``); ``"case_sensitive": true`` (or the flag) makes case count,
  ``validator_flags`` honoured (``space_change_sensitive``: every run of whitespace, leading and
  trailing ones included, must be the answer's exactly).
- ``float`` with Kattis ``validator_flags`` (or the same names as keys: ``float_tolerance``,
  ``float_absolute_tolerance``, ``float_relative_tolerance``, ``case_sensitive``,
  ``space_change_sensitive``): the default validator's rules, without running a program: a
  token of the answer that parses as a finite float must be matched by a finite float within
  the absolute OR the relative tolerance (integers included, as there); other tokens compare
  as strings, case-insensitively unless ``case_sensitive``.
- Checker programs, specs validated here (so a bad one fails when the problem is loaded) and run
  by sandbox/checker_programs.py: ``testlib``, ``kattis_validator``, ``python`` (open-r1
  ``generated_checker``) and ``interactive`` (sandbox/interactive.py). See ``ProgramSpec``.

Every kind is one ``CheckerKind`` in the registry at the end of this module (``BUILTIN_KINDS``),
read by the loader, the record check of the converters (core/records.py) and the sandbox.
Custom checkers: ``register_checker("mine", factory)`` where ``factory(params) -> Checker`` gets
the spec without its ``type``; problems then say ``{"type": "mine", ...}``. A checker program
kind: ``register_checker("mine", program_factory("mine"), role=PROGRAM)`` plus its protocol in
sandbox/checker_programs.py (``register_protocol``); docs/ARCHITECTURE.md has the recipe.
"""

from __future__ import annotations

import decimal
import json
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any, Protocol

from cpfleet.core.errors import CheckerSpecError
from cpfleet.core.languages import FENCE_TAGS, checker_languages
from cpfleet.core.languages import info as language_info

DEFAULT_CHECKER = "tokens"
CODE_CONTESTS_TOLERANCE = 1e-5
_CLIP_LINE = 120


@dataclass(frozen=True, slots=True)
class CheckResult:
    ok: bool
    detail: str = ""  # on failure: "first difference at line k: expected ..., got ..." (+ the token)


class Checker(Protocol):
    """Compares one test's expected output with what the program printed."""

    @property
    def name(self) -> str: ...

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
    fast = pattern is _NON_SPACE or _PY_ONLY_SPACE.search(text) is None  # then str.split counts alike
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
    """Whitespace-token equality, case-sensitive: the comparison RL environments use by default."""

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
        e = expected.split()
        g, n_got = _split_bounded(got, len(e) + 1)
        n = min(len(e), len(g))
        index = _first_mismatch(e, g, lambda a, b: a == b or self.values_match(a, b))
        if index == n and len(e) == n_got:
            return CheckResult(True)
        return CheckResult(False, _difference(expected, got, _NON_SPACE, index, len(e), n_got) + self.tolerance_note())

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

_C_SPACE = " \t\n\v\f\r"  # C isspace in the "C" locale
_C_TOKEN = re.compile(f"[^{re.escape(_C_SPACE)}]+")
_C_SPACE_RUN = re.compile(f"[{re.escape(_C_SPACE)}]+")
_DEC_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
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
        if judge == team or (not self.case_sensitive and judge.lower() == team.lower()):
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


_DESCRIPTIVE = frozenset({"validation", "protocol", "description"})  # data only, never behaviour


def _exact_factory(params: Mapping[str, Any]) -> Checker:
    unknown = set(params) - {"validator_flags", "case_sensitive", "space_change_sensitive"} - _DESCRIPTIVE
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
        return _float_factory({k: v for k, v in params.items() if k not in _DESCRIPTIVE})
    unknown = set(params) - {"validator_flags", *KATTIS_FLAG_KEYS} - _DESCRIPTIVE
    if unknown:
        raise CheckerSpecError(f"checker 'float' with Kattis flags: unknown parameters {sorted(unknown)}")
    st = _kattis_settings(params)
    if flags == (-1.0, -1.0):
        raise CheckerSpecError("checker 'float' needs a tolerance (float_tolerance, float_absolute_tolerance or float_relative_tolerance)")
    return KattisTokensChecker("float", case_sensitive=bool(st.get("case_sensitive", False)),
                               space_change_sensitive=bool(st.get("space_change_sensitive", False)),
                               abs_tol=flags[0], rel_tol=flags[1])


# ---------------------------------------------------------------------------------------------
# Checker programs: the spec is validated here, the program is run by sandbox/checker_programs.py

# A Kattis program folder with its own ``build`` and/or ``run`` script (problemtools' BuildRun):
# ``build`` is run in a copy of the folder, then ``run`` is the program.
BUILD_RUN = "build_run"


def program_languages() -> tuple[str, ...]:
    """The ``language`` values a checker program may have: the languages core.languages marks
    for checker programs (``checker_source``), and ``build_run``."""
    return (*checker_languages(), BUILD_RUN)


def checker_language(stated: Any) -> str | None:
    """A checker spec's ``language`` as a program language (a fence tag such as ``python`` or
    ``c++`` names its language); None when checker programs cannot be in it."""
    if not isinstance(stated, str):
        return None
    name = FENCE_TAGS.get(stated.lower(), stated)
    return name if name in program_languages() else None
_MAX_PROGRAM_FILES = 64
_MAX_PROGRAM_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class ProgramSpec:
    """A checker or interactor program, as data from the problem record.

    ``kind``: testlib (``checker input output answer``; exit 0 OK, 1 WA, 2 PE, 4 extra output, 8
    unexpected end of output, 7 and 50 + k partial (``_pc(k)``, built with PC_BASE_EXIT_CODE=50);
    3 (FAIL) and anything else a checker failure), kattis_validator (``validator input answer feedback_dir
    [flags] < output``; 42 AC, 43 WA, anything else a failure), python (open-r1
    ``generated_checker``: ``python3 checker.py input.txt correct_output.txt
    solution_output.txt`` prints 1 to accept, 0 to reject; anything else or a non-zero exit is a
    checker failure) or interactive (the Kattis arguments, talking to the program over its
    stdin/stdout; ``protocol: "testlib"``: a testlib interactor, ``interactor input output``
    with testlib's exit codes).
    """

    kind: str
    files: tuple[tuple[str, str], ...]  # (relative path, source text)
    entry_points: tuple[str, ...]
    language: str
    flags: tuple[str, ...] = ()
    protocol: str = "kattis"  # or "testlib" (testlib interactors)
    time_limit_s: float = 10.0
    memory_limit_mb: int = 1024

    @property
    def name(self) -> str:
        return self.kind

    def check(self, expected: str, got: str) -> CheckResult:
        raise RuntimeError(f"checker {self.kind!r} is a program: sandbox/checker_programs.py runs it")

    def key(self) -> str:
        """Content hash: the compile cache's key (same sources, same binary)."""
        import hashlib

        h = hashlib.blake2b(digest_size=16)
        for part in (self.language, *self.entry_points, *(f"{p}\0{t}" for p, t in self.files)):
            h.update(part.encode("utf-8", errors="surrogatepass") + b"\1")
        return h.hexdigest()


def _safe_path(path: Any) -> str:
    if not isinstance(path, str) or not path or path.startswith("/") or "\0" in path:
        raise CheckerSpecError(f"checker file path must be a relative path, got {path!r}")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise CheckerSpecError(f"checker file path must not contain '', '.' or '..' parts: {path!r}")
    return path


def _build_run_script(files: Mapping[str, str]) -> str | None:
    """The program folder's ``build`` script (else its ``run`` script): the shallowest file of
    that name, so a folder's own script wins over one in a subfolder; None when neither exists."""
    for name in ("build", "run"):
        found = sorted((p for p in files if p.rsplit("/", 1)[-1] == name), key=lambda p: (p.count("/"), p))
        if found:
            return found[0]
    return None


def program_factory(kind: str) -> CheckerFactory:
    """The factory of a checker program kind: validates the spec (files, entry points, language,
    limits) and returns the ProgramSpec the sandbox runs by ``kind``'s protocol."""

    def factory(params: Mapping[str, Any]) -> Checker:
        allowed = {"files", "entry_points", "language", "source", "validator_flags", "protocol",
                   "time_limit_s", "memory_limit_mb"} | _DESCRIPTIVE
        unknown = set(params) - allowed
        if unknown:
            raise CheckerSpecError(f"checker {kind!r}: unknown parameters {sorted(unknown)}")
        default_lang = "python3" if kind == "python" else "cpp"
        stated = params.get("language") or default_lang
        language = checker_language(stated) or ""
        if not language:
            raise CheckerSpecError(f"checker {kind!r}: language must be one of {program_languages()}, got {stated!r}")
        raw_files = params.get("files")
        source = params.get("source")
        files: dict[str, str] = {}
        if raw_files is not None:
            if not isinstance(raw_files, dict) or not all(isinstance(v, str) for v in raw_files.values()):
                raise CheckerSpecError(f"checker {kind!r}: 'files' must map paths to source text")
            files = {_safe_path(p): v for p, v in raw_files.items()}
        entry = params.get("entry_points")
        script = _build_run_script(files)
        if script is not None and source is None and (language == BUILD_RUN or script.endswith("build")):
            # problemtools' rule: a program folder with a build script is built by it, whatever
            # its sources' languages; one with only a run script (language build_run) is run as is
            language, entry = BUILD_RUN, [script]
        elif language == BUILD_RUN:
            raise CheckerSpecError(f"checker {kind!r}: language build_run needs a 'build' or 'run' script in 'files'")
        if source is not None:
            if not isinstance(source, str) or not source.strip():
                raise CheckerSpecError(f"checker {kind!r}: 'source' must be non-empty source text")
            main = lang_info.checker_source if (lang_info := language_info(language)) else "checker.cpp"
            files[main] = source
            entry = entry or [main]
        if not files:
            raise CheckerSpecError(f"checker {kind!r} needs 'files' (+ 'entry_points') or 'source'")
        if len(files) > _MAX_PROGRAM_FILES or sum(len(v) for v in files.values()) > _MAX_PROGRAM_BYTES:
            raise CheckerSpecError(f"checker {kind!r}: too many or too large files")
        if entry is None:
            exts = lang_info.extensions if (lang_info := language_info(language)) else ()
            entry = [p for p in files if p.endswith(exts)]
            if len(entry) != 1:
                raise CheckerSpecError(f"checker {kind!r}: say which file is the entry point ('entry_points')")
        if not isinstance(entry, list) or not entry or not all(isinstance(e, str) and e in files for e in entry):
            raise CheckerSpecError(f"checker {kind!r}: entry_points must list files present in 'files', got {entry!r}")
        if language == "python3" and len(entry) != 1:
            raise CheckerSpecError(f"checker {kind!r}: a Python checker has exactly one entry point")
        flags = params.get("validator_flags")
        if flags is None:
            flag_words: tuple[str, ...] = ()
        elif isinstance(flags, str):
            flag_words = tuple(flags.split())
        elif isinstance(flags, list) and all(isinstance(f, str) for f in flags):
            flag_words = tuple(w for f in flags for w in f.split())
        else:
            raise CheckerSpecError(f"checker {kind!r}: validator_flags must be a string or a list of strings")
        protocol = "testlib" if (kind == "testlib" or params.get("protocol") == "testlib") else "kattis"
        if kind == "python":
            protocol = "open-r1"
        tl = params.get("time_limit_s", 10.0)
        ml = params.get("memory_limit_mb", 1024)
        if isinstance(tl, bool) or not isinstance(tl, int | float) or not (0 < tl <= 120):
            raise CheckerSpecError(f"checker {kind!r}: time_limit_s must be in (0, 120], got {tl!r}")
        if isinstance(ml, bool) or not isinstance(ml, int) or not (16 <= ml <= 16384):
            raise CheckerSpecError(f"checker {kind!r}: memory_limit_mb must be an integer in [16, 16384], got {ml!r}")
        return ProgramSpec(kind=kind, files=tuple(sorted(files.items())), entry_points=tuple(entry),
                           language=language, flags=flag_words, protocol=protocol,
                           time_limit_s=float(tl), memory_limit_mb=ml)

    return factory


# ---------------------------------------------------------------------------------------------
# The registry: one declaration per checker kind, read by the loader (get_checker), the record
# shape check (core/records.py: checker_errors), the converters and the sandbox (which kinds
# are programs, which one is an interactor).

COMPARE, PROGRAM, INTERACTOR = "compare", "program", "interactor"
ShapeCheck = Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True, slots=True)
class CheckerKind:
    """A checker type a problem's ``checker`` may name.

    ``role``: ``compare`` (the factory's Checker compares in this process), ``program`` (the
    factory returns a ProgramSpec that sandbox/checker_programs.py runs confined after each
    test, by the protocol registered there under the same name) or ``interactor`` (a
    ProgramSpec that talks to the program, sandbox/interactive.py). ``shape``: the shape errors
    of a record's spec (``{"type": ..., ...}``) that the shared schema defines, without
    building it; None: only building it (the factory) tells."""

    name: str
    factory: CheckerFactory
    role: str = COMPARE
    shape: ShapeCheck | None = None


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _files_shape(kind: str) -> ShapeCheck:
    def shape(chk: Mapping[str, Any]) -> list[str]:
        if kind == "testlib" and isinstance(chk.get("source"), str) and chk["source"]:
            return []
        errors: list[str] = []
        files = chk.get("files")
        if not isinstance(files, Mapping) or not files or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            return [f"checker {kind}: 'files' must be a non-empty {{path: source}}"]
        for path in files:
            if path.startswith("/") or ".." in path.split("/"):
                errors.append(f"checker {kind}: file path {path!r} escapes its folder")
        entry = chk.get("entry_points")
        if not isinstance(entry, list) or not entry or not all(isinstance(e, str) and e in files for e in entry):
            errors.append(f"checker {kind}: 'entry_points' must list files present in 'files'")
        if checker_language(chk.get("language")) is None:  # build_run: a folder with build/run scripts
            errors.append(f"checker {kind}: 'language' must be one of {', '.join(program_languages())}")
        flags = chk.get("validator_flags")
        if flags is not None and not isinstance(flags, str):
            errors.append(f"checker {kind}: 'validator_flags' must be a string or null")
        return errors

    return shape


def _python_shape(chk: Mapping[str, Any]) -> list[str]:
    src = chk.get("source")
    return [] if isinstance(src, str) and src.strip() else ["checker python: 'source' must be Python source"]


def _float_shape(chk: Mapping[str, Any]) -> list[str]:
    errors = [f"checker float: {k!r} must be a finite number"
              for k in ("abs", "rel", "float_tolerance", "float_absolute_tolerance", "float_relative_tolerance")
              if k in chk and not _is_num(chk[k])]
    flags = chk.get("validator_flags")
    if flags is not None and not isinstance(flags, str):
        errors.append("checker float: 'validator_flags' must be a string")
    return errors


def _no_shape(chk: Mapping[str, Any]) -> list[str]:
    return []


BUILTIN_KINDS: tuple[CheckerKind, ...] = (
    CheckerKind("tokens", _no_params("tokens", TokensChecker), shape=_no_shape),
    CheckerKind("code_contests", _no_params("code_contests", CodeContestsChecker), shape=_no_shape),
    CheckerKind("float", _float_or_kattis_factory, shape=_float_shape),
    CheckerKind("exact_tokens", _exact_factory, shape=_no_shape),
    CheckerKind("testlib", program_factory("testlib"), PROGRAM, _files_shape("testlib")),
    CheckerKind("kattis_validator", program_factory("kattis_validator"), PROGRAM, _files_shape("kattis_validator")),
    CheckerKind("python", program_factory("python"), PROGRAM, _python_shape),
    CheckerKind("interactive", program_factory("interactive"), INTERACTOR, _files_shape("interactive")),
)

_lock = threading.Lock()
_KINDS: dict[str, CheckerKind] = {k.name: k for k in BUILTIN_KINDS}
_CACHE: dict[str, Checker] = {}


def register_checker(name: str, factory: CheckerFactory, *, replace: bool = False, role: str = COMPARE,
                     shape: ShapeCheck | None = None) -> None:
    """Make ``{"type": name, ...}`` usable in problems, everywhere a problem is read (the
    loader, ``cpfleet prepare``'s and the inline problems' record check). ``factory`` validates
    its params (raise CheckerSpecError) and returns a stateless Checker, which is cached per
    distinct spec; with ``role="program"`` it returns a ProgramSpec of kind ``name``, run by the
    protocol ``cpfleet.sandbox.checker_programs.register_protocol`` binds to ``name``."""
    if not name or not isinstance(name, str):
        raise ValueError("a checker needs a non-empty name")
    if role not in (COMPARE, PROGRAM, INTERACTOR):
        raise ValueError(f"a checker's role is {COMPARE}, {PROGRAM} or {INTERACTOR}, got {role!r}")
    with _lock:
        if name in _KINDS and not replace:
            raise ValueError(f"checker {name!r} is already registered (pass replace=True)")
        _KINDS[name] = CheckerKind(name, factory, role, shape)
        for key in [k for k in _CACHE if json.loads(k)[0] == name]:
            del _CACHE[key]


def unregister_checker(name: str) -> None:
    """Remove a registered checker kind (tests register toy ones and take them back)."""
    with _lock:
        if name in {k.name for k in BUILTIN_KINDS}:
            raise ValueError(f"{name!r} is a built-in checker")
        _KINDS.pop(name, None)
        for key in [k for k in _CACHE if json.loads(k)[0] == name]:
            del _CACHE[key]


def registered_checkers() -> list[str]:
    return sorted(_KINDS)


def checker_kind(name: str) -> CheckerKind | None:
    return _KINDS.get(name)


def program_checkers() -> tuple[str, ...]:
    """The kinds that are programs run in the sandbox (output checkers and interactors)."""
    return tuple(n for n, k in _KINDS.items() if k.role != COMPARE)


def is_interactor(kind: str) -> bool:
    k = _KINDS.get(kind)
    return k is not None and k.role == INTERACTOR


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
    declared = _KINDS.get(kind) if isinstance(kind, str) else None
    if declared is None:
        raise CheckerSpecError(f"unknown checker type {kind!r} (known: {', '.join(registered_checkers())})")
    checker = declared.factory(params)
    with _lock:
        _CACHE[key] = checker
    return checker
