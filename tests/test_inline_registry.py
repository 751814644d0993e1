"""The client's inline registry storing built problem records (``InlineRegistry.record_id``, what
the gateway's Piston route stores a codeforces-package test through): once per distinct record,
with the record's own limits and checker, concurrent first uses sharing the one registration, a
bounded memory, and a record forgotten on request stored again; against a real redis-server and,
for the judging, a real Celery prefork worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis
from fleet_helpers import FleetWorker, wait_until
from gateway_helpers import FLOAT_CHECKER

from cpfleet.core.errors import InlineProblemError
from cpfleet.core.store import fetch_problem, stored_ids
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.producer import inline_registry
from cpfleet.producer.client import FleetClient
from cpfleet.producer.inline import content_id, problem_from_tests
from cpfleet.producer.inline_registry import InlineRegistry, problem_record, record_key

THIRD = "```python\nn = int(input())\nprint(1 / n)\n```"
SPIN = "```python\nwhile True:\n    pass\n```"


def third_record(expected: str = "0.333333333333\n", time_limit_s: float = 1.0) -> dict[str, Any]:
    """A one-test problem whose expected text only its checker matches, as the Piston route builds."""
    return problem_from_tests(
        {"inputs": ["3\n"], "outputs": [expected]}, time_limit_s=time_limit_s, memory_limit_mb=128,
        checker={"type": "python", "source": FLOAT_CHECKER}, languages=["python3"], num_public=0,
        id_prefix="inline/test-record/",
    )


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    r = redis.Redis.from_url(redis_url)
    yield r
    r.close()


def test_a_record_is_stored_once_with_its_limits_and_checker(client: redis.Redis) -> None:
    told: list[list[str]] = []
    registry = InlineRegistry(client, on_stored=told.append)
    record = third_record()
    pid = registry.record_id(record)
    assert pid == record["id"] and told == [[pid]] and registry.registered == 1
    stored = fetch_problem(client, pid)
    assert stored is not None
    problem, _ = stored
    assert problem.time_limit_s == 1.0 and problem.memory_limit_mb == 128
    assert problem.checker == {"type": "python", "source": FLOAT_CHECKER}
    # later uses: remembered, nothing sent (no registration, no id told again)
    assert registry.known(record_key(record)) == pid
    assert registry.record_id(dict(record)) == pid
    assert registry.registered == 1 and told == [[pid]]


def test_a_record_whose_id_does_not_name_its_content_is_refused(client: redis.Redis) -> None:
    # the registry remembers a record by its id: an id naming other content would let a changed
    # record pass for the stored one
    registry = InlineRegistry(client)
    made = {"id": "t/rec", "public_tests": [], "hidden_tests": [{"input": "1\n", "output": "1\n"}]}
    with pytest.raises(InlineProblemError, match="does not name its content"):
        registry.record_id(made)
    changed = third_record() | {"time_limit_s": 3.0}  # its id names the 1 s record
    with pytest.raises(InlineProblemError, match="does not name its content"):
        registry.record_id(changed)
    assert registry.registered == 0 and not {"t/rec", changed["id"]} & stored_ids(client)
    named = made | {"id": "t/rec/" + content_id(made, "")}
    assert registry.record_id(named) == named["id"] and registry.registered == 1


def test_a_record_and_the_test_set_it_was_built_from_are_remembered_apart(client: redis.Redis) -> None:
    tests = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
    registry = InlineRegistry(client)
    record = problem_record(tests)
    assert record_key(record) != inline_registry.tests_digest(tests)  # (a name pytest would collect)
    assert registry.problem_id(tests) == registry.record_id(record) == record["id"]
    assert registry.registered == 2  # one version check each, one stored problem
    assert {p for p in stored_ids(client) if p.startswith("inline/")} == {record["id"]}


def test_concurrent_first_uses_of_a_record_wait_for_the_one_registration(client: redis.Redis) -> None:
    callers = 12
    arrived = threading.Barrier(callers)
    release = threading.Event()
    told: list[list[str]] = []

    def on_stored(ids: list[str]) -> None:  # holds the first registration open
        told.append(ids)
        release.wait(timeout=120)

    registry = InlineRegistry(client, on_stored=on_stored)
    record = third_record()

    def use(_: int) -> str:
        arrived.wait(timeout=120)
        return registry.record_id(record)

    with ThreadPoolExecutor(callers) as pool:
        futures = [pool.submit(use, i) for i in range(callers)]
        assert wait_until(lambda: len(told) == 1, timeout=120)
        # every caller is past the barrier; give the others a moment to reach the registry
        # while the registration is held (later arrivals find the id remembered: still one)
        time.sleep(0.3)
        release.set()
        ids = {f.result(timeout=120) for f in futures}
    assert ids == {record["id"]}
    assert registry.registered == 1 and told == [[record["id"]]]


def test_the_memory_is_a_bounded_lru(client: redis.Redis) -> None:
    registry = InlineRegistry(client, max_remembered=2)
    a, b, c = (third_record(time_limit_s=t) for t in (1.0, 2.0, 3.0))
    for record in (a, b):
        registry.record_id(record)
    registry.record_id(a)  # a use: b is now the least recent
    registry.record_id(c)
    assert registry.known(record_key(b)) is None
    assert registry.known(record_key(a)) == a["id"] and registry.known(record_key(c)) == c["id"]
    assert registry.registered == 3
    registry.record_id(b)  # forgotten: checked against the store again
    assert registry.registered == 4


def test_a_forgotten_record_is_stored_again_on_its_next_use(client: redis.Redis) -> None:
    from cpfleet.core.store import remove_problems

    registry = InlineRegistry(client)
    record = third_record()
    pid = registry.record_id(record)
    remove_problems(client, [pid])  # the store lost it (flushed, removed by an operator)
    registry.forget(record_key(record))
    assert registry.known(record_key(record)) is None
    assert registry.record_id(record) == pid and registry.registered == 2
    assert fetch_problem(client, pid) is not None


def test_a_record_the_store_refuses_is_the_callers_error_and_is_not_remembered(client: redis.Redis) -> None:
    registry = InlineRegistry(client)
    bad: dict[str, Any] = {"public_tests": [], "hidden_tests": [{"input": "1\n", "output": "1\n"}],
                           "memory_limit_mb": 2.5}
    bad["id"] = "t/bad/" + content_id(bad, "")
    for _ in range(2):  # the failed registration leaves nothing in flight for the next caller
        with pytest.raises(InlineProblemError, match="the record is not a valid problem"):
            registry.record_id(bad)
    assert registry.known(record_key(bad)) is None and registry.registered == 0
    assert bad["id"] not in stored_ids(client)
    with pytest.raises(InlineProblemError, match="needs an id"):
        registry.record_id({"public_tests": []})


# --- judged by a real worker -------------------------------------------------------------------


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2) as worker:
        yield worker


def test_a_stored_record_is_judged_by_its_own_checker_and_limits(node: FleetWorker) -> None:
    with FleetClient(node.redis_url, timeout=120) as fleet:
        pid = fleet.inline_registry.record_id(third_record())
        assert fleet.known_problems.unchecked([pid]) == []  # the client knows it is stored
        wrong = fleet.inline_registry.record_id(third_record(expected="0.5\n"))
        results = fleet.gather(fleet.submit_many([
            {"problem_id": pid, "completion": THIRD},  # 0.3333333333333333: only the checker passes it
            {"problem_id": wrong, "completion": THIRD},
            {"problem_id": pid, "completion": SPIN},  # past the record's 1 s
        ]), timeout=180)
    assert [r.verdict for r in results] == [Verdict.OK, Verdict.WRONG_ANSWER, Verdict.TIME_LIMIT]
    assert [r.reward for r in results] == [1.0, 0.0, 0.0]
    assert fleet.inline_registry.registered == 2


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, '{"inputs": ["1"], "outputs": [' + "1" * 5000 + "]}"],
                         ids=["nested", "digits"])
def test_inline_tests_as_json_text_cpython_cannot_read_are_an_inline_problem_error(text: str) -> None:
    # valid JSON past the parser's stack or CPython's 4300 digits: the caller's broken tests
    # (a 4xx at the gateway, a permanent error in the trainer adapters), never another exception
    with pytest.raises(InlineProblemError):
        inline_registry.tests_digest(text)
    with pytest.raises(InlineProblemError):
        problem_record(text)
