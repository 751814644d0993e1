"""Function-call problems: validating their tests and comparing a returned value (pure data).

A problem with ``fn_name`` is judged by calling that function (LeetCode, LiveCodeBench, TACO
and APPS call-based, PrimeIntellect ``function_call``, HumanEval style). Each test's ``input``
is the JSON list of positional arguments, its ``output`` the JSON of the expected return value
(plain, not wrapped in a one-element list as TACO stores it: the converters unwrap it). The
child's side, which calls the function inside the confined test child and writes the value
back as JSON, is sandbox/callharness.py; the expected value never leaves this process.

Comparison follows the reference harnesses (LiveCodeBench ``grade_call_based``: ``prediction ==
expected`` after a returned tuple becomes a list; TACO additionally accepts tuples nested in a
list) with Python's ``==`` on the JSON-decoded values: a tuple anywhere compares as a list (JSON
has only lists), ``True == 1`` and ``3 == 3.0`` as in Python, strings and ``None`` exactly, dicts
by their keys and values. Floats: exact unless the problem's checker states a tolerance
(``float``: ``abs``/``rel`` or the Kattis ``float_*`` flags; ``code_contests``: 1e-5 absolute),
then a pair where either side is a float matches within it. NaN never matches.
Integers too long for Python's default ``int`` parsing limit (4300 digits) are compared by
their canonical text, so a returned number of millions of digits costs the judge no more than
reading it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from cpfleet.core.problem import ProblemFormatError, TestCase

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHOW = 300  # characters of a value shown in a feedback line
VALUE_CHECKERS = frozenset({"tokens", "exact_tokens", "float", "code_contests"})


@dataclass(frozen=True, slots=True)
class Tolerance:
    """A float pair matches when ``|got - expected| <= abs`` or ``<= rel * |expected|``."""

    abs: float
    rel: float
    strict: bool = False  # code_contests: ``|a - b| < 1e-5``


class _BigInt:
    """An integer literal past Python's int-parsing limit, kept as canonical text."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        neg = text.startswith("-")
        digits = text.lstrip("+-").lstrip("0") or "0"
        self.text = ("-" if neg and digits != "0" else "") + digits

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BigInt) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return self.text


def _parse_int(text: str) -> int | _BigInt:
    return int(text) if len(text) <= 4000 else _BigInt(text)


def decode(text: str) -> Any:
    """JSON text -> Python value (NaN/Infinity accepted, huge integers as _BigInt)."""
    return json.loads(text, parse_int=_parse_int)


_EMPTY_CONTAINER = re.compile(r"[\[{]\s*[\]}]")
_COUNT_BLOCK = 1 << 18


def text_value_count(text: str) -> int:
    """How many values (scalars and containers; object keys not counted) the JSON ``text``
    holds, without building them: 1 for the root, one per comma and one per non-empty
    container outside strings. Read a block at a time with C-speed string operations (the
    quotes split a block into what is outside and inside strings, escapes removed first), so
    the memory is a block's pieces however many values there are; a container cut by a block
    boundary may be miscounted by one. Meaningless for text that is not JSON (the parse says so)."""
    bare = text.replace("\\\\", "").replace('\\"', "")
    commas = opens = empties = 0
    inside = False  # whether the block starts inside a string
    for start in range(0, len(bare), _COUNT_BLOCK):
        pieces = bare[start : start + _COUNT_BLOCK].split('"')
        outside = "0".join(pieces[1 if inside else 0 :: 2])  # "0" stands for each string
        if len(pieces) % 2 == 0:
            inside = not inside
        commas += outside.count(",")
        opens += outside.count("[") + outside.count("{")
        empties += _EMPTY_CONTAINER.subn("", outside)[1]
    return 1 + commas + opens - empties


def value_count(value: Any) -> int:
    """``text_value_count`` of ``value``'s JSON text, counted on the value."""
    n, todo = 0, [value]
    while todo:
        v = todo.pop()
        n += 1
        if isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())
    return n


_SURROGATE = re.compile("[\ud800-\udfff]")


