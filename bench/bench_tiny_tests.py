"""Tiny tests: what judging costs on top of the solutions' own CPU, APPS-shaped and CodeContests.

On APPS-style sets (``bench/apps_shaped.py`` generates one: many problems, tens of tests each,
a correct solution answering each test in about a millisecond of CPU) the judge's own work per
test is a large share of the total. This runs the real ``cpfleet judge --workers N`` command (a
subprocess, as a user runs it) on the correct solutions, ``--copies`` jobs per problem (a GRPO
group), and reports, from the same run:

* the solutions' own CPU: the results' ``timings.cpu_ms`` summed (each test's processes, from
  their fork to their reaping, as the time limit is judged);
* judging's whole-tree CPU: the user + system CPU of the ``cpfleet judge`` process and every
  process under it (pool processes, fork servers, jobs, test children), from
  ``getrusage(RUSAGE_CHILDREN)`` around it: every one of them is reaped inside the tree;
* **tree CPU / solutions' CPU** (goal <= 1.15x) and the judge's CPU per test on top of the
  solutions';
* the wall-clock ratio of ``bench/bench_codecontests_judge.py``: wall / (solutions' CPU /
  workers). It is meaningful on an idle machine only; the CPU ratio holds under load too.

Then the same on the shared CodeContests human solutions (``codecontests-300.jsonl`` in
``$CPFLEET_SHARED_DATA`` or a ``shared/data`` folder above the repository; skipped, saying so,
when absent). Rounds alternate the two sets. Every job must be rewarded 1.0 on the APPS-shaped
set (the run stops otherwise). Not a test: no assertions.

``--baseline-env CPFLEET_FORK_AHEAD=1`` also judges each set with that environment, interleaved
with the default, in the same rounds (a before/after of a setting in one run).

    .venv/bin/python bench/bench_tiny_tests.py [--workers 2] [--problems 40] [--copies 4] [--rounds 2]
        [--codecontests 300] [--baseline-env NAME=VALUE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import apps_shaped  # noqa: E402
from procs import shared_file  # noqa: E402

GOAL = 1.15


@dataclass(frozen=True)
class Run:
    wall_s: float
    tree_cpu_s: float
    own_cpu_s: float
    tests: int
    jobs: int
    rewarded: int

    @property
    def ratio(self) -> float:
        return self.tree_cpu_s / self.own_cpu_s

    def wall_ratio(self, workers: int) -> float:
        return self.wall_s / (self.own_cpu_s / workers)

    @property
    def overhead_ms_per_test(self) -> float:
        return 1000.0 * (self.tree_cpu_s - self.own_cpu_s) / self.tests


def write_set(d: Path, name: str, records: list[dict[str, Any]], solutions: dict[str, str],
              copies: int) -> tuple[Path, Path]:
    problems, jobs = d / f"{name}-problems.jsonl", d / f"{name}-jobs.jsonl"
    problems.write_text("".join(json.dumps(r) + "\n" for r in records))
    jobs.write_text("".join(
        json.dumps({"problem_id": r["id"], "completion": f"```python\n{solutions[r['id']]}\n```"}) + "\n"
        for _ in range(copies) for r in records))
    return problems, jobs


def judge(cpfleet: str, problems: Path, jobs: Path, workers: int,
          env: dict[str, str] | None = None) -> tuple[Run, list[dict[str, Any]]]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([cpfleet, "judge", str(problems), str(jobs), "--workers", str(workers), "--no-progress"],
                         capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"cpfleet judge failed ({out.returncode}):\n{out.stderr}")
    results = [json.loads(line) for line in out.stdout.splitlines()]
    tree = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    own = sum(r["timings"]["cpu_ms"] for r in results) / 1000.0
    tests = sum(r[part]["run"] for r in results for part in ("public", "hidden"))
    rewarded = sum(r["reward"] == 1.0 for r in results)
    return Run(wall, tree, own, tests, len(results), rewarded), results


def report(name: str, runs: list[Run], workers: int) -> None:
    r = runs[0]
    ratios = [x.ratio for x in runs]
    print(f"{name}: {r.jobs} jobs, {r.tests} tests run ({r.tests / r.jobs:.1f} per job), {r.rewarded} rewarded 1.0")
    for i, x in enumerate(runs, 1):
        print(f"  round {i}: wall {x.wall_s:6.2f} s; solutions' own CPU {x.own_cpu_s:6.2f} s "
              f"({1000 * x.own_cpu_s / x.tests:.2f} ms/test); judging tree CPU {x.tree_cpu_s:6.2f} s; "
              f"tree/own {x.ratio:.3f}x; judge CPU on top {x.overhead_ms_per_test:.3f} ms/test; "
              f"wall/(own/{workers}) {x.wall_ratio(workers):.2f}x")
    print(f"  median tree CPU / solutions' own CPU: {statistics.median(ratios):.3f}x (goal <= {GOAL}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--problems", type=int, default=40, help="APPS-shaped problems generated")
    ap.add_argument("--copies", type=int, default=4, help="jobs per problem (a GRPO group of correct answers)")
    ap.add_argument("--min-tests", type=int, default=15, help="fewest tests of a generated problem")
    ap.add_argument("--max-tests", type=int, default=60, help="most tests of a generated problem")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--codecontests", type=int, default=300, help="first N shared CodeContests problems (0: skip)")
    ap.add_argument("--baseline-env", action="append", default=[], metavar="NAME=VALUE",
                    help="also judge each set with this environment (e.g. CPFLEET_FORK_AHEAD=1), interleaved "
                         "with the default, and report both")
    args = ap.parse_args()
    cpfleet = shutil.which("cpfleet", path=str(Path(sys.executable).parent)) or shutil.which("cpfleet")
    if cpfleet is None:
        sys.exit("cpfleet is not installed in this environment")
    records, solutions = apps_shaped.build(seed=args.seed, problems=args.problems, min_tests=args.min_tests,
                                           max_tests=args.max_tests)
    sets: dict[str, tuple[Path, Path]] = {}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.workers} workers")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        sets["APPS-shaped (generated)"] = write_set(d, "apps", records, solutions, args.copies)
        cc = shared_file("codecontests-300.jsonl") if args.codecontests > 0 else None
        if cc is not None:
            cc_records = [json.loads(line) for line in cc.read_text().splitlines() if line.strip()][: args.codecontests]
            cc_records = [r for r in cc_records if r.get("correct_solutions") and r.get("hidden_tests")]
            sets["CodeContests human solutions"] = write_set(
                d, "cc", cc_records, {r["id"]: r["correct_solutions"][0] for r in cc_records}, 1)
        elif args.codecontests > 0:
            print("CodeContests half skipped: codecontests-300.jsonl not found (set CPFLEET_SHARED_DATA)")
        baseline = dict(kv.split("=", 1) for kv in args.baseline_env)
        variants: list[tuple[str, dict[str, str]]] = [("", {})]
        if baseline:
            variants.insert(0, (" [" + " ".join(args.baseline_env) + "]", baseline))
        runs: dict[str, list[Run]] = {name + label: [] for name in sets for label, _ in variants}
        for rnd in range(args.rounds):
            for name, (problems, jobs) in sets.items():
                for label, env in variants:
                    run, results = judge(cpfleet, problems, jobs, args.workers, env)
                    if name.startswith("APPS") and run.rewarded != run.jobs:
                        bad = [r for r in results if r["reward"] != 1.0][:2]
                        sys.exit(f"a correct APPS-shaped solution was not rewarded: {bad}")
                    runs[name + label].append(run)
                    print(f"round {rnd + 1} {name}{label}: tree/own {run.ratio:.3f}x", file=sys.stderr)
    for name, rs in runs.items():
        report(name, rs, args.workers)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
