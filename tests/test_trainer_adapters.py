"""Trainer-facing Python adapters against a real fleet: inline tests registered once by content,
``await fleet.evaluate`` batching and in-flight dedupe, ``map``/``as_completed``, TRL's reward
function (sync, async, pickled, conversational) and verl's compute_score forms."""

from __future__ import annotations

import asyncio
import inspect
import json
import pickle
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fleet_helpers import FleetWorker

from cpfleet.core import protocol
from cpfleet.core.errors import InlineProblemError, JobFormatError, OptionError
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.redis_server import RedisServer, free_port
from cpfleet.producer.client import FleetClient
from cpfleet.producer.inline_registry import problem_record
from cpfleet.rewards import (
    VERDICT_CODES,
    VERL_KEYS,
    AsyncTRLReward,
    TRLReward,
    close_verl_connections,
    compute_score,
    compute_score_async,
    compute_score_batch,
)
from cpfleet.sandbox.extract import extract_code

ADD = {
    "id": "t/add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": f"{i} {i * 7}\n", "output": f"{i * 8}\n"} for i in range(4)],
}
GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG = "```python\na, b = map(int, input().split())\nprint(a - b)\n```"
HALF = "```python\na, b = map(int, input().split())\nprint(a + b if a < 2 else 0)\n```"
# verl / TACO stdio shape of the same problem
ADD_TESTS = {"inputs": [f"{i} {i * 7}\n" for i in range(4)], "outputs": [f"{i * 8}\n" for i in range(4)]}
CODE_CONTESTS_TESTS = {
    "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
    "private_tests": {"input": ["5 6\n", "7 8\n"], "output": ["11\n", "15\n"]},
    "generated_tests": {"input": [], "output": []},
}


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2) as worker:
        yield worker


@pytest.fixture
def fleet(node: FleetWorker) -> Iterator[FleetClient]:
    with FleetClient(node.redis_url, timeout=60) as client:
        client.register_problems([ADD])
        yield client


def stored_inline_ids(url: str) -> set[str]:
    r = redis.Redis.from_url(url)
    try:
        return {m.decode() for m in r.smembers(protocol.problem_index_key()) if m.startswith(b"inline/")}
    finally:
        r.close()


# --- inline tests -------------------------------------------------------------------------------


def test_a_group_sharing_inline_tests_is_stored_once_and_judged_by_id(fleet: FleetClient) -> None:
    before = stored_inline_ids(fleet.redis_url)
    jobs = [{"tests": CODE_CONTESTS_TESTS, "completion": c} for c in (GOOD, WRONG, GOOD, HALF) * 2]
    results = fleet.gather(fleet.submit_many(jobs), timeout=120)
    assert [r.reward for r in results] == [1.0, 0.0, 1.0, 0.0] * 2
    new = stored_inline_ids(fleet.redis_url) - before
    assert new == {problem_record(CODE_CONTESTS_TESTS)["id"]}
    assert {r.problem_id for r in results} == new
    assert fleet.inline_registry.registered == 1
    # the same tests as JSON text (as a dataset column holds them) map to the same stored problem
    again = fleet.submit_many([{"tests": json.dumps(CODE_CONTESTS_TESTS), "completion": GOOD}])
    assert fleet.gather(again, timeout=60)[0].problem_id in new
    assert fleet.inline_registry.registered == 1
    assert problem_record(json.dumps(CODE_CONTESTS_TESTS))["id"] == problem_record(CODE_CONTESTS_TESTS)["id"]


def test_a_second_client_reuses_the_stored_tests_without_writing(fleet: FleetClient) -> None:
    fleet.gather(fleet.submit_many([{"tests": ADD_TESTS, "completion": GOOD}]), timeout=60)
    r = redis.Redis.from_url(fleet.redis_url)
    key = protocol.problem_key(problem_record(ADD_TESTS)["id"])
    data_before = r.hget(key, "data")
    with FleetClient(fleet.redis_url, timeout=60) as other:
        res = other.gather(other.submit_many([{"tests": ADD_TESTS, "completion": HALF}]), timeout=60)[0]
        stats = other.inline_registry
    assert res.verdict == Verdict.WRONG_ANSWER and res.reward == 0.0
    assert stats.registered == 1  # it checked the version once ...
    assert r.hget(key, "data") == data_before  # ... and wrote nothing
    r.close()


