"""PyPy per test: the exec path (a fresh PyPy per test) against the PyPy fork server, same run.

Two programs, each loaded once per path on one forkserver runner with full isolation (pid
namespace, seccomp, cgroup, uid drop, fresh tmpfs): a trivial one (prints one line: the whole
cost is the per-test overhead) and a small real one (reads 2,000 numbers, sorts them, answers
prefix-sum queries: the usual contest shape). The exec path is the pypy3 language's compile
step and program run line (sandbox/programs.py); the fork server is ``runner.load_pypy``
(sandbox/pypy_zygote.py). Tests alternate between the paths, test by test, so load drifts hit
both alike; each job runs several tests, as a real job does (the fork server forks each next test's
child ahead). Prints the median wall (``runner.run`` as the caller sees it) and CPU (the test's
processes, as the runner accounts it) per test, and the ratios. Goal: <= 5 ms of overhead per
test on the fork server (the trivial program's numbers). Also the job start (load) of each
path. Not a test: no assertions beyond the outputs being right.

    nice .venv/bin/python bench/bench_pypy.py [--jobs 10] [--tests 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

from cpfleet.sandbox import languages, programs
from cpfleet.sandbox.runner import Limits, make_runner

TRIVIAL = 'print("hi")\n'
REAL = """import sys
input = sys.stdin.readline
n = int(input())
a = sorted(map(int, input().split()))
pre = [0]
for x in a:
    pre.append(pre[-1] + x)
q = int(input())
out = []
for _ in range(q):
    l, r = map(int, input().split())
    out.append(pre[r] - pre[l - 1])
print("\\n".join(map(str, out)))
"""


def real_input(seed: int = 7) -> tuple[bytes, bytes]:
    rnd = random.Random(seed)
    n, q = 2000, 2000
    a = [rnd.randint(1, 10**9) for _ in range(n)]
    queries = [sorted((rnd.randint(1, n), rnd.randint(1, n))) for _ in range(q)]
    pre = [0]
    for x in sorted(a):
        pre.append(pre[-1] + x)
    stdin = f"{n}\n{' '.join(map(str, a))}\n{q}\n" + "".join(f"{lo} {r}\n" for lo, r in queries)
    want = "\n".join(str(pre[r] - pre[lo - 1]) for lo, r in queries) + "\n"
    return stdin.encode(), want.encode()


def bench(name: str, source: str, stdin: bytes, want: bytes, rounds: int, per_job: int) -> dict[str, float]:
    limits = Limits(time_s=10, memory_mb=256)
    wall: dict[str, list[float]] = {"exec": [], "fork": []}
    cpu: dict[str, list[float]] = {"exec": [], "fork": []}
    load: dict[str, list[float]] = {"exec": [], "fork": []}
    cache = programs.CompileCache(tempfile.mkdtemp(prefix="cpfleet-bench-"))
    with make_runner("forkserver") as runner:
        if not runner.forks_pypy():
            raise SystemExit("this runner has no PyPy fork server (see its warning)")

        def load_exec() -> None:
            built = programs.compile_program(runner, "pypy3", {"solution.py": source}, ["solution.py"], cache=cache)
            assert built.ok and built.image is not None, built.diagnostics
            runner.load_program(built.image)

        def load_fork() -> None:
            assert runner.load_pypy(source) is None

        loaders = {"exec": load_exec, "fork": load_fork}
        for i in range(rounds + 1):
            for which in ("exec", "fork") if i % 2 else ("fork", "exec"):
                t0 = time.perf_counter()
                loaders[which]()
                if i:  # the first round warms the page cache and the compile cache
                    load[which].append(time.perf_counter() - t0)
                runner.expect_runs(per_job)
                for _ in range(per_job):
                    t1 = time.perf_counter()
                    rr = runner.run(stdin, limits)
                    dt = time.perf_counter() - t1
                    assert rr.stdout == want, (which, rr)
                    if i:
                        wall[which].append(dt)
                        cpu[which].append(rr.cpu_s)
    mw = {k: statistics.median(v) * 1000 for k, v in wall.items()}
    mc = {k: statistics.median(v) * 1000 for k, v in cpu.items()}
    ml = {k: statistics.median(v) * 1000 for k, v in load.items()}
    print(f"{name}: {rounds} jobs of {per_job} isolated tests on each path, median per test")
    print(f"  exec path (fresh PyPy)  wall {mw['exec']:7.2f} ms   cpu {mc['exec']:7.2f} ms   job start {ml['exec']:6.2f} ms")
    print(f"  PyPy fork server        wall {mw['fork']:7.2f} ms   cpu {mc['fork']:7.2f} ms   job start {ml['fork']:6.2f} ms")
    print(f"  speedup                 wall {mw['exec'] / mw['fork']:5.2f}x      cpu {mc['exec'] / mc['fork']:5.2f}x")
    return {"wall": mw["fork"], "cpu": mc["fork"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10, help="jobs per path (each loads the program once)")
    parser.add_argument("--tests", type=int, default=5, help="tests per job")
    args = parser.parse_args()
    print("PyPy:", languages.toolchain_version("pypy3") or "missing", f"({languages.get('pypy3').tools[0]})",
          f"on {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    trivial = bench("trivial (the per-test overhead)", TRIVIAL, b"", b"hi\n", args.jobs, args.tests)
    stdin, want = real_input()
    bench("small real program (sort + 2,000 prefix-sum queries)", REAL, stdin, want, args.jobs, args.tests)
    verdict = "met" if trivial["wall"] <= 5 and trivial["cpu"] <= 5 else "NOT met"
    print(f"goal <= 5 ms per test on the fork server (trivial program): wall {trivial['wall']:.2f} ms, "
          f"cpu {trivial['cpu']:.2f} ms: {verdict}")


if __name__ == "__main__":
    main()
