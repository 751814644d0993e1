"""``cpfleet judge PROBLEMS JOBS``: the whole evaluation on one machine, without any queue.

PROBLEMS is JSONL (optionally .gz; or parquet / Arrow), one problem per line (``Problem.from_dict``: at least
``id``, ``public_tests``, ``hidden_tests``; unknown fields ignored). JOBS is JSONL of
``{"problem_id", "completion", "job_id"?}`` (``-`` for stdin; job_id defaults to the job's
0-based index). One JSON object per job goes to stdout in input order (``JobResult.to_dict()``);
progress and a summary go to stderr. Exit status: 0 when every job was judged (whatever its
verdict, infrastructure errors included: they are in the output) unless no job got a reward
(every one an infrastructure error: a sandbox that cannot start, a language missing on the host),
then 3; 2 for unusable input files.

PROBLEMS is read by the one problem loader (``cpfleet.datasets.loading``), as ``cpfleet load`` and
``cpfleet validate`` read it: a malformed record, or one the judging rule refuses for
``--mode`` (no hidden tests in full mode, no public tests in public mode), is skipped with a bounded number of warnings and counted; ``--strict`` makes
any of them an error; a file that loads no problem exits 2, as does a duplicate id.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cpfleet.argtypes import nonnegative_int, slot_count
from cpfleet.core import protocol
from cpfleet.core.problem import Problem
from cpfleet.datasets.load import JOBS_STRICT_HELP, add_loading_arguments, load_for_command
from cpfleet.datasets.loading import load_problems
from cpfleet.jobs.files import InputFileError as InputError
from cpfleet.jobs.files import Tally, print_no_jobs, print_skipped, read_jobs
from cpfleet.jobs.pool import RUNNER_KINDS, default_workers, judge_iter
from cpfleet.sandbox.env import DEFAULT_MAX_PUBLIC_SHOWN


def read_problems(path: str | Path, *, strict: bool = False, mode: str = "full") -> dict[str, Problem]:
    """Every problem of a file judgeable in ``mode``, by id, through the one loader (``cpfleet.datasets.loading``)."""
    return load_problems(path, strict=strict, mode=mode).by_id()


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("problems", metavar="PROBLEMS", help="problems JSONL (optionally .gz)")
    parser.add_argument("jobs", metavar="JOBS", help="jobs JSONL {problem_id, completion, job_id?}; - for stdin")
    parser.add_argument("--reward-shape", "--reward", dest="reward_shape", choices=protocol.REWARD_SHAPES, default="all_or_nothing", help="all_or_nothing: 1.0 only if every rewarded test passes; fraction: the share that pass")
    parser.add_argument("--mode", choices=protocol.MODES, default="full", help="full: public tests for the feedback, hidden tests give the reward; hidden: the "
                        "hidden tests first, the same reward, no feedback; public: public tests only (default: full)")
    parser.add_argument("--workers", type=slot_count, default=default_workers(), help="judging processes (default: usable CPUs)")
    parser.add_argument("--runner", choices=RUNNER_KINDS, default="forkserver", help="execution backend")
    parser.add_argument(
        "--max-public-shown", type=nonnegative_int, default=DEFAULT_MAX_PUBLIC_SHOWN, help="public tests shown in the observation"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_loading_arguments(parser, JOBS_STRICT_HELP)


def run(args: argparse.Namespace) -> int:
    loaded = load_for_command(args, "judge")
    if loaded is None:
        return 2
    if loaded.stats.skipped:
        print(f"judge: problems: {loaded.stats.summary()}", file=sys.stderr)
    problems = loaded.by_id()
    try:
        read = read_jobs(args.jobs, strict=args.strict)
    except InputError as e:
        print(f"cpfleet judge: {e}", file=sys.stderr)
        return 2
    print_skipped(read, "judge")
    jobs = read.jobs
    if not jobs:
        print_no_jobs(read, args.jobs, "judge", "cpfleet judge PROBLEMS JOBS")
        return 2
    print(f"judging {len(jobs)} jobs on {len(problems)} problems with {args.workers} workers", file=sys.stderr)
    tally = Tally()
    out = sys.stdout
    results = judge_iter(
        problems,
        jobs,
        workers=min(args.workers, max(1, len(jobs))),
        reward_shape=args.reward_shape,
        mode=args.mode,
        runner_kind=args.runner,
        progress=not args.no_progress,
        max_public_shown=args.max_public_shown,
        unavailable=loaded.stats.skipped_ids,
    )
    try:
        for result in results:
            # counted before it is printed: an interrupt in the middle of a write never leaves
            # a printed result out of the summary
            tally.add(result)
            out.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
            out.flush()
    except BrokenPipeError:  # the output's reader went away: nobody wants the rest (cli.py says so)
        results.close()
        raise
    except KeyboardInterrupt:
        results.close()  # stops the pool at once; the results printed so far stand
        print(f"\ncpfleet judge: interrupted: {tally.done} of {len(jobs)} judged ({tally.summary()})", file=sys.stderr)
        return 130
    print(f"judged {len(jobs)} jobs: {tally.summary()}", file=sys.stderr)
    for line in tally.infra_lines("judge"):
        print(line, file=sys.stderr)
    return 3 if tally.judged_none else 0
