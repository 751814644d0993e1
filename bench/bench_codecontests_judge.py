"""Real data through ``cpfleet judge``: how close it gets to the physical limit, and to a naive judge.

Judges the human solution of every problem of the shared CodeContests file
(``codecontests-300.jsonl``) through the real ``cpfleet judge --workers N`` command and reports:

* the wall time against the physical limit: the CPU time the solutions themselves used (summed
  from the results' ``timings.cpu_ms``) divided by the workers. A ratio of 1.0 would mean
  the judge added nothing and never left a worker idle. Goal <= 1.15x.
* the wall time against a naive judge measured in the same run: N threads, each running
  ``python3 solution.py`` per test with no isolation (same interpreter, the same checker, a
  wall-clock timeout at the time limit, public tests then hidden tests, stopping at the first
  hidden failure as all-or-nothing does). Goal: cpfleet >= 1.8x faster.

Needs the shared data: the folder ``$CPFLEET_SHARED_DATA`` names (else a ``shared/data`` folder beside the checkout). Not a test: no assertions.

    .venv/bin/python bench/bench_codecontests_judge.py [--workers 2] [--limit 300]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cpfleet.core.checkers import get_checker
from cpfleet.core.problem import DEFAULT_TIME_LIMIT_S

REPO = Path(__file__).resolve().parents[1]


def _data_file() -> Path:
    env = os.environ.get("CPFLEET_SHARED_DATA")
    for base in ([Path(env)] if env else []) + [p / "shared" / "data" for p in REPO.parents]:
        if (base / "codecontests-300.jsonl").exists():
            return base / "codecontests-300.jsonl"
    sys.exit("codecontests-300.jsonl not found: set CPFLEET_SHARED_DATA")


def _naive_job(record: dict[str, Any], workdir: Path) -> float:
    """Judge one solution the naive way; returns the reward."""
    checker = get_checker(record.get("checker"))
    limit = float(record.get("time_limit_s") or DEFAULT_TIME_LIMIT_S)
    src = workdir / f"{abs(hash(record['id']))}.py"
    src.write_text(record["correct_solutions"][0])

    def passes(test: dict[str, str]) -> bool:
        try:
            out = subprocess.run([sys.executable, str(src)], input=test["input"].encode(), capture_output=True,
                                 timeout=limit)
        except subprocess.TimeoutExpired:
            return False
        return out.returncode == 0 and checker.check(test["output"], out.stdout.decode(errors="replace")).ok

    for t in record["public_tests"]:
        passes(t)  # run for the feedback, as cpfleet does
    return float(all(passes(t) for t in record["hidden_tests"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=300, help="first N problems")
    args = ap.parse_args()
    data = _data_file()
    records = [json.loads(line) for line in data.read_text().splitlines() if line.strip()][: args.limit]
    records = [r for r in records if r.get("correct_solutions") and r.get("hidden_tests")]
    cpfleet = shutil.which("cpfleet", path=str(Path(sys.executable).parent)) or "cpfleet"
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        problems, jobs = d / "problems.jsonl", d / "jobs.jsonl"
        problems.write_text("".join(json.dumps(r) + "\n" for r in records))
        jobs.write_text("".join(
            json.dumps({"problem_id": r["id"], "completion": f"```python\n{r['correct_solutions'][0]}\n```"}) + "\n"
            for r in records))
        t0 = time.perf_counter()
        out = subprocess.run([cpfleet, "judge", str(problems), str(jobs), "--workers", str(args.workers),
                              "--no-progress"], capture_output=True, text=True)
        judge_wall = time.perf_counter() - t0
        if out.returncode != 0:
            sys.exit(out.stderr)
        results = [json.loads(line) for line in out.stdout.splitlines()]
        cpu_s = sum(r["timings"]["cpu_ms"] for r in results) / 1000.0
        passed = sum(r["reward"] == 1.0 for r in results)
        t0 = time.perf_counter()
        with cf.ThreadPoolExecutor(args.workers) as ex:
            naive = list(ex.map(lambda r: _naive_job(r, d), records))
        naive_wall = time.perf_counter() - t0
    limit = cpu_s / args.workers
    print(f"{len(records)} CodeContests human solutions, {args.workers} workers")
    print(f"  cpfleet judge:  {judge_wall:6.1f} s wall, {passed} rewarded 1.0; solutions' own CPU {cpu_s:.1f} s")
    print(f"  physical limit: {limit:6.1f} s (CPU / workers): cpfleet takes {judge_wall / limit:.2f}x (goal <= 1.15x)")
    print(f"  naive judge:    {naive_wall:6.1f} s wall, {int(sum(naive))} rewarded 1.0: cpfleet is "
          f"{naive_wall / judge_wall:.2f}x faster (goal >= 1.8x)")


if __name__ == "__main__":
    main()
