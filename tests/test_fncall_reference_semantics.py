"""Function-call problems judged as each dataset's own reference harness judges them
(``fn_semantics``, core/fncall.py), through the real sandbox on both runners.

Every test names the reference rule it proves:

- APPS: hendrycks/apps ``eval/testing_util.py`` ``run_test``; TACO: FlagOpen/TACO
  ``metrics/testing_util.py`` (``process_input_output``, ``execute_cb_code``), the same rules
  (and the copies in verl ``prime_code``, PRIME, deepcoder).
- LCB: LiveCodeBench ``lcb_runner/evaluation/testing_util.py`` ``grade_call_based`` and
  ``compile_code``.
- PI: PrimeIntellect-ai/genesys ``src/genesys/verifier/code_test_verifier.py``
  ``verify_python_call_based_code`` and ``detect_callable_name``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cpfleet.core.fncall import RULES_VERSION, decode_returned, value_difference
from cpfleet.core.problem import Problem, ProblemFormatError
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner


def fenced(code: str) -> str:
    return f"```python\n{code.strip()}\n```\n"


def problem(semantics: str | None, tests: list[tuple[list[Any], Any]], fn_name: str = "f", **extra: Any) -> Problem:
    """One function-call problem; each test's output is the raw JSON the dataset holds."""
    rec: dict[str, Any] = {
        "id": f"sem/{semantics}/{fn_name}", "fn_name": fn_name,
        "hidden_tests": [{"input": json.dumps(a), "output": json.dumps(o)} for a, o in tests], **extra,
    }
    if semantics is not None:
        rec["fn_semantics"] = semantics
    return Problem.from_dict(rec)


def verdict(runner: CodeRunner, prob: Problem, code: str) -> Verdict:
    res = evaluate(prob, fenced(code), runner)
    assert not res.infra_error, res.infra_message
    assert (res.reward == 1.0) is (res.verdict == Verdict.OK), res.observation
    return res.verdict


OK, WA, RE = Verdict.OK, Verdict.WRONG_ANSWER, Verdict.RUNTIME_ERROR


# --- the known gap: a dict's key types survive the trip back ------------------------------------


@pytest.mark.parametrize("semantics", [None, "lcb"])
def test_int_keys_are_not_string_keys_under_python_equality(runner: CodeRunner, semantics: str | None) -> None:
    """LCB ``grade_call_based``: ``prediction == json.loads(output)``: a returned {1: 2} is not
    the expected {"1": 2} (a JSON round trip would make both {"1": 2}); nor are float, bool or None keys."""
    p = problem(semantics, [([], {"1": 2})])
    assert verdict(runner, p, "def f():\n    return {'1': 2}") == OK
    assert verdict(runner, p, "def f():\n    return {1: 2}") == WA
    q = problem(semantics, [([], {"1.5": "x", "true": 1, "null": 0})])
    assert verdict(runner, q, "def f():\n    return {'1.5': 'x', 'true': 1, 'null': 0}") == OK
    assert verdict(runner, q, "def f():\n    return {1.5: 'x', True: 1, None: 0}") == WA


def test_python_equality_keeps_true_equal_to_one(runner: CodeRunner) -> None:
    """LCB (and APPS) compare with ``==``, where ``True == 1``, ``1 == 1.0`` and as keys
    ``{1: x} == {True: x}``: the typed transport keeps those equal."""
    p = problem("lcb", [([], [1, 2.0, True])])
    assert verdict(runner, p, "def f():\n    return [True, 2, 1.0]") == OK
    q = problem("apps", [([], [{"1": "a"}])])  # keys become ints, as APPS makes them
    assert verdict(runner, q, "def f():\n    return {True: 'a'}") == OK


def test_a_tuple_is_a_list_at_the_top_only(runner: CodeRunner) -> None:
    """LCB: ``if isinstance(prediction, tuple): prediction = list(prediction)``, then ``==``: a
    tuple inside (a JSON round trip would make every tuple a list) is not a list."""
    p = problem("lcb", [([], [[1, 2], [3, 4]])])
    assert verdict(runner, p, "def f():\n    return ([1, 2], [3, 4])") == OK
    assert verdict(runner, p, "def f():\n    return [(1, 2), (3, 4)]") == WA
    q = problem(None, [([], {"a": [1, 2]})])
    assert verdict(runner, q, "def f():\n    return {'a': (1, 2)}") == WA


