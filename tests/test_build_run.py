"""Kattis program folders with their own ``build`` and ``run`` scripts (problemtools' BuildRun):
an output validator or interactor shipped as several sources with its own build steps is built
by its ``build`` script, confined and cached like a compiled checker, and ``run`` is then the
program; a folder with only a ``run`` script is run as it is. Judged end to end through
``evaluate`` on both runners, and converted so by ``cpfleet prepare``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core.checkers import get_checker
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import checker_programs, languages, programs
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner

# Two translation units the build script compiles and links; `run` is shipped and finds the
# binary next to itself, as problemtools' examples do.
BUILD = "#!/bin/sh\nset -e\ng++ -O2 -o validator validate.cpp compare.cpp\n"
RUN = '#!/bin/sh\nexec "$(dirname "$0")/validator" "$@"\n'
VALIDATE = r"""
#include <cstdio>
#include <fstream>
bool same(long long a, long long b);
int main(int argc, char **argv) {
    std::ifstream ans(argv[2]);
    long long want, got;
    ans >> want;
    if (scanf("%lld", &got) != 1) return 43;
    return same(want, got) ? 42 : 43;
}
"""
COMPARE = "bool same(long long a, long long b) { return a == b; }\n"
FOLDER = "output_validators/sum_validator/"


def _files(build: str = BUILD) -> dict[str, str]:
    return {FOLDER + "build": build, FOLDER + "run": RUN, FOLDER + "validate.cpp": VALIDATE,
            FOLDER + "compare.cpp": COMPARE}


def _problem(pid: str, checker: dict[str, Any]) -> Problem:
    return Problem.from_dict({
        "id": pid, "time_limit_s": 2,
        "public_tests": [{"input": "1 2\n", "output": "3\n"}],
        "hidden_tests": [{"input": "5 7\n", "output": "12\n"}, {"input": "100 1\n", "output": "101\n"}],
        "checker": checker,
    })


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```\n"


SUM = _fenced("a, b = map(int, input().split())\nprint(a + b)")
PRODUCT = _fenced("a, b = map(int, input().split())\nprint(a * b)")


def _needs_cpp() -> None:
    if languages.missing_tools("cpp"):
        pytest.skip("g++ not installed here")


def test_a_build_script_folder_is_a_build_run_program() -> None:
    # whatever language the record names: problemtools builds a folder with `build` by it
    spec = get_checker({"type": "kattis_validator", "files": _files(), "language": "cpp",
                        "entry_points": [FOLDER + "validate.cpp"]})
    assert isinstance(spec, checker_programs.ProgramSpec)
    assert (spec.language, spec.entry_points) == ("build_run", (FOLDER + "build",))
    assert sorted(checker_programs.program_folder(spec)) == ["build", "compare.cpp", "run", "validate.cpp"]


def test_a_validator_built_by_its_build_script_judges(runner: CodeRunner) -> None:
    _needs_cpp()
    problem = _problem("buildrun/sum", {"type": "kattis_validator", "files": _files()})
    good = evaluate(problem, SUM, runner)
    assert (good.verdict, good.reward, good.infra_error) == (Verdict.OK, 1.0, False), good.observation
    bad = evaluate(problem, PRODUCT, runner)
    assert (bad.verdict, bad.reward, bad.infra_error) == (Verdict.WRONG_ANSWER, 0.0, False), bad.observation


def test_the_build_is_cached_like_a_compile(runner: CodeRunner, tmp_path: Path) -> None:
    _needs_cpp()
    folder = {"build": BUILD, "run": RUN, "validate.cpp": VALIDATE, "compare.cpp": COMPARE}
    cache = programs.CompileCache(str(tmp_path))
    first = programs.build_run_program(runner, folder, cache=cache)
    again = programs.build_run_program(runner, folder, cache=cache)
    assert first.ok and again.ok and not first.cache_hit and again.cache_hit
    assert again.image is not None and again.image.argv == ("{prog}/run",)
    assert {"run", "validator"} <= set(again.image.files)


def test_a_failing_build_script_is_a_broken_problem_naming_it(runner: CodeRunner) -> None:
    broken = BUILD.replace("compare.cpp", "missing.cpp")
    problem = _problem("buildrun/broken", {"type": "kattis_validator", "files": _files(broken)})
    result = evaluate(problem, SUM, runner)
    assert result.infra_error and result.reward is None and result.verdict == Verdict.INTERNAL
    assert "missing.cpp" in result.observation


def test_a_build_that_leaves_no_run_script_is_a_broken_problem(runner: CodeRunner) -> None:
    files = {FOLDER + "build": "#!/bin/sh\ntrue\n", FOLDER + "validate.cpp": VALIDATE}
    result = evaluate(_problem("buildrun/norun", {"type": "kattis_validator", "files": files}), SUM, runner)
    assert result.infra_error and result.reward is None
    assert 'did not produce an executable called "run"' in result.observation


# A build that links `run` to the program (a symbolic or a hard link; problemtools runs the folder
# in place, where the link works) was read back as a tar holding a link, which the compile path
# refused as a sandbox failure: every job of the problem INTERNAL, labelled the sandbox's, and
# the build run again for each. The folder is now kept with its links followed.
@pytest.mark.parametrize("link", ["ln -s validator run", "ln validator run"], ids=["symlink", "hardlink"])
def test_a_build_that_links_run_to_its_validator_judges(runner: CodeRunner, link: str) -> None:
    _needs_cpp()
    build = "#!/bin/sh\nset -e\nrm run\ng++ -O2 -o validator validate.cpp compare.cpp\n" + link + "\n"
    problem = _problem(f"buildrun/{link.split()[1]}", {"type": "kattis_validator", "files": _files(build)})
    good = evaluate(problem, SUM, runner)
    assert (good.verdict, good.reward, good.infra_error) == (Verdict.OK, 1.0, False), good.observation
    bad = evaluate(problem, PRODUCT, runner)
    assert (bad.verdict, bad.reward, bad.infra_error) == (Verdict.WRONG_ANSWER, 0.0, False), bad.observation


# problemtools discards what a build prints; a build printing more than the cap of a compile's
# messages (1 MiB: a make echoing every command, a verbose compiler) was stopped at that cap, and
# every job of the problem was INTERNAL, the build run again each time. Only a failed build's
# last output is kept, as its diagnostics.
def test_a_build_that_prints_megabytes_judges_and_a_failing_one_keeps_its_last_words(runner: CodeRunner) -> None:
    _needs_cpp()
    chatty = "#!/bin/sh\nset -e\nhead -c 3000000 /dev/zero | tr '\\0' x\necho\n" \
             "g++ -O2 -o validator validate.cpp compare.cpp\n"
    problem = _problem("buildrun/chatty", {"type": "kattis_validator", "files": _files(chatty)})
    good = evaluate(problem, SUM, runner)
    assert (good.verdict, good.reward, good.infra_error) == (Verdict.OK, 1.0, False), good.observation
    bad = evaluate(problem, PRODUCT, runner)
    assert (bad.verdict, bad.reward, bad.infra_error) == (Verdict.WRONG_ANSWER, 0.0, False), bad.observation
    failing = chatty.replace("compare.cpp", "missing.cpp")
    broken = evaluate(_problem("buildrun/chatty-broken", {"type": "kattis_validator", "files": _files(failing)}),
                      SUM, runner)
    assert broken.infra_error and broken.reward is None and "missing.cpp" in broken.observation


def test_a_build_that_leaves_a_fifo_is_a_broken_problem_not_a_sandbox_failure(runner: CodeRunner) -> None:
    files = {FOLDER + "build": "#!/bin/sh\nmkfifo pipe\n", FOLDER + "run": RUN}
    result = evaluate(_problem("buildrun/fifo", {"type": "kattis_validator", "files": files}), SUM, runner)
    assert result.infra_error and result.reward is None
    assert "checker error" in result.infra_message and "cannot be kept" in result.infra_message


INTERACTOR = r"""
import sys
secret = int(open(sys.argv[1]).read())
lo_hi = []
for _ in range(12):
    guess = int(sys.stdin.readline())
    if guess == secret:
        print("correct", flush=True)
        sys.exit(42)
    print("higher" if guess < secret else "lower", flush=True)
