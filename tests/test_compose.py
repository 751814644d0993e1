"""The container files, checked without a Docker engine: the compose file's structure and the
promises it makes (AOF + noeviction, minimal capabilities with a reason each, scalable workers,
shutdown longer than the hard time limit, Flower behind basic auth), that every CPFLEET_*
variable it sets is one the code reads, the Dockerfile's shape, and the entrypoint's cgroup
setup against a directory laid out like cgroup v2. ``docker-compose config`` validates the file
too where the command exists (Debian's ``docker-compose`` package)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpfleet.workers.config import SETTINGS, Settings

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yml"
WORKER_CAPS = {"SYS_ADMIN", "SETUID", "SETGID", "KILL"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def _seconds(duration: str) -> float:
    """A compose duration ('1m30s', '360s', '10s') in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", str(duration))
    assert parts and "".join(n + u for n, u in parts) == str(duration), duration
    return sum(float(n) * units[u] for n, u in parts)


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    assert isinstance(env, dict), "environment must be a mapping"
    return {k: str(v) for k, v in env.items()}


def test_the_three_services_exist_with_health_checks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) >= {"redis", "worker", "flower"}
    for name in ("redis", "worker", "flower"):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no health check"


def test_redis_keeps_jobs_aof_on_and_never_evicts(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    cmd = [str(c) for c in redis["command"]]
    assert cmd[0] == "redis-server"
    assert cmd[cmd.index("--appendonly") + 1] == "yes"
    assert cmd[cmd.index("--maxmemory-policy") + 1] == "noeviction"
    assert any(str(v).endswith(":/data") for v in redis["volumes"]), "the AOF must live on a volume"


def test_worker_capabilities_are_exactly_the_sandbox_needs_each_with_a_reason(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    assert worker["cap_drop"] == ["ALL"]
    assert set(worker["cap_add"]) == WORKER_CAPS
    assert not worker.get("privileged", False)
    text = COMPOSE.read_text()
    for cap in WORKER_CAPS:
        line = next(ln for ln in text.splitlines() if re.match(rf"\s*- {cap}\b", ln))
        assert "#" in line and len(line.split("#", 1)[1].strip()) > 15, f"{cap} needs a comment saying why"
    opts = worker["security_opt"]
    assert "no-new-privileges:true" in opts
    assert not any(o.startswith("seccomp") for o in opts), "keep Docker's default seccomp profile"
    # the AppArmor choice is explained right above it
    assert re.search(r"#.*AppArmor.*mount", text)


def test_workers_scale_stop_gracefully_after_the_hard_limit_and_expose_metrics(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    env = _env(worker)
    # `--scale worker=N`: no fixed name, no published host port
    assert "container_name" not in worker
    assert "ports" not in worker
    hard = Settings.from_env(env).hard_time_limit_s
    assert _seconds(worker["stop_grace_period"]) > hard
    assert worker.get("stop_signal", "SIGTERM") == "SIGTERM"  # Celery's warm shutdown
    assert env["CPFLEET_REDIS_URL"].startswith("redis://redis:")
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
    assert env["CPFLEET_METRICS_PORT"] in [str(p) for p in worker["expose"]]
    assert "ping" in " ".join(worker["healthcheck"]["test"])


def test_every_cpfleet_variable_the_compose_file_sets_is_read_by_the_code(compose: dict[str, Any]) -> None:
    known = {s.env for s in SETTINGS} | {"CPFLEET_METRICS_PORT", "CPFLEET_METRICS_ADDR", "CPFLEET_CGROUP_SETUP"}
    used = {k for svc in compose["services"].values() for k in _env(svc) if k.startswith("CPFLEET_")}
    assert used and used <= known, f"unknown variables: {used - known}"
    # and the worker's settings parse (limits consistent, visibility timeout above the hard limit)
    Settings.from_env({k: v for k, v in _env(compose["services"]["worker"]).items() if not v.startswith("${")})


def test_flower_runs_the_app_on_5555_behind_required_basic_auth(compose: dict[str, Any]) -> None:
    flower = compose["services"]["flower"]
    cmd = " ".join(flower["command"])
    assert "-A cpfleet.workers.app flower" in cmd
    assert "--port=5555" in cmd
    assert any(str(p).endswith(":5555") for p in flower["ports"])
    assert flower["image"] == compose["services"]["worker"]["image"]
    auth = _env(flower)["FLOWER_BASIC_AUTH"]
    assert auth.startswith("${FLOWER_BASIC_AUTH:?"), "the password must come from the environment, and be required"
    assert "FLOWER_UNAUTHENTICATED_API" not in _env(flower)
    assert flower["cap_drop"] == ["ALL"] and "cap_add" not in flower


def test_dockerfile_installs_every_package_and_starts_a_worker_under_tini() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11", text, re.M)
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for folder in package_dir.values():
        assert re.search(rf"^COPY {folder} \./{folder}$", text, re.M), f"folder {folder} is not copied into the image"
    assert re.search(r'^ENTRYPOINT \["tini", "--", "cpfleet-entrypoint"\]$', text, re.M)
    assert re.search(r'^CMD \["cpfleet", "worker"', text, re.M)
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_entrypoint_moves_processes_to_a_leaf_and_delegates_controllers(tmp_path: Path) -> None:
    cg = tmp_path / "cgroup"
    cg.mkdir()
    (cg / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (cg / "cgroup.procs").write_text("1\n7\n")
    (cg / "cgroup.subtree_control").write_text("")
    env = {**os.environ, "CPFLEET_CGROUP_SETUP": "1", "CPFLEET_CGROUP_ROOT": str(cg)}
    out = subprocess.run(
        ["sh", str(REPO / "docker" / "entrypoint.sh"), "echo", "exec-ed"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "exec-ed\n"  # the command runs in place of the script
    assert (cg / "init" / "cgroup.procs").read_text().split() == ["7"]  # a plain file keeps the last write
    assert (cg / "cgroup.subtree_control").read_text().split() == ["+cpuset", "+cpu", "+io", "+memory", "+pids"]


def test_entrypoint_without_cgroup_v2_warns_and_still_starts(tmp_path: Path) -> None:
    env = {**os.environ, "CPFLEET_CGROUP_SETUP": "1", "CPFLEET_CGROUP_ROOT": str(tmp_path / "none")}
    out = subprocess.run(["sh", str(REPO / "docker" / "entrypoint.sh"), "true"], env=env, capture_output=True, text=True)
    assert out.returncode == 0
    assert "no cgroup v2" in out.stderr


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed (apt-get install docker-compose)")
def test_docker_compose_config_accepts_the_file_and_requires_the_flower_password() -> None:
    env = {k: v for k, v in os.environ.items() if k != "FLOWER_BASIC_AUTH"}
    ok = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config"],
        env={**env, "FLOWER_BASIC_AUTH": "admin:pw"}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    resolved = yaml.safe_load(ok.stdout)
    assert resolved["services"]["flower"]["environment"]["FLOWER_BASIC_AUTH"] == "admin:pw"
    assert set(resolved["services"]["worker"]["cap_add"]) == WORKER_CAPS
    missing = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config"], env=env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode != 0
    assert "FLOWER_BASIC_AUTH" in missing.stderr
