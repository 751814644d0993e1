"""Publishing jobs as Celery protocol-v2 task messages, in batches, without a Celery app.

Each message is exactly what ``app.send_task`` followed by kombu's Redis transport would put in
the queue list: a JSON envelope (headers, properties, delivery info) around a base64 msgpack
body of ``(args, kwargs, embed)``. It is rendered here from a template and pushed with one
multi-value LPUSH per batch, several batches per round trip: kombu's own publish path spends
~35 us per message building and re-encoding the envelope, this one ~5 us, which is what lets a
trainer publish a burst of thousands of jobs within milliseconds. The template is made by
encoding :func:`task_message`'s own output with placeholders, so the two cannot drift apart
(``tests/test_publisher.py`` compares the bytes with kombu's). ``argsrepr`` names the job
instead of repeating its completion, so task events (Flower) never carry megabytes of model
output.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import msgpack
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError

from cpfleet.core.errors import BrokerFull, BrokerUnavailable, MessageEncodeError, PublisherClosed
from cpfleet.core.protocol import RUN_TASK_NAME, TASK_NAME, JobMessage, RunMessage
from cpfleet.core.redis_url import REPLICA_WAIT_MS, ReplicaWait, mask_password, parse_redis_url
from cpfleet.producer import orphans
from cpfleet.producer.connection import connect

log = logging.getLogger("cpfleet.client")

_EMBED: dict[str, Any] = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is Redis's OOM refusal."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, redis.exceptions.OutOfMemoryError) or str(e).startswith("OOM command not allowed"):
            return True
        e = e.__cause__ or e.__context__
    return False


def task_message(msg: JobMessage | RunMessage, task_id: str) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(headers, properties, body) of one evaluate (or run) task message, as Celery's protocol 2 has them."""
    headers: dict[str, Any] = {
        "lang": "py",
        "task": msg.task_name,
        "id": task_id,
        "shadow": None,
        "eta": None,
        "expires": None,
        "group": None,
        "group_index": None,
        "retries": 0,
        "timelimit": [None, None],
        "root_id": task_id,
        "parent_id": None,
        "argsrepr": _argsrepr(msg),
        "kwargsrepr": "{}",
        "origin": _ORIGIN,
        "ignore_result": True,
        "replaced_task_nesting": 0,
        "stamped_headers": None,
        "stamps": {},
    }
    if _has_client(msg):
        # Readable without decoding the body, so that a sweep can find the jobs of clients that
        # are gone (cpfleet.producer.orphans); Celery ignores headers it does not know.
        headers[orphans.CLIENT_HEADER] = msg.client_id
        headers[orphans.TOKEN_HEADER] = msg.client_token
    properties: dict[str, Any] = {"correlation_id": task_id, "reply_to": ""}
    body: tuple[list[Any], dict[str, Any], dict[str, Any]] = ([msg.to_wire()], {}, _EMBED)
    return headers, properties, body


_ORIGIN = f"cpfleet-producer@{socket.gethostname()}.{os.getpid()}"


def _argsrepr(msg: JobMessage | RunMessage) -> str:
    if isinstance(msg, RunMessage):
        what = msg.language or "any"
        return f"(job={msg.job_id!r}, run={what!r}, inputs={len(msg.stdins)})"
    return f"(job={msg.job_id!r}, problem={msg.problem_id!r})"


def _has_client(msg: JobMessage | RunMessage) -> bool:
    return (
        msg.client_id is not None
        and msg.client_token is not None
        and orphans.CLIENT_ID_SAFE.fullmatch(msg.client_id) is not None
    )


# Placeholders the template is cut at: JSON strings no real value renders as (the values put in
# their place are JSON-encoded by json.dumps, so they cannot contain an unescaped quote).
_SLOTS = ("body", "id", "argsrepr", "client", "token", "tag")


