"""A problem says which interpreter its ``python3`` means (``python3_interpreter``): Kattis judges
Python 3 with PyPy and ICPC juries size their time limits for that. Parsing and versions, the
judging itself on both runners, a worker without PyPy (INTERNAL naming it, never a zero), and
the result cache's program identity (the interpreter actually used)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cpfleet.core.errors import ProblemFormatError
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages
from cpfleet.sandbox.env import evaluate, program_identity
from cpfleet.sandbox.runner import CodeRunner

RECORD: dict[str, Any] = {
    "id": "interp/sum", "time_limit_s": 2, "memory_limit_mb": 256,
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}],
}
CPYTHON = Problem.from_dict(RECORD)
PYPY = Problem.from_dict({**RECORD, "python3_interpreter": "pypy3"})
# names the interpreter on stderr (shown in the public test's feedback)
SAYS_WHICH = ("```python\nimport platform, sys\na, b = map(int, input().split())\nprint(a + b)\n"
              "print('interpreter:', platform.python_implementation(), file=sys.stderr)\n```\n")


def _needs_pypy() -> None:
    missing = languages.missing_tools("pypy3")
    if missing:
        pytest.skip(f"pypy3 not installed here: {missing}")


def test_the_field_round_trips_and_is_part_of_the_version() -> None:
    assert CPYTHON.python3_interpreter is None and PYPY.python3_interpreter == "pypy3"
    assert Problem.from_dict(PYPY.to_dict()) == PYPY
    assert PYPY.content_version() != CPYTHON.content_version()  # it changes verdicts
    # naming the default is the default: the version of such a problem stays
    named = Problem.from_dict({**RECORD, "python3_interpreter": "python3"})
    assert named.python3_interpreter is None and named.content_version() == CPYTHON.content_version()
    assert "python3_interpreter" not in CPYTHON.to_dict()
    assert PYPY.judged_language("python3") == "pypy3" and CPYTHON.judged_language("python3") == "python3"
    assert PYPY.judged_language("cpp") == "cpp" and PYPY.judged_language("pypy3") == "pypy3"


@pytest.mark.parametrize("bad", ["cpython", "pypy", "java", 3, ["pypy3"]])
def test_an_unknown_interpreter_is_a_format_error(bad: object) -> None:
    with pytest.raises(ProblemFormatError, match="python3_interpreter"):
        Problem.from_dict({**RECORD, "python3_interpreter": bad})


def test_a_function_call_problem_cannot_ask_for_pypy() -> None:
    record = {**RECORD, "fn_name": "add",
              "public_tests": [{"input": "[1, 2]", "output": "3"}], "hidden_tests": [{"input": "[5, 7]", "output": "12"}]}
    assert Problem.from_dict(record).fn_name == "add"
    with pytest.raises(ProblemFormatError, match="function-call"):
        Problem.from_dict({**record, "python3_interpreter": "pypy3"})


def test_a_python3_program_runs_under_pypy_where_the_problem_says_so(runner: CodeRunner) -> None:
    _needs_pypy()
    on_pypy = evaluate(PYPY, SAYS_WHICH, runner)
    assert (on_pypy.verdict, on_pypy.reward, on_pypy.language) == (Verdict.OK, 1.0, "pypy3"), on_pypy.observation
    assert "interpreter: PyPy" in on_pypy.observation
    on_cpython = evaluate(CPYTHON, SAYS_WHICH, runner)
    assert (on_cpython.verdict, on_cpython.language) == (Verdict.OK, "python3")
    assert "interpreter: CPython" in on_cpython.observation
    # the job asking for python3 by name is judged the problem's way too
    asked = evaluate(PYPY, SAYS_WHICH, runner, language="python3")
    assert (asked.verdict, asked.language) == (Verdict.OK, "pypy3") and "interpreter: PyPy" in asked.observation
    broken = evaluate(PYPY, "```python\ndef f(:\n```", runner)
    assert (broken.verdict, broken.reward, broken.language) == (Verdict.COMPILE_ERROR, 0.0, "pypy3")
    assert broken.public.run == 0


@pytest.fixture
def no_pypy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's language table as on a worker whose PyPy is gone."""
    monkeypatch.setenv("CPFLEET_PYPY", "/nonexistent/pypy3")
    for cache in (languages.table, languages.toolchain_version):
        cache.cache_clear()
    yield
    monkeypatch.undo()
    for cache in (languages.table, languages.toolchain_version):
        cache.cache_clear()


def test_without_pypy_the_job_is_internal_naming_it_never_a_zero(runner: CodeRunner, no_pypy: None) -> None:
    result = evaluate(PYPY, SAYS_WHICH, runner)
    assert result.verdict == Verdict.INTERNAL and result.infra_error and result.reward is None
    assert "/nonexistent/pypy3" in result.infra_message and "python3_interpreter" in result.infra_message
    assert result.language == "pypy3"
    # a problem judged with CPython does not need it
    assert evaluate(CPYTHON, SAYS_WHICH, runner).verdict == Verdict.OK


def test_the_result_identity_names_the_interpreter_actually_used(monkeypatch: pytest.MonkeyPatch) -> None:
    code = SAYS_WHICH.split("\n", 1)[1].rsplit("```", 1)[0]
    on_pypy = program_identity(PYPY, SAYS_WHICH, None)
    assert on_pypy is not None and on_pypy.startswith(f"pypy3 {languages.fingerprint('pypy3')}\n")
    assert on_pypy == program_identity(PYPY, SAYS_WHICH, "python3") == program_identity(CPYTHON, SAYS_WHICH, "pypy3")
    on_cpython = program_identity(CPYTHON, SAYS_WHICH, None)
    assert on_cpython is not None and on_cpython.startswith(f"python3 {languages.fingerprint('python3')}\n")
    assert on_pypy.endswith(code) and on_cpython.endswith(code) and on_pypy != on_cpython
    # a worker with another PyPy keys the same job apart: results of one never serve the other
    monkeypatch.setenv("CPFLEET_PYPY", "/opt/another/pypy3")
    languages.table.cache_clear()
    try:
        assert program_identity(PYPY, SAYS_WHICH, None) not in (on_pypy, None)
        assert program_identity(CPYTHON, SAYS_WHICH, None) == on_cpython
    finally:
        monkeypatch.undo()
        languages.table.cache_clear()
