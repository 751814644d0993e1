"""The environment (CodeContestsEnv): one completion for one problem -> one JobResult.

Rules (the reward is what GRPO learns from, the observation is what the model reads):

- No usable fenced block: NO_CODE, reward 0. Syntax error: COMPILE_ERROR, reward 0, no test run,
  the error text in the observation.
- ``mode="full"``: the public tests are run for the feedback, then the hidden tests for the
  reward (``all_or_nothing`` stops at the first hidden failure, ``fraction`` runs them all).
  ``mode="public"``: only the public tests are run and they give the reward (a cheap shaping
  signal for multi-turn rollouts). A problem without tests in the rewarded set (no hidden tests
  in full mode, no public tests in public mode: ``validate_for_judging``) is broken problem
  data: an infrastructure error, never a reward computed from something else.
- A test passes when the program exited 0 within the limits and the problem's checker accepts
  its stdout.
- The job's ``verdict`` describes the tests the reward was computed from: the first failure
  among them, or OK. A public test that fails in full mode shows in ``public.first_failure``
  and the feedback, not in ``verdict``.
- Per-job budget (``JobBudget``): the first TIME_LIMIT, MEMORY_LIMIT or OUTPUT_LIMIT of any test,
  public or hidden, ends the job: no further test is started, the feedback marks the remaining
  public tests "not run", and the job ends with that verdict and reward 0 under both shapes. A
  job also has a wall-clock budget (``time_budget_s``) that bounds its whole cost below the
  worker's task time limit, so a slow program ends as TIME_LIMIT, never as an infrastructure
  error; a stop caused by it depends on machine load and is marked non-deterministic.
- Only real infrastructure failures are infrastructure errors (``infra_error``, reward None): a
  runner that raises ``SandboxFailure`` or answers INTERNAL, and broken problem data (a checker
  that cannot be built, ``BrokenProblem``). Any other exception is a bug in the judge and
  propagates.
- Memory: a test's full stdout lives only while its checker runs; the feedback keeps the
  displayable prefix (``display_prefix``), so a job's memory is O(output cap), not O(tests x cap).

Hooks for other program kinds (languages, function-call problems, checker programs): judge one
test with ``judge_test`` (run, exit status, checker) and feed its ``TestOutcome`` to a
``JobBudget``; ``evaluate`` is the loop around them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from cpfleet.core import languages as core_languages
from cpfleet.core.checkers import Checker, CheckerSpecError, ProgramSpec, get_checker, is_interactor
from cpfleet.core.errors import BrokenProblem, ProgramError, SandboxFailure, UnknownLanguage
from cpfleet.core.languages import LANGUAGES
from cpfleet.core.problem import Problem, TestCase, judging_refusal
from cpfleet.core.protocol import check_options
from cpfleet.core.results import JobResult, TestReport, TestSetSummary, Timings
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import fncall, languages
from cpfleet.sandbox.extract import Extracted, extract_program, looked_for
from cpfleet.sandbox.observation import CLIP_CHARS, PublicTestView, clip, display_prefix, format_observation
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult

DEFAULT_MAX_PUBLIC_SHOWN = 10  # public tests shown in the observation
# Whole-job wall-clock budget for `cpfleet judge` and the worker's default (the worker derives
# its own from its task time limit, see workers/config.py): tests stop being started past it.
DEFAULT_JOB_TIME_BUDGET_S = 480.0
# A test is not started with less than this left of the job's time budget: it could not
# finish anyway, and the stop is then reported as the budget's, not as one test's.
MIN_TEST_TIME_S = 0.05

# Verdicts that end a job at once: each costs the most a test can cost (CPU, memory, output),
# so a program producing them on every test would make the job's cost tests x limit.
LIMIT_VERDICTS = frozenset({Verdict.TIME_LIMIT, Verdict.MEMORY_LIMIT, Verdict.OUTPUT_LIMIT})

NO_CODE_MESSAGE = (
    "No Python code found: put the whole program in one fenced block (```python ... ```). "
    "No test was run."
)


def no_code_message(allowed: tuple[str, ...] | None) -> str:
    """NO_CODE's feedback, naming the languages that were looked for."""
    if allowed == ("python3",):
        return NO_CODE_MESSAGE
    first = core_languages.info((allowed or ("python3",))[0])
    example = first.example_tag() if first is not None else "python"
    return (f"No code found in {looked_for(allowed)}: put the whole program in one fenced block "
            f"(```{example} ... ```). No test was run.")


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
    wall-clock budget runs out. Once exhausted no further test of the job is started."""

    def __init__(self, time_budget_s: float | None) -> None:
        self._deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
        self.time_budget_s = time_budget_s
        self.stop: Verdict | None = None
        self.where = ""  # which test stopped it and why, for the result and the feedback
        self.deterministic = True

    @property
    def exhausted(self) -> bool:
        remaining = self.remaining_s()
        if self.stop is None and remaining is not None and remaining < MIN_TEST_TIME_S:
            self.stop = Verdict.TIME_LIMIT
            self.where = f"the job's time budget ({self.time_budget_s:g}s wall) ran out"
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


def judge_test(runner: CodeRunner, checker: Checker, test: TestCase, limits: Limits) -> TestOutcome:
    """Run one test and decide its verdict: the runner's limits, exit status 0, then the checker.

    Raises SandboxFailure when the sandbox could not run the test (status INTERNAL included);
    the checker's CheckerSpecError/BrokenProblem propagate as broken problem data.
    """
    rr = _run(runner, test, limits)
    failed = _program_failure(rr)
    if failed is not None:
        return failed
    stdout = _decode(rr.stdout)
    rr.stdout = b""  # the decoded text is all the checker needs: do not hold both
    result = checker.check(test.output, stdout)
    verdict = Verdict.OK if result.ok else Verdict.WRONG_ANSWER
    return _outcome(rr, verdict, result.detail, display_prefix(stdout))


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
    a function call (sandbox/fncall.py), a checker program (sandbox/checker_programs.py) or an
    interaction (sandbox/interactive.py). A checker program that cannot judge raises
    BrokenProblem (CheckerBroken); the checker's or interactor's sandbox failing raises
    SandboxFailure."""
    if problem.fn_name is not None:
        return _judge_call(runner, problem, test, limits)
    if not isinstance(checker, ProgramSpec):
        return judge_test(runner, checker, test, limits)
    try:
        if is_interactor(checker.kind):
            return _judge_interactive(runner, checker, test, limits)
        return _judge_with_program(runner, checker, test, limits)
    except ProgramError as e:  # a runner that cannot run programs: the worker's setup, not the model
        raise SandboxFailure(f"cannot run the problem's checker: {e}") from e


