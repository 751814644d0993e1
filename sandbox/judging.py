"""Judging one test, and the budget a job's tests share.

``judge_any`` judges one test of any problem kind (run the program, its exit status, then the
checker: a built-in comparison, a function call, a checker program or an interactor) into a
``TestOutcome``; ``JobBudget`` is what a job may still spend, exhausted by its first limit
verdict or when its wall-clock budget runs out. The judging loop (``sandbox.env.Judge``) and
run jobs (``sandbox.runs``) are built on these; they live here, apart from the loop, because run
jobs share the budget but judge nothing.

Memory: a test's full stdout lives only while its checker runs; an outcome keeps the
displayable prefix (``display_prefix``), so a job's memory is O(output cap), not O(tests x cap).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cpfleet.core.checkers import Checker, ProgramSpec, is_interactor
from cpfleet.core.errors import ProgramError, SandboxFailure
from cpfleet.core.problem import Problem, TestCase
from cpfleet.core.results import TestReport
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import fncall
from cpfleet.sandbox.observation import CLIP_CHARS, display_prefix
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult

if TYPE_CHECKING:
    from cpfleet.sandbox.interactive import Reference

# A test is not started with less than this left of the job's time budget: it could not
# finish anyway, and the stop is then reported as the budget's, not as one test's.
MIN_TEST_TIME_S = 0.05

# Verdicts that end a job at once: each costs the most a test can cost (CPU, memory, output),
# so a program producing them on every test would make the job's cost tests x limit.
LIMIT_VERDICTS = frozenset({Verdict.TIME_LIMIT, Verdict.MEMORY_LIMIT, Verdict.OUTPUT_LIMIT})

# bytes of a non-checked stdout decoded for display: enough for the displayed characters
_DISPLAY_BYTES = 4 * (CLIP_CHARS + 2)


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """One judged test: its verdict and what the feedback may show. Holds the display prefix of
    the outputs only, never the full stdout."""

    verdict: Verdict
    wall_ms: float
    cpu_ms: float
    detail: str = ""  # checker's first difference, the runner's note on a limit, the exit code
    stdout: str = ""  # display prefix (observation.display_prefix)
    stderr: str = ""  # display prefix
    stdout_truncated: bool = False
    deterministic: bool = True  # False: the verdict depended on machine load
    returned: str = ""  # function-call problems: the returned value (or what happened instead)

    def report(self) -> TestReport:
        return TestReport(self.verdict, self.wall_ms, self.cpu_ms, self.deterministic)


class JobBudget:
    """What one job may still spend: it is exhausted by its first limit verdict or when its
    wall-clock budget runs out. Once exhausted no further test of the job is started.

    The budget counts from its creation, when the program is loaded and the tests start;
    ``ends_by`` (a ``time.monotonic()`` value) is a deadline the tests may not pass whatever
    the budget: a worker's task must end before its soft time limit, which counts from the
    task's start, so a load that took long (a compile on a loaded host) leaves the tests less.
    """

    def __init__(self, time_budget_s: float | None, ends_by: float | None = None) -> None:
        now = time.monotonic()
        deadline = None if time_budget_s is None else now + time_budget_s
        self._left_by_load = False
        if ends_by is not None and (deadline is None or ends_by < deadline):
            self._left_by_load, deadline = True, ends_by
            time_budget_s = max(0.0, round(ends_by - now, 1))
        self._deadline = deadline
        self.time_budget_s = time_budget_s
        self.stop: Verdict | None = None
        self.where = ""  # which test stopped it and why, for the result and the feedback
        self.deterministic = True

    @property
    def exhausted(self) -> bool:
        remaining = self.remaining_s()
        if self.stop is None and remaining is not None and remaining < MIN_TEST_TIME_S:
            self.stop = Verdict.TIME_LIMIT
            left = ", what its time limit left after loading the program" if self._left_by_load else ""
            self.where = f"the job's time budget ({self.time_budget_s:g}s wall{left}) ran out"
            self.deterministic = False
        return self.stop is not None

    def remaining_s(self) -> float | None:
        return None if self._deadline is None else self._deadline - time.monotonic()

    def limits_for(self, limits: Limits) -> Limits:
        """``limits`` capped (``wall_cap_s``) at what is left of the job's budget."""
        remaining = self.remaining_s()
        if remaining is None or remaining >= limits.wall_max_s:
            return limits
        return replace(limits, wall_cap_s=max(MIN_TEST_TIME_S, remaining))

    def charge(self, outcome: TestOutcome, where: str) -> None:
        """Account one judged test; a limit verdict exhausts the budget."""
        if self.stop is not None or outcome.verdict not in LIMIT_VERDICTS:
            return
        self.stop = outcome.verdict
        self.where = f"{where}: {outcome.detail}" if outcome.detail else where
        self.deterministic = self.deterministic and outcome.deterministic


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _decode_checked(data: bytes) -> tuple[str, bool]:
    """The program's stdout as the checker compares it, and whether it was UTF-8. Bytes that
    are not UTF-8 stay distinct (surrogateescape: U+DC80..U+DCFF, which no loaded problem
    holds) instead of becoming U+FFFD, which an expected output decoded lossily may hold: a
    judge compares bytes, so ``\\xff`` never matches the three bytes of U+FFFD."""
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="surrogateescape"), False


