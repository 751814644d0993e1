"""What the processes a program forks write is part of the output it is judged on, as under a
judge that runs ``python3 solution.py`` (``pypy3 solution.py``, the compiled program) and reads
its stdout to EOF (``subprocess.run(..., capture_output=True)``, the reference here).

A forked process holds a copy of the buffer its parent had not flushed yet and flushes it when
it exits: ``print(3); os.fork()`` prints "3" twice under python3, as ``printf("3\\n"); fork();``
does in C when stdout is a pipe. Killing what a test left the moment its main process ended
would make it a race whether the forked copy got out first ("3" in about half of the runs, paid
against an expected "3", where the reference prints "3\\n3\\n", WRONG_ANSWER): each program
here runs ``RUNS`` times on the same job, which such a race fails within a few runs. A process
still running at the test's end is the program's doing: it is killed at the test's limits, a
TIME_LIMIT, and never hangs the test (sandbox/police.py ``await_the_rest``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from runner_helpers import built_c_reference

import cpfleet
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import compiled, languages
from cpfleet.sandbox.extract import Extracted
from cpfleet.sandbox.forkserver import ForkServerRunner
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult

RUNS = 20
REFERENCE_ENV = {"LANG": "C.UTF-8"}  # no PYTHONUNBUFFERED (set in many shells): stdout a buffered pipe

FORKING = {
    "fork-then-both-exit": "import os\nprint(3)\nos.fork()\n",
    "forked-child-sleeps-then-exits": "import os, time\nprint(3)\nif os.fork() == 0:\n    time.sleep(0.05)\n",
    # the child writes once the main process has exited (its end of the pipe closed with it)
    "forked-child-writes-after-the-parent-exits": (
        "import os\nr, w = os.pipe()\nif os.fork() == 0:\n    os.close(w)\n    os.read(r, 1)\n    os.write(1, b'4\\n')\n"
        "    os._exit(0)\nos.close(r)\nprint(3)\n"),
    "orphaned-grandchild-writes-after-the-parent-exits": (
        "import os\nr, w = os.pipe()\nif os.fork() == 0:\n    if os.fork() == 0:\n        os.close(w)\n        os.read(r, 1)\n"
        "        os.write(1, b'4\\n')\n    os._exit(0)\nos.close(r)\nos.wait()\nprint(3)\n"),
    "forked-child-exits-without-flushing": "import os\nprint(3)\nif os.fork() == 0:\n    os._exit(0)\n",
    "thread": "import threading\nprint(3)\nthreading.Thread(target=print, args=(4,)).start()\n",
    "multiprocessing": (
        "import multiprocessing as mp\nif __name__ == '__main__':\n    print(3)\n"
        "    p = mp.get_context('fork').Process(target=print, args=(4,))\n    p.start()\n"),
}

C_FORKING = {
    "printf-then-fork": '#include <stdio.h>\n#include <unistd.h>\nint main(void) { printf("3\\n"); fork(); return 0; }\n',
    "printf-then-fork-then-child-exits-without-flushing": (
        '#include <stdio.h>\n#include <unistd.h>\n'
        'int main(void) { printf("3\\n"); if (fork() == 0) _exit(0); return 0; }\n'),
}


def reference(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, capture_output=True, timeout=60, env=REFERENCE_ENV)


def runs(runner: CodeRunner, language: str, code: str) -> list[RunResult]:
    prepared = compiled.prepare(runner, Extracted(language, code))
    assert prepared.compile_error is None and not prepared.infra_message, prepared
    return [runner.run(b"", Limits(time_s=2, memory_mb=256)) for _ in range(RUNS)]


def assert_as_reference(results: list[RunResult], ref: subprocess.CompletedProcess[bytes]) -> None:
    got = {(rr.stdout, rr.exit_code, rr.status) for rr in results}
    status = Verdict.OK if ref.returncode == 0 else Verdict.RUNTIME_ERROR
    assert got == {(ref.stdout, ref.returncode, status)}, (got, ref)


@pytest.mark.parametrize("code", FORKING.values(), ids=FORKING.keys())
def test_what_forked_processes_write_is_judged_as_python3_judges_it(runner: CodeRunner, code: str,
                                                                     tmp_path: Path) -> None:
    script = tmp_path / "solution.py"
    script.write_text(code)
    ref = reference([languages.get("python3").tools[0], str(script)])
    assert_as_reference(runs(runner, "python3", code), ref)


@pytest.mark.parametrize("code", C_FORKING.values(), ids=C_FORKING.keys())
def test_what_forked_processes_write_is_judged_as_the_compiled_program_prints_it(
        runner: CodeRunner, code: str, tmp_path: Path) -> None:
    assert_as_reference(runs(runner, "c", code), reference([str(built_c_reference(code, tmp_path))]))


@pytest.mark.parametrize("path", ["pypy-fork-server", "exec"])
@pytest.mark.parametrize("code", [FORKING["fork-then-both-exit"], FORKING["forked-child-writes-after-the-parent-exits"],
                                  FORKING["forked-child-exits-without-flushing"]],
                         ids=["fork-then-both-exit", "forked-child-writes-after-the-parent-exits",
                              "forked-child-exits-without-flushing"])
def test_what_forked_processes_write_is_judged_as_pypy3_judges_it(fork_runner: ForkServerRunner, code: str, path: str,
                                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the PyPy fork server, and on the exec path (a fresh ``pypy3 solution.py`` per test in
    the same confinement, ``CPFLEET_PYPY_FORK=0``)."""
    missing = languages.missing_tools("pypy3")
    if missing:
        pytest.skip(f"pypy3 not installed here: {missing}")
    if path == "exec":
        monkeypatch.setenv("CPFLEET_PYPY_FORK", "0")
    assert fork_runner.forks_pypy() == (path != "exec")
    script = tmp_path / "solution.py"
    script.write_text(code)
    ref = reference([languages.get("pypy3").tools[0], str(script)])
    assert_as_reference(runs(fork_runner, "pypy3", code), ref)


