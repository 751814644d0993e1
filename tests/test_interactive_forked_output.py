"""The program side of an interactive dialogue ends as any test does: when the last process it
started ends, within its limits. What a process it forked flushes at its exit reaches the
interactor, as it does when ``python3 solution.py`` (the compiled C program) talks to the
interactor over real pipes, the reference here (``dialogue``).

``import os; print(3); os.fork()`` writes "3" twice into the pipe: the forked child flushes its
copy of the unflushed buffer when it exits. An interactor that accepts exactly one line "3"
rejects it every time under the reference; when what the program left was killed the moment its
main process ended, the interactor saw one "3" or two depending on which process got the CPU
first, and the wrong program was paid in about half of the runs. Each program here is judged
``RUNS`` times, with both interactor protocols (Kattis: exit 42/43; testlib: exit 0/1), and must
get the reference's verdict every time. A process left sleeping with the pipe open is the
program's TIME_LIMIT at its wall-clock backstop, or stopped by the interactor's end
(``pairs.PEER_GRACE_S``), never a hang or INTERNAL."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from runner_helpers import built_c_reference

import cpfleet
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages
from cpfleet.sandbox.runner import CodeRunner

RUNS = 10
REFERENCE_ENV = {"LANG": "C.UTF-8"}  # no PYTHONUNBUFFERED (set in many shells): stdout a buffered pipe

# accepts exactly one line "3" followed by the end of the program's output
KATTIS_ONE_THREE = """import sys
if sys.stdin.readline() != "3\\n":
    sys.exit(43)
sys.exit(43 if sys.stdin.readline() else 42)
"""
TESTLIB_ONE_THREE = KATTIS_ONE_THREE.replace("43", "1").replace("42", "0")
# protocol: (interactor, its argv as the judge passes it, its exit status -> the verdict)
PROTOCOLS: dict[str, tuple[str, list[str], dict[int, Verdict]]] = {
    "kattis": (KATTIS_ONE_THREE, ["input", "answer", "feedback/"], {42: Verdict.OK, 43: Verdict.WRONG_ANSWER}),
    "testlib": (TESTLIB_ONE_THREE, ["input", "tout", "answer"], {0: Verdict.OK, 1: Verdict.WRONG_ANSWER}),
}

PYTHON = {
    "fork-then-both-exit": "import os\nprint(3)\nos.fork()\n",
    "forked-child-exits-without-flushing": "import os\nprint(3)\nif os.fork() == 0:\n    os._exit(0)\n",
    # the child writes once the main process has exited (its end of the pipe closed with it)
    "forked-child-writes-after-the-parent-exits": (
        "import os\nr, w = os.pipe()\nif os.fork() == 0:\n    os.close(w)\n    os.read(r, 1)\n    os.write(1, b'4\\n')\n"
        "    os._exit(0)\nos.close(r)\nprint(3)\n"),
}
C = {
    "printf-then-fork": '#include <stdio.h>\n#include <unistd.h>\nint main(void) { printf("3\\n"); fork(); return 0; }\n',
    "printf-then-fork-then-child-exits-without-flushing": (
        '#include <stdio.h>\n#include <unistd.h>\n'
        'int main(void) { printf("3\\n"); if (fork() == 0) _exit(0); return 0; }\n'),
}


def problem(protocol: str) -> Problem:
    source, _, _ = PROTOCOLS[protocol]
    checker: dict[str, Any] = {"type": "interactive", "source": source, "language": "python3"}
    if protocol == "testlib":
        checker["protocol"] = "testlib"
    return Problem.from_dict({"id": f"interactive-forked-output/{protocol}", "time_limit_s": 2, "checker": checker,
                              "hidden_tests": [{"input": "1\n", "output": ""}]})


def dialogue(program: list[str], protocol: str, tmp_path: Path) -> Verdict:
    """The verdict of the program's dialogue with the interactor over real pipes, each a plain
    process (as a judge runs ``python3 solution.py``): the interactor's exit status decides."""
    source, argv, verdicts = PROTOCOLS[protocol]
    (tmp_path / "interactor.py").write_text(source)
    to_interactor_r, to_interactor_w = os.pipe()
    to_program_r, to_program_w = os.pipe()
    try:
        prog = subprocess.Popen(program, stdin=to_program_r, stdout=to_interactor_w, env=REFERENCE_ENV)
        inter = subprocess.Popen([languages.get("python3").tools[0], str(tmp_path / "interactor.py"), *argv],
                                 stdin=to_interactor_r, stdout=to_program_w, env=REFERENCE_ENV, cwd=tmp_path)
    finally:
        for fd in (to_interactor_r, to_interactor_w, to_program_r, to_program_w):
            os.close(fd)
    assert prog.wait(timeout=60) == 0
    return verdicts[inter.wait(timeout=60)]


