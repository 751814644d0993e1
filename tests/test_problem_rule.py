"""One judging rule and one problem reader for every entry point.

``cpfleet judge``, ``cpfleet load``, ``cpfleet validate`` and ``FleetClient.register_problems``
must accept and refuse exactly the same records; a problem without hidden tests (or, for
public mode, without public tests) is never judged; a command that loaded nothing fails."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from fleet_helpers import REPO, FleetWorker, start_worker  # noqa: F401  (fixture)

from cpfleet.core.errors import NoHiddenTestsError, NoPublicTestsError, ProblemFormatError
from cpfleet.core.problem import Problem, judging_refusal, validate_for_judging
from cpfleet.core.protocol import PROBLEM_FIELD_DATA, PROBLEM_FIELD_VERSION, problem_index_key, problem_key
from cpfleet.core.store import encode_problem, stored_ids
from cpfleet.core.verdict import Verdict
from cpfleet.producer.client import FleetClient

ADD_OK = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
ADD_SOLUTION = "a, b = map(int, input().split())\nprint(a + b)\n"


def add_problem(pid: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": pid,
        "public_tests": [{"input": "1 2\n", "output": "3\n"}],
        "hidden_tests": [{"input": "2 5\n", "output": "7\n"}],
        "correct_solutions": [ADD_SOLUTION],
        **extra,
    }


GOOD = [
    add_problem("good/plain"),
    add_problem("good/float", checker={"type": "float", "abs": 1e-6}),
    add_problem("good/ünïcode-id"),
    add_problem("good/limits", time_limit_s=1, memory_limit_mb=64),
    add_problem("good/no-public-tests", public_tests=[]),  # full mode rewards hidden tests only
]
BAD_LINES = [
    json.dumps(add_problem("bad/no-hidden", hidden_tests=[])),
    json.dumps({k: v for k, v in add_problem("bad/no-hidden-key").items() if k != "hidden_tests"}),
    json.dumps(add_problem("bad/no-tests", public_tests=[], hidden_tests=[])),
    json.dumps(add_problem("bad/checker", checker={"type": "regex"})),
    json.dumps(add_problem("bad/time", time_limit_s=0)),
    json.dumps(add_problem("bad/memory", memory_limit_mb=8)),
    json.dumps(add_problem("bad/test-type", hidden_tests=[{"input": "1 2\n", "output": 3}])),
    json.dumps({k: v for k, v in add_problem("x").items() if k != "id"}),
    json.dumps([1, 2]),
    json.dumps("just a string"),
    '{"id": "bad/json", "public_tests": [',
]
GOOD_IDS = {p["id"] for p in GOOD}
ALL_IDS = GOOD_IDS | {f"bad/{n}" for n in ("no-hidden", "no-hidden-key", "no-tests", "checker", "time", "memory",
                                          "test-type", "json")}


def mixed_file(tmp_path: Path) -> Path:
    """Good and bad records interleaved, with a blank line (not a record) among them."""
    lines: list[str] = []
    for i, bad in enumerate(BAD_LINES):
        if i < len(GOOD):
            lines.append(json.dumps(GOOD[i], ensure_ascii=False))
        lines.append(bad)
        if i == 3:
            lines.append("   ")
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cpfleet", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO)


def judged_ids(path: Path, tmp_path: Path, *extra: str) -> tuple[int, set[str], str]:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"problem_id": pid, "completion": ADD_OK}) + "\n" for pid in sorted(ALL_IDS)))
    proc = cli("judge", str(path), str(jobs), "--workers", "1", "--no-progress", *extra)
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    for r in results:
        if r["verdict"] != Verdict.UNKNOWN_PROBLEM:
            assert (r["verdict"], r["reward"]) == ("OK", 1.0), r
    return proc.returncode, {r["problem_id"] for r in results if r["verdict"] != Verdict.UNKNOWN_PROBLEM}, proc.stderr


def loaded_ids(path: Path, redis_url: str, *extra: str) -> tuple[int, set[str], str]:
    proc = cli("load", str(path), "--redis", redis_url, *extra)
    client = redis.Redis.from_url(redis_url)
    try:
        return proc.returncode, stored_ids(client), proc.stdout + proc.stderr
    finally:
        client.close()


def validated_ids(path: Path, tmp_path: Path, *extra: str) -> tuple[int, set[str], str]:
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    proc = cli("validate", str(path), "--workers", "1", "--no-progress", "--kinds", "correct", "--json", str(report),
               *extra)
    if not report.exists():
        return proc.returncode, set(), proc.stderr
    outcomes = json.loads(report.read_text())["solutions"]
    assert all(o["verdict"] == "OK" for o in outcomes), outcomes
    return proc.returncode, {o["problem_id"] for o in outcomes}, proc.stderr


def registered_ids(path: Path, redis_url: str) -> tuple[set[str], int]:
    """Each non-blank line, parsed as JSON where it parses (else the raw text), given to the client."""
    refused = 0
    with FleetClient(redis_url, timeout=30) as client:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                record: Any = json.loads(line)
            except ValueError:
                record = line
            try:
                client.register_problems([record])
            except ProblemFormatError:
                refused += 1
    conn = redis.Redis.from_url(redis_url)
    try:
        return stored_ids(conn), refused
    finally:
        conn.close()


def test_judge_load_validate_and_register_problems_accept_and_refuse_the_same_problems(
    tmp_path: Path, redis_url: str, redis_server: Any
) -> None:
    path = mixed_file(tmp_path)
    n_bad = len(BAD_LINES)

    rc, judged, err = judged_ids(path, tmp_path)
    assert rc == 0, err
    assert judged == GOOD_IDS
    assert f"{n_bad} skipped" in err

    rc, stored, out = loaded_ids(path, redis_url)
    assert rc == 0, out
    assert stored == GOOD_IDS
    assert f"skipped {n_bad} " in out

    rc, validated, err = validated_ids(path, tmp_path)
    assert rc == 0, err
    assert validated == GOOD_IDS
    assert f"{n_bad} skipped" in err

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    registered, refused = registered_ids(path, redis_url)
    assert registered == GOOD_IDS
    assert refused == n_bad


def test_strict_makes_any_bad_record_an_error_for_every_command(tmp_path: Path, redis_url: str) -> None:
    path = mixed_file(tmp_path)
    rc, judged, err = judged_ids(path, tmp_path, "--strict")
    assert (rc, judged) == (2, set()) and "mixed.jsonl:2: " in err and "Traceback" not in err
    rc, stored, out = loaded_ids(path, redis_url, "--strict")
    assert (rc, stored) == (2, set()) and "mixed.jsonl:2: " in out
    rc, validated, err = validated_ids(path, tmp_path, "--strict")
    assert (rc, validated) == (2, set()) and "mixed.jsonl:2: " in err


def test_a_file_that_loads_nothing_makes_every_command_exit_non_zero(tmp_path: Path, redis_url: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(BAD_LINES) + "\n")
    rc, judged, err = judged_ids(path, tmp_path)
    assert rc != 0 and judged == set() and "no problem loaded" in err
    rc, stored, out = loaded_ids(path, redis_url)
    assert rc != 0 and stored == set() and "no problem loaded" in out
    rc, validated, err = validated_ids(path, tmp_path)
    assert rc != 0 and validated == set() and "no problem loaded" in err


def test_register_problems_refuses_a_problem_without_hidden_tests_before_writing_anything(redis_url: str) -> None:
    with FleetClient(redis_url, timeout=30) as client:
        with pytest.raises(NoHiddenTestsError, match=r"problem #1: bad/no-hidden: no hidden tests"):
            client.register_problems([GOOD[0], add_problem("bad/no-hidden", hidden_tests=[])])
        with pytest.raises(NoHiddenTestsError, match="problem #0: bad/none"):
            client.register_problems([Problem.from_dict(add_problem("bad/none", public_tests=[], hidden_tests=[]))])
    conn = redis.Redis.from_url(redis_url)
    try:
        assert stored_ids(conn) == set()  # the good problem of the refused call was not written either
    finally:
        conn.close()


def test_the_rule_by_mode() -> None:
    both = Problem.from_dict(add_problem("both"))
    hidden_only = Problem.from_dict(add_problem("hidden-only", public_tests=[]))
    public_only = Problem.from_dict(add_problem("public-only", hidden_tests=[]))
    for mode in ("full", "public", "hidden"):
        validate_for_judging(both, mode)
    assert judging_refusal(hidden_only) is None  # full is the default: registration's rule
    assert judging_refusal(hidden_only, "hidden") is None  # hidden mode: full mode's rule
    assert "no hidden tests" in (judging_refusal(public_only, "hidden") or "")
    with pytest.raises(NoPublicTestsError, match="hidden-only: no public tests"):
        hidden_only.validate_for_judging("public")
    assert judging_refusal(public_only, "public") is None
    with pytest.raises(NoHiddenTestsError, match="public-only: no hidden tests"):
        public_only.validate_for_judging()
    with pytest.raises(ValueError, match="mode"):
        validate_for_judging(both, "secret")


def _store_unchecked(conn: redis.Redis, problem: Problem) -> None:
    """Write a problem the way a writer without the judging rule would (an older cpfleet)."""
    conn.hset(problem_key(problem.id), mapping={PROBLEM_FIELD_VERSION: problem.content_version(),
                                                PROBLEM_FIELD_DATA: encode_problem(problem)})
    conn.sadd(problem_index_key(), problem.id)


def test_worker_refuses_a_stored_problem_that_fails_the_rule_with_an_explicit_result(
    redis_url: str, start_worker: Callable[..., FleetWorker]  # noqa: F811
) -> None:
    conn = redis.Redis.from_url(redis_url)
    try:
        _store_unchecked(conn, Problem.from_dict(add_problem("legacy/public-only", hidden_tests=[])))
        _store_unchecked(conn, Problem.from_dict(add_problem("legacy/hidden-only", public_tests=[])))
    finally:
        conn.close()
    start_worker(redis_url, concurrency=1)
    with FleetClient(redis_url, timeout=120, use_cache=False) as client:
        full_public_only = client.submit("legacy/public-only", ADD_OK).result(timeout=120)
        public_hidden_only = client.submit("legacy/hidden-only", ADD_OK, mode="public").result(timeout=120)
        full_hidden_only = client.submit("legacy/hidden-only", ADD_OK).result(timeout=120)
    for r, why in ((full_public_only, "no hidden tests"), (public_hidden_only, "no public tests")):
        assert (r.reward, r.verdict, r.infra_error) == (None, Verdict.INTERNAL, True), r
        assert "problem refused, not judged" in r.infra_message and why in r.infra_message
        assert r.public.run == 0 and r.hidden.run == 0
    assert (full_hidden_only.reward, full_hidden_only.verdict) == (1.0, Verdict.OK)
