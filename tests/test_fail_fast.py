"""Fail-fast test order: the hidden tests' order never changes a reward, the verdict names the
failing test by its file index, and a real worker learns the order from its own results.

Rewards are compared on real programs through the real fork-server runner: the shipped demo
problems (always) with their reference, wrong and slow solutions and LLM-style mutants of the
references (bench/wrong_completions.py), and the shared CodeContests problems with their human
solutions and mutants (skipped, with the reason, when the shared data is absent).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fleet_helpers import REPO, FleetWorker, wrong_completions_module

from cpfleet.core import protocol
from cpfleet.core.problem import Problem
from cpfleet.core.results import JobResult
from cpfleet.core.store import register_problems, remove_problems
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.producer.client import FleetClient
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner
from cpfleet.workers.failorder import failed_test, order_from_counts, parse_counts

MUTANTS = wrong_completions_module()


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


def _completions(record: dict[str, Any], kinds: tuple[str, ...]) -> list[str]:
    largest = max(len(t["input"]) for t in record["public_tests"] + record["hidden_tests"])
    out = [_fence(record["correct_solutions"][0])]
    out += [_fence(c) for c in record.get("incorrect_solutions") or []]
    out += [comp for _, _, comp in MUTANTS.completions(record["correct_solutions"][0], largest, 1, kinds)]
    return out


def _named_test_fails(runner: CodeRunner, problem: Problem, completion: str, index: int) -> bool:
    """Judge ``completion`` on the one hidden test ``index`` alone: does it fail there?"""
    alone = dataclasses.replace(problem, hidden_tests=(problem.hidden_tests[index],))
    return evaluate(alone, completion, runner).reward == 0.0


def _public(r: JobResult) -> tuple[Any, ...]:
    s = r.public
    return s.passed, s.total, s.run, s.first_failure, s.first_failure_index, [t.verdict for t in s.tests]


def _check_orders(runner: CodeRunner, problem: Problem, completion: str, rng: random.Random) -> tuple[JobResult, JobResult]:
    n = len(problem.hidden_tests)
    shuffled = list(range(n))
    rng.shuffle(shuffled)
    file_order = evaluate(problem, completion, runner)
    reversed_order = evaluate(problem, completion, runner, hidden_order=list(reversed(range(n))))
    shuffled_order = evaluate(problem, completion, runner, hidden_order=shuffled)
    for other in (reversed_order, shuffled_order):
        assert not other.infra_error, other.infra_message
        assert other.reward == file_order.reward, (problem.id, completion[:200], file_order.verdict, other.verdict)
        assert (other.verdict == Verdict.OK) == (file_order.verdict == Verdict.OK)
        assert _public(other) == _public(file_order)  # public tests keep their order and results
    return file_order, reversed_order


# --- the order ---------------------------------------------------------------------------------


def test_counts_order_most_failed_first_ties_in_file_order() -> None:
    counts = parse_counts([b"3", b"5", b"1", b"9", b"7", b"5", b"junk", b"2", b"4", b"-1", b"12", b"0"])
    assert counts == {3: 5, 1: 9, 7: 5}  # junk, zero counts and a negative index are ignored
    assert order_from_counts(counts, 8) == [1, 3, 7, 0, 2, 4, 5, 6]
    assert order_from_counts(counts, 2) == [1, 0]  # counts of tests that no longer exist are ignored
    assert order_from_counts({}, 5) is None and order_from_counts({9: 3}, 5) is None
    assert parse_counts(None) == {}
    # per unit of cost: a test of 1 MB needs ~17x the failures of a tiny one to go first
    big = 1024 * 1024
    assert order_from_counts({0: 10, 1: 2}, 3, [big, 10, 10]) == [1, 0, 2]
    assert order_from_counts({0: 40, 1: 2}, 3, [big, 10, 10]) == [0, 1, 2]
    assert order_from_counts({2: 1}, 3, [big, big, 10]) == [2, 0, 1]  # never-failed: file order


def test_evaluate_refuses_an_order_that_is_not_a_permutation(runner: CodeRunner) -> None:
    problem = Problem.from_dict({"id": "ff/perm", "hidden_tests": [{"input": "", "output": "x\n"}] * 3})
    for bad in ([0, 1], [0, 1, 1], [0, 1, 3], [0, 1, 2, 2]):
        with pytest.raises(ValueError, match="permutation"):
            evaluate(problem, "```python\nprint('x')\n```", runner, hidden_order=bad)


def test_order_names_the_failing_test_and_leaves_fraction_and_public_alone(runner: CodeRunner) -> None:
    tests = [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(6)]
    problem = Problem.from_dict({"id": "ff/echo", "public_tests": tests[:2], "hidden_tests": tests})
    # wrong on inputs 1 and 4 only (public test 2 fails too: feedback, not the verdict)
    wrong = "```python\nx = int(input())\nprint(x + 1 if x in (1, 4) else x)\n```"
    file_order = evaluate(problem, wrong, runner)
    assert (file_order.reward, file_order.verdict) == (0.0, Verdict.WRONG_ANSWER)
    assert file_order.hidden.first_failure_index == 1 and file_order.hidden.run == 2
    assert file_order.public.first_failure_index == 1
    learnt = evaluate(problem, wrong, runner, hidden_order=[4, 0, 1, 2, 3, 5])
    assert learnt.reward == 0.0 and learnt.hidden.first_failure_index == 4 and learnt.hidden.run == 1
    assert _public(learnt) == _public(file_order)
    # fraction: every test runs in file order whatever order is passed
    frac = evaluate(problem, wrong, runner, reward_shape="fraction", hidden_order=[4, 0, 1, 2, 3, 5])
    assert frac.reward == pytest.approx(4 / 6) and frac.hidden.run == 6 and frac.hidden.first_failure_index == 1
    assert failed_test(frac) is None  # fraction jobs do not count: they do not run in the learnt order
    assert failed_test(learnt) == 4
    # a time limit found first names its test too, and the reward is still 0
    slow = "```python\nx = int(input())\nif x == 5:\n    while True: pass\nprint(x + 1 if x == 1 else x)\n```"
    a = evaluate(problem, slow, runner)
    b = evaluate(problem, slow, runner, hidden_order=[5, 0, 1, 2, 3, 4])
    assert (a.reward, a.verdict, a.hidden.first_failure_index) == (0.0, Verdict.WRONG_ANSWER, 1)
    assert (b.reward, b.verdict, b.hidden.first_failure_index) == (0.0, Verdict.TIME_LIMIT, 5)
    assert "hidden test 6" in b.stopped  # named by its place in the file
    assert failed_test(a) == 1 and failed_test(b) is None  # limit failures are not counted
    assert JobResult.from_dict(b.to_dict()).hidden.first_failure_index == 5  # survives the wire


# --- same rewards on real programs, in any order ---------------------------------------------


def test_demo_problems_same_rewards_in_any_order(fork_runner: CodeRunner) -> None:
    """The shipped demo set: reference, wrong and slow solutions, and mutants of the references."""
    with gzip.open(REPO / "cpfleet" / "demo" / "data" / "demo-problems.jsonl.gz", "rt") as f:
        records = [json.loads(line) for line in f if line.strip()]
    rng = random.Random(7)
    wrong = 0
    for record in records:
        problem = Problem.from_dict(record)
        for completion in _completions(record, ("cmp", "const", "range", "edge")):
            file_order, reversed_order = _check_orders(fork_runner, problem, completion, rng)
            if file_order.reward == 0.0 and reversed_order.hidden.first_failure_index is not None:
                wrong += 1
                assert _named_test_fails(fork_runner, problem, completion, reversed_order.hidden.first_failure_index)
    assert wrong >= 20  # the set really exercises wrong programs


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_codecontests_same_rewards_in_any_order(fork_runner: CodeRunner, codecontests_records: list[dict]) -> None:
    """Real problems and real programs: the first 40 CodeContests problems' human solutions and
    their mutants (the benchmark runs all 300)."""
    rng = random.Random(11)
    judged = wrong = 0
    for record in codecontests_records[:40]:
        problem = Problem.from_dict(record)
        for completion in _completions(record, ("cmp", "const", "range", "edge")):
            file_order, _ = _check_orders(fork_runner, problem, completion, rng)
            judged += 1
            wrong += file_order.reward == 0.0
    assert judged >= 150 and wrong >= 50


# --- the fleet learns the order ----------------------------------------------------------------

ECHO = {
    "id": "ff/fleet-echo",
    "public_tests": [{"input": "0\n", "output": "0\n"}],
    "hidden_tests": [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(6)],
}
WRONG_ON_4 = "```python\nx = int(input())\nprint(x + 1 if x >= 4 else x)\n```"
RIGHT = "```python\nprint(input())\n```"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, redis.Redis]]:
    with RedisServer() as server, FleetWorker(server.url, tmp_path_factory.mktemp("ff"), concurrency=1):
        yield server.url, redis.Redis.from_url(server.url)


def _counts(r: redis.Redis, key: str) -> dict[bytes, bytes]:
    """The fail counts in the problem's hash, by test index."""
    prefix = protocol.PROBLEM_FAIL_FIELD_PREFIX.encode()
    return {k.removeprefix(prefix): v for k, v in r.hgetall(key).items() if k.startswith(prefix)}