class _Template:
    """The kombu Redis-transport envelope of a task message, pre-rendered around its variable parts."""

    def __init__(self, queue: str, with_client: bool, task_name: str = TASK_NAME) -> None:
        marks = {slot: f"\x00cpfleet-slot-{slot}\x00" for slot in _SLOTS}
        probe = JobMessage(
            job_id="probe", problem_id="probe", completion="", reply_to="",
            client_id="probe" if with_client else None, client_token="probe" if with_client else None,
        )
        headers, properties, _ = task_message(probe, marks["id"])
        headers["task"] = task_name
        headers["argsrepr"] = marks["argsrepr"]
        if with_client:
            headers[orphans.CLIENT_HEADER] = marks["client"]
            headers[orphans.TOKEN_HEADER] = marks["token"]
        envelope = {
            "body": marks["body"],
            "content-encoding": "binary",
            "content-type": "application/x-msgpack",
            "headers": headers,
            "properties": {
                **properties,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": marks["tag"],
            },
        }
        text = json.dumps(envelope)
        self.parts: list[bytes] = []
        self.slots: list[str] = []
        # cut at every placeholder (the id appears three times), in order of appearance
        rendered = {slot: json.dumps(mark) for slot, mark in marks.items()}
        while True:
            found = [(text.find(r), slot) for slot, r in rendered.items() if r in text]
            if not found:
                break
            at, slot = min(found)
            self.parts.append(text[:at].encode())
            self.slots.append(slot)
            text = text[at + len(rendered[slot]) :]
        self.parts.append(text.encode())

    def render(self, values: dict[str, bytes]) -> bytes:
        out = [self.parts[0]]
        for slot, part in zip(self.slots, self.parts[1:], strict=True):
            out.append(values[slot])
            out.append(part)
        return b"".join(out)


def _json(text: str) -> bytes:
    return json.dumps(text).encode()


