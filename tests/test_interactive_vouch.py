"""An interactor that fails while the program still runs, told apart by a reference solution.

A typical dataset interactor (Python, ``int(input())``) crashes on text it did not expect, and a
slow one runs out of its own CPU time when a program makes it work. A program can provoke either
on purpose while it waits for a reply; without a sanity check that is INTERNAL (reward None),
an escape from a 0 that a GRPO policy can learn. The problem's correct solution is run against
the interactor on the same test: an interactor that accepts it works on this test, so its
failure on the program's dialogue is the program's (WRONG_ANSWER, reward 0); one that fails the
reference too is broken (INTERNAL). Judged end to end by ``evaluate`` on each runner with real
Python interactors and real reference runs; the reference runs at most once per test per process.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import interactive, programs
from cpfleet.sandbox.compiled import missing_toolchain
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.judging import reference_solution
from cpfleet.sandbox.runner import CodeRunner

# guess the number: the test's input is "secret bound"; the interactor tells the bound, then
# answers each guess (Kattis protocol: exit 42 accept, 43 reject). int(input()) crashes (exit 1)
# on text that is not a number, as dataset interactors do.
INTERACTOR = """
import sys
secret, bound = map(int, open(sys.argv[1]).read().split())
print(bound, flush=True)
for _ in range(30):
    g = int(input())
    if g == secret:
        print("correct", flush=True)
        sys.exit(42)
    print("higher" if g < secret else "lower", flush=True)
sys.exit(43)
"""
# the same, slow: checking a guess costs time proportional to the guess (a program guessing far
# out of range makes it run out of its own CPU time while the program waits for the reply)
SLOW_INTERACTOR = INTERACTOR.replace("    g = int(input())\n",
                                     "    g = int(input())\n    for _ in range(max(0, g)):\n        pass\n")
# crashes on every dialogue, the reference's included
BROKEN_INTERACTOR = """
import sys
print(open(sys.argv[1]).read().split()[1], flush=True)
input()
raise RuntimeError("this interactor is broken")
"""
REFERENCE = """
lo, hi = 1, int(input())
while True:
    mid = (lo + hi) // 2
    print(mid, flush=True)
    r = input()
    if r == "correct":
        break
    if r == "higher":
        lo = mid + 1
    else:
        hi = mid - 1
