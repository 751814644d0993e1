"""The reliable pop (workers/broker.py): a job Redis hands to a node's blocking pop is, from that
instant, in the node's in-flight list, so a node killed right after the pop (before anything of
the job ran, before Celery knew of it) loses nothing: the liveness sweep gives the job back and
another node judges it. Real redis-server, real worker processes, real signals; no hook.

The window is made deterministic from outside: an idle node waits in its blocking pop; it is
frozen (SIGSTOP), a job is pushed, and Redis serves the pending pop while the node cannot read
the reply. The queue being empty then proves the frozen node's pop took the job. The node is
SIGKILLed without ever waking: the reply dies with its socket."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import redis
from fleet_helpers import start_worker, taken_unacked, wait_until  # noqa: F401  (fixture)

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


def _freeze_while_popping(r: redis.Redis, client: FleetClient, node: Any, tries: int = 10) -> Any:
    """Freeze ``node`` and push a job its pending pop takes; returns its future. A node caught
    between two pops, or whose pop timed out at the server (after 1 s) before the push landed
    (the queue still holds the job), is woken, judges it, and is tried again."""
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
    # the node lists itself as it starts its first pop, which may come a moment after 'ready.'
    assert wait_until(lambda: _node_field(r, victim.hostname) is not None, timeout=60)
    node = _node_field(r, victim.hostname)
    assert node is not None
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
    # the sweep gave it back; it logs that after its script returns, when the job may already be done
    assert wait_until(lambda: "requeued" in survivor.log_text(), timeout=60), survivor.log_text()[-3000:]
    assert wait_until(lambda: r.llen(protocol.inflight_key(node)) == 0, timeout=60)


def _queued_message(redis_url: str, queue: str) -> bytes:
    """A real task message as the client publishes it, taken off ``queue`` (no worker listens)."""
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, queue=queue, timeout=60, use_cache=False) as client:
        client.register_problems([ECHO])
        client.submit_many([{"problem_id": ECHO["id"], "completion": ECHO_OK, "job_id": "ghost-job"}])
        raw = r.rpop(queue)
    assert isinstance(raw, bytes)
    return raw


def test_the_sweep_gives_a_lost_node_s_in_flight_messages_back_and_forgets_it_after_the_retention(
    redis_url: str,
) -> None:
    from cpfleet.workers.liveness import Liveness

    r = redis.Redis.from_url(redis_url)
    raw = _queued_message(redis_url, "ghost-q")
    r.lpush(protocol.inflight_key("ghost/1"), raw)
    r.hset(protocol.nodes_key(), "ghost/1", "1.000")  # alive until 1970: lost
    sweeper = Liveness(lambda: redis.Redis.from_url(redis_url), "sweeper/2", ttl=5)
    assert sweeper.tick() == [json.loads(raw)["properties"]["delivery_tag"]]
    assert r.lrange("ghost-q", 0, -1) == [raw]  # the same bytes, back on their queue
    assert r.llen(protocol.inflight_key("ghost/1")) == 0
    assert r.hexists(protocol.nodes_key(), "sweeper/2")
    assert not r.hexists(protocol.nodes_key(), "ghost/1")  # lost decades ago: past the retention
    # a node lost a moment ago stays listed, so a pop it left pending is given back later too
    r.hset(protocol.nodes_key(), "ghost/3", f"{float(r.time()[0]) - 1:.3f}")
    r.delete(protocol.sweep_lock_key())
    sweeper.tick()
    assert r.hexists(protocol.nodes_key(), "ghost/3")


def test_a_live_node_gives_back_what_it_no_longer_holds_after_the_grace_and_keeps_what_it_holds(
    redis_url: str,
) -> None:
    from cpfleet.workers.liveness import Liveness

    r = redis.Redis.from_url(redis_url)
    raw = _queued_message(redis_url, "self-q")
    tag = json.loads(raw)["properties"]["delivery_tag"]
    key = protocol.inflight_key("me/1")
    r.lpush(key, raw)
    held: list[str] = [tag]
    me = Liveness(lambda: redis.Redis.from_url(redis_url), "me/1", ttl=5, grace=0.0, held=lambda: list(held))
    assert me.tick() == [] and me.tick() == [] and me.given_back == 0  # held: never given back
    assert r.llen(key) == 1
    held.clear()  # e.g. its ack was lost with a connection
    me.tick()  # first sighting unheld
    me.tick()  # unheld for >= grace: given back
    assert me.given_back == 1 and r.llen(key) == 0 and r.lrange("self-q", 0, -1) == [raw]
    # at shutdown, a message still listed and not held goes back, and the node leaves the hash
    r.lpush(key, r.rpop("self-q") or b"")
    assert me.release() == 1
    assert r.lrange("self-q", 0, -1) == [raw] and not r.hexists(protocol.nodes_key(), "me/1")


def test_a_node_consuming_two_queues_takes_jobs_from_both_and_leaves_nothing_taken(
    redis_url: str, start_worker  # noqa: F811
) -> None:
    r = redis.Redis.from_url(redis_url)
    node = start_worker(redis_url, concurrency=2, env={"CPFLEET_QUEUES": "two-a,two-b"})
    with FleetClient(redis_url, queue="two-a", timeout=120, use_cache=False) as a, \
            FleetClient(redis_url, queue="two-b", timeout=120, use_cache=False) as b:
        a.register_problems([ECHO])
        futures = [c.submit(ECHO["id"], ECHO_OK) for _ in range(6) for c in (a, b)]
        results = [f.result(timeout=120) for f in futures]
    assert all(x.reward == 1.0 and x.worker == node.hostname for x in results)
    assert wait_until(lambda: taken_unacked(r) == 0, timeout=30)
