"""The worker's admission check (``workers.withdrawal.admit``) reads, in the withdrawal check's
round trip, the version the store holds for the job's problem; the problem cache judges with
exactly that version, so a reloaded problem is never judged with its old tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from cpfleet.core import protocol
from cpfleet.core.protocol import JobMessage
from cpfleet.core.store import fetch_version, register_problems
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
    client.sadd(protocol.cancelled_key("c1"), "j1")
    assert admit(client, _job()).withdrawn == CANCELLED
    assert admit(client, _job("j3")).withdrawn is None


def test_a_job_without_a_client_token_runs_and_leaves_the_version_to_the_cache(client: redis.Redis) -> None:
    adm = admit(client, _job(token=None))
    assert adm.withdrawn is None and not adm.version_read
