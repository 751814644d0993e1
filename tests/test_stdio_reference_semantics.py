"""Stdin/stdout tests are compared as their dataset's reference compares them: LiveCodeBench's
by LiveCodeBench's ``grade_stdio``, CodeContests' by the official tester's rules, inline or
prepared alike.

LiveCodeBench (``lcb_runner/evaluation/testing_util.py`` ``grade_stdio``), and the trainers
that grade its rows with its code (rLLM for DeepCoder ``lcbv5``), strip both outputs, cut them
into lines and strip each line; the line counts must agree, and each pair of lines must be
equal as text or be all numbers that are equal as ``Decimal``. The default ``tokens`` checker
differs both ways: it pays ``1 2`` on one line for the answer ``1`` / ``2`` on two lines (the
reference pays nothing) and refuses ``0.50`` for ``0.5`` (the reference pays it). The cases
below are each decided by reading the reference's rules, and are run through the real paths:
the checker itself, ``cpfleet prepare`` of LiveCodeBench and DeepCoder rows, inline tests, and
the sandbox judging a prepared problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core.checkers import get_checker
from cpfleet.core.problem import Problem
from cpfleet.datasets.prepare import PrepareOptions, prepare
from cpfleet.producer.inline import problem_from_tests
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner
from cpfleet.sandbox.runners import make_runner

LCB = {"type": "lcb"}

# (expected, got, LiveCodeBench's verdict)
REFERENCE_CASES = [
    ("6\n", "6", True),                    # surrounding whitespace is stripped
    ("  3  \n", "3\n\n\n", True),
    ("1\r\n2\r\n", "1\n2\n", True),        # each line is stripped: CR goes
    ("0.5\n", "0.50\n", True),             # all-number lines compare as Decimal
    ("100\n", "1e2\n", True),
    ("1 2\n", "1   2\n", True),             # all numbers: the spacing inside does not count
    ("-0\n", "0\n", True),
    ("Infinity\n", "inf\n", True),          # Decimal reads both as infinity
    ("1\n2\n", "1 2\n", False),             # the line structure counts
    ("1 2\n", "1\n2\n", False),
    ("1\n\n2\n", "1\n2\n", False),          # an inner empty line is a line
    ("a b\n", "a  b\n", False),             # a line with a word is compared as text
    ("YES 1\n", "YES 1.0\n", False),
    ("YES\n", "yes\n", False),              # case counts
    ("0.5\n", "0.500001\n", False),         # no tolerance
    ("nan\n", "nan\n", True),               # equal text
    ("nan 1\n", "NaN 1\n", False),          # NaN never equals NaN as a number
    ("", "", True),
    ("", "\n \n", True),
    ("5\n", "", False),
]


@pytest.mark.parametrize(("expected", "got", "ok"), REFERENCE_CASES)
def test_lcb_checker_decides_as_livecodebench_grade_stdio(expected: str, got: str, ok: bool) -> None:
    assert get_checker(LCB).check(expected, got).ok is ok


def test_lcb_checker_names_the_line_that_differs() -> None:
    res = get_checker(LCB).check("1\nab\n3\n", "1\nac\n3\n")
    assert not res.ok
    assert res.detail.startswith("first difference at line 2: expected 'ab', got 'ac'")
    assert "2 lines, expected 1" in get_checker(LCB).check("1\n", "1\n2\n").detail


def test_lcb_checker_on_a_huge_output_of_empty_lines_stays_bounded() -> None:
    # millions of lines are counted, never split into a list
    assert not get_checker(LCB).check("1\n", "1" + " \n" * 5_000_000 + "2").ok


def test_lcb_checker_takes_no_parameters_and_is_not_a_value_checker() -> None:
    with pytest.raises(Exception, match="takes no parameters"):
        get_checker({"type": "lcb", "abs": 1e-6})
    rec = {"id": "x", "fn_name": "f", "checker": LCB, "hidden_tests": [{"input": "[1]", "output": "1"}]}
    with pytest.raises(Exception, match="lcb"):
        Problem.from_dict(rec)


# --- through cpfleet prepare -------------------------------------------------------------------


def prepared(rows: list[dict[str, Any]], tmp_path: Path, **opts: Any) -> dict[str, dict[str, Any]]:
    import datasets

    src = tmp_path / "rows.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(src))
    out = tmp_path / "out.jsonl"
    summary = prepare(str(src), out, PrepareOptions(**opts), cache_dir=str(tmp_path / "hf"), progress=False)
    assert summary.kept == len(rows), summary.lines()
    return {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}


def lcb_stdin_row(qid: str, cases: list[tuple[str, str]]) -> dict[str, Any]:
    tests = [{"input": i, "output": o, "testtype": "stdin"} for i, o in cases]
    return {"question_id": qid, "question_title": "t", "question_content": "c", "platform": "atcoder",
            "starter_code": "", "public_test_cases": json.dumps(tests[:1]), "private_test_cases": json.dumps(tests[1:]),
            "difficulty": "easy", "contest_id": "abc", "contest_date": "2024-01-01", "metadata": "{}"}


def test_prepare_livecodebench_stdin_rows_get_the_lcb_checker(tmp_path: Path) -> None:
    recs = prepared([lcb_stdin_row("abc1_a", [("2\n", "1\n2\n"), ("1\n", "0.5\n")])], tmp_path)
    rec = recs["lcb/abc1_a"]
    assert rec["checker"] == LCB
    assert Problem.from_dict(rec).checker == LCB


def test_prepare_deepcoder_lcbv5_stdin_rows_get_the_lcb_checker_and_taco_rows_real_tokens(tmp_path: Path) -> None:
    lcb_tests = [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    rllm_taco = [{"input": "1\n", "output": "1\n", "testtype": "stdin_stdout"}]
    rows = [{"problem": "p", "tests": json.dumps(lcb_tests), "solutions": "[]", "starter_code": "", "metadata": "{}"},
            {"problem": "p", "tests": json.dumps(rllm_taco), "solutions": "[]", "starter_code": "", "metadata": "{}"},
            {"problem": "p", "tests": json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]}), "solutions": "[]",
             "starter_code": "", "metadata": "{}"}]
    recs = prepared(rows, tmp_path, config="lcbv5", split="train")
    assert recs["deepcoder/lcbv5/train/0"]["checker"] == LCB
    # TACO's rows (rLLM's stdin_stdout label, TACO's own dict): TACO's comparison, narrowed
    # (tests/test_taco_apps_real_answers.py)
    assert recs["deepcoder/lcbv5/train/1"]["checker"] == {"type": "real_tokens"}
    assert recs["deepcoder/lcbv5/train/2"]["checker"] == {"type": "real_tokens"}


def test_inline_livecodebench_stdin_cases_get_the_lcb_checker_unless_one_is_given() -> None:
    cases = [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    assert problem_from_tests(cases)["checker"] == LCB
    assert problem_from_tests({"public_test_cases": json.dumps(cases), "private_test_cases": "[]"})["checker"] == LCB
    assert problem_from_tests(cases, checker={"type": "float"})["checker"] == {"type": "float"}
    assert problem_from_tests([{**cases[0], "testtype": "stdin_stdout"}])["checker"] == {"type": "real_tokens"}
    assert problem_from_tests([{"type": "stdin_stdout", "input": "1\n", "output": "1\n"}])["checker"] == {"type": "real_tokens"}
    # the checker is part of the id: the same tests under another checker are another problem
    assert problem_from_tests(cases)["id"] != problem_from_tests([{**cases[0], "testtype": "stdin_stdout"}])["id"]


# --- judged in the sandbox ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def runner() -> Iterator[CodeRunner]:
    r = make_runner("forkserver")
    yield r
    r.close()


def test_a_prepared_livecodebench_stdin_problem_pays_what_livecodebench_pays(runner: CodeRunner, tmp_path: Path) -> None:
    # print the numbers 1..n, one per line; the second test's answer is a half
    recs = prepared([lcb_stdin_row("abc2_a", [("2\n", "1\n2\n"), ("3\n", "1\n2\n3\n"), ("1\n", "0.5\n")])], tmp_path)
    problem = Problem.from_dict(recs["lcb/abc2_a"])

    def reward(code: str) -> float | None:
        res = evaluate(problem, f"```python\n{code}\n```\n", runner)
        assert not res.infra_error, res
        return res.reward

    right = "n = int(input())\nprint(*range(1, n + 1), sep='\\n') if n > 1 else print('0.50')"
    one_line = "n = int(input())\nprint(*range(1, n + 1)) if n > 1 else print(0.5)"
    assert reward(right) == 1.0      # tokens refused "0.50" for "0.5"; LiveCodeBench pays it
    assert reward(one_line) == 0.0   # tokens paid "1 2 3" for three lines; LiveCodeBench does not


def test_inline_code_contests_tests_get_the_checker_prepare_gives_the_dataset() -> None:
    # cpfleet prepare gives deepmind/code_contests rows the official tester's comparison; the
    # same tests sent inline must judge alike (case-insensitive, reals within 1e-5)
    row = {"public_tests": {"input": ["1\n"], "output": ["YES\n"]},
           "private_tests": {"input": ["2\n"], "output": ["0.5\n"]}, "generated_tests": None}
    for tests in (row, json.dumps(row), {"input": ["1\n"], "output": ["YES\n"]}):
        rec = problem_from_tests(tests)
        assert rec["checker"] == {"type": "code_contests"}
        assert get_checker(rec["checker"]).check("YES\n", "yes").ok


def test_a_prepared_and_an_inline_code_contests_problem_judge_alike(runner: CodeRunner, tmp_path: Path) -> None:
    row = {"name": "cc/yes", "description": "", "public_tests": {"input": ["1\n"], "output": ["YES\n"]},
           "private_tests": {"input": ["2\n"], "output": ["0.5\n"]}, "generated_tests": {"input": [], "output": []},
           "time_limit": None, "memory_limit_bytes": 0, "difficulty": 0, "solutions": None, "incorrect_solutions": None,
           "input_file": "", "output_file": ""}
    prepared_rec = prepared([row], tmp_path)["cc/yes"]
    inline_rec = problem_from_tests({k: row[k] for k in ("public_tests", "private_tests", "generated_tests")})
    code = "```python\nn = int(input())\nprint('yes' if n == 1 else '0.500000')\n```"
    for rec in (prepared_rec, inline_rec):
        res = evaluate(Problem.from_dict(rec), code, runner)
        assert (res.reward, res.infra_error) == (1.0, False), res
