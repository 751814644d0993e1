"""What judging adds on top of the runner, and what the judge pool gains.

    .venv/bin/python bench/env_overhead.py [--tests 200] [--jobs 40] [--runner forkserver]

1. Per test: ``runner.run`` alone (the baseline, measured in the same run) vs ``env.judge_locally``
   (extraction, limits, checker, observation, result) on an echo problem with many tests.
2. Per job: ``judge_iter`` with 1 process (in-process) vs all usable CPUs (spawn pool).
Medians of several rounds; ratios printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpfleet.core.problem import Problem
from cpfleet.jobs.pool import default_workers, judge_iter
from cpfleet.sandbox.env import judge_locally
from cpfleet.sandbox.runner import Limits, make_runner

SOURCE = "import sys\nsys.stdout.write(sys.stdin.read())\n"


def echo_problem(n_tests: int) -> Problem:
    tests = [{"input": f"{i} {i * i}\n", "output": f"{i} {i * i}\n"} for i in range(n_tests)]
    return Problem.from_dict({"id": "echo", "public_tests": tests[:3], "hidden_tests": tests[3:]})


def per_test(runner_kind: str, n_tests: int, rounds: int) -> tuple[float, float]:
    problem = echo_problem(n_tests)
    tests = problem.public_tests + problem.hidden_tests
    limits = Limits(time_s=problem.time_limit_s, memory_mb=problem.memory_limit_mb)
    completion = f"```python\n{SOURCE}```\n"
    bare, full = [], []
    with make_runner(runner_kind) as runner:
        version = problem.content_version()
        judge_locally(problem, completion, runner, problem_version=version)  # warm-up
        for _ in range(rounds):
            t = time.perf_counter()
            runner.load(SOURCE)
            for test in tests:
                runner.run(test.input.encode(), limits)
            bare.append((time.perf_counter() - t) / len(tests))
            t = time.perf_counter()
            result = judge_locally(problem, completion, runner, problem_version=version)
            full.append((time.perf_counter() - t) / len(tests))
            assert result.reward == 1.0, result.observation
    return statistics.median(bare) * 1000, statistics.median(full) * 1000


def per_job(runner_kind: str, n_jobs: int, workers: int) -> float:
    problem = echo_problem(20)
    jobs = [{"problem_id": "echo", "completion": f"```python\n{SOURCE}```\n"} for _ in range(n_jobs)]
    t = time.perf_counter()
    results = list(judge_iter({"echo": problem}, jobs, workers=workers, runner_kind=runner_kind))
    elapsed = time.perf_counter() - t
    assert all(r.reward == 1.0 for r in results)
    return elapsed / n_jobs * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--runner", default="forkserver", choices=["forkserver", "subprocess"])
    args = ap.parse_args()
    bare, full = per_test(args.runner, args.tests, args.rounds)
    print(f"per test ({args.tests} tests, {args.runner}): runner.run {bare:.2f} ms, judge_locally {full:.2f} ms, "
          f"ratio {full / bare:.2f}x, judging overhead {full - bare:.3f} ms/test")
    cpus = default_workers()
    one = per_job(args.runner, args.jobs, 1)
    many = per_job(args.runner, args.jobs, cpus)
    print(f"per job (20 tests, {args.jobs} jobs, pool start included): 1 process {one:.1f} ms, "
          f"{cpus} processes {many:.1f} ms, speedup {one / many:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
