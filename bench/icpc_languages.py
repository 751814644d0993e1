"""The jury submissions of the shared ICPC/Kattis problems, in C++, C and Java, through the judge.

Reads ``$CPFLEET_SHARED_DATA/icpc-kattis-31.jsonl.gz`` and judges every ``accepted`` and
``wrong_answer`` submission in the chosen languages on the problems that state a time limit and
use a comparison checker (``exact_tokens``, ``float``; problems with their own validator or
interactor need the checker programs of the formats work). Expected: accepted -> reward 1.0,
wrong_answer -> 0.0. Prints every exception with its verdict and why, and a summary.

    nice .venv/bin/python bench/icpc_languages.py [--workers 2] [--sample N] [--languages cpp,c,java]

``--sample N`` takes at most N submissions per (problem, language, expected verdict): the quick
check the test suite runs (tests/test_icpc_languages.py uses the same selection).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from cpfleet.core.checkers import get_checker
from cpfleet.core.errors import CheckerSpecError
from cpfleet.core.problem import Problem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from icpc_kattis_submissions import KATTIS_DEFAULT_MEMORY_MB  # one home for the Kattis default

DEFAULT_PATH = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "icpc-kattis-31.jsonl.gz"
COMPARISON_CHECKERS = ("exact_tokens", "float")
EXPECTED_REWARD = {"accepted": 1.0, "wrong_answer": 0.0}
FENCE = {"cpp": "cpp", "c": "c", "java": "java", "python3": "python"}


def data_path() -> Path:
    shared = os.environ.get("CPFLEET_SHARED_DATA")
    return Path(shared) / "icpc-kattis-31.jsonl.gz" if shared else DEFAULT_PATH


def checker_of(record: dict[str, Any]) -> dict[str, Any]:
    """The record's checker where this checkout can build it; else (before the formats work adds
    Kattis ``exact_tokens`` and ``validator_flags``) the equivalent built-in comparison:
    ``tokens`` (whitespace tokens, case-sensitive) and ``float`` with the stated tolerance."""
    checker = dict(record["checker"])
    try:
        get_checker(checker)
        return checker
    except CheckerSpecError:
        pass
    if checker["type"] == "exact_tokens":
        return {"type": "tokens"}
    tol = float(checker.get("float_tolerance") or checker.get("float_absolute_tolerance") or 1e-6)
    return {"type": "float", "abs": tol, "rel": tol}


def selection(records: Iterable[dict[str, Any]], languages: tuple[str, ...], sample: int | None,
              time_scale: float = 1.0) -> tuple[dict[str, Problem], list[dict[str, Any]]]:
    """The problems with a stated time limit and a comparison checker, and one job per chosen
    submission. ``time_scale`` multiplies the stated limits: Kattis sized them on its own judges
    (the jury's slowest accepted run times a safety margin), and a slower or busier host needs
    them scaled, as DOMjudge and Kattis calibrate a new judge host."""
    problems: dict[str, Problem] = {}
    jobs: list[dict[str, Any]] = []
    for r in records:
        if r.get("time_limit_s") is None or r["checker"]["type"] not in COMPARISON_CHECKERS:
            continue
        problems[r["id"]] = Problem.from_dict({
            "id": r["id"], "public_tests": r["public_tests"], "hidden_tests": r["hidden_tests"],
            "time_limit_s": r["time_limit_s"] * time_scale, "memory_limit_mb": r.get("memory_limit_mb") or KATTIS_DEFAULT_MEMORY_MB,
            "checker": checker_of(r),
        })
        taken: Counter[tuple[str, str]] = Counter()
        for s in r["submissions"]:
            if s["language"] not in languages or s["expected"] not in EXPECTED_REWARD:
                continue
            if sample is not None and taken[(s["language"], s["expected"])] >= sample:
                continue
            taken[(s["language"], s["expected"])] += 1
            jobs.append({"problem_id": r["id"], "job_id": f"{r['id']}:{s['file']}", "language": s["language"],
                         "expected": s["expected"], "completion": f"```{FENCE[s['language']]}\n{s['source']}\n```"})
    return problems, jobs


def load(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--languages", default="cpp,c,java")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="multiply the stated time limits (this host against Kattis's judges)")
    args = parser.parse_args()
    path = data_path()
    if not path.exists():
        print(f"shared data not found at {path} (set CPFLEET_SHARED_DATA)", file=sys.stderr)
        return 2
    from cpfleet.jobs.pool import judge_iter

    problems, jobs = selection(load(path), tuple(args.languages.split(",")), args.sample, args.time_scale)
    print(f"{len(jobs)} submissions on {len(problems)} problems ({args.languages}), workers={args.workers}")
    t0 = time.perf_counter()
    tally: Counter[tuple[str, str, bool]] = Counter()
    compile_s = 0.0
    for job, result in zip(jobs, judge_iter(problems, jobs, workers=args.workers), strict=True):
        ok = result.reward == EXPECTED_REWARD[job["expected"]] and not result.infra_error
        tally[(job["language"], job["expected"], ok)] += 1
        compile_s += result.timings.compile_ms / 1000.0
        if not ok:
            why = result.infra_message or (result.stopped or result.observation.splitlines()[0] if result.observation else "")
            print(f"  EXCEPTION {job['job_id']} [{job['language']}] expected {job['expected']}: reward {result.reward} "
                  f"{result.verdict} hidden {result.hidden.passed}/{result.hidden.total} - {why[:200]}")
    wall = time.perf_counter() - t0
    for (lang, expected, ok), n in sorted(tally.items()):
        print(f"  {lang:5s} {expected:13s} {'as expected' if ok else 'EXCEPTIONS':12s} {n}")
    print(f"wall {wall:.0f} s, compile {compile_s:.0f} s summed over jobs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
