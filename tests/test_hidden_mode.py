"""``mode="hidden"``: full mode's reward, verdict and ``hidden`` fields from the hidden tests
(for callers that read the reward and never the feedback; a public test runs only for full
mode's limits once the hidden tests pass, so a wrong completion runs none), the
fail-fast order learnt and used as in full mode, and the reward-only adapters defaulting to it.

Everything runs on a real fleet: a real redis-server, real Celery workers, the real sandbox."""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from fleet_helpers import REPO, FleetWorker, wait_until, wrong_completions_module
from gateway_helpers import http, serving

from cpfleet.core import protocol
from cpfleet.core.errors import NoHiddenTestsError, OptionError
from cpfleet.core.problem import Problem, validate_for_judging
from cpfleet.core.results import JobResult
from cpfleet.core.store import register_problems
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.gateway import ServeConfig
from cpfleet.producer.client import FleetClient
from cpfleet.rewards import TRLReward, close_verl_connections, compute_score
from cpfleet.rewards.verl import VERDICT_CODES, score_dict
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner

MUTANTS = wrong_completions_module()
SOLUTIONS = REPO / "cpfleet" / "demo" / "solutions"

# The public test's expected output is wrong on purpose: a public test run in hidden mode would
# show, and a reward computed from it would be 0 for the right program.
BAD_PUBLIC = {
    "id": "hm/bad-public",
    "public_tests": [{"input": "1 2\n", "output": "999\n"}],
    "hidden_tests": [{"input": f"{i} {i * 3}\n", "output": f"{i * 4}\n"} for i in range(5)],
}
ADD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
# right on every hidden test, crashes on the public input only
CRASHES_ON_PUBLIC = "```python\na, b = map(int, input().split())\nassert (a, b) != (1, 2)\nprint(a + b)\n```"
# wrong from hidden test 4 (0-based 3) on
WRONG_FROM_3 = "```python\na, b = map(int, input().split())\nprint(a + b + (a >= 3))\n```"


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


def _demo_records() -> list[dict[str, Any]]:
    with gzip.open(REPO / "cpfleet" / "demo" / "data" / "demo-problems.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _programs(record: dict[str, Any], kinds: tuple[str, ...], own: bool) -> list[str]:
    """Right, wrong and slow programs of a problem: its reference, its own wrong and slow
    solutions (the demo set's), and mutants of the reference."""
    reference = record["correct_solutions"][0]
    largest = max(len(t["input"]) for t in record["public_tests"] + record["hidden_tests"])
    out = [_fence(reference)]
    if own:
        stem = record["id"].removeprefix("demo/").replace("-", "_")
        out += [_fence((SOLUTIONS / f"{stem}_{kind}.py").read_text()) for kind in ("wrong", "slow")]
    out += [comp for _, _, comp in MUTANTS.completions(reference, largest, 1, kinds)]
    return out


def _hidden_fields(r: JobResult) -> tuple[Any, ...]:
    h = r.hidden
    return r.reward, r.verdict, h.passed, h.total, h.run, h.first_failure, h.first_failure_index


def _done(node: FleetWorker, problem_id: str) -> list[dict[str, Any]]:
    """The node's job log records (``job_done``) of ``problem_id``'s jobs, oldest first."""
    out = []
    for line in node.log_lines():
        if '"event":"job_done"' in line and f'"problem_id":"{problem_id}"' in line:
            out.append(json.loads(line[line.index("{"):]))
    return out


def _judged(node: FleetWorker, problem_id: str, run: Callable[[], object]) -> list[tuple[str, int]]:
    """(mode, tests run) of the jobs of ``problem_id`` that ``run`` had judged, from the
    node's job log (written just after the reply, so it is awaited)."""
    before = len(_done(node, problem_id))
    run()
    wait_until(lambda: len(_done(node, problem_id)) > before, timeout=30)
    return [(rec["mode"], rec["tests_run"]) for rec in _done(node, problem_id)[before:]]


def _stopped_at_public(r: JobResult) -> bool:
    return "public test" in r.stopped


def _compare(client: FleetClient, jobs: list[dict[str, Any]]) -> tuple[int, int]:
    """Judge ``jobs`` in full and in hidden mode on a file-order worker: same reward always;
    same verdict and hidden fields unless full mode stopped at a public test's limit (then both
    are 0, but hidden mode may have found a hidden failure first); a job rewarded 0 by a hidden
    test ran no public test in hidden mode. Returns (jobs, wrong ones)."""
    full = FleetClient.gather(client.submit_many(jobs, mode="full"), timeout=900)
    hidden = FleetClient.gather(client.submit_many(jobs, mode="hidden"), timeout=900)
    wrong = 0
    for job, f, h in zip(jobs, full, hidden, strict=True):
        where = (job["problem_id"], job["completion"][:300], f.verdict, h.verdict, f.stopped, h.stopped)
        assert not f.infra_error and not h.infra_error, (where, f.infra_message, h.infra_message)
        assert h.mode == "hidden" and h.public.total == f.public.total and h.public.tests == [], where
        if h.reward == 0.0 and not _stopped_at_public(h):
            assert h.public.run == 0, where  # stopped by a hidden test: no public test ran
        assert "public: not shown, mode hidden" in h.observation, where
        assert f"(hidden: {h.hidden.passed}/{h.hidden.total} passed" in h.observation, where
        if _stopped_at_public(f):
            assert f.reward == h.reward == 0.0, where
            continue
        if f.verdict == h.verdict == Verdict.TIME_LIMIT:
            # a program close to its CPU limit on an earlier test than the one it always exceeds
            # it on (the demo's exponential knapsack): which test goes over first follows the
            # host's load, CPU time included (shared caches), so only the outcome is compared
            assert f.reward == h.reward == 0.0 and h.hidden.total == f.hidden.total, where
            wrong += 1
            continue
        assert _hidden_fields(h) == _hidden_fields(f), where
        wrong += f.reward == 0.0
    return len(jobs), wrong


@pytest.fixture(scope="module")
def file_order_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FleetWorker]]:
    """A fleet in file order (fail-fast off), so full and hidden mode run the same hidden tests
    in the same order and their verdicts and counts can be compared exactly."""
    with RedisServer() as server, FleetWorker(server.url, tmp_path_factory.mktemp("hm"), concurrency=2,
                                              env={"CPFLEET_FAIL_FAST": "0"}) as node:
        yield server.url, node


