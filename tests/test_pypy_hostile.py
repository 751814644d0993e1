"""Hostile PyPy programs against the PyPy fork server (sandbox/pypy_zygote.py), through the path
a job takes (``compiled.prepare``, then the runner's runs): what a program cannot reach and what
it cannot make the judge do."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import compiled, jobinit, languages, pypy_zygote
from cpfleet.sandbox.extract import Extracted
from cpfleet.sandbox.forkserver import ForkServerRunner
from cpfleet.sandbox.runner import Limits


@pytest.fixture(autouse=True)
def _needs_pypy() -> None:
    missing = languages.missing_tools("pypy3")
    if missing:
        pytest.skip(f"pypy3 not installed here: {missing}")


def _argv0(runner: ForkServerRunner, code: str) -> bytes:
    prepared = compiled.prepare(runner, Extracted("pypy3", code))
    assert prepared.compile_error is None and not prepared.infra_message, prepared
    rr = runner.run(b"", Limits(time_s=10, memory_mb=256))
    assert rr.status == Verdict.OK, rr
    return rr.stdout


def test_a_huge_pypy_source_is_not_compiled_unconfined_in_the_fork_server(fork_runner: ForkServerRunner) -> None:
    # the job init's compile has no limit of its own (a 4 MB constant tuple costs PyPy's
    # compiler ~17 s and ~2.2 GB, charged to the worker): past the bound the exec path
    # compiles it confined and runs `pypy3 /prog/solution.py`, a fresh PyPy under the test's limits
    print_argv = "import sys\nprint(sys.argv[0])\n"
    assert fork_runner.forks_pypy()
    assert _argv0(fork_runner, print_argv) == b"solution.py\n"  # forked
    pad = "x = (" + "1," * (compiled.PYPY_FORK_MAX_SOURCE_CHARS // 2) + ")\n"
    assert len(pad) > compiled.PYPY_FORK_MAX_SOURCE_CHARS
    assert _argv0(fork_runner, pad + print_argv) == b"/prog/solution.py\n"  # exec'd



def test_the_compile_data_budget_refuses_a_larger_allocation_and_is_lifted_after() -> None:
    # the job init's compile runs under it: PyPy's compiler tries to fold `"a" * 10**9` (a 1 GB
    # string it then drops) in the init, which no test limit covers; under the budget the
    # attempt is a MemoryError PyPy swallows, leaving the product to run time
    probe = ("from cpfleet.sandbox import jobinit\n"
             "limit = jobinit._limit_data(64 << 20)\n"
             "assert limit is not None\n"
             "try:\n    bytearray(512 << 20)\nexcept MemoryError:\n    print('refused')\n"
             "import resource\nresource.setrlimit(resource.RLIMIT_DATA, limit)\n"
             "print(len(bytearray(512 << 20)) >> 20)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (0, "refused\n512\n"), out.stderr

def test_a_compile_past_the_budget_is_the_programs_compile_error(fork_runner: ForkServerRunner) -> None:
    # a 4 MB constant tuple needs ~2 GB to compile: a MemoryError of the compile, not INTERNAL
    code = "x = (" + "1," * 2_000_000 + ")\n"
    error = fork_runner.load(code)  # CPython's fork server: the same job init
    assert error is not None and error.startswith("MemoryError: compiling the program needs more than"), error



# A comprehension 24 ``finally`` blocks deep, 1.2 kB: PyPy's compiler compiles a ``finally`` body
# once per way out of its ``try``, so the comprehension's code object is made 2**24 times, and
# under the compile data budget PyPy does not raise MemoryError but aborts ("out of memory:
# couldn't allocate the next arena"). The job init took the compiling child's death for a code
# object marshal refuses and compiled it itself: it aborted too, and the job was INTERNAL
# (reward None) for the program's own doing, as the exec path judges it: a COMPILE_ERROR.
def _comprehension_deep_in_finally(depth: int) -> str:
    nest = "".join(" " * i + "try:\n" + " " * (i + 1) + "y = 1\n" + " " * i + "finally:\n" for i in range(depth))
    return nest + " " * depth + "x = [i for i in range(10)]\na, b = map(int, input().split())\nprint(a + b)\n"


def test_a_compile_that_aborts_the_pypy_compiler_is_the_programs_compile_error(fork_runner: ForkServerRunner) -> None:
    assert fork_runner.forks_pypy()
    prepared = compiled.prepare(fork_runner, Extracted("pypy3", _comprehension_deep_in_finally(24)))
    assert not prepared.infra_message, prepared.infra_message
    assert prepared.compile_error is not None and "compiling the program" in prepared.compile_error
    # the fork server still judges the next program
    assert _argv0(fork_runner, "import sys\nprint(sys.argv[0])\n") == b"solution.py\n"


# A compile may take COMPILE_CPU_S of CPU, which a loaded host gives at a fraction of a core: the
# CPython fork server waits 8 x that for its job init's answer (forkserver's wait was once 4 x, and
# a compile stopped at its own limit was INTERNAL below a quarter of a CPU). The PyPy fork server
# waited 60 s, that same 4 x. (Seeing it fail takes a host giving the compile under a quarter of a
# CPU for a minute; the wait is read where the runner makes it.)
def test_the_pypy_fork_server_waits_for_its_job_inits_compile_as_long_as_the_cpython_one(
        fork_runner: ForkServerRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    assert fork_runner.forks_pypy()
    assert _argv0(fork_runner, "import sys\nprint(sys.argv[0])\n") == b"solution.py\n"  # its zygote is up
    waits: list[float] = []
    real = pypy_zygote.recv_within

    def timed(sock: socket.socket, timeout: float) -> Any:
        waits.append(timeout)
        return real(sock, timeout)

    monkeypatch.setattr(pypy_zygote, "recv_within", timed)
    assert compiled.prepare(fork_runner, Extracted("pypy3", "print(1)\n")) == compiled.Prepared()
    assert waits and waits[-1] >= 8 * jobinit.COMPILE_CPU_S, waits

@pytest.mark.parametrize("tail", [
    "sys.exit(2**64)", "sys.exit(-2**64)",
    "sys.exit(type('I', (int,), {'__and__': lambda s, o: 0, '__index__': lambda s: 0})(1))",
    "import threading\ndef shutdown():\n    raise SystemExit(0)\nthreading._shutdown = shutdown\nraise ValueError",
], ids=["past-c-long", "below-c-long", "int-subclass", "exit-0-at-thread-shutdown"])
def test_an_exit_status_is_the_one_pypy_ends_with(fork_runner: ForkServerRunner, tail: str, tmp_path: Path) -> None:
    # the fork server took ``code & 0xFF`` of any int, and a SystemExit raised while joining
    # threads at exit for the status: status 0 where `pypy3 solution.py` fails
    source = f"import sys\nprint(3, flush=True)\n{tail}\n"
    script = tmp_path / "solution.py"
    script.write_text(source)
    pypy = languages.get("pypy3").tools[0]
    reference = subprocess.run([pypy, str(script)], capture_output=True, timeout=60).returncode
    assert fork_runner.forks_pypy()
    prepared = compiled.prepare(fork_runner, Extracted("pypy3", source))
    assert prepared.compile_error is None and not prepared.infra_message, prepared
    rr = fork_runner.run(b"", Limits(time_s=10, memory_mb=256))
    assert (rr.status, rr.exit_code, rr.stdout) == (Verdict.RUNTIME_ERROR, reference, b"3\n")


# PyPy's app_main takes ``int(code)`` of a SystemExit's code that is not None (a float, a numeric
# string, an object with __int__), printing the code and exiting 1 only where that raises; the
# PyPy fork server applied CPython's rule (only an int is a status), so ``exit(0.0)`` after a right
# answer was a RUNTIME_ERROR that ``pypy3 solution.py`` ends with status 0.
@pytest.mark.parametrize("code", ["0.0", "2.7", "'0'", "'x'", "type('O', (), {'__int__': lambda s: 0})()", "True"],
                         ids=["float-0", "float-2.7", "numeric-text", "text", "object-with-int", "true"])
def test_a_systemexit_code_becomes_the_status_pypy_gives_it(fork_runner: ForkServerRunner, code: str,
                                                           tmp_path: Path) -> None:
    rr, reference = forked_and_pypy(fork_runner, f"import sys\nprint(3)\nsys.exit({code})\n", tmp_path)
    assert (rr.stdout, rr.exit_code) == (reference.stdout, reference.returncode)


def forked_and_pypy(fork_runner: ForkServerRunner, code: str, tmp_path: Path) -> tuple[Any, Any]:
    """``code`` run once by the PyPy fork server and once as ``pypy3 solution.py`` in the
    sandbox's environment (the reference); both results."""
    script = tmp_path / "solution.py"
    script.write_text(code)
    pypy = languages.get("pypy3").tools[0]
    reference = subprocess.run([pypy, str(script)], capture_output=True, timeout=60, env={"LANG": "C.UTF-8"})
    assert fork_runner.forks_pypy()
    prepared = compiled.prepare(fork_runner, Extracted("pypy3", code))
    assert prepared.compile_error is None and not prepared.infra_message, prepared
    rr = fork_runner.run(b"", Limits(time_s=10, memory_mb=256))
    return rr, reference


