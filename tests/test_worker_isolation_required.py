"""CPFLEET_REQUIRE_ISOLATION: a node whose sandbox gets less isolation than required takes no
job. Real redis-server, real prefork workers, and a real way to lower the isolation: the node
runs under ``setpriv`` with CAP_SYS_ADMIN dropped from its bounding and inheritable sets, as in a
container started without ``cap_add: SYS_ADMIN`` (no namespaces, so no netns, mountns, pidns...).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest
import redis
from fleet_helpers import FleetWorker

from cpfleet.producer.client import FleetClient
from cpfleet.workers.config import Settings, isolation_meets
from cpfleet.workers.resources import ISOLATION_EXIT_CODE

pytestmark = pytest.mark.skipif(
    shutil.which("setpriv") is None or os.geteuid() != 0, reason="needs root (a full sandbox) and setpriv"
)

DROP_SYS_ADMIN = ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--"]
ADD = {
    "id": "test/add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": f"{i} {i * 7}\n", "output": f"{i * 8}\n"} for i in range(4)],
}
GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


def _queue() -> str:
    return "iso-" + uuid.uuid4().hex[:8]


def test_the_requirement_levels_and_their_validation() -> None:
    assert isolation_meets("full", "full") and not isolation_meets("partial", "full")
    assert isolation_meets("partial", "partial") and not isolation_meets("none", "partial")
    assert isolation_meets("none", "any")
    assert Settings.from_env({}).require_isolation == "full"
    assert Settings.from_env({"CPFLEET_REQUIRE_ISOLATION": "Partial"}).require_isolation == "partial"
    with pytest.raises(ValueError, match="CPFLEET_REQUIRE_ISOLATION"):
        Settings.from_env({"CPFLEET_REQUIRE_ISOLATION": "most"})


def test_a_node_below_the_requirement_exits_and_the_job_waits_for_a_healthy_node(redis_url: str, tmp_path: Path) -> None:
    queue = _queue()
    env = {"CPFLEET_QUEUES": queue, "CPFLEET_REQUIRE_ISOLATION": "full"}
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, queue=queue, timeout=240) as client:
        client.register_problems([ADD])
        future = client.submit("test/add", GOOD)
        assert r.llen(queue) == 1
        weak = FleetWorker(redis_url, tmp_path, concurrency=1, env=env, argv_prefix=DROP_SYS_ADMIN)
        weak.start(wait=False)
        try:
            assert weak.proc is not None
            assert weak.proc.wait(timeout=120) == ISOLATION_EXIT_CODE
        finally:
            weak.stop()
        log = weak.log_text()
        assert "refuses to start" in log and "isolation=partial" in log and "netns" in log, log[-3000:]
        assert "ready." not in log  # it never became a consumer
        assert r.llen(queue) == 1  # the job is still queued, unanswered
        assert not future.done()
        with FleetWorker(redis_url, tmp_path, concurrency=1, env=env) as healthy:
            result = future.result(timeout=180)
        assert result.reward == 1.0 and result.worker == healthy.hostname


def test_the_same_node_with_the_requirement_lowered_to_partial_judges(redis_url: str, tmp_path: Path) -> None:
    """The knob lowers the isolation to partial; it does not break the node: the refusal above
    is the requirement's doing."""
    queue = _queue()
    env = {"CPFLEET_QUEUES": queue, "CPFLEET_REQUIRE_ISOLATION": "partial"}
    with FleetWorker(redis_url, tmp_path, concurrency=1, env=env, argv_prefix=DROP_SYS_ADMIN) as node:
        with FleetClient(redis_url, queue=queue, timeout=240) as client:
            client.register_problems([ADD])
            result = client.submit("test/add", GOOD).result(timeout=180)
        assert result.reward == 1.0 and result.worker == node.hostname
        assert "isolation=partial" in node.log_text()
