"""The asyncio side of the client for agentic rollouts: ``await fleet.evaluate(...)``.

Thousands of episodes on one event loop each await one job at a time. Publishing each job on
its own would cost a Redis round trip (and a thread hop, since the client's Redis calls block)
per call; instead every call made while a publish is running waits in a queue, and the next
publish sends all of them in one ``submit_many`` (pipelined batches): the batch grows with the
load by itself, and an idle loop still publishes a lone call at once (the flush is scheduled
with ``call_soon``, so it only collects the calls of the current loop iteration).

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
import copy
import functools
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpfleet.core.protocol import code_hash
from cpfleet.core.results import JobResult
from cpfleet.producer.inline_registry import tests_digest

if TYPE_CHECKING:
    from cpfleet.producer.client import FleetClient, Job


@dataclass(slots=True)
class BatcherStats:
    calls: int = 0
    published: int = 0  # jobs actually sent to the fleet
    deduped: int = 0  # calls that shared an in-flight job's result
    flushes: int = 0  # submit_many calls (one per batch)
    largest_batch: int = 0
    publish_ms_max: float = 0.0  # the longest publish of one batch (validation, registration, Redis)


@dataclass(slots=True)
class _Call:
    job: dict[str, Any]
    future: asyncio.Future[JobResult]
    key: tuple[str, ...] | None


class AsyncEvaluator:
    """Micro-batching and in-flight dedupe of ``evaluate`` calls on one event loop."""

    def __init__(self, fleet: FleetClient, loop: asyncio.AbstractEventLoop) -> None:
        self._fleet = fleet
        self._loop = loop
        self._queue: list[_Call] = []
        self._flushing = False  # a submit_many is running in a thread
        self._scheduled = False
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
    ) -> JobResult:
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError("this AsyncEvaluator belongs to another event loop: use FleetClient.evaluate")
        self.stats.calls += 1
        job: dict[str, Any] = {"completion": completion, "job_id": job_id, "reward_shape": reward_shape, "mode": mode}
        if timeout is not None:
            job["timeout"] = timeout
        if isinstance(problem, str):
            job["problem_id"] = problem
        else:
            job["tests"] = problem
        key = self._key(problem, completion, reward_shape, mode) if dedupe else None
        if key is not None:
            shared = self._inflight.get(key)
            if shared is not None:
                self.stats.deduped += 1
                first = await asyncio.shield(shared)
                twin = copy.copy(first)
                twin.job_id = job_id if job_id is not None else first.job_id
                twin.cache_hit = True
                return twin
        fut: asyncio.Future[JobResult] = self._loop.create_future()
        if key is not None:
            self._inflight[key] = fut
            fut.add_done_callback(functools.partial(self._forget, key))
        self._queue.append(_Call(job, fut, key))
        if not self._flushing and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)
        return await asyncio.shield(fut)

    def _key(self, problem: Any, completion: str | bytes, reward_shape: str | None, mode: str | None) -> tuple[str, ...]:
        text = completion.decode("utf-8", "replace") if isinstance(completion, bytes) else completion
        where = problem if isinstance(problem, str) else "tests:" + tests_digest(problem)
        return (
            where,
            code_hash(self._fleet.code_key(text) if self._fleet.code_key is not None else text),
            reward_shape or self._fleet.reward_shape,
            mode or self._fleet.mode,
        )

    def _forget(self, key: tuple[str, ...], fut: asyncio.Future[JobResult]) -> None:
        if self._inflight.get(key) is fut:
            del self._inflight[key]

    def _flush(self) -> None:
        self._scheduled = False
        if self._flushing or not self._queue:
            return
        batch, self._queue = self._queue, []
        self._flushing = True
        self.stats.flushes += 1
        self.stats.published += len(batch)
        self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
        jobs = [c.job for c in batch]
        started = time.perf_counter()
        task = self._loop.run_in_executor(None, self._submit, jobs)
        task.add_done_callback(lambda t: self._published(batch, t, started))

    def _submit(self, jobs: list[dict[str, Any]]) -> list[cf.Future[JobResult] | Exception]:
        """Validate each job on its own (a bad one fails only its own call), publish the rest."""
        good: list[Job] = []
        out: list[cf.Future[JobResult] | Exception | None] = []
        for job in jobs:
            try:
                resolved = self._fleet._resolve_inline(job)
                self._fleet._make(resolved, None, None, None)
            except (ValueError, TypeError) as e:  # InlineProblemError is a ValueError
                out.append(e)
                continue
            good.append(resolved)
            out.append(None)
        futures = iter(self._fleet.submit_many(good)) if good else iter(())
        return [next(futures) if item is None else item for item in out]

    def _published(
        self, batch: list[_Call], task: asyncio.Future[list[cf.Future[JobResult] | Exception]], started: float
    ) -> None:
        self._flushing = False
        self.stats.publish_ms_max = max(self.stats.publish_ms_max, (time.perf_counter() - started) * 1000.0)
        exc = task.exception()
        if exc is not None:
            # Redis unreachable, or the client closed: the callers get the error (jobs of
            # chunks published before it still run; their results are dropped).
            for call in batch:
                if not call.future.done():
                    call.future.set_exception(exc)
        else:
            for call, item in zip(batch, task.result(), strict=True):
                if isinstance(item, Exception):
                    if not call.future.done():
                        call.future.set_exception(item)
                else:
                    self._link(call.future, item)
        if self._queue:
            self._flush()

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
