"""The README, tried as a new user would: its commands parse, its tour and its Python examples
run against a real local fleet and agree with the local judge, every command in it is run by a
named test, it stays a guide (under 350 lines, no developer-only paths), and the configuration
table (docs/configuration.md) lists every setting the worker reads, with the right default."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cpfleet.cli import build_parser
from cpfleet.fleet.local import LocalFleet
from cpfleet.workers.config import SETTINGS

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
CONFIGURATION = (REPO / "docs" / "configuration.md").read_text()
DEPLOYMENT = (REPO / "docs" / "deployment.md").read_text()
BIN = Path(sys.executable).parent
DEFAULT_URL = "redis://127.0.0.1:6379/0"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README, re.M | re.S)


def commands(block: str) -> list[str]:
    block = block.replace("\\\n", " ")  # a command continued over several lines is one command
    return [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_the_two_commands_on_top_are_install_plus_demo_and_the_test_script() -> None:
    first = commands(blocks("bash")[0])
    assert first == [
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/cpfleet demo",
        "scripts/test",
    ]
    assert README.index("```bash") < README.index("## What it is")
    assert os.access(REPO / "scripts" / "test", os.X_OK)


def test_every_cpfleet_command_in_the_readme_parses() -> None:
    seen = 0
    for block in blocks("bash"):
        for line in commands(block):
            for part in line.split("&&"):
                argv = shlex.split(part.split(">")[0], comments=True)
                if not argv or not argv[0].endswith("cpfleet"):
                    continue
                parser, _ = build_parser(argv[1:])
                parser.parse_args(argv[1:])  # SystemExit on an unknown option or command
                seen += 1
    assert seen >= 6


def test_every_script_the_readme_runs_exists() -> None:
    for block in blocks("bash"):
        for line in commands(block):
            for word in shlex.split(line, comments=True):
                word = word.rpartition("=")[2]  # a config line: key=path/to/file.py
                if word.endswith(".py") and "/" in word and "://" not in word:
                    assert (REPO / word).is_file(), word


def test_the_configuration_table_lists_every_setting_with_its_default() -> None:
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([A-Z_]+)` \| ([^|]+) \|", CONFIGURATION, re.M)}
    for s in SETTINGS:
        assert s.env in rows, f"{s.env} missing from docs/configuration.md's table"
        shown = rows[s.env].strip()
        assert shown == (f"`{s.default}`" if s.default else "(unset)"), f"{s.env}: README {shown}, code {s.default!r}"
    for extra in ("CPFLEET_METRICS_PORT", "PROMETHEUS_MULTIPROC_DIR", "FLOWER_BASIC_AUTH"):
        assert extra in rows


def test_the_keda_example_is_valid_yaml_scaling_on_the_queue_list() -> None:
    (keda,) = [b for b in re.findall(r"^```yaml\n(.*?)^```", DEPLOYMENT, re.M | re.S) if "ScaledObject" in b]
    obj = yaml.safe_load(keda)
    trigger = obj["spec"]["triggers"][0]
    assert trigger["type"] == "redis"
    from cpfleet.core.protocol import DEFAULT_QUEUE

    assert trigger["metadata"]["listName"] == DEFAULT_QUEUE


def test_the_readme_is_a_guide_under_350_lines_without_developer_paths() -> None:
    assert len(README.splitlines()) < 350
    for text in (README, *(p.read_text() for p in (REPO / "docs").glob("*.md"))):
        assert "../shared" not in text  # a user has no such folder: CPFLEET_SHARED_DATA names it
    for link in re.findall(r"\]\(((?:docs/)[^)#]+)", README):
        assert (REPO / link).exists(), link


# Every command line of the README, and the test that runs it as written.
RUN_BY = [
    (r"^python3 -m venv \.venv && \.venv/bin/pip install -e '\.\[test\]' && \.venv/bin/cpfleet demo$",
     "test_up_demo.py::test_cpfleet_demo_gets_every_expected_verdict_and_leaves_nothing_running"),
    (r"^scripts/test$", "the suite itself"),
    (r"^\.venv/bin/(python -m cpfleet\.demo\.problems|cpfleet (judge|up|load|submit)) ",
     "test_readme.py::test_the_tour_runs_and_the_fleet_agrees_with_the_local_judge"),
    (r"^\.venv/bin/cpfleet up$", "test_readme.py::test_the_tour_runs_and_the_fleet_agrees_with_the_local_judge"),
    (r"^python3 -m verl\.trainer\.main_ppo\s+custom_reward_function",
     "test_readme_trainers.py::test_the_verl_config_lines_load_and_score_as_verl_calls_them"),
    (r"^(\.venv/bin/cpfleet serve |python3 -m openrlhf|python3 train\.py|python3 -m verl\.trainer\.main_ppo reward\.sandbox_fusion|export SANDBOX_FUSION_ENDPOINT=)",
     "test_readme_trainers.py::test_the_serve_recipe_answers_every_client_line"),
    (r"^export FLOWER_BASIC_AUTH=|^docker compose up ", "test_compose.py (the compose file; no Docker engine here)"),
]


def test_every_command_in_the_readme_is_run_by_a_named_test() -> None:
    unrun = []
    for block in blocks("bash"):
        for line in commands(block):
            owners = [owner for pattern, owner in RUN_BY if re.search(pattern, line)]
            if not owners:
                unrun.append(line)
            for owner in owners:
                if "::" in owner:
                    module, name = owner.split("::")
                    assert f"def {name}(" in (REPO / "tests" / module).read_text(), owner
    assert not unrun, f"README commands no test runs: {unrun}"


def _fenced() -> list[tuple[str, str]]:
    """(tag, body) of every fenced block, read line by line (a fence opens, the next one closes)."""
    out, tag, body = [], None, []
    for line in README.splitlines():
        if line.startswith("```"):
            if tag is None:
                tag, body = line[3:].strip(), []
            else:
                out.append((tag, "\n".join(body)))
                tag = None
        elif tag is not None:
            body.append(line)
    assert tag is None, "an unclosed fence"
    return out


def test_every_fenced_block_of_the_readme_is_one_a_test_runs() -> None:
    """bash: each line by RUN_BY above; python: the client's two examples (below) and the TRL
    recipe (test_readme_trainers); json: the problem example; untagged: pictures, not recipes."""
    tags = [tag for tag, _ in _fenced()]
    assert sorted(set(tags)) == ["", "bash", "json", "python"], tags
    assert tags.count("python") == 3 and tags.count("json") == 1
    trainers = (REPO / "tests" / "test_readme_trainers.py").read_text()
    assert "def test_the_trl_recipe_runs_as_written(" in trainers and "TRL rewards: [1.0, 0.0]" in trainers
    for tag, body in _fenced():
        if not tag:
            assert not re.search(r"^\s*(\.venv/bin/|cpfleet |python|pip |docker |export )", body, re.M), body


def test_the_problem_example_is_a_judgeable_problem() -> None:
    from cpfleet.core.problem import Problem, validate_for_judging

    (example,) = blocks("json")
    validate_for_judging(Problem.from_dict(json.loads(example)), "full")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFleet]:
    with LocalFleet(flower_port=None, metrics_port=None, log_dir=str(tmp_path_factory.mktemp("logs"))) as f:
        yield f


def _run(line: str, cwd: Path, url: str) -> None:
    line = line.replace(".venv/bin/", f"{BIN}/").replace(DEFAULT_URL, url)
    proc = subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{line}\n{proc.stderr[-3000:]}"


@pytest.mark.slow
def test_the_tour_runs_and_the_fleet_agrees_with_the_local_judge(fleet: LocalFleet, tmp_path: Path) -> None:
    (tour,) = [b for b in blocks("bash") if "cpfleet judge" in b and "cpfleet up" in b]
    lines = commands(tour)
    assert any(ln.endswith("cpfleet up") for ln in lines)
    for line in lines:
        if line.endswith("cpfleet up"):
            continue  # the fixture's fleet plays the second terminal
        _run(line, tmp_path, str(fleet.redis_url))
    judged = {r["job_id"]: r for r in map(json.loads, (tmp_path / "judged.jsonl").read_text().splitlines())}
    through_fleet = {r["job_id"]: r for r in map(json.loads, (tmp_path / "fleet.jsonl").read_text().splitlines())}
    assert len(judged) == 72
    assert {k: v["verdict"] for k, v in judged.items()} == {k: v["verdict"] for k, v in through_fleet.items()}
    assert {k: v["reward"] for k, v in judged.items()} == {k: v["reward"] for k, v in through_fleet.items()}


@pytest.mark.slow
def test_the_python_examples_run_against_a_fleet(fleet: LocalFleet, tmp_path: Path) -> None:
    grpo, agentic = blocks("python")[:2]  # the producer API's two examples (the trainer recipes: test_readme_trainers)
    env = {**os.environ, "CPFLEET_REDIS_URL": str(fleet.redis_url)}
    out = []
    for code in (grpo, agentic):
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out.append(proc.stdout)
    m = re.search(r"^72 completions, mean reward ([\d.]+)$", out[0], re.M)
    assert m and 0 < float(m.group(1)) < 1, out[0]
    assert "=== sample test 1/" in out[0]  # the observation a model sees
    assert "episode rewards: [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]" in out[1]
