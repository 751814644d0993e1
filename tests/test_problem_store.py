"""The Redis problem store and the worker-side LRU, against a real redis-server on loopback."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from cpfleet.core.problem import Problem
from cpfleet.core.problem import TestCase as Case
from cpfleet.core.protocol import PROBLEM_FIELD_DATA, problem_key
from cpfleet.core.store import (
    ProblemStoreError,
    decode_problem,
    encode_problem,
    fetch_problem,
    fetch_version,
    register_problems,
    remove_problems,
    stored_ids,
)
from cpfleet.workers.problem_cache import ProblemCache, problem_size

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, socket_timeout=60)
    yield c
    c.close()


def make(pid: str, n: int = 3, tag: str = "", size: int = 0, **kw: object) -> Problem:
    pad = "x" * size
    return Problem(
        id=pid,
        public_tests=tuple(Case(f"{i}{tag}\n{pad}", f"{i}\n") for i in range(n)),
        hidden_tests=tuple(Case(f"{i}{tag}\n{pad}", f"{i * 2}\n") for i in range(n)),
        **kw,  # type: ignore[arg-type]
    )


def dirty(client: redis.Redis) -> int:
    """Redis's own count of writes since the last save: proves 'nothing written'."""
    return int(client.info("persistence")["rdb_changes_since_last_save"])