sys.exit(43)
"""
BINARY_SEARCH = _fenced("""lo, hi = 1, 1000
while True:
    mid = (lo + hi) // 2
    print(mid, flush=True)
    r = input()
    if r == "correct":
        break
    if r == "higher":
        lo = mid + 1
    else:
        hi = mid - 1""")


def test_an_interactor_folder_with_only_a_run_script_is_run_as_it_is(runner: CodeRunner) -> None:
    files = {"output_validators/guess/run": '#!/bin/sh\nexec python3 "$(dirname "$0")/interactor.py" "$@"\n',
             "output_validators/guess/interactor.py": INTERACTOR}
    problem = Problem.from_dict({
        "id": "buildrun/guess", "time_limit_s": 2,
        "public_tests": [{"input": "37\n", "output": ""}], "hidden_tests": [{"input": "999\n", "output": ""}],
        "checker": {"type": "interactive", "language": "build_run", "files": files},
    })
    good = evaluate(problem, BINARY_SEARCH, runner)
    assert (good.verdict, good.reward, good.infra_error) == (Verdict.OK, 1.0, False), good.observation
    linear = _fenced("g = 1\nwhile True:\n    print(g, flush=True)\n    if input() == 'correct':\n        break\n    g += 1")
    bad = evaluate(problem, linear, runner)
    assert (bad.verdict, bad.reward) == (Verdict.WRONG_ANSWER, 0.0), bad.observation


def test_prepare_converts_a_package_with_build_and_run_scripts(tmp_path: Path) -> None:
    from cpfleet.datasets.formats.kattis import convert_package
    from cpfleet.datasets.prepare import PrepareOptions

    pkg = tmp_path / "contest" / "sum"
    (pkg / "data" / "sample").mkdir(parents=True)
    (pkg / "data" / "secret").mkdir(parents=True)
    (pkg / "problem.yaml").write_text("name: Sum\nvalidation: custom\n")
    (pkg / "data" / "sample" / "1.in").write_text("1 2\n")
    (pkg / "data" / "sample" / "1.ans").write_text("3\n")
    (pkg / "data" / "secret" / "1.in").write_text("5 7\n")
    (pkg / "data" / "secret" / "1.ans").write_text("12\n")
    for path, text in _files().items():
        target = pkg / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    rec = convert_package(pkg, "contest/sum", PrepareOptions(), Counter())
    assert isinstance(rec, dict), rec
    checker = json.loads(json.dumps(rec["checker"]))
    assert checker["type"] == "kattis_validator" and checker["language"] == "build_run"
    assert checker["entry_points"] == [FOLDER + "build"]
    spec = get_checker(checker)
    assert isinstance(spec, checker_programs.ProgramSpec) and spec.language == "build_run"


def test_a_build_run_checker_has_a_result_cache_identity() -> None:
    from cpfleet.sandbox.env import program_identity

    identity = program_identity(_problem("buildrun/id", {"type": "kattis_validator", "files": _files()}), SUM, None)
    assert identity is not None and identity.startswith("checker build_run ")


def test_a_build_run_checker_passes_the_record_schema_check() -> None:
    from cpfleet.core.records import checker_errors

    assert checker_errors({"type": "kattis_validator", "files": _files(), "language": "build_run",
                           "entry_points": [FOLDER + "build"]}) == []
