"""Reward integrity of one job on the real fork-server runner: the per-job budget, what a limit
message says, which verdicts depend on machine load, and a job's judging memory."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator

import pytest

from cpfleet.core.checkers import get_checker
from cpfleet.core.problem import Problem
from cpfleet.core.problem import TestCase as Case
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.judging import judge_test
from cpfleet.sandbox.observation import CLIP_CHARS, PublicTestView, display_prefix, format_public_test
from cpfleet.sandbox.runner import CodeRunner, Limits
from cpfleet.sandbox.runners import make_runner
from cpfleet.sandbox.verdicts import cpu_rlimit_s


@pytest.fixture(scope="module")
def runner() -> Iterator[CodeRunner]:
    r = make_runner("forkserver")
    yield r
    r.close()


def py(code: str) -> str:
    return f"```python\n{code}\n```\n"


def _problem(n_public: int = 4, n_hidden: int = 10, **extra: object) -> Problem:
    return Problem.from_dict(
        {
            "id": "inc",
            "public_tests": [{"input": f"{i}\n", "output": f"{i + 1}\n"} for i in range(n_public)],
            "hidden_tests": [{"input": f"{100 + i}\n", "output": f"{101 + i}\n"} for i in range(n_hidden)],
            **extra,
        }
    )


SLEEPER = py("import time\ntime.sleep(60)")
SPINNER = py("while True:\n    pass")
HOG = py("x = bytearray(400 * 1024 * 1024)\nprint(len(x))")
FLOOD = py("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)")


@pytest.mark.parametrize("shape", ["all_or_nothing", "fraction"])
@pytest.mark.parametrize(
    ("code", "limits", "verdict"),
    [
        (SLEEPER, {"time_limit_s": 0.2}, Verdict.TIME_LIMIT),
        (SPINNER, {"time_limit_s": 0.2}, Verdict.TIME_LIMIT),
        (HOG, {"memory_limit_mb": 64}, Verdict.MEMORY_LIMIT),
        (FLOOD, {}, Verdict.OUTPUT_LIMIT),
    ],
    ids=["sleep", "spin", "memory", "output"],
)
def test_the_first_limit_verdict_ends_the_job_with_reward_zero(
    runner: CodeRunner, code: str, limits: dict[str, object], verdict: Verdict, shape: str
) -> None:
    r = evaluate(_problem(**limits), code, runner, reward_shape=shape)
    assert (r.verdict, r.reward, r.infra_error) == (verdict, 0.0, False), r.infra_message
    # no further test was started, public or hidden
    assert (r.public.run, r.hidden.run) == (1, 0)
    assert [t.verdict for t in r.public.tests] == [verdict]
    assert r.observation.count("[NOT RUN | the job stopped at its first ") == 3
    assert r.stopped.startswith(f"{verdict} at public test 1")
    assert "(job stopped: " in r.observation and "13 tests not run, counted as failed" in r.observation


def test_a_limit_on_a_hidden_test_pays_nothing_even_under_fraction(runner: CodeRunner) -> None:
    # right on every test but spins forever on inputs >= 103: two hidden tests passed first
    code = py("n = int(input())\nwhile n >= 103:\n    pass\nprint(n + 1)")
    r = evaluate(_problem(time_limit_s=0.3), code, runner, reward_shape="fraction")
    assert (r.verdict, r.reward) == (Verdict.TIME_LIMIT, 0.0)
    assert (r.public.passed, r.hidden.passed, r.hidden.run) == (4, 3, 4)
    assert r.stopped.startswith("TIME_LIMIT at hidden test 4: CPU time limit 0.3s exceeded")
    assert r.deterministic


def test_the_job_time_budget_stops_a_program_that_is_slow_on_every_test(runner: CodeRunner) -> None:
    # 0.4 s of sleep per test stays under each test's wall backstop (4 s), never under the
    # job's budget: the job ends TIME_LIMIT (never INTERNAL) and is marked load-dependent
    code = py("import time\ntime.sleep(0.4)\nprint(int(input()) + 1)")
    r = evaluate(_problem(n_public=1, time_limit_s=1.0), code, runner, time_budget_s=1.5)
    assert (r.verdict, r.reward, r.infra_error) == (Verdict.TIME_LIMIT, 0.0, False)
    assert r.hidden.run < 10 and "time budget" in r.stopped
    assert not r.deterministic


def test_the_tests_end_by_the_jobs_own_deadline_however_long_its_budget(runner: CodeRunner) -> None:
    # a worker's task passes the moment its tests must end (its soft limit, counted from the
    # task's start, less the tail): a load that took long leaves the tests less than the budget
    code = py("import time\ntime.sleep(0.4)\nprint(int(input()) + 1)")
    r = evaluate(_problem(n_public=1, time_limit_s=1.0), code, runner, time_budget_s=100,
                 ends_by=time.monotonic() + 1.5)
    assert (r.verdict, r.reward, r.infra_error) == (Verdict.TIME_LIMIT, 0.0, False)
    assert r.hidden.run < 10 and not r.deterministic
    assert "time budget" in r.stopped
    # a deadline already past: no test starts, and the job is still the program's TIME_LIMIT
    r = evaluate(_problem(n_public=1, time_limit_s=1.0), code, runner, time_budget_s=100,
                 ends_by=time.monotonic() - 1.0)
    assert (r.verdict, r.infra_error, r.public.run, r.hidden.run) == (Verdict.TIME_LIMIT, False, 0, 0)
    # the budget binds when it ends first
    r = evaluate(_problem(n_public=1, time_limit_s=1.0), code, runner, time_budget_s=1.5,
                 ends_by=time.monotonic() + 100)
    assert (r.verdict, r.infra_error) == (Verdict.TIME_LIMIT, False) and r.hidden.run < 10


def test_a_cpu_time_limit_is_deterministic_and_names_the_cpu_time_used(runner: CodeRunner) -> None:
    r = runner.run(b"", Limits(time_s=0.3)) if runner.load("while True:\n    pass") is None else None
    assert r is not None and r.status == Verdict.TIME_LIMIT and r.deterministic
    assert r.error == f"CPU time limit 0.3s exceeded ({r.cpu_s:.2f}s CPU, {r.wall_s:.2f}s wall)"
    assert r.cpu_s > 0.3


def test_a_cpu_bound_test_is_stopped_at_its_limit_not_at_the_rlimit_backstop(runner: CodeRunner) -> None:
    # RLIMIT_CPU sits well above the limit (the kernel checks it on tick-sampled time); the job
    # init stops the test on its exact runtime instead, so a TIME_LIMIT costs about the limit
    limits = Limits(time_s=1.0)
    r = runner.run(b"", limits) if runner.load("while True:\n    pass") is None else None
    assert r is not None and r.status == Verdict.TIME_LIMIT and r.deterministic
    assert 1.0 < r.cpu_s < cpu_rlimit_s(limits) - 0.5, r.error


def test_a_wall_backstop_kill_says_so_and_is_marked_load_dependent(runner: CodeRunner) -> None:
    r = runner.run(b"", Limits(time_s=0.2)) if runner.load("import time\ntime.sleep(30)") is None else None
    assert r is not None and r.status == Verdict.TIME_LIMIT and not r.deterministic
    assert r.error.startswith(f"wall-clock backstop 1.6s fired ({r.cpu_s:.2f}s CPU, {r.wall_s:.2f}s wall")
    assert "CPU time limit 0.2s not reached" in r.error


@contextlib.contextmanager
def _starved_runner() -> Iterator[CodeRunner]:
    """A fork-server runner whose zygote, and every test, share one CPU with six CPU hogs."""
    cpu = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        starved = make_runner("forkserver")  # its zygote, and every test, inherit the one CPU
    finally:
        os.sched_setaffinity(0, before)
    # each hog in its own session: with scheduler autogroups a session is one scheduling entity
    hogs = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
            start_new_session=True,
        )
        for _ in range(6)
    ]
    try:
        yield starved
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        starved.close()


@pytest.mark.slow
def test_a_program_starved_of_cpu_is_not_killed_by_the_wall_backstop() -> None:
    # Machine load must not turn a program within its CPU limit into TIME_LIMIT: the runner and
    # six CPU hogs share one CPU, so the program (0.8 s of CPU, limit 1 s) needs ~5.6 s of wall
    # clock, past the 4 s backstop; the time it waited for the CPU is credited to it.
    with _starved_runner() as starved:
        assert starved.load("import time\nwhile time.process_time() < 0.8:\n    pass\nprint('done')") is None
        r = starved.run(b"", Limits(time_s=1.0))
    assert (r.status, r.stdout, r.deterministic) == (Verdict.OK, b"done\n", True), r.error


INTERACTOR = "import sys\nsys.exit(42 if sys.stdin.readline().strip() == 'done' else 43)\n"


@pytest.mark.slow
def test_an_interactive_program_starved_of_cpu_gets_the_same_credit_as_a_single_test() -> None:
    # The same program, talking to an interactor: each side's backstop moves by the time it
    # waited for a CPU, by the rule of a single test (verdicts.wall_fields).
    problem = Problem.from_dict({
        "id": "starved-pair", "time_limit_s": 1.0,
        "public_tests": [{"input": "1\n", "output": ""}], "hidden_tests": [{"input": "1\n", "output": ""}],
        "checker": {"type": "interactive", "language": "python3", "source": INTERACTOR},
    })
    code = "import time\nwhile time.process_time() < 0.8:\n    pass\nprint('done', flush=True)"
    with _starved_runner() as starved:
        result = evaluate(problem, py(code), starved, mode="public")
    assert (result.verdict, result.reward, result.deterministic) == (Verdict.OK, 1.0, True), result.observation


def test_a_python_test_child_carries_no_module_it_does_not_need(runner: CodeRunner) -> None:
    # every test child is a fork of the zygote, and what the zygote imported is address space
    # under the program's RLIMIT_AS: logging (with threading, traceback, string...) once slipped
    # in through a module the job init imports, and a program 184 MB into a 200 MB limit lost
    code = "import sys\nprint(' '.join(sorted(m for m in ('logging', 'decimal', 'shutil', 'json') if m in sys.modules)))"
    r = runner.run(b"", Limits(time_s=2, memory_mb=200)) if runner.load(code) is None else None
    assert r is not None and r.status == Verdict.OK and r.stdout == b"\n", r


def test_memory_judged_near_the_limit_is_marked_load_dependent(runner: CodeRunner) -> None:
    # killed by a signal (no MemoryError, no cgroup OOM) with a peak RSS near the limit: the
    # heuristic calls it MEMORY_LIMIT, which a quieter machine could judge otherwise
    code = "import os, signal\nx = b'a' * (184 << 20)\nos.kill(os.getpid(), signal.SIGSEGV)"
    r = runner.run(b"", Limits(time_s=2, memory_mb=200)) if runner.load(code) is None else None
    assert r is not None and r.status == Verdict.MEMORY_LIMIT and not r.deterministic, r
    assert "memory limit 200 MB" in r.error and "peak RSS" in r.error


def test_a_judged_test_keeps_only_the_displayable_part_of_its_output(runner: CodeRunner) -> None:
    assert runner.load("import sys\nsys.stdout.write('7' * (4 << 20))") is None
    out = judge_test(runner, get_checker(None), Case("", "7\n"), Limits(time_s=5))
    assert out.verdict == Verdict.WRONG_ANSWER and out.stdout == "7" * (CLIP_CHARS + 2)


@pytest.mark.parametrize("text", ["", "a\n", "a" * CLIP_CHARS + "\n", "a" * (CLIP_CHARS + 1) + "\nb", "é" * 900 + "\n"])
def test_the_display_prefix_renders_exactly_like_the_whole_output(text: str) -> None:
    def shown(stdout: str) -> str:
        return format_public_test(1, 1, PublicTestView(Verdict.WRONG_ANSWER, 1.0, "in", "out", stdout))

    assert shown(display_prefix(text)) == shown(text)


def test_judging_memory_does_not_grow_with_the_number_of_tests(runner: CodeRunner) -> None:
    # 8 public tests, each printing 8 MiB (one wrong token): one test's output is alive at a
    # time, not every test's stdout kept until the feedback is built (8 x 8 MiB)
    size = 8 << 20
    problem = _problem(n_public=8, n_hidden=1, time_limit_s=5)
    code = py(f"import sys\nsys.stdout.write('7' * {size})")
    tracemalloc.start()
    try:
        r = evaluate(problem, code, runner)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.public.run == 8 and r.public.first_failure == Verdict.WRONG_ANSWER
    assert peak < 5 * size, f"peak {peak >> 20} MiB"
