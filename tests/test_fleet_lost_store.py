"""Redis loses its data (a FLUSHALL, a restart without persistence, a deleted key) while a
FleetClient has jobs pending, on real workers: nothing is lost. The client republishes what Redis
lost once it finds its claim gone, and stores again the inline tests the store lost, so every job
gets its real result, long before its deadline, and inline tests are never UNKNOWN_PROBLEM."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import redis
from fleet_helpers import start_worker, wait_until  # noqa: F401  (fixture)

from cpfleet.core import protocol
from cpfleet.core.store import remove_problems
from cpfleet.core.verdict import Verdict
from cpfleet.producer.client import FleetClient
from cpfleet.producer.inline_registry import problem_record

# Each test burns ~0.1 s of CPU, so a job (4 tests) takes ~0.5 s: a batch is still running when
# Redis loses its data.
SLOW = {
    "id": "test/slow-add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "2 2\n", "output": "4\n"}],
    "hidden_tests": [{"input": "3 4\n", "output": "7\n"}, {"input": "10 20\n", "output": "30\n"}],
}
SLOW_OK = """```python
import time
t = time.process_time()
while time.process_time() - t < 0.1:
    pass
a, b = map(int, input().split())
print(a + b)
```"""
SLOW_WRONG = SLOW_OK.replace("print(a + b)", "print(a - b)")
# the same tests, inline (verl's shape): stored by the client under an inline/ id
INLINE = {"inputs": ["1 2\n", "2 2\n", "3 4\n", "10 20\n"], "outputs": ["3\n", "4\n", "7\n", "30\n"]}

LONG_TIMEOUT = 300.0  # a job's deadline
PROMPT_BOUND = 60.0  # what "well before the deadline" means here: a functional bound, not a benchmark


def test_a_flushall_mid_run_republishes_the_pending_jobs_and_they_get_their_real_results_before_their_deadline(
    redis_url: str, start_worker  # noqa: F811
) -> None:
    start_worker(redis_url, concurrency=2)
    r = redis.Redis.from_url(redis_url)
    # small publish batches: the republish goes out in several
    with FleetClient(redis_url, timeout=LONG_TIMEOUT, use_cache=False, publish_batch=5) as client:
        client.register_problems([SLOW])
        jobs: list[Any] = []
        for i in range(24):
            completion = SLOW_OK if i % 3 else SLOW_WRONG
            if i % 2:
                jobs.append({"problem_id": SLOW["id"], "completion": completion, "job_id": f"named-{i}"})
            else:
                jobs.append({"tests": INLINE, "completion": completion, "job_id": f"inline-{i}"})
        futures = client.submit_many(jobs)
        assert wait_until(lambda: sum(f.done() for f in futures) >= 2, timeout=60)
        r.flushall()  # the queue, the claim, the reply stream and the stored problems are gone
        client.register_problems([SLOW])  # named problems are the user's to load again; inline ones are not
        started = time.monotonic()
        results = client.gather(futures, timeout=PROMPT_BOUND)  # old code: the lost jobs wait for 300 s
        assert time.monotonic() - started < PROMPT_BOUND
        assert client.stats.republished > 0
    by_id = {res.job_id: res for res in results}
    assert len(by_id) == 24
    for i in range(24):
        res = by_id[f"{'inline' if i % 2 == 0 else 'named'}-{i}"]
        expected = 1.0 if i % 3 else 0.0  # the real verdict, never INTERNAL nor UNKNOWN_PROBLEM
        assert res.reward == expected and not res.infra_error, (i, res.verdict, res.infra_message)
    assert Counter(res.verdict for res in results) == {Verdict.OK: 16, Verdict.WRONG_ANSWER: 8}


def test_jobs_a_worker_dropped_while_the_claim_key_was_gone_are_republished_not_left_to_their_deadline(
    redis_url: str, start_worker  # noqa: F811
) -> None:
    # only the claim is gone (evicted, deleted): workers drop the jobs they pick up meanwhile
    start_worker(redis_url, concurrency=2)
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, timeout=LONG_TIMEOUT, use_cache=False) as client:
        client.register_problems([SLOW])
        futures = client.submit_many([{"problem_id": SLOW["id"], "completion": SLOW_OK} for _ in range(16)])
        assert wait_until(lambda: sum(f.done() for f in futures) >= 1, timeout=60)
        r.delete(protocol.client_claim_key(client.client_id))
        results = client.gather(futures, timeout=PROMPT_BOUND)
    assert all(res.reward == 1.0 for res in results), Counter(res.infra_message for res in results)


def test_inline_tests_the_store_lost_are_stored_again_and_judged_not_an_unknown_problem(
    redis_url: str, start_worker  # noqa: F811
) -> None:
    start_worker(redis_url, concurrency=2)
    r = redis.Redis.from_url(redis_url)
    pid = problem_record(INLINE)["id"]
    with FleetClient(redis_url, timeout=LONG_TIMEOUT, use_cache=False) as client:
        first = client.gather(client.submit_many([{"tests": INLINE, "completion": SLOW_OK}]), timeout=PROMPT_BOUND)
        assert first[0].reward == 1.0, first[0].infra_message
        for _round in range(2):  # lost twice: each loss is stored again (once per job, never a loop)
            assert remove_problems(r, [pid]) == 1  # what a FLUSHALL or a restart does to it
            futures = client.submit_many(
                [{"tests": INLINE, "completion": SLOW_OK}, (INLINE, SLOW_OK), {"tests": INLINE, "completion": SLOW_WRONG}]
            )
            results = client.gather(futures, timeout=PROMPT_BOUND)
            assert [res.reward for res in results] == [1.0, 1.0, 0.0], [(x.verdict, x.infra_message) for x in results]
        # the asyncio path (a GRPO group through evaluate, the tests already known to the client)
        assert remove_problems(r, [pid]) == 1

        async def group() -> list[Any]:
            return list(await asyncio.gather(*(client.evaluate(INLINE, SLOW_OK, job_id=str(i)) for i in range(3))))

        assert [res.reward for res in asyncio.run(group())] == [1.0, 1.0, 1.0]


def test_a_named_problem_the_store_lost_is_still_answered_unknown_problem_not_republished(
    redis_url: str, start_worker  # noqa: F811
) -> None:
    # a job naming a problem by id is the user's to load again: UNKNOWN_PROBLEM, not a republish
    start_worker(redis_url, concurrency=1)
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, timeout=LONG_TIMEOUT, use_cache=False) as client:
        client.register_problems([SLOW])
        assert client.gather([client.submit(SLOW["id"], SLOW_OK)], timeout=PROMPT_BOUND)[0].reward == 1.0
        assert remove_problems(r, [SLOW["id"]]) == 1
        named = client.gather([client.submit(SLOW["id"], SLOW_OK)], timeout=PROMPT_BOUND)[0]
        assert named.verdict == Verdict.UNKNOWN_PROBLEM and named.reward is None
        assert client.stats.republished == 0


def test_a_job_of_inline_tests_is_stored_again_once_and_a_second_unknown_problem_is_its_answer() -> None:
    # never a loop: the first UNKNOWN_PROBLEM of a job of inline tests is held for the client to
    # store the tests again and republish; the next one is the job's answer
    from cpfleet.core.results import JobResult
    from cpfleet.producer.pending import JobRegistry, JobSpec

    jobs = JobRegistry(reply_to="r", reply_ttl=60, use_cache=False, client_id="c", client_token="t", max_in_flight=10)
    spec = JobSpec("j", problem_record(INLINE)["id"], SLOW_OK, "all_or_nothing", "full", 60.0, tests=INLINE)
    (entry,) = jobs.register([spec], None)

    def unknown(wire_id: str) -> JobResult:
        return JobResult.infra(wire_id, spec.problem_id, "no such problem", verdict=Verdict.UNKNOWN_PROBLEM)

    assert not jobs.resolve(entry.msg.job_id, unknown(entry.msg.job_id))
    assert [e for e, _ in jobs.take_lost_inline()] == [entry] and not entry.future.done()
    sent: list[Any] = []
    assert jobs.republish([entry], sent.extend) == 1 and sent[0].job_id == entry.msg.job_id
    first_attempt = entry.attempts[0]
    assert not jobs.resolve(first_attempt, unknown(first_attempt))  # stale: from before the restore
    assert not entry.future.done() and jobs.take_lost_inline() == []
    assert jobs.resolve(entry.msg.job_id, unknown(entry.msg.job_id))
    assert entry.future.result().verdict == Verdict.UNKNOWN_PROBLEM and jobs.take_lost_inline() == []


def test_the_sync_trl_and_verl_batch_adapters_store_again_the_inline_tests_the_store_lost(
    redis_url: str, start_worker  # noqa: F811
) -> None:
    """TRLReward and verl's compute_score_batch sent a job of inline tests by its stored id
    alone: once the store lost the tests (a Redis restart without its data), the job came back
    UNKNOWN_PROBLEM and the call raised UnknownProblemError, the caller's permanent error, for
    the fleet's own loss, however the tests (with their limits) were in the dataset column. The
    tests travel with the job, as FleetClient's own inline jobs do, and are stored again."""
    from cpfleet.rewards.trl import TRLReward
    from cpfleet.rewards.verl import close_verl_connections, compute_score_batch

    start_worker(redis_url, concurrency=2)
    r = redis.Redis.from_url(redis_url)
    pid = problem_record({"tests": INLINE, "time_limit_s": 6})["id"]
    reward = TRLReward(redis_url, tests_column="tests", time_limit_s=6)
    try:
        for _round in range(2):
            assert reward(completions=[SLOW_OK, SLOW_WRONG], tests=[INLINE, INLINE]) == [1.0, 0.0]
            assert remove_problems(r, [pid]) == 1  # what a FLUSHALL or a restart does to it
    finally:
        reward.close()
    try:
        for _round in range(2):
            scores = compute_score_batch(["d", "d"], [SLOW_OK, SLOW_WRONG], [INLINE, INLINE], redis_url=redis_url,
                                         time_limit_s=6)
            assert [s["score"] for s in scores] == [1.0, 0.0], scores
            assert remove_problems(r, [pid]) == 1
    finally:
        close_verl_connections()
