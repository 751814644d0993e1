"""The house's one bounded LRU (core/lru.py): its bounds, what counts as a use, and its weights,
which the worker's problem cache, the client's registries, the runner's vouches and the
gateway's kept answers all rely on."""

from __future__ import annotations

import pytest

from cpfleet.core.lru import LRU


def test_the_least_recently_used_entry_goes_first_and_get_and_touch_are_uses() -> None:
    lru: LRU[str, int] = LRU(3)
    for i, key in enumerate("abc"):
        assert lru.put(key, i)
    assert lru.get("a") == 0  # a is now the most recent, b the least
    lru.put("d", 3)
    assert list(lru) == ["c", "a", "d"] and lru.evictions == 1
    assert lru.touch("c") and not lru.touch("b")
    lru.put("e", 4)
    assert list(lru) == ["d", "c", "e"] and "a" not in lru and lru.evictions == 2


def test_peek_membership_and_iteration_leave_the_order_alone() -> None:
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.peek("a") == 1 and "a" in lru and list(lru.items()) == [("a", 1), ("b", 2)]
    lru.put("c", 3)  # a was only peeked at: it is still the least recent
    assert list(lru) == ["b", "c"] and lru.peek("a") is None


def test_none_values_make_a_bounded_set() -> None:
    lru: LRU[str, None] = LRU(2)
    lru.put("a", None)
    lru.put("b", None)
    assert lru.get("a") is None and lru.touch("a")  # present, and now the most recent
    lru.put("c", None)
    assert list(lru) == ["a", "c"]


def test_replacing_a_value_is_a_use_and_reweighs_it() -> None:
    lru: LRU[str, bytes] = LRU(max_weight=10, weigh=len)
    lru.put("a", b"1234")
    lru.put("b", b"1234")
    assert lru.weight == 8
    lru.put("a", b"12")  # smaller now, and the most recent
    assert lru.weight == 6 and list(lru) == ["b", "a"]
    lru.put("c", b"123456")  # 12 > 10: b, the least recent, goes
    assert list(lru) == ["a", "c"] and lru.weight == 8 and lru.evictions == 1


def test_a_value_heavier_than_the_bound_is_not_kept_and_evicts_nothing() -> None:
    lru: LRU[str, bytes] = LRU(max_weight=10, weigh=len)
    lru.put("a", b"12345")
    lru.put("big", b"x" * 5)
    assert not lru.put("big", b"x" * 11)  # the old value under the key is gone too
    assert list(lru) == ["a"] and lru.weight == 5 and lru.evictions == 0


def test_both_bounds_hold_at_once() -> None:
    lru: LRU[int, bytes] = LRU(3, max_weight=100, weigh=len)
    for i in range(5):
        lru.put(i, b"x")
    assert list(lru) == [2, 3, 4]  # the count bound
    lru.put(5, b"x" * 100)  # the weight bound: all the others go
    assert list(lru) == [5] and lru.weight == 100


def test_pop_and_clear_give_back_the_weight() -> None:
    lru: LRU[str, bytes] = LRU(max_weight=10, weigh=len)
    lru.put("a", b"123")
    lru.put("b", b"45")
    assert lru.pop("a") == b"123" and lru.pop("a") is None and lru.weight == 2
    lru.clear()
    assert len(lru) == 0 and lru.weight == 0
    assert list(lru.values()) == []


def test_a_bound_of_zero_keeps_nothing() -> None:
    lru: LRU[str, int] = LRU(0)
    assert not lru.put("a", 1) and len(lru) == 0


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"max_entries": -1}, {"max_weight": 5}, {"max_entries": 5, "weigh": len}, {"max_weight": -1, "weigh": len}],
)
def test_a_bound_is_required_and_checked(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        LRU(**kwargs)


def test_a_negative_weight_is_refused() -> None:
    lru: LRU[str, int] = LRU(max_weight=10, weigh=lambda v: v)
    with pytest.raises(ValueError):
        lru.put("a", -1)
