"""The container files, checked without a Docker engine: the compose file's structure and the
promises it makes (AOF + noeviction, minimal capabilities with a reason each, the seccomp profile
in docker/ with each addition to Docker's default explained, the isolation requirement, a
configurable open-files limit, scalable workers, shutdown longer than the hard time limit, Flower
behind basic auth), that every CPFLEET_* variable it sets is one the code reads, the Dockerfile's
shape (base image argument, builder and runtime stages, no source folder in the runtime image),
and the entrypoint: cgroup v1 and v2 setup against directories laid out like each, and for real
against this host's cgroup hierarchies (read-only bind mounts made writable again, in a private
mount namespace) where it has them, and the open-files limit. ``docker-compose config`` validates
the file too where the command exists (Debian's ``docker-compose`` package). The images
themselves are built and run by scripts/test-containers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpfleet.workers.config import SETTINGS, Settings

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yml"
SECCOMP = REPO / "docker" / "seccomp.json"
ENTRYPOINT = REPO / "docker" / "entrypoint.sh"
DEPLOY_DOC = REPO / "docs" / "deployment.md"
WORKER_CAPS = {"SYS_ADMIN", "SETUID", "SETGID", "KILL", "DAC_OVERRIDE", "CHOWN"}


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
    """The service's environment as compose sets it when the host sets none of the variables
    (``${X:-default}`` becomes ``default``; a required ``${X:?...}`` stays as written)."""
    env = service.get("environment") or {}
    assert isinstance(env, dict), "environment must be a mapping"
    return {k: re.sub(r"^\$\{[A-Z_]+:-(.*)\}$", r"\1", str(v)) for k, v in env.items()}


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
    assert "seccomp=docker/seccomp.json" in opts, "the worker needs the shipped profile (pivot_root)"
    assert not any(o in ("seccomp=unconfined", "seccomp:unconfined") for o in opts)
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
    assert env["CPFLEET_REDIS_URL"] == "redis://redis:6379/0"  # this file's Redis unless the host sets one
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
    assert env["CPFLEET_METRICS_PORT"] in [str(p) for p in worker["expose"]]
    assert "ping" in " ".join(worker["healthcheck"]["test"])


def test_the_worker_tmp_lets_the_language_self_tests_run_what_they_compile(compose: dict[str, Any]) -> None:
    """Docker mounts a tmpfs noexec unless told ``exec``: the C and C++ self-tests compile into
    /tmp and run the result, so on a noexec /tmp both languages came back INTERNAL in the real
    stack (scripts/test-containers). The container test's own worker run mounts it the same way."""
    (entry,) = [t for t in compose["services"]["worker"]["tmpfs"] if t.split(":")[0] == "/tmp"]
    options = entry.split(":", 1)[1].split(",")
    assert "exec" in options and "noexec" not in options
    script = (REPO / "scripts" / "test_containers.py").read_text()
    assert '"--tmpfs", "/tmp:size=256m,mode=1777,exec"' in script


def test_every_cpfleet_variable_the_compose_file_sets_is_read_by_the_code(compose: dict[str, Any]) -> None:
    entrypoint_vars = set(re.findall(r"\$\{(CPFLEET_[A-Z_]+)", ENTRYPOINT.read_text()))
    assert {"CPFLEET_CGROUP_SETUP", "CPFLEET_NOFILE"} <= entrypoint_vars
    known = {s.env for s in SETTINGS} | {"CPFLEET_METRICS_PORT", "CPFLEET_METRICS_ADDR"} | entrypoint_vars
    used = {k for svc in compose["services"].values() for k in _env(svc) if k.startswith("CPFLEET_")}
    assert used and used <= known, f"unknown variables: {used - known}"
    # and the worker's settings parse (limits consistent, visibility timeout above the hard limit)
    Settings.from_env({k: v for k, v in _env(compose["services"]["worker"]).items() if not v.startswith("${")})