class Publisher:
    """One Redis connection that pushes encoded task messages, shared by a client's threads under a lock."""

    def __init__(self, redis_url: str, queue: str, batch_size: int = 500, socket_timeout: float = 10.0) -> None:
        self._target = parse_redis_url(redis_url)
        self.redis_url = redis_url
        self.queue = queue
        self.batch_size = batch_size
        self._socket_timeout = socket_timeout
        self._templates = {(task, flag): _Template(queue, flag, task)
                           for task in (TASK_NAME, RUN_TASK_NAME) for flag in (False, True)}
        self._client_cache: tuple[tuple[str, str], tuple[bytes, bytes]] | None = None
        self._lock = threading.Lock()
        self._redis: redis.Redis | None = None
        self._closed = False
        self._unreplicated_warned = -float("inf")
        self._replica_wait = ReplicaWait(self._target.is_sentinel)

    def encode(self, msg: JobMessage | RunMessage, task_id: str) -> bytes:
        """The queue entry for one job, as kombu's Redis transport would write it; thread-safe.

        Raises MessageEncodeError when the job's body cannot be serialized.
        """
        try:
            body = msgpack.packb(([msg.to_wire()], {}, _EMBED), use_bin_type=True)
        except Exception as exc:
            raise MessageEncodeError(f"job {msg.job_id!r} cannot be encoded: {exc}") from exc
        with_client = _has_client(msg)
        values = {
            "body": b'"' + base64.b64encode(body) + b'"',
            "id": _json(task_id),
            "argsrepr": _json(_argsrepr(msg)),
            "tag": b'"' + os.urandom(16).hex().encode() + b'"',
        }
        if with_client:
            assert msg.client_id is not None and msg.client_token is not None
            values["client"], values["token"] = self._client_json(msg.client_id, msg.client_token)
        return self._templates[msg.task_name, with_client].render(values)

    def _client_json(self, client_id: str, token: str) -> tuple[bytes, bytes]:
        """The JSON of a client's id and token (the same on every job of a client: rendered once)."""
        cached = self._client_cache
        if cached is None or cached[0] != (client_id, token):
            cached = self._client_cache = ((client_id, token), (_json(client_id), _json(token)))
        return cached[1]

    def publish(self, messages: Sequence[tuple[JobMessage | RunMessage, str]]) -> None:
        """Publish ``(job, task_id)`` pairs in order.

        Every message is encoded first: a job that cannot be encoded raises MessageEncodeError
        before anything of the call is sent. Then as :meth:`push`.
        """
        if messages:
            self.push([self.encode(msg, task_id) for msg, task_id in messages])

    def push(self, payloads: Sequence[bytes]) -> None:
        """Append encoded messages to the queue, in order, in one round trip.

        Raises BrokerFull when Redis refuses for lack of memory, BrokerUnavailable when it fails
        otherwise (the next call connects afresh) and PublisherClosed after ``close``. On an
        error, batches before the failing one may have been queued (a job is then judged and its
        reply dropped by a client that no longer waits for it).
        """
        if not payloads:
            return
        with self._lock:
            if self._closed:
                raise PublisherClosed("the publisher is closed")
            # With Sentinel, while a failover elects the new primary no connection can be made;
            # an error raised before anything was sent is retried for up to the socket timeout.
            end = time.monotonic() + (self._socket_timeout if self._target.is_sentinel else 0.0)
            while True:
                try:
                    self._push_once(payloads)
                    return
                except Exception as exc:
                    self._reset()
                    if _nothing_sent(exc) and time.monotonic() < end:
                        time.sleep(0.2)
                        continue
                    if is_out_of_memory(exc):
                        raise BrokerFull(
                            f"Redis at {_safe_url(self.redis_url)} is full (maxmemory reached, noeviction): {exc}"
                        ) from exc
                    raise BrokerUnavailable(f"cannot publish to Redis at {_safe_url(self.redis_url)}: {exc}") from exc

    def _push_once(self, payloads: Sequence[bytes]) -> None:
        client = self._connection()
        pipe = client.pipeline(transaction=False)
        for start in range(0, len(payloads), self.batch_size):
            pipe.lpush(self.queue, *payloads[start : start + self.batch_size])
        waited = self._replica_wait.due(time.monotonic())
        if waited:
            pipe.execute_command("WAIT", 1, REPLICA_WAIT_MS)  # see core.redis_url.ReplicaWait
        replies = pipe.execute()
        if waited and not self._replica_wait.record(replies[-1], time.monotonic()):
            self._warn_unreplicated()

    def _warn_unreplicated(self) -> None:
        """A push no replica confirmed within REPLICA_WAIT_MS: a failover now could lose it (the
        client's deadline, with ``resubmit_on_timeout``, still answers it). Logged once a minute;
        pushes then skip the WAIT for REPLICA_PROBE_S (``core.redis_url.ReplicaWait``)."""
        now = time.monotonic()
        if now - self._unreplicated_warned > 60:
            self._unreplicated_warned = now
            log.warning("no Redis replica confirmed a push within %d ms: a failover now could lose those jobs "
                        "(their deadline still answers them)", REPLICA_WAIT_MS)

    def _connection(self) -> redis.Redis:
        if self._redis is None:
            # No silent retry: a push that failed half-way is the caller's to see, never to repeat.
            self._redis = connect(
                self._target,
                socket_timeout=self._socket_timeout,
                socket_connect_timeout=5,
                socket_keepalive=True,
                retry=Retry(NoBackoff(), 0),
            )
        return self._redis

    def _reset(self) -> None:
        client, self._redis = self._redis, None
        if client is not None:
            try:
                client.close()
            except Exception:  # already broken: nothing more to release
                pass

    def close(self) -> None:
        """Drop the connection; later ``publish`` calls raise PublisherClosed."""
        with self._lock:
            self._closed = True
            self._reset()


def _nothing_sent(exc: BaseException) -> bool:
    """Whether ``exc`` came before a command left: no primary known to Sentinel, or a connection
    that could not be opened (redis-py words those "Error N connecting to ...")."""
    return isinstance(exc, MasterNotFoundError) or (
        isinstance(exc, redis.ConnectionError) and " connecting to " in str(exc)
    )


def _safe_url(url: str) -> str:
    """The URL without its password, for error messages."""
    return mask_password(url)