def test_worker_learns_the_order_from_failures(fleet: tuple[str, redis.Redis]) -> None:
    url, r = fleet
    key = protocol.problem_key(ECHO["id"])
    stored = register_problems(r, [ECHO]).versions[ECHO["id"]]
    assert _counts(r, key) == {}
    with FleetClient(url, use_cache=False, timeout=120) as client:
        first = client.submit(ECHO["id"], WRONG_ON_4).result(timeout=120)
        assert (first.reward, first.hidden.first_failure_index, first.hidden.run) == (0.0, 4, 5)  # file order
        assert _counts(r, key) == {b"4": b"1"}
        second = client.submit(ECHO["id"], WRONG_ON_4).result(timeout=120)
        assert (second.reward, second.hidden.first_failure_index, second.hidden.run) == (0.0, 4, 1)  # learnt
        assert _counts(r, key) == {b"4": b"2"}
        # passing jobs, fraction jobs and public-mode jobs do not count
        assert client.submit(ECHO["id"], RIGHT).result(timeout=120).reward == 1.0
        frac = client.submit(ECHO["id"], WRONG_ON_4, reward_shape="fraction").result(timeout=120)
        assert frac.reward == pytest.approx(4 / 6) and frac.hidden.run == 6
        assert client.submit(ECHO["id"], WRONG_ON_4, mode="public").result(timeout=120).reward == 1.0
        assert _counts(r, key) == {b"4": b"2"}
    # a result served from the cache counts nothing either
    with FleetClient(url, use_cache=True, timeout=120) as client:
        client.submit(ECHO["id"], WRONG_ON_4).result(timeout=120)
        hit = client.submit(ECHO["id"], WRONG_ON_4).result(timeout=120)
        assert hit.cache_hit and hit.reward == 0.0
        assert _counts(r, key) == {b"4": b"3"}
    # a changed problem starts from file order; a removed one leaves no counts behind
    changed = register_problems(r, [{**ECHO, "hidden_tests": ECHO["hidden_tests"][::-1]}]).versions[ECHO["id"]]
    assert changed != stored and _counts(r, key) == {}
    r.hset(key, protocol.fail_count_field(0), 1)
    remove_problems(r, [ECHO["id"]])
    assert not r.exists(key)


