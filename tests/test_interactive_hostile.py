"""Hostile solutions of an interactive problem (Kattis interactor protocol), judged end to end
by ``evaluate`` on each runner with a real compiled interactor: a solution that leaves early,
closes its output and idles, forks a child that keeps the pipe, floods the interactor, never
reads, or keeps running or writing after an accepted dialogue earns what Kattis would give it,
and never an infrastructure error of its own making (the interactor sees the end of the
solution's output only once the solution's whole test has ended, so an interactor that crashes
at that end was cut short by the solution)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import interactive
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner

# guess the number in at most 12 guesses; exits 43 at the end of the solution's output
INTERACTOR = r"""
#include <cstdio>
#include <fstream>
int main(int argc, char** argv) {
    std::ifstream in(argv[1]);
    int secret; in >> secret;
    for (int q = 0; q < 12; q++) {
        int g;
        if (scanf("%d", &g) != 1) return 43;
        if (g == secret) { printf("correct\n"); fflush(stdout); return 42; }
        printf(g < secret ? "higher\n" : "lower\n");
        fflush(stdout);
    }
    return 43;
}
"""
# the same, but it crashes (abort) at the end of the solution's output instead of rejecting
CRASHES_AT_EOF = INTERACTOR.replace("if (scanf(\"%d\", &g) != 1) return 43;",
                                    "if (scanf(\"%d\", &g) != 1) abort();").replace(
    "#include <cstdio>", "#include <cstdio>\n#include <cstdlib>")
BINARY_SEARCH = """
lo, hi = 1, 1000
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


@pytest.fixture(scope="module", autouse=True)
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    mp = pytest.MonkeyPatch()
    mp.setenv("CPFLEET_COMPILE_CACHE_DIR", str(tmp_path_factory.mktemp("compile-cache")))
    yield
    mp.undo()


def guess(pid: str, interactor: str, time_limit_s: float = 2) -> Problem:
    checker: dict[str, Any] = {"type": "interactive", "files": {"i/interactor.cpp": interactor},
                               "entry_points": ["i/interactor.cpp"], "language": "cpp"}
    return Problem.from_dict({
        "id": pid, "checker": checker, "time_limit_s": time_limit_s,
        "public_tests": [{"input": "37\n", "output": ""}],
        "hidden_tests": [{"input": f"{s}\n", "output": ""} for s in (1, 1000, 512)],
    })