def _shown(text: str) -> str:
    """``text`` with the escaped bytes of a non-UTF-8 output shown as U+FFFD, as ``_decode``
    shows them: the feedback is sent and written as UTF-8, which cannot hold them."""
    return _ESCAPED_BYTE.sub("\ufffd", text)


def judge_test(runner: CodeRunner, checker: Checker, test: TestCase, limits: Limits) -> TestOutcome:
    """Run one test and decide its verdict: the runner's limits, exit status 0, then the checker.

    Raises SandboxFailure when the sandbox could not run the test (status INTERNAL included);
    the checker's CheckerSpecError/BrokenProblem propagate as broken problem data.
    """
    rr = _run(runner, test, limits)
    failed = _program_failure(rr)
    if failed is not None:
        return failed
    stdout, utf8 = _decode_checked(rr.stdout)
    rr.stdout = b""  # the decoded text is all the checker needs: do not hold both
    result = checker.check(test.output, stdout)
    verdict = Verdict.OK if result.ok else Verdict.WRONG_ANSWER
    if utf8:
        return _outcome(rr, verdict, result.detail, display_prefix(stdout))
    return _outcome(rr, verdict, _shown(result.detail), _shown(display_prefix(stdout)))


def _run(runner: CodeRunner, test: TestCase, limits: Limits) -> RunResult:
    """Run the program on one test; a runner answering INTERNAL is the sandbox's failure."""
    rr = runner.run(test.input.encode("utf-8"), limits)
    if rr.status == Verdict.INTERNAL:
        raise SandboxFailure(f"runner {runner.name}: {rr.error or 'internal error'}")
    return rr


def _program_failure(rr: RunResult) -> TestOutcome | None:
    """The program's own failure before any output comparison (a limit, a non-zero exit, a
    truncated output), or None when its output is for the checker to judge."""
    if rr.status != Verdict.OK:
        return _outcome(rr, rr.status, rr.error)
    if rr.exit_code != 0:
        return _outcome(rr, Verdict.RUNTIME_ERROR, f"exit code {rr.exit_code}")
    if rr.stdout_truncated:
        return _outcome(rr, Verdict.OUTPUT_LIMIT, "output truncated")
    return None


def judge_any(runner: CodeRunner, checker: Checker, problem: Problem, test: TestCase, limits: Limits) -> TestOutcome:
    """One test of any problem kind: stdin/stdout with a built-in comparison (``judge_test``),
    a function call (sandbox/fncall.py), a checker program (sandbox/checker_programs/) or an
    interaction (sandbox/interactive.py). A checker program that cannot judge raises
    BrokenProblem (CheckerBroken); the checker's or interactor's sandbox failing raises
    SandboxFailure."""
    if problem.fn_name is not None:
        return _judge_call(runner, problem, test, limits)
    if not isinstance(checker, ProgramSpec):
        return judge_test(runner, checker, test, limits)
    try:
        if is_interactor(checker.kind):
            return _judge_interactive(runner, checker, problem, test, limits)
        return _judge_with_program(runner, checker, test, limits)
    except ProgramError as e:  # a runner that cannot run programs: the worker's setup, not the model
        raise SandboxFailure(f"cannot run the problem's checker: {e}") from e


