"""Per-process LRU of problems from the Redis problem store, bounded in bytes, never stale.

A worker process judges many jobs of the same few problems (a GRPO group is N completions of
one problem), so decoding the problem once and keeping it is most of the lookup cost saved.
Staleness is not allowed: every ``get`` asks Redis for the stored version (one ``HGET`` of a
24-character field) and refetches when it differs from the cached one, so a problem reloaded
with new tests is judged with the new tests from the next job on. An id deleted from the store
is dropped from the cache and reported as unknown.

The bound is in bytes of decoded test data (what actually fills the worker's memory), not in
entries: one problem with 30 MB of tests weighs as much as a thousand small ones. A problem
larger than the whole bound is returned but not kept.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

import redis

from cpfleet.core.errors import OptionError
from cpfleet.core.lru import LRU
from cpfleet.core.problem import Problem
from cpfleet.core.store import fetch_problem, fetch_version

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_PER_TEST_OVERHEAD = 120  # TestCase object + tuple slot, beyond the two strings


@dataclass(frozen=True, slots=True)
class CacheLookup:
    problem: Problem
    version: str
    hit: bool  # True: served from this process's memory (only the version was read from Redis)
    outcome: str  # "hit", "miss" (first fetch in this process) or "refresh" (the version changed)


@dataclass(slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0  # first fetch of an id in this process
    refreshes: int = 0  # fetched again because the stored version changed
    unknown: int = 0  # ids not in the store
    evictions: int = 0
    oversized: int = 0  # fetched problems larger than max_bytes (served, not kept)


def problem_size(problem: Problem) -> int:
    """Approximate bytes of memory a decoded problem holds (dominated by its test strings)."""
    size = sys.getsizeof(problem.description) + 512
    for t in (*problem.public_tests, *problem.hidden_tests):
        size += sys.getsizeof(t.input) + sys.getsizeof(t.output) + _PER_TEST_OVERHEAD
    return size


class ProblemCache:
    """``get(problem_id) -> (Problem, version) | None``; thread-safe, one instance per process."""

    def __init__(self, redis_client: redis.Redis, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise OptionError(f"max_bytes must be >= 0, got {max_bytes}")
        self._client = redis_client
        self.max_bytes = max_bytes
        # id -> (problem, stored version), weighed in bytes of decoded test data
        self._entries: LRU[str, tuple[Problem, str]] = LRU(max_weight=max_bytes, weigh=lambda e: problem_size(e[0]))
        self._lock = threading.Lock()
        self.stats = CacheStats()

    def get(self, problem_id: str) -> tuple[Problem, str] | None:
        found = self.lookup(problem_id)
        return None if found is None else (found.problem, found.version)

    def lookup(self, problem_id: str, *, known_version: str | None = None, version_known: bool = False) -> CacheLookup | None:
        """Like ``get``, also saying whether the problem came from memory (for ``cache_hit``).

        ``version_known``: the caller read the stored version (``known_version``, None when the
        id is not stored) in this job's own round trip just now, so it is not asked again."""
        version = known_version if version_known else fetch_version(self._client, problem_id)
        with self._lock:
            if version is None:
                self.stats.unknown += 1
                self._entries.pop(problem_id)
                return None
            entry = self._entries.peek(problem_id)
            if entry is not None and entry[1] == version:
                self._entries.touch(problem_id)
                self.stats.hits += 1
                return CacheLookup(entry[0], version, True, "hit")
        # Fetch outside the lock: tens of MB may take a while and other ids need not wait.
        fetched = fetch_problem(self._client, problem_id)
        with self._lock:
            if fetched is None:  # deleted between the two round trips
                self.stats.unknown += 1
                self._entries.pop(problem_id)
                return None
            problem, stored_version = fetched
            outcome = "refresh" if problem_id in self._entries else "miss"
            if outcome == "refresh":
                self.stats.refreshes += 1
            else:
                self.stats.misses += 1
            evicted = self._entries.evictions
            if not self._entries.put(problem_id, (problem, stored_version)):
                self.stats.oversized += 1
            self.stats.evictions += self._entries.evictions - evicted
            return CacheLookup(problem, stored_version, False, outcome)

    def peek(self, problem_id: str) -> tuple[Problem, str] | None:
        """The copy this process holds and its version, without asking Redis (it may be stale:
        the caller checks the version it reads from Redis against this one before relying on
        anything derived from it)."""
        with self._lock:
            return self._entries.peek(problem_id)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @property
    def bytes(self) -> int:
        return self._entries.weight

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, problem_id: object) -> bool:
        return problem_id in self._entries

    def cached_ids(self) -> list[str]:
        """Ids in LRU order, least recently used first."""
        with self._lock:
            return list(self._entries)
