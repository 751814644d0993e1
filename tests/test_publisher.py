"""The publisher's queue entries are byte-for-byte what kombu's Redis transport writes for the
same task message (so Celery workers read them as their own), and it pushes in order.

Real redis-server (conftest); the reference entry is published by kombu itself."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest
import redis
from kombu import Connection, Producer

from cpfleet.core import protocol
from cpfleet.core.errors import MessageEncodeError
from cpfleet.producer.publisher import Publisher, task_message


def _kombu_entry(redis_url: str, queue: str, msg: protocol.JobMessage | protocol.RunMessage,
                 task_id: str) -> dict[str, Any]:
    headers, properties, body = task_message(msg, task_id)
    with Connection(redis_url) as conn:
        Producer(conn.default_channel, serializer="msgpack").publish(
            body, routing_key=queue, exchange="", headers=headers, delivery_mode=2, retry=False, **properties
        )
    raw = redis.Redis.from_url(redis_url).rpop(queue)
    assert raw is not None
    entry: dict[str, Any] = json.loads(raw)
    return entry


@pytest.mark.parametrize(
    "msg",
    [
        protocol.JobMessage(job_id="j/1", problem_id="p/1", completion="print(1)", reply_to="r"),
        protocol.JobMessage(
            job_id='odd "id" \\ é', problem_id="p\n\u2028'q'", completion=b"\xff\xfe bytes", reply_to="r",
            client_id="c0ffee", client_token="t0k", language="cpp",
        ),
        # a client id the orphan sweep cannot read stays out of the headers (as task_message has it)
        protocol.JobMessage(job_id="j", problem_id="p", completion="x", reply_to="r", client_id="a b", client_token="t"),
        # a run job: its own task name, the same envelope
        protocol.RunMessage(job_id="run/1", reply_to="r", code="print(1)", stdins=(b"1", b"\xff"), language="python3",
                            files={"a.txt": b"x"}, fetch_files=("o",), time_limit_s=2.0, client_id="c0ffee",
                            client_token="t0k"),
    ],
)
def test_entries_equal_what_kombu_writes_for_the_same_message(
    redis_url: str, msg: protocol.JobMessage | protocol.RunMessage
) -> None:
    queue = "pub-compare"
    reference = _kombu_entry(redis_url, queue, msg, msg.job_id)
    pub = Publisher(redis_url, queue)
    pub.publish([(msg, msg.job_id)])
    pub.close()
    raw = redis.Redis.from_url(redis_url).rpop(queue)
    assert raw is not None
    ours = json.loads(raw)
    # the delivery tag is a fresh unique id per message in both
    assert ours["properties"].pop("delivery_tag") != reference["properties"].pop("delivery_tag")
    assert ours == reference
    args, kwargs, embed = msgpack.unpackb(__import__("base64").b64decode(ours["body"]), raw=False)
    assert type(msg).from_wire(args[0]) == msg and kwargs == {}
    assert ours["headers"]["task"] == msg.task_name


def test_push_keeps_order_across_batches_and_tags_are_unique(redis_url: str) -> None:
    queue = "pub-order"
    pub = Publisher(redis_url, queue, batch_size=7)
    msgs = [protocol.JobMessage(job_id=f"j{i}", problem_id="p", completion="c", reply_to="r") for i in range(50)]
    pub.publish([(m, m.job_id) for m in msgs])
    pub.close()
    r = redis.Redis.from_url(redis_url)
    entries = [json.loads(r.rpop(queue) or b"null") for _ in range(50)]  # consumers pop from the right
    assert [e["headers"]["id"] for e in entries] == [m.job_id for m in msgs]
    assert len({e["properties"]["delivery_tag"] for e in entries}) == 50 and r.llen(queue) == 0


def test_a_job_that_cannot_be_encoded_sends_nothing_of_its_call(redis_url: str) -> None:
    queue = "pub-encode"
    pub = Publisher(redis_url, queue)
    good = protocol.JobMessage(job_id="ok", problem_id="p", completion="c", reply_to="r")
    bad = protocol.JobMessage(job_id="bad", problem_id="p", completion=object(), reply_to="r")  # type: ignore[arg-type]
    with pytest.raises(MessageEncodeError):
        pub.publish([(good, "ok"), (bad, "bad")])
    pub.close()
    assert redis.Redis.from_url(redis_url).llen(queue) == 0
