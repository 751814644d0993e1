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

from cpfleet.core.checkers import Checker, CheckerSpecError, get_checker
from cpfleet.core.errors import UnknownLanguage
from cpfleet.core.languages import LANGUAGES
from cpfleet.core.problem import Problem, TestCase
from cpfleet.core.results import JobResult, TestReport, TestSetSummary, Timings
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.extract import extract_program, looked_for
from cpfleet.sandbox.observation import PublicTestView, clip, format_observation
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult

REWARD_SHAPES = ("all_or_nothing", "fraction")
MODES = ("full", "public")
DEFAULT_MAX_PUBLIC_SHOWN = 10  # public tests shown in the observation; all of them are run

NO_CODE_MESSAGE = (
    "No Python code found: put the whole program in one fenced block (```python ... ```). "
    "No test was run."
)


def no_code_message(allowed: tuple[str, ...] | None) -> str:
    """NO_CODE's feedback, naming the languages that were looked for."""
    if allowed == ("python3",):
        return NO_CODE_MESSAGE
    tag = {"python3": "python", "pypy3": "python", "cpp": "cpp", "c": "c", "java": "java"}
    example = tag.get((allowed or ("python3",))[0], "python")
    return (f"No code found in {looked_for(allowed)}: put the whole program in one fenced block "
            f"(```{example} ... ```). No test was run.")


class _InfraFailure(Exception):
    """The runner could not execute a test: the job becomes an infrastructure error."""


@dataclass(slots=True)
class _Outcome:
    verdict: Verdict
    run: RunResult
    stdout: str
    detail: str = ""


@dataclass(slots=True)
class _Tally:
    summary: TestSetSummary = field(default_factory=TestSetSummary)
    cpu_ms: float = 0.0


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _judge_test(runner: CodeRunner, checker: Checker, test: TestCase, limits: Limits) -> _Outcome:
    """Run one test and decide its verdict: exit status 0 first, then the checker."""
    try:
        rr = runner.run(test.input.encode("utf-8"), limits)
    except Exception as e:  # any runner failure is infrastructure, never the model's
        raise _InfraFailure(f"runner {runner.name} raised {type(e).__name__}: {e}") from e
    if rr.status == Verdict.INTERNAL:
        raise _InfraFailure(f"runner {runner.name}: {rr.error or 'internal error'}")
    stdout = _decode(rr.stdout)
    if rr.status != Verdict.OK:
        return _Outcome(rr.status, rr, stdout, rr.error)
    if rr.exit_code != 0:
        return _Outcome(Verdict.RUNTIME_ERROR, rr, stdout, f"exit code {rr.exit_code}")
    if rr.stdout_truncated:
        return _Outcome(Verdict.OUTPUT_LIMIT, rr, stdout, "output truncated")
    result = checker.check(test.output, stdout)
    if result.ok:
        return _Outcome(Verdict.OK, rr, stdout)
    return _Outcome(Verdict.WRONG_ANSWER, rr, stdout, result.detail)


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
    language: str | None = None,
) -> JobResult:
    """Judge one completion. Never raises for anything the program or the runner does.

    ``problem_version`` defaults to ``problem.content_version()``; callers judging many jobs of
    one problem pass it precomputed (hashing every test per job is wasted work). ``language``
    (the job's) fixes the language the completion is judged in; else the problem's
    ``languages`` allow several (sandbox/extract.py says which block wins).
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
    try:
        allowed, default = allowed_languages(problem, language)
    except ValueError as e:
        return infra(str(e))
    found = extract_program(text, allowed=allowed, default=default)
    if found is None:
        return finish(JobResult(job_id, problem.id, 0.0, Verdict.NO_CODE, observation=no_code_message(allowed)))
    from cpfleet.sandbox import compiled

    prepared = compiled.prepare(runner, found, problem)
    if prepared.infra_message:
        result = infra(prepared.infra_message)
        result.language = found.language
        return result
    if prepared.compile_error is not None:
        observation = "Compile error (no test was run):\n" + clip(prepared.compile_error.rstrip("\n"), 2000) + "\n"
        result = finish(JobResult(job_id, problem.id, 0.0, Verdict.COMPILE_ERROR, observation=observation))
        result.timings.compile_ms, result.language = prepared.compile_ms, found.language
        return result
    compile_ms = prepared.compile_ms

    limits = Limits(time_s=problem.time_limit_s * prepared.time_multiplier, memory_mb=problem.memory_limit_mb)
    public, hidden = _Tally(), _Tally()
    public.summary.total = len(problem.public_tests)
    hidden.summary.total = len(problem.hidden_tests)
    views: list[PublicTestView] = []
    try:
        for test in problem.public_tests:
            out = _judge_test(runner, checker, test, limits)
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
                )
            )
        if mode == "full":
            for test in problem.hidden_tests:
                out = _judge_test(runner, checker, test, limits)
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
    result.language = found.language
    result = finish(result, public.cpu_ms + hidden.cpu_ms)
    result.timings.compile_ms = compile_ms
    return result


def program_identity(problem: Problem, completion: str, language: str | None) -> str | None:
    """What a result cache keys a job's program by: the extracted code, prefixed by its language
    unless it is CPython (so CPython keys stay those of the Python-only judge); None when no
    program was found or the job's language is refused (both judged without running anything)."""
    try:
        allowed, default = allowed_languages(problem, language)
    except ValueError:
        return None
    found = extract_program(completion, allowed=allowed, default=default)
    if found is None:
        return None
    return found.code if found.language == "python3" else f"{found.language}\n{found.code}"


def allowed_languages(problem: Problem, language: str | None) -> tuple[tuple[str, ...] | None, str]:
    """(the languages a completion may be in (None: any), the language of an untagged block).
    A job language the problem does not allow, or an unknown one, is a ValueError (the
    caller's request is wrong: an infrastructure error, not the model's)."""
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
