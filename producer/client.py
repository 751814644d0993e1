"""The trainer-side client: submit jobs to the fleet, get one JobResult per job back.

    with FleetClient() as fleet:                   # $CPFLEET_REDIS_URL, else redis://127.0.0.1:6379/0
        futures = fleet.submit_many([(problem_id, completion) for ...], reward_shape="fraction")
        results = fleet.gather(futures)            # in submit order
        rewards = [r.reward for r in results]      # None where r.infra_error: mask those

One background reader thread per client reads replies where they are, at the old end of its
reply list (up to ``pop_batch`` per round), and trims them off only once their futures are
resolved, so a connection that dies mid-read loses nothing: the next round reads them again
(``producer.replies``). It resolves futures, drops duplicate replies (delivery is
at-least-once) and turns a missed deadline into an INTERNAL result with ``infra_error`` set
(optionally after one resubmit): never a reward of 0 the model did not earn. A bound on
in-flight jobs gives backpressure; an unreachable broker is a ``BrokerUnavailable`` error, a
full one (maxmemory with noeviction) a ``BrokerFull`` error.

Importing this module imports neither the sandbox's execution machinery nor the worker's tasks.

Over 500 lines because it is the client's whole public surface (submit, run, wait, asyncio,
lifecycle) in one class, documented where it is called; the machinery behind it is in its own
modules: the path to the queue (``submitter``), the jobs in flight (``pending``), the reply
reader (``replies``), the message encoding (``publisher``) and the asyncio batcher (``batcher``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import functools
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import redis

from cpfleet.core import defaults, options, protocol
from cpfleet.core.errors import (
    BrokerFull,
    ClientClosed,
    FleetBusy,
    JobFormatError,
    JobTypeError,
    OptionError,
    UnknownLanguage,
)
from cpfleet.core.protocol import JobMessage, RunMessage
from cpfleet.core.redis_url import connection_hint
from cpfleet.core.results import JobResult, RunJobResult
from cpfleet.producer.batcher import AsyncEvaluator
from cpfleet.producer.connection import connect
from cpfleet.producer.inline_registry import InlineRegistry, tests_digest
from cpfleet.producer.known_problems import KnownProblems
from cpfleet.producer.orphans import purge_orphans
from cpfleet.producer.pending import (
    FleetStats,
    JobRegistry,
    JobSpec,
    PendingJob,
    infra_result,
)
from cpfleet.producer.presence import unserved_reason
from cpfleet.producer.publisher import BrokerUnavailable, Publisher
from cpfleet.producer.replies import ReplyReader
from cpfleet.producer.submitter import Job, RunRequest, Stdin, Submitter, run_message_fields

log = logging.getLogger("cpfleet.client")

__all__ = [
    "BrokerFull", "BrokerUnavailable", "ClientClosed", "FleetBusy", "FleetClient", "FleetStats", "Job", "RunRequest",
    "run_message_fields",
]


class FleetClient:
    """Submit jobs, get results. Thread-safe; one reader thread per client; use as a context manager.

    Each submission is its own job: every publish attempt travels under a fresh unique wire id
    (``<job_id>/<128 random bits in hex>``) and only a reply carrying that wire id can resolve its future, so a
    late reply never reaches a later job, and the caller's ``job_id`` need not be unique (two
    submissions with the same id get two futures, each with its own result; the result's
    ``job_id`` is the caller's). A ``client_id`` is claimed exclusively in Redis while the client
    is open: a second client with the same id raises ValueError. ``redis_url`` defaults to
    ``$CPFLEET_REDIS_URL``, else ``redis://127.0.0.1:6379/0`` (``cpfleet.core.defaults``), as
    for every ``cpfleet`` command; a malformed URL raises ``RedisUrlError`` (a ValueError) here.
    ``unreachable_grace``: once Redis has been unreachable that many seconds in a row (default
    30; None: never), every pending future fails with ``BrokerUnavailable`` instead of waiting
    for its job's deadline (with Sentinel, set it above the failover time).
    ``warn_unserved``: log a warning at construction when no worker has a live heartbeat on
    this Redis or none ever consumed ``queue`` (``unserved()``), as jobs would only wait.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        queue: str = protocol.DEFAULT_QUEUE,
        timeout: float = 900.0,
        reward_shape: str = "all_or_nothing",
        mode: str = "full",
        max_in_flight: int = 100_000,
        resubmit_on_timeout: bool = False,
        reply_ttl: int = protocol.DEFAULT_REPLY_TTL_S,
        use_cache: bool = True,
        client_id: str | None = None,
        publish_batch: int = 500,
        pop_batch: int = 1000,
        sweep_orphans: bool = True,
        code_key: Callable[[str], str | None] | None = None,
        unreachable_grace: float | None = 30.0,
        warn_unserved: bool = True,
    ) -> None:
        protocol.check_options(reward_shape, mode)
        protocol.check_queue(queue)
        # a value of the wrong type or range is an OptionError naming the setting (core.options)
        options.seconds("timeout", timeout, none_ok=False)
        options.whole("max_in_flight", max_in_flight, minimum=1)
        options.seconds("unreachable_grace", unreachable_grace)
        options.whole("publish_batch", publish_batch, minimum=1)
        options.whole("pop_batch", pop_batch, minimum=1)
        options.whole("reply_ttl", reply_ttl, minimum=1)
        target = defaults.redis_target(redis_url)  # a bad URL is one clear RedisUrlError, before anything starts
        redis_url = target.url
        self.redis_url = redis_url
        self.queue = queue
        self.timeout = timeout
        self.reward_shape = reward_shape
        self.mode = mode
        self.resubmit_on_timeout = resubmit_on_timeout
        self.reply_ttl = reply_ttl
        self.use_cache = use_cache
        self.client_id = client_id or uuid.uuid4().hex
        self.reply_key = protocol.reply_key(self.client_id)
        self.reply_stream_key = protocol.reply_stream_key(self.client_id)
        self.processing_key = protocol.processing_key(self.client_id)
        self.claim_key = protocol.client_claim_key(self.client_id)
        self.pop_batch = pop_batch
        # what makes two completions the same job for evaluate()'s in-flight dedupe (None: the text)
        self.code_key = code_key
        self._claim_token = uuid.uuid4().hex
        self._jobs = JobRegistry(
            reply_to=self.reply_key,
            reply_stream=self.reply_stream_key,
            reply_ttl=reply_ttl,
            use_cache=use_cache,
            client_id=self.client_id,
            client_token=self._claim_token,
            max_in_flight=max_in_flight,
            resubmit=self._publish_resubmit if resubmit_on_timeout else None,
        )
        self.stats = self._jobs.stats
        self._claim_ttl_s = protocol.CLIENT_CLAIM_TTL_S
        self._redis = connect(target, socket_timeout=10, socket_connect_timeout=5, socket_keepalive=True)
        try:
            claimed = self._redis.set(self.claim_key, self._claim_token, nx=True, ex=self._claim_ttl_s)
        except redis.exceptions.OutOfMemoryError as exc:
            self._redis.close()
            raise BrokerFull(f"Redis at {target.safe} is full (maxmemory reached, noeviction): {exc}") from exc
        except redis.RedisError as exc:
            self._redis.close()
            raise BrokerUnavailable(f"cannot reach Redis at {target.safe}: {connection_hint(exc, target)}") from exc
        if not claimed:
            self._redis.close()
            raise OptionError(
                f"client_id {self.client_id!r} is in use by another open FleetClient (Redis key {self.claim_key}): "
                f"two clients would steal each other's replies; use a distinct client_id (a client that died "
                f"without close() releases its id after {self._claim_ttl_s}s)"
            )
        try:
            # the reply stream (protocol.reply_stream_key): made empty here (a previous client of
            # this id may have left entries), its expiry kept by the reader with the claim
            pipe = self._redis.pipeline(transaction=False)
            pipe.xadd(self.reply_stream_key, {"made": "1"}, maxlen=0, approximate=False)
            pipe.expire(self.reply_stream_key, protocol.reply_stream_ttl(reply_ttl))
            pipe.execute()
        except redis.RedisError as exc:
            try:
                self._redis.eval(_RELEASE_CLAIM, 1, self.claim_key, self._claim_token)
            except redis.RedisError:
                pass  # the claim expires on its own
            self._redis.close()
            if isinstance(exc, redis.exceptions.OutOfMemoryError):
                raise BrokerFull(f"Redis at {target.safe} is full (maxmemory reached, noeviction): {exc}") from exc
            raise BrokerUnavailable(f"cannot make the reply stream at {target.safe}: {exc}") from exc
        if sweep_orphans:
            # Jobs of clients that are gone (a crashed trainer's, once its claim expired) would
            # otherwise sit in the queue ahead of this client's jobs until workers drop them.
            self.purge_orphans(budget_s=10.0)
        if warn_unserved:
            # else jobs sent now wait silently until their deadline, then end INTERNAL
            reason = self.unserved()
            if reason is not None:
                log.warning("%s (%s): jobs sent to queue %r wait there until a worker takes them, or for "
                            "timeout=%g s, then end INTERNAL", reason, target.safe, queue, timeout)
        self._publisher = Publisher(redis_url, queue, batch_size=publish_batch)
        # the one path from a job to the queue, which the asyncio batcher shares (producer.submitter)
        self.submitter = Submitter(
            self._jobs, self._publisher, reward_shape=reward_shape, mode=mode, timeout=timeout,
            inline=lambda: self.inline_registry, thread_name=f"cpfleet-publish-{self.client_id[:8]}",
        )
        # problem ids seen in the store: a job naming another is refused at submit (see producer.known_problems)
        self.known_problems = KnownProblems(self._redis)
        self._lock = threading.Lock()  # guards the two attributes below
        self._inline: InlineRegistry | None = None  # created on the first job with inline tests
        # one per event loop; an evaluator holds its loop, so entries are dropped explicitly when
        # their loop has closed (see evaluator()) or the client closes
        self._evaluators: dict[asyncio.AbstractEventLoop, AsyncEvaluator] = {}
        self._replies = ReplyReader(
            redis_url,
            client_id=self.client_id,
            claim_token=self._claim_token,
            pop_batch=pop_batch,
            reply_ttl=reply_ttl,
            jobs=self._jobs,
            commands=self._redis,
            sweep=functools.partial(self.purge_orphans, budget_s=5.0),
            unreachable_grace_s=unreachable_grace,
            republish=self._republish_pending,
            store_again=self._store_again,
        )
        self._replies.start()

    # --- submitting ------------------------------------------------------------------------

    def submit(
        self,
        problem_id: str,
        completion: str | bytes,
        *,
        reward_shape: str | None = None,
        mode: str | None = None,
        job_id: str | None = None,
        timeout: float | None = None,
        wait_for_room: float | None = None,
        language: str | None = None,
    ) -> cf.Future[JobResult]:
        """Publish one job; the future resolves with its JobResult (an unknown problem id raises
        ``UnknownProblemError`` here, see ``submit_many``).
        ``language`` (python3, pypy3, cpp, c, java) fixes the solution's language; None: the
        problem's languages and the completion's fence tag decide."""
        job = {"problem_id": problem_id, "completion": completion, "job_id": job_id, "language": language}
        return self._submit([job], reward_shape, mode, timeout, wait_for_room, positions=False)[0]

    def submit_many(
        self,
        jobs: Iterable[Job],
        *,
        reward_shape: str | None = None,
        mode: str | None = None,
        timeout: float | None = None,
        wait_for_room: float | None = None,
    ) -> list[cf.Future[JobResult]]:
        """Publish jobs in batches; returns their futures in order.

        A job is ``(problem_id, completion)`` or a mapping with ``problem_id``, ``completion`` and
        optional ``job_id``, ``reward_shape``, ``mode``, ``timeout``, ``language`` (or ``tests``
        instead of ``problem_id``: inline tests); any other key is refused. ``job_id`` is only a
        label for the caller (the result carries it back); it need not be unique. Every job is
        validated before anything is published: an invalid one raises ``JobFormatError`` (a
        ValueError; ``JobTypeError`` for a wrong type, also a TypeError) and nothing is sent.
        Likewise a job naming a problem the store does not have raises ``UnknownProblemError``
        (its ``problem_ids`` name them all) and nothing is sent: the problem ids this client has
        not seen in the store yet are checked with one pipelined round trip, and ids found (or
        stored by this client: inline tests, ``register_problems``) are remembered, so known ids
        cost nothing. A problem deleted after that check is answered UNKNOWN_PROBLEM by the worker.

        When ``max_in_flight`` jobs are pending, this blocks until results free room (at most
        ``wait_for_room`` seconds, then FleetBusy); a job's deadline counts from its publication,
        not from this call. BrokerUnavailable (Redis unreachable), BrokerFull (Redis at maxmemory
        with noeviction), FleetBusy and ClientClosed
        (``close()`` before or during the call) stop the call at a batch: that batch and the ones
        after it were not submitted, and the exception's ``submitted`` attribute holds the futures
        of the batches published before it (they resolve as usual).
        """
        return self._submit(jobs, reward_shape, mode, timeout, wait_for_room, positions=True)

    def _submit(
        self, jobs: Iterable[Job], reward_shape: str | None, mode: str | None, timeout: float | None,
        wait_for_room: float | None, *, positions: bool,
    ) -> list[cf.Future[JobResult]]:
        """``submit_many``'s work; ``positions``: a bad job's error names its place in the list
        (``submit`` has one job, whose error needs no place)."""
        options.seconds("wait_for_room", wait_for_room, zero_ok=True)
        specs = self.checked_specs(jobs, reward_shape, mode, timeout, positions)
        return self.submitter.publish(specs, wait_for_room)

    def checked_specs(
        self, jobs: Iterable[Job], reward_shape: str | None, mode: str | None, timeout: float | None,
        positions: bool | Sequence[int],
    ) -> list[JobSpec]:
        """Every job of ``jobs`` validated and its problem known to the store, before anything is
        published (``submit_many``'s promise; ``ShardedFleetClient`` checks every shard's part
        so before it publishes any). ``positions``: a bad job's error names its place, its index
        here (True) or the index given for it (a part of a longer list), or none (False)."""
        if self._jobs.closed:
            raise ClientClosed("FleetClient is closed")
        options.seconds("timeout", timeout, zero_ok=True)  # 0 or None: the client's
        submitter = self.submitter
        require_job_list(jobs)
        specs = []
        for i, job in enumerate(jobs):
            try:
                specs.append(submitter.make(submitter.resolve_inline(job), reward_shape, mode, timeout))
            except (JobFormatError, UnknownLanguage) as exc:  # the same class (JobTypeError stays a TypeError), its place named
                if positions is False:
                    raise
                place = i if positions is True else positions[i]
                raise type(exc)(f"job #{place}: {exc}") from None
        self.known_problems.require(s.problem_id for s in specs)
        return specs

    def _publish_resubmit(self, msg: JobMessage | RunMessage) -> None:
        """Publish one more attempt of a job that missed its deadline (the registry registered it
        first and calls this from the reader thread)."""
        self._publisher.publish([(msg, msg.job_id)])

    def _publish_attempts(self, messages: Sequence[JobMessage | RunMessage]) -> None:
        """Publish republished attempts a batch per round trip, as ``submit_many`` does (a failure
        half-way leaves some queued: their replies are duplicates once the reader tries again)."""
        size = self._publisher.batch_size
        for start in range(0, len(messages), size):
            self._publisher.publish([(msg, msg.job_id) for msg in messages[start : start + size]])

    def _republish_pending(self) -> None:
        """Publish every pending job again: the reader found this client's claim gone, so workers
        dropped the jobs they took meanwhile and the queue may have gone with it (reader thread;
        raises BrokerUnavailable/BrokerFull for the reader to try again)."""
        n = self._jobs.republish(self._jobs.unresolved(), self._publish_attempts)
        if n:
            log.warning("republished %d pending job(s) Redis may have lost", n)

    def _store_again(self, lost: list[tuple[PendingJob, JobResult]]) -> None:
        """Jobs of inline tests answered UNKNOWN_PROBLEM: the store lost the tests after this
        client stored them (Redis restarted without its data, a flush). Store each test set
        again (once per set) and republish its jobs, once (``JobRegistry.resolve`` holds only a
        job's first such answer). A job whose tests are not stored under the id it named keeps
        its answer; one that cannot be stored or republished again is INTERNAL, the judge's own
        failure, with the reason (reader thread)."""
        registry = self.inline_registry
        stored: dict[str, str | Exception] = {}  # tests_digest -> the id stored again, or why not
        again: list[PendingJob] = []
        for entry, result in lost:
            try:
                digest = tests_digest(entry.tests)
            except ValueError:  # cannot happen for tests that were stored once; never strand the job
                self._jobs.finish(entry, result)
                continue
            if digest not in stored:
                registry.forget(digest)
                try:
                    stored[digest] = registry.problem_id(entry.tests)
                except Exception as exc:  # Redis unreachable or full
                    stored[digest] = exc
            pid = stored[digest]
            if isinstance(pid, Exception):
                self._jobs.finish(entry, infra_result(
                    entry.msg, f"the store lost this job's inline tests and storing them again failed: {pid}"))
            elif pid != entry.msg.problem_id:
                self._jobs.finish(entry, result)
            else:
                again.append(entry)
        if not again:
            return
        log.warning("the store lost the inline tests of %d pending job(s): stored them again, republishing", len(again))
        try:
            self._jobs.republish(again, self._publish_attempts)
        except Exception as exc:  # BrokerUnavailable, BrokerFull, PublisherClosed
            for entry in again:
                self._jobs.finish(entry, infra_result(
                    entry.msg, f"the store lost this job's inline tests; republishing the job failed: {exc}"))

    # --- run jobs: execute a program, no judging -------------------------------------------

    def run(
        self,
        code: str | bytes | None = None,
        stdin: Stdin | Sequence[Stdin] = "",
        *,
        language: str | None = None,
        completion: str | bytes | None = None,
        files: Mapping[str, str | bytes] | None = None,
        fetch_files: Sequence[str] = (),
        time_limit_s: float | None = None,
        memory_limit_mb: int | None = None,
        output_cap: int = protocol.DEFAULT_RUN_OUTPUT_CAP,
        timeout: float | None = None,
        job_id: str | None = None,
    ) -> RunJobResult:
        """Run a program on the fleet and wait for what it did: the "run this code" tool.

            r = fleet.run("print(int(input()) * 2)", "21")             # python3 by default
            r.runs[0].stdout, r.runs[0].exit_code                        # ('42\n', 0)
            r = fleet.run(src, ["1 2", "3 4"], language="cpp")          # compiled once, two runs
            r = fleet.run(completion=model_text)                         # first fenced block, as judged

        ``code`` is the program in ``language`` (default python3; also pypy3, cpp, c, java);
        or pass ``completion`` instead: its program is extracted as for judging (``language``,
        if given, the only one accepted; no block: status NO_CODE). ``stdin`` is one input or a
        list of inputs (one run each, in order, sharing one compile). ``files`` (name -> content)
        are placed read-only in each run's working directory; ``fetch_files`` (at most 4 names)
        are read back after each run (at most 12 KiB each). ``time_limit_s`` is CPU seconds per run
        (default 10, at most 60; a worker's language multiplier may raise it: the result says
        what applied), ``memory_limit_mb`` per run (default 1024, at most 16384). ``output_cap``: bytes of stdout and of stderr returned per
        run (the true sizes come too). ``timeout``: seconds to wait before the result is
        INTERNAL (default: the client's). Never raises for the program: see ``RunJobResult``.
        Raises ValueError/TypeError for a malformed request, as ``submit_many`` does for jobs.
        """
        return self.submit_run(
            code, stdin, language=language, completion=completion, files=files, fetch_files=fetch_files,
            time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb, output_cap=output_cap,
            timeout=timeout, job_id=job_id,
        ).result()

    def submit_run(
        self,
        code: str | bytes | None = None,
        stdin: Stdin | Sequence[Stdin] = "",
        *,
        language: str | None = None,
        completion: str | bytes | None = None,
        files: Mapping[str, str | bytes] | None = None,
        fetch_files: Sequence[str] = (),
        time_limit_s: float | None = None,
        memory_limit_mb: int | None = None,
        output_cap: int = protocol.DEFAULT_RUN_OUTPUT_CAP,
        timeout: float | None = None,
        job_id: str | None = None,
        wait_for_room: float | None = None,
    ) -> cf.Future[RunJobResult]:
        """Like ``run``, without waiting: the future resolves with the RunJobResult (never
        raises for the job; ``cancel()`` withdraws it as for judge jobs)."""
        request = RunRequest(
            code=code, stdin=stdin, language=language, completion=completion, files=files,
            fetch_files=_names(fetch_files), time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb,
            output_cap=output_cap, timeout=timeout, job_id=job_id,
        )
        return self.run_many([request], wait_for_room=wait_for_room)[0]

    def run_many(
        self, requests: Iterable[RunRequest | Mapping[str, Any]], *, wait_for_room: float | None = None
    ) -> list[cf.Future[RunJobResult]]:
        """Publish many run jobs at once; their futures, in order. Each request is a
        ``RunRequest`` or a mapping of its fields (``code``, ``stdin``, ``language``, ...). All
        are validated before anything is published; errors and backpressure as ``submit_many``."""
        if self._jobs.closed:
            raise ClientClosed("FleetClient is closed")
        options.seconds("wait_for_room", wait_for_room, zero_ok=True)
        if isinstance(requests, (str, bytes, Mapping, RunRequest)) or not isinstance(requests, Iterable):
            raise JobTypeError(f"run_many takes a list of run requests, got one {type(requests).__name__}: "
                               "pass [RunRequest(...), ...] or [{'code': ..., 'stdin': ...}, ...]")
        specs = []
        for i, r in enumerate(requests):
            if not isinstance(r, (RunRequest, Mapping)):
                raise JobTypeError(f"request #{i}: a RunRequest or a mapping of its fields, got {type(r).__name__} {r!r:.80}")
            specs.append(self.submitter.make_run(r if isinstance(r, RunRequest) else RunRequest(**r)))
        return self.submitter.publish(specs, wait_for_room)

    async def arun(
        self,
        code: str | bytes | None = None,
        stdin: Stdin | Sequence[Stdin] = "",
        *,
        language: str | None = None,
        completion: str | bytes | None = None,
        files: Mapping[str, str | bytes] | None = None,
        fetch_files: Sequence[str] = (),
        time_limit_s: float | None = None,
        memory_limit_mb: int | None = None,
        output_cap: int = protocol.DEFAULT_RUN_OUTPUT_CAP,
        timeout: float | None = None,
        job_id: str | None = None,
        start_within_s: float | None = None,
    ) -> RunJobResult:
        """``run`` awaited: an agent's tool call mid-episode. ``start_within_s``: inputs after the
        first not started that long after it come back NOT_RUN (``RunMessage.start_within_s``). The request is validated and
        registered on the loop (a bad one raises here) and pushed by this client's publishing
        thread, so the loop never waits on Redis and no thread is taken per call; at
        ``max_in_flight`` it waits for room off the loop."""
        request = RunRequest(
            code=code, stdin=stdin, language=language, completion=completion, files=files,
            fetch_files=_names(fetch_files), time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb,
            output_cap=output_cap, timeout=timeout, job_id=job_id, start_within_s=start_within_s,
        )
        if self._jobs.closed:
            raise ClientClosed("FleetClient is closed")
        spec = self.submitter.make_run(request)
        try:
            entries = self.submitter.register([spec], 0.0)
        except FleetBusy:  # full: wait for room on a thread, as submit_run would
            fut = await asyncio.to_thread(lambda: self.run_many([request])[0])
            return await asyncio.wrap_future(fut)
        try:
            await asyncio.wrap_future(self.submitter.publish_in_background(entries))  # BrokerUnavailable etc. raise here
        except asyncio.CancelledError:
            entries[0].future.cancel()  # the caller gave up: withdraw the job (its future, if pushed)
            raise
        # cancelling this await cancels the job's future, which withdraws the job
        result: RunJobResult = await asyncio.wrap_future(entries[0].future)
        return result

    # --- inline test sets -----------------------------------------------------------------

    @property
    def inline_registry(self) -> InlineRegistry:
        """The registry of inline test sets this client has stored (see producer.inline_registry)."""
        with self._lock:
            if self._inline is None:
                self._inline = InlineRegistry(self._redis, on_stored=self.known_problems.add)
            return self._inline

    def cancel_many(self, futures: Iterable[cf.Future[JobResult]]) -> int:
        """Cancel many jobs with one Redis round trip; returns how many were still unresolved
        (those are now cancelled, see ``Future.cancel``). Futures of other clients are skipped."""
        return self._jobs.cancel_futures(_future_list("cancel_many", futures))

    # --- waiting ---------------------------------------------------------------------------

    @staticmethod
    def gather(futures: Sequence[cf.Future[JobResult]], timeout: float | None = None) -> list[JobResult]:
        """Results in the order of ``futures``; TimeoutError if not all are done within ``timeout``."""
        futures = _future_list("gather", futures)
        options.seconds("timeout", timeout, zero_ok=True)
        done, not_done = cf.wait(futures, timeout=timeout)
        if not_done:
            raise TimeoutError(f"{len(not_done)} of {len(futures)} jobs not done after {timeout}s")
        return [f.result() for f in futures]

    @staticmethod
    def as_completed(
        futures: Iterable[cf.Future[JobResult]], timeout: float | None = None
    ) -> Iterator[cf.Future[JobResult]]:
        """The futures as they finish, like ``concurrent.futures.as_completed`` (``.result()`` of
        each is its JobResult, never an exception for the job)."""
        listed = _future_list("as_completed", futures)
        options.seconds("timeout", timeout, zero_ok=True)
        return cf.as_completed(listed, timeout=timeout)

    @staticmethod
    def results_as_completed(
        futures: Iterable[cf.Future[JobResult]], timeout: float | None = None
    ) -> Iterator[JobResult]:
        """The results as they arrive (each JobResult carries its job_id)."""
        # checked here, at the call, not at the first next() of a generator
        return (f.result() for f in FleetClient.as_completed(futures, timeout))

    def map(
        self,
        problems: Iterable[str | Any],
        completions: Iterable[str | bytes],
        *,
        timeout: float | None = None,
        reward_shape: str | None = None,
        mode: str | None = None,
    ) -> Iterator[JobResult]:
        """Like ``Executor.map``: every pair is submitted now, results come in input order.

        ``problems`` holds problem ids or inline test sets. ``timeout`` counts from this call;
        the iterator raises TimeoutError when a result is not there by then.
        """
        options.seconds("timeout", timeout, zero_ok=True)
        futures = self.submit_many(list(zip(problems, completions, strict=True)), reward_shape=reward_shape, mode=mode)
        end = None if timeout is None else time.monotonic() + timeout

        def results() -> Iterator[JobResult]:
            for f in futures:
                yield f.result(None if end is None else max(0.0, end - time.monotonic()))

        return results()

    def evaluate_many(self, jobs: Iterable[Job], **kwargs: Any) -> list[JobResult]:
        """Submit and wait: the results in input order."""
        return self.gather(self.submit_many(jobs, **kwargs))

    @property
    def max_in_flight(self) -> int:
        """The bound on jobs in flight: submitters wait for room beyond it (kept by the registry)."""
        return self._jobs.max_in_flight

    @max_in_flight.setter
    def max_in_flight(self, value: int) -> None:
        self._jobs.max_in_flight = options.whole("max_in_flight", value, minimum=1)

    @property
    def in_flight(self) -> int:
        """Jobs submitted and not yet resolved."""
        return self._jobs.in_flight

    # --- asyncio ---------------------------------------------------------------------------

    async def asubmit(self, problem_id: str, completion: str | bytes, **kwargs: Any) -> asyncio.Future[JobResult]:
        """Like ``submit``; publishing (and waiting for room) runs off the event loop."""
        fut = await asyncio.to_thread(self.submit, problem_id, completion, **kwargs)
        return asyncio.wrap_future(fut)

    async def asubmit_many(self, jobs: Iterable[Job], **kwargs: Any) -> list[asyncio.Future[JobResult]]:
        futures = await asyncio.to_thread(self.submit_many, list(jobs), **kwargs)
        return [asyncio.wrap_future(f) for f in futures]

    async def aevaluate(self, problem_id: str, completion: str | bytes, **kwargs: Any) -> JobResult:
        """One job, awaited: the step of a multi-turn agentic rollout (see also ``evaluate``)."""
        return await (await self.asubmit(problem_id, completion, **kwargs))

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
        """One job in one await, through this event loop's micro-batcher (producer.batcher).

        ``problem`` is a problem id or an inline test set. Calls made in the same loop iteration
        (thousands of agentic episodes) are published together; an identical job (same problem,
        extracted code, language and options) already in flight shares its result when
        ``dedupe``. ``language`` fixes the solution's language as in ``submit``.
        """
        return await self.evaluator().evaluate(
            problem, completion, reward_shape=reward_shape, mode=mode, timeout=timeout, job_id=job_id, dedupe=dedupe,
            language=language,
        )

    def evaluator(self) -> AsyncEvaluator:
        """The micro-batcher bound to the running event loop (one per loop, made on first use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            ev = self._evaluators.get(loop)
            if ev is not None:
                return ev
            # a new loop: let go of the evaluators (and connections) of loops that have ended
            # (``asyncio.run`` per step makes one loop after another)
            ended = [old for old in self._evaluators if old.is_closed()]
            gone = [self._evaluators.pop(old) for old in ended]
            ev = AsyncEvaluator(self, loop)
            self._evaluators[loop] = ev
        for old_ev in gone:
            old_ev.close()
        return ev

    @staticmethod
    async def agather(futures: Sequence[asyncio.Future[JobResult]], timeout: float | None = None) -> list[JobResult]:
        options.seconds("timeout", timeout, zero_ok=True)
        return list(await asyncio.wait_for(asyncio.gather(*futures), timeout))

    @staticmethod
    def aas_completed(
        futures: Iterable[asyncio.Future[JobResult]], timeout: float | None = None
    ) -> AsyncIterator[JobResult]:
        """The results as they arrive (``async for``); the timeout is checked here, at the call,
        as ``results_as_completed`` checks it, not at the first step of the iteration."""
        options.seconds("timeout", timeout, zero_ok=True)
        return _results_as_they_come(list(futures), timeout)

    # --- problems and lifecycle ------------------------------------------------------------

    def register_problems(self, problems: Iterable[Any]) -> Any:
        """Upload problems (``Problem`` objects or problem-format dicts) to the fleet's store;
        their ids count as known to this client's submit check from then on."""
        from cpfleet.core.store import register_problems

        stats = register_problems(self._redis, problems)
        self.known_problems.add(stats.versions)
        return stats

    def broker_reachable(self) -> bool:
        """Whether Redis answers a PING now (any Redis error: False): a health check's question,
        asked on this client's command connection."""
        try:
            return bool(self._redis.ping())
        except redis.RedisError:
            return False

    def unserved(self) -> str | None:
        """Why jobs sent to this client's queue now would only wait: no worker has a live
        heartbeat on this Redis, or none ever consumed the queue (a typo'd name); None when a
        worker is live and the queue has had a consumer, or Redis cannot tell. Asked at
        construction (``warn_unserved``, a logged warning)."""
        return unserved_reason(self._redis, protocol.nodes_key(), protocol.kombu_binding_key(self.queue), self.queue)

    def queue_depth(self) -> int:
        """Jobs waiting in this client's queue, not yet taken by a worker (LLEN); an unreachable
        Redis raises BrokerUnavailable."""
        try:
            return int(self._redis.llen(self.queue))
        except redis.RedisError as exc:
            raise BrokerUnavailable(f"cannot read the length of queue {self.queue!r}: {exc}") from exc

    def purge_orphans(self, budget_s: float = 30.0, *, closing: bool = False) -> int:
        """Remove from this client's queue the jobs of clients that are gone (closed, or crashed
        with their claim expired) and cancelled jobs; returns how many. Best effort within ``budget_s`` seconds:
        what it misses, workers drop unjudged. Runs at construction (``sweep_orphans``) and for
        this client's own queued jobs at ``close()``."""
        options.seconds("budget_s", budget_s, none_ok=False)
        try:
            removed = purge_orphans(self._redis, self.queue, budget_s)
        except redis.RedisError as exc:
            log.warning("could not sweep orphaned jobs from queue %r: %s", self.queue, exc)
            return 0
        if removed and closing:  # this client's own unanswered jobs, on close (or Ctrl-C in a with block)
            log.warning("withdrew %d queued job(s) nobody waits for any more (this client's, closed before "
                        "their results) from queue %r", removed, self.queue)
        elif removed:
            log.warning("removed %d orphaned job(s) of gone clients from queue %r", removed, self.queue)
        return removed

    def close(self) -> None:
        """Stop the reader; jobs still pending resolve INTERNAL ("client closed"); a submit_many
        still running stops at its next batch with ClientClosed. Releases the client_id, which
        withdraws this client's queued jobs: a worker drops, unjudged, every job whose client no
        longer holds its claim (so does a crashed client's claim, once it expires)."""
        if not self._jobs.close():  # from here on nothing registers; submitters waiting for room see it
            return
        self._replies.stop(timeout=5)
        self._publisher.close()  # waits for a publish in progress; later ones raise
        with self._lock:
            evaluators, self._evaluators = list(self._evaluators.values()), {}
        for evaluator in evaluators:
            evaluator.close()
        self.submitter.close()  # its queued pushes fail fast now (the publisher is closed)
        left = self._jobs.fail_all("client closed before the result")
        try:
            self._redis.delete(self.reply_stream_key, self.reply_key, self.processing_key)
            self._redis.eval(_RELEASE_CLAIM, 1, self.claim_key, self._claim_token)
        except redis.RedisError:
            pass
        if left:
            self.purge_orphans(closing=True)  # this client's queued jobs are orphans now: take them out
        self._redis.close()
        self._replies.close()

    def __enter__(self) -> FleetClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