def _judge_call(runner: CodeRunner, problem: Problem, test: TestCase, limits: Limits) -> TestOutcome:
    rr = _run(runner, test, limits)
    out = fncall.judge(rr, test.output, fncall.tolerance_for(problem.checker))
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


def _judge_interactive(runner: CodeRunner, spec: ProgramSpec, test: TestCase, limits: Limits) -> TestOutcome:
    from cpfleet.sandbox.interactive import run_interactive

    res = run_interactive(runner, spec, test.input, test.output, limits)
    return _outcome(res.run, res.verdict, res.detail, "(interactive: the program's output went to the interactor)")


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


def _reward(passed: int, total: int, shape: str) -> float:
    if shape == "fraction":
        return passed / total
    return 1.0 if passed == total else 0.0


def problem_limits(problem: Problem, language: str = "python3") -> Limits:
    """The per-test limits of ``problem`` for a solution in ``language``: the time limit scaled
    by the language's multiplier (the problem's ``time_limit_multipliers``, else the worker's
    default, 1.0 unless configured: see cpfleet.sandbox.languages)."""
    from cpfleet.sandbox.languages import time_multiplier

    factor = time_multiplier(language, problem.time_limit_multipliers)
    return Limits(time_s=problem.time_limit_s * factor, memory_mb=problem.memory_limit_mb)


