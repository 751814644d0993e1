"""Flower's ``/api/workers`` lists the live worker nodes without ``?refresh=1``: the one started
with it and one that joins later, over real HTTP against Flower as ``cpfleet up`` launches it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import FleetWorker

from cpfleet.fleet.flower_launch import REFRESH_ENV, refresh_interval_s
from cpfleet.fleet.local import LocalFleet
from cpfleet.fleet.processes import http_get


def _listed(fleet: LocalFleet) -> set[str]:
    """Worker names in /api/workers, asked exactly as a dashboard would: no refresh parameter."""
    status, body = http_get(f"{fleet.flower_url}/api/workers", timeout=10.0, auth=None)
    if status != 200:
        return set()
    data: Any = json.loads(body)
    return set(data) if isinstance(data, dict) else set()


def _wait_listed(fleet: LocalFleet, name: str, timeout: float = 60.0) -> set[str]:
    end = time.monotonic() + timeout
    seen: set[str] = set()
    while time.monotonic() < end:
        seen = _listed(fleet)
        if name in seen:
            return seen
        time.sleep(0.5)
    raise AssertionError(f"{name} never appeared in /api/workers without ?refresh=1; listed: {sorted(seen)}")


def test_api_workers_lists_the_nodes_without_a_refresh_including_one_that_joins_later(tmp_path: Path) -> None:
    flower_env = {REFRESH_ENV: "1"}
    with LocalFleet(flower_port=0, metrics_port=None, workers=1, log_dir=str(tmp_path), flower_env=flower_env) as fleet:
        _wait_listed(fleet, fleet.node_name)
        late = FleetWorker(str(fleet.redis_url), tmp_path, concurrency=1).start()
        try:
            listed = _wait_listed(fleet, late.hostname)
            assert {fleet.node_name, late.hostname} <= listed
        finally:
            late.stop()


def test_the_refresh_interval_must_be_positive() -> None:
    assert refresh_interval_s({}) == 10.0
    assert refresh_interval_s({REFRESH_ENV: "2.5"}) == 2.5
    for bad in ("0", "-1"):
        with pytest.raises(ValueError):
            refresh_interval_s({REFRESH_ENV: bad})
