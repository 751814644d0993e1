"""The one bounded least-recently-used map of the house.

Every memory a long-lived process keeps of what it met (a worker's decoded problems, a client's
stored inline test sets and the problem ids it knows are stored, a runner's interactor vouches,
the gateway's answers kept for a refused caller's retry) is bounded: a trainer or a fleet meets
an unbounded number of distinct keys, and the process must hold the ones it uses most, never
all of them. Each such memory is an ``LRU``, bounded in entries, in weight (bytes, as the caller
weighs a value), or both; the least recently used entries go first.

Why not ``cachetools.LRUCache``: it takes one bound (a count, or a size function, not both, which
the gateway's kept answers need), has no read that leaves the order alone (a worker's ``peek``
at its copy of a problem is not a use) and no listing in LRU order, and keeps three dicts per
cache where one ``OrderedDict`` does.

Not thread-safe: each user composes several steps (look up, fetch, count, store) under a lock
of its own, so a lock here would be a second one taken for nothing. Only the standard library
is imported: any layer may use it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from cpfleet.core.errors import OptionError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A map of at most ``max_entries`` entries and at most ``max_weight`` in total ``weigh(value)``
    (either bound may be None, not both). ``get``, ``touch`` and ``put`` are uses; ``peek``, ``in``
    and iteration are not. A value heavier than ``max_weight`` alone is not kept."""

    __slots__ = ("_entries", "_weights", "_weight", "_weigh", "max_entries", "max_weight", "evictions")

    def __init__(
        self,
        max_entries: int | None = None,
        *,
        max_weight: int | None = None,
        weigh: Callable[[V], int] | None = None,
    ) -> None:
        if max_entries is None and max_weight is None:
            raise OptionError("an LRU needs a bound: max_entries, max_weight or both")
        if max_entries is not None and max_entries < 0:
            raise OptionError(f"max_entries must be >= 0, got {max_entries}")
        if max_weight is not None and max_weight < 0:
            raise OptionError(f"max_weight must be >= 0, got {max_weight}")
        if (max_weight is None) != (weigh is None):
            raise OptionError("max_weight and weigh go together")
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._weigh = weigh
        self._entries: OrderedDict[K, V] = OrderedDict()  # least recently used first
        self._weights: dict[K, int] = {}  # only when weighed
        self._weight = 0
        self.evictions = 0  # entries dropped to make room (not those popped or replaced)

    def get(self, key: K) -> V | None:
        """The value (a use: it becomes the most recent), None when absent."""
        value = self._entries.get(key)
        if value is not None or key in self._entries:
            self._entries.move_to_end(key)
        return value

    def touch(self, key: K) -> bool:
        """Whether ``key`` is kept; a use when it is (for a set, whose values say nothing)."""
        if key not in self._entries:
            return False
        self._entries.move_to_end(key)
        return True

    def peek(self, key: K) -> V | None:
        """The value without using it (the order is left alone), None when absent."""
        return self._entries.get(key)

    def put(self, key: K, value: V) -> bool:
        """Keep ``value`` as the most recent entry (replacing any under ``key``), dropping the
        least recently used entries past the bounds. False: it weighs more than ``max_weight``
        (or ``max_entries`` is 0) and is not kept; any old value under ``key`` is gone then too."""
        entries = self._entries
        if self._weigh is not None:
            weight = self._weigh(value)
            if weight < 0:
                raise OptionError(f"a value must weigh >= 0, got {weight}")
            if (self.max_weight is not None and weight > self.max_weight) or self.max_entries == 0:
                self.pop(key)
                return False
            self._weight += weight - self._weights.get(key, 0)
            self._weights[key] = weight
        elif self.max_entries == 0:
            return False
        if key in entries:
            entries.move_to_end(key)
        entries[key] = value
        # the new entry is the most recent and fits alone: only older ones go
        while (self.max_entries is not None and len(entries) > self.max_entries) or (
            self.max_weight is not None and self._weight > self.max_weight
        ):
            old, _ = entries.popitem(last=False)
            self._weight -= self._weights.pop(old, 0)
            self.evictions += 1
        return True

    def pop(self, key: K) -> V | None:
        """Remove ``key``; its value, None when absent."""
        value = self._entries.pop(key, None)
        if self._weights:
            self._weight -= self._weights.pop(key, 0)
        return value

    def clear(self) -> None:
        self._entries.clear()
        self._weights.clear()
        self._weight = 0

    @property
    def weight(self) -> int:
        """The kept values' total weight (0 when not weighed)."""
        return self._weight

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        """Keys, least recently used first."""
        return iter(self._entries)

    def values(self) -> Iterator[V]:
        """Values, least recently used first."""
        return iter(self._entries.values())

    def items(self) -> Iterator[tuple[K, V]]:
        return iter(self._entries.items())
