"""Pushing one result to its job's client: one ``XADD`` to the client's reply stream, or, where
the message names no stream or the stream is gone, ``LPUSH`` + ``EXPIRE`` to its reply list; one
round trip, retried while Redis is briefly away (a restart mid-batch) or full (``maxmemory``
with ``noeviction`` refuses writes with an OOM error until readers or workers drain it), so a
finished job's work is not thrown away."""

from __future__ import annotations

import logging
import time

import redis
from celery.exceptions import SoftTimeLimitExceeded
from redis.sentinel import SentinelConnectionPool

from cpfleet.core import protocol
from cpfleet.core.redis_url import REPLICA_WAIT_MS, ReplicaWait
from cpfleet.core.results import JobResult, RunJobResult

log = logging.getLogger("cpfleet.replies")


_replica_wait = ReplicaWait(True)  # per process: its pushes go to one Redis


# One more failure of a hidden test, only while its problem is stored: a count landing after the
# problem was removed would otherwise leave a hash of count fields with no problem in it. EVAL
# rather than EVALSHA: one command either way, and no NOSCRIPT round trip after a Redis restart.
COUNT_IF_STORED = (
    "if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return redis.call('HINCRBY', KEYS[1], ARGV[2], 1) end "
    "return false"
)


def push_reply(
    client: redis.Redis,
    reply_to: str,
    result: JobResult | RunJobResult,
    ttl_s: int,
    retry_for_s: float = 30.0,
    keep_until: float | None = None,
    count_failure: tuple[str, str] | None = None,
    stream: str | None = None,
) -> None:
    """Deliver ``result``; ``count_failure`` (the problem's hash, a test's count field) adds one
    to that test's count in the same round trip (``workers.failorder``).

    ``stream``: the client's reply stream (``protocol.reply_stream_key``), appended to with
    ``NOMKSTREAM``: the client creates it and keeps its expiry, so the push needs no EXPIRE;
    when it does not exist (it expired while its client was cut off, or Redis lost it) the reply
    goes to ``reply_to`` with its expiry, where the client looks too.

    Redis unreachable: retried for ``retry_for_s``, then the last error is raised. Redis full:
    retried for ``retry_for_s`` or until ``keep_until`` (epoch seconds, the job's deadline: after
    it the client has answered the job itself), whichever is later, and through a soft time limit
    that fires meanwhile (the reply is the job's whole point; only the hard limit ends the wait).
    """
    data = protocol.encode_reply(result.to_dict())
    replicated = isinstance(client.connection_pool, SentinelConnectionPool)
    deadline = time.monotonic() + retry_for_s
    full_deadline = max(deadline, time.monotonic() + (keep_until - protocol.now() if keep_until is not None else 0.0))
    delay = 0.05
    full_logged = False
    while True:
        try:
            # not a transaction (MULTI/EXEC would be 2 more commands per job): if only the reply
            # lands, the retry pushes a duplicate, which the client drops by job id
            pipe = client.pipeline(transaction=False)
            if stream is not None:
                pipe.xadd(stream, {protocol.REPLY_STREAM_FIELD: data}, nomkstream=True)
            else:
                pipe.lpush(reply_to, data)
                pipe.expire(reply_to, ttl_s)
            if count_failure is not None:
                pipe.eval(COUNT_IF_STORED, 1, count_failure[0], protocol.PROBLEM_FIELD_VERSION, count_failure[1])
            appended = pipe.execute()[0]
            if stream is not None and appended is None:
                # no stream: the list, once (the count was made; a retry must not count again)
                stream, count_failure = None, None
                continue
            if replicated and _replica_wait.due(time.monotonic()):
                # until a replica has it (core.redis_url.ReplicaWait): a failover keeps it
                acked = client.execute_command("WAIT", 1, REPLICA_WAIT_MS)
                if not _replica_wait.record(acked, time.monotonic()):
                    log.warning("reply for job %s: no Redis replica confirmed it within %d ms", result.job_id,
                                REPLICA_WAIT_MS)
            if full_logged:
                log.warning("reply for job %s delivered once Redis had room", result.job_id)
            return
        except redis.exceptions.OutOfMemoryError as exc:
            if time.monotonic() + delay > full_deadline:
                log.error("reply for job %s lost: Redis stayed full past the job's deadline (%s)", result.job_id, exc)
                raise
            if not full_logged:
                log.error("reply for job %s: Redis is full (%s), keeping the reply and retrying", result.job_id, exc)
                full_logged = True
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if time.monotonic() + delay > deadline:
                log.error("reply for job %s lost: redis unreachable for %.0fs (%s)", result.job_id, retry_for_s, exc)
                raise
            log.warning("reply for job %s: redis unreachable (%s), retrying", result.job_id, exc)
        except SoftTimeLimitExceeded:  # raised into the push itself: try again
            log.warning("reply for job %s: soft time limit while delivering it; still trying", result.job_id)
        try:
            time.sleep(delay)
        except SoftTimeLimitExceeded:
            log.warning("reply for job %s: soft time limit while waiting to deliver it; still trying", result.job_id)
        delay = min(delay * 2, 2.0)
