"""An unknown problem id is the caller's permanent error, raised by the client at submit.

Real Redis and a real prefork worker: the client refuses a batch naming a problem the store
does not have with ``UnknownProblemError`` and nothing reaches the queue; an id found once is
remembered (no EXISTS per later job, read from Redis's own command statistics); a problem
deleted after that check still gets the worker's explicit UNKNOWN_PROBLEM result, never a reward.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis
from fleet_helpers import FleetWorker

from cpfleet.core import protocol
from cpfleet.core.errors import UnknownProblemError
from cpfleet.core.verdict import Verdict
from cpfleet.producer.client import FleetClient

ADD = {
    "id": "k/add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "2 5\n", "output": "7\n"}],
}
GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


def _exists_calls(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_hexists", {}).get("calls", 0))


def test_unknown_id_raises_at_submit_known_id_checked_once_deleted_one_answered_by_worker(
    redis_url: str, tmp_path: Path
) -> None:
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url) as loader:
        loader.register_problems([ADD])  # stored by another client: this one must look it up
    with FleetWorker(redis_url, tmp_path, concurrency=1) as node, FleetClient(node.redis_url, timeout=120) as fleet:
        queued = r.llen(protocol.DEFAULT_QUEUE)
        with pytest.raises(UnknownProblemError, match=r"'k/typo'.*cpfleet load.*register_problems") as err:
            fleet.submit_many([("k/add", GOOD), ("k/typo", GOOD), ("k/typo", GOOD), ("k/other", GOOD)])
        assert err.value.problem_ids == ["k/typo", "k/other"]
        assert r.llen(protocol.DEFAULT_QUEUE) == queued and fleet.in_flight == 0  # nothing published

        r.config_resetstat()
        assert [x.reward for x in fleet.evaluate_many([("k/add", GOOD)] * 3)] == [1.0, 1.0, 1.0]
        assert _exists_calls(r) == 0  # found by the failed call's check, remembered since
        assert [x.reward for x in fleet.evaluate_many([("k/add", GOOD)] * 5)] == [1.0] * 5
        with pytest.raises(UnknownProblemError):
            asyncio.run(fleet.evaluate("k/typo", GOOD))  # the async micro-batcher refuses it too
        async def both() -> list[object]:
            return list(await asyncio.gather(fleet.evaluate("k/add", GOOD, dedupe=False),
                                             fleet.evaluate("k/gone", GOOD), return_exceptions=True))
        ok, refused = asyncio.run(both())
        assert getattr(ok, "reward", None) == 1.0 and isinstance(refused, UnknownProblemError)
        assert refused.problem_ids == ["k/gone"]
        assert _exists_calls(r) == 2  # one per unseen id (typo, gone), none for the known one

        sub = {**ADD, "id": "k/sub"}
        fleet.register_problems([sub])  # stored by this client, and inline tests: known, not looked up
        inline = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
        done = fleet.evaluate_many([("k/sub", GOOD), {"tests": inline, "completion": GOOD}])
        assert [x.reward for x in done] == [1.0, 1.0] and _exists_calls(r) == 2

        r.delete(protocol.problem_key("k/add"))  # deleted after the check: the worker answers it
        late = fleet.submit("k/add", GOOD, job_id="late").result(timeout=120)
        assert (late.verdict, late.infra_error, late.reward) == (Verdict.UNKNOWN_PROBLEM, True, None)
        assert late.job_id == "late"
    r.close()


def test_cpfleet_submit_answers_each_job_of_an_unknown_problem_and_runs_the_others(redis_url: str, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from fleet_helpers import REPO

    with FleetClient(redis_url) as loader:
        loader.register_problems([ADD])
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps(j) + "\n" for j in [
        {"problem_id": "k/typo", "completion": GOOD, "job_id": "t1"},
        {"problem_id": "k/add", "completion": GOOD, "job_id": "a"},
        {"problem_id": "k/typo", "completion": GOOD, "job_id": "t2"},
    ]))
    typos = tmp_path / "typos.jsonl"
    typos.write_text(json.dumps({"problem_id": "k/typo", "completion": GOOD}) + "\n")
    with FleetWorker(redis_url, tmp_path, concurrency=1):
        out = subprocess.run([sys.executable, "-m", "cpfleet", "submit", str(jobs), "--redis", redis_url, "--no-progress"],
                             cwd=REPO, capture_output=True, text=True, timeout=300)
        # every job without a reward: the output is there, and the exit status says nothing was judged
        only = subprocess.run([sys.executable, "-m", "cpfleet", "submit", str(typos), "--redis", redis_url, "--no-progress"],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
    assert only.returncode == 3 and "no job got a reward: exit status 3" in only.stderr, only.stderr
    assert json.loads(only.stdout)["verdict"] == "UNKNOWN_PROBLEM"
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [x["job_id"] for x in lines] == ["t1", "a", "t2"]  # input order, one line per job
    assert [(x["verdict"], x["reward"], x["infra_error"]) for x in lines] == [
        ("UNKNOWN_PROBLEM", None, True), ("OK", 1.0, False), ("UNKNOWN_PROBLEM", None, True)
    ]
    assert "k/typo" in lines[0]["infra_message"]