# `pypy3 solution.py` flushes sys.stderr and sys.stdout when the main module ends, after it
# reports a SystemExit's code or an uncaught exception (an excepthook the program set that exits
# loses the buffer) and before it joins threads and runs atexit handlers. The PyPy fork server
# flushed after them: a wrong answer left in the buffer was discarded by an atexit handler that
# wrote the right one raw and left with os._exit(0) (paid; `pypy3` prints both), and an answer
# printed before a thread's os._exit(0) was lost. Compared with `pypy3` in the sandbox's
# environment (PYTHONUNBUFFERED, set in many shells, would make its stdout unbuffered).
@pytest.mark.parametrize("code", [
    "import atexit, os\nprint(1)\natexit.register(lambda: (os.write(1, b'3\\n'), os._exit(0)))\n",
    "import atexit, os\nprint(3)\natexit.register(lambda: os._exit(0))\nraise ValueError\n",
    "import os, threading, time\ndef later():\n    time.sleep(0.1)\n    os._exit(0)\n"
    "threading.Thread(target=later).start()\nprint(3)\n",
    "import os, sys\nprint(3)\nsys.excepthook = lambda *args: os._exit(0)\nraise ValueError\n",
    "import os, sys\nprint(3)\nclass Code:\n    def __str__(self):\n        os._exit(0)\nsys.exit(Code())\n",
], ids=["wrong-answer-then-raw-right-answer-at-exit", "answer-then-exception-then-exit-0-at-exit",
        "answer-then-a-thread-exits-0", "answer-then-an-excepthook-that-exits-0", "answer-then-an-exit-code-that-exits-0"])
