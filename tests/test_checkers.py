"""Checkers: accept exactly the right outputs, and say where a wrong one first differs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from cpfleet.core.checkers import (
    CheckerSpecError,
    CheckResult,
    CodeContestsChecker,
    FloatChecker,
    TokensChecker,
    get_checker,
    register_checker,
)
from cpfleet.core.problem import ProblemFormatError

tokens = TokensChecker()
cc = CodeContestsChecker()


# --- tokens ----------------------------------------------------------------------------------
def test_tokens_ignores_whitespace_layout() -> None:
    assert tokens.check("1 2\n3\n", "1   2 3").ok
    assert tokens.check("a\r\nb\r\n", "a\nb").ok


def test_tokens_rejects_an_extra_trailing_token() -> None:
    r = tokens.check("1 2", "1 2 3")
    assert not r.ok
    assert "expected end of output" in r.detail and "output has 3 tokens, expected 2" in r.detail


def test_tokens_rejects_a_missing_trailing_token() -> None:
    # never zip-truncate: a prefix of the answer is not the answer
    r = tokens.check("1 2 3\n4\n", "1 2 3\n")
    assert not r.ok
    assert "got end of output" in r.detail and "output has 3 tokens, expected 4" in r.detail


def test_tokens_is_not_a_set_comparison() -> None:
    assert not tokens.check("1 2 3", "3 2 1").ok
    assert not tokens.check("1 1 2", "1 2 2").ok


def test_tokens_is_case_sensitive_and_exact_on_numbers() -> None:
    assert not tokens.check("YES", "yes").ok
    assert not tokens.check("1", "1.0").ok


def test_tokens_empty_expected_accepts_only_blank_output() -> None:
    assert tokens.check("", "  \n").ok
    assert not tokens.check("", "0").ok


def test_tokens_detail_names_the_first_differing_line_and_token() -> None:
    r = tokens.check("1\n2 3\n4\n", "1\n2 5\n4\n")
    assert r == CheckResult(
        False, "first difference at line 2: expected '2 3', got '2 5' (token 3: expected '3', got '5')"
    )


# --- code_contests (official OutputsMatch) ---------------------------------------------------
def test_code_contests_is_case_insensitive() -> None:
    assert cc.check("YES\nNo\n", "yes\nNO").ok


def test_code_contests_real_matches_integer_within_tolerance() -> None:
    assert cc.check("1", "1.0").ok
    assert cc.check("1.0", "1").ok
    assert cc.check("2.5000000", "2.5").ok


@pytest.mark.parametrize(
    ("expected", "got", "ok"),
    [
        ("0.5", "0.500009", True),  # |diff| = 9e-6 < 1e-5
        ("0.5", "0.50001", True),  # in doubles 0.50001 - 0.5 = 9.99999999995e-06: the tester accepts
        ("0", "0.00001", False),  # |diff| == 1e-5 exactly: not strictly less
        ("0", "-0.00001", False),
        ("0.5", "0.500011", False),
        ("1e-6", "0", True),
        ("-3.141592", "-3.14159", True),
        ("100000", "1e5", True),  # "1e5" is a real: tolerance applies
    ],
)
def test_code_contests_tolerance_edges(expected: str, got: str, ok: bool) -> None:
    assert cc.check(expected, got).ok is ok


def test_code_contests_integers_are_exact_at_any_size() -> None:
    big = "123456789012345678901234567890"
    assert cc.check(big, big).ok
    assert not cc.check(big, big[:-1] + "1").ok  # the official tester's doubles would accept this
    assert cc.check("007 -0", "7 0").ok
    assert not cc.check("5", "6").ok


def test_code_contests_rejects_extra_or_missing_tokens() -> None:
    assert not cc.check("1 2", "1 2 3").ok
    assert not cc.check("1 2 3", "1 2").ok
    assert not cc.check("1.0 2.0", "1.0").ok


def test_code_contests_words_are_exact_after_lowercasing() -> None:
    assert not cc.check("abc", "abd").ok
    assert not cc.check("1a", "1").ok


def test_code_contests_nan_and_inf_never_match_pairwise() -> None:
    # identical token lists are accepted before any pairwise comparison (as the tester does) ...
    assert cc.check("nan", "nan").ok
    # ... but pairwise, NaN and infinities fail like IEEE doubles
    assert not cc.check("nan 1", "nan 2.0").ok
    assert not cc.check("inf 1", "inf 1.0").ok
    assert not cc.check("1.5", "nan").ok


def test_code_contests_splits_only_on_the_testers_whitespace() -> None:
    # \f is not a separator for the tester: "1\f2" is one token
    assert not cc.check("1 2", "1\f2").ok
    assert cc.check("1\t2\r\n\v3", "1 2 3").ok


def test_code_contests_lowercases_ascii_only() -> None:
    assert cc.check("ÄB", "Äb").ok
    assert not cc.check("Ä", "ä").ok


def test_code_contests_detail_points_at_the_first_numeric_difference() -> None:
    r = cc.check("1.0 2.0\n3.0\n", "1 2\n3.5\n")
    assert not r.ok
    assert r.detail.startswith("first difference at line 2: expected '3.0', got '3.5'")


# --- float -----------------------------------------------------------------------------------
def test_float_absolute_tolerance_is_inclusive_and_exact_in_decimal() -> None:
    f = FloatChecker(abs_tol=1e-6, rel_tol=0.0)
    assert f.check("0.1", "0.100001").ok  # exactly 1e-6 away: accepted (no binary rounding)
    assert not f.check("0.1", "0.1000011").ok


def test_float_relative_tolerance_scales_with_the_expected_value() -> None:
    f = FloatChecker(abs_tol=0.0, rel_tol=1e-6)
    assert f.check("1000000.0", "1000000.9").ok
    assert not f.check("1000000.0", "1000001.1").ok


def test_float_integers_are_exact() -> None:
    f = FloatChecker(abs_tol=0.5, rel_tol=0.5)
    assert not f.check("10", "11").ok
    assert f.check("10", "10.4").ok  # a real on one side: tolerance applies
    big = "98765432109876543210987654321"
    assert not f.check(big, big[:-1] + "2").ok


@pytest.mark.parametrize("tok", ["nan", "NaN", "inf", "-inf", "Infinity", "-nan"])
def test_float_nan_and_inf_match_only_themselves_as_in_testlib(tok: str) -> None:
    f = FloatChecker(abs_tol=1.0, rel_tol=1.0)
    assert f.check(tok, tok).ok and f.check(f"1.5 {tok}", f"1.5000001 {tok}").ok
    assert not f.check("1.0", tok).ok and not f.check(tok, "1.0").ok
    assert not f.check(tok, "1e400").ok  # a huge finite value is not an infinity


def test_float_non_finite_values_compare_by_value() -> None:
    f = FloatChecker(abs_tol=1.0, rel_tol=1.0)
    assert f.check("inf", "Infinity").ok and f.check("-INF", "-inf").ok and f.check("nan", "-NaN").ok
    assert not f.check("inf", "-inf").ok and not f.check("nan", "inf").ok


@pytest.mark.parametrize("got", ["1e9999999", "-1e9999999", "1e99999999999999999999999", "1.5e-9999999999"])
def test_float_output_with_an_enormous_exponent_is_wrong_never_an_error(got: str) -> None:
    f = FloatChecker()
    assert not f.check("1.5", got).ok
    assert f.check(got, got).ok  # the same token is the same value
    assert FloatChecker(abs_tol=0.0, rel_tol=1e-6).check("1e9999999", "1.0000000001e9999999").ok
    assert not FloatChecker(abs_tol=0.0, rel_tol=1e-6).check("1e9999999", "2e9999999").ok


def test_float_words_compare_exactly() -> None:
    f = FloatChecker()
    assert f.check("YES 0.5", "YES 0.5000001").ok
    assert not f.check("YES", "yes").ok
    assert not f.check("1.0", "one").ok


def test_float_token_count_must_match() -> None:
    f = FloatChecker()
    assert not f.check("1.0 2.0", "1.0").ok
    assert not f.check("1.0", "1.0 2.0").ok


# --- registry --------------------------------------------------------------------------------
def test_absent_checker_is_tokens() -> None:
    assert get_checker(None).name == "tokens"
    assert get_checker({}).name == "tokens"


def test_get_checker_builds_each_shipped_type() -> None:
    assert get_checker({"type": "code_contests"}).name == "code_contests"
    f = get_checker({"type": "float", "abs": 1e-3, "rel": 0})
    assert isinstance(f, FloatChecker) and f.check("1", "1.0009").ok and not f.check("1", "1.0011").ok


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "no_such_checker"},
        {"type": "float", "tol": 1e-6},
        {"type": "float", "abs": -1},
        {"type": "float", "abs": "small"},
        {"type": "float", "rel": float("nan")},
        {"type": "tokens", "case": "insensitive"},
        {"type": 3},
    ],
)
def test_bad_checker_specs_raise_a_problem_format_error(spec: dict[str, Any]) -> None:
    with pytest.raises(ProblemFormatError):
        get_checker(spec)


def test_unknown_checker_error_lists_the_known_ones() -> None:
    with pytest.raises(CheckerSpecError, match="unknown checker type 'nope'.*code_contests"):
        get_checker({"type": "nope"})


class _SortedLines:
    """A custom checker: the answer lines in any order (a multi-answer problem)."""

    name = "sorted_lines"

    def check(self, expected: str, got: str) -> CheckResult:
        ok = sorted(expected.split("\n")) == sorted(got.split("\n"))
        return CheckResult(ok, "" if ok else "lines differ")


def test_custom_checker_is_registered_and_used() -> None:
    seen: list[Mapping[str, Any]] = []

    def factory(params: Mapping[str, Any]) -> _SortedLines:
        seen.append(params)
        return _SortedLines()

    register_checker("test_sorted_lines", factory, replace=True)
    c = get_checker({"type": "test_sorted_lines", "strict": True})
    assert c.check("a\nb", "b\na").ok and not c.check("a\nb", "a\nc").ok
    assert seen == [{"strict": True}]
    with pytest.raises(ValueError, match="already registered"):
        register_checker("test_sorted_lines", factory)


@pytest.mark.parametrize("kind", ["tokens", "code_contests", "float"])
def test_difference_far_into_a_big_output_is_located_exactly(kind: str) -> None:
    expected = "\n".join(" ".join(str(i * 10 + j) for j in range(10)) for i in range(2000)) + "\n"
    got_lines = expected.split("\n")
    got_lines[1500] = got_lines[1500].replace("15003", "77777")
    r = get_checker({"type": kind}).check(expected, "\n".join(got_lines))
    assert not r.ok
    assert r.detail.startswith("first difference at line 1501: expected '15000 15001 15002 15003")
    assert "(token 15004: expected '15003', got '77777')" in r.detail
    assert get_checker({"type": kind}).check(expected, expected.replace("\n", " \n")).ok


def test_code_contests_identical_nan_tokens_still_fail_pairwise_in_big_outputs() -> None:
    expected = " ".join(["1"] * 9000 + ["nan"] + ["2"] * 10)
    assert not cc.check(expected, expected.replace("2", "2.0")).ok
    assert cc.check(expected.replace("nan", "7"), expected.replace("nan", "7").replace("2", "2.0")).ok