def test_unusable_inline_tests_are_refused_before_anything_is_sent(fleet: FleetClient) -> None:
    submitted = fleet.stats.submitted
    with pytest.raises(InlineProblemError):
        fleet.submit_many([{"tests": {"inputs": ["1\n"], "outputs": []}, "completion": GOOD}])
    with pytest.raises(InlineProblemError):
        fleet.submit_many([{"tests": "not json at all", "completion": GOOD}])
    assert fleet.stats.submitted == submitted


# --- evaluate, map, as_completed ----------------------------------------------------------------


def test_evaluate_is_one_await_and_concurrent_calls_share_publishes(fleet: FleetClient) -> None:
    async def main() -> tuple[list[Any], Any]:
        # distinct programs (a comment differs) so nothing is deduped
        calls = [fleet.evaluate("t/add", GOOD.replace("print", f"# {i}\nprint")) for i in range(60)]
        results = await asyncio.gather(*calls)
        return results, fleet.evaluator().stats

    results, stats = asyncio.run(main())
    assert all(r.reward == 1.0 and r.verdict == Verdict.OK for r in results)
    assert stats.calls == 60 and stats.published == 60 and stats.deduped == 0
    assert stats.flushes < 60  # many calls per publish
    assert stats.largest_batch > 1


def test_identical_jobs_in_flight_share_one_judgement(node: FleetWorker) -> None:
    variant = HALF.replace("print", "# dedupe\nprint")

    async def main(fleet: FleetClient) -> tuple[list[Any], Any]:
        # the same program under different prose, plus exact repeats of one completion
        texts = [f"Attempt {i % 5}:\n{variant}" for i in range(10)]
        calls = [fleet.evaluate("t/add", t, job_id=f"j{i}") for i, t in enumerate(texts)]
        results = await asyncio.gather(*calls)
        return results, fleet.evaluator().stats

    with FleetClient(node.redis_url, timeout=60, code_key=extract_code) as fleet:
        fleet.register_problems([ADD])
        results, stats = asyncio.run(main(fleet))
    assert stats.calls == 10 and stats.published == 1 and stats.deduped == 9
    assert [r.job_id for r in results] == [f"j{i}" for i in range(10)]
    assert {r.reward for r in results} == {0.0}
    assert all(r.verdict == Verdict.WRONG_ANSWER for r in results)
    # without the sandbox's extraction the client compares whole completions: 5 distinct texts
    with FleetClient(node.redis_url, timeout=60) as plain:
        results, stats = asyncio.run(main(plain))
    assert stats.published == 5 and stats.deduped == 5
    assert {r.reward for r in results} == {0.0}


def test_evaluate_takes_inline_tests_and_reports_a_bad_set_to_its_caller_only(fleet: FleetClient) -> None:
    async def main() -> list[Any]:
        good = fleet.evaluate(ADD_TESTS, GOOD)
        bad = fleet.evaluate({"inputs": ["1\n"], "outputs": ["1\n", "2\n"]}, GOOD)
        return list(await asyncio.gather(good, bad, return_exceptions=True))

    good, bad = asyncio.run(main())
    assert good.reward == 1.0
    assert isinstance(bad, InlineProblemError)


def test_map_returns_results_in_input_order_and_as_completed_yields_futures(fleet: FleetClient) -> None:
    completions = [GOOD, WRONG, HALF, GOOD]
    mapped = list(fleet.map(["t/add"] * 4, completions, timeout=120, reward_shape="fraction"))
    assert [r.reward for r in mapped] == [1.0, 0.25, 0.5, 1.0]  # a - b is right for 0 0
    futures = fleet.submit_many([("t/add", c) for c in completions])
    seen = list(fleet.as_completed(futures, timeout=120))
    assert sorted(map(id, seen)) == sorted(map(id, futures))
    assert all(f.done() for f in seen)


