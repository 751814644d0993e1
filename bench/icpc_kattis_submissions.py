"""Judge the jury submissions of the shared ICPC/Kattis file and compare with the jury's verdicts.

    CPFLEET_TESTLIB_DIR=/path/to/testlib \\
    .venv/bin/python bench/icpc_kattis_submissions.py [--data PATH] [--languages python3] [--workers N]
        [--include-interactive] [--problem ID ...]

Every submission becomes a completion (one fenced block) and goes through
``cpfleet.jobs.pool.judge_iter`` exactly as a model's would: the problem's own checker
(exact_tokens, float with Kattis flags, the jury's output validator, or the interactor),
all-or-nothing over all its tests (the samples, then the secret tests, as Kattis judges). Expectation (the data README): ``accepted`` gets 1.0,
``wrong_answer`` 0.0. Only problems whose package states a time limit are counted for the
non-interactive set (elsewhere the contest derived it from the jury's slowest solution).
Prints one line per submission and a summary; exits 1 if any counted submission disagrees.
tests/test_icpc_kattis.py runs the same path.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cpfleet.core.problem import Problem  # noqa: E402
from cpfleet.datasets.formats.kattis import DEFAULT_MEMORY_MB  # noqa: E402
from cpfleet.jobs.pool import default_workers, judge_iter  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("CPFLEET_SHARED_DATA", REPO.parent / "shared" / "data")) / "icpc-kattis-31.jsonl.gz"
FENCE_TAG = {"python3": "python", "cpp": "cpp", "c": "c", "java": "java"}
EXPECTED_REWARD = {"accepted": 1.0, "wrong_answer": 0.0}
# A package that states no memory limit is judged with the judges' default, as `cpfleet prepare`
# gives it (problemtools and DOMjudge: 2 GiB), not cpfleet's 512 MB: the jury's accepted FFT
# solutions of gcpc2021/decryptingzodiac need ~800 MB and were MEMORY_LIMIT under 512.
KATTIS_DEFAULT_MEMORY_MB = DEFAULT_MEMORY_MB


@dataclass(frozen=True, slots=True)
class Case:
    problem_id: str
    file: str
    language: str
    expected: str
    interactive: bool

    @property
    def job_id(self) -> str:
        return f"{self.problem_id}::{self.file}"


def load(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def completion(source: str, language: str) -> str:
    fence = "````" if "```" in source else "```"
    return f"{fence}{FENCE_TAG.get(language, language)}\n{source.rstrip()}\n{fence}\n"


def select(
    records: Iterable[dict[str, Any]], languages: set[str], *, include_interactive: bool, only: set[str] | None = None
) -> tuple[dict[str, Problem], list[Case], list[dict[str, Any]]]:
    """Problems, the counted cases, and their jobs: submissions whose jury verdict is accepted or
    wrong_answer, on problems with a stated time limit (interactive ones: any limit)."""
    problems: dict[str, Problem] = {}
    cases: list[Case] = []
    jobs: list[dict[str, Any]] = []
    for rec in records:
        if only and rec["id"] not in only:
            continue
        interactive = rec["checker"]["type"] == "interactive"
        if interactive and not include_interactive:
            continue
        if not interactive and rec.get("time_limit_s") is None:
            continue
        # As `cpfleet prepare` of the package gives it: Kattis accepts a submission only when
        # data/sample passes too (the reward covers the samples, then the secret tests), and it
        # judges "Python 3" with PyPy (python3_interpreter)
        problem = Problem.from_dict({**rec, "hidden_tests": rec["public_tests"] + rec["hidden_tests"],
                                    "memory_limit_mb": rec.get("memory_limit_mb") or KATTIS_DEFAULT_MEMORY_MB,
                                    "python3_interpreter": "pypy3"})
        for sub in rec.get("submissions") or []:
            if sub["language"] not in languages or sub["expected"] not in EXPECTED_REWARD:
                continue
            case = Case(rec["id"], sub["file"], sub["language"], sub["expected"], interactive)
            problems[rec["id"]] = problem
            cases.append(case)
            jobs.append({"problem_id": rec["id"], "completion": completion(sub["source"], sub["language"]),
                         "job_id": case.job_id, "language": sub["language"]})
    return problems, cases, jobs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--languages", default="python3", help="comma-separated: python3, cpp, c, java")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--runner", default="forkserver")
    ap.add_argument("--include-interactive", action="store_true")
    ap.add_argument("--problem", action="append", help="only these problem ids")
    args = ap.parse_args(argv)
    problems, cases, jobs = select(load(args.data), set(args.languages.split(",")),
                                   include_interactive=args.include_interactive,
                                   only=set(args.problem) if args.problem else None)
    started = time.perf_counter()
    bad = 0
    for case, result in zip(cases, judge_iter(problems, jobs, workers=min(args.workers, len(jobs)),
                                                  runner_kind=args.runner, progress=False), strict=True):
        want = EXPECTED_REWARD[case.expected]
        ok = result.reward == want
        bad += not ok
        note = "" if ok else f"  <-- expected {want}: {result.infra_message or result.observation[-300:]!r}"
        print(f"{'ok ' if ok else 'BAD'} {case.job_id} [{case.expected}] reward={result.reward} {result.verdict}{note}")
    print(f"{len(cases) - bad}/{len(cases)} as the jury says, in {time.perf_counter() - started:.1f}s")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
