"""Pushing one result to its job's reply list: LPUSH + EXPIRE in one pipeline, retried while
Redis is briefly away (a restart mid-batch) so a finished job's work is not thrown away."""

from __future__ import annotations

import logging
import time

import redis

from cpfleet.core import protocol
from cpfleet.core.results import JobResult

log = logging.getLogger("cpfleet.replies")


def push_reply(
    client: redis.Redis, reply_to: str, result: JobResult, ttl_s: int, retry_for_s: float = 30.0
) -> None:
    """Deliver ``result``; raises the last redis error if Redis stays unreachable for ``retry_for_s``."""
    data = protocol.encode_reply(result.to_dict())
    deadline = time.monotonic() + retry_for_s
    delay = 0.05
    while True:
        try:
            pipe = client.pipeline(transaction=True)
            pipe.lpush(reply_to, data)
            pipe.expire(reply_to, ttl_s)
            pipe.execute()
            return
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if time.monotonic() + delay > deadline:
                log.error("reply for job %s lost: redis unreachable for %.0fs (%s)", result.job_id, retry_for_s, exc)
                raise
            log.warning("reply for job %s: redis unreachable (%s), retrying", result.job_id, exc)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
