"""Permanent errors are permanent in the trainer adapters: an unknown problem id or unusable
inline tests raise (never a score, never retried, never a masked None), and an adapter that has
seen nothing but infrastructure errors for max_infra_calls calls in a row raises FleetUnusable.
Real fleet: a real Redis and a real prefork worker; the down-Redis cases use a port nobody
listens on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from fleet_helpers import FleetWorker

from cpfleet import FleetUnusable, InlineProblemError, UnknownProblemError
from cpfleet.core.errors import JobFormatError, OptionError
from cpfleet.fleet.redis_server import RedisServer, free_port
from cpfleet.producer.client import FleetClient
from cpfleet.rewards import (
    AsyncTRLReward,
    TRLReward,
    close_verl_connections,
    compute_score,
    compute_score_async,
    compute_score_batch,
)

ADD = {
    "id": "u/add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "2 5\n", "output": "7\n"}],
}
GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
BAD_TESTS = {"inputs": ["1\n", "2\n"], "outputs": ["1\n"]}  # lengths differ


@pytest.fixture(scope="module")
def url(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=1) as node:
        with FleetClient(node.redis_url) as client:
            client.register_problems([ADD])
        yield node.redis_url
    close_verl_connections()


def test_trl_reward_raises_on_an_unknown_problem_with_the_ids(url: str) -> None:
    fn = TRLReward(url, timeout_s=60)
    try:
        assert fn(completions=[GOOD], problem_id=["u/add"]) == [1.0]
        with pytest.raises(UnknownProblemError, match="'u/typo'.*cpfleet load") as err:
            fn(completions=[GOOD, GOOD, GOOD], problem_id=["u/add", "u/typo", "u/typo"])
        assert err.value.problem_ids == ["u/typo"]
    finally:
        fn.close()


def test_async_trl_reward_raises_on_an_unknown_problem(url: str) -> None:
    fn = AsyncTRLReward(url, timeout_s=60)
    try:
        with pytest.raises(UnknownProblemError, match="'u/missing'"):
            asyncio.run(fn(completions=[GOOD], problem_id=["u/missing"]))
    finally:
        fn.close()


def test_trl_reward_raises_on_unusable_inline_tests(url: str) -> None:
    fn = TRLReward(url, tests_column="tests", timeout_s=60)
    try:
        with pytest.raises(InlineProblemError, match="column 'tests'"):
            fn(completions=[GOOD], tests=[BAD_TESTS])
    finally:
        fn.close()


def test_verl_raises_on_an_unknown_problem_and_on_unusable_inline_tests(url: str) -> None:
    try:
        assert compute_score("x", GOOD, "u/add", redis_url=url)["score"] == 1.0
        with pytest.raises(UnknownProblemError, match="'u/nope'"):
            compute_score("x", GOOD, "u/nope", redis_url=url, retries=3)
        with pytest.raises(UnknownProblemError):
            compute_score_batch(["x", "x"], [GOOD, GOOD], ["u/add", "u/nope"], redis_url=url)
        with pytest.raises(UnknownProblemError):
            asyncio.run(compute_score_async("x", GOOD, "u/nope", redis_url=url))
        with pytest.raises(InlineProblemError, match="ground_truth"):
            compute_score("x", GOOD, BAD_TESTS, redis_url=url)
        with pytest.raises(InlineProblemError, match="ground_truth"):
            asyncio.run(compute_score_async("x", GOOD, BAD_TESTS, redis_url=url))
    finally:
        close_verl_connections()


def test_a_malformed_call_raises_and_is_never_scored_as_an_infrastructure_error(url: str) -> None:
    """A solution_str that is not text, an empty problem id or an unknown reward shape was logged
    as "the fleet could not judge this batch", retried, and scored infra_score with infra_error=1."""
    try:
        with pytest.raises(JobFormatError, match="completion must be str or bytes, got NoneType"):
            compute_score("x", None, "u/add", redis_url=url)  # type: ignore[arg-type]
        with pytest.raises(JobFormatError, match="problem_id must be a non-empty"):
            compute_score("x", GOOD, "", redis_url=url)
        with pytest.raises(JobFormatError, match="completion must be str or bytes"):
            asyncio.run(compute_score_async("x", 5, "u/add", redis_url=url))  # type: ignore[arg-type]
        with pytest.raises(OptionError, match="unknown reward shape 'fractional'"):
            compute_score("x", GOOD, "u/add", redis_url=url, reward_shape="fractional")
    finally:
        close_verl_connections()
    fn = TRLReward(url, timeout_s=60)
    try:
        with pytest.raises(JobFormatError, match="problem_id must be a non-empty"):
            fn(completions=[GOOD], problem_id=[""])
    finally:
        fn.close()


@pytest.mark.parametrize("call", [
    {"completions": GOOD, "problem_id": ["u/add"]},  # one completion where TRL passes a list
    {"completions": [GOOD], "problem_id": "u/add"},  # one id where TRL passes a column
])
def test_a_single_string_for_a_list_is_named_not_counted_character_by_character(call: dict[str, object]) -> None:
    """A string given where TRL passes a list was split into its characters: "column
    'problem_id' has 1 values for 58 completions", or "has 6 values for 1 completions", as if the
    trainer had sent the wrong number of rows. Refused before any connection (the URL is nobody's)."""
    for fn in (TRLReward("redis://127.0.0.1:1/0", timeout_s=60), AsyncTRLReward("redis://127.0.0.1:1/0", timeout_s=60)):
        try:
            with pytest.raises(JobFormatError, match="a list with one entry per completion, got one str"):
                result = fn(**call)
                if asyncio.iscoroutine(result):
                    asyncio.run(result)
        finally:
            fn.close()


def test_async_trl_reward_raises_on_a_malformed_call_as_the_sync_one_does(url: str) -> None:
    """An empty problem id in the dataset column is the caller's mistake: TRLReward raises it,
    and AsyncTRLReward masked it as an infrastructure error (None, logged as "could not judge",
    counted towards FleetUnusable), so a broken column trained on no signal in silence."""
    fn = AsyncTRLReward(url, timeout_s=60)
    try:
        with pytest.raises(JobFormatError, match="problem_id must be a non-empty"):
            asyncio.run(fn(completions=[GOOD, GOOD], problem_id=["u/add", ""]))
        assert fn.args[0].streak.count == 0
    finally:
        fn.close()


def test_trl_reward_raises_after_n_calls_of_nothing_but_infrastructure_errors() -> None:
    fn = TRLReward(f"redis://127.0.0.1:{free_port()}/0", timeout_s=5, max_infra_calls=3)
    try:
        assert fn(completions=[GOOD, GOOD], problem_id=["u/add", "u/add"]) == [None, None]
        assert fn(completions=[GOOD], problem_id=["u/add"]) == [None]
        with pytest.raises(FleetUnusable, match="3 calls in a row judged nothing.*cannot reach Redis"):
            fn(completions=[GOOD], problem_id=["u/add"])
        with pytest.raises(FleetUnusable):  # and goes on raising while nothing is judged
            fn(completions=[GOOD], problem_id=["u/add"])
    finally:
        fn.close()


def test_one_judged_call_resets_the_streak(url: str) -> None:
    fn = TRLReward(url, timeout_s=60, max_infra_calls=2)
    try:
        fn._core.streak.count = 1  # as after one call of nothing but infrastructure errors
        assert fn(completions=[GOOD], problem_id=["u/add"]) == [1.0]
        assert fn._core.streak.count == 0
    finally:
        fn.close()


def test_verl_raises_after_n_samples_of_nothing_but_infrastructure_errors() -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"
    try:
        first = compute_score("a", GOOD, "u/add", redis_url=down, retries=0, max_infra_calls=2)
        assert first["infra_error"] == 1 and first["score"] == 0.0
        with pytest.raises(FleetUnusable, match="2 calls in a row"):
            compute_score("a", GOOD, "u/add", redis_url=down, retries=0, max_infra_calls=2)
    finally:
        close_verl_connections()


def test_a_redis_that_is_down_is_logged_in_one_line_per_call_not_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """A trainer's log while Redis restarts: each adapter call said so with a traceback
    through redis-py and the client, which read as a bug in cpfleet."""
    down = f"redis://127.0.0.1:{free_port()}/0"
    fn = TRLReward(down, timeout_s=5, max_infra_calls=10)
    try:
        with caplog.at_level("ERROR", logger="cpfleet.rewards"):
            assert fn(completions=[GOOD], problem_id=["u/add"]) == [None]
            assert compute_score("a", GOOD, "u/add", redis_url=down, retries=0, max_infra_calls=10)["infra_error"] == 1
            assert asyncio.run(compute_score_async("a", GOOD, "u/add", redis_url=down, retries=0,
                                                   max_infra_calls=10))["infra_error"] == 1
    finally:
        fn.close()
        close_verl_connections()
    records = [r for r in caplog.records if r.name == "cpfleet.rewards"]
    assert len(records) == 3, [r.getMessage() for r in records]
    for record in records:
        assert record.exc_info is None, record.getMessage()
        assert "the fleet could not judge" in record.getMessage()
        assert "BrokerUnavailable: cannot reach Redis" in record.getMessage() and "is Redis running there?" in record.getMessage()
