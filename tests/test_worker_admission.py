"""The worker's admission check (``workers.withdrawal.admit``) reads, in the withdrawal check's
round trip, the version the store holds for the job's problem; the problem cache judges with
exactly that version, so a reloaded problem is never judged with its old tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from cpfleet.core import protocol
from cpfleet.core.protocol import JobMessage
from cpfleet.core.store import fetch_version, register_problems, remove_problems
from cpfleet.workers.problem_cache import ProblemCache
from cpfleet.workers.withdrawal import CANCELLED, OWNER_GONE, admit


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _problem(answer: str) -> dict[str, object]:
    return {"id": "adm/p", "public_tests": [], "hidden_tests": [{"input": "1\n", "output": answer}]}


def _job(job_id: str = "j1", problem_id: str = "adm/p", token: str | None = "tok") -> JobMessage:
    return JobMessage(job_id=job_id, problem_id=problem_id, completion="print(1)", reply_to="r",
                      client_id="c1" if token else None, client_token=token)


def test_admission_reads_the_current_version_and_the_cache_judges_with_it(client: redis.Redis) -> None:
    client.set(protocol.client_claim_key("c1"), "tok")
    register_problems(client, [_problem("1\n")])
    cache = ProblemCache(client)
    first = admit(client, _job())
    assert first.withdrawn is None and first.version_read
    assert first.version == fetch_version(client, "adm/p")
    found = cache.lookup("adm/p", known_version=first.version, version_known=first.version_read)
    assert found is not None and found.problem.hidden_tests[0].output == "1\n"

    register_problems(client, [_problem("2\n")])  # reloaded with a new answer
    second = admit(client, _job("j2"))
    assert second.version is not None and second.version != first.version
    found = cache.lookup("adm/p", known_version=second.version, version_known=second.version_read)
    assert found is not None and found.outcome == "refresh" and found.problem.hidden_tests[0].output == "2\n"


def test_an_unstored_problem_reads_as_no_version_and_is_unknown(client: redis.Redis) -> None:
    client.set(protocol.client_claim_key("c1"), "tok")
    adm = admit(client, _job(problem_id="adm/missing"))
    assert adm.withdrawn is None and adm.version_read and adm.version is None
    assert ProblemCache(client).lookup("adm/missing", known_version=None, version_known=True) is None


def test_withdrawn_jobs_are_still_refused(client: redis.Redis) -> None:
    register_problems(client, [_problem("1\n")])
    assert admit(client, _job()).withdrawn == OWNER_GONE  # no claim held
    client.set(protocol.client_claim_key("c1"), "tok")
    client.set(protocol.cancelled_job_key("c1", "j1"), "1")
    assert admit(client, _job()).withdrawn == CANCELLED
    assert admit(client, _job("j3")).withdrawn is None


def test_a_job_without_a_client_token_runs_and_still_reads_the_version(client: redis.Redis) -> None:
    register_problems(client, [_problem("1\n")])
    adm = admit(client, _job(token=None))
    assert adm.withdrawn is None and adm.version_read and adm.version == fetch_version(client, "adm/p")


def _commands(client: redis.Redis) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in client.info("commandstats").items()}


def test_admission_is_one_pipeline_of_plain_reads(client: redis.Redis) -> None:
    """Claim, cancel key and result cache probe in one MGET, version with the fail counts in one
    HGETALL: two commands (no script: EVALSHA would be one more), in one round trip."""
    client.set(protocol.client_claim_key("c1"), "tok")
    register_problems(client, [_problem("1\n")])
    client.hincrby(protocol.fail_counts_key("adm/p"), "0", 3)
    client.set("adm:probe", b"entry")
    client.config_resetstat()
    adm = admit(client, _job(), read_fail_counts=True, cache_probe="adm:probe")
    used = _commands(client)
    used.pop("config|resetstat", None)
    used.pop("config", None)
    assert used == {"mget": 1, "hgetall": 1}
    assert adm.withdrawn is None and adm.version == fetch_version(client, "adm/p") and adm.fail_counts == {0: 3}
    assert (adm.cache_key, adm.cache_blob) == ("adm:probe", b"entry")


def test_a_problem_stored_without_the_version_copy_is_read_from_its_own_hash_then_healed(client: redis.Redis) -> None:
    """A problem written by code that kept the version only in the problem's hash (a fleet
    being upgraded): the worker asks that hash (one command more), and the next registration,
    unchanged, writes the copy and keeps the counts."""
    client.set(protocol.client_claim_key("c1"), "tok")
    version = register_problems(client, [_problem("1\n")]).versions["adm/p"]
    key = protocol.fail_counts_key("adm/p")
    client.hdel(key, protocol.FAILS_FIELD_VERSION)  # what older code leaves: counts only
    client.hincrby(key, "0", 2)
    adm = admit(client, _job(), read_fail_counts=True)
    assert adm.version_read and adm.version == version and adm.fail_counts == {0: 2}
    stats = register_problems(client, [_problem("1\n")])
    assert stats.unchanged == 1
    assert client.hgetall(key) == {b"0": b"2", protocol.FAILS_FIELD_VERSION.encode(): version.encode()}


def test_the_version_copy_never_names_a_version_the_problem_hash_does_not_hold(client: redis.Redis) -> None:
    """The copy is written only while the problem's hash holds that version: a loader that lost
    a race (another wrote a newer version in between) leaves the copy alone."""
    from cpfleet.core.store import _SYNC_VERSION

    version = register_problems(client, [_problem("1\n")]).versions["adm/p"]
    key = protocol.fail_counts_key("adm/p")
    sync = client.register_script(_SYNC_VERSION)
    args = [protocol.FAILS_FIELD_VERSION, "some-older-version", "reset"]
    assert sync(keys=[protocol.problem_key("adm/p"), key], args=args) == 0
    assert client.hget(key, protocol.FAILS_FIELD_VERSION) == version.encode()
    # a changed problem: the copy follows, its counts are reset; removed: nothing is left
    client.hincrby(key, "0", 5)
    changed = register_problems(client, [_problem("2\n")]).versions["adm/p"]
    assert changed != version and client.hgetall(key) == {protocol.FAILS_FIELD_VERSION.encode(): changed.encode()}
    remove_problems(client, ["adm/p"])
    assert not client.exists(key) and admit(client, _job(token=None)).version is None
