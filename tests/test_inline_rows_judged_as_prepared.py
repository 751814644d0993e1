"""A dataset row given whole as inline tests is the problem ``cpfleet prepare`` makes of it: the
same tests, checker and limits, by every inline route (``problem_from_tests``, the client's
inline registry that TRL, verl and the gateway's routes store through), so no route pays a
reward another refuses or judges a row under limits it does not state."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core.errors import InlineProblemError
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.datasets.formats import PrepareOptions
from cpfleet.datasets.prepare import PrepareSummary, convert_rows
from cpfleet.producer.inline import problem_from_tests
from cpfleet.producer.inline_registry import problem_record
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner
from cpfleet.sandbox.runners import make_runner

KATTIS = Path(os.environ.get("CPFLEET_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")) / (
    "icpc-kattis-31.jsonl.gz")
JUDGED = ("public_tests", "hidden_tests", "time_limit_s", "memory_limit_mb", "checker", "fn_name",
          "fn_semantics", "languages")


def code_contests_row(seconds: int = 1, nanos: int = 0, memory_bytes: int = 256 << 20) -> dict[str, Any]:
    """A deepmind/code_contests row as the dataset holds it (a + b)."""
    return {
        "name": "add",
        "description": "Print a + b.",
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["5 5\n"], "output": ["10\n"]},
        "generated_tests": {"input": ["7 8\n"], "output": ["15\n"]},
        "time_limit": {"seconds": seconds, "nanos": nanos},
        "memory_limit_bytes": memory_bytes,
        "input_file": "",
        "output_file": "",
        "solutions": {"language": [3], "solution": ["print(sum(map(int, input().split())))"]},
        "incorrect_solutions": {"language": [], "solution": []},
        "difficulty": 7,
    }


def prepared(row: Mapping[str, Any], fmt: str) -> dict[str, Any]:
    """The record ``cpfleet prepare`` writes for ``row`` (its whole row path: conversion, limits,
    admission)."""
    records = list(convert_rows([row], fmt, PrepareOptions(), PrepareSummary()))
    assert len(records) == 1, records
    return records[0]

def assert_skipped_by_prepare_and_refused_inline(row: Mapping[str, Any], fmt: str, reason: str) -> None:
    """``cpfleet prepare`` skips ``row`` for ``reason``, and every inline route refuses it so."""
    summary = PrepareSummary()
    assert list(convert_rows([row], fmt, PrepareOptions(), summary)) == []
    assert any(reason in skipped for skipped in summary.skipped), summary.skipped
    for route in (problem_from_tests, problem_record):
        with pytest.raises(InlineProblemError, match=reason):
            route(row)



def inline_routes(row: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The record each inline route makes of ``row``: as an object and as JSON text, directly and
    through the client's inline registry."""
    text = json.dumps(row)
    return {"problem_from_tests": problem_from_tests(row), "problem_from_tests(json)": problem_from_tests(text),
            "registry": problem_record(row), "registry(json)": problem_record(text)}


def judged(rec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: rec.get(k) for k in JUDGED}


@pytest.mark.parametrize(("seconds", "nanos", "memory_bytes", "limits"), [
    (1, 0, 256 << 20, (1.0, 256)),
    (2, 500_000_000, 64 << 20, (2.5, 64)),
    (0, 0, 0, (None, None)),  # states none: the project's defaults by both paths
])
def test_a_code_contests_row_inline_is_the_problem_prepare_makes(seconds: int, nanos: int, memory_bytes: int,
                                                                  limits: tuple[Any, Any]) -> None:
    row = code_contests_row(seconds, nanos, memory_bytes)
    want = judged(prepared(row, "code_contests"))
    assert (want["time_limit_s"], want["memory_limit_mb"]) == limits
    assert want["checker"] == {"type": "code_contests"}
    for route, rec in inline_routes(row).items():
        assert judged(rec) == want, route


def test_a_code_contests_row_stating_other_limits_is_another_problem() -> None:
    one, two = problem_from_tests(code_contests_row(1)), problem_from_tests(code_contests_row(2))
    assert one["id"] != two["id"]