def _judge_call(runner: CodeRunner, problem: Problem, test: TestCase, limits: Limits) -> TestOutcome:
    rr = _run(runner, test, limits)
    out = fncall.judge(rr, test.output, fncall.tolerance_for(problem.checker), problem.fn_semantics)
    detail = out.detail
    if rr.exit_code == fncall.NO_FUNCTION and problem.starter_code:
        detail += "\nexpected a definition like:\n" + problem.starter_code.rstrip()
    rr.stdout = b""  # the value is judged; the feedback shows ``returned``
    return replace(_outcome(rr, out.verdict, detail, ""), returned=out.returned)


def _judge_with_program(runner: CodeRunner, spec: ProgramSpec, test: TestCase, limits: Limits) -> TestOutcome:
    from cpfleet.sandbox.checker_programs import run_checker

    rr = _run(runner, test, limits)
    failed = _program_failure(rr)
    if failed is not None:
        return failed
    # the checker runs only now, on the complete output
    verdict = run_checker(runner, spec, test.input, test.output, rr.stdout)
    outcome = _outcome(rr, Verdict.OK if verdict.ok else Verdict.WRONG_ANSWER, "" if verdict.ok else verdict.detail)
    return replace(outcome, deterministic=outcome.deterministic and verdict.deterministic)


def _judge_interactive(runner: CodeRunner, spec: ProgramSpec, problem: Problem, test: TestCase,
                       limits: Limits) -> TestOutcome:
    from cpfleet.sandbox.interactive import run_interactive

    res = run_interactive(runner, spec, test.input, test.output, limits, reference_solution(problem))
    outcome = _outcome(res.run, res.verdict, res.detail, "(interactive: the program's output went to the interactor)")
    return replace(outcome, deterministic=outcome.deterministic and res.deterministic)


def reference_solution(problem: Problem) -> Reference:
    """The correct solution that vouches for an interactive problem's interactor
    (sandbox/interactive.py): the problem's first ``correct_solutions`` entry (Python 3 sources,
    as the record formats define them), run with what a python3 program of the problem is
    judged with (its ``python3_interpreter``), else CPython, whichever toolchain works here,
    under the problem's limits for that language (not capped by a job's budget: the vouch is
    the fleet's check, run once per test per process)."""
    from cpfleet.sandbox import selftest
    from cpfleet.sandbox.compiled import missing_toolchain
    from cpfleet.sandbox.interactive import Reference

    if not problem.correct_solutions:
        return Reference(missing="the problem has no correct solution to run against the interactor")
    tried = []
    for language in dict.fromkeys((problem.python3_interpreter or "python3", "python3")):
        why = missing_toolchain(language) or selftest.failure(language)
        if not why:
            return Reference(language, problem.correct_solutions[0], problem_limits(problem, language))
        tried.append(f"{language}: {why}")
    return Reference(missing="no toolchain here for its correct solutions (" + "; ".join(tried) + ")")


def _outcome(rr: RunResult, verdict: Verdict, detail: str, stdout: str | None = None) -> TestOutcome:
    return TestOutcome(
        verdict=verdict,
        wall_ms=rr.wall_s * 1000.0,
        cpu_ms=rr.cpu_s * 1000.0,
        detail=detail,
        stdout=display_prefix(_decode(rr.stdout[:_DISPLAY_BYTES])) if stdout is None else stdout,
        stderr=display_prefix(_decode(rr.stderr[:_DISPLAY_BYTES])),
        stdout_truncated=rr.stdout_truncated,
        deterministic=rr.deterministic,
    )


def problem_limits(problem: Problem, language: str = "python3") -> Limits:
    """The per-test limits of ``problem`` for a solution in ``language``: the time limit scaled
    by the language's multiplier (the problem's ``time_limit_multipliers``, else the worker's
    default, 1.0 unless configured: see cpfleet.sandbox.languages)."""
    from cpfleet.sandbox.languages import time_multiplier

    factor = time_multiplier(language, problem.time_limit_multipliers)
    return Limits(time_s=problem.time_limit_s * factor, memory_mb=problem.memory_limit_mb, stated=True)
