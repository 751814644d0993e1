"""Prepared problems judged end to end: dataset rows in LiveCodeBench, TACO, PrimeIntellect and
Kattis shape go through ``cpfleet prepare`` and then through the sandbox, where a reference
solution must earn 1.0 and a mutated one 0.0. This is what proves the conversion's semantics
(JSON-lines arguments, unwrapped TACO outputs, PrimeIntellect's plain values, Kattis flags),
not only its shapes.
"""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core.checkers import get_checker
from cpfleet.core.problem import Problem
from cpfleet.datasets.prepare import PrepareOptions, prepare
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner
from cpfleet.sandbox.runners import make_runner


@pytest.fixture(scope="module")
def runner() -> Iterator[CodeRunner]:
    r = make_runner("forkserver")
    yield r
    r.close()


def fenced(code: str) -> str:
    return f"```python\n{code.strip()}\n```\n"


def prepared(rows: list[dict[str, Any]], tmp_path: Path, name: str, **opts: Any) -> dict[str, Problem]:
    import datasets

    src = tmp_path / f"{name}.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(src))
    out = tmp_path / f"{name}.jsonl"
    summary = prepare(str(src), out, PrepareOptions(**opts), cache_dir=str(tmp_path / "hf"), progress=False)
    assert summary.kept == len(rows), summary.lines()
    return {p.id: p for p in map(Problem.from_dict, map(json.loads, out.read_text().splitlines()))}


def reward(problem: Problem, code: str, runner: CodeRunner) -> float | None:
    res = evaluate(problem, fenced(code), runner)
    assert not res.infra_error, res
    return res.reward


LCB_REFERENCE = """
class Solution:
    def findIntersectionValues(self, nums1: List[int], nums2: List[int]) -> List[int]:
        s1, s2 = set(nums1), set(nums2)
        return (sum(x in s2 for x in nums1), sum(x in s1 for x in nums2))
"""


def test_livecodebench_rows_judge_reference_one_and_mutated_zero(runner: CodeRunner, tmp_path: Path) -> None:
    public = [{"input": "[4, 3, 2, 3, 1]\n[2, 2, 5, 2, 3, 6]", "output": "[3, 4]", "testtype": "functional"}]
    private = [{"input": "[3, 4, 2, 3]\n[1, 5]", "output": "[0, 0]", "testtype": "functional"},
               {"input": "[1, 1]\n[1]", "output": "[2, 1]", "testtype": "functional"}]
    blob = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(private)))).decode()
    rows = [{"question_id": "2956", "question_title": "t", "question_content": "c", "platform": "leetcode",
             "starter_code": "class Solution:\n    def findIntersectionValues(self, nums1, nums2):\n        ",
             "public_test_cases": json.dumps(public), "private_test_cases": blob, "difficulty": "easy",
             "contest_id": "w", "contest_date": "2024-01-01", "metadata": json.dumps({"func_name": "findIntersectionValues"})}]
    problem = prepared(rows, tmp_path, "lcb")["lcb/2956"]
    assert reward(problem, LCB_REFERENCE, runner) == 1.0
    mutated = LCB_REFERENCE.replace("sum(x in s1 for x in nums2)", "sum(x in s1 for x in nums1)")
    assert reward(problem, mutated, runner) == 0.0


def test_taco_call_based_rows_judge_reference_one_and_mutated_zero(runner: CodeRunner, tmp_path: Path) -> None:
    io_ = {"fn_name": "pairs_sum", "inputs": [[[1, 2, 3], 4], [[0, 0], 0], [[5], 5]],
           "outputs": [[[[1, 3]]], [[[0, 0]]], [[]]]}
    rows = [{"question": "q", "solutions": "[]", "starter_code": "def pairs_sum(nums, target):", "input_output": json.dumps(io_),
             "difficulty": "EASY", "raw_tags": "[]", "name": "pairs", "source": "codewars", "tags": "[]",
             "skill_types": "[]", "url": "", "time_limit": None, "memory_limit": None}]
    problem = prepared(rows, tmp_path, "taco", split="train")["taco/train/0"]
    reference = """
def pairs_sum(nums, target):
    return [(a, b) for i, a in enumerate(nums) for b in nums[i + 1:] if a + b == target]
"""
    assert reward(problem, reference, runner) == 1.0
    assert reward(problem, reference.replace("nums[i + 1:]", "nums[i:]"), runner) == 0.0


