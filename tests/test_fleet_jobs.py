"""Single jobs through a real fleet: odd inputs get explicit results, the worker keeps serving,
modes and the result cache behave, clients stay apart, deadlines and backpressure hold."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import redis
from fleet_helpers import REPO, FleetWorker, store_problems, wait_until
from kombu import Connection, Producer

from cpfleet.core import protocol
from cpfleet.core.errors import UnknownProblemError
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.redis_server import RedisServer, free_port
from cpfleet.producer.client import BrokerUnavailable, FleetBusy, FleetClient
from cpfleet.producer.publisher import task_message

ADD = {
    "id": "test/add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}],
    "hidden_tests": [{"input": f"{i} {i * 7}\n", "output": f"{i * 8}\n"} for i in range(6)],
}
GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
HALF = "```python\na, b = map(int, input().split())\nprint(a + b if a < 3 else 0)\n```"


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    """One worker node for this module, on the session's redis-server."""
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2) as worker:
        yield worker


@pytest.fixture
def fleet_url(node: FleetWorker) -> str:
    return node.redis_url


@pytest.fixture
def fleet(fleet_url: str) -> Iterator[FleetClient]:
    with FleetClient(fleet_url, timeout=60) as client:
        client.register_problems([ADD])
        yield client


def _one(fleet: FleetClient, completion: str | bytes, **kw: Any) -> Any:
    return fleet.submit("test/add", completion, **kw).result(timeout=90)


def test_correct_job_earns_reward_one_with_public_feedback(fleet: FleetClient) -> None:
    r = _one(fleet, GOOD)
    assert (r.verdict, r.reward, r.infra_error) == (Verdict.OK, 1.0, False)
    assert (r.public.passed, r.public.total, r.hidden.passed, r.hidden.total) == (2, 2, 6, 6)
    assert [t.verdict for t in r.public.tests] == [Verdict.OK, Verdict.OK]
    assert "sample test 1/2" in r.observation and r.worker.startswith("test-")


def test_unknown_problem_is_refused_at_submit_not_a_zero(fleet: FleetClient) -> None:
    with pytest.raises(UnknownProblemError, match="'no/such/problem'.*cpfleet load") as err:
        fleet.submit("no/such/problem", GOOD)
    assert err.value.problem_ids == ["no/such/problem"]


def test_empty_completion_is_no_code_with_reward_zero(fleet: FleetClient) -> None:
    r = _one(fleet, "")
    assert (r.verdict, r.reward, r.infra_error) == (Verdict.NO_CODE, 0.0, False)


def test_ten_megabyte_completion_is_judged(fleet: FleetClient) -> None:
    big = GOOD[:-3] + "# " + "x" * (10 * 1024 * 1024) + "\n```"
    r = _one(fleet, big)
    assert (r.verdict, r.reward) == (Verdict.OK, 1.0)


def test_non_utf8_completion_is_judged_not_crashed(fleet: FleetClient) -> None:
    raw = GOOD.encode()[:-3] + b"# \xff\xfe\xc3\n```"
    r = _one(fleet, raw)
    assert not r.infra_error and r.verdict == Verdict.OK


def test_public_mode_runs_no_hidden_test(fleet: FleetClient) -> None:
    r = _one(fleet, HALF, mode="public")
    assert r.mode == "public" and r.hidden.run == 0
    assert r.public.passed == 1 and r.public.total == 2 and r.reward is not None and r.reward < 1


def test_fraction_reward_counts_passed_hidden_tests(fleet: FleetClient) -> None:
    r = _one(fleet, HALF, reward_shape="fraction")
    assert r.reward_shape == "fraction" and r.hidden.run == 6 and r.reward == pytest.approx(3 / 6)