def test_the_callers_limits_and_a_code_contests_rows_agree_or_are_refused() -> None:
    row = code_contests_row(1, memory_bytes=256 << 20)
    # the same limits, however given, are the same problem
    same = [problem_from_tests(row, time_limit_s=1.0, memory_limit_mb=256),
            problem_from_tests({"tests": row, "time_limit_s": 1, "memory_limit_mb": 256}),
            problem_from_tests({**row, "time_limit_s": 1.0})]
    assert {r["id"] for r in same} == {problem_from_tests(row)["id"]}
    # other ones: one of the two would be ignored in silence
    with pytest.raises(InlineProblemError, match="time_limit_s"):
        problem_from_tests(row, time_limit_s=2.0)
    with pytest.raises(InlineProblemError, match="memory_limit_mb"):
        problem_from_tests(row, memory_limit_mb=512)
    with pytest.raises(InlineProblemError, match="time_limit_s"):
        problem_from_tests({"tests": row, "time_limit_s": 6})
    with pytest.raises(InlineProblemError, match="time_limit_s"):
        problem_record({**row, "time_limit_s": 6})


@pytest.fixture(scope="module")
def fork_server() -> Iterator[CodeRunner]:
    r = make_runner("forkserver")
    yield r
    r.close()


# ~1.5 s of CPU, then the right answer: over a 1 s limit, within the project's 2 s default
SLOW_ADD = ("```python\nimport time\nwhile time.process_time() < 1.5:\n    pass\n"
            "print(sum(map(int, input().split())))\n```\n")


def test_a_code_contests_row_stating_1s_times_out_a_15s_program_inline_as_prepared(fork_server: CodeRunner) -> None:
    row = code_contests_row(1)
    for route, rec in {"prepare": prepared(row, "code_contests"), **inline_routes(row)}.items():
        r = evaluate(Problem.from_dict(rec), SLOW_ADD, fork_server, mode="public")
        assert (r.reward, r.verdict) == (0.0, Verdict.TIME_LIMIT), route


# --- a problem record passed as the tests ------------------------------------------------------

FLOAT_RECORD: dict[str, Any] = {
    "id": "third",
    "public_tests": [{"input": "3\n", "output": "0.333333\n"}],
    "hidden_tests": [{"input": "3\n", "output": "0.333333\n"}, {"input": "6\n", "output": "0.166667\n"}],
    "time_limit_s": 1.0,
    "memory_limit_mb": 256,
    "checker": {"type": "float", "abs": 1e-4, "rel": 1e-4},
    "languages": ["python3", "cpp"],
    "time_limit_multipliers": {"cpp": 0.5},
    "python3_interpreter": "pypy3",
}


def test_a_problem_record_passed_as_the_tests_keeps_what_it_is_judged_by() -> None:
    for route, rec in inline_routes(FLOAT_RECORD).items():
        for name in ("checker", "languages", "time_limit_multipliers", "python3_interpreter", "time_limit_s",
                     "memory_limit_mb"):
            assert rec.get(name) == FLOAT_RECORD[name], (route, name)
    # its own checker is what it is named by: the same tests under another are another problem
    assert problem_from_tests(FLOAT_RECORD)["id"] != problem_from_tests({**FLOAT_RECORD, "checker": None})["id"]
    assert problem_from_tests(FLOAT_RECORD, checker=FLOAT_RECORD["checker"])["id"] == problem_from_tests(
        FLOAT_RECORD)["id"]
    with pytest.raises(InlineProblemError, match="checker"):
        problem_from_tests(FLOAT_RECORD, checker={"type": "tokens"})
    with pytest.raises(InlineProblemError, match="languages"):
        problem_from_tests(FLOAT_RECORD, languages=["python3"])
    # inside the wrapper that states limits, too
    wrapped = problem_from_tests({"tests": {k: v for k, v in FLOAT_RECORD.items() if k != "time_limit_s"},
                                  "time_limit_s": 1.0})
    assert wrapped["id"] == problem_from_tests(FLOAT_RECORD)["id"]