"""
# Hostile programs write what the interactor cannot take, then wait for a reply that never
# comes, and stay until they are stopped: one that ended on the end of its input could end
# before the crashed interactor's test did, which is judged as its own early end (a 0 too)
WAIT = "try:\n    input()\nexcept EOFError:\n    time.sleep(30)\n"
GARBAGE_THEN_READ = "import time\ninput()\nprint('garbage', flush=True)\n" + WAIT
GARBAGE_THEN_SLEEP = "import time\ninput()\nprint('garbage', flush=True)\ntime.sleep(30)\n"
# guesses far out of range: the slow interactor runs out of CPU time on it
FAR_GUESS_THEN_READ = "import time\ninput()\nprint(10 ** 12, flush=True)\n" + WAIT
# hostile on tests whose bound is 10, a correct binary search on the others
HOSTILE_ON_SMALL = "import time\nbound = int(input())\nif bound == 10:\n    print('garbage', flush=True)\n" + \
    "".join("    " + line + "\n" for line in WAIT.splitlines()) + \
    REFERENCE.replace("lo, hi = 1, int(input())", "lo, hi = 1, bound")


@pytest.fixture(autouse=True)
def fresh_vouches() -> None:
    """Each test starts with no vouch remembered (they are kept per process, whatever the runner)."""
    interactive.VOUCHES.clear()
    interactive.ALONE.clear()


def guess(pid: str, interactor: str = INTERACTOR, *, reference: bool = True,
          public: tuple[str, ...] = ("37 100\n",), hidden: tuple[str, ...] = ("64 100\n",),
          interactor_time_s: float = 10.0, python3_interpreter: str | None = None) -> Problem:
    checker: dict[str, Any] = {"type": "interactive", "files": {"i/interactor.py": interactor},
                               "entry_points": ["i/interactor.py"], "language": "python3",
                               "time_limit_s": interactor_time_s}
    record: dict[str, Any] = {
        "id": pid, "checker": checker, "time_limit_s": 2,
        "public_tests": [{"input": t, "output": ""} for t in public],
        "hidden_tests": [{"input": t, "output": ""} for t in hidden],
    }
    if reference:
        record["correct_solutions"] = [REFERENCE]
    if python3_interpreter:
        record["python3_interpreter"] = python3_interpreter
    return Problem.from_dict(record)


def fenced(code: str) -> str:
    return f"```python\n{code}```\n"


@pytest.mark.parametrize("hostile", [GARBAGE_THEN_READ, GARBAGE_THEN_SLEEP], ids=["then-reads", "then-sleeps"])
def test_a_provoked_interactor_crash_is_the_programs_wrong_answer(runner: CodeRunner, hostile: str) -> None:
    res = evaluate(guess(f"vouch/provoked/{runner.name}/{len(hostile)}"), fenced(hostile), runner)
    assert not res.infra_error, res.infra_message
    assert res.verdict == Verdict.WRONG_ANSWER, res.observation[-1500:]
    assert res.reward == 0.0
    assert "the interactor failed on this program's dialogue (it accepts the reference solution)" in res.observation
    assert "ValueError" in res.observation  # the interactor's own message is shown


def test_a_kattis_problem_runs_its_reference_with_pypy(runner: CodeRunner) -> None:
    # Kattis packages judge Python 3 with PyPy: the reference runs as their programs do (the
    # compiled-program path: PyPy's syntax check, then a PyPy run beside the loaded program)
    problem = guess(f"vouch/pypy/{runner.name}", python3_interpreter="pypy3")
    if missing_toolchain("pypy3"):
        pytest.skip(f"no PyPy here: {missing_toolchain('pypy3')}")
    assert reference_solution(problem).language == "pypy3"
    before = interactive.VOUCHES.runs
    res = evaluate(problem, fenced(GARBAGE_THEN_SLEEP), runner)
    assert not res.infra_error, res.infra_message
    assert res.verdict == Verdict.WRONG_ANSWER and res.reward == 0.0, res.observation[-1500:]
    assert "it accepts the reference solution" in res.observation
    assert interactive.VOUCHES.runs - before == 2  # the public test and the hidden one


def test_the_reference_solution_and_a_correct_program_pass(runner: CodeRunner) -> None:
    res = evaluate(guess(f"vouch/correct/{runner.name}"), fenced(REFERENCE), runner)
    assert not res.infra_error, res.infra_message
    assert res.verdict == Verdict.OK and res.reward == 1.0, res.observation[-1500:]


@pytest.mark.parametrize("hostile", [GARBAGE_THEN_READ, GARBAGE_THEN_SLEEP], ids=["then-reads", "then-sleeps"])
def test_without_a_correct_solution_a_provoked_crash_is_the_programs_wrong_answer(runner: CodeRunner,
                                                                                  hostile: str) -> None:
    """No reference can vouch (a Kattis package prepared without --with-solutions): the program
    provoked the crash with what it wrote, so it is its 0, never a masked sample."""
    problem = guess(f"vouch/no-reference/{runner.name}/{len(hostile)}", reference=False)
    res = evaluate(problem, fenced(hostile), runner)
    assert not res.infra_error, res.infra_message
    assert res.verdict == Verdict.WRONG_ANSWER and res.reward == 0.0, res.observation[-1500:]
    assert "no reference solution could vouch for it" in res.observation
    assert "ValueError" in res.observation  # the interactor's own message is shown
    assert res.deterministic  # a crash, no limit of the interactor's: the same on any machine
    ok = evaluate(problem, fenced(REFERENCE), runner)
    assert not ok.infra_error and ok.verdict == Verdict.OK and ok.reward == 1.0, ok.observation[-1500:]


def test_without_a_correct_solution_the_interactor_alone_runs_once_per_test(runner: CodeRunner,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    problem = guess(f"vouch/no-reference-once/{runner.name}", reference=False, public=("12 100\n",))
    before, charged = interactive.ALONE.runs, interactive.ALONE.unvouched
    with caplog.at_level(logging.WARNING, logger="cpfleet.sandbox"):
        for _ in range(2):
            res = evaluate(problem, fenced(GARBAGE_THEN_READ), runner)
            assert res.verdict == Verdict.WRONG_ANSWER and res.reward == 0.0, res.observation[-1500:]
    assert interactive.ALONE.runs - before == 2  # the public test and the hidden one, once each
    # the operator sees each: a warning in the worker's log, and the count behind its metric
    assert interactive.ALONE.unvouched - charged == 4
    assert sum("no reference solution can vouch for it" in r.getMessage() for r in caplog.records) == 4


def test_without_a_correct_solution_an_interactor_out_of_cpu_time_is_an_uncached_wrong_answer(
        runner: CodeRunner) -> None:
    problem = guess(f"vouch/no-reference-slow/{runner.name}", SLOW_INTERACTOR, reference=False,
                    interactor_time_s=1.0)
    res = evaluate(problem, fenced(FAR_GUESS_THEN_READ), runner)
    assert not res.infra_error, res.infra_message
    assert res.verdict == Verdict.WRONG_ANSWER and res.reward == 0.0, res.observation[-1500:]
    assert "no reference solution could vouch for it" in res.observation
    assert not res.deterministic  # the interactor's own time limit decided it: never cached


# crashes on its own before it reads anything from the program: broken on every dialogue
CRASHES_AT_START = """
import sys
print(open(sys.argv[1]).read().split()[1], flush=True)
raise RuntimeError("this interactor is broken at start")
"""


@pytest.mark.parametrize("program", [GARBAGE_THEN_READ, REFERENCE], ids=["garbage", "correct"])
def test_without_a_correct_solution_an_interactor_broken_on_its_own_stays_internal(runner: CodeRunner,
                                                                                   program: str) -> None:
    """An interactor that fails with no output from any program was not provoked: INTERNAL,
    naming it, for a program sending garbage as for a correct one (whose dialogue it cut
    short: which end is seen first is a race, so either may be seen here)."""
    problem = guess(f"vouch/no-reference-broken/{runner.name}", CRASHES_AT_START, reference=False)
    res = evaluate(problem, fenced(program), runner)
    if program == REFERENCE and not res.infra_error:
        # the correct program's end (its EOF crash) was seen first: its own verdict, as on Kattis
        assert res.verdict == Verdict.RUNTIME_ERROR, res.observation[-1500:]
        return
    assert res.infra_error and res.reward is None and res.verdict == Verdict.INTERNAL, res.observation[-1500:]
    assert "it fails on its own too" in res.infra_message
    assert "this interactor is broken at start" in res.infra_message
    assert "no correct solution" in res.infra_message


def test_a_broken_interactor_stays_internal_even_with_a_correct_solution(runner: CodeRunner) -> None:
    res = evaluate(guess(f"vouch/broken/{runner.name}", BROKEN_INTERACTOR), fenced(GARBAGE_THEN_READ), runner)
    assert res.infra_error and res.reward is None and res.verdict == Verdict.INTERNAL, res.observation
    # both runs are named: the program's and the reference's
    assert res.infra_message.count("RuntimeError: this interactor is broken") == 2, res.infra_message
    assert "on the reference solution's dialogue it fails too" in res.infra_message


def test_a_broken_interactor_costs_a_correct_program_nothing_when_its_eof_death_is_seen_first(
        runner: CodeRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interactor that crashes closes the program's input, and the program dies of the EOF a
    moment later; which of the two ends the runner sees first is chance. The real runs, reported
    in the unlucky order (the program's end first): the reference solution's dialogue decides,
    so a correct program's EOF crash on a broken interactor is a judge failure (INTERNAL), never
    its RUNTIME_ERROR (a 0)."""
    real = programs.run_interactive

    def program_seen_first(*args: Any, **kwargs: Any) -> programs.InteractiveResult:
        res = real(*args, **kwargs)
        return programs.InteractiveResult(res.solution, res.interactor, solution_ended_first=True)

    monkeypatch.setattr(programs, "run_interactive", program_seen_first)
    res = evaluate(guess(f"vouch/broken-eof/{runner.name}", BROKEN_INTERACTOR), fenced(REFERENCE), runner)
    assert res.infra_error and res.reward is None and res.verdict == Verdict.INTERNAL, res.observation[-1500:]
    assert "on the reference solution's dialogue it fails too" in res.infra_message
    # a working interactor that a program leaves early still judges the program by its own end
    res = evaluate(guess(f"vouch/early-eof/{runner.name}"), fenced("input()\nprint(1, flush=True)\n"), runner)
    assert not res.infra_error and res.verdict == Verdict.WRONG_ANSWER, res.observation[-1500:]
    assert "the program ended before the interaction was complete" in res.observation
    # with no reference to ask, the end seen first decides, as on Kattis: the program's own crash
    res = evaluate(guess(f"vouch/broken-eof-noref/{runner.name}", BROKEN_INTERACTOR, reference=False),
                   fenced(REFERENCE), runner)
    assert not res.infra_error and res.verdict == Verdict.RUNTIME_ERROR, res.observation[-1500:]
    assert "EOFError" in res.observation


