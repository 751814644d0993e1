"""Function-call problems (``fn_name``): reference solutions earn 1.0, mutated ones 0.0, on both
runners, with LiveCodeBench-shaped (class Solution) and TACO-shaped (module function) problems
and the semantics of their harnesses (a returned tuple as a list, Python ``==``, the problem's
float tolerance, the return value compared and not the prints). The rules per reference harness
(fn_semantics) are in tests/test_fncall_reference_semantics.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cpfleet.core.fncall import Tolerance, decode, difference
from cpfleet.core.problem import Problem, ProblemFormatError
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner


def fenced(code: str) -> str:
    return f"Here is my solution:\n```python\n{code.strip()}\n```\n"


def problem(pid: str, fn_name: str, public: list[tuple[list[Any], Any]], hidden: list[tuple[list[Any], Any]],
            **extra: Any) -> Problem:
    def tests(pairs: list[tuple[list[Any], Any]]) -> list[dict[str, str]]:
        return [{"input": json.dumps(args), "output": json.dumps(out)} for args, out in pairs]

    return Problem.from_dict({"id": pid, "fn_name": fn_name, "public_tests": tests(public),
                              "hidden_tests": tests(hidden), **extra})


# --- LiveCodeBench-shaped: class Solution, typing names used without importing them -------------

LCB = problem(
    "lcb/find-intersection-values",
    "findIntersectionValues",
    [([[4, 3, 2, 3, 1], [2, 2, 5, 2, 3, 6]], [3, 4])],
    [([[3, 4, 2, 3], [1, 5]], [0, 0]), ([[1, 1], [1]], [2, 1]), ([[7], [8, 9]], [0, 0])],
    starter_code="class Solution:\n    def findIntersectionValues(self, nums1: List[int], nums2: List[int]) -> List[int]:\n        ",
)
LCB_REFERENCE = """
class Solution:
    def findIntersectionValues(self, nums1: List[int], nums2: List[int]) -> List[int]:
        s1, s2 = set(nums1), set(nums2)
        return (sum(x in s2 for x in nums1), sum(x in s1 for x in nums2))
"""
LCB_MUTATED = LCB_REFERENCE.replace("sum(x in s1 for x in nums2)", "sum(x in s1 for x in nums1)")

# --- TACO-shaped: a module-level function, outputs unwrapped from TACO's one-element lists -------

TACO = problem(
    "taco/is-anagram",
    "is_anagram",
    [(["foefet", "toffee"], True)],
    [(["Buckethead", "DeathCubeK"], True), (["Twoo", "WooT"], True), (["dumble", "bumble"], False),
     (["ound", "round"], False)],
)
TACO_REFERENCE = """
def is_anagram(test, original):
    return sorted(test.lower()) == sorted(original.lower())
"""
TACO_MUTATED = TACO_REFERENCE.replace("sorted(test.lower())", "sorted(test)")

# --- our own: two-sum (tuple and list answers), squares, floats ------------------------------

TWO_SUM = problem(
    "own/two-sum",
    "twoSum",
    [([[2, 7, 11, 15], 9], [0, 1])],
    [([[3, 2, 4], 6], [1, 2]), ([[3, 3], 6], [0, 1]), ([[1, 5, 8, 13], 21], [2, 3])],
)
TWO_SUM_REFERENCE = """
class Solution:
    def twoSum(self, nums, target):
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return (seen[target - x], i)
            seen[x] = i