# (solution, interactor, the verdict Kattis gives it)
CASES = {
    "exits-at-once": ("pass\n", INTERACTOR, Verdict.WRONG_ANSWER),
    # its output ends only when its test does: the interactor cannot crash while it idles
    "closes-its-output-and-idles": ("import os, time\nos.close(1)\ntime.sleep(1)\n", CRASHES_AT_EOF,
                                    Verdict.WRONG_ANSWER),
    # its test ends when the child does, as under a judge reading its output to EOF: the
    # interactor waits for its next guess until the wall-clock backstop stops the child
    "forks-a-child-that-keeps-the-pipe": (
        "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint(1, flush=True)\n", INTERACTOR,
        Verdict.TIME_LIMIT),
    "floods-and-never-reads": ("import sys\nwhile True:\n    sys.stdout.write('1\\n' * 10000)\n", INTERACTOR,
                               Verdict.RUNTIME_ERROR),
    "never-reads-nor-writes": ("import time\ntime.sleep(60)\n", INTERACTOR, Verdict.TIME_LIMIT),
    "crashes-before-the-interactor-decides": ("print(500, flush=True)\nraise SystemExit(3)\n", CRASHES_AT_EOF,
                                              Verdict.RUNTIME_ERROR),
    # the interactor accepted and exited; writing on into the closed pipe is the program's crash
    "writes-on-after-an-accepted-dialogue": (BINARY_SEARCH + "while True:\n    print(1)\n", INTERACTOR,
                                             Verdict.RUNTIME_ERROR),
    # still running after an accepted dialogue: stopped, the dialogue stands
    "idles-after-an-accepted-dialogue": (BINARY_SEARCH + "import time\ntime.sleep(60)\n", INTERACTOR, Verdict.OK),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_solution_gets_its_own_verdict_never_an_infrastructure_error(runner: CodeRunner,
                                                                                case: str) -> None:
    solution, interactor, verdict = CASES[case]
    res = evaluate(guess(f"hostile/{case}", interactor), f"```python\n{solution}```\n", runner)
    assert not res.infra_error, res.infra_message
    assert res.verdict == verdict, res.observation[-1500:]
    assert res.reward == (1.0 if verdict == Verdict.OK else 0.0)


# The pair's memory cgroup holds the program's limit plus the interactor's; when it overflows, its
# OOM killer takes the largest process. ``HOLDS`` megabytes held by the interactor all along,
# ``FORKS`` more by a child it forks (its own address-space limit stops neither).
MEMORY_INTERACTOR = INTERACTOR.replace("#include <cstdio>", "#include <cstdio>\n#include <cstdlib>\n#include <unistd.h>").replace(
    "int secret; in >> secret;",
    "int secret; in >> secret;\n"
    "    if (FORKS > 0 && fork() == 0) { volatile char* c = (char*)malloc((size_t)FORKS << 20);\n"
    "        for (size_t i = 0; i < ((size_t)FORKS << 20); i += 4096) c[i] = 1;\n        pause(); }\n"
    "    usleep(200000);\n"
    "    volatile char* held = (char*)malloc((size_t)HOLDS << 20);\n"
    "    for (size_t i = 0; i < ((size_t)HOLDS << 20); i += 4096) held[i] = 1;")
# over its own 512 MB with the child's 350 MB: the pair (256 + 512 MB and the sandbox's slack)
# overflows on any dialogue while the interactor is the largest process, the one the OOM killer takes
HOGGING_INTERACTOR = MEMORY_INTERACTOR.replace("FORKS", "350").replace("HOLDS", "495")
# 200 MB, well within its 512 MB: the largest process of a pair whose program holds little RSS
FAIR_INTERACTOR = MEMORY_INTERACTOR.replace("FORKS", "0").replace("HOLDS", "200")
# holds 700 MB in memory files that no process's resident set shows, then plays fair
HIDES_MEMORY = ("import os\nfor _ in range(14):\n    fd = os.memfd_create('x')\n    for _ in range(50):\n"
                "        os.write(fd, b'x' * (1 << 20))\n" + BINARY_SEARCH)


def with_reference(pid: str, interactor: str, time_limit_s: float = 2) -> Problem:
    """``guess`` with a correct solution to vouch for the interactor and room for memory: the
    program's 256 MB and the interactor's 512 MB."""
    record = guess(pid, interactor, time_limit_s).to_dict()
    record["checker"]["memory_limit_mb"] = 512
    return Problem.from_dict({**record, "memory_limit_mb": 256, "correct_solutions": [BINARY_SEARCH]})


def test_an_interactor_over_its_own_memory_is_internal_not_the_correct_programs_memory_limit(
        runner: CodeRunner) -> None:
    res = evaluate(with_reference("hostile/hogging-interactor", HOGGING_INTERACTOR),
                   f"```python\n{BINARY_SEARCH}```\n", runner)
    assert res.infra_error and res.reward is None and res.verdict == Verdict.INTERNAL, res.observation[-1500:]
    assert "the memory cgroup killed the interactor" in res.infra_message
    assert "on the reference solution's dialogue it fails too" in res.infra_message


# Forks a child, reads the program's first guess (the program holds its memory by then), holds
# MAIN megabytes, then lets the child take CHILD more and waits until it holds them or is killed:
# the pair's cgroup (the program's 256 MB, the interactor's 640 and the sandbox's slack) overflows
# on any dialogue, and which side the OOM killer takes (the largest process) depends on how much
# the program holds: the interactor itself beside a program holding 200 MB, only its child beside
# the reference's few, after which it answers the reference's dialogue and accepts it
SPARING_INTERACTOR = r"""
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>
static void hold(size_t mb) {
    volatile char* c = (char*)malloc(mb << 20);
    for (size_t i = 0; i < (mb << 20); i += 4096) c[i] = 1;
}
int main(int argc, char** argv) {
    std::ifstream in(argv[1]);
    int secret; in >> secret;
    int go[2], done[2];
    if (pipe(go) || pipe(done)) return 1;
    if (fork() == 0) {
        char b;
        if (read(go[0], &b, 1) == 1) { hold(600); if (write(done[1], "x", 1) != 1) return 1; }
        pause();
        return 0;
    }
    close(done[1]);
    int g;
    if (scanf("%d", &g) != 1) return 43;
    hold(400);
    if (write(go[1], "x", 1) != 1) return 1;
    char b;
    if (read(done[0], &b, 1) < 0) return 1;
    for (int q = 0; q < 12; q++) {
        if (q > 0 && scanf("%d", &g) != 1) return 43;
        if (g == secret) { printf("correct\n"); fflush(stdout); return 42; }
        printf(g < secret ? "higher\n" : "lower\n");
        fflush(stdout);
    }
    return 43;
}
"""


def test_an_interactor_that_overruns_beside_the_reference_too_is_internal_even_when_it_accepts(
        runner: CodeRunner) -> None:
    """The reference's dialogue is accepted, yet the pair overflowed there as well (the OOM killer
    took the interactor's child, not the interactor): the overflow beside the program, which
    killed the interactor, is not the program's doing. A correct program within its own limit
    gets INTERNAL, never a MEMORY_LIMIT of 0."""
    record = with_reference("hostile/sparing-interactor", SPARING_INTERACTOR).to_dict()
    record["checker"]["memory_limit_mb"] = 640
    problem = Problem.from_dict(record)
    res = evaluate(problem, f"```python\nheld = b'x' * (200 << 20)\n{BINARY_SEARCH}```\n", runner)
    assert res.infra_error and res.reward is None and res.verdict == Verdict.INTERNAL, res.observation[-1500:]
    assert "the memory cgroup killed the interactor" in res.infra_message
    assert "the pair went over its memory limit there as well" in res.infra_message


def test_a_program_crowding_out_a_working_interactor_gets_its_memory_limit(runner: CodeRunner) -> None:
    # Filling the pair's cgroup costs the program reclaim time charged as its own CPU, and until the
    # OOM killer's victim has exited that can pass 2 s on a loaded host (TIME_LIMIT, also the program's
    # own failure): a 10 s limit leaves the memory limit the only one this dialogue can reach.
    problem = with_reference("hostile/fair-interactor", FAIR_INTERACTOR, time_limit_s=10)
    res = evaluate(problem, f"```python\n{HIDES_MEMORY}```\n", runner)
    assert not res.infra_error, res.infra_message
    assert (res.verdict, res.reward) == (Verdict.MEMORY_LIMIT, 0.0), res.observation[-1500:]
    assert "the memory cgroup killed the interactor" in res.observation  # the interactor was the one killed
    ok = evaluate(problem, f"```python\n{BINARY_SEARCH}```\n", runner)
    assert (ok.verdict, ok.reward) == (Verdict.OK, 1.0), ok.observation[-1500:]


# reads to the end of its input before it answers anything: every dialogue stalls, the
# reference's too, until the program's wall-clock backstop stops it
STALLING_INTERACTOR = INTERACTOR.replace("for (int q = 0; q < 12; q++) {",
                                         "while (getchar() != EOF) {}\n    for (int q = 0; q < 12; q++) {")


def test_an_interactor_that_never_answers_is_internal_not_the_correct_programs_time_limit(runner: CodeRunner) -> None:
    problem = with_reference("hostile/stalling-interactor", STALLING_INTERACTOR)
    before = interactive.VOUCHES.runs
    for judged in (1, 2):
        res = evaluate(problem, f"```python\n{BINARY_SEARCH}```\n", runner)
        assert res.infra_error and res.reward is None and res.verdict == Verdict.INTERNAL, res.observation[-1500:]
        assert "the dialogue stalled" in res.infra_message
        assert "on the reference solution's dialogue it fails too" in res.infra_message
        # a stall is a wall-clock stop, which a loaded host can cause: the reference's failure is
        # not remembered, so one slow moment never makes later programs' dialogues INTERNAL
        assert interactive.VOUCHES.runs - before == judged


def test_a_program_that_waits_on_a_working_interactor_gets_its_time_limit(runner: CodeRunner) -> None:
    res = evaluate(with_reference("hostile/waits", INTERACTOR), "```python\nimport time\ntime.sleep(60)\n```\n", runner)
    assert not res.infra_error, res.infra_message
    assert (res.verdict, res.reward) == (Verdict.TIME_LIMIT, 0.0), res.observation[-1500:]


# The two sides of a dialogue run in one slot, whose cgroup counts the CPU of both: each side's
# time limit is its own processes' CPU, never the other side's.
SPIN = "static void spin(double s) { clock_t c = clock(); while ((double)(clock() - c) / CLOCKS_PER_SEC < s) {} }\n"
# thinks for 1.5 s of CPU (within its own 5 s) before the first question is answered
SLOW_INTERACTOR = INTERACTOR.replace("#include <cstdio>", "#include <cstdio>\n#include <ctime>\n" + SPIN).replace(
    "int secret; in >> secret;", "int secret; in >> secret;\n    spin(1.5);")
# thinks for 1.5 s of CPU (within its own 3 s) before it asks
SLOW_SEARCH = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass\n" + BINARY_SEARCH


@pytest.mark.parametrize(("interactor", "solution", "program_s", "interactor_s"), [
    (SLOW_INTERACTOR, BINARY_SEARCH, 1, 5),
    (INTERACTOR, SLOW_SEARCH, 3, 1),
], ids=["slow-interactor", "slow-program"])
def test_each_side_of_a_dialogue_is_timed_on_its_own_cpu_not_the_other_sides(
        runner: CodeRunner, interactor: str, solution: str, program_s: int, interactor_s: int) -> None:
    record = with_reference("cpu/" + str(program_s), interactor).to_dict()
    record["time_limit_s"], record["checker"]["time_limit_s"] = program_s, interactor_s
    res = evaluate(Problem.from_dict(record), f"```python\n{solution}```\n", runner)
    assert not res.infra_error, res.infra_message
    assert (res.verdict, res.reward) == (Verdict.OK, 1.0), res.observation[-1500:]


def test_a_program_that_spins_in_children_during_a_dialogue_is_stopped_at_its_cpu_limit(runner: CodeRunner) -> None:
    # its main process only waits; two children spin. The slot's CPU count, which holds the
    # interactor's CPU too, is checked against this side's own processes: it is stopped once they
    # used its limit, not at the wall-clock backstop with several times the limit used (~8 s here)
    spinner = "import os, time\nfor _ in range(2):\n    if os.fork() == 0:\n        while True:\n            pass\ntime.sleep(60)\n"
    record = guess("cpu/spinning-children", INTERACTOR).to_dict()
    record.update(time_limit_s=1, public_tests=[], hidden_tests=record["hidden_tests"][:1])
    res = evaluate(Problem.from_dict(record), f"```python\n{spinner}```\n", runner)
    assert not res.infra_error, res.infra_message
    assert (res.verdict, res.reward) == (Verdict.TIME_LIMIT, 0.0), res.observation[-1500:]
    assert 1000 <= res.timings.cpu_ms < 3000, f"{res.timings.cpu_ms:.0f} ms of CPU against a 1 s limit"


# CPU burnt where a count of the live threads of the live processes does not see it: in threads
# that end (their process lives on) and in children that a process of the program reaps itself
# (two at a time). RLIMIT_CPU is per process and stops neither in time.
HIDDEN_CPU = {
    "short-lived-threads": (
        "import threading, time\n"
        "def burn():\n    t = time.thread_time()\n    while time.thread_time() - t < 0.05:\n        pass\n"
        "while True:\n    th = threading.Thread(target=burn)\n    th.start()\n    th.join()\n"),
    "children-it-reaps": (
        "import os, time\n"
        "while True:\n    kids = []\n    for _ in range(2):\n        pid = os.fork()\n        if pid == 0:\n"
        "            t = time.process_time()\n            while time.process_time() - t < 0.2:\n                pass\n"
        "            os._exit(0)\n        kids.append(pid)\n    for pid in kids:\n        os.waitpid(pid, 0)\n"),
}


@pytest.mark.parametrize("case", sorted(HIDDEN_CPU))
def test_cpu_hidden_in_ended_threads_or_reaped_children_still_stops_a_dialogue_at_its_limit(
        runner: CodeRunner, case: str) -> None:
    # once the slot's shared count passes the limit, this side's own CPU decides: it must hold
    # what ended threads and self-reaped children used, or the program runs on to the wall-clock
    # backstop (~3 s of CPU on one core, ~8 s on two, against a 1 s limit)
    record = guess("cpu/hidden-" + case, INTERACTOR).to_dict()
    record.update(time_limit_s=1, public_tests=[], hidden_tests=record["hidden_tests"][:1])
    res = evaluate(Problem.from_dict(record), f"```python\n{HIDDEN_CPU[case]}```\n", runner)
    assert not res.infra_error, res.infra_message
    assert (res.verdict, res.reward) == (Verdict.TIME_LIMIT, 0.0), res.observation[-1500:]
    assert 1000 <= res.timings.cpu_ms < 2500, f"{res.timings.cpu_ms:.0f} ms of CPU against a 1 s limit"


# Both sides of a dialogue run as the slot's uid, whose RLIMIT_NPROC counts the processes and
# threads of both: a program holding every process its own limit allows left the interactor
# none, so an interactor that starts a thread or a process (every JVM does, at start) failed,
# and the program's greed was the judge's failure or the program's wrong answer. The interactor's
# allowance is both sides' (the pair's pids cgroup holds as many): it always keeps its own.
FORKING_INTERACTOR = INTERACTOR.replace("#include <cstdio>", "#include <cstdio>\n#include <cstdlib>\n"
                                        "#include <sys/wait.h>\n#include <unistd.h>").replace(
    "if (scanf(\"%d\", &g) != 1) return 43;",
    "if (scanf(\"%d\", &g) != 1) return 43;\n"
    "        pid_t kid = fork(); if (kid < 0) abort(); if (kid == 0) _exit(0); waitpid(kid, nullptr, 0);")
HOLDS_EVERY_PROCESS = ("import os, time\nwhile True:\n    try:\n        pid = os.fork()\n    except OSError:\n"
                       "        break\n    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n" + BINARY_SEARCH)


def test_a_program_holding_every_process_it_may_leaves_the_interactor_its_own(runner: CodeRunner) -> None:
    problem = guess("hostile/forking-interactor", FORKING_INTERACTOR, time_limit_s=10)
    res = evaluate(problem, f"```python\n{HOLDS_EVERY_PROCESS}```\n", runner)
    assert not res.infra_error, res.infra_message
    assert (res.verdict, res.reward) == (Verdict.OK, 1.0), res.observation[-1500:]


# accepts a right guess only once the program's output has ended, and then still writes a line
# to it: to a program that has left, as an interactor writing its verdict line may
WRITES_AFTER_THE_PROGRAM_LEFT = r"""
#include <cstdio>
#include <fstream>
int main(int argc, char** argv) {
    std::ifstream in(argv[1]);
    int secret, g, more;
    in >> secret;
    if (scanf("%d", &g) != 1 || g != secret) return 43;
    while (scanf("%d", &more) == 1) {}
    printf("correct\n");
    fflush(stdout);
    return 42;
}
"""


def test_an_interactor_writing_to_a_program_that_left_is_not_killed_for_it(runner: CodeRunner) -> None:
    # problemtools' interactive keeps that pipe open for the interactor; here its write fails
    # with EPIPE and it goes on to accept: the right guess is paid, never the interactor's
    # death by SIGPIPE blamed on the program (the public test's secret is 37)
    res = evaluate(guess("hostile/writes-after-the-program-left", WRITES_AFTER_THE_PROGRAM_LEFT),
                   "```python\nprint(37)\n```\n", runner, mode="public")
    assert not res.infra_error, res.infra_message
    assert res.verdict == Verdict.OK, res.observation[-1500:]


# a Python interactor writing its verdict line to a program that has already left: Python
# raises BrokenPipeError on a write to a pipe nobody reads (SIGPIPE ignored or not)
PYTHON_INTERACTOR = """
import sys
secret = int(open(sys.argv[1]).read())
for _ in range(12):
    line = sys.stdin.readline()
    if not line:
        sys.exit(43)
    g = int(line)
    if g == secret:
        print("correct", flush=True)
        sys.exit(42)
    print("higher" if g < secret else "lower", flush=True)
sys.exit(43)
"""


def test_a_right_last_guess_is_paid_when_the_program_leaves_before_the_python_interactors_reply(
        runner: CodeRunner) -> None:
    # problemtools' interactive keeps the read end of the interactor -> program pipe open ("we do
    # want submissions that exit early to be accepted"): the interactor's reply to a right guess
    # goes into the pipe and it accepts. Here its print died of the closed pipe and the right
    # answer was WRONG_ANSWER ("the program ended before the interaction was complete")
    problem = Problem.from_dict({
        "id": "hostile/python-interactor-replies-to-a-program-that-left", "time_limit_s": 2,
        "checker": {"type": "interactive", "source": PYTHON_INTERACTOR, "language": "python3"},
        "public_tests": [{"input": "37\n", "output": ""}], "hidden_tests": [{"input": "37\n", "output": ""}]})
    for solution, verdict in (("print(37)\n", Verdict.OK), ("print(36)\n", Verdict.WRONG_ANSWER),
                              (BINARY_SEARCH, Verdict.OK)):
        res = evaluate(problem, f"```python\n{solution}```\n", runner, mode="public")
        assert not res.infra_error, res.infra_message
        assert res.verdict == verdict, (solution, res.observation[-1500:])


# the guessing interactor, but at the end of the program's output it names the secret and aborts
TELLS_AT_EOF = CRASHES_AT_EOF.replace(
    "if (scanf(\"%d\", &g) != 1) abort();",
    "if (scanf(\"%d\", &g) != 1) { fprintf(stderr, \"no guess; the secret was %d\\n\", secret); abort(); }")
# right on the sample (37), out of memory on any other test
RIGHT_ON_THE_SAMPLE_ONLY = ("print(37, flush=True)\nif input() != 'correct':\n    x = bytearray(1 << 30)\n"
                            "    x[::4096] = b'x' * len(x[::4096])\n")


def test_an_interactor_failing_after_the_programs_own_limit_never_shows_a_hidden_tests_secret(
        runner: CodeRunner) -> None:
    """A limit on a hidden test is told in the feedback (the job's stop note); when the
    interactor then fails on the program's end, its words (here the test's secret) are not."""
    record = guess("hostile/tells-at-eof", TELLS_AT_EOF).to_dict()
    record["memory_limit_mb"] = 64
    record["hidden_tests"] = [{"input": "777\n", "output": ""}]
    res = evaluate(Problem.from_dict(record), f"```python\n{RIGHT_ON_THE_SAMPLE_ONLY}```\n", runner)
    assert (res.verdict, res.reward) == (Verdict.MEMORY_LIMIT, 0.0), res.observation[-1500:]
    assert "MEMORY_LIMIT at hidden test 1" in res.observation
    assert "the program ended before the interaction was complete" in res.observation
    assert "777" not in res.observation and "777" not in res.stopped