def test_hidden_mode_gives_full_mode_reward_and_verdict_on_the_demo_problems(
    file_order_fleet: tuple[str, FleetWorker],
) -> None:
    url, _ = file_order_fleet
    records = _demo_records()
    register_problems(redis.Redis.from_url(url), records)
    jobs = [{"problem_id": r["id"], "completion": c}
            for r in records for c in _programs(r, ("cmp", "const", "range", "edge", "slow"), own=True)]
    with FleetClient(url, use_cache=False, timeout=900) as client:
        judged, wrong = _compare(client, jobs)
    assert judged >= 70 and wrong >= 40  # the set really exercises wrong and slow programs


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_hidden_mode_gives_full_mode_reward_on_codecontests(
    file_order_fleet: tuple[str, FleetWorker], codecontests_records: list[dict],
) -> None:
    """The first 15 CodeContests problems: their human solutions and mutants of them (skipped,
    with the reason, without the shared data)."""
    url, _ = file_order_fleet
    records = [r for r in codecontests_records[:15] if r.get("correct_solutions")]
    register_problems(redis.Redis.from_url(url), records)
    jobs = [{"problem_id": r["id"], "completion": c}
            for r in records for c in _programs(r, ("cmp", "const", "range", "edge"), own=False)]
    with FleetClient(url, use_cache=False, timeout=900) as client:
        judged, wrong = _compare(client, jobs)
    assert judged >= 50 and wrong >= 15


def test_hidden_mode_runs_public_tests_only_for_their_limits_once_the_hidden_tests_pass(
    file_order_fleet: tuple[str, FleetWorker],
) -> None:
    """A wrong completion (stopped by a hidden test) runs no public test; a right one runs the
    public test after the hidden ones, for full mode's limits only: its wrong expected output
    and a crash on its input cost nothing, as in full mode, and nothing of it is shown."""
    url, node = file_order_fleet
    register_problems(redis.Redis.from_url(url), [BAD_PUBLIC])
    pid = BAD_PUBLIC["id"]
    with FleetClient(url, use_cache=False, timeout=120) as client:
        for program in (ADD, CRASHES_ON_PUBLIC):
            full = client.submit(pid, program, mode="full").result(timeout=120)
            hidden = client.submit(pid, program, mode="hidden").result(timeout=120)
            # full mode ran the public test and failed it (feedback only); hidden mode shows none
            assert full.public.run == 1 and full.public.passed == 0
            assert (full.reward, full.verdict) == (hidden.reward, hidden.verdict) == (1.0, Verdict.OK)
            assert (hidden.public.run, hidden.public.total, hidden.public.tests) == (1, 1, [])  # run for its limits
            assert hidden.hidden.run == 5 and full.hidden.run == 5
            assert "public: not shown, mode hidden" in hidden.observation and "Public test 1" not in hidden.observation
        assert client.submit(pid, CRASHES_ON_PUBLIC, mode="full").result(timeout=120).public.first_failure == \
            Verdict.RUNTIME_ERROR
        wrong = client.submit(pid, WRONG_FROM_3, mode="hidden").result(timeout=120)
        assert (wrong.reward, wrong.hidden.run) == (0.0, 4)
    assert wait_until(lambda: len(_done(node, pid)) >= 6, timeout=30)
    runs = [(rec["mode"], rec["reward"], rec["tests_run"]) for rec in _done(node, pid)]
    assert ("hidden", 1.0, 6) in runs and ("full", 1.0, 6) in runs  # 5 hidden + the public one
    assert ("hidden", 0.0, 4) in runs  # stopped at hidden test 4: the public test never ran


