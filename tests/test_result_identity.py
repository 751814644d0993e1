"""The result cache's program identity covers everything that can change a verdict besides the
problem (whose version covers its tests, limits and checker sources): the solution's toolchain
and flags (tests/test_languages.py), the solution interpreter's installed packages, and the
toolchain a checker program is built with, testlib.h included."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpfleet.core.problem import Problem
from cpfleet.sandbox import languages
from cpfleet.sandbox.env import program_identity

SUM = Problem.from_dict({
    "id": "sum", "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}],
})
COMPLETION = "```python\nimport numpy\nprint(sum(map(int, input().split())))\n```"


def _clear_caches() -> None:
    # what a worker computes once per process: a restarted worker starts from nothing
    for cached in (languages.table, languages.toolchain_version, getattr(languages, "installed_packages", None)):
        if cached is not None:
            cached.cache_clear()


@pytest.fixture
def fresh() -> Iterator[None]:
    _clear_caches()
    yield
    _clear_caches()


def test_a_package_installed_into_the_solution_interpreter_changes_the_identity(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setenv("CPFLEET_SOLUTION_PYTHON", python)
    _clear_caches()
    before = program_identity(SUM, COMPLETION, None)
    _clear_caches()
    assert program_identity(SUM, COMPLETION, None) == before  # stable while nothing changes
    # what `pip install numpy==2.0.0` leaves in site-packages
    (Path(site) / "numpy").mkdir()
    (Path(site) / "numpy-2.0.0.dist-info").mkdir()
    _clear_caches()
    after = program_identity(SUM, COMPLETION, None)
    assert before is not None and after is not None and before != after
    (Path(site) / "numpy-2.0.0.dist-info").rename(Path(site) / "numpy-2.1.0.dist-info")  # an upgrade
    _clear_caches()
    upgraded = program_identity(SUM, COMPLETION, None)
    assert upgraded not in (before, after)


def _testlib_problem() -> Problem:
    checker = {"type": "testlib", "source": '#include "testlib.h"\nint main(int c, char** v) '
               '{ registerTestlibCmd(c, v); ouf.readInt(); quitf(_ok, "ok"); }\n'}
    return Problem.from_dict({**SUM.to_dict(), "id": "sum-testlib", "checker": checker})


def test_the_testlib_header_a_checker_is_built_with_changes_the_identity(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> None:
    header = tmp_path / "testlib.h"
    header.write_text("// testlib 0.9.41\n")
    monkeypatch.setenv("CPFLEET_TESTLIB_DIR", str(tmp_path))
    problem = _testlib_problem()
    before = program_identity(problem, COMPLETION, None)
    header.write_text("// testlib 0.9.42: another float comparison\n")
    after = program_identity(problem, COMPLETION, None)
    assert before is not None and after is not None and before != after
    # a problem compared by a built-in checker does not depend on it
    plain = program_identity(SUM, COMPLETION, None)
    header.write_text("// testlib 0.9.43\n")
    assert program_identity(SUM, COMPLETION, None) == plain


def test_the_checker_programs_compiler_setting_changes_the_identity(monkeypatch: pytest.MonkeyPatch,
                                                                     fresh: None) -> None:
    problem = _testlib_problem()
    before = program_identity(problem, COMPLETION, None)
    monkeypatch.setenv("CPFLEET_CPP_STD", "c++20")  # the checker is C++; the solution Python
    _clear_caches()
    after = program_identity(problem, COMPLETION, None)
    assert before is not None and after is not None and before != after
    assert program_identity(SUM, COMPLETION, None) is not None
