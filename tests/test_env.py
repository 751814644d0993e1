"""The environment on the real runners: rewards, verdicts, feedback text, infrastructure errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cpfleet.core.errors import SandboxFailure
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.env import CodeContestsEnv, evaluate
from cpfleet.sandbox.runner import CodeRunner, IsolationReport, Limits, RunResult
from cpfleet.sandbox.runners import make_runner


@pytest.fixture(params=["forkserver", "subprocess"])
def runner(request: pytest.FixtureRequest) -> Iterator[CodeRunner]:
    r = make_runner(request.param)
    yield r
    r.close()


def _add_problem(**extra: object) -> Problem:
    return Problem.from_dict(
        {
            "id": "add",
            "public_tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}],
            "hidden_tests": [{"input": f"{i} {2 * i + 7}\n", "output": f"{3 * i + 7}\n"} for i in range(10)],
            **extra,
        }
    )


def py(code: str) -> str:
    return f"Here you go:\n```python\n{code}\n```\n"


CORRECT = py("a, b = map(int, input().split())\nprint(a + b)")
WRONG = py("a, b = map(int, input().split())\nprint(a - b)")
# right only on the first hidden test (0 7 -> 7), wrong on the other 9
MOSTLY_WRONG = py("a, b = map(int, input().split())\nprint(b if a == 0 else a * b)")
INFINITE = py("while True:\n    pass")
HIDDEN = [{"input": "1 1\n", "output": "2\n"}]


# --- the basic env cases -----------------------------------------------------------------------
def test_correct_solution_gets_reward_one(runner: CodeRunner) -> None:
    r = evaluate(_add_problem(), CORRECT, runner)
    assert (r.reward, r.verdict, r.infra_error) == (1.0, Verdict.OK, False)
    assert (r.public.passed, r.public.total, r.hidden.passed, r.hidden.total, r.hidden.run) == (2, 2, 10, 10, 10)


def test_wrong_solution_gets_zero_all_or_nothing_and_stops_at_the_first_hidden_failure(runner: CodeRunner) -> None:
    r = evaluate(_add_problem(), MOSTLY_WRONG, runner, reward_shape="all_or_nothing")
    assert (r.reward, r.verdict) == (0.0, Verdict.WRONG_ANSWER)
    assert (r.hidden.passed, r.hidden.run, r.hidden.total) == (1, 2, 10)
    assert r.hidden.first_failure == Verdict.WRONG_ANSWER


def test_wrong_solution_gets_its_fraction_below_half(runner: CodeRunner) -> None:
    r = evaluate(_add_problem(), MOSTLY_WRONG, runner, reward_shape="fraction")
    assert r.reward == pytest.approx(0.1)
    assert (r.hidden.passed, r.hidden.run) == (1, 10)


def test_timeout_solution_gets_zero_with_time_limit(runner: CodeRunner) -> None:
    r = evaluate(_add_problem(time_limit_s=0.5), INFINITE, runner)
    assert (r.reward, r.verdict) == (0.0, Verdict.TIME_LIMIT)
    assert r.public.first_failure == Verdict.TIME_LIMIT and r.public.tests[0].verdict == Verdict.TIME_LIMIT


def test_feedback_shows_sample_tests_in_the_seed_format(runner: CodeRunner) -> None:
    r = evaluate(_add_problem(), WRONG, runner)
    obs = r.observation
    assert obs.startswith("=== sample test 1/2 [FAIL | WRONG_ANSWER | ")
    assert "=== sample test 2/2 [FAIL | WRONG_ANSWER | " in obs
    assert "input:\n1 2\nexpected:\n3\ngot stdout:\n-1\n" in obs
    assert "first difference at line 1: expected '3', got '-1'" in obs
    assert "(public: 0/2 passed)\n" in obs
    assert "(hidden: 0/10 passed, stopped at the first failure)" in obs
    assert "stderr:" not in obs  # only when the program wrote some


def test_feedback_never_shows_hidden_inputs_or_outputs(runner: CodeRunner) -> None:
    secret = Problem.from_dict(
        {
            "id": "secret",
            "public_tests": [{"input": "1 2\n", "output": "3\n"}],
            "hidden_tests": [{"input": "424242 1\n", "output": "424243\n"}],
        }
    )
    r = evaluate(secret, WRONG, runner, reward_shape="fraction")
    assert "4242" not in r.observation
    assert "(hidden: 0/1 passed)" in r.observation


# --- verdicts before any test ----------------------------------------------------------------
def test_no_fenced_block_is_no_code_with_zero_reward(runner: CodeRunner) -> None:
    r = evaluate(_add_problem(), "print(1)  # no fence", runner)
    assert (r.reward, r.verdict, r.infra_error) == (0.0, Verdict.NO_CODE, False)
    assert r.public.run == 0 and r.hidden.run == 0


def test_syntax_error_is_compile_error_and_runs_no_test(runner: CodeRunner) -> None:
    r = evaluate(_add_problem(), py("print((1)"), runner)
    assert (r.reward, r.verdict) == (0.0, Verdict.COMPILE_ERROR)
    assert r.public.run == 0 and r.hidden.run == 0
    assert "Compile error" in r.observation and ("SyntaxError" in r.observation or "never closed" in r.observation)


def test_non_utf8_bytes_completion_is_decoded_with_replacement(runner: CodeRunner) -> None:
    completion = b"\xff\xfe garbage\n```python\nprint(sum(map(int, input().split())))\n```\n"
    r = evaluate(_add_problem(), completion, runner)
    assert (r.reward, r.verdict) == (1.0, Verdict.OK)


# --- checking rules --------------------------------------------------------------------------
def test_nonzero_exit_fails_even_with_the_right_output(runner: CodeRunner) -> None:
    code = py("import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(3)")
    r = evaluate(_add_problem(), code, runner)
    assert (r.reward, r.verdict) == (0.0, Verdict.RUNTIME_ERROR)


def test_problem_checker_is_used(runner: CodeRunner) -> None:
    p = Problem.from_dict(
        {
            "id": "half",
            "public_tests": [{"input": "1\n", "output": "0.5\n"}],
            "hidden_tests": [{"input": "3\n", "output": "1.5\n"}],
            "checker": {"type": "float", "abs": 1e-3, "rel": 0},
        }
    )
    assert evaluate(p, py("print(int(input()) / 2 + 0.0004)"), runner).reward == 1.0
    assert evaluate(p, py("print(int(input()) / 2 + 0.002)"), runner).reward == 0.0


def test_verdict_describes_the_rewarded_tests_and_public_failures_stay_in_the_feedback(runner: CodeRunner) -> None:
    # wrong on the sample "1 2" only: the hidden tests pay and the verdict says so; the public
    # failure is in public.first_failure and in the feedback
    code = py("a, b = map(int, input().split())\nprint(0 if (a, b) == (1, 2) else a + b)")
    r = evaluate(_add_problem(), code, runner)
    assert (r.reward, r.verdict) == (1.0, Verdict.OK)
    assert (r.public.passed, r.public.first_failure, r.hidden.first_failure) == (1, Verdict.WRONG_ANSWER, None)
    assert "=== sample test 1/2 [FAIL | WRONG_ANSWER | " in r.observation
    # in public mode the public tests are the rewarded ones: the same failure is the verdict
    r = evaluate(_add_problem(), code, runner, mode="public")
    assert (r.reward, r.verdict) == (0.0, Verdict.WRONG_ANSWER)
    # a hidden failure is the verdict in full mode, whatever the public tests did
    code = py("a, b = map(int, input().split())\nprint(a + b if (a, b) in ((1, 2), (5, 5)) else 0)")
    r = evaluate(_add_problem(), code, runner)
    assert (r.reward, r.verdict, r.public.first_failure) == (0.0, Verdict.WRONG_ANSWER, None)


def test_per_problem_time_limit_is_honoured(runner: CodeRunner) -> None:
    burn = py("x = 0\nfor i in range(6_000_000):\n    x += i\na, b = map(int, input().split())\nprint(a + b)")
    tight = _add_problem(time_limit_s=0.1)
    loose = _add_problem(time_limit_s=20)
    assert evaluate(tight, burn, runner, mode="public").verdict == Verdict.TIME_LIMIT
    assert evaluate(loose, burn, runner, mode="public").verdict == Verdict.OK


def test_per_problem_memory_limit_is_honoured(runner: CodeRunner) -> None:
    hog = py("x = bytearray(200 * 1024 * 1024)\na, b = map(int, input().split())\nprint(a + b)")
    assert evaluate(_add_problem(memory_limit_mb=512), hog, runner, mode="public").verdict == Verdict.OK
    assert evaluate(_add_problem(memory_limit_mb=64), hog, runner, mode="public").verdict == Verdict.MEMORY_LIMIT


def test_a_tight_problem_does_not_break_the_next_jobs_on_the_same_runner(runner: CodeRunner) -> None:
    # one worker judges problems with different limits in turn: lowering them once must not stick
    assert evaluate(_add_problem(memory_limit_mb=64, time_limit_s=0.5), CORRECT, runner).reward == 1.0
    hog = py("x = bytearray(200 * 1024 * 1024)\na, b = map(int, input().split())\nprint(a + b)")
    r = evaluate(_add_problem(memory_limit_mb=512, time_limit_s=4), hog, runner)
    assert (r.verdict, r.reward, r.infra_error) == (Verdict.OK, 1.0, False), r.infra_message


# --- public mode -----------------------------------------------------------------------------
def test_public_mode_rewards_public_tests_and_runs_no_hidden_test(runner: CodeRunner) -> None:
    code = py("a, b = map(int, input().split())\nprint(3 if (a, b) == (1, 2) else 0)")  # 1 of 2 samples
    r = evaluate(_add_problem(), code, runner, mode="public", reward_shape="fraction")
    assert (r.reward, r.mode, r.hidden.run, r.hidden.total) == (0.5, "public", 0, 10)
    assert "(hidden: 0/10 passed, not run in public mode)" in r.observation
    r = evaluate(_add_problem(), code, runner, mode="public", reward_shape="all_or_nothing")
    assert r.reward == 0.0
    assert evaluate(_add_problem(), CORRECT, runner, mode="public").reward == 1.0


def test_problem_without_the_rewarded_tests_is_broken_data_never_a_reward(runner: CodeRunner) -> None:
    # rewarding public tests (whose outputs the model reads) or an empty set would pay for free
    p = Problem.from_dict({"id": "pub", "public_tests": [{"input": "1 2\n", "output": "3\n"}]})
    r = evaluate(p, WRONG, runner)
    assert (r.reward, r.infra_error, r.public.run) == (None, True, 0) and "no hidden tests" in r.infra_message
    p = Problem.from_dict({"id": "hid", "hidden_tests": [{"input": "1 2\n", "output": "3\n"}]})
    r = evaluate(p, WRONG, runner, mode="public")
    assert (r.reward, r.infra_error) == (None, True) and "no public tests" in r.infra_message


# --- observation details ---------------------------------------------------------------------
def test_long_fields_are_clipped_and_stderr_is_shown(runner: CodeRunner) -> None:
    p = Problem.from_dict(
        {"id": "long", "public_tests": [{"input": "7" * 2000 + "\n", "output": "x\n"}], "hidden_tests": HIDDEN}
    )
    r = evaluate(p, py("import sys\ns = input()\nprint('oops', file=sys.stderr)\nprint(s)"), runner)
    assert "7" * 512 + "... [clipped]" in r.observation and "7" * 513 not in r.observation
    assert "stderr:\noops\n" in r.observation


def test_only_max_public_shown_tests_are_displayed_but_all_are_run(runner: CodeRunner) -> None:
    p = Problem.from_dict(
        {
            "id": "many",
            "public_tests": [{"input": f"{i} 0\n", "output": f"{i}\n"} for i in range(5)],
            "hidden_tests": HIDDEN,
        }
    )
    r = evaluate(p, py("a, b = map(int, input().split())\nprint(a if a < 4 else -1)"), runner, max_public_shown=2)
    assert r.public.run == 5 and len(r.public.tests) == 5 and r.public.passed == 4
    assert "=== sample test 3/5" not in r.observation
    assert "(3 more sample tests not shown, 1 of them failed)" in r.observation


def test_timings_and_per_test_reports_are_filled(runner: CodeRunner) -> None:
    r = evaluate(_add_problem(), CORRECT, runner)
    assert [t.verdict for t in r.public.tests] == [Verdict.OK, Verdict.OK]
    assert all(t.ms > 0 for t in r.public.tests)
    assert r.timings.executed_ms > 0 and r.timings.cpu_ms > 0
    assert r.problem_version == _add_problem().content_version()


# --- infrastructure errors -------------------------------------------------------------------
class _FailingBackend(CodeRunner):
    """Fault injection: the real runner, whose backend fails on the ``fail_at``-th run."""

    name = "failing"

    def __init__(self, inner: CodeRunner, fail_at: int, how: str) -> None:
        self.inner, self.fail_at, self.how, self.runs = inner, fail_at, how, 0

    def load(self, source: str) -> str | None:
        return self.inner.load(source)

    def run(self, stdin: bytes, limits: Limits) -> RunResult:
        self.runs += 1
        if self.runs == self.fail_at:
            if self.how == "raise":
                raise SandboxFailure("zygote pipe closed")
            if self.how == "bug":
                raise KeyError("a bug in the harness")
            return RunResult(Verdict.INTERNAL, error="zygote died")
        return self.inner.run(stdin, limits)

    @property
    def isolation(self) -> IsolationReport:
        return self.inner.isolation


@pytest.mark.parametrize("how", ["raise", "internal"])
def test_runner_failure_is_an_infrastructure_error_never_a_zero(runner: CodeRunner, how: str) -> None:
    r = evaluate(_add_problem(), CORRECT, _FailingBackend(runner, fail_at=4, how=how))
    assert r.infra_error and r.reward is None and r.verdict == Verdict.INTERNAL
    assert ("zygote pipe closed" if how == "raise" else "zygote died") in r.infra_message


def test_a_harness_bug_propagates_instead_of_becoming_an_infrastructure_error(runner: CodeRunner) -> None:
    # only SandboxFailure (and a runner answering INTERNAL) is infrastructure: anything else is
    # a bug in the judge, which must surface, not be paid out as a masked job
    with pytest.raises(KeyError, match="a bug in the harness"):
        evaluate(_add_problem(), CORRECT, _FailingBackend(runner, fail_at=2, how="bug"))


def test_env_object_keeps_its_settings(runner: CodeRunner) -> None:
    env = CodeContestsEnv(runner, reward_shape="fraction")
    r = env.evaluate(_add_problem(), MOSTLY_WRONG, job_id="j1")
    assert (r.job_id, r.reward_shape, r.reward) == ("j1", "fraction", pytest.approx(0.1))