def test_no_reference_accepts_a_generator_or_a_set(runner: CodeRunner) -> None:
    """LCB/APPS ``prediction == expected`` is False for a generator and for a set against any
    JSON value (a generator has no typed form: the harness never drains it into a list)."""
    p = problem("lcb", [([3], [0, 1, 4])])
    assert verdict(runner, p, "def f(n):\n    return (i * i for i in range(n))") == WA
    assert verdict(runner, p, "def f(n):\n    return {0, 1, 4}") == WA
    assert verdict(runner, p, "def f(n):\n    return [i * i for i in range(n)]") == OK


def test_numbers_json_has_no_form_for_compare_as_python_compares_them(runner: CodeRunner) -> None:
    """LCB/APPS ``prediction == expected``: ``Fraction(6, 2) == 3``, ``Decimal("2.5") == 2.5`` and
    ``3+0j == 3`` hold; ``Decimal("0.1") == 0.1`` does not (exact); a signalling NaN fails."""
    p = problem("lcb", [([], [3, 2.5, 3])])
    code = "from fractions import Fraction\nfrom decimal import Decimal\ndef f():\n    return [{}, {}, {}]\n"
    assert verdict(runner, p, code.format("Fraction(6, 2)", "Decimal('2.5')", "3+0j")) == OK
    assert verdict(runner, p, code.format("Fraction(7, 2)", "Decimal('2.5')", "3+0j")) == WA
    q = problem("lcb", [([], 0.1)])
    assert verdict(runner, q, "from decimal import Decimal\ndef f():\n    return Decimal('0.1')") == WA
    assert verdict(runner, q, "from decimal import Decimal\ndef f():\n    return Decimal('sNaN')") == WA


# --- APPS / TACO ---------------------------------------------------------------------------------


def test_apps_expected_dict_keys_become_ints(runner: CodeRunner) -> None:
    """APPS/TACO: "JSON forces dictionaries to have string keys; this undoes this": an expected
    output that is a dict, or a dict at [0], whose keys all int()-convert becomes [{int(k): v}];
    a returned dict with string keys then fails, one with int keys passes."""
    for raw in ({"1": 2, " 3": 4}, [{"1": 2, " 3": 4}]):
        p = problem("apps", [([], raw)])
        assert verdict(runner, p, "def f():\n    return {1: 2, 3: 4}") == OK
        assert verdict(runner, p, "def f():\n    return {'1': 2, ' 3': 4}") == WA


def test_apps_keys_that_do_not_convert_stay_strings(runner: CodeRunner) -> None:
    """APPS/TACO: the conversion is in a try/except: one key that int() refuses leaves them all."""
    p = problem("apps", [([], [{"1": 2, "a": 3}])])
    assert verdict(runner, p, "def f():\n    return {'1': 2, 'a': 3}") == OK
    assert verdict(runner, p, "def f():\n    return {1: 2, 'a': 3}") == WA


def test_apps_first_argument_dict_gets_int_keys_and_replaces_the_arguments(runner: CodeRunner) -> None:
    """APPS/TACO: ``if isinstance(inputs[0], dict): inputs = [{int(k): v ...}]``: the function
    receives int keys, and only that one argument (the singleton-list assumption)."""
    p = problem("apps", [([{"1": "a", "2": "b"}], [["int", "int"]])])
    assert verdict(runner, p, "def f(d):\n    return [type(k).__name__ for k in d]") == OK
    q = problem("apps", [([{"1": "a"}, 5], [None])])
    assert verdict(runner, q, "def f(d, n=None):\n    return n") == OK
    r = problem("apps", [([{"x": "a"}, 5], [5])])  # "x" does not convert: the arguments stay
    assert verdict(runner, r, "def f(d, n=None):\n    return n") == OK
    s = problem(None, [([{"1": "a"}], "str")])  # the default passes arguments as JSON has them
    assert verdict(runner, s, "def f(d):\n    return [type(k).__name__ for k in d][0]") == OK


