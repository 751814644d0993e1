"""Dropping withdrawn jobs before anything of them runs.

A client withdraws its queued jobs by cancelling them (a key per cancelled wire id:
``protocol.cancelled_job_key``) or by going away: ``close()`` releases its claim on its client id, a
crashed client's claim expires. A job whose message names a client that no longer holds the claim
token it was sent under, or that its client cancelled, is dropped unjudged
and unanswered (nobody waits for the answer: the client resolved or abandoned the future). One
round trip per job, read-only, so it works while Redis is full. Messages without a client token
(older clients) always run. The same round trip reads the job's problem version and fail counts,
and probes the result cache, which would otherwise cost round trips of their own (``admit``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import redis

from cpfleet.core import protocol
from cpfleet.core.protocol import JobMessage
from cpfleet.workers.failorder import parse_counts

log = logging.getLogger("cpfleet.worker")

OWNER_GONE = "client gone"
CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether a job may run, and what was read for it on the way."""

    withdrawn: str | None  # OWNER_GONE, CANCELLED, or None: run it
    version_read: bool = False  # True: ``version`` is what the store held (None: not stored)
    version: str | None = None
    # how often each hidden test ended a job ({file index: count}, see workers.failorder);
    # empty when not read
    fail_counts: dict[int, int] = field(default_factory=dict)
    # the result cache entry read in the same round trip (``cache_probe``): its key, and its
    # bytes (None: no entry); ``cache_key`` None when nothing was probed
    cache_key: str | None = None
    cache_blob: bytes | None = None


def admit(client: redis.Redis, msg: JobMessage, count_tests: int = 0,
          cache_probe: str | None = None) -> Admission:
    """Whether ``msg`` runs, and (same round trip) its problem's stored version, the fail counts
    of its first ``count_tests`` hidden tests, and the result cache entry ``cache_probe``.

    One pipeline of two plain reads, no script (a script costs one command more than the reads
    it runs): ``HMGET`` of the problem's hash, its version and its count fields
    (``protocol.fail_count_field``; the caller knows how many tests from its copy of the
    problem, and asks for none when it holds no copy or the job does not run in the learnt
    order), and one ``MGET`` of the client's claim and the job's cancel key (for a message that
    names its client) and of ``cache_probe``. The probe is the cache key computed from this
    process's copy of the problem before its version is known: the caller uses the entry only
    if the key computed from the version read here is the same key.

    The reads are not one snapshot: a cancel or a reload that lands between them is the same as
    one that lands just after the check, which the check never excluded.

    A Redis error admits the job with the version unread: when the check cannot be made the
    job runs, as it always did (withdrawing is about not wasting work, never about what a job
    is paid), and the problem lookup asks Redis itself, failing as it would have.
    """
    claimed = msg.client_id is not None and msg.client_token is not None
    strings = []  # read with one MGET: the claim and the job's cancel key, the cache probe
    if claimed:
        assert msg.client_id is not None
        strings += [protocol.client_claim_key(msg.client_id), protocol.cancelled_job_key(msg.client_id, msg.job_id)]
    if cache_probe is not None:
        strings.append(cache_probe)
    counted = min(count_tests, protocol.MAX_COUNTED_TESTS)
    fields = [protocol.PROBLEM_FIELD_VERSION] + [protocol.fail_count_field(i) for i in range(counted)]
    try:
        pipe = client.pipeline(transaction=False)
        pipe.hmget(protocol.problem_key(msg.problem_id), fields)
        if strings:
            pipe.mget(strings)
        answers = pipe.execute()
    except redis.RedisError as exc:
        log.warning("job %s: could not check whether it was withdrawn (%s): running it", msg.job_id, exc)
        return Admission(None)
    found = answers[1] if strings else []
    if claimed:
        holder, cancelled = found[0], found[1]
        token = holder.decode() if isinstance(holder, bytes) else holder
        if token != msg.client_token:
            return Admission(OWNER_GONE)
        if cancelled:
            return Admission(CANCELLED)
    version, *values = answers[0]
    counts = parse_counts([x for i, v in enumerate(values) if v is not None for x in (i, v)])
    blob = found[-1] if cache_probe is not None else None
    text = version.decode() if isinstance(version, bytes) else version if isinstance(version, str) else None
    return Admission(None, True, text, counts, cache_probe, blob if isinstance(blob, bytes) else None)


def admit_run(client: redis.Redis, msg: protocol.RunMessage) -> Admission:
    """``admit`` for a run job: the same claim and cancel reads in one round trip (a run job
    has no problem to read), and the same rule that a job runs when the check cannot be made."""
    if msg.client_id is None or msg.client_token is None:
        return Admission(None)
    try:
        holder, cancelled = client.mget(protocol.client_claim_key(msg.client_id),
                                        protocol.cancelled_job_key(msg.client_id, msg.job_id))
    except redis.RedisError as exc:
        log.warning("run job %s: could not check whether it was withdrawn (%s): running it", msg.job_id, exc)
        return Admission(None)
    token = holder.decode() if isinstance(holder, bytes) else holder
    return Admission(OWNER_GONE if token != msg.client_token else CANCELLED if cancelled else None)
