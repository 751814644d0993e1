"""What an operator reads: docs/monitoring.md lists exactly the metrics the workers and
`cpfleet serve` define, and docker-compose.yml agrees with the code and the docs on ports,
variables and Flower. Read from the files and the code (no Docker engine here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpfleet.core import defaults, envvars

REPO = Path(__file__).resolve().parents[1]
MONITORING = (REPO / "docs" / "monitoring.md").read_text()
DEPLOYMENT = (REPO / "docs" / "deployment.md").read_text()


def _defined_metrics(*paths: Path) -> set[str]:
    """Metric names as Prometheus exposes them: a Counter gets ``_total``."""
    out = set()
    for path in paths:
        text = path.read_text()
        for kind, name in re.findall(r"\b(Counter|Gauge|Histogram|GaugeMetricFamily)\(\s*\"(cpfleet_[a-z_]+)\"", text):
            out.add(name + "_total" if kind == "Counter" and not name.endswith("_total") else name)
    return out


def _documented_metrics() -> set[str]:
    names = set()
    for line in MONITORING.splitlines():
        if line.strip().startswith("| `cpfleet_"):
            names |= set(re.findall(r"`(cpfleet_[a-z_]+)`", line.split("|")[1]))
    return names


def test_monitoring_lists_exactly_the_metrics_the_code_defines() -> None:
    defined = _defined_metrics(REPO / "workers" / "metrics.py", *(REPO / "cpfleet" / "gateway").glob("*.py"))
    assert len(defined) >= 20
    assert _documented_metrics() == defined


def test_every_table_row_of_monitoring_is_inside_its_list_item() -> None:
    # a row without the item's indent ends the table there when rendered
    rows = [ln for ln in MONITORING.splitlines() if ln.lstrip().startswith("| `cpfleet_")]
    assert rows and all(ln.startswith("  | ") for ln in rows), [ln for ln in rows if not ln.startswith("  | ")]


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return loaded


def test_compose_ports_and_variables_agree_with_the_code() -> None:
    compose = _compose()
    worker = compose["services"]["worker"]
    env = {**compose["x-fleet-env"], **worker["environment"]}
    assert env["CPFLEET_METRICS_PORT"] == str(defaults.DEFAULT_METRICS_PORT)
    assert str(defaults.DEFAULT_METRICS_PORT) in [str(p) for p in worker["expose"]]
    for name, value in env.items():
        if name.startswith("CPFLEET_") and not value.startswith("${"):
            envvars.read(name, env={name: value})  # each set value passes the variable's own rule
    flower = compose["services"]["flower"]
    assert f"--port={defaults.DEFAULT_FLOWER_PORT}" in flower["command"]
    assert flower["ports"][0].endswith(f":{defaults.DEFAULT_FLOWER_PORT}")
    assert compose["services"]["redis"]["ports"][0].endswith(f":{defaults.DEFAULT_REDIS_PORT}")


def test_references_to_the_readme_and_docs_point_at_what_exists() -> None:
    readme = (REPO / "README.md").read_text()
    files = [REPO / "docker-compose.yml", REPO / "Dockerfile", *(REPO / "docs").glob("*.md"),
             *(p for d in ("core", "sandbox", "workers", "producer", "cpfleet") for p in (REPO / d).rglob("*.py"))]
    for path in files:
        text = path.read_text()
        for section in re.findall(r'README "([^"]+)"', text):
            assert f"## {section}" in readme, f"{path.name} points at README section {section!r}, which does not exist"
        if path.suffix != ".md":
            for doc in re.findall(r"\bdocs/[a-z0-9-]+\.md", text):
                assert (REPO / doc).is_file(), f"{path.name}: {doc}"


@pytest.mark.parametrize("option, value, variable", [("-c", "0", "CPFLEET_CONCURRENCY"), ("--queues", ",", "CPFLEET_QUEUES")])
def test_a_refused_worker_option_is_named_as_typed_not_only_as_its_variable(option: str, value: str, variable: str) -> None:
    """`cpfleet worker -c 0` is checked as the CPFLEET_CONCURRENCY it sets: the one line must
    say the value came from -c, which the operator typed, not only name a variable they never set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    out = subprocess.run([sys.executable, "-m", "cpfleet", "worker", option, value, "--dry-run"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert out.returncode == 2
    assert out.stderr.startswith(f"cpfleet worker: {variable}={value!r} is not valid")
    assert out.stderr.rstrip().endswith(f"(from {option})")
    assert "Traceback" not in out.stderr
