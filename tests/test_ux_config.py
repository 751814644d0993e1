"""Every CPFLEET_* environment variable has one rule (core/envvars.py), a row in
docs/configuration.md, and a garbage value stops every entry point at start, in one line naming
the variable and what it accepts, exit status 2, never a traceback: through the real CLI (both
spellings), the worker's start, and the Python API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cpfleet.core import envvars
from cpfleet.core.errors import ConfigError, CpfleetError

REPO = Path(__file__).resolve().parents[1]
CONFIGURATION = (REPO / "docs" / "configuration.md").read_text()
GARBAGE = ("garbage", "-5", "0.5", "70000", "")


def _names_in(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        found |= set(re.findall(r"\bCPFLEET_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")))
    return found


def _code_files() -> list[Path]:
    files = [p for d in ("core", "sandbox", "workers", "producer", "cpfleet", "bench", "scripts") for p in (REPO / d).rglob("*")
             if p.is_file() and p.suffix in (".py", ".sh", "")]
    return files + [REPO / "Dockerfile", REPO / "docker-compose.yml", *(REPO / "docker").glob("*.*")]


def test_every_variable_the_code_reads_has_one_rule_and_a_row_in_the_docs() -> None:
    named = _names_in(_code_files()) - envvars.TOOLING - {"CPFLEET_"}
    assert named - set(envvars.BY_NAME) == set(), "variables without a rule in core/envvars.py"
    rows = set(re.findall(r"^\| `(CPFLEET_[A-Z0-9_]+)`(?:, `(CPFLEET_[A-Z0-9_]+)`)? \|", CONFIGURATION, re.M))
    documented = {n for row in rows for n in row if n}
    assert set(envvars.BY_NAME) - documented == set(), "variables missing from docs/configuration.md's table"


def _garbage_for(var: envvars.EnvVar) -> str | None:
    for value in GARBAGE[:-1]:
        try:
            var.parse(value)
        except ValueError:
            return value
    return None  # free text (a folder, an executable): checked where it is used


CHECKED = [(v.name, g) for v in envvars.VARIABLES if (g := _garbage_for(v)) is not None and v.name != "CPFLEET_REDIS_URL"]


def test_the_checked_variables_are_the_ones_with_a_shape() -> None:
    assert len(CHECKED) >= 30, CHECKED
    assert {"CPFLEET_FORK_AHEAD", "CPFLEET_CPP_STD", "CPFLEET_TIME_MULTIPLIERS", "CPFLEET_SOFT_TIME_LIMIT",
            "CPFLEET_METRICS_PORT", "CPFLEET_SANDBOX_UID_BASE", "CPFLEET_COMPILE_CACHE_MB"} <= {n for n, _ in CHECKED}


def _cli(args: list[str], env_extra: dict[str, str], *, module: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")} | env_extra
    argv = [sys.executable, "-m", "cpfleet", *args] if module else [str(Path(sys.executable).parent / "cpfleet"), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


def _assert_one_clear_line(proc: subprocess.CompletedProcess[str], name: str, value: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if name in ln]
    assert f"{name}={value!r} is not valid" in line and "accepted: " in line, line


@pytest.mark.parametrize(("name", "value"), CHECKED)
def test_a_garbage_value_stops_cpfleet_judge_before_it_reads_anything(name: str, value: str, tmp_path: Path) -> None:
    # the files do not exist: the variable is refused first, so nothing was read or started
    proc = _cli(["judge", str(tmp_path / "p.jsonl"), str(tmp_path / "j.jsonl")], {name: value}, module=CHECKED.index((name, value)) % 2 == 1)
    _assert_one_clear_line(proc, name, value)
    assert "not found" not in proc.stderr


@pytest.mark.parametrize(("name", "value"), [("CPFLEET_CPP_STD", "cxx"), ("CPFLEET_RESULT_CACHE", "maybe"),
                                             ("CPFLEET_CONCURRENCY", "lots"), ("CPFLEET_METRICS_PORT", "abc")])
def test_a_worker_refuses_to_start_on_a_garbage_value(name: str, value: str) -> None:
    proc = _cli(["worker", "--dry-run"], {name: value})
    _assert_one_clear_line(proc, name, value)


def test_a_worker_names_both_variables_when_two_settings_disagree() -> None:
    proc = _cli(["worker", "--dry-run"], {"CPFLEET_SOFT_TIME_LIMIT": "700"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "CPFLEET_SOFT_TIME_LIMIT (700) must be below CPFLEET_HARD_TIME_LIMIT (630)" in proc.stderr


def test_every_bad_variable_is_named_on_its_own_line() -> None:
    proc = _cli(["judge", "p", "j"], {"CPFLEET_RUNNER": "docker", "CPFLEET_PCH": "yes"})
    assert proc.returncode == 2
    assert [ln.split("=")[0] for ln in proc.stderr.splitlines()] == ["cpfleet judge: CPFLEET_RUNNER", "cpfleet judge: CPFLEET_PCH"]


def test_a_misspelled_variable_is_named_with_the_one_it_resembles(tmp_path: Path) -> None:
    proc = _cli(["judge", str(tmp_path / "p.jsonl"), "j"], {"CPFLEET_CONCURENCY": "4"})
    assert "warning: CPFLEET_CONCURENCY is not a cpfleet setting; did you mean CPFLEET_CONCURRENCY?" in proc.stderr
    assert "problem file not found" in proc.stderr  # only a warning: the command went on
    assert envvars.misspelled({name: "1" for name in envvars.TOOLING} | {"CPFLEET_QUEUE": "a"}) == [
        ("CPFLEET_QUEUE", "CPFLEET_QUEUES")
    ]


def test_a_garbage_redis_url_variable_is_ignored_by_commands_without_redis_and_named_by_the_others(tmp_path: Path) -> None:
    judge = _cli(["judge", str(tmp_path / "p.jsonl"), "j"], {"CPFLEET_REDIS_URL": "http://x"})
    assert "problem file not found" in judge.stderr and "CPFLEET_REDIS_URL" not in judge.stderr
    submit = _cli(["submit", str(tmp_path / "j.jsonl")], {"CPFLEET_REDIS_URL": "http://x"})
    assert submit.returncode == 2 and "Traceback" not in submit.stderr
    assert "$CPFLEET_REDIS_URL" in submit.stderr and "unknown scheme" in submit.stderr


def test_the_python_api_raises_config_error_naming_the_variable() -> None:
    from cpfleet.sandbox.languages import build_table
    from cpfleet.workers.config import Settings

    with pytest.raises(ConfigError, match=r"CPFLEET_NODE_TTL='0\.5' is not valid") as caught:
        Settings.from_env({"CPFLEET_NODE_TTL": "0.5"})
    assert isinstance(caught.value, CpfleetError) and isinstance(caught.value, ValueError)
    assert caught.value.variable == "CPFLEET_NODE_TTL"
    with pytest.raises(ConfigError, match="CPFLEET_JAVA_GC='zgc' is not valid.*accepted: serial or g1"):
        build_table({"CPFLEET_JAVA_GC": "zgc"})
    for std in ("c++17", "gnu++2a", "c++1z", "gnu++98"):
        assert envvars.read("CPFLEET_CPP_STD", env={"CPFLEET_CPP_STD": std}) == std
    assert envvars.read("CPFLEET_COMPILE_CACHE_MB", 512, env={"CPFLEET_COMPILE_CACHE_MB": " "}) == 512  # blank: the default


def test_a_runner_made_through_the_api_refuses_a_garbage_setting_before_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from cpfleet import ConfigError as Exported
    from cpfleet import RedisUrlError  # noqa: F401  (both are part of the import surface)
    from cpfleet.sandbox.runner import make_runner

    assert Exported is ConfigError
    monkeypatch.setenv("CPFLEET_FORK_AHEAD", "maybe")
    with pytest.raises(ConfigError, match="CPFLEET_FORK_AHEAD='maybe' is not valid.*accepted: auto, 1 or 0"):
        make_runner("forkserver")
