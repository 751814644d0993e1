"""Compiled languages: per-test overhead, the compile cache, the precompiled header.

Three measurements, each against a baseline measured in the same run (ratios, not absolute
numbers, are what carries across machines). Not a test: no assertions, only numbers.

1. ``overhead``: a trivial C++ program (echoes one token) run N times with full isolation
   (a test of a program job: pid namespace, seccomp, cgroup, rlimits, uid drop, fresh tmpfs, no
   network) against a bare ``subprocess.run`` of the same binary with no isolation. Goal: the
   isolated run costs at most 1.5 ms more per test.
2. ``cache``: 64 jobs that are 8 distinct C++ sources (a GRPO group's duplicates), judged by
   ``cpfleet.jobs.pool.judge_iter`` with 2 pool processes and a fresh compile cache: counts the
   compiles (jobs whose ``timings.compile_ms`` is not 0). Goal: 8.
3. ``pch``: a ``#include <bits/stdc++.h>`` solution compiled (confined, no cache) with and
   without the precompiled header, alternating; both binaries give the same output. Goal: >= 2.5x.

    nice .venv/bin/python bench/bench_languages.py [--tests 300] [--pch-rounds 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from cpfleet.core.problem import Problem
from cpfleet.sandbox import programs
from cpfleet.sandbox.runner import Limits, make_runner

ECHO_CPP = "#include <cstdio>\nint main(){ char b[64]; if (std::scanf(\"%63s\", b) == 1) std::puts(b); }\n"
SOLUTION = """#include <bits/stdc++.h>
using namespace std;
int main(){ int n; cin >> n; vector<long long> v(n); for (auto& x : v) cin >> x;
  sort(v.begin(), v.end()); map<long long, int> c; for (auto x : v) c[x]++;
  cout << accumulate(v.begin(), v.end(), 0LL) << ' ' << c.size() << '\\n'; }
"""


def overhead(tests: int) -> None:
    with make_runner("forkserver") as runner:
        built = programs.compile_program(runner, "cpp", {"echo.cpp": ECHO_CPP}, ["echo.cpp"],
                                         cache=programs.CompileCache(tempfile.mkdtemp(prefix="cpfleet-bench-")))
        assert built.ok and built.image is not None, built.diagnostics
        runner.load_program(built.image)
        limits = Limits(time_s=2, memory_mb=256)
        with tempfile.TemporaryDirectory() as d:
            binary = os.path.join(d, "a.out")
            with open(binary, "wb") as f:
                f.write(built.image.files["a.out"][0])
            os.chmod(binary, 0o755)
            for _ in range(20):  # warm both paths
                runner.run(b"x\n", limits)
                subprocess.run([binary], input=b"x\n", capture_output=True, check=True)
            iso, bare = [], []
            for _ in range(tests):  # interleaved, so load drifts hit both alike
                t0 = time.perf_counter()
                rr = runner.run(b"hello\n", limits)
                iso.append(time.perf_counter() - t0)
                assert rr.stdout == b"hello\n", rr
                t0 = time.perf_counter()
                out = subprocess.run([binary], input=b"hello\n", capture_output=True, check=True)
                bare.append(time.perf_counter() - t0)
                assert out.stdout == b"hello\n"
    mi, mb = statistics.median(iso) * 1000, statistics.median(bare) * 1000
    print(f"overhead: {tests} tests of a trivial C++ program, median wall per test")
    print(f"  isolated (program job)  {mi:7.3f} ms")
    print(f"  bare subprocess.run     {mb:7.3f} ms")
    print(f"  isolation overhead      {mi - mb:7.3f} ms per test (goal <= 1.5 ms), ratio {mi / mb:.2f}x")


def cache(jobs: int, distinct: int) -> None:
    from cpfleet.jobs.pool import judge_iter

    root = tempfile.mkdtemp(prefix="cpfleet-bench-cache-")
    os.environ["CPFLEET_COMPILE_CACHE_DIR"] = root  # the pool processes' default cache
    problem = Problem.from_dict({"id": "sum", "hidden_tests": [{"input": "3\n1 2 3\n", "output": "6 3\n"}]})
    sources = [SOLUTION.replace("int main(){", f"int variant{i}(){{ return {i}; }}\nint main(){{") for i in range(distinct)]
    batch = [{"problem_id": "sum", "job_id": str(i), "completion": f"```cpp\n{sources[i % distinct]}```"}
             for i in range(jobs)]
    t0 = time.perf_counter()
    results = list(judge_iter({"sum": problem}, batch, workers=2))
    wall = time.perf_counter() - t0
    compiles = sum(1 for r in results if r.timings.compile_ms > 0)
    rewards = sorted({r.reward for r in results}, key=str)
    entries = len([n for n in os.listdir(os.path.join(root, "artifacts")) if n.endswith(".art")])
    print(f"cache: {jobs} jobs, {distinct} distinct C++ sources, 2 pool processes: {compiles} compiles "
          f"(goal {distinct}), {entries} cache entries, rewards {rewards}, {wall:.1f} s wall")


def pch(rounds: int) -> None:
    with make_runner("forkserver") as runner:
        times: dict[bool, list[float]] = {True: [], False: []}
        outputs: dict[bool, set[bytes]] = {True: set(), False: set()}
        programs.compile_program(runner, "cpp", {"s.cpp": SOLUTION}, ["s.cpp"],  # builds the PCH once
                                 cache=programs.CompileCache(tempfile.mkdtemp(), max_bytes=0))
        for r in range(rounds):
            for use in (r % 2 == 0, r % 2 == 1):
                nocache = programs.CompileCache(tempfile.mkdtemp(prefix="cpfleet-bench-"), max_bytes=0)
                t0 = time.perf_counter()
                built = programs.compile_program(runner, "cpp", {"s.cpp": SOLUTION}, ["s.cpp"], cache=nocache,
                                                 use_pch=use)
                times[use].append(time.perf_counter() - t0)
                assert built.ok and built.image is not None, built.diagnostics
                rr = programs.run_program(runner, built.image, stdin=b"5\n3 1 3 2 9\n")
                outputs[use].add(rr.stdout)
    with_pch, without = statistics.median(times[True]), statistics.median(times[False])
    print(f"pch: {rounds} confined compiles each of a bits/stdc++.h solution (g++ -O2), median")
    print(f"  without PCH {without:6.2f} s   with PCH {with_pch:6.2f} s   speedup {without / with_pch:.2f}x "
          f"(goal >= 2.5x); outputs {'identical' if outputs[True] == outputs[False] else 'DIFFER'}: "
          f"{sorted(outputs[True] | outputs[False])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--distinct", type=int, default=8)
    parser.add_argument("--pch-rounds", type=int, default=4)
    parser.add_argument("--only", choices=("overhead", "cache", "pch"))
    args = parser.parse_args()
    if args.only in (None, "overhead"):
        overhead(args.tests)
    if args.only in (None, "pch"):
        pch(args.pch_rounds)
    if args.only in (None, "cache"):
        cache(args.jobs, args.distinct)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
