"""Two shards, each a real redis-server with its own real worker: one ShardedFleetClient sends each
job to its problem's shard, results come back in order, and a shard whose Redis is gone fails
only its own jobs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis
from fleet_helpers import FleetWorker

from cpfleet.core import protocol
from cpfleet.core.errors import JobFormatError, UnknownProblemError
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.producer.client import BrokerUnavailable
from cpfleet.producer.sharded import ShardedFleetClient, shard_of

PROBLEMS = [
    {"id": f"shard/add-{k}", "hidden_tests": [{"input": f"{i} {k}\n", "output": f"{i + k}\n"} for i in range(3)]}
    for k in range(12)
]
GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
BAD = "```python\nprint(0)\n```"


def test_shard_of_is_stable_and_spreads() -> None:
    assert [shard_of(p["id"], 2) for p in PROBLEMS] == [shard_of(p["id"], 2) for p in PROBLEMS]
    assert shard_of("shard/add-0", 2) == shard_of("shard/add-0", 2)
    assert {shard_of(p["id"], 2) for p in PROBLEMS} == {0, 1}


def test_two_redis_servers_each_with_its_workers(tmp_path: Path) -> None:
    with RedisServer() as a, RedisServer() as b, \
            FleetWorker(a.url, tmp_path, concurrency=1), FleetWorker(b.url, tmp_path, concurrency=1):
        with ShardedFleetClient([a.url, b.url], timeout=120) as fleet:
            fleet.register_problems(PROBLEMS)
            # each problem is stored on its shard only
            stores = [redis.Redis.from_url(u) for u in (a.url, b.url)]
            for p in PROBLEMS:
                home = shard_of(p["id"], 2)
                assert stores[home].exists(protocol.problem_key(p["id"]))
                assert not stores[1 - home].exists(protocol.problem_key(p["id"]))
            jobs = [(p["id"], GOOD if i % 3 else BAD) for i, p in enumerate(PROBLEMS)] * 2
            results = fleet.evaluate_many(jobs)
            assert [r.problem_id for r in results] == [pid for pid, _ in jobs]
            assert [r.reward for r in results] == [1.0 if c == GOOD else 0.0 for _, c in jobs]
            workers = {r.worker for r in results}
            assert len(workers) == 2  # both shards' workers judged

            async def one() -> float | None:
                return (await fleet.evaluate(PROBLEMS[1]["id"], GOOD)).reward

            assert asyncio.run(one()) == 1.0
            # inline tests go to one shard too, and are judged there
            inline = fleet.evaluate_many([{"tests": {"inputs": ["2 3\n"], "outputs": ["5\n"]}, "completion": GOOD}])
            assert inline[0].reward == 1.0

            # one shard's Redis goes away: its jobs fail loudly, the other shard keeps judging
            down = shard_of(PROBLEMS[0]["id"], 2)
            (a if down == 0 else b).stop(kill=True)
            alive = next(p["id"] for p in PROBLEMS if shard_of(p["id"], 2) != down)
            assert fleet.submit(alive, GOOD).result(timeout=120).reward == 1.0
            with pytest.raises(BrokerUnavailable):
                fleet.submit(PROBLEMS[0]["id"], GOOD).result(timeout=120)


def test_needs_distinct_urls() -> None:
    with pytest.raises(ValueError):
        ShardedFleetClient([])
    with pytest.raises(ValueError):
        ShardedFleetClient(["redis://127.0.0.1:1/0", "redis://127.0.0.1:1/0"])


def test_a_shard_without_workers_is_warned_at_construction(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Jobs routed to a shard nobody consumes would wait silently for their whole deadline: the
    client names that shard's Redis when it opens, and only that one."""
    with RedisServer() as served, RedisServer() as empty, FleetWorker(served.url, tmp_path, concurrency=1):
        with caplog.at_level("WARNING", logger="cpfleet.client"):
            with ShardedFleetClient([served.url, empty.url], timeout=60):
                pass
        warned = [r.getMessage() for r in caplog.records if "wait there until a worker takes them" in r.getMessage()]
        assert len(warned) == 1, warned
        assert "no worker has sent a heartbeat to this Redis" in warned[0]
        assert f"127.0.0.1:{empty.port}" in warned[0] and f":{served.port}" not in warned[0]
        # a worker that is live but consumes another queue: the queue is named
        caplog.clear()
        with caplog.at_level("WARNING", logger="cpfleet.client"):
            with ShardedFleetClient([served.url], queue="cpflet", timeout=60):
                pass
        assert any("no worker has ever consumed queue 'cpflet' on this Redis" in r.getMessage() for r in caplog.records)
        caplog.clear()
        with caplog.at_level("WARNING", logger="cpfleet.client"):
            with ShardedFleetClient([served.url], timeout=60, warn_unserved=False):
                pass
        assert not any("wait there" in r.getMessage() for r in caplog.records)


