"""The client's registry of jobs in flight: which reply resolves which future, and by when.

Every publish attempt of a job is registered under its own wire id before it is published, so a
reply can never arrive for an attempt the client does not know. A job is resolved exactly once
(by its first reply, by its deadline, by a cancel, or by the client closing) under one
Condition lock, which also bounds the jobs in flight (``max_in_flight``: submitters wait on it
for room) and guards the deadline heap. A missed deadline becomes an INTERNAL result with
``infra_error`` set (optionally after one resubmit): never a reward of 0 the model did not earn.

The registry does no I/O of its own, so that ``Future.cancel()`` never waits on Redis (asyncio
calls it on its event loop when an awaiting task is cancelled): cancelled wire ids wait here for
the reply reader (``producer.replies``) to send, and a resubmit is published through the
callable the client hands over.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cpfleet.core import protocol
from cpfleet.core.errors import BrokerUnavailable, ClientClosed, FleetBusy
from cpfleet.core.protocol import JobMessage, RunMessage
from cpfleet.core.results import JobResult, JobStamp, RunJobResult
from cpfleet.core.verdict import Verdict

log = logging.getLogger("cpfleet.client")


@dataclass(slots=True)
class FleetStats:
    submitted: int = 0
    resolved: int = 0
    duplicates: int = 0  # replies for jobs already resolved (redelivery, resubmit, late reply)
    malformed_replies: int = 0
    deadline_misses: int = 0  # jobs answered INTERNAL by this client's deadline
    resubmitted: int = 0
    reader_errors: int = 0  # Redis errors seen by the reader (it keeps trying)
    cancelled: int = 0  # jobs withdrawn by Future.cancel() / cancel_many()
    broker_lost: int = 0  # jobs failed with BrokerUnavailable: Redis unreachable for the client's grace
    republished: int = 0  # attempts published again because Redis lost them (claim gone, inline tests lost)


@dataclass(slots=True)
class JobSpec:
    """One validated job, not yet stamped nor registered."""

    job_id: str  # the caller's id (or a generated one): what the caller sees in the result
    problem_id: str
    completion: str | bytes
    reward_shape: str
    mode: str
    timeout: float
    language: str | None = None
    # the inline tests ``problem_id`` was stored from: stored again if the store lost them
    tests: Any = None


@dataclass(slots=True)
class RunSpec:
    """One validated run job, not yet stamped nor registered: ``template`` is its message
    without the per-attempt and per-client fields (wire id, reply list, stamps, claim)."""

    job_id: str  # the caller's id
    template: RunMessage
    timeout: float


@dataclass(slots=True)
class PendingJob:
    future: cf.Future[Any]  # resolves with a JobResult (judge jobs) or a RunJobResult (run jobs)
    job_id: str  # the caller's id
    msg: JobMessage | RunMessage  # the latest attempt; msg.job_id is its wire id
    deadline: float  # monotonic
    timeout: float
    resubmitted: bool = False
    done: bool = False
    attempts: list[str] = field(default_factory=list)  # wire ids (also the task ids) published
    tests: Any = None  # JobSpec.tests: the inline tests to store again if the store lost them
    # its inline tests were stored again after an UNKNOWN_PROBLEM (once only): attempts[:restored_at]
    # predate that, so their UNKNOWN_PROBLEM replies are stale (0: not restored)
    restored_at: int = 0


class JobFuture(cf.Future[Any]):
    """A job's future. ``cancel()`` withdraws the job: the future becomes cancelled (``result()``
    raises CancelledError, so no reward can come of it), and a worker that has not started the
    job yet drops it unjudged. A worker that already started it finishes; its reply is ignored.
    Returns False once the result is in, True when cancelled (again: as concurrent.futures)."""

    def __init__(self, jobs: JobRegistry) -> None:
        super().__init__()
        self._jobs = jobs
        self._entry: PendingJob | None = None

    def cancel(self) -> bool:
        entry = self._entry
        if entry is None:
            return super().cancel()
        return self._jobs.cancel([entry]) == 1 or self.cancelled()

    def _mark_cancelled(self) -> bool:
        return super().cancel()


class JobRegistry:
    """The unresolved jobs of one client, their deadlines and the cancels still to send. Thread-safe.

    ``reply_to`` .. ``client_token`` are what every message of this client carries; ``resubmit``
    (None: no resubmits) publishes one more attempt of a job that missed its deadline.
    """

    def __init__(
        self,
        *,
        reply_to: str,
        reply_stream: str | None = None,
        reply_ttl: int,
        use_cache: bool,
        client_id: str,
        client_token: str,
        max_in_flight: int,
        resubmit: Callable[[JobMessage | RunMessage], None] | None = None,
    ) -> None:
        self._reply_to = reply_to
        self._reply_stream = reply_stream
        self._reply_ttl = reply_ttl
        self._use_cache = use_cache
        self._client_id = client_id
        self._client_token = client_token
        self.max_in_flight = max_in_flight
        self._publish_resubmit = resubmit
        self.stats = FleetStats()
        self.lock = threading.Condition()
        self.pending: dict[str, PendingJob] = {}  # wire id -> entry (every attempt of an unresolved job)
        self.live = 0  # unresolved jobs (what max_in_flight bounds)
        self.deadlines: list[tuple[float, int, str]] = []  # (monotonic deadline, seq, wire id)
        self._seq = itertools.count()
        self.closed = False
        self._cancel_ttl_until = 0.0  # epoch seconds the cancel keys must live until
        self._to_withdraw: list[str] = []  # cancelled wire ids the reader has yet to send
        # jobs of inline tests answered UNKNOWN_PROBLEM, with that answer: the reader stores the
        # tests again and republishes them (FleetClient), once
        self._lost_inline: list[tuple[PendingJob, JobResult]] = []

    @property
    def in_flight(self) -> int:
        """Jobs registered and not yet resolved."""
        with self.lock:
            return self.live

    # --- registering -----------------------------------------------------------------------

    def register(self, specs: Sequence[JobSpec | RunSpec], wait_for_room: float | None) -> list[PendingJob]:
        """Wait for room, then stamp and register ``specs``, all under one hold of the lock (so
        concurrent submitters never overshoot ``max_in_flight``, and nothing registers after
        ``close()``)."""
        end = None if wait_for_room is None else time.monotonic() + wait_for_room
        need = len(specs)  # <= max_in_flight: submit_many's chunks are no larger
        with self.lock:
            while True:
                if self.closed:
                    raise ClientClosed("FleetClient closed while submitting")
                if self.live + need <= self.max_in_flight:
                    break
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise FleetBusy(f"{self.live} jobs in flight (max_in_flight={self.max_in_flight})")
                self.lock.wait(timeout=left if left is not None else 1.0)
            now, mono = protocol.now(), time.monotonic()
            entries = []
            for s in specs:
                wire_id = new_wire_id(s.job_id)
                msg = self._message(s, wire_id, now)
                # The future stays PENDING (not RUNNING) until resolved, so that cancel() works.
                fut = JobFuture(self)
                entry = PendingJob(fut, s.job_id, msg, mono + s.timeout, s.timeout, attempts=[wire_id],
                                   tests=s.tests if isinstance(s, JobSpec) else None)
                fut._entry = entry
                self.pending[wire_id] = entry
                heapq.heappush(self.deadlines, (entry.deadline, next(self._seq), wire_id))
                entries.append(entry)
            self.live += len(entries)
            self.stats.submitted += len(entries)
            self._compact_deadlines()
        return entries

    def _message(self, s: JobSpec | RunSpec, wire_id: str, now: float) -> JobMessage | RunMessage:
        """The message of one publish attempt of ``s``, stamped now, with this client's fields."""
        if isinstance(s, RunSpec):
            return dataclasses.replace(
                s.template, job_id=wire_id, reply_to=self._reply_to, submitted_at=now, deadline=now + s.timeout,
                reply_ttl=self._reply_ttl, client_id=self._client_id, client_token=self._client_token,
                reply_stream=self._reply_stream,
            )
        return JobMessage(
            job_id=wire_id,
            problem_id=s.problem_id,
            completion=s.completion,
            reply_to=self._reply_to,
            reward_shape=s.reward_shape,
            mode=s.mode,
            submitted_at=now,
            deadline=now + s.timeout,
            reply_ttl=self._reply_ttl,
            use_cache=self._use_cache,
            language=s.language,
            client_id=self._client_id,
            client_token=self._client_token,
            reply_stream=self._reply_stream,
        )

    def restamp(self, entries: Sequence[PendingJob]) -> None:
        """Stamp registered jobs again just before their push, so that a job's ``submitted_at``
        (its queue wait) and deadline count from its publication, not from its registration."""
        now, mono = protocol.now(), time.monotonic()
        with self.lock:
            for e in entries:
                if e.done:  # close() resolved it meanwhile: its push fails with ClientClosed
                    continue
                e.msg = dataclasses.replace(e.msg, submitted_at=now, deadline=now + e.timeout)
                e.deadline = mono + e.timeout  # the deadline pushed at registration is now stale
                heapq.heappush(self.deadlines, (e.deadline, next(self._seq), e.msg.job_id))

    def unregister(self, entries: Sequence[PendingJob]) -> None:
        """Forget entries whose batch was not published (their futures are never handed out)."""
        with self.lock:
            for e in entries:
                if e.done:  # close() resolved it meanwhile
                    continue
                e.done = True
                for wire_id in e.attempts:
                    self.pending.pop(wire_id, None)
                self.live -= 1
                self.stats.submitted -= 1
            self.lock.notify_all()

    def _compact_deadlines(self) -> None:
        """Drop heap entries of resolved jobs once they outnumber the live ones (lock held)."""
        if len(self.deadlines) > 2 * len(self.pending) + 1024:
            self.deadlines = [d for d in self.deadlines if d[2] in self.pending]
            heapq.heapify(self.deadlines)

    # --- cancelling ------------------------------------------------------------------------

    def cancel(self, entries: Sequence[PendingJob]) -> int:
        """Resolve unresolved ``entries`` as cancelled and queue their withdrawal for the workers."""
        won: list[PendingJob] = []
        with self.lock:
            for entry in entries:
                if entry.done:
                    continue
                entry.done = True
                for wire_id in entry.attempts:
                    self.pending.pop(wire_id, None)
                self.live -= 1
                self.stats.cancelled += 1
                won.append(entry)
            if won:
                self._compact_deadlines()
                self.lock.notify_all()
        if not won:
            return 0
        with self.lock:
            # Sent by the reader thread (at most one block time later), so that cancel() never
            # waits on Redis: asyncio calls it on its event loop when an awaiting task is cancelled.
            self._to_withdraw.extend(w for e in won for w in e.attempts)
            self._cancel_ttl_until = max(
                [self._cancel_ttl_until, protocol.now() + 60, *((e.msg.deadline or 0.0) + 60 for e in won)]
            )
        for entry in won:
            fut = entry.future
            assert isinstance(fut, JobFuture)
            fut._mark_cancelled()
        return len(won)

    def cancel_futures(self, futures: Iterable[cf.Future[Any]]) -> int:
        """``cancel`` for the jobs behind ``futures``; futures of other registries are skipped."""
        return self.cancel([f._entry for f in futures if isinstance(f, JobFuture) and f._jobs is self and f._entry])

    def take_withdrawals(self) -> tuple[list[str], int]:
        """The cancelled wire ids not sent yet (now taken) and the seconds their cancel keys must
        live: until the last of their deadlines (a worker drops any job past its deadline anyway)."""
        with self.lock:
            wire_ids, self._to_withdraw = self._to_withdraw, []
            return wire_ids, int(self._cancel_ttl_until - protocol.now()) + 1

    def requeue_withdrawals(self, wire_ids: list[str]) -> None:
        """Put back wire ids that could not be sent, ahead of any cancelled since."""
        with self.lock:
            self._to_withdraw[:0] = wire_ids

    # --- resolving -------------------------------------------------------------------------

    def finish(self, entry: PendingJob, result: JobResult | RunJobResult) -> bool:
        """Resolve ``entry`` with ``result`` (addressed back to the caller's job_id), once."""
        with self.lock:
            if entry.done:
                return False
            entry.done = True
            for wire_id in entry.attempts:
                self.pending.pop(wire_id, None)
            self.live -= 1
            self.stats.resolved += 1
            self._compact_deadlines()
            self.lock.notify_all()
        # the wire carries the attempt's id; the caller gets its own job_id back
        entry.future.set_result(dataclasses.replace(result, job_id=entry.job_id))
        return True

    def resolve(self, wire_id: str, result: JobResult | RunJobResult) -> bool:
        """A reply: it resolves the job of that attempt if it is still pending, else it is a duplicate.

        UNKNOWN_PROBLEM for a job of inline tests means the store lost them (Redis restarted
        without its data, a flush) after this client stored them: the caller sent the tests, so
        that answer is never theirs. The first such reply of a job is held for the reader to
        store the tests again and republish the job (``take_lost_inline``): the reader then
        either republishes it or resolves it. Only an attempt published after that can answer
        it UNKNOWN_PROBLEM; never a loop."""
        with self.lock:
            entry = self.pending.get(wire_id)
            if entry is None:
                self.stats.duplicates += 1
                return False
            if entry.tests is not None and isinstance(result, JobResult) and result.verdict == Verdict.UNKNOWN_PROBLEM:
                if not entry.restored_at:
                    entry.restored_at = len(entry.attempts)
                    self._lost_inline.append((entry, result))
                    return False
                if wire_id in entry.attempts[: entry.restored_at]:  # an attempt from before the restore
                    self.stats.duplicates += 1
                    return False
        return self.finish(entry, result)

    def take_lost_inline(self) -> list[tuple[PendingJob, JobResult]]:
        """The jobs of inline tests the store lost, with their UNKNOWN_PROBLEM answer (now taken)."""
        with self.lock:
            lost, self._lost_inline = self._lost_inline, []
            return [(e, r) for e, r in lost if not e.done]

    def unresolved(self) -> list[PendingJob]:
        """Every job not resolved yet (registered, published or not)."""
        with self.lock:
            return list({id(e): e for e in self.pending.values() if not e.done}.values())

    def republish(self, entries: Sequence[PendingJob],
                  publish: Callable[[Sequence[JobMessage | RunMessage]], None]) -> int:
        """Publish one more attempt of each unresolved entry, under a new wire id (registered
        first, so its reply is never missed; the first reply of any attempt wins), keeping the
        job's deadline: what Redis lost (the queue, or jobs workers dropped while the client's
        claim was gone) is sent again. If ``publish`` raises, the new attempts are forgotten and
        the error propagates (the caller may try again). Returns how many were published."""
        now = protocol.now()
        fresh: list[tuple[PendingJob, JobMessage | RunMessage]] = []
        with self.lock:
            for entry in entries:
                if entry.done:
                    continue
                wire_id = new_wire_id(entry.job_id)
                fresh.append((entry, dataclasses.replace(entry.msg, job_id=wire_id, submitted_at=now)))
                self.pending[wire_id] = entry
                entry.attempts.append(wire_id)
        if not fresh:
            return 0
        try:
            publish([msg for _, msg in fresh])
        except BaseException:
            with self.lock:
                for entry, msg in fresh:
                    if not entry.done:
                        self.pending.pop(msg.job_id, None)
                        entry.attempts.remove(msg.job_id)
            raise
        with self.lock:
            for entry, msg in fresh:
                if entry.done:
                    continue
                entry.msg = msg  # the latest attempt: its heap entry is the one expire() honours
                heapq.heappush(self.deadlines, (entry.deadline, next(self._seq), msg.job_id))
            self.stats.republished += len(fresh)
        return len(fresh)

    def expire(self) -> None:
        """Answer the jobs past their deadline INTERNAL, or resubmit each once first (when resubmits are on)."""
        now = time.monotonic()
        due: list[PendingJob] = []
        with self.lock:
            while self.deadlines and self.deadlines[0][0] <= now:
                deadline, _, wire_id = heapq.heappop(self.deadlines)
                entry = self.pending.get(wire_id)
                if entry is not None and entry.msg.job_id == wire_id and entry.deadline == deadline:
                    due.append(entry)
        for entry in due:
            if self._publish_resubmit is not None and not entry.resubmitted and self._resubmit(entry):
                continue
            self.stats.deadline_misses += 1
            why = f"no result within {entry.timeout:g}s" + (" (after one resubmit)" if entry.resubmitted else "")
            self.finish(entry, infra_result(entry.msg, why))

    def _resubmit(self, entry: PendingJob) -> bool:
        """Publish one more attempt under a new wire id (registered first, so its reply is never
        missed); the first reply of either attempt wins."""
        assert self._publish_resubmit is not None
        now = protocol.now()
        wire_id = new_wire_id(entry.job_id)
        msg = dataclasses.replace(entry.msg, job_id=wire_id, submitted_at=now, deadline=now + entry.timeout)
        with self.lock:
            if entry.done:
                return True  # answered meanwhile
            self.pending[wire_id] = entry
            entry.attempts.append(wire_id)
        try:
            self._publish_resubmit(msg)
        except Exception as exc:  # BrokerUnavailable, PublisherClosed (closing)
            log.warning("resubmit of job %s failed: %s", entry.job_id, exc)
            with self.lock:
                if not entry.done:
                    self.pending.pop(wire_id, None)
                    entry.attempts.remove(wire_id)
            return False
        with self.lock:
            if entry.done:
                return True
            entry.msg, entry.resubmitted = msg, True
            entry.deadline = time.monotonic() + entry.timeout
            heapq.heappush(self.deadlines, (entry.deadline, next(self._seq), wire_id))
            self.stats.resubmitted += 1
        log.warning("job %s missed its deadline: resubmitted once", entry.job_id)
        return True

    # --- closing ---------------------------------------------------------------------------

    def close(self) -> bool:
        """Let nothing register from now on and wake the submitters waiting for room; False if
        the registry was closed already."""
        with self.lock:
            if self.closed:
                return False
            self.closed = True
            self.lock.notify_all()
            return True

    def fail_unreachable(self, why: str) -> int:
        """Fail every pending future with BrokerUnavailable(``why``): Redis has been unreachable
        for longer than the caller agreed to wait, so waiting for each job's deadline would only
        stall the caller. Returns how many."""
        with self.lock:
            left = list({id(e): e for e in self.pending.values() if not e.done}.values())
            for entry in left:
                entry.done = True
                for wire_id in entry.attempts:
                    self.pending.pop(wire_id, None)
                self.live -= 1
                self.stats.broker_lost += 1
            if left:
                self._compact_deadlines()
                self.lock.notify_all()
        for entry in left:
            entry.future.set_exception(BrokerUnavailable(why))
        return len(left)

    def fail_all(self, why: str) -> int:
        """Resolve every job still pending INTERNAL with ``why``; returns how many there were."""
        with self.lock:
            left = list({id(e): e for e in self.pending.values()}.values())
        for entry in left:
            self.finish(entry, infra_result(entry.msg, why))
        return len(left)


def infra_result(msg: JobMessage | RunMessage, why: str) -> JobResult | RunJobResult:
    """The INTERNAL answer the client gives a job itself (deadline missed, client closed)."""
    if isinstance(msg, RunMessage):
        return RunJobResult.infra(msg.job_id, why)
    return JobStamp(msg.job_id, msg.problem_id, msg.mode, msg.reward_shape).infra(why)


def new_wire_id(job_id: str) -> str:
    """A fresh id for one publish attempt: unique (128 random bits), and naming the caller's job for the logs."""
    return f"{job_id}/{random_hex()}"


def random_hex() -> str:
    """128 random bits in hex, as ``uuid4().hex`` but without building a UUID (a few us per job)."""
    return os.urandom(16).hex()
