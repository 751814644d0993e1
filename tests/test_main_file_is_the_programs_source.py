"""``__main__.__file__`` is the absolute path of the program's own source, as under
``python3 solution.py`` (3.9+), on both runners, under PyPy and without isolation: the fork
server places a read-only copy once per job (sandbox/jobinit.py, ``JobInit._place_script``).
multiprocessing's spawn start method (and forkserver, the default from Python 3.14) re-runs the
main module from that file: without it a Pool restarted its workers forever and a correct
program was a TIME_LIMIT. Tracebacks of the fork server still name ``solution.py``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from runner_helpers import run

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.forkserver import ForkServerRunner
from cpfleet.sandbox.runner import CodeRunner, Limits

SPAWN_POOL = textwrap.dedent("""
    import multiprocessing as mp
    def sq(x): return x*x
    if __name__=='__main__':
        mp.set_start_method('spawn')
        a,b=map(int,input().split())
        with mp.Pool(2) as p: r=sum(p.map(sq,[1,2]))
        print(a+b+r-5)
""").lstrip()

READS_ITSELF = textwrap.dedent("""
    import inspect, os, sys
    def f():
        return 1
    print(os.path.isabs(__file__), os.path.basename(__file__), sys.argv[0], sys.path[0] == os.getcwd())
    print(len(open(__file__).read()), open(__file__).read().splitlines()[0])
    print(inspect.getsource(f).splitlines()[0])
    1/0
""").lstrip()
EXPECTED = f"True solution.py solution.py True\n{len(READS_ITSELF)} import inspect, os, sys\ndef f():\n".encode()


def check_reads_itself(runner: CodeRunner, fork: bool) -> None:
    res = run(runner, READS_ITSELF, time_s=5)
    assert res.status == Verdict.RUNTIME_ERROR, res
    assert res.stdout == EXPECTED, res.stderr
    assert b"ZeroDivisionError" in res.stderr
    if fork:  # code objects keep the name the fork server always showed
        assert b'File "solution.py", line 7, in <module>' in res.stderr, res.stderr


def test_a_spawn_pool_program_is_ok_as_under_python3(runner: CodeRunner) -> None:
    res = run(runner, SPAWN_POOL, "3 5\n", time_s=5)
    assert (res.status, res.stdout) == (Verdict.OK, b"8\n"), res.stderr[-500:]


def test_main_file_is_the_absolute_path_of_the_programs_source(runner: CodeRunner) -> None:
    check_reads_itself(runner, runner.name == "forkserver")


def test_every_test_of_a_job_reads_the_source(runner: CodeRunner) -> None:
    source = "print(len(open(__file__).read()))\n"
    assert runner.load(source) is None
    outs = [runner.run(b"", Limits(time_s=5)).stdout for _ in range(3)]
    assert outs == [f"{len(source)}\n".encode()] * 3


def test_a_call_based_program_reads_its_own_source(runner: CodeRunner) -> None:
    prob = Problem.from_dict({"id": "file/squares", "fn_name": "squares",
                              "public_tests": [{"input": json.dumps([3]), "output": json.dumps([0, 1, 4])}],
                              "hidden_tests": [{"input": json.dumps([2]), "output": json.dumps([0, 1])}]})
    code = ("def squares(n):\n    assert 'def squares' in open(__file__).read()\n"
            "    return [i * i for i in range(n)]\n")
    res = evaluate(prob, f"```python\n{code}```\n", runner)
    assert res.reward == 1.0, res.observation


def test_a_pypy_fork_server_program_reads_itself_and_spawns(fork_runner: ForkServerRunner) -> None:
    if languages.missing_tools("pypy3") or not fork_runner.forks_pypy():
        pytest.skip("no PyPy fork server here")
    assert fork_runner.load_pypy(SPAWN_POOL) is None
    res = fork_runner.run(b"3 5\n", Limits(time_s=5))
    assert (res.status, res.stdout) == (Verdict.OK, b"8\n"), res.stderr[-500:]
    assert fork_runner.load_pypy(READS_ITSELF) is None
    res = fork_runner.run(b"", Limits(time_s=5))
    assert res.stdout == EXPECTED, res.stderr
    assert b'File "solution.py", line 7, in <module>' in res.stderr, res.stderr


@pytest.fixture(scope="module")
def unisolated() -> Iterator[ForkServerRunner]:
    r = ForkServerRunner(isolate=False)
    yield r
    r.close()


def test_without_isolation_the_source_is_placed_in_a_host_directory(unisolated: ForkServerRunner) -> None:
    res = run(unisolated, SPAWN_POOL, "3 5\n", time_s=5)
    assert (res.status, res.stdout) == (Verdict.OK, b"8\n"), res.stderr[-500:]
    check_reads_itself(unisolated, True)


# tries to change its own source for the next test; prints the length the test read
NO_CHANGE = textwrap.dedent("""
    import os
    for attempt in (lambda: open(__file__, "a").write("#"), lambda: os.chmod(__file__, 0o666),
                    lambda: os.unlink(__file__), lambda: os.rename(__file__, __file__ + "x")):
        try:
            attempt()
            print("changed")
        except OSError:
            pass
    print(len(open(__file__).read()))
""").lstrip()


def test_no_test_can_change_the_source_the_next_test_reads(fork_runner: ForkServerRunner) -> None:
    """The copy is shared by the job's tests: read-only, or one test could leave the next one
    a message in it."""
    assert fork_runner.load(NO_CHANGE) is None
    outs = [fork_runner.run(b"", Limits(time_s=5)).stdout for _ in range(2)]
    assert outs == [f"{len(NO_CHANGE)}\n".encode()] * 2


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0,
                    reason="needs setpriv and root to take CAP_SETUID/CAP_SETGID away")
def test_without_a_uid_to_drop_to_the_source_is_sealed_read_only() -> None:
    """Tests that keep the init's uid (no CAP_SETUID: a mount namespace but no uid drop) could
    write a file the init owns: there the job process remounts the copy's tmpfs read-only."""
    script = textwrap.dedent(f"""
        import json
        from cpfleet.sandbox.forkserver import ForkServerRunner
        from cpfleet.sandbox.runner import Limits
        r = ForkServerRunner()
        layers = r.isolation.layers
        assert r.load({NO_CHANGE!r}) is None
        outs = [r.run(b"", Limits(time_s=5)).stdout.decode() for _ in range(2)]
        r.close()
        print(json.dumps({{"layers": layers, "outs": outs}}))
    """)
    proc = subprocess.run(["setpriv", "--inh-caps=-setuid,-setgid", "--bounding-set=-setuid,-setgid",
                           sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["layers"]["mountns"] and not got["layers"]["uid_drop"], got["layers"]
    assert got["outs"] == [f"{len(NO_CHANGE)}\n"] * 2