def test_the_std_streams_are_flushed_when_the_main_module_ends_as_pypy_does(
        fork_runner: ForkServerRunner, code: str, tmp_path: Path) -> None:
    rr, reference = forked_and_pypy(fork_runner, code, tmp_path)
    assert (rr.stdout, rr.exit_code) == (reference.stdout, reference.returncode)


# A std stream the program lets go is flushed by PyPy when its collector finalizes it, or at exit
# with every buffered writer still alive. The PyPy fork server kept the streams it built alive
# and flushed only the ones ``sys`` held at exit: a wrong answer printed before was dropped, and a
# right one written raw after it was paid.
@pytest.mark.parametrize("code", [
    "import os, sys\nprint(1)\nsys.stdout = sys.__stdout__ = None\nos.write(1, b'3\\n')\n",
    "import os, sys\nprint(1)\nsys.stdout = sys.__stdout__ = open(1, 'w', closefd=False)\nos.write(1, b'3\\n')\n",
    "import gc, os, sys\nprint(1)\nsys.stdout = sys.__stdout__ = None\ngc.collect()\nos.write(1, b'3\\n')\nos._exit(0)\n",
    "import sys\nprint(3)\nsys.stdout = sys.__stdout__ = None\n",
], ids=["dropped", "rebound", "dropped-and-collected", "answer-then-dropped"])
def test_a_std_stream_the_program_lets_go_is_flushed_as_pypy_does(
        fork_runner: ForkServerRunner, code: str, tmp_path: Path) -> None:
    rr, reference = forked_and_pypy(fork_runner, code, tmp_path)
    assert sorted(rr.stdout.split()) == sorted(reference.stdout.split()), (rr.stdout, reference.stdout)


# The PyPy fork server's std streams were built over the zygote's /dev/null, which a stream reads
# as seekable once, when it is made: ``sys.stdout.reconfigure(...)`` then seeked a test's stdout
# pipe and raised ESPIPE, a valid program's RUNTIME_ERROR where `pypy3 solution.py` prints.
def test_reconfiguring_stdout_works_as_under_pypy(fork_runner: ForkServerRunner) -> None:
    code = "import sys\nsys.stdout.reconfigure(line_buffering=False)\nprint(3, sys.stdout.seekable())\n"
    assert fork_runner.forks_pypy()
    prepared = compiled.prepare(fork_runner, Extracted("pypy3", code))
    assert prepared.compile_error is None and not prepared.infra_message, prepared
    rr = fork_runner.run(b"", Limits(time_s=10, memory_mb=256))
    assert (rr.status, rr.stdout) == (Verdict.OK, b"3 False\n"), rr
