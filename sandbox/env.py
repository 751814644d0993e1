"""The environment (CodeContestsEnv): one completion for one problem -> one JobResult.

Rules (the reward is what GRPO learns from, the observation is what the model reads):

- No usable fenced block: NO_CODE, reward 0. Syntax error: COMPILE_ERROR, reward 0, no test run,
  the error text in the observation.
- ``mode="full"``: the public tests are run for the feedback, then the hidden tests for the
  reward (``all_or_nothing`` stops at the first hidden failure, ``fraction`` runs them all).
  ``mode="hidden"``: full mode's reward without its feedback, for callers that read the reward
  and never the feedback: the hidden tests first (same reward, verdict and ``hidden`` fields),
  and the public tests only when the hidden ones leave a reward above 0, and then only for what
  full mode's reward takes from them: a time, memory or output limit there ends the job with
  reward 0, as in full mode (a public test that a hidden test already ran, the same input and
  expected output, is not run twice). A wrong completion, stopped by a hidden test, runs no public test at all.
  ``mode="public"``: only the public tests are run and they give the reward (a cheap
  shaping signal for multi-turn rollouts). Which tests give the reward is
  ``protocol.rewarded_tests``. A problem without tests in the rewarded set (no hidden tests
  in full or hidden mode, no public tests in public mode: ``validate_for_judging``) is broken problem
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
  propagates. One that happens on a hidden test keeps its text (which may quote the test) in
  ``infra_message``, for the operator; the observation only says a hidden test's judging failed.
- Memory: a test's full stdout lives only while its checker runs (see sandbox/judging.py).

The loop is a ``Judge`` (its state and one method per step); one test's judging and the job's
budget are in ``cpfleet.sandbox.judging`` (``judge_any``, ``JobBudget``), which run jobs share.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from cpfleet.core import languages as core_languages
from cpfleet.core.checkers import Checker, CheckerSpecError, ProgramSpec, get_checker
from cpfleet.core.errors import BrokenProblem, JobFormatError, OptionError, SandboxFailure, UnknownLanguage
from cpfleet.core.fncall import call_spec
from cpfleet.core.languages import LANGUAGES
from cpfleet.core.problem import Problem, TestCase, judging_refusal
from cpfleet.core.protocol import (
    check_options,
    learns_fail_order,
    rewarded_tests,
    runs_public_tests,
    sendable_completion,
)
from cpfleet.core.results import JobResult, JobStamp, TestSetSummary
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import fncall, languages
from cpfleet.sandbox.extract import Extracted, extract_program, looked_for, skipped_tags
from cpfleet.sandbox.judging import JobBudget, TestOutcome, judge_any, problem_limits
from cpfleet.sandbox.observation import PublicTestView, clip, format_observation
from cpfleet.sandbox.runner import CodeRunner, Limits

DEFAULT_MAX_PUBLIC_SHOWN = 10  # public tests shown in the observation
# The feedback of a job whose judging failed on a hidden test; what failed is in infra_message.
HIDDEN_FAILURE_OBSERVATION = ("[infrastructure error while judging a hidden test (the problem's checker, interactor "
                              "or the sandbox); the details go to the fleet's operator]")
# Whole-job wall-clock budget for `cpfleet judge` and the worker's default (the worker derives
# its own from its task time limit, see workers/config.py): tests stop being started past it.
DEFAULT_JOB_TIME_BUDGET_S = 480.0
NO_CODE_MESSAGE = (
    "No Python code found: put the whole program in one fenced block (```python ... ```). "
    "No test was run."
)


def no_code_message(allowed: tuple[str, ...] | None, text: str = "") -> str:
    """NO_CODE's feedback, naming the languages that were looked for, and the blocks of ``text``
    skipped for their language."""
    skipped = skipped_tags(text, allowed) if text else []
    found = f" (found {', '.join(f'```{t}' for t in skipped[:3])}: not a language judged here)" if skipped else ""
    if allowed == ("python3",):
        return NO_CODE_MESSAGE.replace(": put", f"{found}: put", 1)
    first = core_languages.info((allowed or ("python3",))[0])
    example = first.example_tag() if first is not None else "python"
    return (f"No code found in {looked_for(allowed)}{found}: put the whole program in one fenced block "
            f"(```{example} ... ```). No test was run.")


def _reward(passed: int, total: int, shape: str) -> float:
    if shape == "fraction":
        return passed / total
    return 1.0 if passed == total else 0.0


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


class Judge:
    """One job's judging loop: its state (the budget, the two tallies, the feedback's views) and
    its steps as methods: ``judge`` (extract, compile, run, result), ``_test`` (one test run
    against the budget), ``_run_public``/``_run_hidden`` (the hidden loop stops at the first
    failure under all-or-nothing), ``_feedback`` and ``_result``. ``judge_locally`` is the function
    form; a Judge judges one completion once."""

    def __init__(
        self,
        problem: Problem,
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
        worker: str = "",
        queued_ms: float = 0.0,
        ends_by: float | None = None,
    ) -> None:
        check_options(reward_shape, mode)
        if max_public_shown is not None and max_public_shown < 0:  # -1 sliced off the last test, silently
            raise OptionError(f"max_public_shown must be >= 0 (None: all), got {max_public_shown}")
        self.problem, self.runner = problem, runner
        self.reward_shape, self.mode = reward_shape, mode
        self.max_public_shown = max_public_shown
        self.time_budget_s, self.ends_by = time_budget_s, ends_by
        self.language = language
        self.order = _hidden_order(problem, hidden_order) if learns_fail_order(mode, reward_shape) else None
        self.started = time.perf_counter()
        version = problem.content_version() if problem_version is None else problem_version
        # every result of this job is built from it, the worker's fields included
        self.stamp = JobStamp(job_id, problem.id, mode, reward_shape, version, worker, queued_ms)
        self.budget = JobBudget(None)  # replaced by the job's own when the tests start
        self.public, self.hidden = _Tally(), _Tally()
        self.public.summary.total = len(problem.public_tests)
        self.hidden.summary.total = len(problem.hidden_tests)
        self.views: list[PublicTestView] = []
        self.hidden_running = False  # a failure now is told to the operator only (HIDDEN_FAILURE_OBSERVATION)

    # --- the job, step by step -----------------------------------------------------------------

    def judge(self, completion: str | bytes) -> JobResult:
        """Judge ``completion``: never raises for anything the program or the sandbox does."""
        problem = self.problem
        try:
            checker = get_checker(problem.checker)
        except CheckerSpecError as e:
            return self._infra(f"problem {problem.id}: {e}")
        refusal = judging_refusal(problem, self.mode)  # the one judging rule (cpfleet.core.problem)
        if refusal is not None:  # broken problem data: no reward may come from zero tests
            return self._infra(f"problem refused, not judged: {refusal}")

        if isinstance(completion, str):
            completion = sendable_completion(completion)  # lone surrogates: read as the fleet reads them
        text = completion.decode("utf-8", errors="replace") if isinstance(completion, bytes) else completion
        try:
            allowed, default = allowed_languages(problem, self.language)
        except ValueError as e:
            return self._infra(str(e))
        found = extract_program(text, allowed=allowed, default=default)
        if found is None:
            return self.stamp.result(0.0, Verdict.NO_CODE, observation=no_code_message(allowed, text),
                                     executed_ms=self._elapsed_ms())
        from cpfleet.sandbox import compiled

        written_in = found.language
        found = judged_program(problem, found)
        spec = None if problem.fn_name is None else call_spec(problem.fn_name, problem.fn_semantics)
        prepared = compiled.prepare(self.runner, found, spec)
        if prepared.infra_message:
            message = prepared.infra_message
            if found.language != written_in:
                message = (f"problem {problem.id} judges {written_in} programs with {found.language} "
                           f"(its python3_interpreter): {message}")
            return self._infra(message, language=found.language)
        if prepared.compile_error is not None:
            observation = "Compile error (no test was run):\n" + clip(prepared.compile_error.rstrip("\n"), 2000) + "\n"
            return self.stamp.result(0.0, Verdict.COMPILE_ERROR, observation=observation,
                                     executed_ms=self._elapsed_ms(), compile_ms=prepared.compile_ms,
                                     language=found.language, deterministic=prepared.deterministic)
        runs_public, runs_hidden = runs_public_tests(self.mode), rewarded_tests(self.mode) == "hidden"
        # at most: hidden mode may run the public tests after the hidden ones, for their limits
        self.runner.expect_runs(len(problem.public_tests) + len(problem.hidden_tests) * runs_hidden)
        limits = problem_limits(problem, found.language)
        self.budget = JobBudget(self.time_budget_s, self.ends_by)
        try:
            if runs_public:
                self._run_public(checker, limits)
            if runs_hidden:
                self._run_hidden(checker, limits)
            if not runs_public and self._rewarded_above_zero():
                self._check_public_limits(checker, limits)
        except (SandboxFailure, BrokenProblem, CheckerSpecError) as e:
            if self.hidden_running:
                # a checker's or interactor's failure text may quote a hidden test's input or
                # answer (testlib's "expected: ..."): the operator gets it in infra_message,
                # the model's feedback only where it failed
                return self._infra(str(e), observation=HIDDEN_FAILURE_OBSERVATION)
            return self._infra(str(e))
        return self._result(prepared.compile_ms, found.language)

    def _test(self, checker: Checker, test: TestCase, limits: Limits, where: str) -> TestOutcome:
        """One test, within what is left of the job's budget, charged to it."""
        out = judge_any(self.runner, checker, self.problem, test, self.budget.limits_for(limits))
        self.budget.charge(out, where)
        return out

    def _run_public(self, checker: Checker, limits: Limits) -> None:
        """Every public test in file order (they are the feedback), "not run" once the budget stops the job."""
        problem = self.problem
        for i, test in enumerate(problem.public_tests):
            if self.budget.exhausted:
                self.views.append(_view(test, None, f"the job stopped at its first {self.budget.stop}"))
                continue
            out = self._test(checker, test, limits, f"public test {i + 1}")
            self.public.add(out, i, keep_report=True)
            call = fncall.call_text(problem.fn_name, test.input) if problem.fn_name else ""
            self.views.append(_view(test, out, call=call))

    def _run_hidden(self, checker: Checker, limits: Limits) -> None:
        """The hidden tests (in ``order`` when given); all-or-nothing stops at the first failure."""
        tests = self.problem.hidden_tests
        self.hidden_running = True
        for i in range(len(tests)) if self.order is None else self.order:
            if self.budget.exhausted:
                break
            out = self._test(checker, tests[i], limits, f"hidden test {i + 1}")
            self.hidden.add(out, i, keep_report=False)
            if out.verdict != Verdict.OK and self.reward_shape == "all_or_nothing":
                break
        self.hidden_running = False

    def _rewarded_above_zero(self) -> bool:
        """Whether the hidden tests leave a reward above 0: no stop, and ``_reward`` of them."""
        hidden = self.hidden.summary
        return self.budget.stop is None and _reward(hidden.passed, hidden.total, self.reward_shape) > 0

    def _check_public_limits(self, checker: Checker, limits: Limits) -> None:
        """Hidden mode: the public tests, in file order, for what full mode's reward takes from
        them, a time, memory or output limit (``JobBudget.charge`` ends the job at the first,
        reward 0); their answers are not the reward's, as in full mode. A public test that a
        hidden test already ran (the same input and the same expected output) is skipped: the
        same program on the same test was within the limits there. The expected output counts
        too: an interactor reads it (the answer file), so the same input with another answer
        is another dialogue, which may hit a limit the hidden one did not. They count in
        ``public`` (run, passed) but none is shown: hidden mode builds no feedback."""
        ran = {(t.input, t.output) for t in self.problem.hidden_tests}  # every one ran: no stop, reward above 0
        for i, test in enumerate(self.problem.public_tests):
            if (test.input, test.output) in ran:
                continue  # before the budget's check: a test not run cannot exhaust it
            if self.budget.exhausted:
                return
            self.public.add(self._test(checker, test, limits, f"public test {i + 1}"), i, keep_report=False)

    def _feedback(self) -> tuple[str, str]:
        """(the observation, the ``stopped`` note: empty unless the budget stopped the job)."""
        public, hidden, budget = self.public.summary, self.hidden.summary, self.budget
        if rewarded_tests(self.mode) == "public":
            note = "not run in public mode"
        elif budget.stop is not None:
            note = f"the job stopped at its first {budget.stop}"
        else:
            note = "stopped at the first failure"
        observation = format_observation(
            self.views,
            public_passed=public.passed,
            public_total=public.total,
            hidden_passed=hidden.passed,
            hidden_total=hidden.total,
            hidden_run=hidden.run,
            hidden_note=note,
            max_shown=self.max_public_shown,
            public_run=runs_public_tests(self.mode),
        )
        if budget.stop is None:
            return observation, ""
        not_run = hidden.total - hidden.run if rewarded_tests(self.mode) == "hidden" else 0
        if runs_public_tests(self.mode):
            not_run += public.total - public.run
        stopped = f"{budget.stop} at {budget.where}"
        return observation + f"(job stopped: {clip(stopped)}; {not_run} tests not run, counted as failed)\n", stopped

    def _result(self, compile_ms: float, language: str) -> JobResult:
        """The reward and verdict from the rewarded tests (``rewarded_tests``: the public ones in public mode)."""
        rewarded = self.public.summary if rewarded_tests(self.mode) == "public" else self.hidden.summary
        if self.budget.stop is not None:
            # the tests after the stop count as failed under both shapes: reward 0
            reward, verdict = 0.0, self.budget.stop
        else:
            reward = _reward(rewarded.passed, rewarded.total, self.reward_shape)
            verdict = rewarded.first_failure or Verdict.OK
        observation, stopped = self._feedback()
        deterministic = self.public.deterministic and self.hidden.deterministic and self.budget.deterministic
        return self.stamp.result(reward, verdict, observation=observation, public=self.public.summary,
                                 hidden=self.hidden.summary, executed_ms=self._elapsed_ms(),
                                 cpu_ms=self.public.cpu_ms + self.hidden.cpu_ms, compile_ms=compile_ms,
                                 language=language, deterministic=deterministic, stopped=stopped)

    def _infra(self, message: str, *, language: str = "", observation: str | None = None) -> JobResult:
        return self.stamp.infra(message, executed_ms=self._elapsed_ms(), cpu_ms=self.public.cpu_ms + self.hidden.cpu_ms,
                                language=language, observation=observation)

    def _elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0


