"""docs/grafana/cpfleet-dashboard.json loads: a well-formed Grafana dashboard whose every PromQL
metric name, and every label it groups or filters by, is one a real worker's /metrics endpoint
exposes after judging a few jobs (real Redis, real prefork worker, real HTTP scrape), and the whole
dashboard type-checks against the schema Grafana publishes (`@grafana/schema` from npm, through
scripts/check_grafana_dashboard.py). Grafana itself is not in Debian's archive and no image registry
is reachable, so no running Grafana loads it here."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cpfleet.fleet.local import LocalFleet
from cpfleet.fleet.processes import http_get
from cpfleet.producer.client import FleetClient

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = REPO / "docs" / "grafana" / "cpfleet-dashboard.json"
PROBLEM = {
    "id": "graf/echo",
    "public_tests": [{"input": "1\n", "output": "1\n"}],
    "hidden_tests": [{"input": "2\n", "output": "2\n"}],
}
ECHO = "```python\nprint(input())\n```"
WRONG = "```python\nprint(0)\n```"
PROMQL_WORDS = {"sum", "min", "max", "by", "rate", "increase", "ignoring", "group_left", "histogram_quantile"}


def _schema_checker():  # the script, imported as a module
    spec = importlib.util.spec_from_file_location("check_grafana_dashboard", REPO / "scripts" / "check_grafana_dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _exprs(dash: dict) -> list[str]:
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_the_dashboard_is_well_formed() -> None:
    dash = _dashboard()
    assert dash["title"] and dash["uid"] and isinstance(dash["schemaVersion"], int)
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert p["type"] in {"timeseries", "stat", "bargauge"} and p["title"]
        assert set(p["gridPos"]) == {"x", "y", "w", "h"} and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"]
        for t in p["targets"]:
            assert t["expr"].count("(") == t["expr"].count(")") and t["expr"].count("[") == t["expr"].count("]")
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for subject in ("reward", "verdict", "queue", "latency", "isolation"):
        assert subject in titles


def _exposed(metrics_text: str) -> dict[str, set[str]]:
    """sample name -> label names seen on it."""
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


@pytest.mark.slow
def test_every_metric_and_label_of_the_dashboard_is_exposed_by_a_real_worker(tmp_path: Path) -> None:
    with LocalFleet(flower_port=None, metrics_port=0, workers=1, log_dir=str(tmp_path)) as fleet:
        with FleetClient(str(fleet.redis_url), timeout=120) as client:
            client.register_problems([PROBLEM])
            jobs = [{"problem_id": PROBLEM["id"], "completion": c} for c in (ECHO, WRONG, ECHO)]
            results = [f.result(timeout=180) for f in client.submit_many(jobs[:2])]
            results += [f.result(timeout=180) for f in client.submit_many(jobs[2:])]  # a result-cache hit
        assert [r.verdict for r in results] == ["OK", "WRONG_ANSWER", "OK"]
        status, body = http_get(str(fleet.metrics_url), timeout=10)
    assert status == 200
    exposed = _exposed(body.decode())
    missing = []
    for expr in _exprs(_dashboard()):
        names = [n for n in re.findall(r"\b(cpfleet_[a-z_]+)\b", expr)]
        assert names, expr
        labels = set(re.findall(r"\b(?:by|ignoring)\s*\(([^)]*)\)", expr))
        used = {x.strip() for group in labels for x in group.split(",") if x.strip()}
        used |= set(re.findall(r"([a-z_]+)\s*=~?\s*\"", expr))
        for name in names:
            if name not in exposed:
                missing.append(f"{name} (in {expr})")
        have = set().union(*(exposed.get(n, set()) for n in names))
        for label in used:
            if label not in have:
                missing.append(f"label {label} on {names} (in {expr})")
        words = set(re.findall(r"\b([a-z_]+)\s*\(", expr)) - set(names)
        assert words <= PROMQL_WORDS, words
    assert not missing, missing


@pytest.fixture(scope="module")
def schema_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed to type-check against @grafana/schema (.ci/run installs them)")
    cache = Path.home() / ".cache" / "cpfleet" / "grafana-schema"
    try:
        _schema_checker().ensure_packages(cache)
    except Exception as e:  # no registry reachable: say so rather than fail on a network outage
        pytest.skip(f"@grafana/schema could not be installed from npm: {e}")
    return cache


@pytest.mark.slow
def test_the_dashboard_matches_grafanas_published_schema(schema_cache: Path) -> None:
    checker = _schema_checker()
    checker.check(DASHBOARD, schema_cache)  # raises CheckError with tsc's lines on any mismatch


@pytest.mark.slow
@pytest.mark.parametrize("mutation", [
    ("\"schemaVersion\"", "\"schemaVersoin\""),       # a misspelt dashboard field
    ("\"gridPos\": {", "\"gridPos\": {\"static\": \"yes\", "),  # a string where Grafana wants a boolean
    ("\"displayMode\": \"basic\"", "\"displayMode\": \"fancy\""),  # a value outside a bar gauge's enum
])
def test_the_schema_check_rejects_a_broken_dashboard(schema_cache: Path, tmp_path: Path,
                                                     mutation: tuple[str, str]) -> None:
    checker = _schema_checker()
    text = DASHBOARD.read_text()
    assert mutation[0] in text
    broken = tmp_path / "broken.json"
    broken.write_text(text.replace(mutation[0], mutation[1], 1))
    with pytest.raises(checker.CheckError, match="does not match Grafana's schema"):
        checker.check(broken, schema_cache)
