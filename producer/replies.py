"""The client's reply reader: one thread that hands every reply from Redis to the job registry.

Workers only ever push to the left of the client's reply list, and only this reader removes
from its right end; so the reader reads the oldest replies where they are (``LRANGE`` of the
right end) and removes exactly those, once they are delivered (``LTRIM`` of as many from the
right). A reply never leaves Redis before its future has it: a connection that dies mid-read
loses nothing, the next round reads the same replies again. Delivery is at-least-once; the
registry (``producer.pending``) drops the duplicates.

To wait for a reply without taking it, the round blocks in ``BLMOVE`` from the list to itself
(right to left: it returns as soon as the list is not empty, and only rotates the oldest reply
to the other end, where a later round reads it). One round is one pipeline, one round trip:
``LTRIM`` of what the previous round delivered, ``BLMOVE``, ``LRANGE`` of up to ``pop_batch``:
3 commands per batch of replies, against 4 to 6 for the processing list this replaced (BLMOVE
to it, a script's RPOP, LPUSH and EXPIRE for more, DEL once delivered).

The same thread does the client's other periodic Redis work, so that no caller ever waits on it:
it checks deadlines, renews the client's claim on its id (workers drop the jobs of a client
without one), and sends the withdrawals of cancelled jobs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from cpfleet.core import protocol
from cpfleet.core.protocol import ProtocolError
from cpfleet.core.redis_url import mask_password, parse_redis_url
from cpfleet.core.results import result_from_dict
from cpfleet.producer.connection import connect
from cpfleet.producer.pending import JobRegistry

log = logging.getLogger("cpfleet.client")

# A cancel of at least this many jobs at once also sweeps them out of the queue.
_SWEEP_CANCELLED_FROM = 50

# Renew this client's claim on its id: extend it while it is ours, take it back if it expired
# (the reader was cut off from Redis for a TTL: returns 2), never take it from another client (0).
_RENEW_CLAIM = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 2 end
return 0
"""