def test_an_interactive_record_passed_as_the_tests_keeps_its_interactor() -> None:
    """Its tests hold no outputs: judged by the default checker, a program that printed nothing
    passed every one."""
    if not KATTIS.is_file():
        pytest.skip(f"shared data not found at {KATTIS} (set CPFLEET_SHARED_DATA)")
    with gzip.open(KATTIS, "rt") as f:
        records = [json.loads(line) for line in f if line.strip()]
    interactive = [r for r in records if r["checker"]["type"] == "interactive"]
    assert interactive and all(t["output"] == "" for t in interactive[0]["hidden_tests"])
    for record in records:
        for route, rec in inline_routes(record).items():
            for name in ("checker", "languages", "python3_interpreter", "time_limit_s", "memory_limit_mb"):
                assert rec.get(name) == record.get(name), (record["id"], route, name)


def test_a_float_record_passed_as_the_tests_pays_what_its_checker_pays(fork_server: CodeRunner) -> None:
    close = "```python\nprint(1 / int(input()))\n```\n"  # 0.3333333333333333: within 1e-4, not the same tokens
    rec = problem_from_tests({**FLOAT_RECORD, "python3_interpreter": None})
    r = evaluate(Problem.from_dict(rec), close, fork_server)
    assert (r.reward, r.verdict) == (1.0, Verdict.OK)


@pytest.mark.parametrize(("change", "reason"), [
    ({"input_file": "input.txt", "output_file": "output.txt"}, "named files"),
    ({"private_tests": {"input": [], "output": []}, "generated_tests": {"input": [], "output": []}}, "no hidden tests"),
    ({"private_tests": None, "generated_tests": None}, "no hidden tests"),
])
def test_a_code_contests_row_prepare_skips_is_refused_inline(change: dict[str, Any], reason: str) -> None:
    """A row whose program reads named files, or whose only tests are its public ones (the
    statement's examples, which a program can print without solving anything): prepare skips
    it, and no inline route pays a reward for it."""
    row = {**code_contests_row(), **change}
    assert_skipped_by_prepare_and_refused_inline(row, "code_contests", reason)


# --- a LiveCodeBench row: it states no limits; its grader gives every test 6 s ----------------

def lcb_row() -> dict[str, Any]:
    cases = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
             {"input": "5 5\n", "output": "10\n", "testtype": "stdin"}]
    return {"question_id": "abc1_a", "question_title": "add", "question_content": "Print a + b.",
            "platform": "atcoder", "contest_id": "abc1", "contest_date": "2024-01-01", "difficulty": "easy",
            "starter_code": "", "public_test_cases": json.dumps(cases[:1]),
            "private_test_cases": json.dumps(cases[1:]), "metadata": "{}"}


def test_a_livecodebench_row_inline_is_the_problem_prepare_makes() -> None:
    row = lcb_row()
    want = judged(prepared(row, "livecodebench"))
    assert want["time_limit_s"] == 6.0 and want["checker"] == {"type": "lcb"}
    for route, rec in inline_routes(row).items():
        assert judged(rec) == want, route
    # a limit given or stated is the problem's, as prepare's --time-limit is: the grader's is the default
    assert problem_from_tests(row, time_limit_s=2.0)["time_limit_s"] == 2.0
    assert problem_from_tests({"tests": row, "time_limit_s": 3})["time_limit_s"] == 3
    assert problem_from_tests({"tests": row, "memory_limit_mb": 1024})["time_limit_s"] == 6.0
    # its test cases alone name no dataset: no grader's limit is assumed for them
    assert problem_from_tests(json.loads(row["public_test_cases"]))["time_limit_s"] is None


# ~2.5 s of CPU, then the right answer: within LiveCodeBench's 6 s, over the project's 2 s default
SLOWER_ADD = SLOW_ADD.replace("1.5", "2.5")


