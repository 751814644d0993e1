"""Redis without a single point of failure: a primary, a replica and three Sentinels on loopback
(real redis-server processes), a real prefork worker, the client (threads and the event loop's
own pusher) and ``cpfleet serve`` all on a ``sentinel://`` URL. The primary is SIGKILLed in the
middle of a batch; Sentinel promotes the replica; every job is still answered, with its real
verdict, and work submitted after the failover reaches the new primary. The problems are loaded
with ``cpfleet load --redis sentinel://...``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import redis
from fleet_helpers import FleetWorker, wait_until
from sentinel_helpers import SentinelGroup
from test_serve import start_server

from cpfleet.core.redis_url import parse_redis_url
from cpfleet.gateway.serve import ServeConfig
from cpfleet.producer.client import FleetClient

ECHO = {
    "id": "test/sentinel-echo",
    "public_tests": [{"input": "5\n", "output": "5\n"}],
    "hidden_tests": [{"input": "7\n", "output": "7\n"}],
}
ECHO_OK = "```python\nprint(input())\n```"


def _jobs(n: int, tag: str) -> list[dict[str, Any]]:
    return [
        {"problem_id": ECHO["id"], "completion": ECHO_OK, "job_id": f"{tag}-{i}#sleep:0.3"}
        for i in range(n)
    ]


def _reward(port: int) -> Any:
    payload = {"query": [ECHO_OK], "prompts": [""], "labels": [ECHO["id"]]}
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/get_reward", data=json.dumps(payload).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())["rewards"]


async def _evaluate_all(client: FleetClient, n: int, tag: str) -> list[Any]:
    return await asyncio.gather(
        *(client.evaluate(ECHO["id"], ECHO_OK + f"\n# {tag} {i}", job_id=f"{tag}-{i}") for i in range(n))
    )


def test_a_primary_killed_mid_batch_loses_no_job_and_no_reply(tmp_path: Path) -> None:
    with SentinelGroup() as group:
        assert parse_redis_url(group.url).is_sentinel
        env = {"CPFLEET_SOFT_TIME_LIMIT": "60", "CPFLEET_HARD_TIME_LIMIT": "90",
               "CPFLEET_VISIBILITY_TIMEOUT": "120"}
        with FleetWorker(group.url, tmp_path, concurrency=2, env=env, faults=True) as worker:
            # resubmit_on_timeout: what async replication may still lose at the failover (a
            # push the replica had not confirmed) is published again at its deadline
            problems = tmp_path / "problems.jsonl"
            problems.write_text(json.dumps(ECHO) + "\n")
            load = subprocess.run([sys.executable, "-m", "cpfleet", "load", str(problems), "--redis", group.url],
                                  capture_output=True, text=True, timeout=120)
            assert load.returncode == 0 and "written 1" in load.stdout, load.stderr
            with FleetClient(group.url, timeout=60, resubmit_on_timeout=True, use_cache=False) as client:
                srv, thread, port = start_server(ServeConfig(redis_url=group.url, timeout_s=120))
                try:
                    assert _reward(port) == [1.0]
                    before = client.submit_many(_jobs(30, "before"))
                    early = asyncio.run(_evaluate_all(client, 4, "early"))
                    assert wait_until(lambda: sum(f.done() for f in before) >= 4, timeout=120), worker.log_text()[-3000:]
                    old_port = group.kill_primary()
                    new_primary = group.wait_failover(old_port)
                    after = client.submit_many(_jobs(10, "after"))
                    late = asyncio.run(_evaluate_all(client, 4, "late"))
                    served = _reward(port)
                    results = client.gather(before + after, timeout=300)
                finally:
                    srv.should_exit = True
                    thread.join(timeout=30)
                stats = client.stats
            log = worker.log_text()
        every = results + early + late
        bad = [r for r in every if r.infra_error or r.reward != 1.0]
        assert not bad, (Counter(r.infra_message for r in bad), log[-3000:])
        assert sorted(r.job_id.split("#")[0] for r in results) == sorted([f"before-{i}" for i in range(30)] + [f"after-{i}" for i in range(10)])
        assert served == [1.0]
        # the replies came through the new primary: the old one is dead
        assert new_primary[1] != old_port
        r = redis.Redis(host=new_primary[0], port=new_primary[1])
        assert r.info("replication")["role"] == "master"
        print(f"failover answered every job; resubmitted {stats.resubmitted}, duplicates {stats.duplicates}")
