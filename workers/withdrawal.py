"""Dropping withdrawn jobs before anything of them runs.

A client withdraws its queued jobs by cancelling them (their wire ids go into
``protocol.cancelled_key``) or by going away: ``close()`` releases its claim on its client id, a
crashed client's claim expires. A job whose message names a client that no longer holds the claim
token it was sent under, or whose wire id is in that client's cancelled set, is dropped unjudged
and unanswered (nobody waits for the answer: the client resolved or abandoned the future). One
round trip per job, read-only, so it works while Redis is full. Messages without a client token
(older clients) always run.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from cpfleet.core import protocol
from cpfleet.core.protocol import JobMessage

log = logging.getLogger("cpfleet.worker")

OWNER_GONE = "client gone"
CANCELLED = "cancelled"

_CHECK = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 1 end
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then return 2 end
return 0
"""

_script: Any = None  # a redis-py Script (EVALSHA, falling back to EVAL), run on the caller's client


def withdrawn(client: redis.Redis, msg: JobMessage) -> str | None:
    """Why ``msg`` must not run (``OWNER_GONE`` or ``CANCELLED``), or None to run it.

    A Redis error answers None: when the check cannot be made the job runs, as it always did;
    withdrawing is about not wasting work, never about what a job is paid.
    """
    if msg.client_id is None or msg.client_token is None:
        return None
    global _script
    if _script is None:
        _script = client.register_script(_CHECK)
    keys = [protocol.client_claim_key(msg.client_id), protocol.cancelled_key(msg.client_id)]
    try:
        code = _script(keys=keys, args=[msg.client_token, msg.job_id], client=client)
    except redis.RedisError as exc:
        log.warning("job %s: could not check whether it was withdrawn (%s): running it", msg.job_id, exc)
        return None
    if code == 1:
        return OWNER_GONE
    if code == 2:
        return CANCELLED
    return None
