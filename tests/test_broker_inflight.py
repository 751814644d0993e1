"""The reliable pop (workers/broker.py): a job Redis hands to a node's blocking pop is, from that
instant, in the node's in-flight list, so a node killed right after the pop (before anything of
the job ran, before Celery knew of it) loses nothing: the liveness sweep gives the job back and
another node judges it. Real redis-server, real worker processes, real signals; no hook.

The window is made deterministic from outside: an idle node waits in its blocking pop; it is
frozen (SIGSTOP), a job is pushed, and Redis serves the pending pop while the node cannot read
the reply. The queue being empty then proves the frozen node's pop took the job. The node is
SIGKILLed without ever waking: the reply dies with its socket."""

from __future__ import annotations

import os
import signal
from typing import Any

import redis
from fleet_helpers import start_worker, wait_until  # noqa: F401  (fixture)

from cpfleet.core import protocol
from cpfleet.producer.client import FleetClient

ECHO = {
    "id": "test/inflight-echo",
    "public_tests": [{"input": "5\n", "output": "5\n"}],
    "hidden_tests": [{"input": "7\n", "output": "7\n"}],
}
ECHO_OK = "```python\nprint(input())\n```"
QUEUE = "inflight-q"
# production time limits: kombu's visibility timeout (690 s) cannot be what gives a job back here
ENV = {
    "CPFLEET_QUEUES": QUEUE,
    "CPFLEET_SOFT_TIME_LIMIT": "600",
    "CPFLEET_HARD_TIME_LIMIT": "630",
    "CPFLEET_VISIBILITY_TIMEOUT": "690",
    "CPFLEET_UNACKED_RESTORE_INTERVAL": "10",
    "CPFLEET_NODE_TTL": "3",
}


def _node_field(r: redis.Redis, hostname: str) -> str | None:
    for field in r.hkeys(protocol.nodes_key()):
        if field.decode().startswith(hostname + "/"):
            return str(field.decode())
    return None


def _blocked(r: redis.Redis) -> int:
    return sum("b" in str(c.get("flags", "")) for c in r.client_list())


def _freeze_while_popping(r: redis.Redis, client: FleetClient, node: Any, tries: int = 5) -> Any:
    """Freeze ``node`` and push a job its pending pop takes; returns its future. A node caught
    between two pops (the queue still holds the job) is woken, judges it, and is tried again."""
    for i in range(tries):
        # both the node's pop and the client's reply reader wait in Redis (flag b: blocked)
        assert wait_until(lambda: _blocked(r) >= 2, timeout=60)
        os.killpg(node.pid, signal.SIGSTOP)
        [future] = client.submit_many([{"problem_id": ECHO["id"], "completion": ECHO_OK, "job_id": f"popped-{i}"}])
        if r.llen(QUEUE) == 0:
            return future
        os.killpg(node.pid, signal.SIGCONT)
        assert future.result(timeout=60).reward == 1.0
    raise AssertionError(f"the node was never caught in its blocking pop in {tries} tries")


def test_a_job_popped_by_a_node_killed_before_it_read_the_reply_is_judged_by_another_node(
    redis_url: str, start_worker  # noqa: F811
) -> None:
    r = redis.Redis.from_url(redis_url)
    victim = start_worker(redis_url, concurrency=1, env=ENV)
    node = _node_field(r, victim.hostname)
    assert node is not None  # the node is listed before its first pop
    with FleetClient(redis_url, queue=QUEUE, timeout=120, use_cache=False) as client:
        client.register_problems([ECHO])
        assert client.submit(ECHO["id"], ECHO_OK).result(timeout=60).reward == 1.0  # idle again after this
        future = _freeze_while_popping(r, client, victim)
        victim.kill()  # SIGKILL while frozen: the pop's reply is never read
        # the job is in no queue, but in the dead node's in-flight list
        assert r.llen(QUEUE) == 0 and r.llen(protocol.inflight_key(node)) == 1
        survivor = start_worker(redis_url, concurrency=1, env=ENV)
        result = future.result(timeout=120)
    assert result.reward == 1.0 and not result.infra_error, result.infra_message
    assert result.worker == survivor.hostname
    assert "requeued" in survivor.log_text()  # the sweep gave it back
    assert wait_until(lambda: r.llen(protocol.inflight_key(node)) == 0, timeout=10)