"""
TWO_SUM_MUTATED = TWO_SUM_REFERENCE.replace("return (seen[target - x], i)", "return (i, seen[target - x])")

SQUARES = problem("own/squares", "squares", [([3], [0, 1, 4])], [([5], [0, 1, 4, 9, 16]), ([0], [])])
SQUARES_REFERENCE = "def squares(n):\n    return [i * i for i in range(n)]\n"
SQUARES_MUTATED = "def squares(n):\n    return [i * i for i in range(1, n)]\n"

MEAN = problem("own/mean", "mean", [([[1, 2]], 1.5)], [([[1, 2, 4]], 2.3333333333), ([[10]], 10)],
               checker={"type": "float", "abs": 1e-6, "rel": 1e-6})
MEAN_REFERENCE = "def mean(xs):\n    return sum(xs) / len(xs)\n"
MEAN_MUTATED = "def mean(xs):\n    return sum(xs) / (len(xs) + 1e-3)\n"

CASES = [
    (LCB, LCB_REFERENCE, LCB_MUTATED),
    (TACO, TACO_REFERENCE, TACO_MUTATED),
    (TWO_SUM, TWO_SUM_REFERENCE, TWO_SUM_MUTATED),
    (SQUARES, SQUARES_REFERENCE, SQUARES_MUTATED),
    (MEAN, MEAN_REFERENCE, MEAN_MUTATED),
]


@pytest.mark.parametrize(("prob", "reference", "mutated"), CASES, ids=[c[0].id for c in CASES])
def test_reference_solution_earns_one_and_mutated_solution_zero(
    runner: CodeRunner, prob: Problem, reference: str, mutated: str
) -> None:
    good = evaluate(prob, fenced(reference), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    bad = evaluate(prob, fenced(mutated), runner)
    assert (bad.reward, bad.verdict) == (0.0, Verdict.WRONG_ANSWER), bad.observation


def test_feedback_shows_the_call_the_returned_value_and_the_expected_one(runner: CodeRunner) -> None:
    res = evaluate(TWO_SUM, fenced(TWO_SUM_MUTATED), runner)
    assert "twoSum([2, 7, 11, 15], 9) -> (1, 0)" in res.observation  # the tuple it returned
    assert "expected: [0, 1]" in res.observation
    assert "at [0]: expected 0, got 1" in res.observation


def test_prints_are_shown_but_not_compared(runner: CodeRunner) -> None:
    code = "def squares(n):\n    print('debugging', n)\n    return [i * i for i in range(n)]\n"
    res = evaluate(SQUARES, fenced(code), runner)
    assert res.reward == 1.0, res.observation
    assert "debugging 3" in res.observation


def test_an_exception_is_a_runtime_error_with_its_traceback(runner: CodeRunner) -> None:
    code = "def squares(n):\n    return [i * i for i in range(n)][n]\n"
    res = evaluate(SQUARES, fenced(code), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.RUNTIME_ERROR)
    assert "squares(3) -> raised IndexError: list index out of range" in res.observation
    assert 'File "solution.py", line 2, in squares' in res.observation


def test_exiting_instead_of_returning_is_a_runtime_error(runner: CodeRunner) -> None:
    res = evaluate(SQUARES, fenced("import sys\ndef squares(n):\n    sys.exit(0)\n"), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.RUNTIME_ERROR), res.observation
    res = evaluate(SQUARES, fenced("import os\ndef squares(n):\n    os._exit(0)\n"), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.RUNTIME_ERROR), res.observation


def test_a_missing_function_is_a_runtime_error_that_shows_the_starter_code(runner: CodeRunner) -> None:
    res = evaluate(LCB, fenced("class Solution:\n    def other(self):\n        return 1\n"), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.RUNTIME_ERROR)
    assert "no function 'findIntersectionValues'" in res.observation
    assert "def findIntersectionValues(self, nums1: List[int]" in res.observation


def test_a_value_without_json_form_is_a_wrong_answer(runner: CodeRunner) -> None:
    res = evaluate(SQUARES, fenced("def squares(n):\n    return {i * i for i in range(n)}\n"), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.WRONG_ANSWER), res.observation
    assert "set" in res.observation


def test_an_infinite_loop_is_a_time_limit(runner: CodeRunner) -> None:
    slow = Problem.from_dict({**SQUARES.to_dict(), "id": "own/squares-fast", "time_limit_s": 0.5})
    res = evaluate(slow, fenced("def squares(n):\n    while True:\n        pass\n"), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.TIME_LIMIT)


def test_main_blocks_do_not_run_and_stdin_is_empty(runner: CodeRunner) -> None:
    code = (
        "import sys\n"
        "data = sys.stdin.read()\n"
        "def squares(n):\n"
        "    return [i * i for i in range(n)] if data == '' else ['saw', data]\n"
        "if __name__ == '__main__':\n"
        "    raise SystemExit(3)\n"
    )
    res = evaluate(SQUARES, fenced(code), runner)
    assert res.reward == 1.0, res.observation


def test_the_expected_value_is_not_in_the_child(runner: CodeRunner) -> None:
    """The child gets only the arguments: a program that searches everything it can read for
    the expected value's text finds nothing (its own arguments are all there is)."""
    marker = "zq-expected-marker-6021"
    prob = problem("own/echo", "echo", [(["a"], "a")], [(["b"], marker)])
    code = (
        "import gc, sys\n"
        "def echo(x):\n"
        "    needle = 'zq-expected-marker-' + str(6021)\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, (str, bytes, dict, list)) and needle in str(o) and o is not needle:\n"
        "            return needle\n"
        "    return x\n"
    )
    res = evaluate(prob, fenced(code), runner)
    assert res.hidden.passed == 0 and res.reward == 0.0, res.observation