def test_apps_accepts_the_wrapped_output_and_its_first_element(runner: CodeRunner) -> None:
    """APPS/TACO: ``output == expected``, or ``output == expected[0]`` for a non-empty list: with
    the usual one-element wrapping both the value and the wrapped list pass; an unwrapped list
    output also passes its first element."""
    p = problem("apps", [([], [[1, 2]])])
    assert verdict(runner, p, "def f():\n    return [1, 2]") == OK
    assert verdict(runner, p, "def f():\n    return [[1, 2]]") == OK
    assert verdict(runner, p, "def f():\n    return [2, 1]") == WA
    q = problem("apps", [([], [7, 8])])  # not wrapped
    assert verdict(runner, q, "def f():\n    return 7") == OK
    assert verdict(runner, q, "def f():\n    return 8") == WA


def test_apps_accepts_tuples_inside_a_list(runner: CodeRunner) -> None:
    """TACO/APPS: ``if isinstance(output[0], tuple): [list(x) for x in output] == expected[0]``
    (the nested tuples LCB refuses), one level deep only."""
    p = problem("apps", [([], [[[1, 2], [3, 4]]])])
    assert verdict(runner, p, "def f():\n    return [(1, 2), (3, 4)]") == OK
    assert verdict(runner, p, "def f():\n    return ((1, 2), (3, 4))") == OK
    q = problem("apps", [([], [[[[1, 2]]]])])
    assert verdict(runner, q, "def f():\n    return [[(1, 2)]]") == WA


@pytest.mark.parametrize("semantics", ["lcb", "apps"])
def test_class_solution_as_text_decides_the_callee(runner: CodeRunner, semantics: str) -> None:
    """LCB ``compile_code`` and APPS/TACO: ``if "class Solution" in code`` the callee is
    ``Solution().fn``, else the module's function, whatever the program defines; the default
    looks for a Solution class that has the method."""
    code = "# class Solution would be LeetCode's\ndef f():\n    return 1\n"
    p = problem(semantics, [([], 1 if semantics == "lcb" else [1])])
    assert verdict(runner, p, code) == RE
    assert verdict(runner, problem(None, [([], 1)]), code) == OK
    both = "class Solution:\n    def f(self):\n        return 1\ndef f():\n    return 2\n"
    assert verdict(runner, p, both) == OK


def test_apps_header_names_are_apps_own(runner: CodeRunner) -> None:
    """APPS/TACO's call-based header imports Counter, lru_cache, gcd, heapq's names...; not
    bisect's, which LiveCodeBench's header has."""
    code = "def f():\n    return bisect_left([1, 2, 3], 2) + gcd(4, 6) + len(Counter('aa'))\n"
    assert verdict(runner, problem("lcb", [([], 4)]), code) == OK
    assert verdict(runner, problem("apps", [([], [4])]), code) == RE
    assert verdict(runner, problem("apps", [([], [3])]), code.replace("bisect_left([1, 2, 3], 2)", "0")) == OK


@pytest.mark.parametrize("semantics", ["lcb", "apps", "primeintellect"])
def test_a_future_import_fails_where_the_reference_prepends_its_header(runner: CodeRunner, semantics: str) -> None:
    """LCB ``grade_call_based`` (``code = import_string + "\\n\\n" + code``), APPS/TACO (``sol +=
    test``) and PI (``injection + user_code``) put their header before the program: a ``from
    __future__ import`` is then a SyntaxError there; the default keeps the program's own top."""
    code = "from __future__ import annotations\ndef f() -> int:\n    return 1\n"
    expected: Any = [1] if semantics == "apps" else 1
    assert verdict(runner, problem(semantics, [([], expected)]), code) == RE
    assert verdict(runner, problem(None, [([], 1)]), code) == OK


