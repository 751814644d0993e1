"""Cancelling a job, or closing its client, withdraws it from the fleet: a real worker node drops
every withdrawn job it has not started yet, unjudged and unanswered, and the caller never sees a
reward for it (a cancelled future raises CancelledError).

One real prefork worker with one pool process (loading tests/fault_jobs.py): a first job that sleeps a few
seconds keeps it busy while the jobs behind it wait in the Redis queue and are withdrawn."""

from __future__ import annotations

import concurrent.futures as cf
import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis
from fleet_helpers import REPO, FleetWorker, start_worker, wait_until  # noqa: F401  (fixture)

from cpfleet.core import protocol
from cpfleet.core.store import register_problems
from cpfleet.producer.client import FleetClient

ECHO = {"id": "t/echo", "public_tests": [{"input": "1\n", "output": "1\n"}], "hidden_tests": [{"input": "5\n", "output": "5\n"}]}
ECHO_OK = "```python\nprint(input())\n```"


def _job_log(worker: FleetWorker, event: str) -> set[str]:
    """Wire ids in the node's JSON job log lines of ``event`` (``job_done``, ``job_withdrawn``)."""
    ids = set()
    for line in worker.log_lines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)  # a job log line is one JSON object, nothing else
        if rec.get("event") == event:
            ids.add(rec["job_id"])
    return ids


def _judged_ids(worker: FleetWorker) -> set[str]:
    return _job_log(worker, "job_done")


def _withdrawn_ids(worker: FleetWorker) -> set[str]:
    return _job_log(worker, "job_withdrawn")


def _wire_ids(client: FleetClient, futures: list[cf.Future[Any]]) -> set[str]:
    """The wire ids (what the worker logs) of these unresolved futures."""
    return {w for w, e in client._jobs.pending.items() if any(e.future is f for f in futures)}


def _busy_node(
    redis_url: str, start: Callable[..., FleetWorker], client: FleetClient, queue: str
) -> tuple[FleetWorker, cf.Future[Any]]:
    """A one-process node busy with a 4 s job, and nothing else queued."""
    worker = start(redis_url, concurrency=1, env={"CPFLEET_QUEUES": queue}, faults=True)
    blocker = client.submit_many([{"problem_id": "t/echo", "completion": ECHO_OK, "job_id": "blocker#sleep:4"}])[0]
    r = redis.Redis.from_url(redis_url)
    assert wait_until(lambda: r.llen(queue) == 0, 60), "the node never took the first job"
    return worker, blocker


def test_cancelled_queued_jobs_are_never_judged_and_never_rewarded(redis_url: str, start_worker: Any) -> None:  # noqa: F811
    register_problems(redis.Redis.from_url(redis_url), [ECHO])
    queue = f"cancel-{uuid.uuid4().hex[:6]}"
    with FleetClient(redis_url, queue=queue, timeout=120) as client:
        worker, blocker = _busy_node(redis_url, start_worker, client, queue)
        futures = client.submit_many([("t/echo", ECHO_OK)] * 6)
        cancelled_ids = _wire_ids(client, futures[:4])
        assert futures[0].cancel() is True
        assert client.cancel_many(futures[1:4]) == 3
        assert all(f.cancelled() for f in futures[:4]) and client.in_flight == 3  # blocker + 2 kept
        for f in futures[:4]:
            with pytest.raises(cf.CancelledError):
                f.result(timeout=0)
        kept = [f.result(timeout=120) for f in futures[4:]]
        assert [(r.reward, r.infra_error) for r in kept] == [(1.0, False)] * 2
        assert blocker.result(timeout=120).reward == 1.0
        assert futures[0].cancel() is True and futures[0].cancelled()  # as concurrent.futures: idempotent
        assert futures[4].cancel() is False  # a resolved job cannot be cancelled
    judged = _judged_ids(worker)
    assert len(cancelled_ids) == 4
    assert wait_until(lambda: cancelled_ids <= _withdrawn_ids(worker), 30), worker.log_text()[-3000:]
    assert not cancelled_ids & judged


def test_close_withdraws_the_clients_queued_jobs(redis_url: str, start_worker: Any) -> None:  # noqa: F811
    register_problems(redis.Redis.from_url(redis_url), [ECHO])
    queue = f"close-{uuid.uuid4().hex[:6]}"
    client_id = f"trainer-{uuid.uuid4().hex[:6]}"
    client = FleetClient(redis_url, queue=queue, timeout=120, client_id=client_id)
    worker, blocker = _busy_node(redis_url, start_worker, client, queue)
    orphans = client.submit_many([("t/echo", ECHO_OK)] * 20)
    orphan_ids = _wire_ids(client, orphans)
    client.close()  # as a trainer that stops (or restarts) would
    assert {f.result(timeout=0).infra_message for f in orphans} == {"client closed before the result"}
    assert redis.Redis.from_url(redis_url).llen(queue) == 0  # swept out of the queue by close()
    # The restarted trainer, same client id: its job runs once the orphans are out of the way.
    with FleetClient(redis_url, queue=queue, timeout=120, client_id=client_id) as again:
        r = again.submit("t/echo", ECHO_OK).result(timeout=120)
        assert (r.reward, r.infra_error) == (1.0, False)
    assert blocker.done()
    assert len(orphan_ids) == 20 and not orphan_ids & _judged_ids(worker)


def test_a_job_message_carries_its_client_and_claim_token_on_the_wire() -> None:
    msg = protocol.JobMessage(job_id="j", problem_id="p", completion="c", reply_to="r", client_id="c1", client_token="tok")
    assert protocol.JobMessage.from_wire(msg.to_wire()) == msg
    with pytest.raises(protocol.ProtocolError):
        protocol.JobMessage.from_wire({**msg.to_wire(), "client_token": None})