# --- TRL ----------------------------------------------------------------------------------------


def trl_batch() -> dict[str, Any]:
    """What GRPOTrainer passes: keyword lists, one per completion, plus its own hooks."""
    return {
        "prompts": [[{"role": "user", "content": "add"}]] * 4,
        "completions": [
            [{"role": "assistant", "content": GOOD}],
            [{"role": "assistant", "content": WRONG}],
            GOOD,  # plain-text format
            [{"role": "assistant", "content": [{"type": "text", "text": GOOD}]}],
        ],
        "completion_ids": [[1, 2]] * 4,
        "problem_id": ["t/add", "t/add", "t/add", "t/add"],
        "trainer_state": object(),
    }


def test_trl_reward_logs_verdict_counts(fleet: FleetClient) -> None:
    logged: dict[str, float] = {}
    extra: dict[str, list[Any]] = {}
    fn = TRLReward(fleet.redis_url, timeout_s=60, name="judge")
    try:
        rewards = fn(
            **trl_batch(),
            log_metric=lambda name, value: logged.__setitem__(name, value),
            log_extra=lambda column, values: extra.__setitem__(column, values),
        )
    finally:
        fn.close()
    assert rewards == [1.0, 0.0, 1.0, 1.0]
    assert extra == {"judge_verdict": ["OK", "WRONG_ANSWER", "OK", "OK"]}
    assert fn.__name__ == "judge"
    assert logged["judge/verdict/OK"] == 0.75
    assert logged["judge/verdict/WRONG_ANSWER"] == 0.25
    assert logged["judge/masked"] == 0.0


def test_trl_reward_pickles_before_first_use_and_connects_in_the_new_process_copy(fleet: FleetClient) -> None:
    fn = TRLReward(fleet.redis_url, tests_column="verification_info", reward_shape="fraction", timeout_s=60)
    used = fn  # a used instance pickles too (its connection is left behind)
    used(completions=[GOOD], verification_info=[json.dumps(ADD_TESTS)])
    clone = pickle.loads(pickle.dumps(used))
    try:
        rewards = clone(completions=[HALF, GOOD], verification_info=[ADD_TESTS, json.dumps(ADD_TESTS)])
    finally:
        clone.close()
        fn.close()
    assert rewards == [0.5, 1.0]


def test_trl_reward_reads_a_verl_reward_model_column_as_its_ground_truth(fleet: FleetClient) -> None:
    # a verl parquet's reward_model cell: {"ground_truth": <tests as JSON text or a problem id>,
    # "style": "rule"}; TRL passes it as a dataset column like any other
    cells = [{"ground_truth": json.dumps(ADD_TESTS), "style": "rule"}, {"ground_truth": ADD_TESTS, "style": "rule"},
             {"ground_truth": "t/add", "style": "rule"}]
    for fn in (TRLReward(fleet.redis_url, tests_column="reward_model", reward_shape="fraction", timeout_s=60),
               AsyncTRLReward(fleet.redis_url, tests_column="reward_model", reward_shape="fraction", timeout_s=60)):
        try:
            out = fn(completions=[HALF, GOOD, GOOD], reward_model=cells)
            rewards = asyncio.run(out) if inspect.isawaitable(out) else out
        finally:
            fn.close()
        assert rewards == [0.5, 1.0, 1.0]


def test_async_trl_reward_is_a_coroutine_function_bound_to_the_loop_that_runs_it(fleet: FleetClient) -> None:
    fn = AsyncTRLReward(fleet.redis_url, timeout_s=60, name="cpfleet_async")
    assert inspect.iscoroutinefunction(fn) and asyncio.iscoroutinefunction(fn)
    clone = pickle.loads(pickle.dumps(fn))
    assert inspect.iscoroutinefunction(clone) and clone.__name__ == "cpfleet_async"
    try:
        # two different loops, one after the other (TRL's daemon loop, then another)
        first = asyncio.run(clone(**trl_batch()))
        second = asyncio.run(clone(**trl_batch()))
    finally:
        clone.close()
    assert first == second == [1.0, 0.0, 1.0, 1.0]


