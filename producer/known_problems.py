"""Which problem ids the fleet's store has, as far as this client has seen.

A job naming a problem the store does not have is the caller's permanent mistake (a typo, or
``cpfleet load`` not run), so ``FleetClient`` refuses it at submit with ``UnknownProblemError``
and publishes nothing, rather than letting a worker answer each job UNKNOWN_PROBLEM. Checking
costs one pipelined round trip of HEXISTS (of the version field) per batch, and only for ids not seen before: ids found
present (and ids this client stored itself: inline tests, ``register_problems``) are remembered
in a bounded LRU, so a steady stream of known ids costs no Redis command at all. A problem
deleted after it was remembered is still answered UNKNOWN_PROBLEM by the worker.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import redis

from cpfleet.core import protocol
from cpfleet.core.errors import BrokerUnavailable, UnknownProblemError
from cpfleet.core.lru import LRU

_PIPELINE_CHUNK = 10_000  # HEXISTS commands per pipeline execute: bounds one request's size


class KnownProblems:
    """A bounded, thread-safe set of problem ids known to be in the store."""

    def __init__(self, client: redis.Redis, *, max_remembered: int = 100_000) -> None:
        self._redis = client
        self._lock = threading.Lock()
        self._known: LRU[str, None] = LRU(max_remembered)
        self.checks = 0  # round trips made to check ids (what a test or an operator can watch)

    def add(self, problem_ids: Iterable[str]) -> None:
        """Remember ids as present (this client just stored them)."""
        with self._lock:
            for pid in problem_ids:
                self._known.put(pid, None)

    def unchecked(self, problem_ids: Iterable[str]) -> list[str]:
        """The distinct ids not remembered as present (no round trip), in first-seen order."""
        out: dict[str, None] = {}
        with self._lock:
            for pid in problem_ids:
                if not self._known.touch(pid) and pid not in out:
                    out[pid] = None
        return list(out)

    def missing(self, problem_ids: Iterable[str]) -> list[str]:
        """The distinct ids the store does not have: ids not remembered are checked with one
        pipelined HEXISTS round trip (per 10,000 ids) and remembered when present. Redis
        unreachable is ``BrokerUnavailable``."""
        todo = self.unchecked(problem_ids)
        if not todo:
            return []
        present: list[str] = []
        absent: list[str] = []
        try:
            for start in range(0, len(todo), _PIPELINE_CHUNK):
                chunk = todo[start : start + _PIPELINE_CHUNK]
                pipe = self._redis.pipeline(transaction=False)
                for pid in chunk:
                    # the version field, not the key: it is what makes a problem stored (the
                    # hash also holds its fail counts, protocol.fail_count_field)
                    pipe.hexists(protocol.problem_key(pid), protocol.PROBLEM_FIELD_VERSION)
                self.checks += 1
                for pid, found in zip(chunk, pipe.execute(), strict=True):
                    (present if found else absent).append(pid)
        except redis.RedisError as exc:
            raise BrokerUnavailable(f"cannot reach Redis to check problem ids in the store: {exc}") from exc
        self.add(present)
        return absent

    def require(self, problem_ids: Iterable[str]) -> None:
        """Raise ``UnknownProblemError`` naming every id the store does not have."""
        absent = self.missing(problem_ids)
        if absent:
            raise unknown_problems_error(absent)


def unknown_problems_error(problem_ids: list[str]) -> UnknownProblemError:
    """The error for jobs naming problems the store does not have (nothing of them was sent)."""
    shown = ", ".join(repr(p) for p in problem_ids[:10]) + (f" and {len(problem_ids) - 10} more" if len(problem_ids) > 10 else "")
    return UnknownProblemError(
        f"unknown problem id(s) {shown}: the fleet's problem store has no such problem (load them with "
        f"`cpfleet load`, or FleetClient.register_problems, or send the tests inline); nothing was submitted",
        problem_ids,
    )
