"""A full Redis (``maxmemory`` reached under ``noeviction``: writes refused with an OOM error) is
named as such, never reported as an unreachable broker, and a worker's reply that meets it is kept
and delivered once there is room. A real redis-server per test, given a tiny ``maxmemory`` and
filled until it refuses a write."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fleet_helpers import FleetWorker, store_problems, wait_until

from cpfleet.core import protocol
from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.producer.client import BrokerFull, BrokerUnavailable, FleetClient
from cpfleet.workers.replies import push_reply

ECHO_OK = "```python\nprint(input())\n```"


@pytest.fixture
def small_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def _fill(r: redis.Redis) -> int:
    """Cap Redis at its current use plus 2 MiB and write until it refuses; then lower the cap by
    512 KiB so that it stays full whatever connection buffers come and go. Returns the keys
    written (``fill:0`` .. ``fill:<n-1>``): deleting them makes room again."""
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", str(used + 2 * 1024 * 1024))
    n = 0
    while True:
        try:
            r.set(f"fill:{n}", b"x" * 65536)
        except redis.exceptions.OutOfMemoryError:
            break
        n += 1
    r.config_set("maxmemory", str(int(r.info("memory")["used_memory"]) - 512 * 1024))
    return n


def _oom_errors(r: redis.Redis) -> int:
    stats = r.info("errorstats")
    return int(stats.get("errorstat_OOM", {}).get("count", 0))


def test_submitting_to_a_full_redis_raises_broker_full_not_broker_unavailable(small_redis: RedisServer) -> None:
    store_problems(small_redis.url, "t/echo")
    r = redis.Redis.from_url(small_redis.url)
    with FleetClient(small_redis.url, queue="nobody-listens-full", timeout=60) as client:
        n = _fill(r)
        with pytest.raises(BrokerFull) as info:
            client.submit("t/echo", ECHO_OK)
        assert not isinstance(info.value, BrokerUnavailable)
        assert "full" in str(info.value) and client.in_flight == 0
        r.delete(*[f"fill:{i}" for i in range(n)])  # room again: the same client submits
        future = client.submit("t/echo", ECHO_OK)
        assert not future.done() and r.llen("nobody-listens-full") == 1


def test_a_client_opened_on_a_full_redis_raises_broker_full(small_redis: RedisServer) -> None:
    _fill(redis.Redis.from_url(small_redis.url))
    with pytest.raises(BrokerFull):
        FleetClient(small_redis.url)


def test_a_reply_push_that_meets_a_full_redis_is_kept_until_it_fits(small_redis: RedisServer) -> None:
    r = redis.Redis.from_url(small_redis.url)
    n = _fill(r)
    before = _oom_errors(r)
    result = JobResult(job_id="w/1", problem_id="t/echo", reward=1.0, verdict=Verdict.OK)
    errors: list[BaseException] = []

    def push() -> None:
        try:
            push_reply(redis.Redis.from_url(small_redis.url), "cpfleet:reply:c", result, 60, retry_for_s=1.0,
                       keep_until=protocol.now() + 120)
        except BaseException as exc:  # reported to the test thread
            errors.append(exc)

    t = threading.Thread(target=push)
    t.start()
    assert wait_until(lambda: _oom_errors(r) > before or not t.is_alive(), 30)
    assert not errors, errors  # refused, but still trying
    r.delete(*[f"fill:{i}" for i in range(n)])
    t.join(60)
    assert not t.is_alive() and not errors, errors
    (data,) = r.lrange("cpfleet:reply:c", 0, -1)
    assert protocol.decode_reply(data)["job_id"] == "w/1"


def test_the_reader_still_drains_replies_while_redis_is_full(small_redis: RedisServer) -> None:
    """Reading and trimming replies needs no new memory; a full Redis must not stop the reader."""
    store_problems(small_redis.url, "t/echo")
    r = redis.Redis.from_url(small_redis.url)
    with FleetClient(small_redis.url, queue="nobody-listens-full-2", timeout=120) as client:
        futures = client.submit_many([("t/echo", ECHO_OK)] * 2)
        wire_ids = list(client._jobs.pending)
        r.set("spare:0", b"y" * 4096)
        r.set("spare:1", b"y" * 4096)
        _fill(r)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            r.set("still-full", b"z" * 65536)
        # A script's first write decides the OOM check: deleting a spare key first lets it push,
        # one reply by the client's stream (as workers answer), one by its reply list (as older
        # workers do); the reader reads and trims both while Redis stays full.
        push = r.register_script(
            "redis.call('DEL', KEYS[2]) "
            "if ARGV[2] == 'stream' then return redis.call('XADD', KEYS[1], 'NOMKSTREAM', '*', ARGV[3], ARGV[1]) end "
            "return redis.call('LPUSH', KEYS[1], ARGV[1])")
        for i, (wire_id, way) in enumerate(zip(wire_ids, ("stream", "list"), strict=True)):
            reply = JobResult(job_id=wire_id, problem_id="t/echo", reward=1.0, verdict=Verdict.OK)
            key = client.reply_stream_key if way == "stream" else client.reply_key
            push(keys=[key, f"spare:{i}"], args=[protocol.encode_reply(reply.to_dict()), way, protocol.REPLY_STREAM_FIELD])
            assert futures[i].result(timeout=60).reward == 1.0
        assert wait_until(lambda: r.llen(client.reply_key) == 0 and r.xlen(client.reply_stream_key) == 0, 30)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            r.set("still-full", b"z" * 65536)


def test_a_worker_waiting_for_jobs_outlives_a_full_redis(small_redis: RedisServer, tmp_path: Path) -> None:
    """A node's pop moves each job into its in-flight list (BLMOVE), a write Redis refuses while
    full: the node waits for room and consumes again, never exits (a caller who fills Redis, e.g.
    through the gateway, would otherwise stop every node of the fleet)."""
    store_problems(small_redis.url, "t/echo")
    r = redis.Redis.from_url(small_redis.url)
    with FleetWorker(small_redis.url, tmp_path, concurrency=1) as node:
        before = _oom_errors(r)
        n = _fill(r)
        assert wait_until(lambda: _oom_errors(r) > before, 30)  # the node's pop met the full Redis
        time.sleep(2)  # several pops' worth of it
        assert node.proc is not None and node.proc.poll() is None, node.log_path.read_text()[-3000:]
        r.delete(*[f"fill:{i}" for i in range(n)])
        r.config_set("maxmemory", "0")
        with FleetClient(small_redis.url, timeout=120) as client:
            assert client.submit("t/echo", ECHO_OK).result(timeout=90).reward is not None


def _big_problems(n: int, size: int) -> list[dict]:
    """Problems of ``size`` bytes of incompressible hidden output each (the store compresses)."""
    import base64
    import os

    return [{"id": f"full/{i}", "public_tests": [{"input": "1\n", "output": "1\n"}],
             "hidden_tests": [{"input": "2\n", "output": base64.b64encode(os.urandom(size * 3 // 4)).decode() + "\n"}]}
            for i in range(n)]


def test_a_load_into_a_full_redis_says_what_was_stored_and_what_not_and_what_to_do(
        small_redis: RedisServer, tmp_path: Path) -> None:
    """It printed Redis's raw "OOM command not allowed ..." and nothing of what the store now held."""
    import json
    import os
    import subprocess
    import sys

    from cpfleet.core.store import fetch_problem

    r = redis.Redis.from_url(small_redis.url)
    n = _fill(r)
    r.delete(*[f"fill:{i}" for i in range(12)])  # room for a few problems, not for all
    problems = _big_problems(8, 100_000)
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in problems))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    proc = subprocess.run([sys.executable, "-m", "cpfleet", "load", str(path), "--redis", small_redis.url],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    err = proc.stderr
    assert "is full: it refused writes (OOM command not allowed: maxmemory reached under the noeviction policy)" in err
    assert "raise Redis's maxmemory" in err and "run the same command again" in err
    stored = [p["id"] for p in problems if fetch_problem(r, p["id"]) is not None]  # each one whole: it decodes
    missing = [p["id"] for p in problems if p["id"] not in stored]
    assert stored and missing, (stored, missing)
    assert f"stored {len(stored)} problem(s) (written {len(stored)}, updated 0, unchanged 0); NOT stored {len(missing)}: " \
           f"{', '.join(missing)}" in err
    # the same load once there is room: what was stored is skipped, the rest written
    r.delete(*[f"fill:{i}" for i in range(n)])
    r.config_set("maxmemory", "0")
    proc = subprocess.run([sys.executable, "-m", "cpfleet", "load", str(path), "--redis", small_redis.url],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"written {len(missing)}, unchanged {len(stored)}, updated 0"), proc.stdout


def test_registering_problems_in_a_full_redis_raises_broker_full_naming_those_not_stored(small_redis: RedisServer) -> None:
    from cpfleet.core.errors import StoreFull

    with FleetClient(small_redis.url, timeout=60, warn_unserved=False) as client:
        _fill(redis.Redis.from_url(small_redis.url))
        problems = _big_problems(3, 10_000)
        with pytest.raises(BrokerFull) as info:
            client.register_problems(problems)
        assert isinstance(info.value, StoreFull) and info.value.not_stored == [p["id"] for p in problems]
        assert info.value.stats.total == 0


def test_cpfleet_submit_into_a_full_redis_says_nothing_was_judged_and_what_to_do(
        small_redis: RedisServer, tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    store_problems(small_redis.url, "t/echo")
    r = redis.Redis.from_url(small_redis.url)
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"problem_id": "t/echo", "completion": ECHO_OK, "job_id": f"j{i}"}) + "\n"
                            for i in range(50)))
    _fill(r)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    proc = subprocess.run([sys.executable, "-m", "cpfleet", "submit", str(jobs), "--redis", small_redis.url,
                           "--no-progress", "--queue", "nobody-listens-full"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert "is full (maxmemory reached, noeviction)" in proc.stderr
    assert "no job was judged (any sent before the refusal are withdrawn); make room (raise Redis's maxmemory" in proc.stderr
    assert r.llen("nobody-listens-full") == 0
