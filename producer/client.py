"""The trainer-side client: submit jobs to the fleet, get one JobResult per job back.

    with FleetClient("redis://127.0.0.1:6379/0") as fleet:
        futures = fleet.submit_many([(problem_id, completion) for ...], reward="fraction")
        results = fleet.gather(futures)            # in submit order
        rewards = [r.reward for r in results]      # None where r.infra_error: mask those

One background reader thread per client pops its reply list in bulk (BRPOP, then RPOP with a
count: Redis 6.2 has no BLMPOP), resolves futures, drops duplicate replies (delivery is
at-least-once) and turns a missed deadline into an INTERNAL result with ``infra_error`` set
(optionally after one resubmit): never a reward of 0 the model did not earn. A bound on
in-flight jobs gives backpressure; an unreachable broker is a ``BrokerUnavailable`` error.

Importing this module imports neither the sandbox's execution machinery nor the worker's tasks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import heapq
import itertools
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import redis

from cpfleet import protocol
from cpfleet.protocol import JobMessage, ProtocolError
from producer.publisher import BrokerUnavailable, Publisher
from sandbox.results import JobResult

log = logging.getLogger("cpfleet.client")

__all__ = ["BrokerUnavailable", "FleetBusy", "FleetClient", "FleetStats", "Job"]

Job = tuple[str, str | bytes] | Mapping[str, Any]


class FleetBusy(TimeoutError):
    """The in-flight bound stayed full for longer than the caller agreed to wait."""


@dataclass(slots=True)
class FleetStats:
    submitted: int = 0
    resolved: int = 0
    duplicates: int = 0  # replies for jobs already resolved (redelivery, resubmit, late reply)
    malformed_replies: int = 0
    deadline_misses: int = 0  # jobs answered INTERNAL by this client's deadline
    resubmitted: int = 0
    reader_errors: int = 0  # Redis errors seen by the reader (it keeps trying)


@dataclass(slots=True)
class _Pending:
    future: cf.Future[JobResult]
    msg: JobMessage
    deadline: float  # monotonic
    timeout: float
    resubmitted: bool = False
    attempts: list[str] = field(default_factory=list)  # task ids published


class FleetClient:
    """Submit jobs, get results. Thread-safe; one reader thread per client; use as a context manager."""

    def __init__(
        self,
        redis_url: str,
        *,
        queue: str = protocol.DEFAULT_QUEUE,
        timeout: float = 900.0,
        reward: str = "all_or_nothing",
        mode: str = "full",
        max_in_flight: int = 100_000,
        resubmit_on_timeout: bool = False,
        reply_ttl: int = protocol.DEFAULT_REPLY_TTL_S,
        use_cache: bool = True,
        client_id: str | None = None,
        publish_batch: int = 500,
        pop_batch: int = 1000,
    ) -> None:
        protocol.check_options(reward, mode)
        if timeout <= 0 or max_in_flight < 1:
            raise ValueError("timeout must be > 0 and max_in_flight >= 1")
        self.redis_url = redis_url
        self.queue = queue
        self.timeout = timeout
        self.reward = reward
        self.mode = mode
        self.max_in_flight = max_in_flight
        self.resubmit_on_timeout = resubmit_on_timeout
        self.reply_ttl = reply_ttl
        self.use_cache = use_cache
        self.client_id = client_id or uuid.uuid4().hex
        self.reply_key = protocol.reply_key(self.client_id)
        self.pop_batch = pop_batch
        self.stats = FleetStats()
        self._block_s = 0.25
        self._redis = redis.Redis.from_url(
            redis_url, socket_timeout=10, socket_connect_timeout=5, socket_keepalive=True
        )
        # The reader blocks in BRPOP; its socket timeout must outlast the block time.
        self._reader_redis = redis.Redis.from_url(
            redis_url, socket_timeout=self._block_s + 10, socket_connect_timeout=5, socket_keepalive=True
        )
        try:
            self._redis.ping()
        except redis.RedisError as exc:
            self._redis.close()
            self._reader_redis.close()
            raise BrokerUnavailable(f"cannot reach Redis at {redis_url}: {exc}") from exc
        self._publisher = Publisher(redis_url, queue, batch_size=publish_batch)
        self._lock = threading.Condition()
        self._pending: dict[str, _Pending] = {}
        self._deadlines: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._closed = False
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name=f"cpfleet-reader-{self.client_id[:8]}", daemon=True)
        self._reader.start()

    # --- submitting ------------------------------------------------------------------------

    def submit(
        self,
        problem_id: str,
        completion: str | bytes,
        *,
        reward: str | None = None,
        mode: str | None = None,
        job_id: str | None = None,
        timeout: float | None = None,
        wait_for_room: float | None = None,
    ) -> cf.Future[JobResult]:
        """Publish one job; the future resolves with its JobResult (never raises for the job)."""
        job = {"problem_id": problem_id, "completion": completion, "job_id": job_id}
        return self.submit_many([job], reward=reward, mode=mode, timeout=timeout, wait_for_room=wait_for_room)[0]

    def submit_many(
        self,
        jobs: Iterable[Job],
        *,
        reward: str | None = None,
        mode: str | None = None,
        timeout: float | None = None,
        wait_for_room: float | None = None,
    ) -> list[cf.Future[JobResult]]:
        """Publish jobs in batches; returns their futures in order.

        A job is ``(problem_id, completion)`` or a mapping with ``problem_id``, ``completion`` and
        optional ``job_id``, ``reward``, ``mode``, ``timeout``. When ``max_in_flight`` jobs are
        pending, this blocks until results free room (at most ``wait_for_room`` seconds, then
        FleetBusy). Raises BrokerUnavailable when Redis cannot be reached: the jobs of the failed
        batch and after it were not submitted (their futures are never returned).
        """
        if self._closed:
            raise RuntimeError("FleetClient is closed")
        msgs = [self._make(job, reward, mode, timeout) for job in jobs]
        futures: list[cf.Future[JobResult]] = []
        chunk = max(1, min(self._publisher.batch_size, self.max_in_flight))
        for start in range(0, len(msgs), chunk):
            part = msgs[start : start + chunk]
            self._wait_for_room(len(part), wait_for_room)
            entries = self._register(part)
            try:
                self._publisher.publish([(e.msg, e.attempts[0]) for e in entries])
            except BrokerUnavailable:
                self._unregister(entries)
                raise
            futures.extend(e.future for e in entries)
        return futures

    def _make(self, job: Job, reward: str | None, mode: str | None, timeout: float | None) -> JobMessage:
        if isinstance(job, Mapping):
            problem_id, completion = job["problem_id"], job.get("completion", "")
            job_id = job.get("job_id") or None
            reward = job.get("reward") or reward
            mode = job.get("mode") or mode
            timeout = job.get("timeout") or timeout
        else:
            problem_id, completion = job
            job_id = None
        reward, mode = reward or self.reward, mode or self.mode
        protocol.check_options(reward, mode)
        if not isinstance(problem_id, str) or not problem_id:
            raise ValueError(f"problem_id must be a non-empty string, got {problem_id!r}")
        if isinstance(completion, bytes):
            try:  # only text that is not UTF-8 travels as bytes
                completion = completion.decode("utf-8")
            except UnicodeDecodeError:
                pass
        elif not isinstance(completion, str):
            raise TypeError(f"completion must be str or bytes, got {type(completion).__name__}")
        if len(completion) > protocol.MAX_COMPLETION_BYTES:
            raise ValueError(f"completion of {len(completion)} bytes exceeds {protocol.MAX_COMPLETION_BYTES}")
        t = float(timeout or self.timeout)
        now = protocol.now()
        return JobMessage(
            job_id=str(job_id or uuid.uuid4().hex),
            problem_id=problem_id,
            completion=completion,
            reply_to=self.reply_key,
            reward_shape=reward,
            mode=mode,
            submitted_at=now,
            deadline=now + t,
            reply_ttl=self.reply_ttl,
            use_cache=self.use_cache,
            debug=job.get("debug") if isinstance(job, Mapping) else None,
        )

    def _wait_for_room(self, n: int, wait_for_room: float | None) -> None:
        need = min(n, self.max_in_flight)
        end = None if wait_for_room is None else time.monotonic() + wait_for_room
        with self._lock:
            while len(self._pending) + need > self.max_in_flight:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise FleetBusy(f"{len(self._pending)} jobs in flight (max_in_flight={self.max_in_flight})")
                self._lock.wait(timeout=left if left is not None else 1.0)
                if self._closed:
                    raise RuntimeError("FleetClient closed while waiting for room")

    def _register(self, msgs: Sequence[JobMessage]) -> list[_Pending]:
        entries = []
        with self._lock:
            for msg in msgs:
                if msg.job_id in self._pending:
                    raise ValueError(f"job_id {msg.job_id!r} is already in flight")
            for msg in msgs:
                t = (msg.deadline or 0) - msg.submitted_at
                fut: cf.Future[JobResult] = cf.Future()
                fut.set_running_or_notify_cancel()
                entry = _Pending(fut, msg, time.monotonic() + t, t, attempts=[msg.job_id])
                self._pending[msg.job_id] = entry
                heapq.heappush(self._deadlines, (entry.deadline, next(self._seq), msg.job_id))
                entries.append(entry)
            self.stats.submitted += len(entries)
        return entries

    def _unregister(self, entries: Sequence[_Pending]) -> None:
        with self._lock:
            for e in entries:
                self._pending.pop(e.msg.job_id, None)
            self.stats.submitted -= len(entries)
            self._lock.notify_all()

    # --- results ---------------------------------------------------------------------------

    def _resolve(self, job_id: str, result: JobResult) -> bool:
        with self._lock:
            entry = self._pending.pop(job_id, None)
            if entry is None:
                self.stats.duplicates += 1
                return False
            self.stats.resolved += 1
            self._lock.notify_all()
        entry.future.set_result(result)
        return True

    def _deliver(self, data: bytes) -> None:
        try:
            d = protocol.decode_reply(data)
            result = JobResult.from_dict(d)
        except (ProtocolError, KeyError, ValueError, TypeError) as exc:
            self.stats.malformed_replies += 1
            log.error("dropping malformed reply on %s: %s", self.reply_key, exc)
            return
        self._resolve(result.job_id, result)

    def _expire(self) -> None:
        now = time.monotonic()
        due: list[_Pending] = []
        with self._lock:
            while self._deadlines and self._deadlines[0][0] <= now:
                deadline, _, job_id = heapq.heappop(self._deadlines)
                entry = self._pending.get(job_id)
                if entry is not None and entry.deadline == deadline:
                    due.append(entry)
        for entry in due:
            if self.resubmit_on_timeout and not entry.resubmitted and self._resubmit(entry):
                continue
            self.stats.deadline_misses += 1
            msg = entry.msg
            result = JobResult.infra(
                msg.job_id,
                msg.problem_id,
                f"no result within {entry.timeout:g}s" + (" (after one resubmit)" if entry.resubmitted else ""),
            )
            result.mode, result.reward_shape = msg.mode, msg.reward_shape
            self._resolve(msg.job_id, result)

    def _resubmit(self, entry: _Pending) -> bool:
        now = protocol.now()
        msg = JobMessage(**{**_fields(entry.msg), "submitted_at": now, "deadline": now + entry.timeout})
        task_id = f"{msg.job_id}.r{len(entry.attempts)}"
        try:
            self._publisher.publish([(msg, task_id)])
        except BrokerUnavailable as exc:
            log.warning("resubmit of job %s failed: %s", msg.job_id, exc)
            return False
        with self._lock:
            if self._pending.get(msg.job_id) is not entry:
                return True  # answered meanwhile
            entry.msg, entry.resubmitted = msg, True
            entry.attempts.append(task_id)
            entry.deadline = time.monotonic() + entry.timeout
            heapq.heappush(self._deadlines, (entry.deadline, next(self._seq), msg.job_id))
            self.stats.resubmitted += 1
        log.warning("job %s missed its deadline: resubmitted once", msg.job_id)
        return True

    def _read_loop(self) -> None:
        backoff = 0.1
        last_error = 0.0
        while not self._stop.is_set():
            try:
                self._expire()
            except Exception:  # never let a bug here stop every future from resolving
                log.exception("reply reader: deadline check failed")
            try:
                item = self._reader_redis.brpop([self.reply_key], timeout=self._block_s)
                if item is None:
                    continue
                batch: list[Any] = [item[1]]
                more = self._reader_redis.rpop(self.reply_key, self.pop_batch)
                if isinstance(more, list):
                    batch.extend(more)
                backoff = 0.1
            except redis.RedisError as exc:
                self.stats.reader_errors += 1
                if time.monotonic() - last_error > 5:
                    log.warning("reply reader: %s (retrying; pending jobs keep their deadlines)", exc)
                    last_error = time.monotonic()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            for data in batch:
                try:
                    self._deliver(data)
                except Exception:  # the reader must survive anything one reply can do
                    log.exception("reply reader: delivering a reply failed")

    # --- waiting ---------------------------------------------------------------------------

    @staticmethod
    def gather(futures: Sequence[cf.Future[JobResult]], timeout: float | None = None) -> list[JobResult]:
        """Results in the order of ``futures``; TimeoutError if not all are done within ``timeout``."""
        done, not_done = cf.wait(futures, timeout=timeout)
        if not_done:
            raise TimeoutError(f"{len(not_done)} of {len(futures)} jobs not done after {timeout}s")
        return [f.result() for f in futures]

    @staticmethod
    def as_completed(futures: Iterable[cf.Future[JobResult]], timeout: float | None = None) -> Iterator[JobResult]:
        """Results as they arrive (each JobResult carries its job_id)."""
        for f in cf.as_completed(list(futures), timeout=timeout):
            yield f.result()

    def evaluate_many(self, jobs: Iterable[Job], **kwargs: Any) -> list[JobResult]:
        """Submit and wait: the results in input order."""
        return self.gather(self.submit_many(jobs, **kwargs))

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._pending)

    # --- asyncio ---------------------------------------------------------------------------

    async def asubmit(self, problem_id: str, completion: str | bytes, **kwargs: Any) -> asyncio.Future[JobResult]:
        """Like ``submit``; publishing (and waiting for room) runs off the event loop."""
        fut = await asyncio.to_thread(self.submit, problem_id, completion, **kwargs)
        return asyncio.wrap_future(fut)

    async def asubmit_many(self, jobs: Iterable[Job], **kwargs: Any) -> list[asyncio.Future[JobResult]]:
        futures = await asyncio.to_thread(self.submit_many, list(jobs), **kwargs)
        return [asyncio.wrap_future(f) for f in futures]

    async def aevaluate(self, problem_id: str, completion: str | bytes, **kwargs: Any) -> JobResult:
        """One job, awaited: the step of a multi-turn agentic rollout."""
        return await (await self.asubmit(problem_id, completion, **kwargs))

    @staticmethod
    async def agather(futures: Sequence[asyncio.Future[JobResult]], timeout: float | None = None) -> list[JobResult]:
        return list(await asyncio.wait_for(asyncio.gather(*futures), timeout))

    @staticmethod
    async def aas_completed(
        futures: Iterable[asyncio.Future[JobResult]], timeout: float | None = None
    ) -> AsyncIterator[JobResult]:
        for next_done in asyncio.as_completed(list(futures), timeout=timeout):
            yield await next_done

    # --- problems and lifecycle ------------------------------------------------------------

    def register_problems(self, problems: Iterable[Any]) -> Any:
        """Upload problems (``Problem`` objects or problem-format dicts) to the fleet's store."""
        from cpfleet.problem_store import register_problems

        return register_problems(self._redis, problems)

    def close(self) -> None:
        """Stop the reader; jobs still pending resolve INTERNAL ("client closed")."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._reader.join(timeout=5)
        with self._lock:
            left = list(self._pending.values())
        for entry in left:
            msg = entry.msg
            self._resolve(msg.job_id, JobResult.infra(msg.job_id, msg.problem_id, "client closed before the result"))
        self._publisher.close()
        try:
            self._redis.delete(self.reply_key)
        except redis.RedisError:
            pass
        self._redis.close()
        self._reader_redis.close()

    def __enter__(self) -> FleetClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _fields(msg: JobMessage) -> dict[str, Any]:
    return {name: getattr(msg, name) for name in JobMessage.__slots__}