def test_a_livecodebench_row_pays_a_25s_program_inline_as_prepared(fork_server: CodeRunner) -> None:
    row = lcb_row()
    for route, rec in {"prepare": prepared(row, "livecodebench"), "inline": problem_from_tests(row)}.items():
        r = evaluate(Problem.from_dict(rec), SLOWER_ADD, fork_server, mode="public")
        assert (r.reward, r.verdict) == (1.0, Verdict.OK), route


# --- a row's limit column that no shape of the tests reads ---------------------------------------

@pytest.mark.parametrize("tests", [
    {"inputs": ["1 2\n"], "outputs": ["3\n"], "time_limit": "1 second"},  # TACO's text beside its tests
    {"inputs": ["1 2\n"], "outputs": ["3\n"], "memory_limit": "64 megabytes"},
    {"input_output": {"inputs": ["1 2\n"], "outputs": ["3\n"], "time_limit": 1}},
    {"public_tests": [{"input": "1 2\n", "output": "3\n"}], "hidden_tests": [{"input": "1 2\n", "output": "3\n"}],
     "memory_limit_bytes": 64 << 20},
    {"tests": {"inputs": ["1 2\n"], "outputs": ["3\n"], "time_limit": 1}, "memory_limit_mb": 256},
    {"examples": [{"input": "1 2\n", "output": "3\n"}], "time_limit": 1.0},  # a codeforces row without its tests
])
def test_a_limit_in_a_column_no_shape_of_the_tests_reads_is_refused_not_dropped(tests: dict[str, Any]) -> None:
    for route in (problem_from_tests, problem_record):
        with pytest.raises(InlineProblemError, match="time_limit_s"):
            route(tests)


# --- a TACO / APPS row: limits as text; none stated, its grader's 4 s -----------------------------

def taco_row(time_limit: str | None = "1 second", memory_limit: str | None = "64 megabytes") -> dict[str, Any]:
    return {"question": "Print a + b.", "solutions": json.dumps(["print(sum(map(int, input().split())))"]),
            "starter_code": "", "input_output": json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]}),
            "difficulty": "EASY", "raw_tags": "[]", "name": None, "source": "codeforces", "tags": "[]",
            "skill_types": "[]", "url": "https://codeforces.com/problemset/problem/1/A",
            "Expected Auxiliary Space": None, "time_limit": time_limit, "date": None, "picture_num": None,
            "memory_limit": memory_limit, "Expected Time Complexity": None}


def apps_call_row() -> dict[str, Any]:
    return {"problem_id": 7, "question": "Return a + b.", "solutions": "[]", "difficulty": "introductory",
            "url": "https://leetcode.com/problems/add", "starter_code": "def add(a, b):\n",
            "input_output": json.dumps({"fn_name": "add", "inputs": [[1, 2], [5, 5]], "outputs": [[3], [10]]})}


@pytest.mark.parametrize(("row", "fmt", "limits"), [
    (taco_row(), "taco", (1.0, 64)),
    (taco_row("2.5 seconds", None), "taco", (2.5, None)),
    (taco_row(None, "256 megabytes"), "taco", (4.0, 256)),  # no time limit stated: TACO's run_test's 4 s
    (apps_call_row(), "apps", (4.0, None)),
])
def test_a_taco_or_apps_row_inline_is_the_problem_prepare_makes(row: dict[str, Any], fmt: str,
                                                                limits: tuple[Any, Any]) -> None:
    want = judged(prepared(row, fmt))
    assert (want["time_limit_s"], want["memory_limit_mb"]) == limits
    for route, rec in inline_routes(row).items():
        assert judged(rec) == want, route
    if row.get("time_limit"):  # stated: a caller's other limit is an error
        with pytest.raises(InlineProblemError, match="time_limit_s"):
            problem_from_tests(row, time_limit_s=9.0)
    else:  # the grader's is the default, as prepare's --time-limit overrides it
        assert problem_from_tests(row, time_limit_s=9.0)["time_limit_s"] == 9.0
    # its input_output column alone cannot say what its row states: no grader's limit is assumed
    assert problem_from_tests({"input_output": row["input_output"]})["time_limit_s"] is None


