"""Run jobs when things go wrong, through a real fleet: a pool process that dies is an INTERNAL
run result (never a program status), a malformed run message is answered INTERNAL on its reply
list, a job's wall-clock budget leaves the remaining inputs NOT_RUN (the program's slowness,
never INTERNAL), a missed client deadline is INTERNAL, and a cancelled run job is dropped
unrun by the worker."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import redis
from fleet_helpers import FleetWorker, start_worker, wait_until  # noqa: F401  (fixture)
from kombu import Connection, Producer

from cpfleet import RunJobResult, RunRequest, RunStatus
from cpfleet.core import protocol
from cpfleet.core.results import result_from_dict
from cpfleet.producer.client import FleetClient
from cpfleet.producer.publisher import task_message

ENV = {
    "CPFLEET_MAX_RETRIES": "0",
    "CPFLEET_SOFT_TIME_LIMIT": "100",
    "CPFLEET_HARD_TIME_LIMIT": "110",
    "CPFLEET_VISIBILITY_TIMEOUT": "130",
    "CPFLEET_JOB_TIME_BUDGET": "4",
}


@pytest.fixture
def node(redis_url: str, start_worker) -> FleetWorker:  # noqa: F811
    return start_worker(redis_url, concurrency=1, env=ENV, faults=True)


def _log_events(worker: FleetWorker, event: str) -> list[str]:
    ids = []
    for line in worker.log_text().splitlines():
        start = line.find("{")
        if start < 0 or f'"event":"{event}"' not in line.replace(" ", ""):
            continue
        try:
            ids.append(json.loads(line[start:])["job_id"])
        except (ValueError, KeyError):
            continue
    return ids


def test_a_dead_pool_process_is_an_internal_run_result(redis_url: str, node: FleetWorker) -> None:
    with FleetClient(redis_url, timeout=120) as fleet:
        dead = fleet.run_many([RunRequest(code="print(1)", job_id="dies#exit")])[0].result(timeout=120)
        assert isinstance(dead, RunJobResult)
        assert (dead.job_id, dead.status, dead.infra_error) == ("dies#exit", RunStatus.INTERNAL, True)
        assert "died" in dead.infra_message and dead.runs == ()
        assert fleet.run("print(2)").runs[0].stdout == "2\n"  # the node serves on


def test_a_malformed_run_message_is_answered_internal(redis_url: str, node: FleetWorker) -> None:
    key = protocol.reply_key("malformed-run-" + uuid.uuid4().hex)
    msg = protocol.RunMessage(job_id="m-run", reply_to=key, code="print(1)", language="python3")
    headers, props, _ = task_message(msg, "m-run")
    with Connection(redis_url) as conn:
        Producer(conn.default_channel).publish(
            ([{**msg.to_wire(), "files": {"../../etc/x": b"1"}}], {}, {}), routing_key=protocol.DEFAULT_QUEUE,
            exchange="", serializer="msgpack", headers=headers, **props,
        )
    item = redis.Redis.from_url(redis_url).brpop([key], timeout=60)
    assert item is not None
    answer = result_from_dict(protocol.decode_reply(item[1]))
    assert isinstance(answer, RunJobResult) and answer.job_id == "m-run"
    assert answer.status == RunStatus.INTERNAL and answer.infra_error and "'..'" in answer.infra_message


def test_the_job_budget_leaves_later_inputs_not_run(redis_url: str, node: FleetWorker) -> None:
    with FleetClient(redis_url, timeout=120) as fleet:
        r = fleet.run("while True: pass", [""] * 12, time_limit_s=1.0)
    statuses = [x.status for x in r.runs]
    assert r.status == RunStatus.FINISHED and not r.infra_error and len(statuses) == 12
    assert statuses[-1] == RunStatus.NOT_RUN
    assert set(statuses) <= {RunStatus.TIME_LIMIT, RunStatus.NOT_RUN}
    assert all("time budget" in x.detail for x in r.runs if x.status == RunStatus.NOT_RUN)
    # a TIME_LIMIT is the program's own CPU limit; an input the budget cut (on a loaded machine,
    # even the first) is NOT_RUN
    assert all(x.limit == "cpu_time" for x in r.runs if x.status == RunStatus.TIME_LIMIT)


def test_a_missed_deadline_and_a_cancel(redis_url: str, node: FleetWorker) -> None:
    with FleetClient(redis_url, timeout=120) as fleet:
        busy = fleet.run_many([RunRequest(code="print(1)", job_id="busy#sleep:4")])[0]
        late = fleet.submit_run("print(2)", timeout=1.0, job_id="late")
        queued = fleet.submit_run("print(3)", job_id="withdrawn")
        assert queued.cancel() and queued.cancelled()
        result: Any = late.result(timeout=30)
        assert (result.status, result.infra_error, result.job_id) == (RunStatus.INTERNAL, True, "late")
        assert "no result within" in result.infra_message
        assert busy.result(timeout=60).runs[0].stdout == "1\n"
        assert wait_until(lambda: any(i.startswith("withdrawn/") for i in _log_events(node, "job_withdrawn")),
                          timeout=60)
    assert wait_until(lambda: any(i.startswith("busy#sleep:4/") for i in _log_events(node, "run_done")), timeout=30)
    assert not any(i.startswith("withdrawn/") for i in _log_events(node, "run_done"))


def test_closing_the_client_answers_its_pending_run_jobs_internal(redis_url: str) -> None:
    fleet = FleetClient(redis_url, queue="no-worker-here", timeout=60)
    futures = fleet.run_many([RunRequest(code="print(1)", job_id=f"p{i}") for i in range(3)])
    fleet.close()
    results = [f.result(timeout=10) for f in futures]
    assert [(r.job_id, r.status, r.infra_error) for r in results] == [
        (f"p{i}", RunStatus.INTERNAL, True) for i in range(3)]
    assert all(isinstance(r, RunJobResult) and "client closed" in r.infra_message for r in results)
