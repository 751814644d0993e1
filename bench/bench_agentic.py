"""Agentic rollouts: thousands of concurrent ``await fleet.evaluate(...)`` on one event loop.

Each coroutine stands for one episode awaiting its judgement. For every call we measure the
client's overhead: the time from the call to the await returning, minus the job's own time as
the worker saw it (``timings.queued_ms``, the wait in the Redis queue from publication to
pick-up, plus ``timings.executed_ms``, the evaluation). What is left is what the client adds:
waiting for the micro-batch, publishing, the reply's way back and handing it to the coroutine.
Goal: p50 <= 15 ms with 5,000 concurrent calls.

Two bursts run on one event loop: the loop's first use (its first publish opens the loop's
publishing connection) and a later one (every later step of a training run). The goal holds
for both.

The baseline, in the same run, is the pre-batcher path ``aevaluate`` (one thread hop and one
publish per call) on fewer calls (``--baseline-n``), to keep the run short.

    python bench/bench_agentic.py                    # starts a local fleet (nice'd: 2 CPUs are shared)
    python bench/bench_agentic.py --redis URL --n 5000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpfleet.core.results import JobResult
from cpfleet.producer.client import FleetClient

PROBLEM = {
    "id": "bench/echo",
    "public_tests": [{"input": "7\n", "output": "7\n"}],
    "hidden_tests": [{"input": "8\n", "output": "8\n"}],
}


def completion(i: int) -> str:
    # distinct programs (nothing is deduped or served from the result cache): every call is a job
    return f"```python\n# episode {i}\nprint(input())\n```"


@contextlib.contextmanager
def fleet_url(redis_url: str | None) -> Iterator[str]:
    if redis_url:
        yield redis_url
        return
    from cpfleet.fleet.local import LocalFleet

    with tempfile.TemporaryDirectory() as logs, LocalFleet(flower_port=None, metrics_port=None, log_dir=logs) as f:
        yield str(f.redis_url)


async def run(n: int, call: Callable[[int], Awaitable[JobResult]]) -> tuple[list[float], list[JobResult], float]:
    overheads: list[float] = []
    results: list[JobResult] = []

    async def episode(i: int) -> None:
        t0 = time.perf_counter()
        r = await call(i)
        total_ms = (time.perf_counter() - t0) * 1000.0
        results.append(r)
        overheads.append(total_ms - r.timings.queued_ms - r.timings.executed_ms)

    start = time.perf_counter()
    await asyncio.gather(*(episode(i) for i in range(n)))
    return overheads, results, time.perf_counter() - start


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) >= 2 else xs[0]


def report(name: str, overheads: list[float], results: list[JobResult], wall: float) -> None:
    bad = [r for r in results if r.infra_error or r.reward != 1.0]
    print(
        f"{name}: {len(results)} calls in {wall:.1f} s ({len(results) / wall:.0f}/s); client overhead "
        f"p50 {statistics.median(overheads):.1f} ms, p90 {pct(overheads, 90):.1f} ms, p99 {pct(overheads, 99):.1f} ms"
        + (f"; {len(bad)} not OK" if bad else "")
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--redis", default=None, help="a running fleet (default: start a local one)")
    p.add_argument("--n", type=int, default=5000, help="concurrent evaluate calls")
    p.add_argument("--baseline-n", type=int, default=500, help="calls for the aevaluate baseline (0: skip)")
    args = p.parse_args(argv)
    with contextlib.suppress(OSError):
        os.nice(10)
    with fleet_url(args.redis) as url, FleetClient(url, timeout=600) as fleet:
        fleet.register_problems([PROBLEM])

        async def bursts() -> list[tuple[list[float], list[JobResult], float, str]]:
            out = []
            for burst in range(2):

                async def batched(i: int, burst: int = burst) -> JobResult:
                    return await fleet.evaluate("bench/echo", completion(burst * 10**6 + i), mode="public")

                overheads, results, wall = await run(args.n, batched)
                st = fleet.evaluator().stats
                out.append(
                    (
                        overheads,
                        results,
                        wall,
                        f"{st.flushes} publishes so far, largest batch {st.largest_batch}, {st.deduped} deduped, "
                        f"{st.buffered} not sent at once; the longest publish took {st.publish_ms_max:.0f} ms",
                    )
                )
            return out

        (c_over, c_res, c_wall, c_note), (overheads, results, wall, batching) = asyncio.run(bursts())
        report(f"evaluate, first burst on the loop, {args.n} concurrent", c_over, c_res, c_wall)
        print(f"  {c_note}")
        report(f"evaluate, next burst, {args.n} concurrent", overheads, results, wall)
        print(f"  {batching}")

        async def per_call(i: int) -> JobResult:
            return await fleet.aevaluate("bench/echo", completion(10**7 + i), mode="public")

        if args.baseline_n:
            b_over, b_res, b_wall = asyncio.run(run(args.baseline_n, per_call))
            report(f"baseline aevaluate (one publish per call), {args.baseline_n} concurrent", b_over, b_res, b_wall)
            print(
                f"p50 overhead: evaluate {statistics.median(overheads):.1f} ms vs aevaluate "
                f"{statistics.median(b_over):.1f} ms ({statistics.median(b_over) / max(statistics.median(overheads), 1e-9):.1f}x)"
            )
        worst = max(statistics.median(c_over), statistics.median(overheads))
        print(f"goal p50 <= 15 ms in both bursts: {'met' if worst <= 15.0 else 'NOT met'} ({worst:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