def test_an_interactor_out_of_cpu_time_on_the_programs_dialogue_is_its_wrong_answer(runner: CodeRunner) -> None:
    problem = guess(f"vouch/slow/{runner.name}", SLOW_INTERACTOR, interactor_time_s=1.0)
    res = evaluate(problem, fenced(FAR_GUESS_THEN_READ), runner)
    assert not res.infra_error, res.infra_message
    assert res.verdict == Verdict.WRONG_ANSWER and res.reward == 0.0, res.observation[-1500:]
    assert "it accepts the reference solution" in res.observation
    assert not res.deterministic  # the interactor's own time limit decided it: never cached
    ok = evaluate(problem, fenced(REFERENCE), runner)
    assert ok.verdict == Verdict.OK and ok.reward == 1.0, ok.observation[-1500:]


def test_the_vouch_does_not_disturb_the_loaded_program_and_runs_once_per_test(runner: CodeRunner) -> None:
    # public tests 1 and 3 (bound 10) need the vouch, 2 and 4 and the hidden one (bound 1000) are
    # judged as usual by the same loaded program after it: the reference ran beside it, never
    # in its place (every public test runs and is reported, whatever the others gave)
    problem = guess(f"vouch/jobs/{runner.name}", public=("7 10\n", "500 1000\n", "3 10\n", "999 1000\n"),
                    hidden=("1 1000\n",))
    before = interactive.VOUCHES.runs
    for _ in range(2):  # provoked again: the vouches are remembered
        res = evaluate(problem, fenced(HOSTILE_ON_SMALL), runner)
        assert not res.infra_error, res.infra_message
        assert [t.verdict for t in res.public.tests] == [Verdict.WRONG_ANSWER, Verdict.OK] * 2, res.observation
        assert res.hidden.passed == 1 and res.reward == 1.0, res.observation
        # once for each of the two tests that needed it, in this process, however often provoked
        assert interactive.VOUCHES.runs - before == 2