def judge_locally(
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
    worker: str = "",
    queued_ms: float = 0.0,
    ends_by: float | None = None,
) -> JobResult:
    """Judge one completion here, on ``runner`` (a ``Judge`` judging once): the function the worker,
    ``cpfleet judge`` and the local pool call, and ``cpfleet.judge_locally`` for a user. (The
    fleet's ``FleetClient.evaluate`` sends a job to the workers instead.) Never raises for
    anything the program or the sandbox does; a bug in the judge itself raises.

    ``problem_version`` defaults to ``problem.content_version()``; callers judging many jobs of
    one problem pass it precomputed (hashing every test per job is wasted work). ``language``
    (the job's) fixes the language the completion is judged in; else the problem's
    ``languages`` allow several (sandbox/extract.py says which block wins).
    ``time_budget_s`` bounds the wall-clock time spent running tests (None: unbounded), and
    ``ends_by`` (a ``time.monotonic()`` value: a worker's task's own deadline) the moment they
    must end by however long loading the program took (``JobBudget``).

    ``hidden_order``: a permutation of the hidden tests' indices to run them in, in full or
    hidden mode with the all-or-nothing shape only (the fleet passes the most-often-failed first, see
    ``cpfleet.workers.failorder``). Any failure there is reward 0 and a pass needs every test,
    so the reward cannot depend on the order; what can is which failing test is found (the
    verdict, ``hidden.first_failure_index``, ``hidden.passed`` and ``hidden.run``). Fraction
    jobs run every test in file order, so their verdict stays the first failure in file order.
    Public tests always run first and in file order: they are the feedback.

    ``worker`` and ``queued_ms`` (the fleet's: where the job ran, how long it waited) go into
    the result as it is built; nothing patches a result afterwards.
    """
    judge = Judge(problem, runner, reward_shape=reward_shape, mode=mode, job_id=job_id,
                  max_public_shown=max_public_shown, problem_version=problem_version, time_budget_s=time_budget_s,
                  language=language, hidden_order=hidden_order, worker=worker, queued_ms=queued_ms, ends_by=ends_by)
    return judge.judge(completion)


# A second name for code that calls ``cpfleet.evaluate`` / ``cpfleet.sandbox.env.evaluate``;
# ``judge_locally`` is the name that says what it does (no fleet involved).
evaluate = judge_locally


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
            raise JobFormatError(f"problem {problem.id} is a function-call problem: judged in python3 only, not {language!r}")
        return ("python3",), "python3"
    if language is not None:
        if language not in LANGUAGES:
            raise UnknownLanguage(f"unknown job language {language!r}; known: {', '.join(LANGUAGES)}")
        if problem.languages is not None and language not in problem.languages:
            raise JobFormatError(f"job language {language!r} is not allowed by problem {problem.id} "
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
        return judge_locally(
            problem,
            completion,
            self.runner,
            reward_shape=self.reward_shape,
            mode=self.mode,
            job_id=job_id,
            max_public_shown=self.max_public_shown,
            time_budget_s=self.time_budget_s,
        )
