"""Run jobs through a real fleet (redis-server + prefork worker + FleetClient): a program and its
stdins go through the queue, run in the worker's sandbox (the same compile-once, limits and
confinement as judging) and come back as one RunJobResult per job, with every run's status,
exit code, clipped outputs and their true sizes. Nothing runs in the client's process."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from fleet_helpers import start_worker  # noqa: F401  (fixture)

from cpfleet import RunJobResult, RunRequest, RunStatus
from cpfleet.core import protocol
from cpfleet.producer.client import FleetClient
from cpfleet.sandbox import languages

ECHO_PID = "import os, sys\nprint(os.getppid(), os.getpid())\nprint(sys.stdin.read().strip()[::-1])\n"
CPP_DOUBLE = "#include <cstdio>\nint main(){long long a; if(scanf(\"%lld\",&a)!=1) return 3; printf(\"%lld\\n\",a*2);}\n"
JAVA_SUM = ("import java.util.*;\npublic class Main { public static void main(String[] x) {"
            " Scanner s = new Scanner(System.in); System.out.println(s.nextInt() + s.nextInt()); } }\n")


@pytest.fixture
def fleet_and_worker(redis_url: str, start_worker, tmp_path: Path):  # noqa: F811
    worker = start_worker(redis_url, concurrency=2, env={"CPFLEET_COMPILE_CACHE_DIR": str(tmp_path / "cc")})
    with FleetClient(redis_url, timeout=240) as fleet:
        yield fleet, worker


def test_python_runs_on_the_worker_with_many_inputs(fleet_and_worker) -> None:
    fleet, worker = fleet_and_worker
    r = fleet.run(ECHO_PID, ["abc", "hello\n", ""], job_id="py-multi")
    assert isinstance(r, RunJobResult)
    assert (r.job_id, r.status, r.language, r.infra_error, r.compile) == ("py-multi", RunStatus.FINISHED, "python3",
                                                                          False, None)
    assert [x.status for x in r.runs] == [RunStatus.FINISHED] * 3 and all(x.ok for x in r.runs)
    assert [x.stdout.splitlines()[1] if len(x.stdout.splitlines()) > 1 else "" for x in r.runs] == ["cba", "olleh", ""]
    # the program ran in the worker's sandbox: its own pid namespace (pid 2 under the job's
    # init), under a worker pool process, never in this client process
    ppid, pid = (int(v) for v in r.runs[0].stdout.split()[:2])
    assert os.getpid() not in (ppid, pid) and pid == 2
    assert r.worker == worker.hostname
    assert (r.time_limit_s, r.memory_limit_mb) == (protocol.DEFAULT_RUN_TIME_LIMIT_S, protocol.DEFAULT_RUN_MEMORY_MB)
    assert all(x.cpu_ms > 0 and x.wall_ms > 0 for x in r.runs)


def test_outputs_are_clipped_to_the_cap_with_their_true_sizes(fleet_and_worker) -> None:
    fleet, _ = fleet_and_worker
    code = "import sys\nsys.stdout.write('x' * 100000)\nsys.stderr.write('é' * 3000)\n"
    (run,) = fleet.run(code, output_cap=1000).runs
    assert run.status == RunStatus.FINISHED and run.exit_code == 0
    assert run.stdout == "x" * 1000 and run.stdout_bytes == 100000 and run.stdout_truncated
    assert run.stderr == "é" * 500 and run.stderr_bytes == 6000 and run.stderr_truncated
    (small,) = fleet.run("print('hi')").runs
    assert (small.stdout, small.stdout_bytes, small.stdout_truncated) == ("hi\n", 3, False)


def test_program_failures_are_statuses_never_internal(fleet_and_worker) -> None:
    fleet, _ = fleet_and_worker
    futures = fleet.run_many([
        RunRequest(code="while True: pass", time_limit_s=0.5, job_id="tle"),
        RunRequest(code="x = bytearray(900 * 1024 * 1024)\nprint(len(x))", memory_limit_mb=128, job_id="mle"),
        {"code": "import os\nos.kill(os.getpid(), 11)", "job_id": "segv"},
        {"code": "import sys\nprint('partial')\nsys.exit(7)", "job_id": "exit7"},
        {"code": "raise ValueError('boom')", "job_id": "exc"},
        {"code": "def f(:\n  pass", "job_id": "syntax"},
        {"code": "import sys\nwhile True: sys.stdout.write('y' * 65536)", "job_id": "ole", "time_limit_s": 20},
    ])
    got = {r.job_id: r for r in FleetClient.gather(futures, timeout=300)}
    assert not any(r.infra_error for r in got.values()), {k: r.infra_message for k, r in got.items()}
    tle = got["tle"].runs[0]
    assert (tle.status, tle.limit, tle.exit_code) == (RunStatus.TIME_LIMIT, "cpu_time", None) and tle.cpu_ms >= 500
    assert got["tle"].time_limit_s == 0.5
    mle = got["mle"].runs[0]
    assert (mle.status, mle.limit) == (RunStatus.MEMORY_LIMIT, "memory") and got["mle"].memory_limit_mb == 128
    segv = got["segv"].runs[0]
    assert (segv.status, segv.signal, segv.exit_code) == (RunStatus.RUNTIME_ERROR, 11, None)
    exit7 = got["exit7"].runs[0]
    assert (exit7.status, exit7.exit_code, exit7.stdout, exit7.ok) == (RunStatus.FINISHED, 7, "partial\n", False)
    exc = got["exc"].runs[0]
    assert (exc.status, exc.exit_code) == (RunStatus.FINISHED, 1) and "ValueError: boom" in exc.stderr
    syntax = got["syntax"]
    assert (syntax.status, syntax.runs) == (RunStatus.COMPILE_ERROR, ())
    assert syntax.compile is not None and "SyntaxError" in syntax.compile.stderr
    ole = got["ole"].runs[0]
    assert (ole.status, ole.limit) == (RunStatus.OUTPUT_LIMIT, "stdout")
    assert ole.stdout_bytes >= 64 * 1024 * 1024 and len(ole.stdout) == protocol.DEFAULT_RUN_OUTPUT_CAP


def test_compiled_languages_compile_once_and_run_every_input(fleet_and_worker) -> None:
    fleet, _ = fleet_and_worker
    if languages.missing_tools("cpp"):
        pytest.skip("g++ not installed here")
    r = fleet.run(CPP_DOUBLE, ["21", "-4", "x"], language="cpp")
    assert r.status == RunStatus.FINISHED and r.language == "cpp", r.infra_message
    assert r.compile is not None and r.compile.ok
    assert [(x.stdout, x.exit_code) for x in r.runs] == [("42\n", 0), ("-8\n", 0), ("", 3)]
    ce = fleet.run("int main( {", "1", language="cpp", output_cap=64)
    assert ce.status == RunStatus.COMPILE_ERROR and ce.runs == () and ce.compile is not None
    assert "error" in ce.compile.stderr and len(ce.compile.stderr.encode()) <= 64
    assert ce.compile.stderr_bytes > 64
    if not languages.missing_tools("java"):
        j = fleet.run(JAVA_SUM, ["1 2", "40 2"], language="java")
        assert j.status == RunStatus.FINISHED, j.infra_message
        assert [x.stdout for x in j.runs] == ["3\n", "42\n"]


def test_a_fenced_completion_is_extracted_as_for_judging(fleet_and_worker) -> None:
    fleet, _ = fleet_and_worker
    r = fleet.run(completion="Here:\n```python\nprint(int(input()) + 1)\n```\n", stdin="41")
    assert (r.status, r.language, r.runs[0].stdout) == (RunStatus.FINISHED, "python3", "42\n")
    none = fleet.run(completion="I cannot solve this.")
    assert (none.status, none.runs, none.infra_error) == (RunStatus.NO_CODE, (), False)
    if not languages.missing_tools("cpp"):
        cpp = fleet.run(completion=f"```cpp\n{CPP_DOUBLE}```", stdin="5")
        assert (cpp.language, cpp.runs[0].stdout) == ("cpp", "10\n")


def test_files_are_placed_and_fetched(fleet_and_worker) -> None:
    fleet, _ = fleet_and_worker
    code = ("data = open('in/data.txt').read()\nprint(data.upper())\n"
            "open('out.txt', 'w').write(data * 2)\nopen('big.bin', 'wb').write(b'z' * 50000)\n")
    r = fleet.run(code, ["", ""], files={"in/data.txt": "abc"}, fetch_files=["out.txt", "big.bin", "missing"])
    assert r.status == RunStatus.FINISHED, r.infra_message
    for run in r.runs:
        assert run.ok and run.stdout == "ABC\n"
        assert run.files["out.txt"] == b"abcabc" and "missing" not in run.files
        assert len(run.files["big.bin"]) == protocol.FETCH_FILE_BYTES and run.files_truncated == ("big.bin",)
    # placed files are read-only inputs: writing to one is the program's own error
    ro = fleet.run("open('data.txt', 'w').write('x')", files={"data.txt": b"abc"})
    assert ro.runs[0].status == RunStatus.FINISHED and ro.runs[0].exit_code == 1
    assert "PermissionError" in ro.runs[0].stderr


def test_bad_requests_are_refused_before_anything_is_sent(fleet_and_worker) -> None:
    fleet, _ = fleet_and_worker
    for kwargs in (
        {"files": {"../etc/passwd": b"x"}},
        {"files": {"/abs": b"x"}},
        {"fetch_files": ["a", "b", "c", "d", "e"]},
        {"time_limit_s": 0},
        {"time_limit_s": protocol.MAX_RUN_TIME_LIMIT_S + 1},
        {"memory_limit_mb": 1},
        {"output_cap": -1},
        {"language": "cobol"},
    ):
        with pytest.raises(ValueError):
            fleet.submit_run("print(1)", **kwargs)
    with pytest.raises(ValueError):
        fleet.submit_run("print(1)", completion="```python\nprint(1)\n```")
    assert fleet.in_flight == 0


def test_arun_from_an_event_loop(fleet_and_worker) -> None:
    fleet, _ = fleet_and_worker

    async def episode() -> list[str]:
        results = await asyncio.gather(*(fleet.arun(f"print({i} * {i})") for i in range(5)))
        return [r.runs[0].stdout for r in results]

    assert asyncio.run(episode()) == [f"{i * i}\n" for i in range(5)]