def cli_load(path: Path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpfleet", "load", str(path), "--redis", url],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_register_then_fetch_round_trips_without_solutions(client: redis.Redis) -> None:
    p = make("a", time_limit_s=1.5, memory_limit_mb=128, checker={"type": "float", "abs": 1e-6},
             description="add", correct_solutions=("print(1)",), incorrect_solutions=("print(2)",))
    stats = register_problems(client, [p, make("b")])
    assert (stats.written, stats.updated, stats.unchanged) == (2, 0, 0)
    got, version = fetch_problem(client, "a")  # type: ignore[misc]
    assert version == p.content_version() == fetch_version(client, "a") == stats.versions["a"]
    assert got == dataclasses.replace(p, correct_solutions=(), incorrect_solutions=())
    assert stored_ids(client) == {"a", "b"}
    assert fetch_problem(client, "missing") is None
    assert fetch_version(client, "missing") is None


def test_register_accepts_problem_dicts(client: redis.Redis) -> None:
    stats = register_problems(client, [make("a").to_dict()])
    assert stats.written == 1
    assert fetch_problem(client, "a")[0] == make("a")  # type: ignore[index]


def test_reregistering_unchanged_problems_writes_nothing(client: redis.Redis) -> None:
    problems = [make(f"p{i}") for i in range(300)]  # more than one batch
    register_problems(client, problems)
    before = dirty(client)
    again = register_problems(client, problems, batch_problems=64)
    assert (again.written, again.updated, again.unchanged) == (0, 0, 300)
    assert again.bytes_written == 0
    assert dirty(client) == before


def test_changed_problem_gets_a_new_version_and_only_it_is_written(client: redis.Redis) -> None:
    register_problems(client, [make("a"), make("b")])
    old = fetch_version(client, "a")
    stats = register_problems(client, [make("a", tag="v2"), make("b")])
    assert (stats.written, stats.updated, stats.unchanged) == (0, 1, 1)
    assert fetch_version(client, "a") != old
    assert fetch_problem(client, "a")[0].public_tests[0].input == "0v2\n"  # type: ignore[index]


def test_statement_only_change_keeps_the_version(client: redis.Redis) -> None:
    register_problems(client, [make("a", description="old")])
    stats = register_problems(client, [make("a", description="new wording")])
    assert stats.unchanged == 1


def test_cli_load_is_idempotent_and_a_long_lived_cache_sees_the_change(client: redis.Redis, redis_url: str,
                                                                        tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(make(f"p{i}").to_dict()) + "\n" for i in range(5)) + "{broken\n")
    first = cli_load(path, redis_url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("written 5, unchanged 0, updated 0, skipped 1 (malformed 1,")

    cache = ProblemCache(client)  # a worker process that lives across the reload
    problem, version = cache.get("p2")  # type: ignore[misc]
    assert problem.hidden_tests[0].output == "0\n"
    assert cache.get("p2") == (problem, version) and cache.stats.hits == 1

    before = dirty(client)
    second = cli_load(path, redis_url)
    assert second.stdout.startswith("written 0, unchanged 5, updated 0, skipped 1")
    assert dirty(client) == before

    changed = make("p2", tag="new")
    lines = [json.dumps((changed if i == 2 else make(f"p{i}")).to_dict()) for i in range(5)]
    path.write_text("\n".join(lines) + "\n")
    third = cli_load(path, redis_url)
    assert third.stdout.startswith("written 0, unchanged 4, updated 1, skipped 0")

    fresh, new_version = cache.get("p2")  # type: ignore[misc]
    assert new_version != version and new_version == changed.content_version()
    assert fresh.public_tests[0].input == "0new\n"
    assert cache.stats.refreshes == 1


def test_thirty_megabytes_of_tests_round_trip(client: redis.Redis) -> None:
    # 300 tests of 100 KB: low-entropy like real generated tests, but not one repeated string
    big = Problem(
        id="big",
        public_tests=(Case("1 2\n", "3\n"),),
        hidden_tests=tuple(
            Case(" ".join(str(i * 7919 + j) for j in range(14_000)) + "\n", f"{i}\n") for i in range(300)
        ),
    )
    raw = sum(len(t.input) + len(t.output) for t in big.hidden_tests)
    assert raw > 30_000_000
    stats = register_problems(client, [big])
    assert stats.written == 1 and stats.bytes_written < raw
    got, version = fetch_problem(client, "big")  # type: ignore[misc]
    assert got == big and version == big.content_version()
    cache = ProblemCache(client, max_bytes=200 * 1024 * 1024)
    assert cache.get("big") == (big, version)
    assert cache.lookup("big").hit  # type: ignore[union-attr]


def test_lru_evicts_least_recently_used_by_bytes(client: redis.Redis) -> None:
    problems = {pid: make(pid, size=10_000) for pid in "abcd"}
    register_problems(client, problems.values())
    one = problem_size(problems["a"])
    cache = ProblemCache(client, max_bytes=3 * one + one // 2)
    for pid in "abc":
        cache.get(pid)
    cache.get("a")  # a is now the most recent, b the least
    cache.get("d")  # over budget: b goes
    assert cache.cached_ids() == ["c", "a", "d"]
    assert cache.stats.evictions == 1
    assert cache.bytes <= cache.max_bytes
    assert not cache.lookup("b").hit  # type: ignore[union-attr]  # refetched, evicting c
    assert "c" not in cache


def test_problem_larger_than_the_cache_is_served_but_not_kept(client: redis.Redis) -> None:
    register_problems(client, [make("small"), make("huge", size=100_000)])
    cache = ProblemCache(client, max_bytes=problem_size(make("small")) * 2)
    cache.get("small")
    assert cache.get("huge")[0].id == "huge"  # type: ignore[index]
    assert cache.cached_ids() == ["small"]
    assert cache.stats.oversized == 1


def test_unknown_and_deleted_ids_are_none_and_leave_the_cache(client: redis.Redis) -> None:
    register_problems(client, [make("a")])
    cache = ProblemCache(client)
    assert cache.get("nope") is None
    assert cache.get("a") is not None
    assert remove_problems(client, ["a"]) == 1
    assert cache.get("a") is None
    assert "a" not in cache and cache.stats.unknown == 2
    assert stored_ids(client) == set()


def test_corrupt_blob_is_a_store_error(client: redis.Redis) -> None:
    register_problems(client, [make("a")])
    client.hset(problem_key("a"), PROBLEM_FIELD_DATA, b"not zlib")
    with pytest.raises(ProblemStoreError, match="corrupt"):
        fetch_problem(client, "a")
    with pytest.raises(ProblemStoreError):
        ProblemCache(client).get("a")


def test_encode_is_compressed_msgpack_and_decodes_back() -> None:
    p = make("a", n=50, size=1000)
    blob = encode_problem(p)
    assert len(blob) < sum(len(t.input) for t in p.public_tests)
    assert decode_problem(blob) == p


def test_text_mode_client_is_refused(redis_url: str) -> None:
    text_client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses"):
            register_problems(text_client, [make("a")])
    finally:
        text_client.close()


def test_cli_load_with_unreachable_redis_is_one_line_exit_3(tmp_path: Path) -> None:
    from cpfleet.fleet.redis_server import free_port

    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(make("a").to_dict()) + "\n")
    proc = cli_load(path, f"redis://127.0.0.1:{free_port()}/0")
    assert proc.returncode == 3  # as every command that cannot reach Redis (cpfleet --help)
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("cpfleet load: cannot reach Redis at redis://127.0.0.1:")
