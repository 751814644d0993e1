"""The one path from a caller's job to the queue: validate, register, encode, push.

``FleetClient`` (``submit_many``, ``run_many``, ``arun``) and the asyncio micro-batcher
(``producer.batcher``) both submit through one ``Submitter``, so a job is validated by one rule
and registered in one registry (``producer.pending``) whichever way it came, and neither module
reaches into the other's internals. The steps are separate methods because the two callers
order them differently: ``submit_many`` registers and pushes batch by batch on the caller's
thread (``publish``), the batcher validates and registers on its event loop, then pushes either
on the loop's own connection (``encode``, the bytes leave at once) or on this client's
publishing thread (``publish_in_background``).

A job that was registered and then could not be pushed is unregistered before the error
propagates: its future is never handed out, and nothing leaks in the registry.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cpfleet.core import protocol
from cpfleet.core.errors import (
    BrokerFull,
    ClientClosed,
    FleetBusy,
    JobFormatError,
    JobTypeError,
    UnknownLanguage,
)
from cpfleet.core.languages import FENCE_TAGS, LANGUAGES
from cpfleet.core.protocol import RunMessage
from cpfleet.producer.inline import INLINE_PREFIX
from cpfleet.producer.inline_registry import InlineRegistry
from cpfleet.producer.pending import JobRegistry, JobSpec, PendingJob, RunSpec, random_hex
from cpfleet.producer.publisher import BrokerUnavailable, Publisher, PublisherClosed

Job = tuple[str, str | bytes] | Mapping[str, Any]
Stdin = str | bytes


@dataclass(frozen=True)
class RunRequest:
    """One run job for ``FleetClient.run_many`` (the arguments of ``FleetClient.run``)."""

    code: str | bytes | None = None
    stdin: Stdin | Sequence[Stdin] = ""
    language: str | None = None
    completion: str | bytes | None = None
    files: Mapping[str, str | bytes] | None = None
    fetch_files: Sequence[str] = ()
    time_limit_s: float | None = None
    memory_limit_mb: int | None = None
    output_cap: int = protocol.DEFAULT_RUN_OUTPUT_CAP
    timeout: float | None = None
    job_id: str | None = None
    start_within_s: float | None = None


# The keys a job mapping may carry (``FleetClient.submit_many``'s docstring says what each means).
JOB_KEYS = ("problem_id", "tests", "completion", "job_id", "reward_shape", "mode", "timeout", "language")


def check_job_shape(job: object) -> None:
    """Refuse a job that is neither a pair nor a mapping naming its problem, in words that say
    what a job is: unchecked, a bare string would fail to unpack ("not enough values to
    unpack") and a mapping without ``problem_id`` would be a KeyError. A mapping's key outside
    ``JOB_KEYS`` is refused too: a misspelt option (``reward`` for ``reward_shape``) would
    otherwise be judged under the default, and the caller train on rewards it did not ask for."""
    if isinstance(job, Mapping):
        if "problem_id" not in job and "tests" not in job:  # a present but bad problem_id: make() names it
            raise JobFormatError(
                f"a job mapping needs 'problem_id' or 'tests' (and 'completion'), got keys {sorted(map(str, job))[:10]}"
            )
        extra = sorted(map(str, set(job) - set(JOB_KEYS)))
        if extra:
            raise JobFormatError(f"unknown job key(s) {', '.join(map(repr, extra[:10]))}; accepted: {', '.join(JOB_KEYS)}")
        return
    if isinstance(job, (str, bytes)) or not isinstance(job, Sequence) or len(job) != 2:
        raise JobFormatError(
            f"a job is (problem_id, completion) or a mapping with 'problem_id' or 'tests' and 'completion', "
            f"got {type(job).__name__} {str(job)[:60]!r}; submit_many takes a list of jobs, submit one job's two arguments"
        )


class Submitter:
    """Validates, registers and publishes one client's jobs (judge and run jobs alike).

    ``reward_shape``, ``mode`` and ``timeout`` are the client's defaults for a job that does not
    name its own; ``inline`` returns the client's registry of inline test sets (made on first
    use); ``thread_name`` names the publishing thread, made on the first background publish.
    """

    def __init__(
        self,
        jobs: JobRegistry,
        publisher: Publisher,
        *,
        reward_shape: str,
        mode: str,
        timeout: float,
        inline: Callable[[], InlineRegistry],
        thread_name: str,
    ) -> None:
        self.jobs = jobs
        self.publisher = publisher
        self.reward_shape, self.mode, self.timeout = reward_shape, mode, timeout
        self._inline = inline
        self._thread_name = thread_name
        self._lock = threading.Lock()
        self._publish_thread: cf.ThreadPoolExecutor | None = None  # created by the first background publish

    # --- validating ------------------------------------------------------------------------

    def resolve_inline(self, job: Job) -> Job:
        """A job carrying ``tests`` (a mapping without ``problem_id``, or a pair whose first item is
        not a string) gets the id its tests are stored under, registering them the first time."""
        check_job_shape(job)
        if isinstance(job, Mapping):
            if job.get("problem_id") or "tests" not in job:
                return job
            return self._inline().resolve_job(job)
        problem, completion = job
        if isinstance(problem, str):
            return job
        # the tests travel with the job: stored again if the store loses them (see ``make``)
        return {"problem_id": self._inline().problem_id(problem), "tests": problem, "completion": completion}

    def make(
        self, job: Job, reward_shape: str | None = None, mode: str | None = None, timeout: float | None = None
    ) -> JobSpec:
        """Validate one judge job (nothing is stamped here: that happens when it is registered).
        Raises ValueError/TypeError for a job no worker could take."""
        if isinstance(job, Mapping):
            problem_id, completion = job["problem_id"], job.get("completion", "")
            job_id = job.get("job_id")
            reward_shape = job.get("reward_shape") or reward_shape
            mode = job.get("mode") or mode
            timeout = job.get("timeout") or timeout
            language = job.get("language")
        else:
            problem_id, completion = job
            job_id = None
            language = None
        if language is not None and (not isinstance(language, str) or not language):
            raise JobFormatError(f"language must be a non-empty string, got {language!r}")
        if language is not None and language not in LANGUAGES:  # the caller's typo: never an INTERNAL to mask
            raise UnknownLanguage(f"unknown language {language!r}; known: {', '.join(LANGUAGES)}")
        reward_shape, mode = reward_shape or self.reward_shape, mode or self.mode
        protocol.check_options(reward_shape, mode)
        if not isinstance(problem_id, str) or not problem_id or not protocol.encodes_as_utf8(problem_id):
            raise JobFormatError(f"problem_id must be a non-empty UTF-8 string, got {problem_id!r}")
        job_id = random_hex() if job_id is None or job_id == "" else str(job_id)
        if not protocol.encodes_as_utf8(job_id):
            raise JobFormatError(f"job_id must be valid UTF-8 text, got {job_id!r}")
        if isinstance(completion, bytes):
            size = len(completion)  # bytes travel as bytes; the worker decodes them (errors replaced)
        elif isinstance(completion, str):
            completion = protocol.sendable_completion(completion)  # lone surrogates: sent as bytes
            size = len(completion.encode("utf-8") if isinstance(completion, str) else completion)
        else:
            raise JobTypeError(f"completion must be str or bytes, got {type(completion).__name__}")
        too_large = protocol.completion_size_error(job_id, size)
        if too_large is not None:
            raise JobFormatError(too_large)
        # inline tests stay with a job judged by their stored id, so that the client can store
        # them again if the store loses them (``FleetClient._store_again``)
        tests = job.get("tests") if isinstance(job, Mapping) and problem_id.startswith(INLINE_PREFIX) else None
        return JobSpec(job_id, problem_id, completion, reward_shape, mode, self._timeout(timeout), language, tests)

    def make_run(self, req: RunRequest) -> RunSpec:
        """Validate one run request into a message template (the one rule: RunMessage.from_wire)."""
        t = self._timeout(req.timeout)
        fields = run_message_fields(req)
        return RunSpec(fields["job_id"], RunMessage.from_wire(fields), t)  # ProtocolError is a ValueError

    def _timeout(self, timeout: float | None) -> float:
        raw = timeout or self.timeout
        try:
            t = float(raw)
        except (TypeError, ValueError):  # "x", [1]: a bare float() error would not name the field
            raise JobFormatError(f"timeout must be a number of seconds > 0, got {raw!r}") from None
        if not t > 0:  # NaN too: a deadline that never comes, so a lost job would never resolve
            raise JobFormatError(f"timeout must be > 0, got {t}")
        return t

    # --- the registry of jobs in flight (producer.pending) -----------------------------------

    def register(self, specs: Sequence[JobSpec | RunSpec], wait_for_room: float | None) -> list[PendingJob]:
        """Register validated jobs (``JobRegistry.register``: stamped, with futures and deadlines);
        FleetBusy at ``max_in_flight`` after ``wait_for_room``, ClientClosed once closed."""
        return self.jobs.register(specs, wait_for_room)

    def unregister(self, entries: Sequence[PendingJob]) -> None:
        """Forget registered jobs that were not published (``JobRegistry.unregister``)."""
        self.jobs.unregister(entries)

    # --- publishing -----------------------------------------------------------------------

    def publish(self, specs: Sequence[JobSpec | RunSpec], wait_for_room: float | None) -> list[cf.Future[Any]]:
        """Register and publish validated jobs batch by batch on the caller's thread; their
        futures in order. BrokerUnavailable, BrokerFull, FleetBusy and ClientClosed stop it at a
        batch, and the exception's ``submitted`` holds the futures published before it."""
        futures: list[cf.Future[Any]] = []
        chunk = max(1, min(self.publisher.batch_size, self.jobs.max_in_flight))
        for start in range(0, len(specs), chunk):
            try:
                entries = self.register(specs[start : start + chunk], wait_for_room)
            except (FleetBusy, ClientClosed) as exc:
                exc.submitted = futures
                raise
            try:
                self.push(entries, self.encode(entries))
            except (BrokerUnavailable, BrokerFull, ClientClosed) as exc:
                exc.submitted = futures
                raise
            futures.extend(e.future for e in entries)
        return futures

    def encode(self, entries: Sequence[PendingJob]) -> list[bytes]:
        """The queue entries of registered jobs (forgotten again if one cannot be encoded:
        MessageEncodeError cannot happen after ``make``, but no entry may leak)."""
        try:
            return [self.publisher.encode(e.msg, e.msg.job_id) for e in entries]
        except BaseException:
            self.unregister(entries)
            raise

    def push(self, entries: Sequence[PendingJob], payloads: Sequence[bytes]) -> None:
        """Push registered jobs' encoded messages; on failure forget the entries (their futures
        are never handed out) and raise BrokerUnavailable, BrokerFull or ClientClosed."""
        try:
            self.publisher.push(payloads)
        except PublisherClosed as exc:  # close() between registering and publishing
            self.unregister(entries)
            raise ClientClosed("FleetClient closed while submitting") from exc
        except BaseException:
            self.unregister(entries)
            raise

    def publish_in_background(self, entries: Sequence[PendingJob]) -> cf.Future[None]:
        """Stamp, encode and push registered jobs on this client's publishing thread (one
        thread: batches go out in the order they were handed over, and a trainer's own executor
        is never taken). The stamp is renewed there, just before the push, so that a job's
        ``submitted_at`` (its queue wait) and deadline count from its publication."""
        with self._lock:
            if not self.jobs.closed and self._publish_thread is None:
                self._publish_thread = cf.ThreadPoolExecutor(1, thread_name_prefix=self._thread_name)
            pool = None if self.jobs.closed else self._publish_thread
        if pool is not None:
            try:
                return pool.submit(self._stamp_and_push, entries)
            except RuntimeError:  # close() shut the thread down meanwhile
                pass
        self.unregister(entries)
        raise ClientClosed("FleetClient closed while submitting")

    def _stamp_and_push(self, entries: Sequence[PendingJob]) -> None:
        """Stamp registered jobs afresh and push them (on the publishing thread); a job that
        close() resolved meanwhile is not stamped, and the push fails with ClientClosed."""
        self.jobs.restamp(entries)
        self.push(entries, self.encode(entries))

    def close(self) -> None:
        """Stop the publishing thread once its queued pushes have run (they fail fast once the
        publisher is closed, which the client does first)."""
        with self._lock:
            pool, self._publish_thread = self._publish_thread, None
        if pool is not None:
            pool.shutdown(wait=True)


