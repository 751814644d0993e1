"""What a new user hits first: the demo helpers imported from a script that sits next to a
checkout named ``cpfleet``, the demo's syntax-error completion, where every command (and
``FleetClient()``) finds Redis, and what ``cpfleet --help`` says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from fleet_helpers import store_problems

from cpfleet.core.problem import Problem
from cpfleet.demo import problems as dp
from cpfleet.producer.client import FleetClient

REPO = Path(__file__).resolve().parents[1]


def _is_valid_python(code: str) -> bool:
    try:
        compile(code, "<completion>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


# --- the demo's syntax-error completion is never valid Python --------------------------------


def test_the_syntax_error_mutation_breaks_code_whose_first_colon_is_in_a_comment() -> None:
    code = "# read the input:\nn = int(input())\nfor i in range(n):\n    print(i)\n"
    assert not _is_valid_python(dp.syntax_error(code))


def test_the_syntax_error_mutation_breaks_code_without_any_colon_or_with_one_in_a_string() -> None:
    for code in ("print(int(input()) * 2)\n", 's = "a:"\nprint(s)\n', "x = {1:\n2}\nprint(x)\n"):
        assert not _is_valid_python(dp.syntax_error(code)), code


def test_the_syntax_error_completion_of_every_shipped_demo_problem_is_invalid() -> None:
    problems = dp.load_shipped()
    assert problems
    for spec in dp.SPECS:
        assert not _is_valid_python(dp.syntax_error(spec.reference)), spec
    from cpfleet.demo.command import generic_completions

    for problem in problems:
        text = generic_completions(problem).get("syntax_error")
        if text is not None:
            assert not _is_valid_python(_code_of(text)), problem.id


def test_the_syntax_error_completion_of_every_shared_codecontests_problem_is_invalid(
    codecontests_records: list[dict],
) -> None:
    from cpfleet.demo.command import generic_completions

    checked = 0
    for record in codecontests_records:
        problem = Problem.from_dict(record)
        text = generic_completions(problem).get("syntax_error")
        if text is not None:
            checked += 1
            assert not _is_valid_python(_code_of(text)), problem.id
    assert checked == len(codecontests_records)


def _code_of(completion: str) -> str:
    from cpfleet.sandbox.extract import extract_code

    code = extract_code(completion)
    assert code is not None
    return code


# --- a script next to a checkout named cpfleet ----------------------------------------------


def test_the_demo_helpers_load_from_a_script_next_to_a_checkout_named_cpfleet(tmp_path: Path) -> None:
    """``import cpfleet`` from such a script sees the checkout directory as a namespace
    portion; the shipped data must still be found (no MultiplexedPath.joinpath crash)."""
    (tmp_path / "cpfleet").mkdir()
    (tmp_path / "cpfleet" / "README.md").write_text("a checkout of the project\n")
    script = tmp_path / "trainer.py"
    script.write_text(
        "from cpfleet.demo.problems import demo_completions, load_shipped\n"
        "problems = load_shipped()\n"
        "samples = demo_completions()\n"
        "print(len(problems), len(samples))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    n_problems, n_samples = map(int, out.stdout.split())
    assert n_problems > 0 and n_samples == n_problems


# --- one Redis default, read by every command and by FleetClient() ---------------------------


def test_fleet_client_without_a_url_reads_cpfleet_redis_url(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPFLEET_REDIS_URL", redis_url)
    store_problems(redis_url, "t/echo")
    with FleetClient(queue="nobody-listens-env") as client:
        assert client.redis_url == redis_url
        client.submit("t/echo", "print(1)")
        assert redis.Redis.from_url(redis_url).llen("nobody-listens-env") == 1  # (close() withdraws it)


def test_cpfleet_submit_without_redis_reads_cpfleet_redis_url(redis_url: str, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"problem_id": "t/none", "completion": "print(1)", "job_id": "j1"}) + "\n")
    store_problems(redis_url, "t/none")
    env = {**os.environ, "CPFLEET_REDIS_URL": redis_url}
    out = subprocess.run(
        [sys.executable, "-m", "cpfleet", "submit", str(jobs), "--queue", "nobody-listens-cli", "--timeout", "1", "--no-progress"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert "required" not in out.stderr, out.stderr
    assert redis.Redis.from_url(redis_url).llen("nobody-listens-cli") == 1  # it published to $CPFLEET_REDIS_URL
    (line,) = out.stdout.splitlines()
    assert json.loads(line)["job_id"] == "j1"


@pytest.mark.parametrize("command", ["load", "submit", "worker"])
def test_every_redis_command_names_the_same_default_in_its_help(command: str) -> None:
    out = subprocess.run([sys.executable, "-m", "cpfleet", command, "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "$CPFLEET_REDIS_URL" in text and "redis://127.0.0.1:6379/0" in text


# --- cpfleet --help speaks to users -----------------------------------------------------------


def test_cpfleet_help_describes_the_tool_not_its_source() -> None:
    out = subprocess.run([sys.executable, "-m", "cpfleet", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "configure(parser)" not in out.stdout and "subcommand lives" not in out.stdout.lower()
    assert "rewards" in out.stdout and "cpfleet demo" in out.stdout and "CPFLEET_REDIS_URL" in out.stdout


# --- the shared data is found without a variable ----------------------------------------------


def test_the_shared_data_is_found_beside_the_repository_or_a_parent_without_a_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from conftest import SHARED_DATA_ENV, find_shared_data

    monkeypatch.delenv(SHARED_DATA_ENV, raising=False)
    present = [p / "shared" / "data" for p in REPO.parents if (p / "shared" / "data").is_dir()]
    if not present:
        pytest.skip("no shared/data beside this repository or its parents")
    assert find_shared_data() == present[0]
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path))
    assert find_shared_data() == tmp_path  # the variable points elsewhere


# --- docs/problems.md lists the problem record's fields ---------------------------------------


def test_docs_problems_lists_every_field_of_the_problem_record_with_type_and_default() -> None:
    import dataclasses

    from cpfleet.core.problem import Problem, TestCase

    doc = (REPO / "docs" / "problems.md").read_text()
    section = doc.split("## The problem record", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    for f in dataclasses.fields(Problem):
        assert f.name in rows, f"docs/problems.md does not list the field {f.name!r}"
        _, kind, default, meaning = rows[f.name]
        assert kind and default and meaning, f.name
    for name in (f.name for f in dataclasses.fields(TestCase)):
        assert f"`{name}`" in section, name
    # the documented defaults are the code's
    bare = Problem.from_dict({"id": "p"})
    assert rows["time_limit_s"][2] == f"`{bare.time_limit_s}`"
    assert rows["memory_limit_mb"][2] == f"`{bare.memory_limit_mb}`"
    assert rows["checker"][2] == f"`{json.dumps(bare.checker)}`"
