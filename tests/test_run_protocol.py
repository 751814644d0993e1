"""The run job's wire rule and result shapes, without a fleet: a RunMessage survives msgpack
exactly, every malformed field is refused with its name (the client and the worker apply the
same rule), and a RunJobResult survives the reply path and is told apart from a JobResult."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest

from cpfleet.core import protocol
from cpfleet.core.errors import ProtocolError
from cpfleet.core.results import (
    CompileOutput,
    JobResult,
    RunJobResult,
    RunOutput,
    RunStatus,
    result_from_dict,
)
from cpfleet.core.verdict import Verdict
from cpfleet.producer.client import RunRequest, run_message_fields

GOOD = protocol.RunMessage(
    job_id="j/1", reply_to="r", code=b"print(1)\xff", stdins=(b"", b"\x00\xff"), language="python3",
    files={"d/x.txt": b"\x00"}, fetch_files=("out",), time_limit_s=1.5, memory_limit_mb=64, output_cap=0,
    submitted_at=1.0, deadline=2.0, reply_ttl=7, client_id="c", client_token="t", start_within_s=4.5,
)


def test_run_message_survives_msgpack_round_trip() -> None:
    wire = msgpack.unpackb(msgpack.packb(GOOD.to_wire(), use_bin_type=True), raw=False)
    assert protocol.RunMessage.from_wire(wire) == GOOD
    assert wire["kind"] == "run" and GOOD.task_name == protocol.RUN_TASK_NAME != protocol.JobMessage.task_name


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"v": 99}, "unsupported run message"),
        ({"kind": "judge"}, "unsupported run message"),
        ({"job_id": ""}, "job_id"),
        ({"code": 5}, "code"),
        ({"stdins": []}, "stdins"),
        ({"stdins": [1]}, "stdin"),
        ({"language": None, "extract": False}, "language"),
        ({"files": {"../x": b""}}, "'..'"),
        ({"files": {"/etc/x": b""}}, "relative"),
        ({"files": {"dir/": b""}}, "relative"),
        ({"files": {"a": 5}}, "content"),
        ({"fetch_files": ["a", "b", "c", "d", "e"]}, "fetch_files"),
        ({"fetch_files": ["a//b"]}, "empty"),
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"time_limit_s": protocol.MAX_RUN_TIME_LIMIT_S + 1}, "time_limit_s"),
        ({"time_limit_s": True}, "time_limit_s"),
        ({"memory_limit_mb": 8}, "memory_limit_mb"),
        ({"memory_limit_mb": 1.5}, "memory_limit_mb"),
        ({"output_cap": protocol.MAX_RUN_OUTPUT_CAP + 1}, "output_cap"),
        ({"start_within_s": 0}, "start_within_s"),
        ({"start_within_s": float("nan")}, "start_within_s"),
        ({"start_within_s": True}, "start_within_s"),
        ({"client_token": None}, "come together"),
        ({"stdins": [b""] * (protocol.MAX_RUN_INPUTS + 1)}, "inputs"),
        ({"stdins": [b""] * 8, "output_cap": protocol.MAX_RUN_OUTPUT_CAP}, "split the inputs"),
    ],
)
def test_malformed_run_fields_are_refused_with_their_name(change: dict, complaint: str) -> None:
    wire = {**GOOD.to_wire(), **change}
    with pytest.raises(ProtocolError, match=complaint):
        protocol.RunMessage.from_wire(wire)


def test_an_oversized_run_job_is_refused() -> None:
    big = b"x" * (protocol.MAX_RUN_PAYLOAD_BYTES // 2 + 1)
    with pytest.raises(ProtocolError, match="exceeds"):
        protocol.RunMessage.from_wire({**GOOD.to_wire(), "stdins": [big, big]})


def test_requests_become_messages_by_the_same_rule() -> None:
    msg = protocol.RunMessage.from_wire(run_message_fields(RunRequest(code="print(1)", stdin="é", job_id="a")))
    assert (msg.language, msg.extract, msg.stdins, msg.job_id) == ("python3", False, ("é".encode(),), "a")
    msg = protocol.RunMessage.from_wire(run_message_fields(RunRequest(completion="```c\nint main(){}\n```")))
    assert (msg.language, msg.extract) == (None, True)
    for alias, name in (("python", "python3"), ("C++", "cpp"), ("java", "java")):
        assert run_message_fields(RunRequest(code="x", language=alias))["language"] == name
    for bad in (RunRequest(), RunRequest(code="x", completion="y"), RunRequest(code="x", language="cobol")):
        with pytest.raises(ValueError):
            run_message_fields(bad)
    with pytest.raises(TypeError):
        run_message_fields(RunRequest(code="x", stdin=[1]))  # type: ignore[list-item]


def test_run_result_survives_the_reply_path_and_is_told_from_a_job_result() -> None:
    result = RunJobResult(
        job_id="j", status=RunStatus.FINISHED, language="cpp", time_limit_s=2.0, memory_limit_mb=256, output_cap=10,
        compile=CompileOutput(RunStatus.FINISHED, wall_ms=3.0, cache_hit=True), worker="w", queued_ms=1.0,
        executed_ms=2.0,
        runs=(
            RunOutput(RunStatus.FINISHED, exit_code=3, stdout="é", stderr="e", stdout_bytes=99, stdout_utf8=False, stderr_bytes=1,
                      stdout_truncated=True, cpu_ms=1.0, wall_ms=2.0, memory_kb=5, files={"o": b"\xff"},
                      files_truncated=("o",)),
            RunOutput(RunStatus.TIME_LIMIT, signal=9, limit="wall_time", detail="backstop", deterministic=False),
        ),
    )
    back = result_from_dict(protocol.decode_reply(protocol.encode_reply(result.to_dict())))
    assert back == result and isinstance(back, RunJobResult)
    job = JobResult.infra("j", "p", "why")
    assert isinstance(result_from_dict(protocol.decode_reply(protocol.encode_reply(job.to_dict()))), JobResult)
    assert job.verdict == Verdict.INTERNAL


def test_result_helpers_say_what_a_caller_checks() -> None:
    ok = RunOutput(RunStatus.FINISHED, exit_code=0)
    assert ok.ok and not RunOutput(RunStatus.FINISHED, exit_code=1).ok
    assert not RunOutput(RunStatus.RUNTIME_ERROR, signal=11).ok
    job = RunJobResult("j", RunStatus.FINISHED, runs=(ok, ok))
    assert job.ok and not dataclasses.replace(job, runs=()).ok
    infra = RunJobResult.infra("j", "sandbox died")
    assert (infra.status, infra.infra_error, infra.ok) == (RunStatus.INTERNAL, True, False)