def run_message_fields(req: RunRequest) -> dict[str, Any]:
    """The wire fields of a run request, before its publication stamps it (wire id, reply list,
    claim): what ``RunMessage.from_wire`` validates. Raises ValueError/TypeError for a request
    no worker could take (both or neither of code/completion, an unknown language, a non-text
    stdin); the rest (names, limits, sizes) is the wire rule's to refuse."""
    if (req.code is None) == (req.completion is None):
        raise JobFormatError("give exactly one of code (a program) and completion (text with a fenced block)")
    extract = req.completion is not None
    source = req.completion if extract else req.code
    language = req.language if extract else (req.language or "python3")
    if language is not None and language not in LANGUAGES:
        language = FENCE_TAGS.get(language.lower(), language)  # "python", "c++", ...: the fence tags' names
    if not isinstance(source, str | bytes):
        raise JobTypeError(f"code/completion must be str or bytes, got {type(source).__name__}")
    if isinstance(source, str) and not protocol.encodes_as_utf8(source):
        source = source.encode("utf-8", "surrogatepass")
    if language is not None and language not in LANGUAGES:
        raise UnknownLanguage(f"unknown language {language!r}; known: {', '.join(LANGUAGES)}")
    if req.stdin is None or isinstance(req.stdin, str | bytes):
        stdins = [req.stdin or ""]
    elif isinstance(req.stdin, Iterable) and not isinstance(req.stdin, Mapping):
        stdins = list(req.stdin)
    else:  # a number or a dict: list() would raise a bare TypeError, or take a dict's keys as inputs
        raise JobTypeError(f"stdin must be str or bytes (or a list of them), got {type(req.stdin).__name__}")
    for s in stdins:
        if not isinstance(s, str | bytes):
            raise JobTypeError(f"stdin must be str or bytes (or a list of them), got {type(s).__name__}")
    job_id = random_hex() if not req.job_id else str(req.job_id)
    if not protocol.encodes_as_utf8(job_id):
        raise JobFormatError(f"job_id must be valid UTF-8 text, got {job_id!r}")
    if isinstance(req.fetch_files, str):
        raise JobTypeError("fetch_files must be a list of names, not one string")
    return {
        "v": protocol.RUN_PROTOCOL_VERSION, "kind": protocol.RUN_KIND, "job_id": job_id, "reply_to": "-",
        "code": source, "stdins": [s.encode("utf-8", "surrogatepass") if isinstance(s, str) else s for s in stdins],
        "language": language, "extract": extract, "files": dict(req.files or {}),
        "fetch_files": list(req.fetch_files), "time_limit_s": req.time_limit_s,
        "memory_limit_mb": req.memory_limit_mb, "output_cap": req.output_cap,
        "start_within_s": req.start_within_s,
    }