def judged(runner: CodeRunner, protocol: str, language: str, code: str) -> Counter[tuple[Verdict, float | None, bool]]:
    prob = problem(protocol)
    results = [cpfleet.judge_locally(prob, f"```{language}\n{code}```\n", runner) for _ in range(RUNS)]
    return Counter((r.verdict, r.reward, r.infra_error) for r in results)


def expected(verdict: Verdict) -> Counter[tuple[Verdict, float | None, bool]]:
    return Counter({(verdict, 1.0 if verdict == Verdict.OK else 0.0, False): RUNS})


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@pytest.mark.parametrize("code", PYTHON.values(), ids=PYTHON.keys())
def test_what_forked_processes_write_reaches_the_interactor_as_under_python3(
        runner: CodeRunner, code: str, protocol: str, tmp_path: Path) -> None:
    (tmp_path / "solution.py").write_text(code)
    verdict = dialogue([languages.get("python3").tools[0], str(tmp_path / "solution.py")], protocol, tmp_path)
    assert judged(runner, protocol, "python", code) == expected(verdict)


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@pytest.mark.parametrize("code", C.values(), ids=C.keys())
def test_what_forked_processes_write_reaches_the_interactor_as_from_the_compiled_program(
        runner: CodeRunner, code: str, protocol: str, tmp_path: Path) -> None:
    verdict = dialogue([str(built_c_reference(code, tmp_path))], protocol, tmp_path)
    assert judged(runner, protocol, "c", code) == expected(verdict)


# the interactor waits for the end of the program's output; a child the program left holds it open
SLEEPING_CHILD = "import os, time\nprint(3, flush=True)\nif os.fork() == 0:\n    time.sleep(100)\n"
# the interactor reads the one line it needs and accepts at once; the program's child sleeps on
ACCEPTS_AT_ONCE = 'import sys\nsys.exit(42 if sys.stdin.readline() == "3\\n" else 43)\n'


def test_a_child_left_holding_the_pipe_is_the_programs_time_limit(runner: CodeRunner) -> None:
    res = cpfleet.judge_locally(problem("kattis"), f"```python\n{SLEEPING_CHILD}```\n", runner)
    assert (res.verdict, res.reward, res.infra_error) == (Verdict.TIME_LIMIT, 0.0, False), res.observation[-1500:]
    assert "a process it started was still running" in res.observation


def test_a_child_left_sleeping_after_an_accepted_dialogue_is_stopped_by_the_interactors_end(
        runner: CodeRunner) -> None:
    prob = Problem.from_dict({**problem("kattis").to_dict(), "id": "interactive-forked-output/accepts-at-once",
                              "checker": {"type": "interactive", "source": ACCEPTS_AT_ONCE, "language": "python3"}})
    res = cpfleet.judge_locally(prob, f"```python\n{SLEEPING_CHILD}```\n", runner)
    assert (res.verdict, res.reward, res.infra_error) == (Verdict.OK, 1.0, False), res.observation[-1500:]