def burns(cpu_s: float, extra: str = "") -> str:
    """A right a+b that first spends ``cpu_s`` of CPU time (however fast the machine)."""
    return (f"```python\nimport time\n{extra}t = time.process_time()\nwhile time.process_time() - t < {cpu_s}:\n"
            f"    pass\na, b = map(int, input().split())\nprint(a + b)\n```")


ONE_TEST = {"inputs": ["1 2\n"], "outputs": ["3\n"]}


def test_every_adapter_judges_inline_tests_under_the_limits_it_is_given(fleet: FleetClient) -> None:
    """time_limit_s / memory_limit_mb of TRL's and verl's adapters are the limits of their inline
    tests: a program within the project's defaults but past the given limits fails on them."""
    url, slow = fleet.redis_url, burns(0.6)
    hungry = burns(0.0, "hoard = bytearray(200 << 20)\nhoard[::4096] = b'x' * len(hoard[::4096])\n")
    verdicts: dict[str, list[Any]] = {}
    try:
        for name, options in (("default", {}), ("tight", {"time_limit_s": 0.25, "memory_limit_mb": 128})):
            sync = TRLReward(url, tests_column="tests", timeout_s=60, **options)
            out = sync(completions=[slow, hungry], tests=[ONE_TEST, json.dumps(ONE_TEST)],
                       log_extra=lambda _column, values, name=name: verdicts.__setitem__(name, values))
            sync.close()
            async_fn = AsyncTRLReward(url, tests_column="tests", timeout_s=60, **options)
            async_out = asyncio.run(async_fn(completions=[slow, hungry], tests=[ONE_TEST, ONE_TEST]))
            async_fn.close()
            single = [compute_score("x", c, ONE_TEST, redis_url=url, **options)["score"] for c in (slow, hungry)]
            batch = [d["score"] for d in compute_score_batch(["x"] * 2, [slow, hungry], [ONE_TEST] * 2, redis_url=url,
                                                             **options)]

            async def both(options: dict[str, Any] = options) -> list[float]:
                return [d["score"] for d in await asyncio.gather(
                    *(compute_score_async("x", c, ONE_TEST, redis_url=url, **options) for c in (slow, hungry)))]

            verdicts[name + " scores"] = [out, async_out, single, batch, asyncio.run(both())]
    finally:
        close_verl_connections()
    assert verdicts["default scores"] == [[1.0, 1.0]] * 5
    assert verdicts["tight scores"] == [[0.0, 0.0]] * 5
    assert verdicts["default"] == ["OK", "OK"]
    assert verdicts["tight"] == ["TIME_LIMIT", "MEMORY_LIMIT"]


def test_a_time_limit_longer_than_the_projects_default_lets_a_slower_program_pass(fleet: FleetClient) -> None:
    """LiveCodeBench's and DeepCoder's graders give each test 6 s: a program taking 2.3 s of CPU
    fails the project's default 2 s and passes when the adapter is given 4 s."""
    slower = burns(2.3)
    rewards = []
    for options in ({}, {"time_limit_s": 4.0}):
        fn = TRLReward(fleet.redis_url, tests_column="tests", timeout_s=120, **options)
        try:
            rewards.append(fn(completions=[slower], tests=[ONE_TEST])[0])
        finally:
            fn.close()
    assert rewards == [0.0, 1.0]


