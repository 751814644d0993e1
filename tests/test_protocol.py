"""The wire protocol: job messages validate strictly, replies round-trip, keys are stable."""

from __future__ import annotations

import msgpack
import pytest

from cpfleet.core import protocol
from cpfleet.core.protocol import JobMessage, ProtocolError
from cpfleet.core.results import JobResult
from cpfleet.core.results import TestReport as Report
from cpfleet.core.verdict import Verdict
from cpfleet.producer.publisher import task_message


def _job(**over: object) -> dict:
    msg = JobMessage(job_id="j1", problem_id="p/1", completion="```python\nprint(1)\n```", reply_to="cpfleet:reply:c")
    return {**msg.to_wire(), **over}


def test_job_message_survives_msgpack_round_trip_including_non_utf8_bytes() -> None:
    msg = JobMessage(
        job_id="j", problem_id="p", completion=b"\xff\xfe not utf-8", reply_to="r", mode="public",
        reward_shape="fraction", submitted_at=1.5, deadline=9.5, reply_ttl=60, use_cache=False,
    )
    wire = msgpack.unpackb(msgpack.packb(msg.to_wire(), use_bin_type=True), raw=False)
    assert JobMessage.from_wire(wire) == msg


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"v": 99}, "version"),
        ({"job_id": ""}, "job_id"),
        ({"problem_id": 7}, "problem_id"),
        ({"reply_to": None}, "reply_to"),
        ({"completion": 12}, "completion"),
        ({"mode": "secret"}, "mode"),
        ({"reward_shape": "partial"}, "reward_shape"),
        ({"deadline": "soon"}, "deadline"),
        ({"reply_ttl": 0}, "reply_ttl"),
    ],
)
def test_malformed_job_fields_are_refused_with_their_name(change: dict, complaint: str) -> None:
    with pytest.raises(ProtocolError, match=complaint):
        JobMessage.from_wire(_job(**change))


def test_non_map_job_is_refused() -> None:
    with pytest.raises(ProtocolError, match="map"):
        JobMessage.from_wire(["not", "a", "job"])


def test_oversized_completion_is_refused() -> None:
    with pytest.raises(ProtocolError, match="completion of .* bytes exceeds the limit"):
        JobMessage.from_wire(_job(completion="x" * (protocol.MAX_COMPLETION_BYTES + 1)))


def test_reply_round_trip_keeps_every_result_field() -> None:
    r = JobResult(job_id="j", problem_id="p", reward=0.5, verdict=Verdict.WRONG_ANSWER, observation="obs")
    r.public.tests.append(Report(Verdict.OK, 1.5, 1.0))
    r.public.passed = r.public.total = r.public.run = 1
    r.hidden.first_failure = Verdict.TIME_LIMIT
    r.worker, r.cache_hit, r.timings.queued_ms = "w@h", True, 3.0
    back = JobResult.from_dict(protocol.decode_reply(protocol.encode_reply(r.to_dict())))
    assert back == r


@pytest.mark.parametrize("data", [b"\xc1garbage", msgpack.packb([1, 2]), msgpack.packb({"v": 0, "result": {}}),
                                  msgpack.packb({"v": protocol.PROTOCOL_VERSION, "result": {"reward": 1}})])
def test_foreign_replies_raise_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        protocol.decode_reply(data)


def test_result_cache_key_depends_on_version_code_and_options() -> None:
    h = protocol.code_hash("print(1)\n")
    base = protocol.result_cache_key("v1", h, "all_or_nothing", "full")
    assert base != protocol.result_cache_key("v2", h, "all_or_nothing", "full")
    assert base != protocol.result_cache_key("v1", protocol.code_hash("print(2)\n"), "all_or_nothing", "full")
    assert base != protocol.result_cache_key("v1", h, "fraction", "full")
    assert base != protocol.result_cache_key("v1", h, "all_or_nothing", "public")
    assert protocol.code_hash(None) == "nocode"
    assert base.startswith(f"{protocol.KEY_PREFIX}:")


def test_check_options_refuses_unknown_mode_and_shape() -> None:
    protocol.check_options("fraction", "public")
    with pytest.raises(ValueError, match="mode"):
        protocol.check_options("fraction", "everything")
    with pytest.raises(ValueError, match="reward shape"):
        protocol.check_options("all", "full")


def test_task_message_is_celery_protocol_v2_and_keeps_the_completion_out_of_argsrepr() -> None:
    msg = JobMessage(job_id="j9", problem_id="p", completion="SECRET" * 1000, reply_to="r")
    headers, props, body = task_message(msg, "j9")
    assert headers["task"] == protocol.TASK_NAME and headers["id"] == "j9" and headers["retries"] == 0
    assert props["correlation_id"] == "j9"
    args, kwargs, embed = body
    assert JobMessage.from_wire(args[0]) == msg and kwargs == {} and set(embed) == {"callbacks", "errbacks", "chain", "chord"}
    assert "SECRET" not in headers["argsrepr"] and len(headers["argsrepr"]) < 100
