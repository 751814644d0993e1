"""Inline problems on the client: each distinct test set is stored once, jobs go out by id.

Jobs may be ``{"tests": ..., "completion": ...}`` with the tests in any shape
:func:`cpfleet.producer.inline.problem_from_tests` converts (code_contests, TACO/APPS
``input_output``, LiveCodeBench, PrimeIntellect ``verification_info``, verl
``{"inputs", "outputs", "fn_name"}``). Workers only read problems from the store, so:

- the stored id is the converted problem's content id (``inline/<hash>``): a GRPO group (G
  completions of one prompt) shares one id, re-running a dataset finds its problems stored,
  and two trainers sending the same tests share one stored problem;
- this process remembers, per raw test set (a hash of its canonical JSON), the id it was
  stored under, so a group's later jobs cost neither a conversion nor a round trip; the first
  use goes through the store's ``register_problems``, which compares versions and writes only
  what is new;
- concurrent first uses of one test set (a group submitted from many threads or coroutines at
  once) wait for the one registration in flight instead of each sending it.

A caller that builds the problem record itself (the gateway's Piston route: one test with the
package's limits and checker, which a test set cannot carry) stores it through
``InlineRegistry.record_id``, with the same once-per-process registration and bounded memory.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import redis

from cpfleet.core.errors import BrokerFull, BrokerUnavailable, InlineProblemError
from cpfleet.core.lru import LRU
from cpfleet.producer.inline import content_id, problem_from_tests


def tests_digest(tests: Any) -> str:
    """A stable hash of a raw test set: the canonical JSON (sorted keys) of whatever shape it has.

    A JSON string is parsed first, so the string and the object it encodes hash alike.
    """
    value = _parsed(tests)
    try:
        blob = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise InlineProblemError(f"inline tests must be JSON data: {e}") from None
    return hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def record_key(record: Mapping[str, Any]) -> str:
    """What ``InlineRegistry.record_id`` remembers a record by: its id, which names its content
    (the registry checks that when it stores the record), so a later use hashes nothing however
    large its tests; never equal to a ``tests_digest``."""
    pid = record.get("id")
    if not isinstance(pid, str) or not pid:
        raise InlineProblemError("a problem record needs an id, a non-empty string")
    return "record/" + pid


def _content_named(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """``record`` when its id ends in its ``content_id`` (one id, one content: what lets the
    registry remember it by id), else InlineProblemError."""
    pid = str(record["id"])
    try:
        digest = content_id(record, "")
    except (TypeError, ValueError) as e:
        raise InlineProblemError(f"problem record {pid!r}: its content cannot be read: {e}") from None
    if not pid.endswith(digest):
        raise InlineProblemError(
            f"problem record {pid!r}: its id does not name its content (build the record with "
            f"problem_from_tests, or end its id in content_id(record)); register_problems stores other records"
        )
    return record


def _parsed(tests: Any) -> Any:
    if isinstance(tests, bytes):
        tests = tests.decode("utf-8", "replace")
    if isinstance(tests, str):
        try:
            return json.loads(tests)
        except (ValueError, RecursionError) as e:  # not JSON, or past CPython's digits or nesting
            raise InlineProblemError(f"inline tests are a string but not JSON this judge reads: "
                                     f"{type(e).__name__}: {str(e)[:200]}") from None
    return tests


def problem_record(tests: Any) -> dict[str, Any]:
    """The problem-format record (with its content id) for inline ``tests``."""
    try:
        return problem_from_tests(_parsed(tests))
    except InlineProblemError:
        raise
    except (ValueError, TypeError, KeyError) as e:  # TestShapeError is a ValueError
        raise InlineProblemError(f"cannot use these inline tests: {e}") from None


def store_error(exc: redis.RedisError) -> BrokerFull | BrokerUnavailable:
    """The client's error for a Redis failure while storing a problem: BrokerFull when Redis
    refused the write for want of memory (maxmemory, noeviction), else BrokerUnavailable (a
    ConnectionError), as the publisher raises them for jobs."""
    if isinstance(exc, redis.ResponseError) and str(exc).startswith("OOM"):
        return BrokerFull(f"Redis is full (maxmemory reached, noeviction) while storing inline tests: {exc}")
    return BrokerUnavailable(f"cannot reach Redis to store inline tests: {exc}")


class InlineRegistry:
    """Register each distinct inline test set (or built problem record) once per process;
    thread-safe.

    ``max_remembered`` bounds the memory of registered hashes (an LRU): forgetting one only
    costs a version check (one round trip, nothing written) the next time it is used.
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        max_remembered: int = 100_000,
        on_stored: Callable[[list[str]], None] | None = None,
    ) -> None:
        self._redis = client
        self._on_stored = on_stored  # told each id stored (FleetClient's known-problem set)
        self._lock = threading.Lock()
        # tests_digest of a raw test set, or record_key of a record -> stored id
        self._known: LRU[str, str] = LRU(max_remembered)
        self._inflight: dict[str, threading.Event] = {}
        self.registered = 0  # test sets and records this process sent to the store (new or re-checked)

    def problem_id(self, tests: Any) -> str:
        """The stored problem id for ``tests``, registering them first if this process has not."""
        return self._once(tests_digest(tests), lambda: problem_record(tests), "inline tests do not make")

    def record_id(self, record: Mapping[str, Any]) -> str:
        """The stored id of a built problem-format ``record`` (its limits, checker and languages
        with it, which inline tests cannot carry), registering it first if this process has not:
        each distinct record is sent to the store once, concurrent first uses wait for that one,
        and the memory of it is the same bounded LRU. The record's id must name its content, as
        ``problem_from_tests`` builds it (checked when it is stored; InlineProblemError if not),
        so ``record_key(record)``, its key for ``known`` and ``forget``, is its id alone."""
        return self._once(record_key(record), lambda: _content_named(record), "the record is not")

    def _once(self, digest: str, build: Callable[[], Mapping[str, Any]], invalid: str) -> str:
        """The id remembered under ``digest``, else ``build()``'s record registered (once, however
        many callers ask at the same time) and remembered. A record the store refuses is
        ``InlineProblemError`` (the caller's input), its message led by ``invalid``."""
        while True:
            with self._lock:
                known = self._known.get(digest)
                if known is not None:
                    return known
                waiter = self._inflight.get(digest)
                if waiter is None:
                    done = threading.Event()
                    self._inflight[digest] = done
                    break
            waiter.wait()  # another caller is registering the same one; then look again
        try:
            record = build()
            from cpfleet.core.errors import ProblemFormatError, StoreFull
            from cpfleet.core.store import register_problems

            try:
                register_problems(self._redis, [record])
            except ProblemFormatError as e:
                raise InlineProblemError(f"{invalid} a valid problem: {e}") from None
            except StoreFull as exc:  # refused whole: nothing of the test set is in the store
                raise BrokerFull("Redis is full (maxmemory reached, noeviction) while storing inline tests: "
                                 "the test set was not stored") from exc
            except redis.RedisError as exc:
                # Redis away (or full) is the fleet's state, never the caller's input: the
                # client's own errors for it, which every caller answers as a retryable refusal
                raise store_error(exc) from exc
            pid = str(record["id"])
            if self._on_stored is not None:
                self._on_stored([pid])
            with self._lock:
                self._known.put(digest, pid)
                self.registered += 1
            return pid
        finally:
            with self._lock:
                self._inflight.pop(digest, None)
            done.set()

    def known(self, digest: str) -> str | None:
        """The stored id of the test set with this ``tests_digest`` (or the record with this
        ``record_key``), if this process registered it (no round trip: what lets ``evaluate``
        publish a GRPO group's later jobs from the event loop without a thread hop)."""
        with self._lock:
            return self._known.get(digest)

    def forget(self, digest: str) -> None:
        """Forget the test set or record with this digest: its next use registers it again (what
        a caller does after the fleet answered that the stored problem is gone)."""
        with self._lock:
            self._known.pop(digest)

    def resolve_job(self, job: Mapping[str, Any]) -> Mapping[str, Any]:
        """A job with ``tests`` and no ``problem_id`` becomes the same job with the stored id (its
        tests kept with it: the client stores them again if the store loses them)."""
        if job.get("problem_id") or "tests" not in job:
            return job
        out = dict(job)
        out["problem_id"] = self.problem_id(job["tests"])
        return out