def test_limits_an_adapter_cannot_honour_are_refused_not_ignored(fleet: FleetClient) -> None:
    with pytest.raises(OptionError, match="time_limit_s"):
        TRLReward(fleet.redis_url, tests_column="tests", time_limit_s=0)
    with pytest.raises(OptionError, match="memory_limit_mb"):
        AsyncTRLReward(fleet.redis_url, tests_column="tests", memory_limit_mb=8)
    with pytest.raises(OptionError, match="stored limits"):  # problem ids only: nothing inline to limit
        TRLReward(fleet.redis_url, time_limit_s=3)
    fn = TRLReward(fleet.redis_url, tests_column="tests", time_limit_s=3, timeout_s=60)
    try:
        with pytest.raises(JobFormatError, match="stored limits"):  # a stored problem keeps its own limits
            fn(completions=[GOOD], tests=["t/add"])
    finally:
        fn.close()
    try:
        with pytest.raises(JobFormatError, match="stored limits"):
            compute_score("x", GOOD, "t/add", redis_url=fleet.redis_url, time_limit_s=3)
        with pytest.raises(OptionError, match="time_limit_s"):
            compute_score("x", GOOD, ONE_TEST, redis_url=fleet.redis_url, time_limit_s="3")
    finally:
        close_verl_connections()


def test_trl_reward_returns_none_for_every_row_when_redis_is_down() -> None:
    fn = TRLReward(f"redis://127.0.0.1:{free_port()}/0", timeout_s=5)
    assert fn(completions=[GOOD, WRONG], problem_id=["t/add", "t/add"]) == [None, None]


def test_trl_reward_names_a_missing_column() -> None:
    fn = TRLReward("redis://127.0.0.1:1/0", problem_id_column="pid")
    with pytest.raises(KeyError, match="'pid'.*columns: task"):
        fn(completions=[GOOD], task=["x"], trainer_state=None)


# --- verl ---------------------------------------------------------------------------------------


def test_verl_compute_score_always_returns_the_same_keys(fleet: FleetClient) -> None:
    url = fleet.redis_url
    try:
        ok = compute_score("codecontests", GOOD, "t/add", {"index": 0}, redis_url=url, timeout_s=60)
        half = compute_score("taco", HALF, json.dumps(ADD_TESTS), None, redis_url=url, reward_shape="fraction")
        no_code = compute_score("x", "I do not know.", ADD_TESTS, redis_url=url)
    finally:
        close_verl_connections()
    for d in (ok, half, no_code):
        assert tuple(d) == VERL_KEYS
    assert ok == {"score": 1.0, "acc": 1.0, "verdict": 0, "infra_error": 0, "pass_rate": 1.0, "num_tests": 4}
    assert half["score"] == 0.5 and half["acc"] == 0.0 and half["pass_rate"] == 0.5
    assert no_code["verdict"] == VERDICT_CODES["NO_CODE"] and no_code["score"] == 0.0


def test_verl_batch_and_async_forms_agree_with_the_single_form(fleet: FleetClient) -> None:
    url = fleet.redis_url
    gts = ["t/add", json.dumps(ADD_TESTS), ADD_TESTS, "t/add"]
    sols = [GOOD, HALF, WRONG, "no code"]
    try:
        batch = compute_score_batch(
            data_sources=["a"] * 4, solution_strs=sols, ground_truths=gts, extra_infos=[None] * 4, redis_url=url
        )

        async def main() -> list[dict[str, Any]]:
            return list(await asyncio.gather(*(compute_score_async("a", s, g, None, redis_url=url) for s, g in zip(sols, gts, strict=True))))

        concurrent = asyncio.run(main())
        single = [compute_score("a", s, g, None, redis_url=url) for s, g in zip(sols, gts, strict=True)]
    finally:
        close_verl_connections()
    assert batch == concurrent == single
    assert [d["score"] for d in batch] == [1.0, 0.0, 0.0, 0.0]


def test_verl_retries_an_infrastructure_error_then_reports_it(tmp_path: Any) -> None:
    # nothing listens on this port: every attempt is an infrastructure error
    d = compute_score("a", GOOD, "t/add", redis_url=f"redis://127.0.0.1:{free_port()}/0", retries=1, infra_score=0.0)
    close_verl_connections()
    assert d["infra_error"] == 1 and d["score"] == 0.0 and d["verdict"] == VERDICT_CODES["INTERNAL"]
