"""The PyPy fork server (sandbox/pypy_zygote.py): PyPy programs forked from a warm PyPy zygote
with every isolation layer of the runner, judged as on the exec path (a fresh PyPy per test),
and the zygote's own Linux calls under PyPy (the cffi backend of sandbox/linux.py)."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest

from cpfleet.core.errors import SandboxBroken
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages, programs
from cpfleet.sandbox.forkserver import ForkServerRunner, self_test_probe
from cpfleet.sandbox.runner import Limits, RunResult

SANDBOX_DIR = os.path.dirname(os.path.abspath(programs.__file__))


@pytest.fixture(autouse=True)
def _needs_pypy() -> None:
    missing = languages.missing_tools("pypy3")
    if missing:
        pytest.skip(f"pypy3 not installed here: {missing}")


def test_pypy_programs_run_in_a_pypy_fork_server_with_every_layer_of_the_runner(fork_runner: ForkServerRunner) -> None:
    assert fork_runner.forks_pypy()
    report = fork_runner.pypy_isolation
    assert report is not None
    held = {k for k, v in fork_runner.isolation.layers.items() if v}
    assert held <= {k for k, v in report.layers.items() if v}, report.notes
    # the probe of the runner's own self-test, run again here: seccomp mode 2, the slot's uid,
    # a pid of a fresh namespace, no network
    assert fork_runner.load_pypy(self_test_probe(1)) is None
    rr = fork_runner.run(b"", Limits(time_s=5))
    assert rr.status == Verdict.OK, rr
    seen = rr.stdout.decode().split()
    assert "seccomp=2" in seen and f"uid={fork_runner.slot.uid}" in seen and "net-open" not in seen
    assert any(s.startswith("pid=") and int(s[4:]) < 10 for s in seen), seen
    # forked, not exec'd: the program is solution.py in its directory, under PyPy
    assert fork_runner.load_pypy("import sys, platform\nprint(platform.python_implementation(), sys.argv[0])\n") is None
    assert fork_runner.run(b"", Limits(time_s=5)).stdout == b"PyPy solution.py\n"


# programs whose every observable (status, stdout, the last line of stderr) must be the same
# on both paths: PyPy's stream layout and shutdown as `pypy3 solution.py` has them
SAME_ON_BOTH = {
    "streams": "import sys\nfor s in (sys.stdin, sys.stdout, sys.stderr):\n"
               "    print(type(s).__name__, type(s.buffer).__name__, s.encoding, s.errors, s.line_buffering,"
               " s.write_through, s.mode, s.name, s.newlines)\n",
    "interleaved": "import sys\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')\nimport os\nos._exit(0)\n",
    "exit_status": "import sys\nprint(1)\nsys.exit(3)\n",
    "exit_message": "import sys\nsys.exit('bad input')\n",
    "uncaught": "def f():\n    raise KeyError('boom')\nf()\n",
    "digit_limit": "print(len(str(10 ** 5000)))\n",
    "unflushed_writer": "out = open(1, 'w')\nout.write('kept\\n')\n",
    # a writer the program keeps anywhere but its globals: pypy3 flushes every live one at exit,
    # and the fork server lost these answers (a right answer's WRONG_ANSWER)
    "writer_in_a_local": "def main():\n    out = open(1, 'w')\n    out.write('kept\\n')\nmain()\n",
    "writer_by_its_write": "write = open(1, 'w').write\nwrite('kept\\n')\n",
    "writer_in_an_attribute": "import sys\nsys.out = open(1, 'wb')\nsys.out.write(b'kept\\n')\n",
    "fdopen_writer_in_a_list": "import os\nouts = [os.fdopen(1, 'w')]\nouts[0].write('kept\\n')\n",
    "missing_file": "open('missing.txt')\n",
    "atexit": "import atexit\natexit.register(lambda: print('bye'))\nprint('hi')\n",
    "thread": "import threading\nr = []\nt = threading.Thread(target=lambda: r.append(sum(range(10 ** 6))))\n"
              "t.start()\nt.join()\nprint(r)\n",
    "daemon_left_running": "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                           "print('done')\n",
    "memory_error": "x = bytearray(1 << 40)\n",
    "recursion": "def f(n):\n    return f(n + 1)\nf(0)\n",
    "stdin": "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n",
}


def _outcome(rr: RunResult) -> tuple[Verdict, int | None, bytes, bytes]:
    last = rr.stderr.rstrip().rsplit(b"\n", 1)[-1]
    return rr.status, rr.exit_code, rr.stdout, last


@pytest.mark.parametrize("name", sorted(SAME_ON_BOTH))
def test_the_pypy_fork_server_judges_as_a_fresh_pypy(fork_runner: ForkServerRunner, name: str) -> None:
    source = SAME_ON_BOTH[name]
    limits = Limits(time_s=5, memory_mb=256)
    assert fork_runner.forks_pypy()
    built = programs.compile_program(fork_runner, "pypy3", {"solution.py": source}, ["solution.py"],
                                     cache=programs.CompileCache(tempfile.mkdtemp(prefix="cpfleet-test-")))
    assert built.ok and built.image is not None, built.diagnostics
    fork_runner.load_program(built.image)
    on_exec = _outcome(fork_runner.run(b"1 2 3\n", limits))
    assert fork_runner.load_pypy(source) is None
    on_fork = _outcome(fork_runner.run(b"1 2 3\n", limits))
    assert on_fork == on_exec


def test_a_syntax_error_is_pypys_own(fork_runner: ForkServerRunner) -> None:
    assert fork_runner.forks_pypy()  # starts the PyPy fork server when this test runs alone
    error = fork_runner.load_pypy("print(1 +\n")
    assert error is not None and "SyntaxError" in error and "solution.py" in error


LINUX_CHECK = f"""
import os, sys
M = type(sys); top = M("cpfleet"); top.__path__ = []
sub = M("cpfleet.sandbox"); sub.__path__ = [{SANDBOX_DIR!r}]; top.sandbox = sub
sys.modules.update({{"cpfleet": top, "cpfleet.sandbox": sub}})
from cpfleet.sandbox import linux, seccomp
print(type(linux._libc).__name__, "ctypes" in sys.modules)
r, w = os.pipe()
fd = os.dup(w)
linux.close_range(fd, fd)
try:
    os.fstat(fd)
    print("close_range failed")