def show(value: Any) -> str:
    """A value as the feedback shows it (JSON, clipped). A lone surrogate (a returned string, or
    JSON's ``"\\ud800"`` escape in the data) is shown as its escape: the feedback is sent and
    written as UTF-8, which cannot hold one."""
    try:
        text = json.dumps(value, default=repr, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    text = text if len(text) <= SHOW else text[:SHOW] + "..."
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def call_text(fn_name: str, args_json: str) -> str:
    """``twoSum([2, 7, 11, 15], 9)``: the call a test makes, for the feedback."""
    try:
        args = decode(args_json)
    except ValueError:
        return f"{fn_name}(<unreadable arguments>)"
    inner = ", ".join(show(a) for a in args) if isinstance(args, list) else show(args)
    text = f"{fn_name}({inner})"
    return text if len(text) <= 2 * SHOW else text[: 2 * SHOW] + "...)"


def tolerance_for(spec: Mapping[str, Any] | None) -> Tolerance | None:
    """The float tolerance a problem's checker states, for comparing returned values."""
    if not spec:
        return None
    kind = spec.get("type", "tokens")
    if kind == "code_contests":
        return Tolerance(1e-5, 0.0, strict=True)
    if kind != "float":
        return None
    from cpfleet.core.checkers import kattis_float_flags

    flags = kattis_float_flags(spec)
    if flags is not None:
        abs_tol, rel_tol = flags
        return Tolerance(max(abs_tol, 0.0) if abs_tol >= 0 else -1.0, rel_tol)
    return Tolerance(float(spec.get("abs", 1e-6)), float(spec.get("rel", 1e-6)))


def validate(pid: str, fn_name: Any, checker: Mapping[str, Any], tests: tuple[TestCase, ...]) -> str:
    """Raise ProblemFormatError unless this is a judgeable function-call problem."""
    if not isinstance(fn_name, str) or _IDENT.fullmatch(fn_name) is None:
        raise ProblemFormatError(f"{pid}: fn_name must be a Python identifier, got {fn_name!r}")
    kind = checker.get("type", "tokens")
    if kind not in VALUE_CHECKERS:
        raise ProblemFormatError(
            f"{pid}: a function-call problem compares returned values; checker {kind!r} is not "
            f"one of {sorted(VALUE_CHECKERS)}"
        )
    for i, t in enumerate(tests):
        args = _test_value(pid, i, "input", t.input)
        if not isinstance(args, list):
            raise ProblemFormatError(f"{pid}: test {i}: input must be a JSON list of positional arguments")
        _test_value(pid, i, "output", t.output)
    return fn_name


# How deep a test's JSON may nest. The judge decodes and compares values recursively, so a
# value nested near Python's recursion limit (1000) would fail there, far from its record;
# real call-based data (LeetCode trees and lists are serialized flat) stays far below this.
MAX_NESTING = 256


def _test_value(pid: str, i: int, side: str, text: str) -> Any:
    """One side of a function-call test decoded; ProblemFormatError unless it is JSON nested at
    most MAX_NESTING deep."""
    try:
        value = decode(text)
    except RecursionError:
        raise ProblemFormatError(f"{pid}: test {i}: {side} nests deeper than {MAX_NESTING} levels") from None
    except ValueError as e:
        raise ProblemFormatError(f"{pid}: test {i}: {side} is not JSON ({e})") from None
    if _nesting(value) > MAX_NESTING:
        raise ProblemFormatError(f"{pid}: test {i}: {side} nests deeper than {MAX_NESTING} levels")
    return value


def _nesting(value: Any) -> int:
    """How many containers deep ``value`` nests (0 for a scalar), counted without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, level = todo.pop()
        children = v if isinstance(v, list) else v.values() if isinstance(v, dict) else None
        if children is not None:
            deepest = max(deepest, level)
            todo.extend((c, level + 1) for c in children)
    return deepest


def _number(x: Any) -> bool:
    return isinstance(x, int | float | _BigInt)  # bool is an int, as in Python's ==


def _numbers_equal(e: Any, g: Any, tol: Tolerance | None) -> bool:
    if isinstance(e, _BigInt) or isinstance(g, _BigInt):
        if isinstance(e, _BigInt) and isinstance(g, _BigInt):
            return e == g
        big, other = (e, g) if isinstance(e, _BigInt) else (g, e)
        return isinstance(other, int) and not isinstance(other, bool) and big.text == str(other)
    if tol is not None and (isinstance(e, float) or isinstance(g, float)):
        if not all(math.isfinite(v) for v in (e, g) if isinstance(v, float)):
            # as the reference harnesses (Python ==, numpy's allclose): an infinity matches the
            # same infinity, NaN matches nothing
            return bool(e == g)
        diff: float | Fraction
        bound: float | Fraction
        try:
            diff, bound = abs(float(e) - float(g)), tol.rel * abs(float(e))
        except OverflowError:  # an int past the float range beside a float: exact rationals
            diff, bound = abs(Fraction(e) - Fraction(g)), Fraction(tol.rel) * abs(Fraction(e))
        if tol.strict:
            return diff < tol.abs
        return diff <= tol.abs or diff <= bound
    return bool(e == g)


def difference(expected: Any, got: Any, tol: Tolerance | None, path: str = "") -> str | None:
    """None when ``got`` equals ``expected``; else where and how they first differ."""
    here = path or "the value"
    if isinstance(expected, list):
        if not isinstance(got, list):
            return f"{here}: expected a list, got {show(got)}"
        if len(got) != len(expected):
            return f"{here}: expected {len(expected)} elements, got {len(got)}"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            d = difference(e, g, tol, f"{path}[{i}]")
            if d is not None:
                return d
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"{here}: expected an object, got {show(got)}"
        if set(got) != set(expected):
            missing = sorted(set(expected) - set(got))[:3]
            extra = sorted(set(got) - set(expected))[:3]
            return f"{here}: keys differ (missing {missing}, unexpected {extra})"
        for k in expected:
            d = difference(expected[k], got[k], tol, f"{path}[{json.dumps(k)}]")
            if d is not None:
                return d
        return None
    if _number(expected):
        if _number(got) and _numbers_equal(expected, got, tol):
            return None
    elif expected is None:
        if got is None:
            return None
    elif isinstance(expected, str):
        if isinstance(got, str) and got == expected:
            return None
    if not path:
        return f"expected {show(expected)}, got {show(got)}"
    return f"at {path}: expected {show(expected)}, got {show(got)}"
