"""The client delivers each result to the job that asked for it, exactly once, and never strands a
future: reused and duplicate job ids, backpressure, close() mid-submit, odd completions, a
shared client_id, a Redis error in the reader, concurrent submitters, the deadline heap.

Real redis-server (conftest) and, where a job must run, a real prefork worker node with the
test-only fault jobs (a job id ending ``#sleep:S`` takes S seconds more; tests/fault_jobs.py)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fleet_helpers import FleetWorker, store_problems, wait_until
from net_helpers import CuttingProxy

from cpfleet.core import protocol
from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.producer.client import ClientClosed, FleetClient
from cpfleet.producer.publisher import Publisher, PublisherClosed

ECHO = {"id": "t/echo", "public_tests": [{"input": "1\n", "output": "1\n"}], "hidden_tests": [{"input": "5\n", "output": "5\n"}]}
DOUBLE = {"id": "t/double", "public_tests": [{"input": "1\n", "output": "2\n"}], "hidden_tests": [{"input": "5\n", "output": "10\n"}]}
ECHO_OK = "```python\nprint(input())\n```"
DOUBLE_OK = "```python\nprint(2 * int(input()))\n```"


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    """One worker node (loading tests/fault_jobs.py) for this module, on the session's redis-server."""
    with FleetWorker(
        redis_server.url, tmp_path_factory.mktemp("delivery"), concurrency=2, faults=True
    ) as worker:
        yield worker


@pytest.fixture
def fleet_url(node: FleetWorker, redis_url: str) -> str:
    """A clean database served by the node (problems are registered per test)."""
    return redis_url


def _push_reply(r: redis.Redis, client: FleetClient, wire_id: str, reward: float) -> None:
    """Answer one attempt by hand, as a worker would."""
    result = JobResult(job_id=wire_id, problem_id="t/echo", reward=reward, verdict=Verdict.OK)
    r.lpush(client.reply_key, protocol.encode_reply(result.to_dict()))


# --- 1. a late reply never resolves a later job that reuses the job_id -------------------------


def test_reused_job_id_after_a_deadline_miss_gets_its_own_result(fleet_url: str) -> None:
    with FleetClient(fleet_url, timeout=60) as client:
        client.register_problems([ECHO, DOUBLE])
        # The first job misses its deadline; its (right, reward 1) reply comes later.
        first = client.submit_many(
            [{"problem_id": "t/echo", "completion": ECHO_OK, "job_id": "step-0#sleep:3"}], timeout=0.5
        )[0].result(timeout=30)
        assert first.infra_error and first.job_id == "step-0#sleep:3" and "no result within" in first.infra_message
        # Same job_id, another problem, a WRONG solution: it must earn 0 on its own problem.
        second = client.submit_many(
            [{"problem_id": "t/double", "completion": ECHO_OK, "job_id": "step-0#sleep:3"}]
        )[0].result(timeout=60)
        assert (second.job_id, second.problem_id, second.reward) == ("step-0#sleep:3", "t/double", 0.0)
        assert second.verdict == Verdict.WRONG_ANSWER and not second.infra_error
        assert wait_until(lambda: client.stats.duplicates == 1, timeout=60)  # the first job's late reply, dropped


# --- 2. duplicate job ids in one batch: each job gets its own result ---------------------------


def test_duplicate_job_ids_in_one_batch_each_get_their_own_result(fleet_url: str) -> None:
    with FleetClient(fleet_url, timeout=60, publish_batch=2) as client:  # the duplicates span chunks
        client.register_problems([ECHO, DOUBLE])
        jobs = [
            {"problem_id": "t/echo", "completion": ECHO_OK, "job_id": "dup"},
            {"problem_id": "t/echo", "completion": "no code here", "job_id": "dup"},
            {"problem_id": "t/double", "completion": DOUBLE_OK, "job_id": "dup"},
            {"problem_id": "t/double", "completion": ECHO_OK, "job_id": "other"},
            {"problem_id": "t/echo", "completion": ECHO_OK, "job_id": "dup"},
        ]
        results = client.gather(client.submit_many(jobs), timeout=120)
        assert client.in_flight == 0 and client.stats.duplicates == 0
    assert [r.job_id for r in results] == ["dup", "dup", "dup", "other", "dup"]
    assert [r.problem_id for r in results] == ["t/echo", "t/echo", "t/double", "t/double", "t/echo"]
    assert [r.reward for r in results] == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert results[1].verdict == Verdict.NO_CODE


