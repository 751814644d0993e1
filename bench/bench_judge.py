"""Per-test cost on the path users call: ``cpfleet judge --workers 1`` on trivial tests.

Builds one problem with ``--tests`` trivial tests (echo a number) and one with a single test,
judges the same ``--jobs`` completions against each through the real ``cpfleet judge`` command
(a subprocess, exactly as a user runs it), and reports:

* per test, whole command: wall time of the many-test run / (jobs x tests)
* per test, marginal: (many-test wall - one-test wall) / (jobs x (tests - 1)): the cost of one
  more test once the process, the runner and the job are set up
* baseline, measured in the same run: a bare ``subprocess.run([python, "-c", code])`` per test
  with no isolation at all, which is what a naive judge pays

and the ratios. Rounds alternate the commands so a slow phase of a noisy machine hits both.
Not a test: no assertions.

    .venv/bin/python bench/bench_judge.py [--tests 400] [--jobs 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CODE = "print(int(input()) + 1)\n"
COMPLETION = f"```python\n{CODE}```\n"
GOAL_MS = 2.0
GOAL_RATIO = 12.0


def _write_problem(path: Path, pid: str, n_tests: int) -> None:
    tests = [{"input": f"{i}\n", "output": f"{i + 1}\n"} for i in range(n_tests)]
    problem = {"id": pid, "public_tests": tests[:1], "hidden_tests": tests}
    path.write_text(json.dumps(problem) + "\n")


def _judge(cpfleet: str, problems: Path, jobs: Path) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(
        [cpfleet, "judge", str(problems), str(jobs), "--workers", "1", "--no-progress"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f"cpfleet judge failed ({out.returncode}):\n{out.stderr}")
    results = [json.loads(line) for line in out.stdout.splitlines()]
    bad = [r for r in results if r["reward"] != 1.0]
    if bad:
        sys.exit(f"unexpected results: {bad[:2]}")
    return wall


def _bare(n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        subprocess.run([sys.executable, "-c", CODE], input=f"{i}\n", capture_output=True, text=True, check=True)
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests", type=int, default=400)
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bare-tests", type=int, default=100, help="bare python3 runs per round")
    args = ap.parse_args()
    cpfleet = shutil.which("cpfleet", path=str(Path(sys.executable).parent)) or shutil.which("cpfleet")
    if cpfleet is None:
        sys.exit("cpfleet is not installed in this environment")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        many, one, jobs = d / "many.jsonl", d / "one.jsonl", d / "jobs.jsonl"
        _write_problem(many, "bench/echo", args.tests)
        _write_problem(one, "bench/echo", 1)
        jobs.write_text("".join(json.dumps({"problem_id": "bench/echo", "completion": COMPLETION}) + "\n"
                                for _ in range(args.jobs)))
        walls_many, walls_one, bares = [], [], []
        for r in range(args.rounds):
            walls_many.append(_judge(cpfleet, many, jobs))
            walls_one.append(_judge(cpfleet, one, jobs))
            bares.append(_bare(args.bare_tests))
            print(f"round {r + 1}: judge {args.jobs}x{args.tests} tests {walls_many[-1]:.2f} s, "
                  f"{args.jobs}x1 test {walls_one[-1]:.2f} s, bare python3 {bares[-1] * 1e3:.1f} ms/test",
                  file=sys.stderr)
    n = args.jobs * args.tests
    whole = statistics.median(w / n for w in walls_many)
    marginal = statistics.median((m - o) / (args.jobs * (args.tests - 1)) for m, o in zip(walls_many, walls_one, strict=True))
    bare = statistics.median(bares)
    print(f"cpfleet judge --workers 1, {args.jobs} jobs x {args.tests} trivial tests, median of {args.rounds} rounds")
    print(f"  per test, whole command:  {whole * 1e3:6.2f} ms   ({bare / whole:5.1f}x faster than bare python3)")
    print(f"  per test, marginal:       {marginal * 1e3:6.2f} ms   ({bare / marginal:5.1f}x faster than bare python3)")
    print(f"  bare python3 -c per test: {bare * 1e3:6.2f} ms   (no isolation)")
    print(f"  goals: <= {GOAL_MS} ms per test and >= {GOAL_RATIO}x bare python3 (whole command)")


if __name__ == "__main__":
    main()