def test_hidden_mode_runs_a_public_test_a_hidden_test_already_ran_once(
    file_order_fleet: tuple[str, FleetWorker],
) -> None:
    """APPS/TACO-shaped problems repeat their public tests among the hidden ones: a right
    program runs each test once in hidden mode (full mode runs the repeated one twice)."""
    url, node = file_order_fleet
    problem = {"id": "hm/public-among-hidden", "public_tests": [BAD_PUBLIC["hidden_tests"][2]],
               "hidden_tests": BAD_PUBLIC["hidden_tests"]}
    register_problems(redis.Redis.from_url(url), [problem])
    with FleetClient(url, use_cache=False, timeout=120) as client:
        for mode in ("hidden", "full"):
            assert client.submit(problem["id"], ADD, mode=mode).result(timeout=120).reward == 1.0
    assert wait_until(lambda: len(_done(node, problem["id"])) >= 2, timeout=30)
    assert {rec["mode"]: rec["tests_run"] for rec in _done(node, problem["id"])} == {"hidden": 5, "full": 6}


def test_hidden_mode_learns_and_uses_the_fail_order(tmp_path_factory: pytest.TempPathFactory) -> None:
    problem = {**BAD_PUBLIC, "id": "hm/fail-order"}
    key = protocol.problem_key(problem["id"])
    prefix = protocol.PROBLEM_FAIL_FIELD_PREFIX.encode()
    with RedisServer() as server, FleetWorker(server.url, tmp_path_factory.mktemp("hmff"), concurrency=1):
        r = redis.Redis.from_url(server.url)
        register_problems(r, [problem])

        def counts() -> dict[bytes, bytes]:
            return {k.removeprefix(prefix): v for k, v in r.hgetall(key).items() if k.startswith(prefix)}

        with FleetClient(server.url, use_cache=False, timeout=120) as client:
            first = client.submit(problem["id"], WRONG_FROM_3, mode="hidden").result(timeout=120)
            assert (first.reward, first.hidden.first_failure_index, first.hidden.run) == (0.0, 3, 4)  # file order
            assert counts() == {b"3": b"1"}  # counted, as a full-mode job is
            second = client.submit(problem["id"], WRONG_FROM_3, mode="hidden").result(timeout=120)
            assert (second.reward, second.hidden.first_failure_index, second.hidden.run) == (0.0, 3, 1)  # learnt
            third = client.submit(problem["id"], WRONG_FROM_3, mode="full").result(timeout=120)
            assert third.hidden.run == 1  # the two modes learn one order and share it
            assert counts() == {b"3": b"3"}
            # fraction jobs in hidden mode run every test in file order and count nothing
            frac = client.submit(problem["id"], WRONG_FROM_3, mode="hidden", reward_shape="fraction").result(timeout=120)
            assert frac.reward == pytest.approx(3 / 5) and frac.hidden.run == 5 and frac.public.run == 1  # its limits
            assert counts() == {b"3": b"3"}


