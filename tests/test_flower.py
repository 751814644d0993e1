"""Flower against a live fleet: a real prefork worker, Flower started with the app (as
``cpfleet up`` and docker-compose start it), basic auth as in the compose file, and task counts
that move when a batch goes through."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core import protocol
from cpfleet.demo import problems as dp
from cpfleet.demo.command import build_batch, run_batch
from cpfleet.fleet.local import LocalFleet
from cpfleet.fleet.processes import http_get

AUTH = ("cpfleet", "s3cret-test")


def _api(fleet: LocalFleet, path: str, auth: tuple[str, str] | None = AUTH) -> tuple[int, Any]:
    status, body = http_get(f"{fleet.flower_url}{path}", timeout=10.0, auth=auth)
    return status, (json.loads(body) if status == 200 else body)


def _poll(what: str, probe: Callable[[], Any], timeout: float = 90.0) -> Any:
    """Flower learns about workers and tasks asynchronously (events, inspect): wait for it."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; last answer: {last!r}")


def _processed(fleet: LocalFleet) -> int | None:
    """The worker's own count of finished evaluate tasks, as Flower's /api/workers reports it."""
    status, workers = _api(fleet, "/api/workers?refresh=1")
    if status != 200 or fleet.node_name not in workers:
        return None
    stats = workers[fleet.node_name].get("stats") or {}
    return int((stats.get("total") or {}).get(protocol.TASK_NAME, 0))


@pytest.mark.slow
def test_flower_lists_the_live_worker_and_its_task_counts_move_after_a_batch(tmp_path: Path) -> None:
    problems = dp.load_shipped()[:3]
    batch = [j for j in build_batch(problems, dp.demo_completions(), True) if j.kind != "slow"]
    flower_env = {"FLOWER_BASIC_AUTH": f"{AUTH[0]}:{AUTH[1]}"}
    with LocalFleet(flower_port=0, metrics_port=None, workers=2, log_dir=str(tmp_path), flower_env=flower_env) as fleet:
        # health needs no password; the API does (as in docker-compose)
        assert http_get(f"{fleet.flower_url}/healthcheck", auth=None)[0] == 200
        assert _api(fleet, "/api/workers", auth=None)[0] == 401
        assert _api(fleet, "/api/workers", auth=("cpfleet", "wrong"))[0] == 401

        before = _poll("Flower to list the worker", lambda: (n := _processed(fleet)) is not None and (n,))[0]
        status, workers = _api(fleet, "/api/workers?refresh=1")
        assert fleet.node_name in workers
        assert workers[fleet.node_name]["stats"]["pool"]["max-concurrency"] == 2

        outcomes, _ = run_batch(str(fleet.redis_url), problems, batch, progress=False, timeout=300)
        assert len(outcomes) == len(batch)

        after = _poll(
            "the worker's task count to move",
            lambda: (n := _processed(fleet)) is not None and n >= before + len(batch) and (n,),
        )[0]
        assert after == before + len(batch)

        # task events: Flower saw every task succeed, on this worker
        def succeeded() -> list[dict[str, Any]] | None:
            status, tasks = _api(fleet, f"/api/tasks?taskname={protocol.TASK_NAME}&state=SUCCESS&limit=1000")
            if status != 200:
                return None
            mine = [t for t in tasks.values() if t.get("worker") == fleet.node_name]
            return mine if len(mine) >= len(batch) else None

        assert len(_poll("task events", succeeded)) == len(batch)
        # Flower's own Prometheus metrics (no auth) count the worker online
        status, body = http_get(f"{fleet.flower_url}/metrics", auth=None)
        assert status == 200
        online = [ln for ln in body.decode().splitlines() if ln.startswith("flower_worker_online{")]
        assert any(fleet.node_name in ln and ln.endswith(" 1.0") for ln in online), online
