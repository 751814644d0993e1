"""Shared fixtures: a real redis-server on loopback and the shared CodeContests data."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpfleet.fleet.redis_server import RedisServer
from cpfleet.sandbox.forkserver import ForkServerRunner
from cpfleet.sandbox.runner import CodeRunner
from cpfleet.sandbox.runners import RUNNER_KINDS, make_runner

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA_ENV = "CPFLEET_SHARED_DATA"


def find_shared_data() -> Path:
    """The shared data folder: ``$CPFLEET_SHARED_DATA`` when set, else the first ``shared/data``
    beside the repository or beside one of its parent folders (``../shared/data`` for a checkout,
    ``../../shared/data`` for a git worktree kept one folder deeper). Returns the first candidate
    when none exists, so the skip reason names where it looked."""
    explicit = os.environ.get(SHARED_DATA_ENV)
    if explicit:
        return Path(explicit)
    candidates = [parent / "shared" / "data" for parent in REPO.parents]
    return next((c for c in candidates if c.is_dir()), candidates[0])


SHARED_DATA = find_shared_data()
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
        pytest.skip(
            f"shared data not found: no {CODECONTESTS} (looked for shared/data beside the repository "
            f"and its parents; set {SHARED_DATA_ENV} to the folder holding codecontests-300.jsonl)"
        )
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


@pytest.fixture(scope="module")
def fork_runner() -> Iterator[ForkServerRunner]:
    """The fork server alone, one per test module, for tests of its own machinery (spare jobs,
    children forked ahead) that look at its processes. It always forks ahead: by default a
    runner does so only while the machine has a CPU to spare, which a loaded test machine may
    not have."""
    r = ForkServerRunner(fork_ahead="1")
    yield r
    r.close()


# Modules whose tests run whole datasets or start, kill and restart real fleets: each costs tens
# of seconds, so ``scripts/test --quick`` (``-m "not slow"``) leaves them to the full suite, as it
# does the subprocess runner's copy of every runner-parametrised test (the quick loop checks the
# fork server, the default; the full suite checks both runners alike).
SLOW_MODULES = frozenset(
    {
        "test_checker_programs",
        "test_fleet_cancel",
        "test_fleet_e2e",
        "test_fleet_faults",
        "test_fleet_integrity",
        "test_fleet_languages",
        "test_flower_workers",
        "test_icpc_kattis",
        "test_icpc_languages",
        "test_runner_equivalence",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_subprocess_runner = callspec is not None and "subprocess" in (
            callspec.params.get("runner"),
            callspec.params.get("kind"),
        )
        if item.path.stem in SLOW_MODULES or on_subprocess_runner:
            item.add_marker(pytest.mark.slow)
