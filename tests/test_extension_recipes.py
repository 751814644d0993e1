"""docs/ARCHITECTURE.md's "Extending cpfleet" recipes, each followed literally with a toy extension
used end to end: a language (one core declaration + one toolchain builder), a checker kind (a
comparison and a program kind), a dataset format (one registration) and an HTTP endpoint (one
protocol module). Each toy is registered for its test only and taken back afterwards."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import start_worker  # noqa: F401  (fixture)

from cpfleet.core import checkers
from cpfleet.core import languages as core_languages
from cpfleet.core.checkers import CheckResult, ProgramSpec
from cpfleet.core.errors import CheckerSpecError
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import checker_programs, languages, selftest
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner

SUM = {
    "id": "recipes/sum", "time_limit_s": 2, "memory_limit_mb": 256,
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}, {"input": "100 1\n", "output": "101\n"}],
}

# --- a language ----------------------------------------------------------------------------------

SH = core_languages.LanguageInfo("toysh", fence_tags=("toysh", "sh"), dataset_names=("sh", "shell"),
                                 extensions=(".sh",))


def _sh_toolchain(env: Mapping[str, str]) -> languages.Language:
    sh = "/bin/sh"
    return languages.Language(
        "toysh", "solution.sh",
        # the syntax check is the compile step (a syntax error is COMPILE_ERROR); the source is the artifact
        languages.CompileStep((sh, "-c", f'{sh} -n "$1" && cp "$1" out/solution.sh', "sh", languages.SOURCES),
                              (sh, "-c", "echo toy-sh 1")),
        (sh, f"{languages.PROG_DIR}/solution.sh"), "address_space", tools=(sh,),
    )


@pytest.fixture
def toy_language() -> Iterator[str]:
    core_languages.register_language(SH)
    languages.register_toolchain("toysh", _sh_toolchain)
    try:
        yield "toysh"
    finally:
        languages.unregister_toolchain("toysh")
        core_languages.unregister_language("toysh")


def test_a_language_is_one_declaration_and_one_toolchain(runner: CodeRunner, toy_language: str) -> None:
    from cpfleet.core.records import languages_for, record_errors

    problem = Problem.from_dict(SUM)
    ok = evaluate(problem, "Here:\n```sh\nread a b\necho $((a + b))\n```\n", runner, job_id="toysh-ok")
    assert (ok.verdict, ok.reward, ok.language) == (Verdict.OK, 1.0, "toysh"), ok.observation
    wrong = evaluate(problem, "```toysh\nread a b\necho $((a - b))\n```", runner, job_id="toysh-wa")
    assert (wrong.verdict, wrong.reward) == (Verdict.WRONG_ANSWER, 0.0)
    broken = evaluate(problem, "```sh\nif then fi (\n```", runner, job_id="toysh-ce")
    assert broken.verdict == Verdict.COMPILE_ERROR and broken.public.run == 0
    # the same declaration serves the problem format, the converters, `cpfleet run` and the self-test
    only_sh = Problem.from_dict({**SUM, "id": "recipes/sum-sh", "languages": ["toysh"]})
    assert evaluate(only_sh, "```python\nprint(3)\n```", runner).verdict == Verdict.NO_CODE
    assert languages_for("shell") == ["toysh"]
    assert record_errors({**SUM, "languages": ["toysh"], "time_limit_multipliers": {"toysh": 2}}) == []
    assert core_languages.by_extension(".sh") == "toysh"
    assert selftest.check("toysh", f"echo {selftest.EXPECTED}\n").ok


@pytest.mark.parametrize("name", [info.name for info in core_languages.BUILTIN])
def test_every_built_in_language_is_one_module_of_the_languages_package_found_by_its_name(name: str) -> None:
    """The recipe's second half for a built-in language: one file, sandbox/languages/<name>.py,
    whose ``toolchain`` and ``SELF_TEST`` the registry binds without any other edit."""
    module = importlib.import_module(f"cpfleet.sandbox.languages.{name}")
    assert languages.TOOLCHAINS[name] is module.toolchain
    assert languages.TOOLCHAINS[name].__module__ == f"cpfleet.sandbox.languages.{name}"
    assert languages.build_table({})[name].name == name
    assert selftest.PROGRAMS[name] == module.SELF_TEST and selftest.EXPECTED in module.SELF_TEST


def test_a_language_without_a_toolchain_is_internal_never_a_verdict(runner: CodeRunner) -> None:
    core_languages.register_language(SH)
    try:
        result = evaluate(Problem.from_dict(SUM), "```sh\nread a b\necho $((a + b))\n```", runner)
    finally:
        core_languages.unregister_language("toysh")
    assert result.verdict == Verdict.INTERNAL and result.infra_error and result.reward is None
    assert "toysh" in result.infra_message and "toolchain" in result.infra_message


def test_a_language_cannot_take_another_ones_fence_tag() -> None:
    with pytest.raises(ValueError, match="fence tag 'cpp'"):
        core_languages.register_language(core_languages.LanguageInfo("cpp2", fence_tags=("cpp",)))
    assert "cpp2" not in core_languages.LANGUAGES


# --- a checker kind ------------------------------------------------------------------------------


class _SortedLines:
    """Accepts the expected lines in any order (a toy comparison checker)."""

    name = "toy_sorted_lines"

    def check(self, expected: str, got: str) -> CheckResult:
        ok = sorted(expected.split()) == sorted(got.split())
        return CheckResult(ok, "" if ok else "not the expected lines in some order")


def _sorted_lines(params: Mapping[str, Any]) -> _SortedLines:
    if params:
        raise CheckerSpecError(f"checker 'toy_sorted_lines' takes no parameters, got {sorted(params)}")
    return _SortedLines()


SET_PROBLEM = {
    "id": "recipes/divisors", "time_limit_s": 2,
    "public_tests": [{"input": "6\n", "output": "1\n2\n3\n6\n"}],
    "hidden_tests": [{"input": "4\n", "output": "1\n2\n4\n"}],
}
DIVISORS_BACKWARDS = "```python\nn = int(input())\nfor d in range(n, 0, -1):\n    if n % d == 0: print(d)\n```"


def test_a_comparison_checker_kind_is_one_registration(runner: CodeRunner, tmp_path: Path) -> None:
    from cpfleet.datasets.prepare import PrepareOptions, PrepareSummary, admit

    checkers.register_checker("toy_sorted_lines", _sorted_lines)
    try:
        rec = {**SET_PROBLEM, "checker": {"type": "toy_sorted_lines"}}
        # the record check of `cpfleet prepare` and the inline problems accepts it, the loader builds it
        assert admit(dict(rec), PrepareOptions(), PrepareSummary(dataset="toy"), set()) is None
        result = evaluate(Problem.from_dict(rec), DIVISORS_BACKWARDS, runner)
        assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation
        with pytest.raises(Exception, match="takes no parameters"):
            Problem.from_dict({**rec, "checker": {"type": "toy_sorted_lines", "x": 1}})
    finally:
        checkers.unregister_checker("toy_sorted_lines")
    from cpfleet.core.records import record_errors

    assert any("toy_sorted_lines" in e for e in record_errors(rec))  # gone with its registration


# a toy program protocol: the checker program gets the output on stdin and the answer file as
# its argument, and exits 0 to accept, anything else to reject
ACCEPTS_SORTED = (
    "import sys\nwant = sorted(open(sys.argv[1]).read().split())\ngot = sorted(sys.stdin.read().split())\n"
    "sys.exit(0 if want == got else 1)\n"
)


def _exit_code_protocol(runner: CodeRunner, spec: ProgramSpec, inp: bytes, ans: bytes,
                        output: bytes) -> checker_programs.CheckerVerdict:
    rr = checker_programs.run_program(runner, spec, output, ["answer"], {"answer": ans})
    why = checker_programs.failed_run(spec, rr)
    if why:
        raise checker_programs.CannotJudge(why, rr)
    return checker_programs.CheckerVerdict(rr.exit_code == 0, "" if rr.exit_code == 0 else "rejected")


def test_a_program_checker_kind_is_one_declaration_and_one_protocol(runner: CodeRunner) -> None:
    checkers.register_checker("toy_exit_code", checkers.program_factory("toy_exit_code"), role=checkers.PROGRAM)
    checker_programs.register_protocol("toy_exit_code", _exit_code_protocol)
    try:
        assert "toy_exit_code" in checkers.program_checkers()
        problem = Problem.from_dict({**SET_PROBLEM, "id": "recipes/divisors-prog",
                                     "checker": {"type": "toy_exit_code", "language": "python3",
                                                 "source": ACCEPTS_SORTED}})
        ok = evaluate(problem, DIVISORS_BACKWARDS, runner)
        assert (ok.verdict, ok.reward) == (Verdict.OK, 1.0), ok.observation
        wrong = evaluate(problem, "```python\nprint(1)\n```", runner)
        assert (wrong.verdict, wrong.reward) == (Verdict.WRONG_ANSWER, 0.0), wrong.observation
    finally:
        checker_programs.unregister_protocol("toy_exit_code")
        checkers.unregister_checker("toy_exit_code")


# --- a dataset format ----------------------------------------------------------------------------


def _toy_convert(row: Mapping[str, Any], index: int, opts: Any, counts: Counter[str]) -> dict[str, Any] | str:
    from cpfleet.core.records import make_record
    from cpfleet.core.testshapes import TestSet

    pairs = [(t["in"], t["out"]) for t in row["toy_cases"]]
    if not pairs:
        return "no cases"
    counts["toy rows"] += 1
    return make_record(f"toy/{row['toy_name']}", TestSet(pairs[:1], pairs[1:]), description=row["toy_statement"],
                       time_limit_s=2.0)


def test_a_dataset_format_is_one_registration(tmp_path: Path) -> None:
    from cpfleet.datasets import formats, prepare

    formats.register_format(formats.DatasetFormat(
        "toy_rows", "a toy format (toy_name, toy_statement, toy_cases)", convert=_toy_convert,
        detect=lambda cols: {"toy_name", "toy_cases"} <= cols, priority=5))
    try:
        src = tmp_path / "toy.jsonl"
        rows = [{"toy_name": "sum", "toy_statement": "add", "toy_cases": [{"in": "1 2\n", "out": "3\n"},
                                                                          {"in": "2 2\n", "out": "4\n"}]},
                {"toy_name": "empty", "toy_statement": "", "toy_cases": []}]
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out = tmp_path / "problems.jsonl"
        summary = prepare.prepare(str(src), out, progress=False)  # told from the columns
        assert summary.format == "toy_rows" and summary.kept == 1 and summary.read == 2
        (rec,) = [json.loads(line) for line in out.read_text().splitlines()]
        assert rec["id"] == "toy/sum" and rec["hidden_tests"] == [{"input": "2 2\n", "output": "4\n"}]
        parser = argparse.ArgumentParser()
        prepare.configure(parser)
        assert "toy_rows" in " ".join(parser.format_help().split())
    finally:
        formats.unregister_format("toy_rows")


def test_each_builtin_dataset_format_is_its_own_module() -> None:
    """A format is one file in cpfleet/datasets/formats/ (APPS shares TACO's schema and file)."""
    from cpfleet.datasets import formats

    home = {name: name for name in formats.names()} | {"apps": "taco"}
    for name, fmt in formats.formats().items():
        converter = fmt.convert or fmt.convert_item
        assert converter is not None
        assert converter.__module__ == f"cpfleet.datasets.formats.{home[name]}", name
    modules = {p.stem for p in (Path(formats.__file__).parent).glob("*.py")} - {"__init__", "common"}
    assert modules == set(formats.BUILTIN_MODULES) == set(home.values())


def test_prepare_help_names_every_registered_format() -> None:
    from cpfleet.datasets import formats

    out = subprocess.run([sys.executable, "-m", "cpfleet", "prepare", "--help"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    help_text = " ".join(out.split())
    names = formats.names()
    assert len(names) >= 8
    for name in names:
        assert f"{name}:" in help_text, name


# --- an HTTP endpoint ----------------------------------------------------------------------------


def test_an_http_endpoint_is_one_protocol_module(redis_url: str, start_worker) -> None:  # noqa: F811
    from gateway_helpers import http, start_server
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from cpfleet.gateway import registry
    from cpfleet.gateway.app import Gateway, HTTPError, ServeConfig
    from cpfleet.producer.client import FleetClient

    @registry.protocol("toy")
    def routes(gw: Gateway) -> Sequence[Route]:
        async def reward(request: Request) -> Response:
            body = await gw.body_json(request)
            if not isinstance(body, dict) or not isinstance(body.get("code"), str):
                raise HTTPError(400, "want {problem_id, code}")
            result = await gw.judge(str(body.get("problem_id")), body["code"])
            return JSONResponse({"reward": result.reward, "verdict": str(result.verdict)})

        return [Route("/toy/reward", gw.endpoint("toy_reward", reward), methods=["POST"])]

    server = None
    try:
        start_worker(redis_url, concurrency=1)
        problem = Problem.from_dict(SUM)
        with FleetClient(redis_url) as fleet:
            fleet.register_problems([problem])
        server, thread, port = start_server(ServeConfig(redis_url=redis_url, timeout_s=120))
        url = f"http://127.0.0.1:{port}/toy/reward"
        status, body, _ = http(url, {"problem_id": problem.id, "code": "```python\nprint(sum(map(int, input().split())))\n```"})
        assert (status, body["reward"], body["verdict"]) == (200, 1.0, str(Verdict.OK)), body
        status, body, _ = http(url, {"problem_id": problem.id, "code": "```python\nprint(0)\n```"})
        assert (status, body["reward"]) == (200, 0.0), body
        status, body, _ = http(url, {"nothing": 1})
        assert status == 400 and "problem_id" in body["error"]
    finally:
        if server is not None:
            server.should_exit = True
            thread.join(timeout=30)
        registry._PROTOCOLS.pop("toy", None)  # the registry keeps no unregister: a test-only undo