def test_every_job_log_line_of_a_real_node_is_one_json_object(redis_url: str, start_worker: Any) -> None:  # noqa: F811
    """The job log has no Celery prefix: each line that carries a job event parses as JSON whole."""
    register_problems(redis.Redis.from_url(redis_url), [ECHO])
    queue = f"joblog-{uuid.uuid4().hex[:6]}"
    worker = start_worker(redis_url, concurrency=1, env={"CPFLEET_QUEUES": queue})
    with FleetClient(redis_url, queue=queue, timeout=120) as client:
        futures = client.submit_many([("t/echo", ECHO_OK), ("t/echo", "no code here")])
        wire_ids = _wire_ids(client, futures)
        results = client.gather(futures, timeout=120)
    assert [r.verdict for r in results] == ["OK", "NO_CODE"]
    assert wait_until(lambda: wire_ids <= _judged_ids(worker), 30), worker.log_text()[-3000:]
    event_lines = [line for line in worker.log_lines() if '"event":' in line]
    assert len(event_lines) >= 2
    for line in event_lines:
        rec = json.loads(line)
        assert isinstance(rec, dict) and rec["event"] == "job_done"


def _crash_with_queued_jobs(redis_url: str, queue: str, n: int) -> set[str]:
    """A trainer process that queues ``n`` jobs and dies without close(); its claim TTL is
    shortened so that it lapses within the test. Returns the jobs' wire ids."""
    script = (
        "import json, os, sys\n"
        "from cpfleet.core import protocol\n"
        "protocol.CLIENT_CLAIM_TTL_S = 2\n"
        "from cpfleet.producer.client import FleetClient\n"
        f"c = FleetClient({redis_url!r}, queue={queue!r}, client_id='crashy', timeout=300)\n"
        f"c.submit_many([('t/echo', {ECHO_OK!r})] * {n})\n"
        "print(json.dumps(sorted(c._jobs.pending)), flush=True)\n"
        "os._exit(0)  # a crash: no close(), the claim is left to expire\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    r = redis.Redis.from_url(redis_url)
    assert r.llen(queue) == n
    assert wait_until(lambda: not r.exists(protocol.client_claim_key("crashy")), 30)
    return set(json.loads(out.stdout))


def test_a_crashed_trainers_queued_jobs_are_dropped_by_workers_once_its_claim_lapses(
    redis_url: str, start_worker: Any  # noqa: F811
) -> None:
    register_problems(redis.Redis.from_url(redis_url), [ECHO])
    queue = f"crash-{uuid.uuid4().hex[:6]}"
    orphan_ids = _crash_with_queued_jobs(redis_url, queue, 15)
    worker = start_worker(redis_url, concurrency=1, env={"CPFLEET_QUEUES": queue})
    assert wait_until(lambda: orphan_ids <= _withdrawn_ids(worker), 60), worker.log_text()[-3000:]
    with FleetClient(redis_url, queue=queue, timeout=120, sweep_orphans=False) as again:
        result = again.submit("t/echo", ECHO_OK).result(timeout=120)
        assert (result.reward, result.infra_error) == (1.0, False)
    assert not orphan_ids & _judged_ids(worker)


def test_the_next_client_sweeps_a_crashed_trainers_jobs_out_of_the_queue_and_keeps_live_ones(redis_url: str) -> None:
    register_problems(redis.Redis.from_url(redis_url), [ECHO])
    queue = f"sweep-{uuid.uuid4().hex[:6]}"
    _crash_with_queued_jobs(redis_url, queue, 15)
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, queue=queue, timeout=300) as live:
        live.submit_many([("t/echo", ECHO_OK)] * 4)
        assert r.llen(queue) == 4  # the crashed trainer's 15 were swept at construction
        with FleetClient(redis_url, queue=queue, timeout=300) as other:
            assert other.purge_orphans() == 0 and r.llen(queue) == 4  # a live client's jobs stay


def test_a_cancel_made_while_redis_is_down_reaches_the_workers_once_it_is_back() -> None:
    """cancel() never waits on Redis (asyncio calls it on its event loop); the withdrawal is
    sent by the reader, and retried until Redis takes it."""
    from cpfleet.fleet.redis_server import RedisServer

    with RedisServer() as server:
        register_problems(redis.Redis.from_url(server.url), [ECHO])
        client = FleetClient(server.url, queue="nobody-listens-down", timeout=300, sweep_orphans=False)
        try:
            future = client.submit("t/echo", ECHO_OK)
            (wire_id,) = list(client._jobs.pending)
            server.stop()
            assert future.cancel() is True and future.cancelled()
            server.start()
            r = redis.Redis.from_url(server.url)
            key = protocol.cancelled_job_key(client.client_id, wire_id)
            assert wait_until(lambda: bool(r.exists(key)), 60)
            assert r.ttl(key) > 0
        finally:
            client.close()


def test_cancelling_many_queued_jobs_takes_them_out_of_the_queue_and_keeps_the_others(redis_url: str) -> None:
    register_problems(redis.Redis.from_url(redis_url), [ECHO])
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, queue="nobody-listens-cancel-many", timeout=300) as client:
        futures = client.submit_many([("t/echo", ECHO_OK)] * 80)
        assert r.llen("nobody-listens-cancel-many") == 80
        assert client.cancel_many(futures[:60]) == 60
        assert wait_until(lambda: r.llen("nobody-listens-cancel-many") == 20, 30)
        kept = _wire_ids(client, futures[60:])
        queued = {json.loads(m)["headers"]["id"] for m in r.lrange("nobody-listens-cancel-many", 0, -1)}
        assert queued == kept and not any(f.done() for f in futures[60:])