_RELEASE_CLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


async def _results_as_they_come(futures: list[asyncio.Future[JobResult]],
                                timeout: float | None) -> AsyncIterator[JobResult]:
    for next_done in asyncio.as_completed(futures, timeout=timeout):
        yield await next_done


def require_job_list(jobs: object) -> None:
    """JobFormatError or JobTypeError unless ``jobs``, given to ``submit_many`` (of one client or
    of the sharded one), is a collection of jobs: one job (a string, a mapping) or a number
    would be read as something else, or fail as Python's TypeError naming nothing."""
    if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Iterable):
        kind = JobFormatError if isinstance(jobs, Iterable) else JobTypeError  # a TypeError as Python's was
        raise kind(
            f"submit_many takes a list of jobs, got one {type(jobs).__name__}: "
            "pass [(problem_id, completion), ...] or [{'problem_id': ..., 'completion': ...}, ...]"
        )


def _future_list(call: str, given: object) -> list[cf.Future[Any]]:
    """The futures passed to ``call`` as a list (a generator is read once), or JobTypeError naming
    what came instead: one future, a number, a list of results."""
    futures = [] if isinstance(given, cf.Future) or not isinstance(given, Iterable) else list(given)
    if isinstance(given, cf.Future) or not isinstance(given, Iterable) or not all(isinstance(f, cf.Future) for f in futures):
        raise JobTypeError(
            f"{call} takes the list of futures submit_many returned (or a list of submit's futures), "
            f"got {type(given).__name__} {str(given)[:80]!r}"
        )
    return futures


def _names(fetch_files: Sequence[str]) -> Sequence[str]:
    """``fetch_files`` as a tuple, but a single string as it is, for the request check to refuse
    (``tuple("out.txt")`` would ask for the files o, u, t, ...)."""
    return fetch_files if isinstance(fetch_files, str) else tuple(fetch_files)