def test_reward_only_adapters_default_to_hidden_mode_and_still_take_full(
    file_order_fleet: tuple[str, FleetWorker],
) -> None:
    """TRL's reward function, verl's compute_score, OpenRLHF's /get_reward and slime's /slime
    return no feedback text: by default a wrong completion runs no public test; ``mode="full"``
    (for the gateway, ``reward_mode``) runs them first as before, with the same rewards. The wrong
    program passes hidden test 1 and fails hidden test 2: 2 tests in hidden mode, 3 in full."""
    url, node = file_order_fleet
    register_problems(redis.Redis.from_url(url), [BAD_PUBLIC])
    pid = BAD_PUBLIC["id"]

    def judged(run: Callable[[], object]) -> list[tuple[str, int]]:
        return _judged(node, pid, run)

    wrong = "```python\nprint(0)\n```"
    trl_default, trl_full = TRLReward(url, timeout_s=60), TRLReward(url, timeout_s=60, mode="full")
    try:
        rewards: list[Any] = []
        assert judged(lambda: rewards.append(trl_default(completions=[wrong], problem_id=[pid]))) == [("hidden", 2)]
        assert judged(lambda: rewards.append(trl_full(completions=[wrong], problem_id=[pid]))) == [("full", 3)]
        assert rewards == [[0.0], [0.0]]
        assert trl_default(completions=[ADD], problem_id=[pid]) == trl_full(completions=[ADD], problem_id=[pid]) == [1.0]
    finally:
        trl_default.close()
        trl_full.close()
    try:
        scores: list[dict[str, Any]] = []
        assert judged(lambda: scores.append(compute_score("x", wrong, pid, None, redis_url=url))) == [("hidden", 2)]
        assert judged(lambda: scores.append(compute_score("x", wrong, pid, None, redis_url=url, mode="full"))) == \
            [("full", 3)]
        assert scores[0] == scores[1]  # every key the same: they come from the hidden tests
        assert scores[0]["num_tests"] == 5 and scores[0]["score"] == 0.0
    finally:
        close_verl_connections()
    openrlhf = {"query": [wrong], "prompts": [""], "labels": [pid]}
    slime = {"prompt": "", "response": wrong, "label": pid}
    for reward_mode, tests_run in (("hidden", 2), ("full", 3)):
        config = ServeConfig(redis_url=url) if reward_mode == "hidden" else ServeConfig(redis_url=url, reward_mode="full")
        with serving(config) as base:
            got: list[Any] = []
            for route, body in (("/get_reward", openrlhf), ("/slime", slime)):
                call = functools.partial(lambda u, b, into: into.append(http(u, b)), base + route, body, got)
                assert judged(call) == [(reward_mode, tests_run)]
            assert got[0][0] == got[1][0] == 200
            assert got[0][1]["rewards"] == [0.0] and got[0][1]["extra_logs"]["pass_rate"] == [0.2]  # hidden test 1 passes
            assert got[1][1] == 0.0


def test_unknown_modes_are_refused_naming_every_mode(file_order_fleet: tuple[str, FleetWorker]) -> None:
    url, _ = file_order_fleet
    with pytest.raises(OptionError, match="unknown mode 'reward' \\(known: full, public, hidden\\)"):
        protocol.check_options("all_or_nothing", "reward")
    with FleetClient(url, timeout=30) as client, pytest.raises(OptionError, match="known: full, public, hidden"):
        client.submit(BAD_PUBLIC["id"], ADD, mode="Hidden")
    with pytest.raises(OptionError, match="known: full, public, hidden"):
        TRLReward(url, mode="hiden")
    with pytest.raises(protocol.ProtocolError, match="known: full, public, hidden"):
        protocol.JobMessage.from_wire({"v": protocol.PROTOCOL_VERSION, "job_id": "j", "problem_id": "p",
                                       "completion": "", "reply_to": "r", "mode": "secret"})
    with serving(ServeConfig(redis_url=url)) as base:
        status, body, _ = http(base + "/v1/judge", {"jobs": [{"problem_id": BAD_PUBLIC["id"], "completion": ADD,
                                                           "mode": "nope"}]})
    assert status == 422 and "known: full, public, hidden" in json.dumps(body)


def test_hidden_mode_needs_hidden_tests_as_full_mode_does() -> None:
    only_public = Problem.from_dict({"id": "hm/public-only", "public_tests": [{"input": "", "output": "x\n"}]})
    for mode in ("full", "hidden"):
        with pytest.raises(NoHiddenTestsError):
            validate_for_judging(only_public, mode)
    validate_for_judging(only_public, "public")


def test_cpfleet_serve_reward_mode_defaults_to_hidden_and_takes_full_or_refuses_others() -> None:
    import argparse

    from cpfleet.gateway.serve import config_from_args, configure

    parser = argparse.ArgumentParser()
    configure(parser)
    assert config_from_args(parser.parse_args([])).reward_mode == "hidden"
    assert config_from_args(parser.parse_args(["--reward-mode", "full"])).reward_mode == "full"
    with pytest.raises(SystemExit):
        parser.parse_args(["--reward-mode", "reward"])