class ReplyReader:
    """The reader thread of one client: ``start()`` once, ``stop()`` then ``close()`` at the end.

    Its Redis keys are the client's (``core.protocol``, from ``client_id``); ``claim_token`` is
    what the client's claim on its id holds. ``commands`` is the client's connection for ordinary
    commands (the withdrawals go out on it); ``sweep`` takes cancelled jobs out of the queue when
    many are withdrawn at once.
    """

    def __init__(
        self,
        redis_url: str,
        *,
        client_id: str,
        claim_token: str,
        pop_batch: int,
        reply_ttl: int,
        jobs: JobRegistry,
        commands: redis.Redis,
        sweep: Callable[[], object],
        unreachable_grace_s: float | None = None,
    ) -> None:
        self.client_id = client_id
        self.reply_key = protocol.reply_key(client_id)
        self.claim_key = protocol.client_claim_key(client_id)
        self._claim_token = claim_token
        self._claim_ttl_s = protocol.CLIENT_CLAIM_TTL_S
        self.pop_batch = pop_batch
        self.reply_ttl = reply_ttl
        self._jobs = jobs
        self._commands = commands
        self._sweep = sweep
        self.unreachable_grace_s = unreachable_grace_s
        self._redis_url = redis_url
        self._block_s = 0.25
        # The reader blocks in BLMOVE; its socket timeout must outlast the block time. redis-py
        # must not retry its commands silently: a round's LTRIM must never be sent twice (the
        # second would remove replies not read yet), so the reader has to see every error.
        self._redis = connect(
            parse_redis_url(redis_url),
            socket_timeout=self._block_s + 10,
            socket_connect_timeout=5,
            socket_keepalive=True,
            retry=Retry(NoBackoff(), 0),
        )
        # replies at the right end of the reply list that were read and delivered, to be trimmed
        # by the next round
        self._delivered = 0
        self.broker_full = False  # the reader saw Redis refuse BLMOVE for lack of memory
        self._broker_full_since = 0.0
        self._withdraw_warned = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read_loop, name=f"cpfleet-reader-{client_id[:8]}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (it finishes the round it is in: at most one block time plus a delivery)."""
        self._stop.set()
        self._thread.join(timeout=timeout)

    def close(self) -> None:
        """Close the reader's connection (after ``stop()``)."""
        self._redis.close()

    # --- the loop --------------------------------------------------------------------------

    def _read_loop(self) -> None:
        backoff = 0.1
        last_error = 0.0
        renew_every = self._claim_ttl_s / 4
        next_renew = time.monotonic() + renew_every
        unreachable_since: float | None = None  # first failed round of the current outage
        while not self._stop.is_set():
            try:
                self._jobs.expire()
            except Exception:  # never let a bug here stop every future from resolving
                log.exception("reply reader: deadline check failed")
            self._flush_withdrawals()
            batch: list[Any] = []
            error: redis.RedisError | None = None
            try:
                if time.monotonic() >= next_renew:
                    self._renew_claim()
                    next_renew = time.monotonic() + renew_every
                batch = self._take_replies()
                backoff = 0.1
            except redis.RedisError as exc:
                error = exc
            for data in batch:  # delivered before the next round trims them off the list
                try:
                    self._deliver(data)
                except Exception:  # the reader must survive anything one reply can do
                    log.exception("reply reader: delivering a reply failed")
            self._delivered = len(batch)
            if error is None or not isinstance(error, (redis.ConnectionError, redis.TimeoutError)):
                unreachable_since = None
            elif unreachable_since is None:
                unreachable_since = time.monotonic()
            elif self._give_up(unreachable_since, error):
                unreachable_since = time.monotonic()  # jobs submitted from now on get a grace of their own
            if error is not None:
                # Renew the claim first thing after a reconnect: a Redis that restarted without
                # its data lost it, and workers drop the jobs of a client without a claim.
                next_renew = 0.0
                if self.broker_full and not isinstance(error, redis.exceptions.OutOfMemoryError):
                    self.broker_full = False  # retry BLMOVE after a reconnect
                self._jobs.stats.reader_errors += 1
                if time.monotonic() - last_error > 5:
                    log.warning("reply reader: %s (retrying; pending jobs keep their deadlines)", error)
                    last_error = time.monotonic()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
            elif self.broker_full and batch:
                self.broker_full = False  # memory was freed by draining: try blocking again

    def _give_up(self, since: float, error: redis.RedisError) -> bool:
        """Fail the pending futures with BrokerUnavailable once Redis has been unreachable for
        the grace (None: never; each job then waits for its deadline). True if the grace ran out."""
        grace = self.unreachable_grace_s
        if grace is None or time.monotonic() - since < grace:
            return False
        failed = self._jobs.fail_unreachable(
            f"Redis at {mask_password(self._redis_url)} unreachable for {grace:g}s: {error}"
        )
        if failed:
            log.error("reply reader: Redis unreachable for %gs: failed %d pending job(s) with BrokerUnavailable",
                      grace, failed)
        return True

    def _take_replies(self) -> list[Any]:
        """One round: trim what the previous round delivered, wait for a reply, and read up to
        ``pop_batch`` of the oldest (returned oldest first; they stay in the list until the
        next round trims them, after their delivery).

        The trim count is forgotten before it is sent: if the connection dies with the round,
        the trim may or may not have run, and sending it again could remove replies not read
        yet; instead the next round reads again whatever is left (duplicates are dropped).
        BLMOVE is refused while Redis is over ``maxmemory`` (it may grow memory): then the round
        is LTRIM and LRANGE alone (both allowed), polling.
        """
        trim, self._delivered = self._delivered, 0
        if self.broker_full and time.monotonic() - self._broker_full_since > 5.0:
            self.broker_full = False  # memory may have been freed elsewhere: try blocking again
        pipe = self._redis.pipeline(transaction=False)
        if trim:
            pipe.ltrim(self.reply_key, 0, -trim - 1)
        if not self.broker_full:
            pipe.blmove(self.reply_key, self.reply_key, self._block_s, src="RIGHT", dest="LEFT")
        pipe.lrange(self.reply_key, -self.pop_batch, -1)
        answers = pipe.execute(raise_on_error=False)
        for answer in answers[:-1]:
            if isinstance(answer, redis.exceptions.OutOfMemoryError):
                self.broker_full, self._broker_full_since = True, time.monotonic()
            elif isinstance(answer, Exception):
                raise answer
        items = answers[-1]
        if isinstance(items, Exception):
            raise items
        batch = list(reversed(items)) if isinstance(items, list) else []
        if not batch and self.broker_full:
            self._stop.wait(self._block_s)  # polling while full: nothing to block on
        return batch

    def _deliver(self, data: bytes) -> None:
        try:
            d = protocol.decode_reply(data)
            result = result_from_dict(d)
        except (ProtocolError, KeyError, ValueError, TypeError) as exc:
            self._jobs.stats.malformed_replies += 1
            log.error("dropping malformed reply on %s: %s", self.reply_key, exc)
            return
        self._jobs.resolve(result.job_id, result)

    # --- the client's other Redis chores ---------------------------------------------------

    def _renew_claim(self) -> None:
        """Keep this client's exclusive hold on its client_id."""
        ok = self._redis.eval(_RENEW_CLAIM, 1, self.claim_key, self._claim_token, self._claim_ttl_s)
        if not ok:
            log.error("client_id %r was claimed by another client: replies may be lost to it", self.client_id)
        elif ok == 2:
            # Workers drop the jobs of a client without a claim: any that one picked up while it
            # had lapsed resolve INTERNAL at their deadline (or are resubmitted, if enabled).
            log.warning(
                "client_id %r: the claim had lapsed (reader cut off from Redis for %ds) and was taken back; "
                "jobs started meanwhile were dropped by the workers",
                self.client_id,
                self._claim_ttl_s,
            )

    def _flush_withdrawals(self) -> None:
        """Write a cancel key for each cancelled wire id (``protocol.cancelled_job_key``), kept
        until the last of their deadlines (a worker drops any job past its deadline anyway).
        Best effort: while Redis refuses, the ids wait for the next try; a job that a worker
        starts meanwhile runs, and its reply is ignored as a duplicate. Setting a key again is
        harmless, so a batch that failed halfway is simply sent again."""
        wire_ids, ttl = self._jobs.take_withdrawals()
        if not wire_ids:
            return
        try:
            for start in range(0, len(wire_ids), 1000):
                pipe = self._commands.pipeline(transaction=False)
                for wire_id in wire_ids[start : start + 1000]:
                    pipe.set(protocol.cancelled_job_key(self.client_id, wire_id), b"1", ex=max(ttl, 60))
                pipe.execute()
            if len(wire_ids) >= _SWEEP_CANCELLED_FROM:
                # Many at once (a trainer dropping a step's jobs): take them out of the queue now
                # rather than one Celery message at a time at the workers.
                self._sweep()
        except redis.RedisError as exc:
            self._jobs.requeue_withdrawals(wire_ids)
            if time.monotonic() - self._withdraw_warned > 5:
                self._withdraw_warned = time.monotonic()
                log.warning("could not withdraw %d cancelled job(s) yet (retrying): %s", len(wire_ids), exc)