THREE = Problem.from_dict({"id": "three", "time_limit_s": 1, "hidden_tests": [{"input": "\n", "output": "3\n"}]})


@pytest.mark.parametrize(("code", "verdict", "reward"), [
    (FORKING["fork-then-both-exit"], Verdict.WRONG_ANSWER, 0.0),
    (FORKING["forked-child-exits-without-flushing"], Verdict.OK, 1.0),
], ids=["fork-then-both-exit", "forked-child-exits-without-flushing"])
def test_a_forked_flush_decides_the_reward_as_python3_gives_it(runner: CodeRunner, code: str, verdict: Verdict,
                                                                reward: float) -> None:
    for _ in range(5):
        result = cpfleet.judge_locally(THREE, f"```python\n{code}\n```", runner)
        assert (result.verdict, result.reward, result.infra_error) == (verdict, reward, False), result.observation


# A process the program left running when its main process ended is waited for within the
# test's limits, not beyond: one that sleeps (even with its std streams closed, which a judge
# reading stdout to EOF would not wait for) is killed at the wall-clock backstop, one that spins
# at the CPU limit; both a TIME_LIMIT with the answer printed before, never a hang or INTERNAL.
LINGERING: dict[str, tuple[str, bool]] = {
    "sleeps": ("import os, time\nprint(3, flush=True)\nif os.fork() == 0:\n    time.sleep(100)\n", False),
    "sleeps-with-its-std-streams-closed": (
        "import os, time\nprint(3, flush=True)\nif os.fork() == 0:\n    os.closerange(0, 3)\n    time.sleep(100)\n", False),
    "spins": ("import os\nprint(3, flush=True)\nif os.fork() == 0:\n    while True:\n        pass\n", True),
    # orphans for the init to reap, made as fast as a process can fork
    "makes-orphans-forever": (
        "import os\nprint(3, flush=True)\nif os.fork() == 0:\n    while True:\n        try:\n            if os.fork() == 0:\n"
        "                os.fork()\n                os._exit(0)\n            os.wait()\n        except OSError:\n"
        "            pass\n", True),
}


@pytest.mark.parametrize(("code", "deterministic"), LINGERING.values(), ids=LINGERING.keys())
def test_a_process_left_running_is_the_programs_time_limit(runner: CodeRunner, code: str,
                                                            deterministic: bool) -> None:
    prepared = compiled.prepare(runner, Extracted("python3", code))
    assert prepared.compile_error is None and not prepared.infra_message, prepared
    limits = Limits(time_s=0.5, memory_mb=256)
    rr = runner.run(b"", limits)
    assert (rr.status, rr.stdout, rr.deterministic) == (Verdict.TIME_LIMIT, b"3\n", deterministic), rr
    assert rr.wall_s < limits.wall_max_s + 1, rr
    assert deterministic or "a process it started was still running" in rr.error, rr.error
    again = runner.run(b"", limits)  # nothing of the first test is left to disturb the next
    assert (again.status, again.stdout) == (Verdict.TIME_LIMIT, b"3\n"), again
