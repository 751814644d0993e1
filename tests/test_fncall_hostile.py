"""Hostile function-call programs (``fn_name``) against the judge's side of the typed value
transport, through ``cpfleet.judge_locally`` (the path the worker and ``cpfleet judge`` take).
The child writes whatever it likes on its result channel (it can replace ``json.dumps`` or
write the fd itself); the judge reading it back must answer with the program's verdict, at a
cost bounded by the text's size, never an INTERNAL and never a reward it did not earn."""

from __future__ import annotations

import json

import pytest

import cpfleet
from cpfleet.core.problem import Problem, ProblemFormatError
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.runner import CodeRunner

N = 100_000  # elements of the expected value: the budget lets a returned value hold twice as many
ZEROS = Problem.from_dict({"id": "zeros", "fn_name": "zeros", "fn_semantics": "apps",
                           "public_tests": [{"input": "[]", "output": json.dumps([[0] * N])}]})


def judge(problem: Problem, code: str, runner: CodeRunner) -> cpfleet.JobResult:
    result = cpfleet.judge_locally(problem, f"```python\n{code}\n```", runner, mode="public")
    assert not result.infra_error, result.infra_message
    return result


# Members that share one hash cost Python's set and dict a probe of every earlier one: ints
# equal modulo 2**61 - 1 all hash alike, so 200k of them held the judge's process ~12 minutes
# (60k dict keys: 40 s) in one C call that not even the worker's soft time limit interrupts,
# for a value the program wrote in milliseconds by replacing json.dumps (the harness's encoder).
COLLIDING = """
import json
P = (1 << 61) - 1
TEXT = '{"\\\\u0000%s": [' + ",".join(%s for k in range(%d)) + ']}'
json.dumps = lambda *args, **kwargs: TEXT
def zeros():
    return []
"""


@pytest.mark.parametrize(("tag", "member", "count"), [("s", "str(k * P)", 2 * N), ("f", "str(k * P)", 2 * N),
                                                     ("d", "'[%d, 0]' % (k * P)", 3 * N // 5)],
                         ids=["set", "frozenset", "dict"])
def test_members_that_share_one_hash_are_a_wrong_answer_not_a_stalled_judge(
        runner: CodeRunner, tag: str, member: str, count: int) -> None:
    result = judge(ZEROS, COLLIDING % (tag, member, count), runner)
    assert (result.verdict, result.reward) == (Verdict.WRONG_ANSWER, 0.0)
    assert "share a hash" in result.observation


def test_a_set_of_distinct_members_is_read_back_as_a_set(runner: CodeRunner) -> None:
    problem = Problem.from_dict({"id": "pairs", "fn_name": "pairs",
                                 "public_tests": [{"input": "[]", "output": "[[1, 2]]"}]})
    result = judge(problem, "def pairs():\n    return {(1, 2), -1, -2, 0, (1 << 61) - 1}", runner)
    assert result.verdict == Verdict.WRONG_ANSWER
    assert "expected a list, got a set" in result.observation


# The same keys in a dataset: APPS/TACO give a dict of integers' text int keys (the expected
# output in the judge, the first argument in the test child), so 50k keys equal modulo
# 2**61 - 1 held the judge ~35 s every test of every job (or ran the program out of its time
# limit): refused when the problem is loaded.
COLLIDING_KEYS = json.dumps({str(k * ((1 << 61) - 1)): 0 for k in range(50_000)})


@pytest.mark.parametrize("side", ["input", "output"])
def test_integer_keys_that_share_one_hash_are_refused_with_the_problem(side: str) -> None:
    test = {"input": "[1]", "output": "[0]", side: f"[{COLLIDING_KEYS}]"}
    with pytest.raises(ProblemFormatError, match="share a hash"):
        Problem.from_dict({"id": "colliding", "fn_name": "f", "fn_semantics": "apps", "hidden_tests": [test]})


def test_integer_keys_of_real_data_are_loaded() -> None:
    keys = json.dumps({str(k): k for k in [-2, -1, 0, 1, (1 << 61) - 1, 1 << 61, *range(2, 10_000)]})
    Problem.from_dict({"id": "keys", "fn_name": "f", "fn_semantics": "apps",
                       "hidden_tests": [{"input": f"[{keys}]", "output": f"[{keys}]"}]})


# A typed complex whose part is an int past the float range: ``complex(int, 0)`` raised
# OverflowError in the judge's decoder, which no caller expected, so the job failed as the
# judge's bug (an infrastructure error) for text the program wrote on its own result channel.
HUGE_COMPLEX = """
import json
json.dumps = lambda *args, **kwargs: '{"\\\\u0000c": [' + '9' * 400 + ', 0]}'
def one():
    return 1
"""


def test_a_typed_complex_past_the_float_range_is_a_wrong_answer_not_a_judge_crash(runner: CodeRunner) -> None:
    problem = Problem.from_dict({"id": "one", "fn_name": "one", "public_tests": [{"input": "[]", "output": "1"}]})
    result = judge(problem, HUGE_COMPLEX, runner)
    assert (result.verdict, result.reward) == (Verdict.WRONG_ANSWER, 0.0)
    assert "past the float range" in result.observation