def test_a_limit_on_a_public_test_alone_costs_the_reward_in_hidden_mode_as_in_full_mode(
    file_order_fleet: tuple[str, FleetWorker],
) -> None:
    """Full mode's reward is 0 for a program that hits a time limit on a public test, though it
    passes every hidden test (the first limit of any test ends the job); hidden mode runs the
    public tests once the hidden ones pass, for that rule, and pays the same 0."""
    url, _ = file_order_fleet
    problem = {**BAD_PUBLIC, "id": "hm/slow-public", "time_limit_s": 0.5}
    register_problems(redis.Redis.from_url(url), [problem])
    spins_on_public = "```python\na, b = map(int, input().split())\nwhile (a, b) == (1, 2):\n    pass\nprint(a + b)\n```"
    with FleetClient(url, use_cache=False, timeout=120) as client:
        full = client.submit(problem["id"], spins_on_public, mode="full").result(timeout=120)
        hidden = client.submit(problem["id"], spins_on_public, mode="hidden").result(timeout=120)
    assert (full.reward, full.verdict, full.hidden.run) == (0.0, Verdict.TIME_LIMIT, 0)
    assert (hidden.reward, hidden.verdict, hidden.hidden.run, hidden.public.run) == (0.0, Verdict.TIME_LIMIT, 5, 1)
    assert "public test 1" in full.stopped and "public test 1" in hidden.stopped


# Kattis interactor protocol (argv: input, answer, feedback folder): the secret is in the answer
# file; "correct" and accept at the right guess, else "wrong" and wait for the next one
ANSWER_INTERACTOR = """import sys
secret = open(sys.argv[2]).read().strip()
for line in sys.stdin:
    if line.strip() == secret:
        print("correct", flush=True)
        sys.exit(42)
    print("wrong", flush=True)
sys.exit(43)
"""
# guesses 1; told it is wrong, spins (a time limit), as a program may on any dialogue
GUESSES_ONE = "```python\nprint(1, flush=True)\nif input() != 'correct':\n    while True:\n        pass\n```"


def test_hidden_mode_runs_a_public_test_whose_input_a_hidden_test_ran_with_another_answer(
    runner: CodeRunner,
) -> None:
    """An interactor reads the test's expected output (its answer file): a public test with a
    hidden test's input but another answer is another dialogue, and full mode's reward is 0
    when the program hits a limit there. Hidden mode must run it too, not pay 1 for the hidden
    test's dialogue alone."""
    problem = Problem.from_dict({
        "id": "hm/interactive-same-input", "time_limit_s": 0.5,
        "checker": {"type": "interactive", "language": "python3", "source": ANSWER_INTERACTOR},
        "public_tests": [{"input": "10\n", "output": "2\n"}],
        "hidden_tests": [{"input": "10\n", "output": "1\n"}],
    })
    full = evaluate(problem, GUESSES_ONE, runner, mode="full")
    hidden = evaluate(problem, GUESSES_ONE, runner, mode="hidden")
    assert (full.reward, full.verdict) == (0.0, Verdict.TIME_LIMIT), full.observation
    assert (hidden.reward, hidden.verdict, hidden.hidden.passed, hidden.public.run) == \
        (0.0, Verdict.TIME_LIMIT, 1, 1), hidden.observation


def test_verl_acc_is_0_in_hidden_mode_when_a_public_test_alone_hits_a_limit(runner: CodeRunner) -> None:
    """verl's ``acc`` says the sample was solved: 0 with a score of 0 in both modes for a
    program that passes every hidden test but hits a time limit on a public one (hidden mode
    stops after the hidden tests, every one of them passed, full mode before them)."""
    problem = Problem.from_dict({**BAD_PUBLIC, "id": "hm/verl-acc", "time_limit_s": 0.5})
    spins_on_public = "```python\na, b = map(int, input().split())\nwhile (a, b) == (1, 2):\n    pass\nprint(a + b)\n```"
    keys = {mode: score_dict(evaluate(problem, spins_on_public, runner, mode=mode)) for mode in ("full", "hidden")}
    assert keys["hidden"]["score"] == keys["full"]["score"] == 0.0
    assert keys["hidden"]["acc"] == keys["full"]["acc"] == 0.0, keys
    assert keys["hidden"]["verdict"] == keys["full"]["verdict"] == VERDICT_CODES["TIME_LIMIT"]
    assert score_dict(evaluate(problem, ADD, runner, mode="hidden"))["acc"] == 1.0