def test_a_taco_row_stating_1s_times_out_a_15s_program_inline_as_prepared(fork_server: CodeRunner) -> None:
    row = taco_row()
    for route, rec in {"prepare": prepared(row, "taco"), "inline": problem_from_tests(row)}.items():
        r = evaluate(Problem.from_dict(rec), SLOW_ADD, fork_server, mode="public")
        assert (r.reward, r.verdict) == (0.0, Verdict.TIME_LIMIT), route


# --- a PrimeIntellect row: verification_info beside its other columns --------------------------

def pi_row(language: str = "python", cases: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    cases = cases or [{"type": "stdin_stdout", "input": "1 2\n", "output": "3\n"},
                      {"type": "stdin_stdout", "input": "5 5\n", "output": "10\n"}]
    return {"source": "codeforces", "task_type": "verifiable_code", "in_source_id": "1_A", "problem_id": "pi_1",
            "prompt": "Print a + b.", "gold_standard_solution": "```python\nprint(sum(map(int, input().split())))\n```",
            "verification_info": json.dumps({"language": language, "test_cases": cases}), "metadata": "{}", **extra}


CALL_CASES = [{"type": "function_call", "fn_name": "add", "input": [1, 2], "output": 3},
              {"type": "function_call", "fn_name": "add", "input": [5, 5], "output": 10}]


@pytest.mark.parametrize("row", [pi_row(), pi_row("cpp"), pi_row(cases=CALL_CASES)])
def test_a_primeintellect_row_inline_is_the_problem_prepare_makes(row: dict[str, Any]) -> None:
    want = judged(prepared(row, "primeintellect"))
    for route, rec in inline_routes(row).items():
        assert judged(rec) == want, route


@pytest.mark.parametrize(("row", "reason"), [
    (pi_row("rust"), "rust"),
    (pi_row(task_type="llm_judgeable_groundtruth_similarity"), "verifiable_code"),
])
def test_a_primeintellect_row_prepare_skips_is_refused_inline(row: dict[str, Any], reason: str) -> None:
    assert_skipped_by_prepare_and_refused_inline(row, "primeintellect", reason)


def test_limits_stated_inside_a_whole_rows_tests_column_are_read() -> None:
    info = {"language": "python", "test_cases": [{"type": "stdin_stdout", "input": "1 2\n", "output": "3\n"}],
            "time_limit_s": 3}
    assert problem_from_tests({**pi_row(), "verification_info": info})["time_limit_s"] == 3
    io_ = {"inputs": ["1 2\n"], "outputs": ["3\n"], "memory_limit_mb": 128}
    assert problem_from_tests({**taco_row(memory_limit=None), "input_output": io_})["memory_limit_mb"] == 128
    with pytest.raises(InlineProblemError, match="memory_limit_mb"):  # the row's own 64 MB and 128 inside
        problem_from_tests({**taco_row(), "input_output": io_})


# --- a DeepCoder row: tests beside problem; its grader (rLLM's) gives every test 6 s -----------

def deepcoder_row(tests: Any, metadata: Any = None) -> dict[str, Any]:
    return {"problem": "Add two numbers.", "solutions": "[]", "starter_code": "",
            "tests": json.dumps(tests), "metadata": json.dumps(metadata or {})}


DEEPCODER_ROWS = [
    deepcoder_row([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
                   {"input": "5 5\n", "output": "10\n", "testtype": "stdin"}]),
    deepcoder_row([{"input": "1 2\n", "output": "3\n", "testtype": "stdin_stdout"}]),
    deepcoder_row([{"input": "1\n2", "output": "3", "testtype": "functional"}], {"func_name": "add"}),
    deepcoder_row({"inputs": [[1, 2]], "outputs": [[3]]}, {"func_name": "add"}),
    deepcoder_row(CALL_CASES),  # PrimeIntellect's cases: judged through TACO's run_test, as rLLM does
]


@pytest.mark.parametrize("row", DEEPCODER_ROWS)
def test_a_deepcoder_row_inline_is_the_problem_prepare_makes(row: dict[str, Any]) -> None:
    want = judged(prepared(row, "deepcoder"))
    assert want["time_limit_s"] == 6.0
    for route, rec in inline_routes(row).items():
        assert judged(rec) == want, route
    assert problem_from_tests(row, time_limit_s=2.0)["time_limit_s"] == 2.0  # given: the grader's is the default


# --- an open-r1/codeforces row: limits as numbers, its generated checker ------------------------

def codeforces_row(**change: Any) -> dict[str, Any]:
    return {"id": "1/A", "contest_id": 1, "index": "A", "title": "Add", "description": "Print a + b.",
            "input_format": "a b", "output_format": "a + b", "note": None, "rating": 800, "tags": ["math"],
            "time_limit": 1.0, "memory_limit": 64.0, "input_mode": "stdio", "interaction_format": None,
            "examples": [{"input": "1 2\n", "output": "3\n"}],
            "official_tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}],
            "official_tests_complete": True, "generated_tests": 0, "executable": True,
            "generated_checker": None, **change}


CHECKER = "import sys\nprint(1)\n"


@pytest.mark.parametrize("row", [
    codeforces_row(),
    codeforces_row(generated_checker=CHECKER, language="python", time_limit=2.5, memory_limit=None),
    codeforces_row(examples=[], time_limit=None),
])
def test_a_codeforces_row_inline_is_the_problem_prepare_makes(row: dict[str, Any]) -> None:
    want = judged(prepared(row, "codeforces"))
    for route, rec in inline_routes(row).items():
        assert judged(rec) == want, route
    if row["generated_checker"]:
        assert want["checker"] == {"type": "python", "source": CHECKER}
        with pytest.raises(InlineProblemError, match="checker"):
            problem_from_tests(row, checker={"type": "tokens"})
    if row["time_limit"]:
        with pytest.raises(InlineProblemError, match="time_limit_s"):
            problem_from_tests(row, time_limit_s=9.0)


@pytest.mark.parametrize(("change", "reason"), [
    ({"interaction_format": "Interact with the jury."}, "interactive"),
    ({"input_mode": "file"}, "named files"),
])
def test_a_codeforces_row_prepare_skips_is_refused_inline(change: dict[str, Any], reason: str) -> None:
    row = codeforces_row(**change)
    assert_skipped_by_prepare_and_refused_inline(row, "codeforces", reason)


def test_a_codeforces_row_stating_1s_times_out_a_15s_program_inline_as_prepared(fork_server: CodeRunner) -> None:
    row = codeforces_row()
    for route, rec in {"prepare": prepared(row, "codeforces"), "inline": problem_from_tests(row)}.items():
        r = evaluate(Problem.from_dict(rec), SLOW_ADD, fork_server, mode="public")
        assert (r.reward, r.verdict) == (0.0, Verdict.TIME_LIMIT), route


def test_only_a_row_with_its_datasets_columns_is_read_as_the_row() -> None:
    io_ = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    # the column with a key of no TACO column beside it is no row: refused, not read with the key ignored
    with pytest.raises(InlineProblemError, match="unrecognised"):
        problem_from_tests({"input_output": io_, "fn_name": "add"})
    # TACO's columns without its time_limit column may have left the row's limit behind: no
    # grader's 4 s is assumed for them
    assert problem_from_tests({"input_output": io_, "question": "q"})["time_limit_s"] is None
    assert problem_from_tests({"input_output": io_, "question": "q", "time_limit": None})["time_limit_s"] == 4.0


@pytest.mark.parametrize("row", [codeforces_row(time_limit=True, memory_limit=True),
                                 codeforces_row(time_limit=False, memory_limit=False)])
def test_a_bool_in_a_rows_limit_column_states_no_limit(row: dict[str, Any]) -> None:
    # a bool is no number of seconds or MB, as code_contests's limits already read it (True was 1 s)
    want = judged(prepared(row, "codeforces"))
    assert (want["time_limit_s"], want["memory_limit_mb"]) == (None, None), want
    for route, rec in inline_routes(row).items():
        assert judged(rec) == want, route
