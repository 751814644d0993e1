"""Shared fixtures: a real redis-server on loopback and the shared CodeContests data."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpfleet.redis_server import RedisServer
from cpfleet.sandbox.runner import CodeRunner
from cpfleet.sandbox.runners import RUNNER_KINDS, make_runner

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CPFLEET_SHARED_DATA", REPO.parent / "shared" / "data"))
CODECONTESTS = SHARED_DATA / "codecontests-300.jsonl"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real redis-server for the session (tests that restart Redis start their own)."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """A clean database on the session's redis-server."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture(scope="session")
def codecontests_path() -> Path:
    if not CODECONTESTS.exists():
        pytest.skip(f"shared data not found at {CODECONTESTS} (set CPFLEET_SHARED_DATA)")
    return CODECONTESTS


@pytest.fixture(scope="session")
def codecontests_records(codecontests_path: Path) -> list[dict]:
    with codecontests_path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module", params=RUNNER_KINDS)
def runner(request: pytest.FixtureRequest) -> Iterator[CodeRunner]:
    """Each runner kind, one per test module (starting one costs a zygote and a self-test)."""
    r = make_runner(request.param)
    yield r
    r.close()
