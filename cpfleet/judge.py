"""``cpfleet judge PROBLEMS JOBS``: the whole evaluation on one machine, without any queue.

PROBLEMS is JSONL (optionally .gz), one problem per line (``Problem.from_dict``: at least
``id``, ``public_tests``, ``hidden_tests``; unknown fields ignored). JOBS is JSONL of
``{"problem_id", "completion", "job_id"?}`` (``-`` for stdin; job_id defaults to the job's
0-based index). One JSON object per job goes to stdout in input order (``JobResult.to_dict()``);
progress and a summary go to stderr. Exit status: 0 when every job was judged (whatever its
verdict, infrastructure errors included: they are in the output), 2 for unusable input files.

The reader here is deliberately minimal and strict (any bad line or duplicate id is an error
naming the line): the producer's loader, with caps and skipping, is for datasets.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from cpfleet.core.problem import Problem, ProblemFormatError
from cpfleet.jobs_file import InputFileError as InputError
from cpfleet.jobs_file import read_jobs, read_records
from cpfleet.pool import RUNNER_KINDS, default_workers, judge_iter
from cpfleet.sandbox.env import DEFAULT_MAX_PUBLIC_SHOWN, MODES, REWARD_SHAPES


def read_problems(path: str | Path) -> dict[str, Problem]:
    """Every problem of a JSONL(.gz) file by id; any bad record or duplicate id is an error."""
    problems: dict[str, Problem] = {}
    first_line: dict[str, int] = {}
    for lineno, record in read_records(path):
        try:
            problem = Problem.from_dict(record)  # builds the checker: a bad one fails here
        except ProblemFormatError as e:
            raise InputError(f"{path}:{lineno}: {e}") from None
        if problem.id in problems:
            raise InputError(f"{path}:{lineno}: duplicate problem id {problem.id!r} (first on line {first_line[problem.id]})")
        problems[problem.id] = problem
        first_line[problem.id] = lineno
    return problems


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("problems", metavar="PROBLEMS", help="problems JSONL (optionally .gz)")
    parser.add_argument("jobs", metavar="JOBS", help="jobs JSONL {problem_id, completion, job_id?}; - for stdin")
    parser.add_argument("--reward", choices=REWARD_SHAPES, default="all_or_nothing", help="reward shape")
    parser.add_argument("--mode", choices=MODES, default="full", help="full: hidden tests give the reward; public: public tests only")
    parser.add_argument("--workers", type=int, default=default_workers(), help="judging processes (default: usable CPUs)")
    parser.add_argument("--runner", choices=RUNNER_KINDS, default="forkserver", help="execution backend")
    parser.add_argument(
        "--max-public-shown", type=int, default=DEFAULT_MAX_PUBLIC_SHOWN, help="public tests shown in the observation"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(args: argparse.Namespace) -> int:
    try:
        problems = read_problems(args.problems)
        jobs = read_jobs(args.jobs)
    except InputError as e:
        print(f"cpfleet judge: {e}", file=sys.stderr)
        return 2
    if args.workers < 1:
        print("cpfleet judge: --workers must be >= 1", file=sys.stderr)
        return 2
    print(f"judging {len(jobs)} jobs on {len(problems)} problems with {args.workers} workers", file=sys.stderr)
    verdicts: Counter[str] = Counter()
    rewards: list[float] = []
    infra = 0
    out = sys.stdout
    for result in judge_iter(
        problems,
        jobs,
        workers=min(args.workers, max(1, len(jobs))),
        reward_shape=args.reward,
        mode=args.mode,
        runner_kind=args.runner,
        progress=not args.no_progress,
        max_public_shown=args.max_public_shown,
    ):
        out.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
        out.flush()
        verdicts[str(result.verdict)] += 1
        if result.reward is None:
            infra += 1
        else:
            rewards.append(result.reward)
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    summary = ", ".join(f"{k} {v}" for k, v in verdicts.most_common())
    print(f"judged {len(jobs)} jobs: mean reward {mean:.3f} over {len(rewards)}, infrastructure errors {infra}; {summary}", file=sys.stderr)
    return 0