def test_same_extracted_code_is_served_from_the_result_cache(fleet: FleetClient, fleet_url: str) -> None:
    code = f"```python\na, b = map(int, input().split())\nprint(a + b)  # {uuid.uuid4().hex}\n```"
    first = _one(fleet, "Let me think.\n" + code)
    second = _one(fleet, "A different preamble, same program:\n" + code + "\nDone.")
    other_options = _one(fleet, code, reward_shape="fraction")
    assert not first.cache_hit and second.cache_hit and not other_options.cache_hit
    assert (second.reward, second.verdict, second.public.passed) == (first.reward, first.verdict, first.public.passed)
    assert second.job_id != first.job_id and second.problem_version == first.problem_version
    with FleetClient(fleet_url, timeout=60, use_cache=False) as uncached:
        assert not uncached.submit("test/add", code).result(timeout=90).cache_hit


def test_a_changed_problem_never_gets_a_cached_result_of_its_old_version(fleet: FleetClient) -> None:
    code = f"```python\na, b = map(int, input().split())\nprint(a + b)  # {uuid.uuid4().hex}\n```"
    assert _one(fleet, code).reward == 1.0
    fleet.register_problems([{**ADD, "hidden_tests": [{"input": "1 1\n", "output": "3\n"}]}])
    try:
        r = _one(fleet, code)
        assert not r.cache_hit and r.reward == 0.0
    finally:
        fleet.register_problems([ADD])


def test_malformed_messages_are_rejected_and_the_worker_keeps_serving(
    fleet: FleetClient, fleet_url: str, node: FleetWorker
) -> None:
    key = protocol.reply_key("malformed-" + uuid.uuid4().hex)
    job = protocol.JobMessage(job_id="m-1", problem_id="test/add", completion=GOOD, reply_to=key)
    headers, props, _ = task_message(job, "m-1")
    with Connection(fleet_url) as conn:
        producer = Producer(conn.default_channel)

        def publish(body: Any, serializer: str = "msgpack", **extra: Any) -> None:
            producer.publish(
                body, routing_key=protocol.DEFAULT_QUEUE, exchange="", serializer=serializer,
                headers={**headers, **extra}, **props,
            )

        publish({"junk": True}, serializer="json", id="junk-json")  # a content type the worker refuses
        publish((["just a string"], {}, {}), id="not-a-map")  # right envelope, argument not a job
        publish(([{**job.to_wire(), "v": 99}], {}, {}), id="bad-version")  # names its reply list
    item = redis.Redis.from_url(fleet_url).brpop([key], timeout=60)
    assert item is not None
    answer = protocol.decode_reply(item[1])
    assert answer["job_id"] == "m-1" and answer["verdict"] == "INTERNAL" and answer["reward"] is None
    assert "malformed job" in answer["infra_message"] and "version" in answer["infra_message"]
    assert wait_until(lambda: "rejected malformed job message (task not-a-map)" in node.log_text(), timeout=30)
    assert "junk-json" in node.log_text() or "Refusing to deserialize" in node.log_text()
    r = _one(fleet, GOOD)  # the node still serves normal jobs
    assert r.verdict == Verdict.OK


def test_two_clients_at_once_each_get_only_their_own_results(fleet_url: str) -> None:
    with FleetClient(fleet_url, timeout=60) as a, FleetClient(fleet_url, timeout=60) as b:
        a.register_problems([ADD])
        fa = a.submit_many([{"problem_id": "test/add", "completion": GOOD, "job_id": f"a-{i}"} for i in range(30)])
        fb = b.submit_many([{"problem_id": "test/add", "completion": HALF, "job_id": f"b-{i}"} for i in range(30)])
        ra, rb = a.gather(fa, timeout=120), b.gather(fb, timeout=120)
    assert [r.job_id for r in ra] == [f"a-{i}" for i in range(30)] and {r.reward for r in ra} == {1.0}
    assert [r.job_id for r in rb] == [f"b-{i}" for i in range(30)] and {r.reward for r in rb} == {0.0}
    assert a.stats.duplicates == b.stats.duplicates == 0 and a.stats.malformed_replies == 0


