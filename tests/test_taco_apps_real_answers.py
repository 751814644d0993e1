"""TACO / APPS stdin answers that are real numbers are paid when printed with other digits, and
nothing their reference would refuse is paid.

TACO and APPS (hendrycks/apps ``eval/testing_util.py`` ``run_test``, which TACO, verl
``prime_code`` and rLLM reuse) pay ``0.5000000`` for ``0.5`` through ``np.allclose`` (relative
1e-5, absolute 1e-8), and their later fallbacks pay wrong answers (``1000001`` for ``1000000``,
permuted lines). ``tokens`` paid neither. ``real_tokens`` sits between: the answer's real
numbers within 1e-6 (and never beyond ``allclose``), integers and words exactly, the token
count and order as ``tokens``. The cases below are run through the checker, ``cpfleet
prepare`` of TACO, APPS, PrimeIntellect and DeepCoder rows, inline tests, and ``cpfleet judge``
(the pool of real workers) on a prepared problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cpfleet.cli import main as cpfleet_main
from cpfleet.core.checkers import get_checker
from cpfleet.core.problem import Problem
from cpfleet.core.records import record_errors
from cpfleet.datasets.prepare import PrepareOptions, prepare
from cpfleet.producer.inline import problem_from_tests

REAL = {"type": "real_tokens"}

# (expected, got, paid)
CASES = [
    ("0.5\n", "0.5000000\n", True),             # more digits of the same real
    ("0.333333333\n", "0.3333333\n", True),     # fewer digits, within 1e-6
    ("0.3333333333\n", "0.333333333\n", True),
    ("0.333333333\n", "0.334\n", False),        # a real beyond 1e-6
    ("123456.5\n", "123456.6\n", True),         # relative 1e-6 of a large value
    ("123456.5\n", "123456.7\n", False),
    ("0.0\n", "0.000001\n", False),             # absolute 1e-6 beyond allclose's 1e-8 at zero
    ("0.0\n", "0.000000001\n", True),
    ("1000000\n", "1000001\n", False),          # an integer answer is exact (allclose pays this)
    ("1\n", "1.0\n", False),
    ("1.0\n", "1\n", True),                     # an integer printed for a real: its value counts
    ("1\n2\n", "2\n1\n", False),                # permuted lines (the reference's set fallback pays them)
    ("1 2\n", "1\n2\n", True),                  # whitespace is whitespace, as for tokens
    ("0.5 YES\n", "0.5 yes\n", False),          # words exactly, case counts
    ("0.5\n", "0.5 0.5\n", False),              # the same count of tokens
    ("-0.0\n", "0\n", True),                    # negative zero is zero
    ("0.0\n", "-0.000000\n", True),
    ("1e-7\n", "0.0000001\n", True),            # exponents both ways
    ("100.0\n", "1e2\n", True),
    (".5\n", "0.5\n", True),                    # a bare leading or trailing point is a real
    ("5.\n", "5.000\n", True),
    ("2.5\n", "+2.5\n", True),                  # a leading plus, as printf's %+f prints it
    ("1e999999\n", "1e999999\n", True),         # past the float range: exact decimals, no overflow
    ("1e999999\n", "2e999999\n", False),
    ("0.5\n", "1e999999\n", False),
    ("0.5\n", "1e99999999999999999999999\n", False),  # past even Decimal's range: a word
    ("0.5\n", "nan\n", False),                  # NaN and infinities are never numbers that match
    ("0.5\n", "inf\n", False),
    ("nan\n", "NaN\n", False),                  # as answers they are words: their own text only
    ("inf\n", "inf\n", True),
    ("0.5\n", "0x1p-1\n", False),               # ASCII decimal syntax only
    ("0.5\n", "\u0660.5\n", False),
    ("1.5\n", "\u0661.\u0665\n", False),             # non-ASCII digits, though Decimal reads them
    ("1000.5\n", "1_000.5\n", False),           # digit separators, though Decimal and float read them
    ("0.5\n", ".\n", False),                   # a point, a sign and a point, two signs, a bare exponent
    ("-0.5\n", "-.\n", False),
    ("1.0\n", "+-1.0\n", False),
    ("1.0\n", "1e\n", False),
    ("0.5\n", "", False),                       # empty output
    ("", "", True),
    ("", "\n \n", True),
]


@pytest.mark.parametrize(("expected", "got", "paid"), CASES)
def test_real_tokens_pays_other_digits_of_a_real_answer_and_nothing_else(expected: str, got: str, paid: bool) -> None:
    assert get_checker(REAL).check(expected, got).ok is paid


def test_real_tokens_detail_names_the_token_and_the_rule() -> None:
    res = get_checker(REAL).check("3\n0.25 1000000\n", "3\n0.25 1000001\n")
    assert not res.ok
    assert res.detail.startswith("first difference at line 2: expected '0.25 1000000', got '0.25 1000001' (token 3")
    assert "integers and words must be equal as text" in res.detail


def test_real_tokens_takes_no_parameters() -> None:
    with pytest.raises(Exception, match="takes no parameters"):
        get_checker({"type": "real_tokens", "abs": 1e-3})


# --- through cpfleet prepare -------------------------------------------------------------------


def prepared(rows: list[dict[str, Any]], tmp_path: Path, name: str, **opts: Any) -> dict[str, dict[str, Any]]:
    import datasets

    src = tmp_path / name / "train.parquet"
    src.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows).to_parquet(str(src))
    out = tmp_path / f"{name}.jsonl"
    summary = prepare(str(src), out, PrepareOptions(**{"split": "train", **opts}), cache_dir=str(tmp_path / "hf"),
                      progress=False)
    assert summary.kept == len(rows), summary.lines()
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    for rec in recs:
        assert record_errors(rec) == [], rec["id"]
    return {r["id"]: r for r in recs}


# a / b to any precision, then a + b (an integer)
DIVIDE_TESTS = {"inputs": ["1 3\n", "1 2\n", "2000000 1\n"],
                "outputs": ["0.3333333333 4\n", "0.5 3\n", "2000000.0 2000001\n"]}
CALL_TESTS = {"fn_name": "half", "inputs": [[1], [3]], "outputs": [[0.5], [1.5]]}


def taco_row(io_: dict[str, Any], name: str) -> dict[str, Any]:
    return {"question": "Divide.", "solutions": "[]", "starter_code": "", "input_output": json.dumps(io_),
            "difficulty": "EASY", "raw_tags": "[]", "name": name, "source": "codeforces", "tags": "[]",
            "skill_types": "[]", "url": "u", "time_limit": "1 second", "memory_limit": "256 megabytes"}


def apps_row(io_: dict[str, Any], pid: int) -> dict[str, Any]:
    return {"problem_id": pid, "question": "Divide.", "solutions": "[]", "starter_code": "",
            "input_output": json.dumps(io_), "difficulty": "interview", "url": "u"}


def test_prepare_gives_taco_and_apps_stdin_rows_real_tokens_and_leaves_call_based_rows(tmp_path: Path) -> None:
    taco = prepared([taco_row(DIVIDE_TESTS, "div"), taco_row(CALL_TESTS, "half")], tmp_path, "taco")
    apps = prepared([apps_row(DIVIDE_TESTS, 1), apps_row(CALL_TESTS, 2)], tmp_path, "apps")
    for stdin, call in ((taco["taco/train/0"], taco["taco/train/1"]), (apps["apps/train/1"], apps["apps/train/2"])):
        assert stdin["checker"] == REAL and "fn_name" not in stdin
        assert Problem.from_dict(stdin).checker == REAL
        # function-call tests compare returned values by APPS's rules, as before
        assert "checker" not in call and (call["fn_name"], call["fn_semantics"]) == ("half", "apps")


def test_prepare_gives_primeintellect_and_deepcoder_stdin_stdout_rows_real_tokens(tmp_path: Path) -> None:
    stdio = [{"type": "stdin_stdout", "input": "1 2\n", "output": "0.5\n"}]
    pi = {"source": "apps", "task_type": "verifiable_code", "in_source_id": "x", "problem_id": "p1",
          "prompt": "p", "gold_standard_solution": "", "metadata": "{}",
          "verification_info": json.dumps({"language": "python", "test_cases": stdio})}
    assert prepared([pi], tmp_path, "pi")["primeintellect/p1"]["checker"] == REAL

    def dc(tests: Any) -> dict[str, Any]:
        return {"problem": "p", "tests": json.dumps(tests), "solutions": "[]", "starter_code": "", "metadata": "{}"}

    rows = [dc(DIVIDE_TESTS),                                                             # DeepCoder taco: TACO's dict
            dc([{"input": "1\n", "output": "0.5\n", "testtype": "stdin_stdout"}]),       # rLLM's label for TACO rows
            dc(stdio),                                                                   # its primeintellect rows
            dc({"language": "python", "test_cases": stdio}),
            dc([{"input": "1\n", "output": "0.5\n", "testtype": "stdin"}]),              # LiveCodeBench's: lcb
            dc([{"input": "1\n", "output": "0.5\n"}])]                                   # no label: the default
    recs = prepared(rows, tmp_path, "deepcoder", config="taco")
    checkers = [recs[f"deepcoder/taco/train/{i}"].get("checker") for i in range(len(rows))]
    assert checkers == [REAL, REAL, REAL, REAL, {"type": "lcb"}, None]


def test_inline_taco_apps_and_primeintellect_stdin_tests_get_real_tokens_unless_one_is_given() -> None:
    assert problem_from_tests(DIVIDE_TESTS)["checker"] == REAL
    assert problem_from_tests({"input_output": json.dumps(DIVIDE_TESTS)})["checker"] == REAL
    assert problem_from_tests({"test_cases": [{"type": "stdin_stdout", "input": "1\n", "output": "1\n"}]})["checker"] == REAL
    assert problem_from_tests(DIVIDE_TESTS, checker={"type": "tokens"})["checker"] == {"type": "tokens"}
    assert "checker" not in problem_from_tests(CALL_TESTS)


def test_a_prepared_problem_under_real_tokens_has_another_version_than_under_tokens(tmp_path: Path) -> None:
    # the result cache is keyed by the problem's version: a problem prepared before (no checker:
    # tokens) and re-prepared now must not share cached rewards
    rec = prepared([taco_row(DIVIDE_TESTS, "div")], tmp_path, "taco")["taco/train/0"]
    before = {k: v for k, v in rec.items() if k != "checker"}
    assert Problem.from_dict(rec).content_version() != Problem.from_dict(before).content_version()
    assert Problem.from_dict(before).content_version() == Problem.from_dict({**before, "checker": {"type": "tokens"}}).content_version()
    assert problem_from_tests(DIVIDE_TESTS)["id"] != problem_from_tests(DIVIDE_TESTS, checker={"type": "tokens"})["id"]


# --- judged end to end -------------------------------------------------------------------------


def py(code: str) -> str:
    return f"```python\n{code}\n```"


MORE_DIGITS = py("a, b = map(int, input().split())\nprint(f'{a / b:.9f} {a + b}')")
FEWER_DIGITS = py("a, b = map(int, input().split())\nprint(f'{a / b:.2f} {a + b}')")
SUM_AS_REAL = py("a, b = map(int, input().split())\nprint(f'{a / b:.9f} {float(a + b)}')")


def test_cpfleet_judge_pays_a_prepared_taco_problem_for_more_digits_and_nothing_for_wrong_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prepared([taco_row(DIVIDE_TESTS, "div")], tmp_path, "taco")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"problem_id": "taco/train/0", "completion": c, "job_id": j}) + "\n"
                            for j, c in (("more", MORE_DIGITS), ("fewer", FEWER_DIGITS), ("real-sum", SUM_AS_REAL))))
    rc = cpfleet_main(["judge", str(tmp_path / "taco.jsonl"), str(jobs), "--workers", "2", "--no-progress"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    by = {r["job_id"]: r for r in map(json.loads, out.out.splitlines())}
    assert (by["more"]["reward"], by["more"]["verdict"]) == (1.0, "OK")  # tokens refused "0.333333333 4"
    assert (by["fewer"]["reward"], by["fewer"]["verdict"]) == (0.0, "WRONG_ANSWER")  # 0.33 for 0.3333333333
    assert (by["real-sum"]["reward"], by["real-sum"]["verdict"]) == (0.0, "WRONG_ANSWER")  # 4.0 for the integer 4
    assert not any(r["infra_error"] for r in by.values())
