"""Hostile outputs against the comparison checkers: tokens every reference judge rejects.

Python's own parsers are more generous than any judge: ``float()``, ``int()`` and
``Decimal()`` read any Unicode decimal digit (Arabic-Indic, full-width, mathematical bold),
``str.split()`` splits on Unicode and ASCII control separators (U+3000, NBSP, U+001C..U+001F,
U+0085), and ``str.lower()`` folds non-ASCII letters (the Kelvin sign is a ``k``). testlib reads
ASCII digits and splits on space, tab, CR and LF; the Kattis default validator uses C
``isspace``, ``sscanf`` and ``strcasecmp`` in the "C" locale; the CodeContests tester reads
ASCII numbers. A wrong-looking output a reference judge rejects must never be accepted here.
"""

from __future__ import annotations

from typing import Any

import pytest

from cpfleet.core.checkers import get_checker

SPECS: dict[str, dict[str, Any]] = {
    "tokens": {"type": "tokens"},
    "code_contests": {"type": "code_contests"},
    "float": {"type": "float"},
    "exact_tokens": {"type": "exact_tokens"},
    "kattis_float": {"type": "float", "float_tolerance": 1e-6},
    "lcb": {"type": "lcb"},
    "real_tokens": {"type": "real_tokens"},
}

# (expected, got): every reference judge rejects got
NON_ASCII_DIGITS = [
    ("1", "\u0661"),            # ARABIC-INDIC DIGIT ONE
    ("1", "\uff11"),            # FULLWIDTH DIGIT ONE
    ("1", "\U0001d7cf"),        # MATHEMATICAL BOLD DIGIT ONE
    ("1.5", "\u0661.\u0665"),
    ("1.0", "\u0661"),
    ("2.5", "\uff12.\uff15"),
    ("1", "\u0661.0"),
    ("10", "1e\u0661"),
]
PYTHON_ONLY_SEPARATORS = ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u1680", "\u2000", "\u2028", "\u3000"]


@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize(("expected", "got"), NON_ASCII_DIGITS)
def test_non_ascii_digits_are_never_numbers(kind: str, expected: str, got: str) -> None:
    assert not get_checker(SPECS[kind]).check(expected, got).ok


@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize("sep", PYTHON_ONLY_SEPARATORS)
def test_only_ascii_whitespace_separates_tokens(kind: str, sep: str) -> None:
    checker = get_checker(SPECS[kind])
    assert not checker.check("1 2\n", f"1{sep}2\n").ok
    assert not checker.check("1\n", f"1{sep}\n").ok  # not trailing space either: a token of its own
    assert checker.check("1 2\n", "1 \t2\r\n").ok


@pytest.mark.parametrize("kind", ["lines", "sandboxfusion"])
@pytest.mark.parametrize("sep", PYTHON_ONLY_SEPARATORS)
def test_line_kinds_strip_only_ascii_whitespace(kind: str, sep: str) -> None:
    # Python's strip() would take these for spaces; the line-wise kinds compare them as text
    checker = get_checker({"type": kind})
    assert not checker.check("1\n", f"1{sep}\n").ok
    assert not checker.check("1\n", f"{sep}1").ok
    assert checker.check("1 2\n", " 1 2\t\r\n\v").ok


def test_a_separator_inside_the_expected_output_is_part_of_a_token() -> None:
    # the answer file's own U+3000 is a character, as it is to testlib: the same bytes match
    for kind in SPECS:
        checker = get_checker(SPECS[kind])
        assert checker.check("a\u3000b\n", "a\u3000b").ok
        assert not checker.check("a\u3000b\n", "a b").ok


@pytest.mark.parametrize("kind", ["exact_tokens", "kattis_float", "code_contests", "sandboxfusion"])
@pytest.mark.parametrize(("expected", "got"), [("K", "\u212a"), ("k", "\u212a"), ("ohm", "\u2126hm"),
                                                ("i", "\u0130"), ("ss", "\u1e9e")])
def test_case_insensitive_kinds_fold_ascii_only(kind: str, expected: str, got: str) -> None:
    # strcasecmp / absl::AsciiStrToLower: the Kelvin sign is not a k
    spec = SPECS.get(kind, {"type": kind})
    assert not get_checker(spec).check(expected, got).ok
    assert get_checker(spec).check(expected, expected.upper()).ok


@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize("got", ["1_000", "\ufeff1000", "1000\x00", "1000abc", "1 000", "1e3x"])
def test_python_number_syntax_beyond_the_judges_is_wrong(kind: str, got: str) -> None:
    assert not get_checker(SPECS[kind]).check("1000\n", got).ok


# A token that looks like a number up to its last character (n digits, then a letter) cost every
# kind that reads numbers time quadratic in n: the number pattern read a run of digits in any
# split of it, and fullmatch tried them all. That ran in the worker, on the program's output,
# outside any sandbox limit: 40k digits 20 s per test, a 1 MB token hours. It is read once now.
@pytest.mark.parametrize("kind", [*sorted(SPECS), "sandboxfusion"])
@pytest.mark.parametrize("got", ["1" * 300_000 + "x", "1" * 300_000 + ".5x", "-" + "1" * 300_000 + "e5x"],
                         ids=["digits", "digits-point", "digits-exponent"])
def test_a_long_run_of_digits_that_is_no_number_is_a_wrong_answer_read_once(kind: str, got: str) -> None:
    checker = get_checker(SPECS.get(kind, {"type": kind}))
    assert not checker.check("1.5\n", got).ok
    assert checker.check("1.5\n", "1.5").ok


def test_an_integer_is_never_matched_by_a_real_that_is_only_its_double() -> None:
    # code_contests compares two integers exactly; an integer beside a real number is compared
    # with its exact value too: 10**18 - 1 and 1e18 are one double, and a wrong answer printed
    # as "%.1f" of a double was paid where the same answer printed as an integer was not
    cc = get_checker({"type": "code_contests"})
    assert not cc.check("999999999999999999\n", "1000000000000000000\n").ok
    assert not cc.check("999999999999999999\n", "1000000000000000000.0\n").ok
    assert not cc.check("999999999999999999\n", "1e18\n").ok
    assert not cc.check("1e18\n", "999999999999999999\n").ok
    assert not cc.check("5\n", "inf\n").ok and not cc.check("5\n", "nan\n").ok
    # the tester's tolerance still holds where the values are exact
    assert cc.check("1000000000000000000\n", "1e18\n").ok
    assert cc.check("5\n", "5.000001\n").ok and cc.check("5.000001\n", "5\n").ok
    assert not cc.check("5\n", "5.0001\n").ok


def test_sandboxfusion_pays_an_integer_answer_only_its_own_value_however_printed() -> None:
    # two integer lines are compared exactly; a real number beside an integer answer was matched
    # within relative 1e-5, so a wrong integer printed as "%.1f" was paid where printed plainly
    # it was not
    sf = get_checker({"type": "sandboxfusion"})
    assert not sf.check("1000000\n", "1000001\n").ok
    assert not sf.check("1000000\n", "1000001.0\n").ok
    assert not sf.check("123456789\n", "123456000.0\n").ok
    assert not sf.check("5\n", "inf\n").ok and not sf.check("5\n", "nan\n").ok
    # the same value in any number syntax, and a real answer within the tolerance, still match
    assert sf.check("1000000\n", "1000000.0\n").ok and sf.check("1000000\n", "1e6\n").ok
    assert sf.check("2.5\n", "2.50001\n").ok and sf.check("1e18\n", "999999999999999999\n").ok