def test_an_invalid_job_anywhere_in_the_batch_publishes_nothing(redis_url: str) -> None:
    with FleetClient(redis_url, queue="nobody-listens-invalid", publish_batch=2) as client:
        jobs: list[Any] = [("t/echo", ECHO_OK)] * 5 + [("", ECHO_OK)]
        with pytest.raises(ValueError, match="problem_id"):
            client.submit_many(jobs)
        assert client.in_flight == 0 and client.stats.submitted == 0
    assert redis.Redis.from_url(redis_url).llen("nobody-listens-invalid") == 0


# --- 3. backpressure: a job's deadline counts from its publication ------------------------------


@pytest.mark.slow
def test_jobs_waiting_for_room_are_stamped_when_published_and_all_run(fleet_url: str) -> None:
    with FleetClient(fleet_url, timeout=8, max_in_flight=2) as client:
        client.register_problems([ECHO])
        # 12 two-second jobs, two at a time: the last ones are published ~10 s after the call, past
        # a deadline stamped at the call; stamped at publication, each has 8 s for its ~2 s run
        # (room for a loaded machine's slower pickup and sandbox start).
        jobs = [{"problem_id": "t/echo", "completion": ECHO_OK, "job_id": f"j{i}#sleep:2"} for i in range(12)]
        results = client.gather(client.submit_many(jobs), timeout=120)
    assert [r.infra_message for r in results if r.infra_error] == []
    assert {r.reward for r in results} == {1.0}


# --- 4. close() during a multi-chunk submit_many -------------------------------------------------


