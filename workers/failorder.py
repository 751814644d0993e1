"""Fail-fast test order: run the hidden tests that most often end a job first.

Most completions early in RL training are wrong, and an all-or-nothing job stops at its first
failing hidden test; in file order a completion that fails test 37 pays for 36 passing tests
first. Which tests catch wrong programs is a property of the problem's tests (the edge case, the
large input), so the fleet learns it from its own results: per problem, one field of the
problem's own hash per hidden test (``protocol.fail_count_field``) counts how often it was the
failure that ended an all-or-nothing job. Each job reads the counts with the problem's version,
in the one ``HMGET`` of the round trip it already makes (the withdrawal check,
``workers.withdrawal``; for the tests of the copy its process holds) and runs the hidden tests by count per unit of cost
(the test's size), highest first, ties in file order; each evaluated job that failed adds one count to the pipeline that pushes
its reply (``replies.COUNT_IF_STORED``: an ``HINCRBY`` while the problem is stored) (time, memory and output limits are not counted: see ``_LIMITS``). The counts are a
greedy set cover learnt online: a test that only catches programs
an earlier test already caught is never the first failure, so it is not moved up.

The reward cannot change (any failure is 0, a pass needs every test: ``sandbox.env.judge_locally``);
the verdict is the first failure found and names its test by file index
(``TestSetSummary.first_failure_index``). Bounded: at most one field per hidden test of the
stored version (the first ``protocol.MAX_COUNTED_TESTS``), dropped by the store when it writes a
changed problem and deleted with the problem (``core.store``). Counts written by a worker still
judging the old version land on the new version and only shuffle the order; indices outside
the tests are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence

from cpfleet.core.protocol import learns_fail_order
from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict


def parse_counts(flat: Sequence[bytes | str | int] | None) -> dict[int, int]:
    """A flat index/count list (as an ``HGETALL`` reply or a Lua script returns it) as {index: count};
    fields that are not non-negative integers are ignored (the hash is advisory, never trusted
    to be well formed)."""
    counts: dict[int, int] = {}
    if not flat:
        return counts
    for i in range(0, len(flat) - 1, 2):
        try:
            index, count = int(flat[i]), int(flat[i + 1])
        except (TypeError, ValueError):
            continue
        if index >= 0 and count > 0:
            counts[index] = count
    return counts


# A test's cost, for the order, is 1 + its bytes (input + expected output) / COST_BYTES: a test
# of 64 KiB costs about as much again as a test's fixed cost (~2 ms) in a Python solution.
COST_BYTES = 64 * 1024


def order_from_counts(counts: dict[int, int], n_tests: int, sizes: Sequence[int] | None = None) -> list[int] | None:
    """The hidden tests' indices by failures per unit of cost, highest first (``sizes``: each
    test's bytes; None: all alike), ties and never-failed tests in file order; None (file
    order) when no count applies to these tests.

    Running the test with the highest chance of failing per unit of cost first is the order that
    minimises the expected cost of finding a failure; the counts stand in for the chance and
    the test's size for its cost (a 1 MB test must catch ~17x as many programs as a tiny one
    to go before it)."""
    if not any(0 <= i < n_tests for i in counts):
        return None

    def score(i: int) -> float:
        c = counts.get(i, 0)
        return c / (1.0 + sizes[i] / COST_BYTES) if sizes is not None and c else float(c)

    return sorted(range(n_tests), key=lambda i: (-score(i), i))


# Failures that cost the most a test can cost. They are not counted: such a test costs its limit
# whenever it fails, so moving it first saves at most the cheap tests before it, and moving it
# before a test that catches the same program with a wrong answer costs the whole limit (on
# codecontests-300 counting them made the learnt order spend more CPU than file order).
_LIMITS = frozenset({Verdict.TIME_LIMIT, Verdict.MEMORY_LIMIT, Verdict.OUTPUT_LIMIT})


def failed_test(result: JobResult) -> int | None:
    """The hidden test to count for a finished job: its first failure, when the job was judged
    here (not served from the result cache: the cached verdict came from another order and is
    already counted) in full or hidden mode with the all-or-nothing shape
    (``learns_fail_order``), the only jobs that run in the learnt order, and the failure was not
    a limit (see ``_LIMITS``). A stop by the job's time budget has no failing test and counts
    nothing."""
    if result.infra_error or result.cache_hit or not learns_fail_order(result.mode, result.reward_shape):
        return None
    if result.hidden.first_failure in _LIMITS:
        return None
    return result.hidden.first_failure_index