@dataclass(slots=True)
class _Tally:
    summary: TestSetSummary = field(default_factory=TestSetSummary)
    cpu_ms: float = 0.0
    deterministic: bool = True

    def add(self, out: TestOutcome, index: int, *, keep_report: bool) -> None:
        s = self.summary
        s.run += 1
        self.cpu_ms += out.cpu_ms
        self.deterministic = self.deterministic and out.deterministic
        if out.verdict == Verdict.OK:
            s.passed += 1
        elif s.first_failure is None:
            s.first_failure, s.first_failure_index = out.verdict, index
        if keep_report:
            s.tests.append(out.report())


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
    time_budget_s: float | None = DEFAULT_JOB_TIME_BUDGET_S,
    language: str | None = None,
    hidden_order: Sequence[int] | None = None,
) -> JobResult:
    """Judge one completion. Never raises for anything the program or the sandbox does; a bug
    in the judge itself raises.

    ``problem_version`` defaults to ``problem.content_version()``; callers judging many jobs of
    one problem pass it precomputed (hashing every test per job is wasted work). ``language``
    (the job's) fixes the language the completion is judged in; else the problem's
    ``languages`` allow several (sandbox/extract.py says which block wins).
    ``time_budget_s`` bounds the wall-clock time spent running tests (None: unbounded).

    ``hidden_order``: a permutation of the hidden tests' indices to run them in, in full mode
    with the all-or-nothing shape only (the fleet passes the most-often-failed first, see
    ``cpfleet.workers.failorder``). Any failure there is reward 0 and a pass needs every test,
    so the reward cannot depend on the order; what can is which failing test is found (the
    verdict, ``hidden.first_failure_index``, ``hidden.passed`` and ``hidden.run``). Fraction
    jobs run every test in file order, so their verdict stays the first failure in file order.
    Public tests always run first and in file order: they are the feedback.
    """
    check_options(reward_shape, mode)
    order = _hidden_order(problem, hidden_order) if mode == "full" and reward_shape == "all_or_nothing" else None
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
    refusal = judging_refusal(problem, mode)  # the one judging rule (cpfleet.core.problem)
    if refusal is not None:  # broken problem data: no reward may come from zero tests
        return infra(f"problem refused, not judged: {refusal}")

    text = completion.decode("utf-8", errors="replace") if isinstance(completion, bytes) else completion
    try:
        allowed, default = allowed_languages(problem, language)
    except ValueError as e:
        return infra(str(e))
    found = extract_program(text, allowed=allowed, default=default)
    if found is None:
        return finish(JobResult(job_id, problem.id, 0.0, Verdict.NO_CODE, observation=no_code_message(allowed)))
    from cpfleet.sandbox import compiled

    written_in = found.language
    found = judged_program(problem, found)
    prepared = compiled.prepare(runner, found, problem.fn_name)
    if prepared.infra_message:
        message = prepared.infra_message
        if found.language != written_in:
            message = (f"problem {problem.id} judges {written_in} programs with {found.language} "
                       f"(its python3_interpreter): {message}")
        result = infra(message)
        result.language = found.language
        return result
    if prepared.compile_error is not None:
        observation = "Compile error (no test was run):\n" + clip(prepared.compile_error.rstrip("\n"), 2000) + "\n"
        result = finish(JobResult(job_id, problem.id, 0.0, Verdict.COMPILE_ERROR, observation=observation))
        result.timings.compile_ms, result.language = prepared.compile_ms, found.language
        return result
    compile_ms = prepared.compile_ms
    runner.expect_runs(len(problem.public_tests) + (len(problem.hidden_tests) if mode == "full" else 0))

    limits = problem_limits(problem, found.language)
    budget = JobBudget(time_budget_s)
    public, hidden = _Tally(), _Tally()
    public.summary.total = len(problem.public_tests)
    hidden.summary.total = len(problem.hidden_tests)
    views: list[PublicTestView] = []

    def run_one(test: TestCase, where: str) -> TestOutcome:
        test_limits = budget.limits_for(limits)
        out = judge_any(runner, checker, problem, test, test_limits)
        budget.charge(out, where)
        return out

    try:
        for i, test in enumerate(problem.public_tests):
            if budget.exhausted:
                views.append(_view(test, None, f"the job stopped at its first {budget.stop}"))
                continue
            out = run_one(test, f"public test {i + 1}")
            public.add(out, i, keep_report=True)
            views.append(_view(test, out, call=fncall.call_text(problem.fn_name, test.input) if problem.fn_name else ""))
        if mode == "full":
            for i in range(len(problem.hidden_tests)) if order is None else order:
                if budget.exhausted:
                    break
                out = run_one(problem.hidden_tests[i], f"hidden test {i + 1}")
                hidden.add(out, i, keep_report=False)
                if out.verdict != Verdict.OK and reward_shape == "all_or_nothing":
                    break
    except (SandboxFailure, BrokenProblem, CheckerSpecError) as e:
        return infra(str(e), public.cpu_ms + hidden.cpu_ms)

    rewarded = public.summary if mode == "public" else hidden.summary
    if budget.stop is not None:
        # the tests after the stop count as failed under both shapes: reward 0
        reward, verdict = 0.0, budget.stop
    else:
        reward = _reward(rewarded.passed, rewarded.total, reward_shape)
        verdict = rewarded.first_failure or Verdict.OK
    if mode == "public":
        note = "not run in public mode"
    elif budget.stop is not None:
        note = f"the job stopped at its first {budget.stop}"
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
    stopped = ""
    if budget.stop is not None:
        not_run = public.summary.total - public.summary.run
        if mode == "full":
            not_run += hidden.summary.total - hidden.summary.run
        stopped = f"{budget.stop} at {budget.where}"
        observation += f"(job stopped: {clip(stopped)}; {not_run} tests not run, counted as failed)\n"
    result = JobResult(
        job_id,
        problem.id,
        reward,
        verdict,
        observation=observation,
        public=public.summary,
        hidden=hidden.summary,
        deterministic=public.deterministic and hidden.deterministic and budget.deterministic,
        stopped=stopped,
    )
    result.language = found.language
    result = finish(result, public.cpu_ms + hidden.cpu_ms)
    result.timings.compile_ms = compile_ms
    return result


