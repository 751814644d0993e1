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
    """Claim, cancel key and result cache probe in one MGET, the version with the fail counts in
    one HMGET of the problem's hash: two commands (no script: EVALSHA would be one more), in one
    round trip."""
    client.set(protocol.client_claim_key("c1"), "tok")
    register_problems(client, [_problem("1\n")])
    client.hincrby(protocol.problem_key("adm/p"), protocol.fail_count_field(0), 3)
    client.set("adm:probe", b"entry")
    client.config_resetstat()
    adm = admit(client, _job(), count_tests=1, cache_probe="adm:probe")
    used = _commands(client)
    used.pop("config|resetstat", None)
    used.pop("config", None)
    assert used == {"mget": 1, "hmget": 1}
    assert adm.withdrawn is None and adm.version == fetch_version(client, "adm/p") and adm.fail_counts == {0: 3}
    assert (adm.cache_key, adm.cache_blob) == ("adm:probe", b"entry")


def _count_fields(client: redis.Redis) -> dict[bytes, bytes]:
    return {k: v for k, v in client.hgetall(protocol.problem_key("adm/p")).items()
            if k.startswith(protocol.PROBLEM_FAIL_FIELD_PREFIX.encode())}


def test_the_counts_live_and_go_with_the_problem(client: redis.Redis) -> None:
    """The version is read where the store writes it (never a copy that could outlive a
    delete); a changed problem's counts are dropped (they were of the old tests), an unchanged
    one's kept; a removed problem, or one deleted by hand, takes its counts with it and reads as
    not stored."""
    client.set(protocol.client_claim_key("c1"), "tok")
    version = register_problems(client, [_problem("1\n")]).versions["adm/p"]
    client.hincrby(protocol.problem_key("adm/p"), protocol.fail_count_field(0), 5)
    assert register_problems(client, [_problem("1\n")]).unchanged == 1
    assert _count_fields(client) == {b"fail:0": b"5"}
    changed = register_problems(client, [_problem("2\n")]).versions["adm/p"]
    assert changed != version and _count_fields(client) == {}
    adm = admit(client, _job(), count_tests=1)
    assert adm.version == changed and adm.fail_counts == {}
    client.hincrby(protocol.problem_key("adm/p"), protocol.fail_count_field(0), 1)
    client.delete(protocol.problem_key("adm/p"))  # by hand, not through the store
    adm = admit(client, _job(), count_tests=1)
    assert adm.version_read and adm.version is None and adm.fail_counts == {}
    register_problems(client, [_problem("2\n")])
    client.hset(protocol.fail_counts_key("adm/p"), "0", 9)  # where older code counted
    remove_problems(client, ["adm/p"])
    assert not client.exists(protocol.problem_key("adm/p"), protocol.fail_counts_key("adm/p"))
