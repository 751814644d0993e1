"""Dataset test shapes are read as each dataset means them, in ``cpfleet prepare`` and inline
tests alike (one reading, core/testshapes.py): the code_contests ``{"input": [str], "output":
[str]}`` one list item per test, a stdin/stdout side as text (never a null written as ``null``),
a case's kind label as given (a null ``testtype`` is none), and a malformed row is a skip reason
or an :class:`InlineProblemError`, never another exception."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core.errors import InlineProblemError
from cpfleet.datasets.formats import PrepareOptions
from cpfleet.datasets.formats.code_contests import convert_code_contests
from cpfleet.producer.inline import problem_from_tests


def test_a_single_test_written_without_its_list_is_refused_not_split_into_characters() -> None:
    # read a character at a time, this was the tests ("5", "6") and ("\n", "\n"): a correct
    # "print(int(input()) + 1)" failed on the second, and neither is the dataset's test
    with pytest.raises(InlineProblemError, match="one list item per test"):
        problem_from_tests({"input": "5\n", "output": "6\n"})
    with pytest.raises(InlineProblemError, match="one list item per test"):
        problem_from_tests({"public_tests": {"input": "12", "output": "21"},
                            "private_tests": {"input": ["12"], "output": ["21"]}})


def test_code_contests_rows_whose_tests_are_strings_are_skipped_not_split_into_characters() -> None:
    row = {"name": "rev", "public_tests": {"input": ["12\n"], "output": ["21\n"]},
           "private_tests": {"input": "12", "output": "21"}}
    rec = convert_code_contests(row, PrepareOptions(), Counter())
    assert isinstance(rec, str) and rec.startswith("malformed tests")


def test_code_contests_rows_keep_every_test_as_given() -> None:
    row = {"name": "p", "public_tests": {"input": ["1 2\r\n"], "output": ["3\n"]},
           "private_tests": {"input": ["a\n", ""], "output": ["b \n", ""]},
           "generated_tests": {"input": ["x"], "output": ["y"]}}
    rec = convert_code_contests(row, PrepareOptions(), Counter())
    assert isinstance(rec, dict)
    assert rec["public_tests"] == [{"input": "1 2\r\n", "output": "3\n"}]
    assert rec["hidden_tests"] == [{"input": "a\n", "output": "b \n"}, {"input": "", "output": ""},
                                   {"input": "x", "output": "y"}]


@pytest.mark.parametrize("bad", [
    {"time_limit": {"seconds": "abc"}},
    {"memory_limit_bytes": float("nan")},
    {"memory_limit_bytes": float("inf")},
    {"solutions": "print(1)"},
    {"solutions": [1, 2]},
    {"incorrect_solutions": {"language": 3, "solution": "x"}},
    {"private_tests": {"input": 5, "output": 6}},
])
def test_a_malformed_code_contests_column_is_a_skip_or_a_default_never_an_exception(bad: dict[str, Any]) -> None:
    row = {"name": "p", "public_tests": {"input": ["1\n"], "output": ["1\n"]},
           "private_tests": {"input": ["1\n"], "output": ["1\n"]}, **bad}
    rec = convert_code_contests(row, PrepareOptions(with_solutions=True), Counter())
    assert isinstance(rec, str | dict)


@pytest.mark.parametrize("kind", [{"a": 1}, ["stdin"], 3])
def test_a_test_type_that_is_not_a_name_is_an_inline_problem_error(kind: Any) -> None:
    with pytest.raises(InlineProblemError, match="test type"):
        problem_from_tests([{"input": "1\n", "output": "1\n", "testtype": kind}])


def test_a_code_contests_side_of_another_type_is_an_inline_problem_error() -> None:
    with pytest.raises(InlineProblemError):
        problem_from_tests({"input": 1, "output": True})


@pytest.mark.parametrize("side", [None, True, {"a": 1}])
def test_a_stdin_test_side_that_is_not_text_is_refused_not_written_as_json(side: Any) -> None:
    # ``null`` / ``true`` as an expected output: no reference pays anything there, but a program
    # printing the JSON word was paid here
    with pytest.raises(InlineProblemError, match="not text"):
        problem_from_tests({"inputs": ["1\n"], "outputs": [side]})
    with pytest.raises(InlineProblemError, match="not text"):
        problem_from_tests([{"input": "1\n", "output": side, "testtype": "stdin"}])


def test_a_stdin_test_side_that_is_a_number_is_its_text() -> None:
    assert problem_from_tests({"inputs": ["1\n"], "outputs": [5]})["hidden_tests"] == [{"input": "1\n", "output": "5"}]


def test_an_open_r1_generated_test_with_a_null_side_skips_its_problem_with_the_reason(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cpfleet.datasets.formats.codeforces import convert_codeforces

    pq.write_table(pa.table({"problem_id": ["1/A"], "input": ["1\n"], "output": [None], "test_case_i": [0]}),
                   tmp_path / "test_cases_0001.parquet")
    row = {"id": "1/A", "contest_id": 1, "official_tests": [{"input": "1\n", "output": "1\n"}], "generated_tests": 1}
    reason = convert_codeforces(row, 0, PrepareOptions(generated_tests=str(tmp_path)), Counter())
    assert reason == "generated tests: stdin/stdout test side is null, not text"


def test_a_null_testtype_beside_primeintellects_type_is_no_label() -> None:
    # a column of case objects read from Arrow / parquet holds every row's keys: a PrimeIntellect
    # function_call case mixed with LiveCodeBench rows comes with testtype None; read as "no
    # type", it was a stdin test with the arguments as lines, failing every correct function
    call = {"type": "function_call", "testtype": None, "fn_name": "f", "input": [1, 2], "output": 3, "metadata": None}
    rec = problem_from_tests([call])
    assert (rec["fn_name"], rec["fn_semantics"]) == ("f", "primeintellect")
    assert rec["hidden_tests"] == [{"input": "[1, 2]", "output": "3"}]
    stdin = {"type": "stdin_stdout", "testtype": None, "fn_name": None, "input": "1\n", "output": "2\n", "metadata": None}
    assert problem_from_tests([stdin])["checker"] == {"type": "real_tokens"}