def test_workers_require_full_isolation_and_raise_open_files_without_a_hard_ulimit(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    raw = worker["environment"]
    assert raw["CPFLEET_REQUIRE_ISOLATION"] == "${CPFLEET_REQUIRE_ISOLATION:-full}"
    env = _env(worker)
    assert Settings.from_env(env).require_isolation == "full"  # what README and docs/deployment.md promise
    assert raw["CPFLEET_NOFILE"].startswith("${CPFLEET_NOFILE:-") and int(env["CPFLEET_NOFILE"]) >= 65536
    # a hard limit above the host's stops the container from starting: the entrypoint raises
    # the soft limit instead (tested below)
    assert "ulimits" not in worker
    assert env["CPFLEET_CGROUP_SETUP"] == "1"


def test_the_seccomp_profile_is_dockers_default_plus_pivot_root_under_sys_admin() -> None:
    profile = json.loads(SECCOMP.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"  # an allow list, as Docker's default
    rules = profile["syscalls"]
    ours = [r for r in rules if str(r.get("comment", "")).startswith("cpfleet:")]
    assert [r["names"] for r in ours] == [["pivot_root"]]
    (pivot,) = ours
    assert pivot["action"] == "SCMP_ACT_ALLOW" and pivot["includes"] == {"caps": ["CAP_SYS_ADMIN"]}
    assert len(pivot["comment"]) > 80, "each addition says why"
    allowed_unconditionally = {
        n for r in rules if r["action"] == "SCMP_ACT_ALLOW" and not r.get("includes") and not r.get("args")
        and not r.get("excludes") for n in r["names"]
    }  # fmt: skip
    assert "pivot_root" not in allowed_unconditionally
    for name in ("kexec_load", "keyctl", "add_key", "request_key", "bpf", "mount", "unshare", "setns",
                 "init_module", "open_by_handle_at", "userfaultfd", "ptrace"):
        assert name not in allowed_unconditionally, name
    # Docker's rules that gate the namespace calls on CAP_SYS_ADMIN, kept as they are
    sys_admin = next(r for r in rules if r.get("includes") == {"caps": ["CAP_SYS_ADMIN"]} and "mount" in r["names"])
    assert {"unshare", "setns", "umount2", "clone"} <= set(sys_admin["names"])
    assert len(allowed_unconditionally) > 300
    # the reason is in the deployment guide too
    doc = DEPLOY_DOC.read_text()
    assert "pivot_root" in doc and "docker/seccomp.json" in doc and "type: Localhost" in doc


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


def test_dockerfile_builds_in_a_venv_from_any_base_and_leaves_no_source_in_the_runtime_stage() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11\S*$", text, re.M)
    froms = re.findall(r"^FROM (.+)$", text, re.M)
    assert froms == ["${BASE_IMAGE} AS builder", "${BASE_IMAGE}"], froms
    builder, runtime = text.split("\nFROM ${BASE_IMAGE}\n")
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for folder in package_dir.values():
        assert re.search(rf"^COPY {folder} \./{folder}$", builder, re.M), f"folder {folder} is not copied into the builder"
    assert "python3 -m venv /opt/cpfleet/venv" in builder
    assert re.search(r"^ARG EXTRA_CA_DIR=docker/ca-certificates$", builder, re.M)
    assert (REPO / "docker" / "ca-certificates").is_dir()
    for arg in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        assert re.search(rf"^ARG {arg}$", builder, re.M)
    # the runtime stage takes the venv and nothing of the sources
    copies = re.findall(r"^COPY (.+)$", runtime, re.M)
    assert "--from=builder /opt/cpfleet/venv /opt/cpfleet/venv" in copies
    assert not [c for c in copies if c.split()[0] in package_dir.values()], copies
    # the import check runs in the runtime stage, from the working directory the worker starts in
    workdir = runtime.rindex("\nWORKDIR ")
    check = runtime.index('RUN python -c "import cpfleet.workers.config')
    assert workdir < check
    for tool in ("tini", "g++", "gcc", "default-jdk-headless", "pypy3"):
        assert tool in runtime, f"{tool} missing from the runtime image"
    assert re.search(r'^ENTRYPOINT \["tini", "--", "cpfleet-entrypoint"\]$', runtime, re.M)
    assert re.search(r'^CMD \["cpfleet", "worker"', runtime, re.M)
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_entrypoint_moves_processes_to_a_leaf_and_delegates_controllers(tmp_path: Path) -> None:
    cg = tmp_path / "cgroup"
    cg.mkdir()
    (cg / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (cg / "cgroup.procs").write_text("1\n7\n")
    (cg / "cgroup.subtree_control").write_text("")
    env = {**os.environ, "CPFLEET_CGROUP_SETUP": "1", "CPFLEET_CGROUP_ROOT": str(cg)}
    out = subprocess.run(["sh", str(ENTRYPOINT), "echo", "exec-ed"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "exec-ed\n"  # the command runs in place of the script
    assert (cg / "init" / "cgroup.procs").read_text().split() == ["7"]  # a plain file keeps the last write
    assert (cg / "cgroup.subtree_control").read_text().split() == ["+cpuset", "+cpu", "+io", "+memory", "+pids"]


def test_entrypoint_without_cgroups_warns_and_still_starts(tmp_path: Path) -> None:
    env = {**os.environ, "CPFLEET_CGROUP_SETUP": "1", "CPFLEET_CGROUP_ROOT": str(tmp_path / "none")}
    out = subprocess.run(["sh", str(ENTRYPOINT), "true"], env=env, capture_output=True, text=True)
    assert out.returncode == 0
    assert "no cgroup v1 memory/pids or v2 hierarchy" in out.stderr


def test_entrypoint_on_cgroup_v1_prepares_the_memory_and_pids_hierarchies(tmp_path: Path) -> None:
    cg = tmp_path / "cgroup"
    for controller in ("memory", "pids"):
        (cg / controller).mkdir(parents=True)
        (cg / controller / "cgroup.procs").write_text("1\n7\n")
    (cg / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    env = {**os.environ, "CPFLEET_CGROUP_SETUP": "1", "CPFLEET_CGROUP_ROOT": str(cg)}
    out = subprocess.run(["sh", str(ENTRYPOINT), "echo", "exec-ed"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "exec-ed\n"
    assert (cg / "memory" / "cpfleet").is_dir() and (cg / "pids" / "cpfleet").is_dir()
    assert not (cg / "memory" / "init").exists()  # v1 allows processes in inner cgroups: nothing moves
    assert "cgroup v1" in out.stderr


def test_entrypoint_v2_with_no_delegated_controller_says_so(tmp_path: Path) -> None:
    cg = tmp_path / "cgroup"
    cg.mkdir()
    (cg / "cgroup.controllers").write_text("\n")
    (cg / "cgroup.procs").write_text("")
    (cg / "cgroup.subtree_control").write_text("")
    env = {**os.environ, "CPFLEET_CGROUP_SETUP": "1", "CPFLEET_CGROUP_ROOT": str(cg)}
    out = subprocess.run(["sh", str(ENTRYPOINT), "true"], env=env, capture_output=True, text=True)
    assert out.returncode == 0
    assert "no cgroup v2 controller is delegated" in out.stderr
    assert (cg / "cgroup.subtree_control").read_text() == ""


def _entrypoint_soft_nofile(hard: int, wanted: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CPFLEET_NOFILE"}
    if wanted is not None:
        env["CPFLEET_NOFILE"] = wanted
    return subprocess.run(
        ["sh", "-c", f'ulimit -S -n 256; ulimit -H -n {hard}; exec sh "$0" sh -c "ulimit -S -n"', str(ENTRYPOINT)],
        env=env, capture_output=True, text=True,
    )  # fmt: skip


def test_entrypoint_raises_open_files_to_the_setting_capped_by_the_hard_limit() -> None:
    out = _entrypoint_soft_nofile(4096, None)  # default 65536, above the hard limit: capped, not failed
    assert out.returncode == 0 and out.stdout.strip() == "4096", out.stderr
    assert "below CPFLEET_NOFILE=65536" in out.stderr
    out = _entrypoint_soft_nofile(4096, "1000")
    assert out.returncode == 0 and out.stdout.strip() == "1000", out.stderr
    out = _entrypoint_soft_nofile(4096, "lots")
    assert out.returncode == 0 and out.stdout.strip() == "256"
    assert "not a number" in out.stderr


def _cgroup_mounts() -> dict[str, str]:
    """{"memory": path, "pids": path, "cgroup2": path} for this host's writable cgroup mounts."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        sep = fields.index("-")
        mount_point, mount_opts, fstype, super_opts = fields[4], fields[5], fields[sep + 1], fields[sep + 3]
        if "ro" in mount_opts.split(","):
            continue
        if fstype == "cgroup2":
            found.setdefault("cgroup2", mount_point)
        elif fstype == "cgroup":
            for controller in ("memory", "pids"):
                if controller in super_opts.split(","):
                    found.setdefault(controller, mount_point)
    return found


@pytest.fixture
def scratch_cgroups() -> Iterator[list[Path]]:
    """Cgroup directories the test makes on the host, removed (innermost first) at the end."""
    made: list[Path] = []
    yield made
    for path in sorted(made, key=lambda p: len(p.parts), reverse=True):
        for child in sorted(path.glob("*/"), key=lambda p: len(p.parts), reverse=True):
            if (child / "cgroup.procs").exists():
                child.rmdir()
        if path.exists():
            path.rmdir()


REAL_CGROUPS = _cgroup_mounts()
needs_root_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare (a private mount namespace)"
)


@needs_root_unshare
@pytest.mark.skipif(not {"memory", "pids"} <= set(REAL_CGROUPS), reason="this host has no writable cgroup v1 memory+pids")
def test_entrypoint_makes_read_only_cgroup_v1_binds_writable_for_real(tmp_path: Path, scratch_cgroups: list[Path]) -> None:
    """As Docker lays out a v1 container: /sys/fs/cgroup/{memory,pids} are read-only bind mounts
    of the container's own cgroup directories (here: fresh ones on this host)."""
    name = f"cpfleet-entrypoint-test-{uuid.uuid4().hex[:8]}"
    real = {c: Path(REAL_CGROUPS[c]) / name for c in ("memory", "pids")}
    for path in real.values():
        path.mkdir()
        scratch_cgroups.append(path)
    cg = tmp_path / "cgroup"
    script = f"""set -e
mount -t tmpfs none {cg}
mkdir {cg}/memory {cg}/pids
for c in memory pids; do mount --bind {tmp_path}/real-$c {cg}/$c; mount -o remount,bind,ro {cg}/$c; done
if mkdir {cg}/memory/probe 2>/dev/null; then echo "the bind is not read-only"; exit 9; fi
exec sh {ENTRYPOINT} sh -c 'test -d {cg}/memory/cpfleet && test -d {cg}/pids/cpfleet && echo writable'
"""
    cg.mkdir()
    for controller, path in real.items():
        (tmp_path / f"real-{controller}").symlink_to(path)
    env = {**os.environ, "CPFLEET_CGROUP_SETUP": "1", "CPFLEET_CGROUP_ROOT": str(cg)}
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "writable"
    assert "cgroup v1 memory and pids hierarchies writable" in out.stderr
    assert (real["memory"] / "cpfleet").is_dir() and (real["pids"] / "cpfleet").is_dir()  # made through the binds


@needs_root_unshare
@pytest.mark.skipif("cgroup2" not in REAL_CGROUPS, reason="this host has no writable cgroup v2 hierarchy")
def test_entrypoint_makes_a_read_only_cgroup_v2_writable_and_moves_its_processes_for_real(
    tmp_path: Path, scratch_cgroups: list[Path]
) -> None:
    """As Docker lays out a v2 container: its own cgroup, read-only, holding its processes (here
    a sleep moved into a fresh cgroup on this host)."""
    real = Path(REAL_CGROUPS["cgroup2"]) / f"cpfleet-entrypoint-test-{uuid.uuid4().hex[:8]}"
    real.mkdir()
    scratch_cgroups.append(real)
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        (real / "cgroup.procs").write_text(str(sleeper.pid))
        cg = tmp_path / "cgroup"
        cg.mkdir()
        script = f"""set -e
mount --bind {real} {cg}; mount -o remount,bind,ro {cg}
if mkdir {cg}/probe 2>/dev/null; then echo "the bind is not read-only"; exit 9; fi
exec sh {ENTRYPOINT} cat {cg}/init/cgroup.procs
"""
        env = {**os.environ, "CPFLEET_CGROUP_SETUP": "1", "CPFLEET_CGROUP_ROOT": str(cg)}
        out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        assert str(sleeper.pid) in out.stdout.split()  # moved into the leaf
        assert (real / "cgroup.procs").read_text().split() == []
        controllers = (real / "cgroup.controllers").read_text().split()
        if controllers:  # a v2 host delegating controllers: all enabled for the children
            assert (real / "cgroup.subtree_control").read_text().split() == controllers
        else:  # a hybrid host whose v1 hierarchies hold the controllers
            assert "no cgroup v2 controller is delegated" in out.stderr
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed (apt-get install docker-compose)")
def test_docker_compose_config_accepts_the_file_and_requires_the_flower_password() -> None:
    env = {k: v for k, v in os.environ.items() if k != "FLOWER_BASIC_AUTH"}
    env = {k: v for k, v in env.items() if k not in ("CPFLEET_REQUIRE_ISOLATION", "CPFLEET_NOFILE")}
    # cwd: compose reads the seccomp profile relative to the directory it runs in
    ok = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config"], cwd=REPO,
        env={**env, "FLOWER_BASIC_AUTH": "admin:pw"}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    resolved = yaml.safe_load(ok.stdout)
    assert resolved["services"]["flower"]["environment"]["FLOWER_BASIC_AUTH"] == "admin:pw"
    worker = resolved["services"]["worker"]
    assert set(worker["cap_add"]) == WORKER_CAPS
    assert worker["environment"]["CPFLEET_REQUIRE_ISOLATION"] == "full"
    assert worker["environment"]["CPFLEET_NOFILE"] == "65536"
    assert "seccomp:docker/seccomp.json" in worker["security_opt"]  # compose read and parsed the file
    lowered = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config"], cwd=REPO,
        env={**env, "FLOWER_BASIC_AUTH": "admin:pw", "CPFLEET_NOFILE": "4096", "CPFLEET_REQUIRE_ISOLATION": "partial"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert lowered.returncode == 0, lowered.stderr
    lowered_env = yaml.safe_load(lowered.stdout)["services"]["worker"]["environment"]
    assert lowered_env["CPFLEET_NOFILE"] == "4096" and lowered_env["CPFLEET_REQUIRE_ISOLATION"] == "partial"
    missing = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode != 0
    assert "FLOWER_BASIC_AUTH" in missing.stderr


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed (apt-get install docker-compose)")
def test_a_worker_only_host_points_its_workers_at_another_hosts_redis() -> None:
    """Workers on several hosts share one Redis: a host that runs only the worker service
    (`--no-deps`, docs/deployment.md) names that Redis in CPFLEET_REDIS_URL; unset, the workers
    use this file's own Redis. scripts/test-containers runs such a host for real."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    env["FLOWER_BASIC_AUTH"] = "admin:pw"
    urls = {}
    for given in (None, "redis://10.0.0.5:6379/0"):
        out = subprocess.run(
            ["docker-compose", "-f", str(COMPOSE), "config"], cwd=REPO,
            env={**env, **({"CPFLEET_REDIS_URL": given} if given else {})}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        services = yaml.safe_load(out.stdout)["services"]
        urls[given] = {services[s]["environment"]["CPFLEET_REDIS_URL"] for s in ("worker", "flower")}
    assert urls == {None: {"redis://redis:6379/0"}, "redis://10.0.0.5:6379/0": {"redis://10.0.0.5:6379/0"}}
    assert "--no-deps --scale worker=" in DEPLOY_DOC.read_text()


def test_the_container_test_changes_only_networking_and_timers_of_the_compose_file() -> None:
    """scripts/test-containers runs docker-compose.yml with docker/compose.test.yml on top: the
    override may move the services to host networking and shorten timers, never loosen the
    worker's confinement or its isolation requirement."""
    override = yaml.safe_load((REPO / "docker" / "compose.test.yml").read_text())
    worker = override["services"]["worker"]
    for key in ("cap_add", "cap_drop", "security_opt", "read_only", "privileged", "tmpfs", "entrypoint"):
        assert key not in worker, key
    assert set(worker["environment"]) <= {
        "CPFLEET_METRICS_PORT", "CPFLEET_SOFT_TIME_LIMIT", "CPFLEET_HARD_TIME_LIMIT",
        "CPFLEET_VISIBILITY_TIMEOUT", "CPFLEET_UNACKED_RESTORE_INTERVAL",
    }  # fmt: skip
    assert all(s["network_mode"] == "host" for s in override["services"].values())
    script = REPO / "scripts" / "test-containers"
    assert os.access(script, os.X_OK)
    text = script.read_text()
    for flag in ("--iptables=false", "--ip-masq=false", "--bridge=none", "--network host", "debootstrap"):
        assert flag in text, flag
    assert "scripts/test-containers" in DEPLOY_DOC.read_text()