def test_problem_validation_rejects_malformed_function_call_problems() -> None:
    base = {"id": "p", "fn_name": "f", "public_tests": [{"input": "[1]", "output": "1"}], "hidden_tests": []}
    Problem.from_dict(base)
    with pytest.raises(ProblemFormatError, match="identifier"):
        Problem.from_dict({**base, "fn_name": "f()"})
    with pytest.raises(ProblemFormatError, match="JSON list"):
        Problem.from_dict({**base, "public_tests": [{"input": "1", "output": "1"}]})
    with pytest.raises(ProblemFormatError, match="not JSON"):
        Problem.from_dict({**base, "public_tests": [{"input": "[1]", "output": "nope"}]})
    with pytest.raises(ProblemFormatError, match="compares returned values"):
        Problem.from_dict({**base, "checker": {"type": "python", "source": "print(1)"}})


def test_fn_name_is_part_of_the_problem_version() -> None:
    a = Problem.from_dict({"id": "p", "public_tests": [{"input": "[1]", "output": "1"}]})
    b = Problem.from_dict({"id": "p", "fn_name": "f", "public_tests": [{"input": "[1]", "output": "1"}]})
    assert a.content_version() != b.content_version()
    assert Problem.from_dict(b.to_dict()) == b


@pytest.mark.parametrize(
    ("expected", "got", "tol", "equal"),
    [
        ("[0, 1]", "[0, 1]", None, True),
        ("3", "3.0", None, True),  # Python ==
        ("1", "true", None, True),  # True == 1 in Python, as in the reference harnesses
        ("\"1\"", "1", None, False),
        ("[[1, 2]]", "[[1, 2]]", None, True),
        ("{\"a\": [1]}", "{\"a\": [1]}", None, True),
        ("{\"a\": 1}", "{\"a\": 1, \"b\": 2}", None, False),
        ("0.1", "0.10000001", None, False),
        ("0.1", "0.10000001", Tolerance(1e-6, 1e-6), True),
        ("0.1", "0.2", Tolerance(1e-6, 1e-6), False),
        ("NaN", "NaN", Tolerance(1e-6, 1e-6), False),
        ("null", "null", None, True),
        ("1" * 5000, "1" * 5000, None, True),
        ("1" * 5000, "1" * 4999 + "2", None, False),
    ],
)
def test_values_compare_as_the_reference_harnesses_do(expected: str, got: str, tol: Tolerance | None, equal: bool) -> None:
    assert (difference(decode(expected), decode(got), tol) is None) is equal


@pytest.mark.parametrize("checker", [{"type": "float"}, {"type": "code_contests"}, {"type": "float", "float_tolerance": 1e-6}])
def test_a_returned_int_past_the_float_range_is_wrong_never_an_error(runner: CodeRunner, checker: dict[str, Any]) -> None:
    p = problem("fn/huge", "f", [([], 1.5)], [([], 2.5)], checker=checker)
    r = evaluate(p, fenced("def f():\n    return 10**400"), runner)
    assert (r.verdict, r.reward, r.infra_error) == (Verdict.WRONG_ANSWER, 0.0, False), r.infra_message


def test_float_tolerance_compares_a_huge_int_exactly_and_infinities_as_python_does() -> None:
    tol = Tolerance(1e-6, 1e-6)
    assert difference(1.5, 10**400, tol) is not None and difference(10**400, 1.5, tol) is not None
    near = 17976931348623157 * 10**292  # the largest float, written as an int one past its range
    assert difference(1.7976931348623157e308, near + 1, tol) is None
    assert difference(float("inf"), float("inf"), tol) is None and difference(float("nan"), float("nan"), tol) is not None
    assert difference(float("inf"), float("-inf"), tol) is not None and difference(float("inf"), 10**400, tol) is not None


def test_an_int_beside_a_float_is_compared_by_its_exact_value_under_a_tolerance() -> None:
    # 10**18 - 1 and 1e18 are one double: a returned 1e18 was paid for the int 10**18 - 1 even
    # under a zero tolerance, where Python's == (every reference harness) says they differ
    exact, strict = Tolerance(0.0, 0.0), Tolerance(1e-5, 0.0, strict=True)
    for tol in (exact, strict, Tolerance(1e-6, 1e-30)):
        assert difference(999999999999999999, 1e18, tol) is not None
        assert difference(1e18, 999999999999999999, tol) is not None
        assert difference(10**18, 1e18, tol) is None and difference(1e18, 10**18, tol) is None
    assert difference(5, 5.000001, strict) is None and difference(5, 5.0001, strict) is not None
    assert difference(5, 5.000001, exact) is not None
