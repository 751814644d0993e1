"""Per-test overhead of the runners on a trivial echo problem with many tests.

Compares, in the same run: the fork server (full isolation), the subprocess runner (a fresh
``python3 solution.py`` per test, same isolation) and a bare
``subprocess.run([sys.executable, "-c", code])`` with no isolation at all. Prints medians
of wall time per test, CPU time per test (the runner process plus everything it started,
which stays meaningful on a loaded machine), and the ratios. Not a test: no assertions.

    .venv/bin/python bench/bench_runner.py [--tests 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from cpfleet.sandbox.runner import Limits, make_runner

ECHO = "import sys\nsys.stdout.write(sys.stdin.read())\n"
GOAL_MS = 2.5
GOAL_RATIO = 12.0


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (ppid, utime + stime + cutime + cstime in seconds) for every process."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    return table


def cpu_now(roots: list[int]) -> float:
    """CPU seconds of this process and its reaped children, plus every live process under
    ``roots`` (each process's own time and its reaped children's: counted exactly once)."""
    self_ = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime
    table = _proc_table()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in table:
            total += table[pid][1]
            todo.extend(p for p, (ppid, _) in table.items() if ppid == pid)
    return total


def measure(label: str, run_one: Callable[[int], None], n: int, pids: Callable[[], list[int]]) -> tuple[float, float]:
    for i in range(min(20, n)):
        run_one(i)
    walls = []
    cpu0 = cpu_now(pids())
    for i in range(n):
        t = time.perf_counter()
        run_one(i)
        walls.append(time.perf_counter() - t)
    return statistics.median(walls) * 1000, (cpu_now(pids()) - cpu0) / n * 1000


def bench_runner(kind: str, n: int) -> tuple[float, float]:
    runner = make_runner(kind)
    zpid = runner._proc.pid if getattr(runner, "_proc", None) else None  # type: ignore[attr-defined]
    limits = Limits()
    try:
        assert runner.load(ECHO) is None

        def one(i: int) -> None:
            data = f"{i}\n".encode()
            res = runner.run(data, limits)
            if res.stdout != data:
                raise SystemExit(f"{kind}: wrong output {res!r}")

        def pids() -> list[int]:
            return [zpid] if zpid else []

        return measure(kind, one, n, pids)
    finally:
        runner.close()


def bench_bare(n: int) -> tuple[float, float]:
    def one(i: int) -> None:
        data = f"{i}\n".encode()
        out = subprocess.run([sys.executable, "-c", ECHO], input=data, capture_output=True, check=True).stdout
        if out != data:
            raise SystemExit("bare: wrong output")

    return measure("bare", one, n, lambda: [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests", type=int, default=400, help="tests per round for the fork server")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {"forkserver": [], "subprocess": [], "bare": []}
    for _ in range(args.rounds):
        rows["forkserver"].append(bench_runner("forkserver", args.tests))
        rows["subprocess"].append(bench_runner("subprocess", max(20, args.tests // 10)))
        rows["bare"].append(bench_bare(max(20, args.tests // 10)))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in rows.items()}
    print(f"{'runner':<12} {'wall ms/test':>13} {'cpu ms/test':>12}")
    for k, (w, c) in med.items():
        print(f"{k:<12} {w:>13.2f} {c:>12.2f}")
    fw, fc = med["forkserver"]
    bw, bc = med["bare"]
    sw, sc = med["subprocess"]
    print(f"fork server vs bare subprocess: {bw / fw:.1f}x wall, {bc / fc:.1f}x cpu (goal >= {GOAL_RATIO:g}x)")
    print(f"fork server vs subprocess runner: {sw / fw:.1f}x wall, {sc / fc:.1f}x cpu")
    print(f"fork server per test: {fw:.2f} ms wall, {fc:.2f} ms cpu (goal <= {GOAL_MS} ms)")
    print(f"load average during the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
