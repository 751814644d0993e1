"""The client's reply reader: one thread that hands every reply from Redis to the job registry.

Replies come by the client's reply stream (``protocol.reply_stream_key``): workers append with
``XADD``, and the reader blocks in ``XREAD`` from the last entry it delivered, up to
``pop_batch`` entries at a time: one command per batch of replies. ``XREAD`` takes nothing: an
entry stays in the stream until the reader has delivered it and trims it (``XTRIM MINID``, at
most once a second, pipelined with a read), so a connection that dies mid-read loses nothing,
the next read starts again from the same entry. Delivery is at-least-once; the registry
(``producer.pending``) drops the duplicates. The client made the stream and keeps its expiry
with its claim (``_RENEW_CLAIM``); workers never create it (``NOMKSTREAM``).

Replies that do not come by the stream come by the client's reply list (``protocol.reply_key``):
from workers that predate the stream (a fleet being upgraded) or when the stream was gone. The
reader looks at the list once a second while it is empty, and at once again while it holds
replies: it reads the oldest where they are (``LRANGE`` of the right end; workers push to the
left) and trims exactly those once delivered (``LTRIM`` of as many from the right).

The same thread does the client's other periodic Redis work, so that no caller ever waits on it:
it checks deadlines, renews the client's claim on its id (workers drop the jobs of a client
without one), and sends the withdrawals of cancelled jobs.

What Redis lost is sent again, so that no job waits for its deadline for nothing: when the claim
was gone (Redis restarted without its data, a flush, the key evicted), workers dropped the jobs
they picked up meanwhile and the queue may be gone too, so every job still pending is
republished (``republish``); jobs of inline tests answered UNKNOWN_PROBLEM (the store lost the
tests) are handed to ``store_again``, once each. Neither costs a command on the common path.
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
from cpfleet.core.results import JobResult, result_from_dict
from cpfleet.producer.connection import connect
from cpfleet.producer.pending import JobRegistry, PendingJob

log = logging.getLogger("cpfleet.client")

# A cancel of at least this many jobs at once also sweeps them out of the queue.
_SWEEP_CANCELLED_FROM = 50

# Renew this client's claim on its id: extend it while it is ours, take it back if it expired
# (the reader was cut off from Redis for a TTL: 2), never take it from another client (0). While
# the claim is ours, extend the reply stream's expiry too (KEYS[2], ARGV[3] seconds), and make
# the stream again if it is gone (expired, or Redis lost it). Returns {code, 1 if the stream was
# made again}. The claim's EXPIRE comes first: a script's first write decides whether a full
# Redis refuses it, and EXPIRE needs no memory.
_RENEW_CLAIM = """
local v = redis.call('GET', KEYS[1])
local code = 0
if v == ARGV[1] then
  code = redis.call('EXPIRE', KEYS[1], ARGV[2])
elseif not v then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  code = 2
else
  return {0, 0}
