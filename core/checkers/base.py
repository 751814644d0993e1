"""What every comparison kind shares: the result and checker types, ASCII whitespace and
tokens, numbers, block-wise reading and the failure detail.

One home for the rules core/checkers/__init__.py's docstring states for every kind (whitespace
is the judges' ASCII, numbers ASCII digits, case folding ASCII letters) and for the bounded
memory on any output shape: the kind modules (tokens.py, code_contests.py, floats.py,
real_tokens.py, exact_tokens.py, lines.py, lcb.py, sandboxfusion.py) import these and hold only their own rule.
The underscored names are the package's own helpers, shared by its kind modules, not an API;
tests that shrink the block sizes patch them here, where they are read.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cpfleet.core.errors import CheckerSpecError

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
# A kind's declaration: each kind module declares its ``KIND``, the registry (core/checkers/
# __init__.py) lists them in ``BUILTIN_KINDS``.

COMPARE, PROGRAM, INTERACTOR = "compare", "program", "interactor"
ShapeCheck = Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True, slots=True)
class CheckerKind:
    """A checker type a problem's ``checker`` may name.

    ``role``: ``compare`` (the factory's Checker compares in this process), ``program`` (the
    factory returns a ProgramSpec that sandbox/checker_programs/ runs confined after each
    test, by the protocol registered there under the same name) or ``interactor`` (a
    ProgramSpec that talks to the program, sandbox/interactive.py). ``shape``: the shape errors
    of a record's spec (``{"type": ..., ...}``) that the shared schema defines, without
    building it; None: only building it (the factory) tells."""

    name: str
    factory: CheckerFactory
    role: str = COMPARE
    shape: ShapeCheck | None = None


DESCRIPTIVE_KEYS = frozenset({"validation", "protocol", "description"})  # data only, never behaviour


def _no_params(name: str, cls: Callable[[], Checker]) -> CheckerFactory:
    def factory(params: Mapping[str, Any]) -> Checker:
        if params:
            raise CheckerSpecError(f"checker {name!r} takes no parameters, got {sorted(params)}")
        return cls()

    return factory


def _no_shape(chk: Mapping[str, Any]) -> list[str]:
    return []


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)



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
# A block ends at any separator of the tokeniser that splits it, never only at a space or a
# newline: one line of short tokens between tabs (or carriage returns, vertical tabs, form feeds)
# was otherwise one block, split at once into a string per token, ~25x the output in the judge
# (1.6 GB for 64 MiB). The form feed ends a block for the C tokenisers only: to the
# CodeContests tester it is part of a token, which a cut there would split in two.
_BLOCK_ENDS = {_C_TOKEN: re.compile(f"[{re.escape(_C_SPACE)}]"), _CC_TOKEN: re.compile("[ \t\n\r\v]")}
_STRIP_CHUNK = 1 << 16


def _blocks(text: str, pattern: re.Pattern[str] = _C_TOKEN) -> Iterator[tuple[int, int]]:
    """(start, end) of consecutive blocks of ``text`` of about ``_SPLIT_BLOCK`` characters, each
    ending at a separator of ``pattern``'s tokens (or the end): no token is cut."""
    block_end = _BLOCK_ENDS[pattern]
    start, n = 0, len(text)
    while start < n:
        cut = start + _SPLIT_BLOCK
        if cut >= n:
            cut = n
        else:
            sep = block_end.search(text, cut)
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
    for start, end in _blocks(text, pattern):
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


def _split_bounded(text: str, keep: int, tokens: Callable[[str], list[str]],
                   pattern: re.Pattern[str] = _C_TOKEN) -> tuple[list[str], int]:
    """The first ``keep`` tokens of ``text`` (all of them when fewer) and its total token count,
    holding one block's tokens at a time; ``tokens`` splits as ``pattern`` does."""
    if len(text) <= _SPLIT_BLOCK:
        toks = tokens(text)
        return toks[:keep] if len(toks) > keep else toks, len(toks)
    kept: list[str] = []
    count = 0
    for start, end in _blocks(text, pattern):
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
# one way to read each number: ``[0-9]+\.?[0-9]*`` reads "123" as any split of its digits, and a
# token of n digits followed by a letter made fullmatch try them all, time quadratic in n (in the
# worker, on a program's output token: 40k digits 20 s, 1 MB hours)
_REAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


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


# The exact arithmetic of the kinds that compare numbers as decimals (float, real_tokens): one
# context, independent of the thread's, with the widest exponent range; a value beyond even that
# (an exponent of ~10**18, which only a program's output can hold) raises there, and is a
# mismatch for its caller, never an error.
_DEC_CTX = decimal.Context(prec=200, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def _decimal(tok: str) -> decimal.Decimal | None:
    """The exact value of a number token (``_REAL``: ASCII decimal syntax, ``inf``/``nan``
    included), None for any other token. Decimal reads exactly what the regex admits, at any
    size (``1e999999`` is a finite Decimal, not a float overflow)."""
    if _REAL.fullmatch(tok) is None:
        return None
    try:
        return decimal.Decimal(tok)
    except decimal.DecimalException:  # an exponent past ~10**18: a word, equal only to itself
        return None


def _iter_tokens(text: str, tokens: Callable[[str], list[str]], pattern: re.Pattern[str] = _C_TOKEN) -> Iterator[str]:
    """The tokens of ``text`` (``tokens`` splits as ``pattern`` does), holding one block's tokens
    at a time."""
    for start, end in _blocks(text, pattern):
        yield from tokens(text[start:end])