def test_primeintellect_function_call_rows_judge_reference_one_and_mutated_zero(runner: CodeRunner, tmp_path: Path) -> None:
    cases = [{"type": "function_call", "fn_name": "majority", "input": [[3, 2, 3]], "output": 3},
             {"type": "function_call", "fn_name": "majority", "input": [[2, 2, 1, 1, 1, 2, 2]], "output": 2}]
    rows = [{"problem_id": "pi1", "in_source_id": "x", "source": "apps", "task_type": "verifiable_code", "prompt": "p",
             "gold_standard_solution": "", "metadata": "{}",
             "verification_info": json.dumps({"language": "python", "test_cases": cases})}]
    problem = prepared(rows, tmp_path, "pi", split="train")["primeintellect/pi1"]
    reference = "def majority(nums):\n    return max(set(nums), key=nums.count)\n"
    assert reward(problem, reference, runner) == 1.0
    assert reward(problem, "def majority(nums):\n    return min(set(nums), key=nums.count)\n", runner) == 0.0


def test_kattis_float_flags_package_judges_accepted_one_and_wrong_zero(runner: CodeRunner, tmp_path: Path) -> None:
    pkg = tmp_path / "contest" / "third"
    files = {
        "problem.yaml": "name: Third\nvalidator_flags: float_tolerance 1e-3\n",
        "data/sample/1.in": "1\n", "data/sample/1.ans": "0.333333\n",
        "data/secret/1.in": "2\n", "data/secret/1.ans": "0.666667\n",
        "data/secret/2.in": "30\n", "data/secret/2.ans": "10\n",
        "submissions/accepted/third.py": "print(int(input()) / 3)\n",
        "submissions/wrong_answer/rounded.py": "print(round(int(input()) / 3, 1))\n",
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    out = tmp_path / "k.jsonl"
    prepare(str(pkg), out, PrepareOptions(with_solutions=True), progress=False)
    rec = json.loads(out.read_text())
    get_checker(rec["checker"])  # the Kattis float flags build a checker (CheckerSpecError if not)
    problem = Problem.from_dict(rec)
    assert [reward(problem, s, runner) for s in problem.correct_solutions] == [1.0]
    assert [reward(problem, s, runner) for s in problem.incorrect_solutions] == [0.0]


def test_a_kattis_program_failing_only_a_sample_is_not_paid(runner: CodeRunner, tmp_path: Path) -> None:
    """Kattis, problemtools and DOMjudge accept a submission only when the samples pass too: the
    prepared problem's reward covers data/sample before data/secret, and a package stating no
    memory limit gets the judges' 2048 MiB, not the project's 512."""
    pkg = tmp_path / "contest" / "double"
    files = {
        "problem.yaml": "name: Double\n",
        "data/sample/1.in": "0\n", "data/sample/1.ans": "0\n",
        "data/secret/1.in": "2\n", "data/secret/1.ans": "4\n",
        "data/secret/2.in": "5\n", "data/secret/2.ans": "10\n",
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    out = tmp_path / "k.jsonl"
    prepare(str(pkg), out, PrepareOptions(), progress=False)
    rec = json.loads(out.read_text())
    assert (rec["memory_limit_mb"], rec["memory_limit_source"]) == (2048, "default")
    problem = Problem.from_dict(rec)
    assert [t.input for t in problem.hidden_tests] == ["0\n", "2\n", "5\n"]
    assert reward(problem, "n = int(input())\nprint(2 * n)\n", runner) == 1.0
    # right on every secret test, wrong on the sample: Kattis says WRONG_ANSWER
    res = evaluate(problem, fenced("n = int(input())\nprint(2 * n if n else 1)\n"), runner)
    assert (res.reward, str(res.verdict), res.infra_error) == (0.0, "WRONG_ANSWER", False)