def _one_per_shard() -> tuple[str, str]:
    """A problem id of shard 0 and one of shard 1 (of two)."""
    first = next(p["id"] for p in PROBLEMS if shard_of(p["id"], 2) == 0)
    second = next(p["id"] for p in PROBLEMS if shard_of(p["id"], 2) == 1)
    return first, second


def test_an_invalid_job_for_a_later_shard_sends_nothing_to_any_shard(tmp_path: Path) -> None:
    """``submit_many``'s promise holds across shards: every part is checked before any is
    published. Shard 0's part was published before shard 1's was checked, so a bad job there
    raised with shard 0's jobs already queued and their futures returned to nobody (judged with
    no one waiting), and its error named the job's place in its shard's part, not in the list."""
    first, second = _one_per_shard()
    with RedisServer() as a, RedisServer() as b:
        with ShardedFleetClient([a.url, b.url], timeout=60, warn_unserved=False) as fleet:
            fleet.register_problems(PROBLEMS)
            queues = [redis.Redis.from_url(u) for u in (a.url, b.url)]
            bad_jobs: list[list[object]] = [
                [(first, GOOD), (first, GOOD), {"problem_id": second, "completion": GOOD, "shape": "fraction"}],
                [(first, GOOD), (first, GOOD), (second, GOOD), ("shard/not-stored", GOOD)],
            ]
            for jobs in bad_jobs:
                with pytest.raises((JobFormatError, UnknownProblemError)):
                    fleet.submit_many(jobs)  # type: ignore[arg-type]
                assert [q.llen(protocol.DEFAULT_QUEUE) for q in queues] == [0, 0]
                assert fleet.in_flight == 0
            with pytest.raises(JobFormatError, match=r"^job #2: "):
                fleet.submit_many(bad_jobs[0])  # type: ignore[arg-type]


def test_a_shard_failing_at_publish_hands_back_the_futures_other_shards_published(tmp_path: Path) -> None:
    """A Redis gone between the check and the publish of a later shard: the exception's
    ``submitted`` holds the futures of every job published before it, the earlier shards'
    included, in input order, as one client's ``submit_many`` gives those of its earlier
    batches; they were lost (queued, judged, and awaited by no one)."""
    first, second = _one_per_shard()
    with RedisServer() as a, RedisServer() as b:
        with ShardedFleetClient([a.url, b.url], timeout=60, warn_unserved=False) as fleet:
            fleet.register_problems(PROBLEMS)
            jobs = [(second, GOOD), (first, GOOD), (second, BAD), (first, BAD)]
            fleet.submit_many([(second, GOOD)])  # shard 1 has seen its problem: no store check left
            b.stop(kill=True)
            with pytest.raises(BrokerUnavailable) as raised:
                fleet.submit_many(jobs)
            assert len(raised.value.submitted) == 2
            queued = redis.Redis.from_url(a.url).llen(protocol.DEFAULT_QUEUE)
            assert queued == 2  # shard 0's part: the two futures handed back
            assert fleet.shards[0].cancel_many(raised.value.submitted) == 2