def test_lcb_reliability_guard_nulls_what_it_nulls(runner: CodeRunner) -> None:
    """LCB ``run_test`` calls ``reliability_guard()`` before compiling: ``import resource`` fails,
    ``os.getcwd`` and ``subprocess.Popen`` are None; the default leaves the program its Python."""
    for code in ("import resource\ndef f():\n    return 1\n",
                 "import os\ndef f():\n    return len(os.getcwd()) and 1\n",
                 "import subprocess\ndef f():\n    return 1 if subprocess.Popen else 2\n"):
        assert verdict(runner, problem("lcb", [([], 1)]), code) in (RE, WA)
        assert verdict(runner, problem(None, [([], 1)]), code) == OK


# --- PrimeIntellect -----------------------------------------------------------------------------


def test_primeintellect_compares_the_printed_text(runner: CodeRunner) -> None:
    """PI: ``print(res)`` stripped ``== str(expected).strip()``: 3.0 is not 3, "3" is 3, a
    tuple is not a list, a dict's order counts, True prints as True."""
    p = problem("primeintellect", [([], 3)])
    assert verdict(runner, p, "def f():\n    return 3") == OK
    assert verdict(runner, p, "def f():\n    return '3'") == OK
    assert verdict(runner, p, "def f():\n    return 3.0") == WA
    q = problem("primeintellect", [([], [1, "a", True, None])])
    assert verdict(runner, q, "def f():\n    return [1, 'a', True, None]") == OK
    assert verdict(runner, q, "def f():\n    return (1, 'a', True, None)") == WA
    assert verdict(runner, q, "def f():\n    return [1, 'a', 1, None]") == WA
    d = problem("primeintellect", [([], {"a": 2, "b": 1})])
    assert verdict(runner, d, "def f():\n    return {'a': 2, 'b': 1}") == OK
    assert verdict(runner, d, "def f():\n    return {'b': 1, 'a': 2}") == WA


def test_primeintellect_counts_what_the_program_prints(runner: CodeRunner) -> None:
    """PI: the run's whole output is compared, so a program's own print is part of it; a
    program that prints the answer and exits is compared on what it printed."""
    p = problem("primeintellect", [([2], 4)])
    assert verdict(runner, p, "def f(x):\n    print('debug')\n    return x * 2") == WA
    assert verdict(runner, p, "import sys\ndef f(x):\n    print(x * 2)\n    sys.exit(0)") == OK


def test_primeintellect_finds_the_callee_in_the_syntax_tree(runner: CodeRunner) -> None:
    """PI ``detect_callable_name``: the first top-level class with a ``def fn`` (instantiated
    without arguments), else a top-level ``def fn``; a name bound another way is not found."""
    p = problem("primeintellect", [([2], 4)])
    assert verdict(runner, p, "class Helper:\n    def f(self, x):\n        return x * 2\n") == OK
    assert verdict(runner, p, "f = lambda x: x * 2\n") == RE
    assert verdict(runner, p, "def f(x):\n    return x * 2\n") == OK


def test_primeintellect_arguments_are_pasted_as_source(runner: CodeRunner) -> None:
    """PI: ``args = {args}`` formats the arguments into the harness's source: NaN and infinities
    there are the undefined names ``nan`` and ``inf``, so such a test fails for every program."""
    p = problem("primeintellect", [([[1.5, float("nan")]], 2)])
    assert verdict(runner, p, "def f(xs):\n    return 2") == RE
    q = problem(None, [([[1.5, float("inf")]], 2)])
    assert verdict(runner, q, "def f(xs):\n    return 2") == OK


def test_primeintellect_refuses_a_tolerance_checker() -> None:
    with pytest.raises(ProblemFormatError, match="printed value's text"):
        problem("primeintellect", [([], 1.5)], checker={"type": "float"})


# --- the record ---------------------------------------------------------------------------------


def test_fn_semantics_is_validated_round_trips_and_versions_the_problem() -> None:
    base = problem(None, [([1], 1)])
    apps = problem("apps", [([1], 1)])
    assert base.fn_semantics == "python" and "fn_semantics" not in base.to_dict()
    assert Problem.from_dict(apps.to_dict()) == apps
    assert base.content_version() != apps.content_version()
    assert RULES_VERSION >= 2
    with pytest.raises(ProblemFormatError, match="fn_semantics must be one of"):
        problem("leetcode", [([1], 1)])
    with pytest.raises(ProblemFormatError, match="function-call problems"):
        Problem.from_dict({"id": "s", "fn_semantics": "apps", "hidden_tests": [{"input": "", "output": ""}]})