def test_asyncio_api_evaluates_and_gathers(fleet: FleetClient) -> None:
    async def main() -> tuple[Any, list[Any], list[Any]]:
        single = await fleet.aevaluate("test/add", GOOD)
        futures = await fleet.asubmit_many([("test/add", GOOD), ("test/add", HALF)])
        gathered = await fleet.agather(futures, timeout=90)
        more = await fleet.asubmit_many([("test/add", GOOD)] * 3)
        streamed = [r async for r in fleet.aas_completed(more, timeout=90)]
        return single, gathered, streamed

    single, gathered, streamed = asyncio.run(main())
    assert single.reward == 1.0 and [r.reward for r in gathered] == [1.0, 0.0] and len(streamed) == 3


def test_as_completed_yields_every_result_once(fleet: FleetClient) -> None:
    futures = fleet.submit_many([("test/add", GOOD)] * 5 + [("test/add", HALF)] * 5)
    seen = [f.result().job_id for f in fleet.as_completed(futures, timeout=120)]
    assert sorted(seen) == sorted(f.result().job_id for f in futures) and len(set(seen)) == 10


# --- without workers: deadlines, backpressure, broker down ----------------------------------


def test_missed_deadline_is_an_internal_result_never_a_zero(redis_url: str) -> None:
    store_problems(redis_url, "test/add")
    with FleetClient(redis_url, queue="nobody-listens", timeout=0.5) as client:
        r = client.submit("test/add", GOOD).result(timeout=30)
        assert r.verdict == Verdict.INTERNAL and r.infra_error and r.reward is None
        assert "no result within 0.5s" in r.infra_message
        assert client.stats.deadline_misses == 1


def test_missed_deadline_resubmits_once_before_giving_up(redis_url: str) -> None:
    store_problems(redis_url, "test/add")
    with FleetClient(redis_url, queue="nobody-listens-2", timeout=0.4, resubmit_on_timeout=True) as client:
        r = client.submit("test/add", GOOD).result(timeout=30)
        assert r.infra_error and "after one resubmit" in r.infra_message
        assert client.stats.resubmitted == 1
    assert redis.Redis.from_url(redis_url).llen("nobody-listens-2") == 2  # the job, then its resubmit


def test_in_flight_bound_blocks_then_raises_fleet_busy(redis_url: str) -> None:
    store_problems(redis_url, "test/add")
    with FleetClient(redis_url, queue="nobody-listens-3", max_in_flight=3, timeout=30) as client:
        client.submit_many([("test/add", GOOD)] * 3)
        with pytest.raises(FleetBusy):
            client.submit("test/add", GOOD, wait_for_room=0.3)
        assert client.in_flight == 3  # the refused job was never registered nor published
        assert redis.Redis.from_url(redis_url).llen("nobody-listens-3") == 3  # (close() withdraws them)


def test_unreachable_broker_is_a_clear_error() -> None:
    with pytest.raises(BrokerUnavailable, match="cannot reach Redis"):
        FleetClient(f"redis://127.0.0.1:{free_port()}/0")


def test_broker_going_away_makes_submit_raise_broker_unavailable(tmp_path: Path) -> None:
    server = RedisServer().start()
    try:
        client = FleetClient(server.url, timeout=5)
        server.stop(kill=True)
        with pytest.raises(BrokerUnavailable):
            client.submit_many([("test/add", GOOD)] * 3)
        assert client.in_flight == 0
        client.close()
    finally:
        server.close()


