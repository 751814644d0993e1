"""Run jobs through a real fleet: what one test costs as a run job against the same test in a
native judge job, and what coalescing one program's tests into one multi-input run job saves.

    .venv/bin/python bench/bench_runjobs.py [--programs 40] [--tests 10] [--rounds 3]

Redis + one prefork worker (concurrency = CPU count); the same trivial Python program on the
same tests, three ways, alternating in each round (medians printed):
  A. native: one judge job per program, its tests the problem's hidden tests (result cache off)
  B. coalesced: one run job per program, its tests as the job's stdins (what a gateway does
     with verl's per-test /run_code calls of one completion)
  C. per test: one single-input run job per test (verl's calls as they arrive)
Per-test throughput of B and C is printed as a ratio to A (the issue's goal for the gateway:
per-test throughput through /run_code >= 0.8x native jobs). Outputs are checked: a wrong or
INTERNAL answer stops the benchmark.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_fleet import Worker, cores  # noqa: E402

from cpfleet.core.results import RunStatus  # noqa: E402
from cpfleet.fleet.redis_server import RedisServer  # noqa: E402
from cpfleet.producer.client import FleetClient, RunRequest  # noqa: E402

PROGRAM = "n = int(input())\nprint(n * n)\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--programs", type=int, default=40, help="programs (completions) per shape and round")
    p.add_argument("--tests", type=int, default=10, help="tests per program")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    inputs = [f"{i}\n" for i in range(args.tests)]
    expected = [f"{i * i}\n" for i in range(args.tests)]
    # distinct programs (a comment differs), so the result cache could not help even if it were on
    programs = [f"# program {k}\n{PROGRAM}" for k in range(args.programs)]
    problem = {"id": "bench/runjobs", "public_tests": [],
               "hidden_tests": [{"input": i, "output": o} for i, o in zip(inputs, expected, strict=True)]}
    per_test: dict[str, list[float]] = {"native": [], "coalesced": [], "per_test": []}
    with tempfile.TemporaryDirectory(prefix="cpfleet-bench-run-") as tmp, RedisServer() as server:
        worker = Worker(server.url, "forkserver", Path(tmp) / "worker.log")
        try:
            with FleetClient(server.url, queue="bench-forkserver", use_cache=False, timeout=3600,
                             max_in_flight=10**6) as fleet:
                fleet.register_problems([problem])
                # warm every pool process (runner started, first compile paid)
                fleet.gather(fleet.run_many([RunRequest(code=PROGRAM, stdin="1")] * 4 * cores()), timeout=600)

                def native() -> float:
                    t0 = time.perf_counter()
                    results = fleet.gather(fleet.submit_many(
                        [(problem["id"], f"```python\n{c}```") for c in programs]), timeout=3600)
                    wall = time.perf_counter() - t0
                    bad = [r for r in results if r.reward != 1.0]
                    if bad:
                        raise SystemExit(f"native job failed: {bad[0].verdict} {bad[0].infra_message}")
                    return wall

                def coalesced() -> float:
                    t0 = time.perf_counter()
                    results = fleet.gather(fleet.run_many([RunRequest(code=c, stdin=inputs) for c in programs]),
                                           timeout=3600)
                    wall = time.perf_counter() - t0
                    for r in results:
                        if [x.stdout for x in r.runs] != expected:
                            raise SystemExit(f"coalesced run job wrong: {r.status} {r.infra_message}")
                    return wall

                def one_per_test() -> float:
                    t0 = time.perf_counter()
                    futures = fleet.run_many([RunRequest(code=c, stdin=i) for c in programs for i in inputs])
                    results = fleet.gather(futures, timeout=3600)
                    wall = time.perf_counter() - t0
                    outs = [r.runs[0].stdout if r.status == RunStatus.FINISHED and r.runs else None for r in results]
                    if outs != expected * len(programs):
                        raise SystemExit("per-test run job wrong or INTERNAL")
                    return wall

                n_tests = args.programs * args.tests
                for _ in range(args.rounds):
                    for name, fn in (("native", native), ("coalesced", coalesced), ("per_test", one_per_test)):
                        per_test[name].append(n_tests / fn())
        finally:
            worker.stop()
    med = {k: statistics.median(v) for k, v in per_test.items()}
    print(f"cpfleet run-job benchmark: {cores()} cores, {args.programs} programs x {args.tests} tests, "
          f"medians of {args.rounds} alternating rounds")
    print(f"  {'native judge jobs':<40} {med['native']:8.0f} tests/s")
    print(f"  {'run jobs, one per program (coalesced)':<40} {med['coalesced']:8.0f} tests/s   "
          f"{med['coalesced'] / med['native']:.2f}x native")
    print(f"  {'run jobs, one per test':<40} {med['per_test']:8.0f} tests/s   "
          f"{med['per_test'] / med['native']:.2f}x native")
    return 0


if __name__ == "__main__":
    sys.exit(main())