end
if redis.call('EXPIRE', KEYS[2], ARGV[3]) == 1 then return {code, 0} end
redis.call('XADD', KEYS[2], 'MAXLEN', '0', '*', 'made', '1')
redis.call('EXPIRE', KEYS[2], ARGV[3])
return {code, 1}
"""


# The stream is trimmed of delivered replies at most this often (a trim is one command; what it
# leaves meanwhile is replies already delivered); the list is looked at this often while empty.
_TRIM_EVERY_S = 1.0
_LIST_LOOK_EVERY_S = 1.0


def _after(entry_id: bytes) -> str:
    """The smallest stream id after ``entry_id`` (``XTRIM MINID`` keeps ids >= it)."""
    ms, _, seq = entry_id.decode().partition("-")
    return f"{ms}-{int(seq or 0) + 1}"


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
        republish: Callable[[], object] | None = None,
        store_again: Callable[[list[tuple[PendingJob, JobResult]]], object] | None = None,
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
        self._republish = republish
        self._republish_due = False  # the claim was gone: every pending job is to be published again
        self._republish_warned = 0.0
        self._store_again = store_again
        self.unreachable_grace_s = unreachable_grace_s
        self._redis_url = redis_url
        self._block_s = 0.25
        # The reader blocks in XREAD; its socket timeout must outlast the block time. redis-py
        # must not retry its commands silently: a round's LTRIM must never be sent twice (the
        # second would remove replies not read yet), so the reader has to see every error.
        self._redis = connect(
            parse_redis_url(redis_url),
            socket_timeout=self._block_s + 10,
            socket_connect_timeout=5,
            socket_keepalive=True,
            retry=Retry(NoBackoff(), 0),
        )
        self.stream_key = protocol.reply_stream_key(client_id)
        self._last_id = b"0-0"  # the last stream entry delivered: the next read starts after it
        self._untrimmed: bytes | None = None  # delivered entries up to this id are still in the stream
        self._next_trim = 0.0
        self._next_list_look = 0.0
        # what the round just read and the loop is delivering: replies from the list's right
        # end (trimmed by the next round once delivered) and the stream's last entry
        self._round_list = 0
        self._round_last_id: bytes | None = None
        self._list_delivered = 0
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
                if self._republish_due:
                    self._republish_pending()
                batch = self._take_replies()
                backoff = 0.1
            except redis.RedisError as exc:
                error = exc
            for data in batch:  # delivered before a later round trims them off
                try:
                    self._deliver(data)
                except Exception:  # the reader must survive anything one reply can do
                    log.exception("reply reader: delivering a reply failed")
            self._store_lost_inline()
            if error is None:
                self._delivered_round()
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
                self._jobs.stats.reader_errors += 1
                if time.monotonic() - last_error > 5:
                    log.warning("reply reader: %s (retrying; pending jobs keep their deadlines)", error)
                    last_error = time.monotonic()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)

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
        """One round, one pipeline: trim the stream of what was delivered (at most once a
        second), trim and read the reply list (when it is due: see the module docstring), and
        read up to ``pop_batch`` stream entries after the last one delivered, blocking for
        ``_block_s`` when there are none. Returns the replies, oldest list replies first.

        The list's trim count is forgotten before it is sent: if the connection dies with the
        round, the trim may or may not have run, and sending it again could remove replies not
        read yet; instead the next round reads again whatever is left (duplicates are dropped).
        The stream's trim is by id, so sending it again is harmless. No command here needs
        memory: a full Redis (``maxmemory``) does not stop the reader.
        """
        now = time.monotonic()
        pipe = self._redis.pipeline(transaction=False)
        trimming = self._untrimmed if now >= self._next_trim else None
        if trimming is not None:
            pipe.xtrim(self.stream_key, minid=_after(trimming), approximate=False)
            self._next_trim = now + _TRIM_EVERY_S
        list_trim, self._list_delivered = self._list_delivered, 0
        look = list_trim > 0 or now >= self._next_list_look
        if list_trim:
            pipe.ltrim(self.reply_key, 0, -list_trim - 1)
        if look:
            pipe.lrange(self.reply_key, -self.pop_batch, -1)
            self._next_list_look = now + _LIST_LOOK_EVERY_S
        # no blocking while the list had replies: it may hold more, to be read right away
        block = None if list_trim else int(self._block_s * 1000)
        pipe.xread({self.stream_key: self._last_id}, count=self.pop_batch, block=block)
        answers = pipe.execute()
        if trimming is not None and self._untrimmed == trimming:
            self._untrimmed = None
        listed = answers[-2] if look else []
        batch = list(reversed(listed)) if isinstance(listed, list) else []
        self._round_list = len(batch)
        self._round_last_id = None
        for _stream, entries in answers[-1] or []:
            for entry_id, fields in entries:
                data = fields.get(protocol.REPLY_STREAM_FIELD.encode())
                if data is not None:
                    batch.append(data)
                self._round_last_id = entry_id
        return batch

    def _delivered_round(self) -> None:
        """The round's replies were delivered: the list's go at the next round, the stream's
        at the next trim, and the next read starts after them."""
        self._list_delivered = self._round_list
        if self._round_last_id is not None:
            self._last_id = self._untrimmed = self._round_last_id
        self._round_list, self._round_last_id = 0, None

    def _deliver(self, data: bytes) -> None:
        try:
            d = protocol.decode_reply(data)
            result = result_from_dict(d)
        except (ProtocolError, KeyError, ValueError, TypeError) as exc:
            self._jobs.stats.malformed_replies += 1
            log.error("dropping malformed reply on %s: %s", self.reply_key, exc)
            return
        self._jobs.resolve(result.job_id, result)

    def _republish_pending(self) -> None:
        """Publish every pending job again (the claim was gone); on failure, again next round."""
        if self._republish is None:
            self._republish_due = False
            return
        try:
            self._republish()
        except Exception as exc:  # BrokerUnavailable, BrokerFull: Redis refuses for now
            if time.monotonic() - self._republish_warned > 5:
                self._republish_warned = time.monotonic()
                log.warning("could not republish the pending jobs Redis lost yet (retrying): %s", exc)
            return
        self._republish_due = False

    def _store_lost_inline(self) -> None:
        """Hand the jobs whose inline tests the store lost to ``store_again`` (it resolves
        them or republishes them); without it, they resolve with their UNKNOWN_PROBLEM reply."""
        lost = self._jobs.take_lost_inline()
        if not lost:
            return
        try:
            if self._store_again is not None:
                self._store_again(lost)
                return
        except Exception:  # never strand a job: it gets the reply it came with
            log.exception("reply reader: storing lost inline tests again failed")
        for entry, result in lost:
            self._jobs.finish(entry, result)

    # --- the client's other Redis chores ---------------------------------------------------

    def _renew_claim(self) -> None:
        """Keep this client's exclusive hold on its client_id."""
        ok, made = self._redis.eval(_RENEW_CLAIM, 2, self.claim_key, self.stream_key, self._claim_token,
                                    self._claim_ttl_s, protocol.reply_stream_ttl(self.reply_ttl))
        if made:
            # a new stream: its ids start afresh (replies meanwhile went to the reply list)
            self._last_id, self._untrimmed = b"0-0", None
        if not ok:
            log.error("client_id %r was claimed by another client: replies may be lost to it", self.client_id)
        elif ok == 2:
            # Workers drop the jobs of a client without a claim, and a Redis that lost the claim
            # may have lost the queue with it: every job still pending is published again (a
            # fresh wire id each; the first reply of any attempt wins), before this round's read.
            self._republish_due = self._republish is not None
            log.warning(
                "client_id %r: the claim was gone (the reader cut off from Redis for over %ds, or Redis lost "
                "it: restarted without its data, flushed, the key evicted) and was taken back; republishing the %d job(s) still pending, "
                "which a worker may have dropped meanwhile",
                self.client_id,
                self._claim_ttl_s,
                self._jobs.in_flight,
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