def test_close_during_submit_many_raises_and_strands_no_future(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store_problems(redis_url, "t/echo")
    client = FleetClient(redis_url, queue="nobody-listens-close", publish_batch=10, timeout=600)
    real = client._publisher.push
    calls = []

    def publish_then_close(messages: Any) -> None:
        real(messages)
        calls.append(len(messages))
        if len(calls) == 2:
            client.close()  # as another thread would, between two chunks

    monkeypatch.setattr(client._publisher, "push", publish_then_close)
    with pytest.raises(ClientClosed) as info:
        client.submit_many([("t/echo", ECHO_OK)] * 50)
    assert calls == [10, 10]  # nothing registered nor published after close()
    submitted = info.value.submitted
    assert len(submitted) == 20 and all(f.done() for f in submitted)  # the two published chunks
    assert {f.result().infra_message for f in submitted} == {"client closed before the result"}
    assert client.in_flight == 0
    assert redis.Redis.from_url(redis_url).llen("nobody-listens-close") == 0  # close() took its queued jobs back
    with pytest.raises(ClientClosed):
        client.submit("t/echo", ECHO_OK)


def test_close_from_another_thread_while_submitting_leaves_every_future_resolved(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_problems(redis_url, "t/echo")
    client = FleetClient(redis_url, queue="nobody-listens-close-2", publish_batch=5, timeout=600)
    real = client._publisher.push
    published = threading.Event()

    def publish(messages: Any) -> None:
        real(messages)
        published.set()

    monkeypatch.setattr(client._publisher, "push", publish)
    out: dict[str, Any] = {}

    def submit() -> None:
        futures: list[Any] = []
        try:
            while True:
                futures += client.submit_many([("t/echo", ECHO_OK)] * 10)
        except ClientClosed as exc:
            futures += exc.submitted
            out["closed"] = True
        out["futures"] = futures

    t = threading.Thread(target=submit)
    t.start()
    assert published.wait(30)
    client.close()
    t.join(60)
    assert out.get("closed") and all(f.done() for f in out["futures"]) and client.in_flight == 0


def test_a_closed_publisher_never_reconnects(redis_url: str) -> None:
    pub = Publisher(redis_url, "nobody-listens-pub")
    msg = protocol.JobMessage(job_id="j", problem_id="p", completion="c", reply_to="r")
    pub.publish([(msg, "j")])
    pub.close()
    with pytest.raises(PublisherClosed):
        pub.publish([(msg, "j2")])
    assert redis.Redis.from_url(redis_url).llen("nobody-listens-pub") == 1


# --- 5. a reply taken from the reply list is never lost with the connection -------------------


def test_a_round_whose_answer_is_lost_after_its_trim_ran_never_trims_twice(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader trims replies it delivered from the reply list in its next round. If that
    round's answer is lost after Redis ran it, the trim must not be sent again: it would remove
    the next reply, not read yet. Here the second reply lands just before the round that trims
    the first (which also reads the second), and that round's answer is dropped; the second job
    must still resolve."""
    store_problems(redis_url, "t/echo")
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, queue="nobody-listens-trim", timeout=600) as client:
        reader = client._replies
        real_pipeline = reader._redis.pipeline
        first = client.submit("t/echo", ECHO_OK, job_id="first")
        second = client.submit("t/echo", ECHO_OK, job_id="second")
        wire_first, wire_second = list(client._jobs.pending)
        dropped: list[int] = []

        def pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = real_pipeline(*args, **kwargs)
            real_execute = pipe.execute

            def execute(*a: Any, **k: Any) -> Any:
                if dropped or not any(c[0][0] == "LTRIM" for c in pipe.command_stack):
                    return real_execute(*a, **k)
                _push_reply(r, client, wire_second, 0.5)
                real_execute(*a, **k)  # Redis runs every command of the round: the trim, the read
                dropped.append(1)
                raise redis.ConnectionError("simulated drop of the round's answer")

            pipe.execute = execute
            return pipe

        monkeypatch.setattr(reader._redis, "pipeline", pipeline)
        _push_reply(r, client, wire_first, 1.0)
        assert first.result(timeout=30).reward == 1.0
        got = second.result(timeout=30)
        assert (got.job_id, got.reward) == ("second", 0.5)
        assert dropped == [1] and client.stats.reader_errors == 1
        assert wait_until(lambda: r.llen(client.reply_key) == 0, 30)  # and it was trimmed at last


def _append_reply(r: redis.Redis, client: FleetClient, wire_id: str, reward: float) -> None:
    """Answer one attempt by hand on the client's reply stream, as a worker does."""
    result = JobResult(job_id=wire_id, problem_id="t/echo", reward=reward, verdict=Verdict.OK)
    data = protocol.encode_reply(result.to_dict())
    assert r.xadd(client.reply_stream_key, {protocol.REPLY_STREAM_FIELD: data}, nomkstream=True) is not None


def test_a_stream_read_whose_answer_dies_on_the_wire_still_resolves_its_job(
    redis_server: RedisServer, redis_url: str
) -> None:
    """The reader's XREAD carries a reply and the connection dies before the client reads the
    answer: nothing was taken, the next read from the same entry gets it again; once delivered
    the stream is trimmed of it."""
    store_problems(redis_url, "t/echo")
    r = redis.Redis.from_url(redis_url)
    with CuttingProxy(redis_server.port) as proxy, FleetClient(proxy.url, queue="nobody-listens-xcut", timeout=20) as client:
        future = client.submit("t/echo", ECHO_OK, job_id="mine")
        (wire_id,) = list(client._jobs.pending)
        proxy.cut_on(wire_id.encode())
        _append_reply(r, client, wire_id, 1.0)
        got = future.result(timeout=60)
        assert proxy.cuts == 1  # the read's answer really was dropped
        assert (got.job_id, got.reward, got.infra_error) == ("mine", 1.0, False)
        assert client.stats.reader_errors >= 1
        assert wait_until(lambda: r.xlen(client.reply_stream_key) == 0, 30)
    assert r.exists(client.reply_stream_key, client.reply_key) == 0


def test_a_reply_for_a_stream_that_is_gone_goes_to_the_list_and_the_stream_comes_back(redis_url: str) -> None:
    """A worker's XADD never makes the stream (NOMKSTREAM): with the stream gone (expired, or
    lost with Redis's data) the reply goes to the reply list, which the reader also reads; the
    reader's next claim renewal makes the stream again."""
    from cpfleet.workers.replies import push_reply

    store_problems(redis_url, "t/echo")
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, queue="nobody-listens-gone", timeout=60, reply_ttl=120) as client:
        assert r.xlen(client.reply_stream_key) == 0 and 0 < r.ttl(client.reply_stream_key) <= 120  # made, expiring
        future = client.submit("t/echo", ECHO_OK, job_id="mine")
        (entry,) = client._jobs.pending.values()
        r.delete(client.reply_stream_key)
        result = JobResult(job_id=entry.msg.job_id, problem_id="t/echo", reward=1.0, verdict=Verdict.OK)
        push_reply(r, entry.msg.reply_to, result, 60, stream=entry.msg.reply_stream)
        assert not r.exists(client.reply_stream_key) or r.xlen(client.reply_stream_key) == 0
        assert future.result(timeout=30).reward == 1.0
        client._replies._renew_claim()  # what the reader does every 15 s
        assert r.exists(client.reply_stream_key) and r.ttl(client.reply_stream_key) > 0
        # and replies come by the stream again. The reader trims a delivered list reply in its
        # next round, which may come after this thread's next commands: wait for that first,
        # so the list's absence below says where the second reply went.
        assert wait_until(lambda: not r.exists(client.reply_key), 30), "the delivered reply stayed in the list"
        second = client.submit("t/echo", ECHO_OK, job_id="second")
        (entry,) = client._jobs.pending.values()
        result = JobResult(job_id=entry.msg.job_id, problem_id="t/echo", reward=0.5, verdict=Verdict.OK)
        push_reply(r, entry.msg.reply_to, result, 60, stream=entry.msg.reply_stream)
        assert not r.exists(client.reply_key)
        assert second.result(timeout=30).reward == 0.5


def test_a_reply_whose_pop_answer_dies_on_the_wire_still_resolves_its_job(
    redis_server: RedisServer, redis_url: str
) -> None:
    """Redis executes the reader's pop, then the connection dies before the client reads the
    answer: the reply must still reach its future (it stays in the reply list until delivered).
    The reply list carries replies of workers that predate the reply stream."""
    store_problems(redis_url, "t/echo")
    with CuttingProxy(redis_server.port) as proxy, FleetClient(proxy.url, queue="nobody-listens-cut", timeout=20) as client:
        future = client.submit("t/echo", ECHO_OK, job_id="mine")
        (wire_id,) = list(client._jobs.pending)
        proxy.cut_on(wire_id.encode())
        _push_reply(redis.Redis.from_url(redis_url), client, wire_id, 1.0)
        r = future.result(timeout=60)
        assert proxy.cuts == 1  # the pop's answer really was dropped
        assert (r.job_id, r.reward, r.infra_error) == ("mine", 1.0, False)
        assert client.stats.reader_errors >= 1
    assert redis.Redis.from_url(redis_url).exists(client.processing_key, client.reply_key) == 0


# --- 6. completions that are not plain UTF-8 text ------------------------------------------------


def test_a_lone_surrogate_completion_is_judged_not_a_broker_error(fleet_url: str) -> None:
    with FleetClient(fleet_url, timeout=60) as client:
        client.register_problems([ECHO])
        lone = "```python\nprint(input())  # \ud800\n```"
        raw = b"```python\nprint(input())  # \xff\n```"
        results = client.gather(client.submit_many([("t/echo", lone), ("t/echo", raw), ("t/echo", "\ud800")]), timeout=90)
    assert [(r.verdict, r.reward) for r in results] == [(Verdict.OK, 1.0), (Verdict.OK, 1.0), (Verdict.NO_CODE, 0.0)]


def test_the_completion_size_limit_counts_utf8_bytes(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store_problems(redis_url, "t/echo")
    monkeypatch.setattr(protocol, "MAX_COMPLETION_BYTES", 10)
    with FleetClient(redis_url, queue="nobody-listens-size") as client:
        client.submit("t/echo", "a" * 10)
        client.submit("t/echo", b"a" * 10)
        for too_big in ("\u00e9" * 6, b"a" * 11, "\ud800" * 4):  # 12, 11 and 12 bytes
            with pytest.raises(ValueError, match="exceeds"):
                client.submit("t/echo", too_big)
        assert client.in_flight == 2


# --- 7. one client per client_id ----------------------------------------------------------------


def test_a_second_client_with_the_same_client_id_is_refused(redis_url: str) -> None:
    cid = "trainer-" + uuid.uuid4().hex
    first = FleetClient(redis_url, client_id=cid)
    try:
        with pytest.raises(ValueError, match="in use"):
            FleetClient(redis_url, client_id=cid)
        assert redis.Redis.from_url(redis_url).ttl(protocol.client_claim_key(cid)) > 0
    finally:
        first.close()
    assert redis.Redis.from_url(redis_url).exists(protocol.client_claim_key(cid)) == 0  # released
    FleetClient(redis_url, client_id=cid).close()  # free again once the first one closed


# --- 8. the deadline heap does not keep resolved jobs ---------------------------------------------


def test_the_deadline_heap_stays_bounded_as_jobs_resolve(redis_url: str) -> None:
    store_problems(redis_url, "t/echo")
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, queue="nobody-listens-heap", timeout=900) as client:
        for _ in range(3):
            futures = client.submit_many([("t/echo", ECHO_OK)] * 2000)
            for wire_id in list(client._jobs.pending):
                _push_reply(r, client, wire_id, 1.0)
            assert {r.reward for r in client.gather(futures, timeout=60)} == {1.0}
            assert client.in_flight == 0 and len(client._jobs.deadlines) <= 1024
        assert client.stats.resolved == 6000


# --- 9. concurrent submitters never overshoot max_in_flight -------------------------------------


def test_concurrent_submitters_never_exceed_max_in_flight(fleet_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 3
    with FleetClient(fleet_url, timeout=120, max_in_flight=limit) as client:
        client.register_problems([ECHO])
        seen: list[int] = []
        real = client._publisher.push

        def publish(messages: Any) -> None:
            seen.append(client.in_flight)  # registered and not resolved, as this chunk goes out
            real(messages)

        monkeypatch.setattr(client._publisher, "push", publish)
        futures: list[Any] = []
        lock = threading.Lock()

        def submitter(k: int) -> None:
            for i in range(8):
                f = client.submit("t/echo", ECHO_OK, job_id=f"{k}-{i}")
                with lock:
                    futures.append(f)

        threads = [threading.Thread(target=submitter, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        results = client.gather(futures, timeout=120)
    assert len(results) == 48 and {r.reward for r in results} == {1.0}
    assert max(seen) <= limit


# --- resubmits and the result cache ------------------------------------------------------------


def test_after_a_resubmit_the_first_reply_of_either_attempt_wins(redis_url: str) -> None:
    store_problems(redis_url, "t/echo")
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, queue="nobody-listens-resubmit", timeout=2, resubmit_on_timeout=True) as client:
        future = client.submit("t/echo", ECHO_OK, job_id="again")
        assert wait_until(lambda: client.stats.resubmitted == 1, timeout=30)
        first, second = next(iter(client._jobs.pending.values())).attempts
        assert first != second and first.startswith("again/") and second.startswith("again/")
        _push_reply(r, client, first, 1.0)  # the first attempt answers late, during the second
        result = future.result(timeout=30)
        assert (result.job_id, result.reward) == ("again", 1.0)
        _push_reply(r, client, second, 0.0)
        assert wait_until(lambda: client.stats.duplicates == 1, timeout=30)
        assert client.in_flight == 0 and client._jobs.pending == {}
    assert r.llen("nobody-listens-resubmit") == 2


def test_result_cache_keys_differ_by_runner_kind(redis_url: str) -> None:
    from cpfleet.workers.result_cache import ResultCache

    r = redis.Redis.from_url(redis_url)
    fork, sub = ResultCache(r, runner="forkserver"), ResultCache(r, runner="subprocess")
    assert fork.key("v1", "print(1)\n", "all_or_nothing", "full") != sub.key("v1", "print(1)\n", "all_or_nothing", "full")
    ok = JobResult(job_id="j", problem_id="p", reward=1.0, verdict=Verdict.OK)
    assert fork.put(fork.key("v1", "x", "fraction", "full"), ok)
    assert sub.get(sub.key("v1", "x", "fraction", "full"), "j2") is None