def _hidden_order(problem: Problem, order: Sequence[int] | None) -> list[int] | None:
    """``order`` checked to be a permutation of the hidden tests' indices (None: file order).
    Anything else is the caller's bug: running a test twice or skipping one could pay an
    unearned reward, so it raises instead of being repaired."""
    if order is None:
        return None
    seq = list(order)
    if sorted(seq) != list(range(len(problem.hidden_tests))):
        raise ValueError(f"hidden_order is not a permutation of the {len(problem.hidden_tests)} hidden tests "
                         f"of problem {problem.id}")
    return seq


def program_identity(problem: Problem, completion: str, language: str | None) -> str | None:
    """What a result cache keys a job's program by: the extracted code, prefixed by its language
    and that language's ``languages.fingerprint`` (the toolchain, settings and installed
    packages this worker judges it with) and, for a problem judged by a checker program, that
    program's toolchain (its own sources are in the problem's version); None when no program was found or the job's language is refused (both judged
    without running anything)."""
    try:
        allowed, default = allowed_languages(problem, language)
    except ValueError:
        return None
    found = extract_program(completion, allowed=allowed, default=default)
    if found is None:
        return None
    found = judged_program(problem, found)  # the interpreter it runs under, not the one asked for
    identity = f"{found.language} {languages.fingerprint(found.language)}\n{found.code}"
    try:
        checker = get_checker(problem.checker)
    except CheckerSpecError:  # broken problem data: judged INTERNAL, never cached
        return identity
    if isinstance(checker, ProgramSpec):
        from cpfleet.sandbox.checker_programs import toolchain_identity

        identity = f"checker {toolchain_identity(checker)}\n{identity}"
    return identity


def judged_program(problem: Problem, found: Extracted) -> Extracted:
    """``found`` in the language it is judged in (``Problem.judged_language``: a python3
    program of a problem whose ``python3_interpreter`` is pypy3 runs under PyPy)."""
    language = problem.judged_language(found.language)
    return found if language == found.language else replace(found, language=language)


def allowed_languages(problem: Problem, language: str | None) -> tuple[tuple[str, ...] | None, str]:
    """(the languages a completion may be in (None: any), the language of an untagged block).
    A job language the problem does not allow, or an unknown one, is a ValueError (the
    caller's request is wrong: an infrastructure error, not the model's)."""
    if problem.fn_name is not None:
        # the function-call harness is Python (sandbox/callharness.py)
        if language not in (None, "python3"):
            raise ValueError(f"problem {problem.id} is a function-call problem: judged in python3 only, not {language!r}")
        return ("python3",), "python3"
    if language is not None:
        if language not in LANGUAGES:
            raise UnknownLanguage(f"unknown job language {language!r}; known: {', '.join(LANGUAGES)}")
        if problem.languages is not None and language not in problem.languages:
            raise ValueError(f"job language {language!r} is not allowed by problem {problem.id} "
                             f"(languages: {', '.join(problem.languages)})")
        return (language,), language
    if problem.languages is not None:
        return problem.languages, problem.languages[0]
    return None, "python3"


def _view(test: TestCase, out: TestOutcome | None, not_run: str = "", call: str = "") -> PublicTestView:
    if out is None:
        return PublicTestView(verdict=None, ms=0.0, input=test.input, expected=test.output, stdout="", detail=not_run)
    return PublicTestView(
        verdict=out.verdict,
        ms=out.wall_ms,
        input=test.input,
        expected=test.output,
        stdout=out.stdout,
        stderr=out.stderr,
        stdout_truncated=out.stdout_truncated,
        detail=out.detail,
        call=call,
        returned=out.returned,
    )


class CodeContestsEnv:
    """The environment object: a runner plus the reward settings, one evaluate per job."""

    def __init__(
        self,
        runner: CodeRunner,
        *,
        reward_shape: str = "all_or_nothing",
        mode: str = "full",
        max_public_shown: int | None = DEFAULT_MAX_PUBLIC_SHOWN,
        time_budget_s: float | None = DEFAULT_JOB_TIME_BUDGET_S,
    ) -> None:
        check_options(reward_shape, mode)
        self.runner = runner
        self.reward_shape = reward_shape
        self.mode = mode
        self.max_public_shown = max_public_shown
        self.time_budget_s = time_budget_s

    def evaluate(self, problem: Problem, completion: str | bytes, *, job_id: str = "") -> JobResult:
        return evaluate(
            problem,
            completion,
            self.runner,
            reward_shape=self.reward_shape,
            mode=self.mode,
            job_id=job_id,
            max_public_shown=self.max_public_shown,
            time_budget_s=self.time_budget_s,
        )
