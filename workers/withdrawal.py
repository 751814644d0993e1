"""Dropping withdrawn jobs before anything of them runs.

A client withdraws its queued jobs by cancelling them (their wire ids go into
``protocol.cancelled_key``) or by going away: ``close()`` releases its claim on its client id, a
crashed client's claim expires. A job whose message names a client that no longer holds the claim
token it was sent under, or whose wire id is in that client's cancelled set, is dropped unjudged
and unanswered (nobody waits for the answer: the client resolved or abandoned the future). One
round trip per job, read-only, so it works while Redis is full. Messages without a client token
(older clients) always run. The same round trip reads the job's problem version, which the
problem cache would otherwise ask for in a round trip of its own (``admit``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import redis

from cpfleet.core import protocol
from cpfleet.core.protocol import JobMessage
from cpfleet.workers.failorder import parse_counts

log = logging.getLogger("cpfleet.worker")

OWNER_GONE = "client gone"
CANCELLED = "cancelled"

# KEYS: claim, cancelled set, problem hash, the problem's fail counts; ARGV: claim token, wire
# id, version field, "1" to read the fail counts. Answers {code, problem version or nil, the fail
# counts as a flat field/value list}; Lua's false (a missing field) arrives as nil. The counts
# are read only for a job that runs.
_CHECK = """
local version = redis.call('HGET', KEYS[3], ARGV[3])
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {1, version} end
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then return {2, version} end
if ARGV[4] == '1' then return {0, version, redis.call('HGETALL', KEYS[4])} end
return {0, version}
"""


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether a job may run, and its problem's stored version if it was read on the way."""

    withdrawn: str | None  # OWNER_GONE, CANCELLED, or None: run it
    version_read: bool = False  # True: ``version`` is what the store held (None: not stored)
    version: str | None = None
    # how often each hidden test ended a job ({file index: count}, see workers.failorder);
    # empty when not read
    fail_counts: dict[int, int] = field(default_factory=dict)


_script: Any = None  # a redis-py Script (EVALSHA, falling back to EVAL), run on the caller's client


def admit(client: redis.Redis, msg: JobMessage, read_fail_counts: bool = False) -> Admission:
    """Whether ``msg`` runs, and (same round trip) its problem's stored version and, when
    ``read_fail_counts``, its hidden tests' fail counts.

    A Redis error admits the job with the version unread: when the check cannot be made the
    job runs, as it always did (withdrawing is about not wasting work, never about what a job
    is paid), and the problem lookup asks Redis itself, failing as it would have.
    """
    if msg.client_id is None or msg.client_token is None:
        return Admission(None)
    global _script
    if _script is None:
        _script = client.register_script(_CHECK)
    keys = [protocol.client_claim_key(msg.client_id), protocol.cancelled_key(msg.client_id),
            protocol.problem_key(msg.problem_id), protocol.fail_counts_key(msg.problem_id)]
    args = [msg.client_token, msg.job_id, protocol.PROBLEM_FIELD_VERSION, "1" if read_fail_counts else "0"]
    try:
        answer = _script(keys=keys, args=args, client=client)
    except redis.RedisError as exc:
        log.warning("job %s: could not check whether it was withdrawn (%s): running it", msg.job_id, exc)
        return Admission(None)
    code, version = answer[0], answer[1]
    why = OWNER_GONE if code == 1 else CANCELLED if code == 2 else None
    text = version.decode() if isinstance(version, bytes) else version if isinstance(version, str) else None
    counts = parse_counts(answer[2]) if len(answer) > 2 else {}
    return Admission(why, True, text, counts)


# KEYS: claim, cancelled set; ARGV: claim token, wire id. A run job has no problem to read.
_CHECK_RUN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 1 end
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then return 2 end
return 0
"""
_run_script: Any = None


def admit_run(client: redis.Redis, msg: protocol.RunMessage) -> Admission:
    """``admit`` for a run job: the same claim and cancel check in one read-only round trip, and
    the same rule that a job runs when the check cannot be made."""
    if msg.client_id is None or msg.client_token is None:
        return Admission(None)
    global _run_script
    if _run_script is None:
        _run_script = client.register_script(_CHECK_RUN)
    keys = [protocol.client_claim_key(msg.client_id), protocol.cancelled_key(msg.client_id)]
    try:
        code = _run_script(keys=keys, args=[msg.client_token, msg.job_id], client=client)
    except redis.RedisError as exc:
        log.warning("run job %s: could not check whether it was withdrawn (%s): running it", msg.job_id, exc)
        return Admission(None)
    return Admission(OWNER_GONE if code == 1 else CANCELLED if code == 2 else None)