# --- the typed transport against hostile values -------------------------------------------------


def test_a_dict_whose_key_looks_like_a_tag_comes_back_a_dict(runner: CodeRunner) -> None:
    """The transport's tags cannot be forged by a value: a dict with a NUL-led key is sent as
    typed pairs, so it comes back the dict it was, never a tuple."""
    p = problem(None, [([], {"\u0000t": [1]})])
    assert verdict(runner, p, "def f():\n    return {'\\x00t': [1]}") == OK
    assert verdict(runner, p, "def f():\n    return (1,)") == WA


HOSTILE = [
    ("class D(dict):\n    def __eq__(self, o): return True\n    def items(self): return [('a', 1)]\n"
     "def f():\n    return D()", {"a": 1}),
    ("class I(int):\n    def __eq__(self, o): return True\n    def __repr__(self): return '5'\n"
     "    def __int__(self): return 5\ndef f():\n    return I(3)", 5),
    ("class L(list):\n    def __iter__(self): return iter([1, 2])\n    def __eq__(self, o): return True\n"
     "def f():\n    return L([9])", [1, 2]),
    ("class K(str):\n    def __hash__(self): return 0\n    def __eq__(self, o): return True\n"
     "def f():\n    return {K('x'): 1}", {"a": 1}),
    ("def f():\n    a = []\n    a.append(a)\n    return a", [[]]),
    ("def f():\n    d = {}\n    d[1] = (d,)\n    return d", {"1": [{}]}),
    ("def f():\n    return {frozenset({1}): (1, {2})}", {"1": 1}),
]


@pytest.mark.parametrize(("code", "expected"), HOSTILE, ids=["dict-eq", "int-eq", "list-iter", "str-key",
                                                             "self-list", "self-dict", "set-key"])
def test_hostile_values_are_judged_by_their_data(runner: CodeRunner, code: str, expected: Any) -> None:
    """A subclass's ``__eq__``/``__iter__``/``items``/``__repr__`` never decides: the value is sent
    from its base type's storage; a value that contains itself has no form; none is an error of
    the judge's own."""
    assert verdict(runner, problem(None, [([], expected)]), code) == WA


def test_a_large_int_keyed_dict_is_read_whole(runner: CodeRunner) -> None:
    """A dict with int keys comes back as typed pairs, three values a key: the bound on what the
    judge parses counts the expected dict so, and a correct large answer is read and passes."""
    p = problem("apps", [([3000], [{str(i): i * i for i in range(3000)}])])
    assert verdict(runner, p, "def f(n):\n    return {i: i * i for i in range(n)}") == OK
    assert verdict(runner, p, "def f(n):\n    return {i: i * i for i in range(n + 1)}") == WA


def test_a_value_nested_past_the_recursion_limit_is_the_programs_error(runner: CodeRunner) -> None:
    code = "def f():\n    v = []\n    for _ in range(200000):\n        v = [v]\n    return v"
    assert verdict(runner, problem(None, [([], [])]), code) in (RE, WA)


def test_decoding_refuses_text_no_value_writes() -> None:
    assert decode_returned('{"\\u0000t": [1, [2]]}') == (1, [2])
    assert decode_returned('{"\\u0000d": [[[1, 2], 3]], "x": 1}') == {"\u0000d": [[[1, 2], 3]], "x": 1}
    for bad in ('{"\\u0000d": [[[1], 2]]}', '{"\\u0000s": [[1]]}', '{"\\u0000t": 5}', '{"\\u0000d": [[1]]}'):
        with pytest.raises(ValueError):
            decode_returned(bad)


def test_comparisons_without_the_sandbox() -> None:
    assert value_difference("apps", [[[1, 2]]], [(1, 2)], None) is None
    assert value_difference("lcb", [[1, 2]], [(1, 2)], None) is not None
    assert value_difference("apps", {"2": 1}, {2: 1}, None) is None
    assert value_difference("python", {"2": 1}, {2: 1}, None) is not None
