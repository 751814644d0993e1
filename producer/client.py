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

from cpfleet.core import protocol
from cpfleet.core.errors import ClientClosed, FleetBusy
from cpfleet.core.protocol import JobMessage, ProtocolError
from cpfleet.core.results import JobResult
from cpfleet.producer.publisher import BrokerUnavailable, Publisher, PublisherClosed

log = logging.getLogger("cpfleet.client")

__all__ = ["BrokerUnavailable", "ClientClosed", "FleetBusy", "FleetClient", "FleetStats", "Job"]

Job = tuple[str, str | bytes] | Mapping[str, Any]


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
class _Spec:
    """One validated job, not yet stamped nor registered."""

    job_id: str  # the caller's id (or a generated one): what the caller sees in the result
    problem_id: str
    completion: str | bytes
    reward: str
    mode: str
    timeout: float
    debug: str | None
    language: str | None = None


@dataclass(slots=True)
class _Pending:
    future: cf.Future[JobResult]
    job_id: str  # the caller's id
    msg: JobMessage  # the latest attempt; msg.job_id is its wire id
    deadline: float  # monotonic
    timeout: float
    resubmitted: bool = False
    done: bool = False
    attempts: list[str] = field(default_factory=list)  # wire ids (also the task ids) published


class FleetClient:
    """Submit jobs, get results. Thread-safe; one reader thread per client; use as a context manager.

    Each submission is its own job: every publish attempt travels under a fresh unique wire id
    (``<job_id>/<uuid4 hex>``) and only a reply carrying that wire id can resolve its future, so a
    late reply never reaches a later job, and the caller's ``job_id`` need not be unique (two
    submissions with the same id get two futures, each with its own result; the result's
    ``job_id`` is the caller's). A ``client_id`` is claimed exclusively in Redis while the client
    is open: a second client with the same id raises ValueError.
    """

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
        self.claim_key = protocol.client_claim_key(self.client_id)
        self.pop_batch = pop_batch
        self.stats = FleetStats()
        self._block_s = 0.25
        self._claim_token = uuid.uuid4().hex
        self._claim_ttl_s = protocol.CLIENT_CLAIM_TTL_S
        self._redis = redis.Redis.from_url(
            redis_url, socket_timeout=10, socket_connect_timeout=5, socket_keepalive=True
        )
        # The reader blocks in BRPOP; its socket timeout must outlast the block time.
        self._reader_redis = redis.Redis.from_url(
            redis_url, socket_timeout=self._block_s + 10, socket_connect_timeout=5, socket_keepalive=True
        )
        try:
            claimed = self._redis.set(self.claim_key, self._claim_token, nx=True, ex=self._claim_ttl_s)
        except redis.RedisError as exc:
            self._redis.close()
            self._reader_redis.close()
            raise BrokerUnavailable(f"cannot reach Redis at {redis_url}: {exc}") from exc
        if not claimed:
            self._redis.close()
            self._reader_redis.close()
            raise ValueError(
                f"client_id {self.client_id!r} is in use by another open FleetClient (Redis key {self.claim_key}): "
                f"two clients would steal each other's replies; use a distinct client_id (a client that died "
                f"without close() releases its id after {self._claim_ttl_s}s)"
            )
        self._publisher = Publisher(redis_url, queue, batch_size=publish_batch)
        self._lock = threading.Condition()
        self._pending: dict[str, _Pending] = {}  # wire id -> entry (every attempt of an unresolved job)
        self._live = 0  # unresolved jobs (what max_in_flight bounds)
        self._deadlines: list[tuple[float, int, str]] = []  # (monotonic deadline, seq, wire id)
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
        language: str | None = None,
    ) -> cf.Future[JobResult]:
        """Publish one job; the future resolves with its JobResult (never raises for the job).
        ``language`` (python3, pypy3, cpp, c, java) fixes the solution's language; None: the
        problem's languages and the completion's fence tag decide."""
        job = {"problem_id": problem_id, "completion": completion, "job_id": job_id, "language": language}
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
        optional ``job_id``, ``reward``, ``mode``, ``timeout``. ``job_id`` is only a label for the
        caller (the result carries it back); it need not be unique. Every job is validated before
        anything is published: an invalid one raises ValueError/TypeError and nothing is sent.

        When ``max_in_flight`` jobs are pending, this blocks until results free room (at most
        ``wait_for_room`` seconds, then FleetBusy); a job's deadline counts from its publication,
        not from this call. BrokerUnavailable (Redis unreachable), FleetBusy and ClientClosed
        (``close()`` before or during the call) stop the call at a batch: that batch and the ones
        after it were not submitted, and the exception's ``submitted`` attribute holds the futures
        of the batches published before it (they resolve as usual).
        """
        if self._closed:
            raise ClientClosed("FleetClient is closed")
        specs = [self._make(job, reward, mode, timeout) for job in jobs]
        futures: list[cf.Future[JobResult]] = []
        chunk = max(1, min(self._publisher.batch_size, self.max_in_flight))
        for start in range(0, len(specs), chunk):
            try:
                entries = self._register(specs[start : start + chunk], wait_for_room)
            except (FleetBusy, ClientClosed) as exc:
                exc.submitted = futures
                raise
            try:
                self._publisher.publish([(e.msg, e.msg.job_id) for e in entries])
            except BrokerUnavailable as exc:
                self._unregister(entries)
                exc.submitted = futures
                raise
            except PublisherClosed as exc:  # close() between registering and publishing
                self._unregister(entries)
                closed = ClientClosed("FleetClient closed during submit_many")
                closed.submitted = futures
                raise closed from exc
            except BaseException:  # MessageEncodeError cannot happen after _make; never leak entries
                self._unregister(entries)
                raise
            futures.extend(e.future for e in entries)
        return futures

    def _make(self, job: Job, reward: str | None, mode: str | None, timeout: float | None) -> _Spec:
        """Validate one job (nothing is stamped here: that happens when it is registered)."""
        debug: Any = None
        if isinstance(job, Mapping):
            problem_id, completion = job["problem_id"], job.get("completion", "")
            job_id = job.get("job_id")
            reward = job.get("reward") or reward
            mode = job.get("mode") or mode
            timeout = job.get("timeout") or timeout
            debug = job.get("debug")
            language = job.get("language")
        else:
            problem_id, completion = job
            job_id = None
            language = None
        if language is not None and (not isinstance(language, str) or not language):
            raise ValueError(f"language must be a non-empty string, got {language!r}")
        reward, mode = reward or self.reward, mode or self.mode
        protocol.check_options(reward, mode)
        if not isinstance(problem_id, str) or not problem_id or not _utf8(problem_id):
            raise ValueError(f"problem_id must be a non-empty UTF-8 string, got {problem_id!r}")
        job_id = uuid.uuid4().hex if job_id is None or job_id == "" else str(job_id)
        if not _utf8(job_id):
            raise ValueError(f"job_id must be valid UTF-8 text, got {job_id!r}")
        if debug is not None and (not isinstance(debug, str) or not _utf8(debug)):
            raise ValueError(f"debug must be a UTF-8 string, got {debug!r}")
        if isinstance(completion, bytes):
            size = len(completion)  # bytes travel as bytes; the worker decodes them (errors replaced)
        elif isinstance(completion, str):
            try:
                size = len(completion.encode("utf-8"))
            except UnicodeEncodeError:  # lone surrogates: msgpack cannot send that str, send its bytes
                completion = completion.encode("utf-8", "surrogatepass")
                size = len(completion)
        else:
            raise TypeError(f"completion must be str or bytes, got {type(completion).__name__}")
        if size > protocol.MAX_COMPLETION_BYTES:
            raise ValueError(f"completion of {size} bytes exceeds {protocol.MAX_COMPLETION_BYTES}")
        t = float(timeout or self.timeout)
        if t <= 0:
            raise ValueError(f"timeout must be > 0, got {t}")
        return _Spec(job_id, problem_id, completion, reward, mode, t, debug, language)

    def _register(self, specs: Sequence[_Spec], wait_for_room: float | None) -> list[_Pending]:
        """Wait for room, then stamp and register ``specs``, all under one hold of the lock (so
        concurrent submitters never overshoot ``max_in_flight``, and nothing registers after
        ``close()``)."""
        end = None if wait_for_room is None else time.monotonic() + wait_for_room
        need = len(specs)  # <= max_in_flight: submit_many's chunks are no larger
        with self._lock:
            while True:
                if self._closed:
                    raise ClientClosed("FleetClient closed while submitting")
                if self._live + need <= self.max_in_flight:
                    break
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise FleetBusy(f"{self._live} jobs in flight (max_in_flight={self.max_in_flight})")
                self._lock.wait(timeout=left if left is not None else 1.0)
            now, mono = protocol.now(), time.monotonic()
            entries = []
            for s in specs:
                wire_id = _wire_id(s.job_id)
                msg = JobMessage(
                    job_id=wire_id,
                    problem_id=s.problem_id,
                    completion=s.completion,
                    reply_to=self.reply_key,
                    reward_shape=s.reward,
                    mode=s.mode,
                    submitted_at=now,
                    deadline=now + s.timeout,
                    reply_ttl=self.reply_ttl,
                    use_cache=self.use_cache,
                    debug=s.debug,
                    language=s.language,
                )
                fut: cf.Future[JobResult] = cf.Future()
                fut.set_running_or_notify_cancel()
                entry = _Pending(fut, s.job_id, msg, mono + s.timeout, s.timeout, attempts=[wire_id])
                self._pending[wire_id] = entry
                heapq.heappush(self._deadlines, (entry.deadline, next(self._seq), wire_id))
                entries.append(entry)
            self._live += len(entries)
            self.stats.submitted += len(entries)
            self._compact_deadlines()
        return entries

    def _unregister(self, entries: Sequence[_Pending]) -> None:
        """Forget entries whose batch was not published (their futures are never handed out)."""
        with self._lock:
            for e in entries:
                if e.done:  # close() resolved it meanwhile
                    continue
                e.done = True
                for wire_id in e.attempts:
                    self._pending.pop(wire_id, None)
                self._live -= 1
                self.stats.submitted -= 1
            self._lock.notify_all()

    def _compact_deadlines(self) -> None:
        """Drop heap entries of resolved jobs once they outnumber the live ones (lock held)."""
        if len(self._deadlines) > 2 * len(self._pending) + 1024:
            self._deadlines = [d for d in self._deadlines if d[2] in self._pending]
            heapq.heapify(self._deadlines)

    # --- results ---------------------------------------------------------------------------

    def _finish(self, entry: _Pending, result: JobResult) -> bool:
        """Resolve ``entry`` with ``result`` (addressed back to the caller's job_id), once."""
        with self._lock:
            if entry.done:
                return False
            entry.done = True
            for wire_id in entry.attempts:
                self._pending.pop(wire_id, None)
            self._live -= 1
            self.stats.resolved += 1
            self._compact_deadlines()
            self._lock.notify_all()
        result.job_id = entry.job_id
        entry.future.set_result(result)
        return True

    def _resolve(self, wire_id: str, result: JobResult) -> bool:
        """A reply: it resolves the job of that attempt if it is still pending, else it is a duplicate."""
        with self._lock:
            entry = self._pending.get(wire_id)
            if entry is None:
                self.stats.duplicates += 1
                return False
        return self._finish(entry, result)

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
                deadline, _, wire_id = heapq.heappop(self._deadlines)
                entry = self._pending.get(wire_id)
                if entry is not None and entry.msg.job_id == wire_id and entry.deadline == deadline:
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
            self._finish(entry, result)

    def _resubmit(self, entry: _Pending) -> bool:
        """Publish one more attempt under a new wire id (registered first, so its reply is never
        missed); the first reply of either attempt wins."""
        now = protocol.now()
        wire_id = _wire_id(entry.job_id)
        msg = JobMessage(**{**_fields(entry.msg), "job_id": wire_id, "submitted_at": now, "deadline": now + entry.timeout})
        with self._lock:
            if entry.done:
                return True  # answered meanwhile
            self._pending[wire_id] = entry
            entry.attempts.append(wire_id)
        try:
            self._publisher.publish([(msg, wire_id)])
        except Exception as exc:  # BrokerUnavailable, PublisherClosed (closing)
            log.warning("resubmit of job %s failed: %s", entry.job_id, exc)
            with self._lock:
                if not entry.done:
                    self._pending.pop(wire_id, None)
                    entry.attempts.remove(wire_id)
            return False
        with self._lock:
            if entry.done:
                return True
            entry.msg, entry.resubmitted = msg, True
            entry.deadline = time.monotonic() + entry.timeout
            heapq.heappush(self._deadlines, (entry.deadline, next(self._seq), wire_id))
            self.stats.resubmitted += 1
        log.warning("job %s missed its deadline: resubmitted once", entry.job_id)
        return True

    def _renew_claim(self) -> None:
        """Keep this client's exclusive hold on its client_id (run by the reader thread)."""
        ok = self._reader_redis.eval(_RENEW_CLAIM, 1, self.claim_key, self._claim_token, self._claim_ttl_s)
        if not ok:
            log.error("client_id %r was claimed by another client: replies may be lost to it", self.client_id)

    def _read_loop(self) -> None:
        backoff = 0.1
        last_error = 0.0
        renew_every = self._claim_ttl_s / 4
        next_renew = time.monotonic() + renew_every
        while not self._stop.is_set():
            try:
                self._expire()
            except Exception:  # never let a bug here stop every future from resolving
                log.exception("reply reader: deadline check failed")
            batch: list[Any] = []
            error: redis.RedisError | None = None
            try:
                if time.monotonic() >= next_renew:
                    self._renew_claim()
                    next_renew = time.monotonic() + renew_every
                item = self._reader_redis.brpop([self.reply_key], timeout=self._block_s)
                if item is not None:
                    batch.append(item[1])
                    more = self._reader_redis.rpop(self.reply_key, self.pop_batch)
                    if isinstance(more, list):
                        batch.extend(more)
                backoff = 0.1
            except redis.RedisError as exc:
                error = exc
            for data in batch:  # what was popped is delivered, whatever happened after
                try:
                    self._deliver(data)
                except Exception:  # the reader must survive anything one reply can do
                    log.exception("reply reader: delivering a reply failed")
            if error is not None:
                self.stats.reader_errors += 1
                if time.monotonic() - last_error > 5:
                    log.warning("reply reader: %s (retrying; pending jobs keep their deadlines)", error)
                    last_error = time.monotonic()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)

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
        """Jobs submitted and not yet resolved."""
        with self._lock:
            return self._live

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
        from cpfleet.core.store import register_problems

        return register_problems(self._redis, problems)

    def close(self) -> None:
        """Stop the reader; jobs still pending resolve INTERNAL ("client closed"); a submit_many
        still running stops at its next batch with ClientClosed. Releases the client_id."""
        with self._lock:
            if self._closed:
                return
            self._closed = True  # from here on nothing registers
            self._lock.notify_all()  # submitters waiting for room see it
        self._stop.set()
        self._reader.join(timeout=5)
        self._publisher.close()  # waits for a publish in progress; later ones raise
        with self._lock:
            left = list({id(e): e for e in self._pending.values()}.values())
        for entry in left:
            msg = entry.msg
            self._finish(entry, JobResult.infra(msg.job_id, msg.problem_id, "client closed before the result"))
        try:
            self._redis.delete(self.reply_key)
            self._redis.eval(_RELEASE_CLAIM, 1, self.claim_key, self._claim_token)
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


# Renew this client's claim on its id: extend it while it is ours, take it back if it expired
# (the reader was cut off from Redis for a TTL), never take it from another client.
_RENEW_CLAIM = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 1 end
return 0
"""
_RELEASE_CLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _wire_id(job_id: str) -> str:
    """A fresh id for one publish attempt: unique (uuid4), and naming the caller's job for the logs."""
    return f"{job_id}/{uuid.uuid4().hex}"


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fields(msg: JobMessage) -> dict[str, Any]:
    return {name: getattr(msg, name) for name in JobMessage.__slots__}
