"""Every benchmark in ``bench/`` that needs no shared data still runs end to end on a tiny
size (a real fleet, real ``cpfleet judge``, real compilers): the scripts are how the speed goals
are checked, so a change to the judging rules or the client must not leave them broken.
Numbers are not asserted (timing belongs to the benchmarks, never to tests); what is asserted is
that each run finishes, judges correctly where it checks that itself, and prints its result line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"

CASES = [
    ("bench_agentic.py", ["--n", "30", "--baseline-n", "5"], "goal p50 <= 15 ms in both bursts"),
    ("bench_judge.py", ["--tests", "5", "--jobs", "1", "--rounds", "1", "--bare-tests", "3"], "per test, whole command"),
    ("bench_judge_memory.py", ["--tests", "1", "--mib", "1"], "peak RSS of the judge process tree"),
    ("bench_runner.py", ["--tests", "10", "--rounds", "1"], "fork server per test"),
    ("bench_withdrawn.py", ["--jobs", "20"], "orphaned jobs cleared"),
    ("bench_broker.py", ["--jobs", "20", "--sample", "10"], "goal <= 6 commands/job"),
    ("bench_runjobs.py", ["--programs", "2", "--tests", "2", "--rounds", "1"], "run jobs, one per test"),
    ("bench_lost_node.py", ["--jobs", "4", "--sleep", "1", "--node-ttl", "2"], "answered once each: True"),
    ("env_overhead.py", ["--tests", "5", "--rounds", "1", "--jobs", "2"], "per test (5 tests, forkserver)"),
    ("bench_fncall_encode.py", ["--size", "1000", "--rounds", "1"], "typed round trip exact: True"),
    # 24 problems: every kind of the generated APPS-shaped set once, so each solution is judged
    # correct on its tests (the script stops on any reward below 1.0)
    ("bench_tiny_tests.py", ["--problems", "24", "--copies", "1", "--rounds", "1", "--codecontests", "0",
                             "--min-tests", "3", "--max-tests", "6"], "median tree CPU / solutions' own CPU"),
    (
        "bench_gateway.py",
        ["--problems", "3", "--concurrency", "8", "--rounds", "1", "--generated"],
        "refused calls a client turns into a score",
    ),
    (
        "bench_fleet.py",
        ["--jobs", "5", "--baseline-jobs", "2", "--enqueue-jobs", "50", "--latency-samples", "3", "--heavy-jobs", "1", "--rounds", "1"],
        "fleet / cpfleet judge",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("script", "args", "prints"), CASES, ids=[c[0] for c in CASES])
def test_benchmark_runs_on_a_tiny_size(script: str, args: list[str], prints: str) -> None:
    out = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert prints in out.stdout, out.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed (the languages benchmark compiles C++)")
def test_languages_benchmark_runs_on_a_tiny_size() -> None:
    args = ["--tests", "3", "--jobs", "2", "--distinct", "1", "--pch-rounds", "1"]
    out = subprocess.run([sys.executable, str(BENCH / "bench_languages.py"), *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "outputs identical" in out.stdout and "rewards [1.0]" in out.stdout, out.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pypy3") is None, reason="pypy3 is not installed (the PyPy benchmark runs it)")
def test_pypy_benchmark_runs_on_a_tiny_size() -> None:
    out = subprocess.run([sys.executable, str(BENCH / "bench_pypy.py"), "--jobs", "1", "--tests", "2"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "goal <= 5 ms per test on the fork server" in out.stdout, out.stdout[-2000:]
