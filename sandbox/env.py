"""The environment (the seed's CodeContestsEnv): one completion for one problem -> one JobResult.

Rules (docs: the reward is what GRPO learns from, the observation is what the model reads):

- No usable fenced block: NO_CODE, reward 0. Syntax error: COMPILE_ERROR, reward 0, no test run,
  the error text in the observation.
- Every public test is run (feedback). In ``mode="full"`` the hidden tests are then run for the
  reward: ``all_or_nothing`` stops at the first hidden failure, ``fraction`` runs them all.
  The reward depends on hidden tests only (public = feedback, hidden = reward, as in the seed);
  a problem without hidden tests is rewarded on its public tests instead.
- ``mode="public"`` runs only the public tests and rewards them (all-or-nothing or fraction):
  a cheap shaping signal for multi-turn rollouts; hidden tests are reported as not run.
- A test passes when the program exited 0 within the limits and the problem's checker accepts
  its stdout. The job's verdict is the first failing test's verdict anywhere (public tests
  first, then hidden), so a job can say WRONG_ANSWER with reward 1.0 when only a public test
  failed; OK means every test that ran passed.
- The runner raising, or answering INTERNAL, makes the whole job an infrastructure error
  (``infra_error``, reward None): the trainer masks it instead of learning a zero. So does a
  problem whose checker cannot be built or that has no tests at all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from cpfleet.core.checkers import Checker, CheckerSpecError, ProgramSpec, get_checker
from cpfleet.core.problem import Problem, TestCase
from cpfleet.core.results import JobResult, TestReport, TestSetSummary, Timings
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import fncall
from cpfleet.sandbox.extract import extract_code
from cpfleet.sandbox.observation import PublicTestView, clip, format_observation
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult

REWARD_SHAPES = ("all_or_nothing", "fraction")
MODES = ("full", "public")
DEFAULT_MAX_PUBLIC_SHOWN = 10  # public tests shown in the observation; all of them are run

NO_CODE_MESSAGE = (
    "No Python code found: put the whole program in one fenced block (```python ... ```). "
    "No test was run."
)


class _InfraFailure(Exception):
    """The runner could not execute a test: the job becomes an infrastructure error."""


@dataclass(slots=True)
class _Outcome:
    verdict: Verdict
    run: RunResult
    stdout: str
    detail: str = ""
    returned: str | None = None  # function-call problems: the value shown after "->"


@dataclass(slots=True)
class _Tally:
    summary: TestSetSummary = field(default_factory=TestSetSummary)
    cpu_ms: float = 0.0


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _judge_test(runner: CodeRunner, checker: Checker | None, test: TestCase, limits: Limits) -> _Outcome:
    """Run one test and decide its verdict: exit status 0 first, then the checker (None: the
    caller runs a checker program on the complete output)."""
    rr = _run(runner, test.input.encode("utf-8"), limits)
    stdout = _decode(rr.stdout)
    if rr.status != Verdict.OK:
        return _Outcome(rr.status, rr, stdout, rr.error)
    if rr.exit_code != 0:
        return _Outcome(Verdict.RUNTIME_ERROR, rr, stdout, f"exit code {rr.exit_code}")
    if rr.stdout_truncated:
        return _Outcome(Verdict.OUTPUT_LIMIT, rr, stdout, "output truncated")
    if checker is None:
        return _Outcome(Verdict.OK, rr, stdout)
    result = checker.check(test.output, stdout)
    if result.ok:
        return _Outcome(Verdict.OK, rr, stdout)
    return _Outcome(Verdict.WRONG_ANSWER, rr, stdout, result.detail)


@dataclass(slots=True)
class _Judging:
    """How this problem's tests are judged: stdin/stdout with a built-in comparison (the
    default), a function call (sandbox/fncall.py), a checker program
    (sandbox/checker_programs.py) or an interaction (sandbox/interactive.py)."""

    runner: CodeRunner
    checker: Checker
    problem: Problem
    limits: Limits

    def judge(self, test: TestCase) -> _Outcome:
        try:
            if self.problem.fn_name is not None:
                return self._call(test)
            if isinstance(self.checker, ProgramSpec):
                if self.checker.kind == "interactive":
                    return self._interact(test)
                return self._with_program(test)
        except _InfraFailure:
            raise
        except Exception as e:  # a broken checker or a sandbox failure: never the program's fault
            from cpfleet.sandbox.checker_programs import CheckerBroken

            if isinstance(e, CheckerBroken):
                raise _InfraFailure(f"problem {self.problem.id}: {e}") from e
            raise _InfraFailure(f"judging failed: {type(e).__name__}: {e}") from e
        return _judge_test(self.runner, self.checker, test, self.limits)

    def _call(self, test: TestCase) -> _Outcome:
        rr = _run(self.runner, test.input.encode("utf-8"), self.limits)
        out = fncall.judge(rr, test.output, fncall.tolerance_for(self.problem.checker))
        detail = out.detail
        if rr.exit_code == fncall.NO_FUNCTION and self.problem.starter_code:
            detail += "\nexpected a definition like:\n" + self.problem.starter_code.rstrip()
        return _Outcome(out.verdict, rr, _decode(rr.stdout), detail, returned=out.returned)

    def _with_program(self, test: TestCase) -> _Outcome:
        from cpfleet.sandbox.checker_programs import programs_for, run_checker

        out = _judge_test(self.runner, None, test, self.limits)
        if out.verdict != Verdict.OK:
            return out
        assert isinstance(self.checker, ProgramSpec)
        verdict = run_checker(programs_for(self.runner), self.checker, test.input, test.output, out.run.stdout)
        if verdict.ok:
            return out
        return _Outcome(Verdict.WRONG_ANSWER, out.run, out.stdout, verdict.detail)

    def _interact(self, test: TestCase) -> _Outcome:
        from cpfleet.sandbox.checker_programs import programs_for
        from cpfleet.sandbox.forkserver import ZygoteRunner
        from cpfleet.sandbox.interactive import run_interactive

        if not isinstance(self.runner, ZygoteRunner):
            raise _InfraFailure(f"runner {self.runner.name} cannot run interactive problems")
        assert isinstance(self.checker, ProgramSpec)
        res = run_interactive(self.runner, programs_for(self.runner), self.checker, test.input, test.output, self.limits)
        return _Outcome(res.verdict, res.run, "", res.detail)


def _run(runner: CodeRunner, stdin: bytes, limits: Limits) -> RunResult:
    try:
        rr = runner.run(stdin, limits)
    except Exception as e:  # any runner failure is infrastructure, never the model's
        raise _InfraFailure(f"runner {runner.name} raised {type(e).__name__}: {e}") from e
    if rr.status == Verdict.INTERNAL:
        raise _InfraFailure(f"runner {runner.name}: {rr.error or 'internal error'}")
    return rr


def _reward(passed: int, total: int, shape: str) -> float:
    if shape == "fraction":
        return passed / total
    return 1.0 if passed == total else 0.0


def evaluate(
    problem: Problem,
    completion: str | bytes,
    runner: CodeRunner,
    *,
    reward_shape: str = "all_or_nothing",
    mode: str = "full",
    job_id: str = "",
    max_public_shown: int | None = DEFAULT_MAX_PUBLIC_SHOWN,
    problem_version: str | None = None,
) -> JobResult:
    """Judge one completion. Never raises for anything the program or the runner does.

    ``problem_version`` defaults to ``problem.content_version()``; callers judging many jobs of
    one problem pass it precomputed (hashing every test per job is wasted work).
    """
    if reward_shape not in REWARD_SHAPES:
        raise ValueError(f"reward_shape must be one of {REWARD_SHAPES}, got {reward_shape!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    started = time.perf_counter()
    version = problem.content_version() if problem_version is None else problem_version

    def finish(result: JobResult, cpu_ms: float = 0.0) -> JobResult:
        result.timings = Timings(executed_ms=(time.perf_counter() - started) * 1000.0, cpu_ms=cpu_ms)
        result.mode, result.reward_shape, result.problem_version = mode, reward_shape, version
        return result

    def infra(message: str, cpu_ms: float = 0.0) -> JobResult:
        return finish(JobResult.infra(job_id, problem.id, message), cpu_ms)

    try:
        checker = get_checker(problem.checker)
    except CheckerSpecError as e:
        return infra(f"problem {problem.id}: {e}")
    if not problem.public_tests and not problem.hidden_tests:
        return infra(f"problem {problem.id} has no tests")

    text = completion.decode("utf-8", errors="replace") if isinstance(completion, bytes) else completion
    code = extract_code(text)
    if code is None:
        return finish(JobResult(job_id, problem.id, 0.0, Verdict.NO_CODE, observation=NO_CODE_MESSAGE))
    try:
        syntax_error = runner.load(code) if problem.fn_name is None else runner.load(code, fn_name=problem.fn_name)
    except Exception as e:  # a runner that cannot load is infrastructure
        return infra(f"runner {runner.name} failed to load the program: {type(e).__name__}: {e}")
    if syntax_error is not None:
        observation = "Compile error (no test was run):\n" + clip(syntax_error.rstrip("\n")) + "\n"
        return finish(JobResult(job_id, problem.id, 0.0, Verdict.COMPILE_ERROR, observation=observation))

    limits = Limits(time_s=problem.time_limit_s, memory_mb=problem.memory_limit_mb)
    judging = _Judging(runner, checker, problem, limits)
    public, hidden = _Tally(), _Tally()
    public.summary.total = len(problem.public_tests)
    hidden.summary.total = len(problem.hidden_tests)
    views: list[PublicTestView] = []
    try:
        for test in problem.public_tests:
            out = judging.judge(test)
            _count(public, out)
            rr = out.run
            public.summary.tests.append(TestReport(out.verdict, rr.wall_s * 1000.0, rr.cpu_s * 1000.0))
            views.append(
                PublicTestView(
                    verdict=out.verdict,
                    ms=rr.wall_s * 1000.0,
                    input=test.input,
                    expected=test.output,
                    stdout=out.stdout,
                    stderr=_decode(rr.stderr),
                    stdout_truncated=rr.stdout_truncated,
                    detail=out.detail,
                    call=fncall.call_text(problem.fn_name, test.input) if problem.fn_name else "",
                    returned=out.returned or "",
                )
            )
        if mode == "full":
            for test in problem.hidden_tests:
                out = judging.judge(test)
                _count(hidden, out)
                if out.verdict != Verdict.OK and reward_shape == "all_or_nothing":
                    break
    except _InfraFailure as e:
        return infra(str(e), public.cpu_ms + hidden.cpu_ms)

    if mode == "public" or not problem.hidden_tests:
        rewarded = public.summary
    else:
        rewarded = hidden.summary
    reward = _reward(rewarded.passed, rewarded.total, reward_shape)
    first = public.summary.first_failure or hidden.summary.first_failure or Verdict.OK
    if mode == "public":
        note = "not run in public mode"
    else:
        note = "stopped at the first failure"
    observation = format_observation(
        views,
        public_passed=public.summary.passed,
        public_total=public.summary.total,
        hidden_passed=hidden.summary.passed,
        hidden_total=hidden.summary.total,
        hidden_run=hidden.summary.run,
        hidden_note=note,
        max_shown=max_public_shown,
    )
    result = JobResult(
        job_id,
        problem.id,
        reward,
        first,
        observation=observation,
        public=public.summary,
        hidden=hidden.summary,
    )
    return finish(result, public.cpu_ms + hidden.cpu_ms)


def _count(tally: _Tally, out: _Outcome) -> None:
    s = tally.summary
    s.run += 1
    tally.cpu_ms += out.run.cpu_s * 1000.0
    if out.verdict == Verdict.OK:
        s.passed += 1
    elif s.first_failure is None:
        s.first_failure = out.verdict


class CodeContestsEnv:
    """The seed's environment object: a runner plus the reward settings, one evaluate per job."""

    def __init__(
        self,
        runner: CodeRunner,
        *,
        reward_shape: str = "all_or_nothing",
        mode: str = "full",
        max_public_shown: int | None = DEFAULT_MAX_PUBLIC_SHOWN,
    ) -> None:
        if reward_shape not in REWARD_SHAPES or mode not in MODES:
            raise ValueError(f"bad reward_shape {reward_shape!r} or mode {mode!r}")
        self.runner = runner
        self.reward_shape = reward_shape
        self.mode = mode
        self.max_public_shown = max_public_shown

    def evaluate(self, problem: Problem, completion: str | bytes, *, job_id: str = "") -> JobResult:
        return evaluate(
            problem,
            completion,
            self.runner,
            reward_shape=self.reward_shape,
            mode=self.mode,
            job_id=job_id,
            max_public_shown=self.max_public_shown,
        )