def test_worker_with_fail_fast_off_keeps_file_order(tmp_path: Path) -> None:
    with RedisServer() as server, FleetWorker(server.url, tmp_path, concurrency=1, env={"CPFLEET_FAIL_FAST": "0"}):
        r = redis.Redis.from_url(server.url)
        register_problems(r, [ECHO])
        r.hset(protocol.problem_key(ECHO["id"]), protocol.fail_count_field(4), 10)
        with FleetClient(server.url, use_cache=False, timeout=120) as client:
            result = client.submit(ECHO["id"], WRONG_ON_4).result(timeout=120)
        assert (result.hidden.first_failure_index, result.hidden.run) == (4, 5)
        assert _counts(r, protocol.problem_key(ECHO["id"])) == {b"4": b"10"}


def test_a_fail_count_after_the_problem_was_removed_leaves_nothing_behind(redis_url: str) -> None:
    from cpfleet.core.results import JobResult
    from cpfleet.core.verdict import Verdict
    from cpfleet.workers.replies import push_reply

    r = redis.Redis.from_url(redis_url)
    key = protocol.problem_key(ECHO["id"])
    register_problems(r, [ECHO])
    result = JobResult(job_id="late", problem_id=ECHO["id"], reward=0.0, verdict=Verdict.WRONG_ANSWER)
    count = (key, protocol.fail_count_field(4))
    push_reply(r, "replies:late", result, ttl_s=60, count_failure=count)
    assert _counts(r, key) == {b"4": b"1"}  # stored: counted, with the reply
    remove_problems(r, [ECHO["id"]])
    push_reply(r, "replies:late", result, ttl_s=60, count_failure=count)  # a job that finished after the removal
    assert not r.exists(key)
    assert r.llen("replies:late") == 2  # both replies delivered all the same
