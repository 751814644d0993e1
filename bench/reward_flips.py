"""Reward flips under load: the same jobs judged several times must get the same rewards.

Judges the human solution (``correct_solutions[0]``) of every problem of the shared
CodeContests file ``--runs`` times through ``cpfleet judge --workers N`` (the path users run),
pinned to ``--cpus`` CPUs so the judge is oversubscribed (default: 4 workers on 2 CPUs), and
counts the problems whose reward differs between runs (goal: 0). A flip means a verdict that
machine load decided; results marked non-deterministic (wall backstop, memory near the limit,
the job's time budget) are counted too, as are recorded-passing problems that did not pass
(docs/codecontests-human-solutions.json).

Takes minutes (3 runs of 300 problems); run it with ``nice``. Not a test: no assertions.

    nice -n 10 .venv/bin/python bench/reward_flips.py [--runs 3] [--workers 4] [--cpus 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from codecontests_human_solutions import DOC_JSON, as_completion  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("CPFLEET_SHARED_DATA", REPO.parent / "shared" / "data")) / "codecontests-300.jsonl"


def _jobs(data: Path, limit: int | None) -> list[dict[str, str]]:
    jobs = []
    with data.open() as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("correct_solutions"):
                jobs.append({"problem_id": rec["id"], "completion": as_completion(rec["correct_solutions"][0]), "job_id": rec["id"]})
    return jobs[:limit] if limit else jobs


def judge_once(data: Path, jobs_file: Path, workers: int, cpus: set[int]) -> tuple[list[dict[str, object]], float]:
    cmd = [sys.executable, "-m", "cpfleet", "judge", str(data), str(jobs_file), "--workers", str(workers), "--no-progress"]
    started = time.perf_counter()
    out = subprocess.run(
        cmd, capture_output=True, text=True, check=True, cwd=REPO, preexec_fn=lambda: os.sched_setaffinity(0, cpus)
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()], time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="default: codecontests-300.jsonl in $CPFLEET_SHARED_DATA (else a shared/data folder beside the checkout)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--cpus", type=int, default=2, help="CPUs the judge is pinned to (the first N usable)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N problems (a quick look)")
    args = ap.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"shared data not found at {args.data} (pass --data)")
    cpus = set(sorted(os.sched_getaffinity(0))[: args.cpus])
    rewards: dict[str, list[object]] = defaultdict(list)
    verdicts: dict[str, list[str]] = defaultdict(list)
    load_dependent: dict[str, int] = defaultdict(int)
    with tempfile.TemporaryDirectory(prefix="cpfleet-flips-") as tmp:
        jobs_file = Path(tmp) / "jobs.jsonl"
        jobs = _jobs(args.data, args.limit)
        jobs_file.write_text("".join(json.dumps(j) + "\n" for j in jobs))
        for i in range(args.runs):
            results, elapsed = judge_once(args.data, jobs_file, args.workers, cpus)
            for r in results:
                pid = str(r["problem_id"])
                rewards[pid].append(r["reward"])
                verdicts[pid].append(str(r["verdict"]))
                if not r.get("deterministic", True):
                    load_dependent[pid] += 1
            mean = sum(float(r["reward"] or 0) for r in results) / max(1, len(results))
            print(f"run {i + 1}/{args.runs}: {len(results)} jobs in {elapsed:.0f} s, "
                  f"--workers {args.workers} on {len(cpus)} CPUs, mean reward {mean:.3f}", flush=True)
    flipped = sorted(pid for pid, rs in rewards.items() if len(set(rs)) > 1)
    for pid in flipped:
        print(f"  flip {pid}: rewards {rewards[pid]} verdicts {verdicts[pid]}")
    for pid, n in sorted(load_dependent.items()):
        print(f"  load-dependent verdict {pid}: {n} of {args.runs} runs ({verdicts[pid]})")
    recorded = set(json.loads(DOC_JSON.read_text())["passing"]) if DOC_JSON.is_file() else set()
    regressed = sorted(pid for pid in recorded & set(rewards) if any(r != 1.0 for r in rewards[pid]))
    for pid in regressed:
        print(f"  recorded as passing, not 1.0 here: {pid}: {rewards[pid]} {verdicts[pid]}")
    print(f"reward flips: {len(flipped)} of {len(rewards)} problems across {args.runs} runs "
          f"(load-dependent results: {sum(load_dependent.values())}; recorded-passing regressions: {len(regressed)})")


if __name__ == "__main__":
    main()