def test_reply_messages_are_msgpack_with_a_version(fleet: FleetClient, fleet_url: str) -> None:
    """A reply popped by hand decodes with the protocol module (the wire contract for other clients)."""
    key = protocol.reply_key("by-hand-" + uuid.uuid4().hex)
    msg = protocol.JobMessage(
        job_id="hand-1", problem_id="test/add", completion=GOOD, reply_to=key, submitted_at=protocol.now()
    )
    from cpfleet.producer.publisher import Publisher

    pub = Publisher(fleet_url, protocol.DEFAULT_QUEUE)
    pub.publish([(msg, "hand-1")])
    pub.close()
    r = redis.Redis.from_url(fleet_url)
    assert wait_until(lambda: r.exists(key) == 1, timeout=60)
    assert 0 < r.ttl(key) <= protocol.DEFAULT_REPLY_TTL_S  # reply lists expire
    raw = msgpack.unpackb(r.rpop(key), raw=False)
    assert raw["v"] == protocol.PROTOCOL_VERSION and raw["result"]["job_id"] == "hand-1"
    assert raw["result"]["reward"] == 1.0


def test_result_cache_never_stores_infrastructure_failures(redis_url: str) -> None:
    from cpfleet.core.results import JobResult
    from cpfleet.workers.result_cache import ResultCache

    cache = ResultCache(redis.Redis.from_url(redis_url), ttl_s=60)
    key = cache.key("v1", "print(1)\n", "all_or_nothing", "full")
    assert not cache.put(key, JobResult.infra("j", "p", "sandbox broke"))
    assert cache.get(key, "j2") is None
    ok = JobResult(job_id="j", problem_id="p", reward=1.0, verdict=Verdict.OK, worker="w")
    assert cache.put(key, ok)
    hit = cache.get(key, "j3")
    assert hit is not None and hit.job_id == "j3" and hit.cache_hit and hit.reward == 1.0 and hit.worker == ""
    redis.Redis.from_url(redis_url).set(key, b"\x00garbage")
    assert cache.get(key, "j4") is None  # a damaged entry is a miss, never a failed job


def test_each_job_leaves_one_structured_log_line_with_its_id(fleet: FleetClient, node: FleetWorker) -> None:
    job_id = "logged-" + uuid.uuid4().hex
    r = fleet.submit("test/add", GOOD, job_id=job_id).result(timeout=90)

    def done_lines() -> list[str]:
        return [ln for ln in node.log_text().splitlines() if job_id in ln and '"event":"job_done"' in ln]

    # the line is written after the reply is sent, so it may come a moment after the result
    assert wait_until(lambda: len(done_lines()) >= 1, timeout=30)
    lines = done_lines()
    assert len(lines) == 1
    record = json.loads(lines[0][lines[0].index("{"):])
    assert record["problem_id"] == "test/add" and record["verdict"] == str(r.verdict)
    assert "executed_ms" in record and record["cache_hit"] == r.cache_hit


def test_importing_the_producer_loads_no_runner_and_no_worker_code() -> None:
    code = (
        "import sys, cpfleet.producer.client, cpfleet.jobs.submit\n"
        "bad = [m for m in sys.modules if m.startswith(('workers', 'cpfleet.sandbox.forkserver', 'cpfleet.sandbox.zygote',"
        " 'cpfleet.sandbox.jobinit', 'cpfleet.sandbox.jobs', 'cpfleet.sandbox.pairs', 'cpfleet.sandbox.police',"
        " 'cpfleet.sandbox.runners', 'cpfleet.sandbox.env', 'cpfleet.sandbox.isolation', 'celery.worker'))]\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_cpfleet_worker_command_starts_a_node_that_serves_jobs(redis_url: str, tmp_path: Path) -> None:
    log = (tmp_path / "cli-worker.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpfleet.cli", "worker", "--redis", redis_url, "-c", "1", "--queues", "cli-q",
         "--no-events", "-n", "cli-test@localhost"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        with FleetClient(redis_url, queue="cli-q", timeout=120) as client:
            client.register_problems([ADD])
            r = client.submit("test/add", GOOD).result(timeout=150)
        assert r.reward == 1.0 and r.worker == "cli-test@localhost"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            log.close()
    assert proc.returncode == 0  # warm shutdown on SIGTERM: the exec'd celery got the signal
