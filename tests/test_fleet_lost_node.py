"""A lost worker node (SIGKILL of its whole process group: a crashed host; SIGSTOP: a frozen or
partitioned one) gives its jobs back within seconds through heartbeats and the liveness sweep
(``cpfleet.workers.liveness``), not after kombu's visibility timeout; a slow job on a live node
is never given back; every job is answered exactly once.

The workers run with the production time limits (visibility timeout 690 s), so a job that comes
back within these tests' bounds came back through the sweep, not through kombu."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from typing import Any

import redis
from fleet_helpers import FleetWorker, start_worker, taken_unacked, wait_until  # noqa: F401  (fixture)

from cpfleet.core import protocol
from cpfleet.producer.client import FleetClient

ECHO = {
    "id": "test/lost-echo",
    "public_tests": [{"input": "5\n", "output": "5\n"}],
    "hidden_tests": [{"input": "7\n", "output": "7\n"}],
}
ECHO_OK = "```python\nprint(input())\n```"

PRODUCTION_TIMERS = {
    "CPFLEET_SOFT_TIME_LIMIT": "600",
    "CPFLEET_HARD_TIME_LIMIT": "630",
    "CPFLEET_VISIBILITY_TIMEOUT": "690",
    "CPFLEET_UNACKED_RESTORE_INTERVAL": "10",
    "CPFLEET_NODE_TTL": "5",  # the default is 10; shorter keeps the test short, long enough for a loaded machine
}
VISIBILITY_S = 690.0


def _jobs(n: int, tag: str, sleep_s: float) -> list[dict[str, Any]]:
    return [
        {"problem_id": ECHO["id"], "completion": ECHO_OK, "job_id": f"{tag}-{i}#sleep:{sleep_s}"}
        for i in range(n)
    ]


def _held(client: redis.Redis, node: FleetWorker) -> list[str]:
    """The delivery tags ``node`` lists in its heartbeat (empty if it has not beaten yet)."""
    for field, value in client.hgetall(protocol.nodes_key()).items():
        if field.decode().startswith(node.hostname + "/"):
            return value.decode().split()[1:]
    return []


def _check_all_answered_once(results: list[Any], tag: str, n: int) -> None:
    assert sorted(r.job_id.split("#")[0] for r in results) == sorted(f"{tag}-{i}" for i in range(n))
    bad = [r for r in results if r.infra_error or r.reward != 1.0]
    assert not bad, Counter(r.infra_message for r in bad)


def test_a_killed_node_jobs_come_back_through_the_sweep_not_the_visibility_timeout(
    redis_url: str, start_worker  # noqa: F811
) -> None:
    victim = start_worker(redis_url, concurrency=1, env=PRODUCTION_TIMERS, faults=True)
    survivor = start_worker(redis_url, concurrency=1, env=PRODUCTION_TIMERS, faults=True)
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, timeout=300, use_cache=False) as client:
        client.register_problems([ECHO])
        futures = client.submit_many(_jobs(10, "kill", 2.0))
        assert wait_until(lambda: bool(_held(r, victim)), timeout=120), victim.log_text()[-3000:]
        killed_at = time.monotonic()
        victim.kill()
        results = client.gather(futures, timeout=240)
        recovered_s = time.monotonic() - killed_at
        duplicates = client.stats.duplicates
    _check_all_answered_once(results, "kill", 10)
    assert recovered_s < VISIBILITY_S  # kombu alone would have given the job back only after this
    # and it was the sweep that did (it logs that after its script returns: wait for the line)
    assert wait_until(lambda: "requeued" in survivor.log_text(), timeout=60), survivor.log_text()[-3000:]
    assert duplicates == 0  # the dead node could not answer: each job was answered once
    # the last ack follows the last reply: nothing stays stranded or queued
    assert wait_until(lambda: taken_unacked(r) == 0, timeout=30)
    assert r.llen(protocol.DEFAULT_QUEUE) == 0


def test_a_frozen_node_jobs_come_back_and_its_late_reply_and_ack_harm_nothing(
    redis_url: str, start_worker  # noqa: F811
) -> None:
    frozen = start_worker(redis_url, concurrency=1, env=PRODUCTION_TIMERS, faults=True)
    other = start_worker(redis_url, concurrency=1, env=PRODUCTION_TIMERS, faults=True)
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, timeout=300, use_cache=False) as client:
        client.register_problems([ECHO])
        futures = client.submit_many(_jobs(8, "stop", 3.0))
        assert wait_until(lambda: bool(_held(r, frozen)), timeout=120), frozen.log_text()[-3000:]
        os.killpg(frozen.pid, signal.SIGSTOP)  # a partition: alive, but silent
        try:
            results = client.gather(futures, timeout=240)
            _check_all_answered_once(results, "stop", 8)
            assert wait_until(lambda: "requeued" in other.log_text(), timeout=60), other.log_text()[-3000:]
        finally:
            os.killpg(frozen.pid, signal.SIGCONT)
        # Woken up, the frozen node finishes the job it held and replies: the client drops that
        # reply (its job was answered by the other node), and its ack of the old delivery tag
        # removes nothing of the message the other node ran.
        assert wait_until(lambda: client.stats.duplicates >= 1, timeout=120), frozen.log_text()[-3000:]
        assert [f.result().job_id.split("#")[0] for f in futures] == [f"stop-{i}" for i in range(8)]
        more = client.submit_many(_jobs(4, "after", 0.1))
        _check_all_answered_once(client.gather(more, timeout=120), "after", 4)
    assert wait_until(lambda: taken_unacked(r) == 0, timeout=30)
    assert r.llen(protocol.DEFAULT_QUEUE) == 0


def test_a_slow_job_on_a_live_node_is_never_given_back(redis_url: str, start_worker) -> None:  # noqa: F811
    # beats every 1 s, grace 5 s: the 12 s job outlives both by far, and a heartbeat thread
    # held up a few seconds on a loaded machine still beats within the grace
    env = {**PRODUCTION_TIMERS, "CPFLEET_NODE_TTL": "5"}
    node = start_worker(redis_url, concurrency=1, env=env, faults=True)
    spare = start_worker(redis_url, concurrency=1, env=env, faults=True)  # idle, and sweeping: it would take a requeued job
    with FleetClient(redis_url, timeout=300, use_cache=False) as client:
        client.register_problems([ECHO])
        results = client.gather(client.submit_many(_jobs(2, "slow", 12.0)), timeout=240)
        time.sleep(2)  # a duplicate reply would have arrived by now
        duplicates = client.stats.duplicates
    _check_all_answered_once(results, "slow", 2)
    assert duplicates == 0
    assert "requeued" not in node.log_text() + spare.log_text()