except OSError:
    print("closed")
pidfd = linux.pidfd_open(os.getpid())
print("pidfd", pidfd > 2, os.get_inheritable(pidfd))
try:
    linux.umount2("/nonexistent-mount-point")
except OSError as e:
    print("errno", e.errno)
pid = os.fork()
if pid == 0:
    linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
    seccomp.build().install()
    try:
        linux.unshare(linux.CLONE_NEWNS)
    except OSError as e:
        print("refused", e.errno)
    print([l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")])
    sys.stdout.flush()
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_the_linux_calls_work_under_pypy_without_ctypes() -> None:
    if os.uname().machine != "x86_64":
        pytest.skip("the seccomp filter is encoded for x86_64 only")
    out = subprocess.run([languages.get("pypy3").tools[0], "-I", "-S", "-c", LINUX_CHECK],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:6] == ["_Cffi False", "closed", "pidfd True False", "errno 2", "refused 1", "['2']"]


def test_a_pypy_zygote_that_cannot_start_leaves_pypy_programs_to_the_exec_path(
        monkeypatch: pytest.MonkeyPatch, tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    # a PyPy under /tmp cannot be shown in the sandbox at its path: the runner refuses to start
    # a zygote under it, says so once, and answers False from then on (no restart per job)
    wrapper = os.path.join(str(tmp_path), "pypy3")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec {languages.get('pypy3').tools[0]} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    monkeypatch.setenv("CPFLEET_PYPY", wrapper)
    languages.table.cache_clear()
    try:
        with ForkServerRunner() as runner:
            assert not runner.forks_pypy() and runner.pypy_isolation is None
            assert not runner.forks_pypy()
            with pytest.raises(SandboxBroken, match="no PyPy fork server"):
                runner.load_pypy("print(1)\n")
    finally:
        monkeypatch.undo()
        languages.table.cache_clear()
    said = capsys.readouterr().err
    assert said.count("no PyPy fork server") == 1 and "/tmp" in said
