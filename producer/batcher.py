"""The asyncio side of the client for agentic rollouts: ``await fleet.evaluate(...)``.

Thousands of episodes on one event loop each await one job at a time. Calls are queued and
published in micro-batches: the queue is flushed when it holds ``chunk`` calls, or at the end of
the loop iteration that queued the first of them (``call_soon``), so an idle loop publishes a
lone call at once and a burst goes out in chunks while later calls are still being made. A
chunk is validated, registered (stamped, given its futures and deadlines) and
encoded on the loop itself by the client's ``Submitter`` (``producer.submitter``, the path
``submit_many`` takes too), a few microseconds per job, and sent at once on the loop's own
Redis connection (``producer.aiopush``): the LPUSH leaves during the call that completed the
chunk, and the loop does not wait for Redis's answer. A call whose inline tests this process has not
stored yet, or a chunk that finds the client at ``max_in_flight``, takes the blocking path
instead: a thread that registers the tests and waits for room (one such publish at a time, so
its batch grows with the load by itself). Over TLS the client's publishing thread does the push.

Results come back on the client's reader thread; they are handed to the loop in bulk (one
wake-up of the loop per burst of replies, not one per job).

In-flight dedupe: a call identical to one still running (same problem, same code, same reward
shape and mode) awaits the first one's result instead of being judged again; each caller gets
its own copy carrying its own ``job_id``, marked ``cache_hit``. Judging is deterministic for a
given (problem version, code, options), which is what the worker's result cache already relies
on. "Same code" is the client's ``code_key`` of the completion: the worker's code extraction
when the application passes it (``cpfleet.rewards`` and ``cpfleet serve`` do, so two
completions with different prose around one program share a job), else the completion text
itself (the client imports nothing of the sandbox).

One AsyncEvaluator belongs to one event loop (``FleetClient.evaluator()`` makes one per loop
on first use), so a client created before the trainer's loop existed works on that loop.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import dataclasses
import functools
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpfleet.core.errors import ClientClosed, FleetBusy, JobTypeError
from cpfleet.core.protocol import code_hash
from cpfleet.core.results import JobResult
from cpfleet.producer import aiopush
from cpfleet.producer.aiopush import AsyncPusher
from cpfleet.producer.inline_registry import tests_digest
from cpfleet.producer.known_problems import unknown_problems_error

if TYPE_CHECKING:
    from cpfleet.producer.client import FleetClient, Job


@dataclass(slots=True)
class BatcherStats:
    calls: int = 0
    published: int = 0  # jobs actually sent to the fleet
    deduped: int = 0  # calls that shared an in-flight job's result
    flushes: int = 0  # batches published
    largest_batch: int = 0
    publish_ms_max: float = 0.0  # the longest publish of one batch, until Redis acknowledged it
    buffered: int = 0  # batches whose bytes did not all fit the socket at once (the rest left later)


@dataclass(slots=True)
class _Call:
    job: dict[str, Any]
    future: asyncio.Future[JobResult]
    key: tuple[str, ...] | None


class AsyncEvaluator:
    """Micro-batching and in-flight dedupe of ``evaluate`` calls on one event loop."""

    def __init__(self, fleet: FleetClient, loop: asyncio.AbstractEventLoop, chunk: int = 256) -> None:
        self._fleet = fleet
        self._loop = loop
        self.chunk = chunk  # calls per published batch on the direct path
        # this loop's own publishing connection (None for TLS: the publishing thread pushes)
        self._pusher = AsyncPusher(fleet.redis_url, fleet.queue) if aiopush.supported(fleet.redis_url) else None
        self._queue: list[_Call] = []
        self._scheduled = False
        self._blocking: list[_Call] = []  # calls waiting for the blocking path
        self._blocking_busy = False  # a blocking publish is running in a thread
        self._inflight: dict[tuple[str, ...], asyncio.Future[JobResult]] = {}
        self._ready: collections.deque[tuple[asyncio.Future[JobResult], cf.Future[JobResult]]] = collections.deque()
        self._ready_lock = threading.Lock()
        self._drain_scheduled = False
        self.stats = BatcherStats()

    async def evaluate(
        self,
        problem: str | Any,
        completion: str | bytes,
        *,
        reward_shape: str | None = None,
        mode: str | None = None,
        timeout: float | None = None,
        job_id: str | None = None,
        dedupe: bool = True,
        language: str | None = None,
    ) -> JobResult:
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError("this AsyncEvaluator belongs to another event loop: use FleetClient.evaluate")
        self.stats.calls += 1
        if not isinstance(completion, str | bytes):  # before the dedupe key reads it as text
            raise JobTypeError(f"completion must be str or bytes, got {type(completion).__name__}")
        job: dict[str, Any] = {"completion": completion, "job_id": job_id, "reward_shape": reward_shape, "mode": mode}
        if timeout is not None:
            job["timeout"] = timeout
        if language is not None:  # validated with the job's other fields when it is published
            job["language"] = language
        # what the job judges against, tagged by kind so that no problem id (an operator's free
        # text) can key like an inline test set's digest
        where: tuple[str, str]
        if isinstance(problem, str):
            job["problem_id"] = problem
            where = ("problem", problem)
        else:
            digest = tests_digest(problem)
            where = ("tests", digest)
            stored = self._fleet.inline_registry.known(digest)
            if stored is not None:
                job["problem_id"] = stored
            job["tests"] = problem  # with the stored id too: stored again if the store loses them
        key = self._key(where, completion, reward_shape, mode, language) if dedupe else None
        if key is not None:
            shared = self._inflight.get(key)
            if shared is not None:
                self.stats.deduped += 1
                first = await asyncio.shield(shared)
                # each caller its own copy, addressed to its own job_id
                return dataclasses.replace(first, job_id=first.job_id if job_id is None else job_id, cache_hit=True)
        fut: asyncio.Future[JobResult] = self._loop.create_future()
        if key is not None:
            self._inflight[key] = fut
            fut.add_done_callback(functools.partial(self._forget, key))
        self._queue.append(_Call(job, fut, key))
        if len(self._queue) >= self.chunk:
            self._flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush_scheduled)
        return await asyncio.shield(fut)

    def _key(self, where: tuple[str, str], completion: str | bytes, reward_shape: str | None,
             mode: str | None, language: str | None) -> tuple[str, ...]:
        text = completion.decode("utf-8", "replace") if isinstance(completion, bytes) else completion
        return (
            *where,
            code_hash(self._fleet.code_key(text) if self._fleet.code_key is not None else text),
            reward_shape or self._fleet.reward_shape,
            mode or self._fleet.mode,
            # one program text judged as python3 and as pypy3 (or a bare block as C and as C++)
            # is two jobs: they may differ in verdict, time and memory
            language or "",
        )

    def _forget(self, key: tuple[str, ...], fut: asyncio.Future[JobResult]) -> None:
        if self._inflight.get(key) is fut:
            del self._inflight[key]

    def _flush_scheduled(self) -> None:
        self._scheduled = False
        self._flush()

    def _flush(self) -> None:
        """Publish the queued calls: those with a problem id from here, the others by the blocking path."""
        if not self._queue:
            return
        batch, self._queue = self._queue, []
        direct = [c for c in batch if "problem_id" in c.job]
        if len(direct) < len(batch):
            self._blocking.extend(c for c in batch if "problem_id" not in c.job)
            self._flush_blocking()
        if direct:
            self._publish_direct(direct)

    def _publish_direct(self, calls: list[_Call]) -> None:
        """Validate and register (stamp) on the loop, then push: encoded here and sent on the
        loop's own connection when there is one (the bytes leave now), else stamped afresh,
        encoded and sent on the client's publishing thread."""
        pusher = self._pusher
        if pusher is not None and not pusher.ensure(self._loop):  # unreachable for now: the thread reports it
            pusher = None
        fleet, submitter = self._fleet, self._fleet.submitter
        specs: list[Any] = []
        valid: list[_Call] = []
        for call in calls:
            try:
                specs.append(submitter.make(call.job))
            except (ValueError, TypeError) as e:  # a bad job fails only its own call
                call.future.set_exception(e)
                continue
            valid.append(call)
        if not valid:
            return
        # a problem id this client has not yet seen in the store needs a round trip: off the loop
        unchecked = set(fleet.known_problems.unchecked(s.problem_id for s in specs))
        if unchecked:
            self._blocking.extend(c for c, s in zip(valid, specs, strict=True) if s.problem_id in unchecked)
            self._flush_blocking()
            pairs = [(c, s) for c, s in zip(valid, specs, strict=True) if s.problem_id not in unchecked]
            if not pairs:
                return
            valid, specs = [c for c, _ in pairs], [s for _, s in pairs]
        try:
            entries = submitter.register(specs, 0.0)
        except FleetBusy:  # at max_in_flight: wait for room off the loop
            self._blocking.extend(valid)
            self._flush_blocking()
            return
        except ClientClosed as e:
            self._fail(valid, e)
            return
        done = functools.partial(self._pushed, valid, entries, time.perf_counter())
        try:
            if pusher is None:
                pushed = submitter.publish_in_background(entries)
            else:
                payloads = submitter.encode(entries)
        except Exception as e:  # ClientClosed; MessageEncodeError cannot happen after make, but never strand a call
            self._fail(valid, e)
            return
        self._count(len(valid))
        if pusher is None:
            asyncio.wrap_future(pushed, loop=self._loop).add_done_callback(lambda task: done(task.exception()))
        else:
            pusher.push(payloads, done)
            self.stats.buffered = pusher.buffered

    def _pushed(self, calls: list[_Call], entries: list[Any], started: float, err: BaseException | None) -> None:
        self._note_publish(started)
        if err is not None:  # Redis unreachable or full, or the client closed: the callers get the error
            self._fleet.submitter.unregister(entries)  # (already done where the thread pushed: a no-op then)
            self._fail(calls, err)
            return
        for call, entry in zip(calls, entries, strict=True):
            self._link(call.future, entry.future)

    def close(self) -> None:
        """Close this loop's publishing connection (from any thread, the loop running or closed)."""
        pusher = self._pusher
        if pusher is None:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop or self._loop.is_closed():
            pusher.close()
            return
        try:
            self._loop.call_soon_threadsafe(pusher.close)
        except RuntimeError:  # closed meanwhile
            pusher.close()

    def _flush_blocking(self) -> None:
        if self._blocking_busy or not self._blocking:
            return
        batch, self._blocking = self._blocking, []
        self._blocking_busy = True
        self._count(len(batch))
        jobs = [c.job for c in batch]
        started = time.perf_counter()
        task = self._loop.run_in_executor(None, self._submit_blocking, jobs)
        task.add_done_callback(lambda t: self._published_blocking(batch, t, started))

    def _submit_blocking(self, jobs: list[dict[str, Any]]) -> list[cf.Future[JobResult] | Exception]:
        """Validate each job on its own (a bad one, or one naming a problem the store does not
        have, fails only its own call), publish the rest."""
        submitter = self._fleet.submitter
        good: list[Job] = []
        ids: list[str] = []
        out: list[cf.Future[JobResult] | Exception | None] = []
        for job in jobs:
            try:
                resolved = submitter.resolve_inline(job)
                ids.append(submitter.make(resolved).problem_id)
            except (ValueError, TypeError) as e:  # InlineProblemError is a ValueError
                out.append(e)
                continue
            good.append(resolved)
            out.append(None)
        absent = set(self._fleet.known_problems.missing(ids))  # one round trip for unseen ids
        if absent:
            kept: list[Job] = []
            at = iter(range(len(good)))
            for i, item in enumerate(out):
                if item is not None:
                    continue
                k = next(at)
                if ids[k] in absent:
                    out[i] = unknown_problems_error([ids[k]])
                else:
                    kept.append(good[k])
            good = kept
        futures = iter(self._fleet.submit_many(good)) if good else iter(())
        return [next(futures) if item is None else item for item in out]

    def _published_blocking(
        self, batch: list[_Call], task: asyncio.Future[list[cf.Future[JobResult] | Exception]], started: float
    ) -> None:
        self._blocking_busy = False
        self._note_publish(started)
        exc = task.exception()
        if exc is not None:
            # Redis unreachable, or the client closed: the callers get the error (jobs of
            # chunks published before it still run; their results are dropped).
            self._fail(batch, exc)
        else:
            for call, item in zip(batch, task.result(), strict=True):
                if isinstance(item, Exception):
                    if not call.future.done():
                        call.future.set_exception(item)
                else:
                    self._link(call.future, item)
        self._flush_blocking()

    def _count(self, n: int) -> None:
        self.stats.flushes += 1
        self.stats.published += n
        self.stats.largest_batch = max(self.stats.largest_batch, n)

    def _note_publish(self, started: float) -> None:
        self.stats.publish_ms_max = max(self.stats.publish_ms_max, (time.perf_counter() - started) * 1000.0)

    @staticmethod
    def _fail(calls: list[_Call], exc: BaseException) -> None:
        for call in calls:
            if not call.future.done():
                call.future.set_exception(exc)

    def _link(self, fut: asyncio.Future[JobResult], cfut: cf.Future[JobResult]) -> None:
        cfut.add_done_callback(lambda f: self._arrived(fut, f))

    def _arrived(self, fut: asyncio.Future[JobResult], cfut: cf.Future[JobResult]) -> None:
        """On the reader thread (or here, if already done): queue it, wake the loop once per burst."""
        with self._ready_lock:
            self._ready.append((fut, cfut))
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def _drain(self) -> None:
        with self._ready_lock:
            ready, self._ready = self._ready, collections.deque()
            self._drain_scheduled = False
        for fut, cfut in ready:
            if fut.done():
                continue
            if cfut.cancelled():  # FleetClient.cancel_many withdrew the job
                fut.cancel()
                continue
            exc = cfut.exception()
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(cfut.result())