def test_a_failed_vouch_is_remembered(runner: CodeRunner) -> None:
    # a test no other test here judges: the vouch is keyed by interactor, test and reference
    problem = guess(f"vouch/broken-remembered/{runner.name}", BROKEN_INTERACTOR, public=("11 100\n",))
    before = interactive.VOUCHES.runs
    for _ in range(2):
        res = evaluate(problem, fenced(GARBAGE_THEN_READ), runner)
        assert res.infra_error and "the reference solution" in res.infra_message
    assert interactive.VOUCHES.runs - before == 1


# gives up on its own (exit 5, outside the protocol) after 3 s with nothing to read; parses at once
GIVES_UP_ON_SILENCE = INTERACTOR.replace("    g = int(input())\n", """    import select
    if not select.select([sys.stdin], [], [], 3.0)[0]:
        sys.exit(5)
    g = int(input())
""")
SILENT_THEN_WAIT = "import time\ninput()\ntime.sleep(30)\n"


def test_without_a_correct_solution_a_later_failure_alone_never_excuses_a_sooner_provoked_one(
        runner: CodeRunner) -> None:
    """The interactor alone fails only after 3 s of silence. A program silent that long meets
    that failure, which it did not provoke by anything it wrote (a correct program thinking as
    long meets it too): INTERNAL. A program whose garbage crashed it at once is not excused by
    the failure alone 3 s later, remembered or not: its WRONG_ANSWER."""
    problem = guess(f"vouch/no-reference-gives-up/{runner.name}", GIVES_UP_ON_SILENCE, reference=False,
                    hidden=("37 100\n",))
    res = evaluate(problem, fenced(SILENT_THEN_WAIT), runner)
    assert res.infra_error and res.verdict == Verdict.INTERNAL, res.observation[-1500:]
    assert "it fails on its own too" in res.infra_message
    res = evaluate(problem, fenced(GARBAGE_THEN_READ), runner)
    assert not res.infra_error, res.infra_message
    assert res.verdict == Verdict.WRONG_ANSWER and res.reward == 0.0, res.observation[-1500:]
    assert "ValueError" in res.observation



GIVES_UP_SOON = GIVES_UP_ON_SILENCE.replace("3.0)[0]", "1.0)[0]")  # gives up 1 s into silence


@pytest.mark.parametrize("silent_first", [False, True], ids=["run-alone-now", "remembered"])
def test_without_a_correct_solution_a_give_up_within_the_wait_alone_never_excuses_garbage_sent_at_once(
        runner: CodeRunner, silent_first: bool) -> None:
    """The interactor alone gives up 1 s into silence, well within the least wait alone (2 s).
    A program whose garbage crashed it at once provoked that crash: its WRONG_ANSWER, whether
    the run alone happens now or was remembered from a silent program (which is INTERNAL)."""
    problem = guess(f"vouch/no-reference-gives-up-soon/{runner.name}/{silent_first}", GIVES_UP_SOON,
                    reference=False, hidden=("37 100\n",))
    if silent_first:
        res = evaluate(problem, fenced(SILENT_THEN_WAIT), runner)
        assert res.infra_error and "it fails on its own too" in res.infra_message, res.observation[-1500:]
    res = evaluate(problem, fenced(GARBAGE_THEN_READ), runner)
    assert not res.infra_error, res.infra_message
    assert res.verdict == Verdict.WRONG_ANSWER and res.reward == 0.0, res.observation[-1500:]
    assert "ValueError" in res.observation
