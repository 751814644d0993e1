"""Each language's self-test at worker start (sandbox/selftest.py): a toolchain that is present but
broken makes that language's jobs INTERNAL naming the failed self-test (infra, reward None),
never COMPILE_ERROR with reward 0; the worker says at start which languages passed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from fleet_helpers import start_worker  # noqa: F401  (fixture)

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.producer.client import FleetClient
from cpfleet.sandbox import languages, selftest

SUM = Problem.from_dict({
    "id": "selftest/sum", "time_limit_s": 2,
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}],
})
CPP = "```cpp\n#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}\n```"
PY = "```python\nprint(sum(map(int, input().split())))\n```"


def test_every_available_language_passes_its_self_test() -> None:
    available = [n for n in languages.LANGUAGES if not languages.missing_tools(n)]
    assert "python3" in available
    found = selftest.run_all(available, cached=False)
    try:
        assert {n: r.ok for n, r in found.items()} == {n: True for n in available}, found
        assert selftest.failure("python3") == ""
    finally:
        selftest.forget()


def test_a_self_test_program_that_prints_the_wrong_thing_fails_naming_it() -> None:
    got = selftest.check("python3", "print('something else')\n")
    assert not got.ok and "something else" in got.detail


def test_a_missing_toolchain_fails_its_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPFLEET_PYPY", "/nonexistent/pypy3")
    languages.table.cache_clear()
    try:
        got = selftest.check("pypy3")
    finally:
        monkeypatch.undo()
        languages.table.cache_clear()
    assert not got.ok and "/nonexistent/pypy3" in got.detail


def test_a_broken_compiler_setting_is_internal_through_the_fleet_never_a_compile_error(
        redis_url: str, start_worker, tmp_path: Path) -> None:  # noqa: F811
    """g++ is installed but the worker's C++ standard is one g++ rejects: without the self-test
    every C++ job would be COMPILE_ERROR (reward 0) for the host's fault."""
    if languages.missing_tools("cpp"):
        pytest.skip("g++ not installed here")
    port_file = tmp_path / "metrics-port"  # the worker binds a free port itself and writes it here
    worker = start_worker(redis_url, concurrency=1, env={
        "CPFLEET_CPP_STD": "gnu++99", "CPFLEET_METRICS_PORT": "any", "CPFLEET_METRICS_PORT_FILE": str(port_file)})
    port = int(port_file.read_text())
    log = worker.log_text()
    assert "self-test: python3 ok" in log and "cpp FAILED" in log and "gnu++99" in log
    with FleetClient(redis_url, timeout=120, use_cache=False) as fleet:
        fleet.register_problems([SUM])
        cpp = fleet.submit(SUM.id, CPP).result(timeout=120)
        py = fleet.submit(SUM.id, PY).result(timeout=120)
    assert cpp.verdict == Verdict.INTERNAL and cpp.infra_error and cpp.reward is None
    assert "self-test" in cpp.infra_message and "gnu++99" in cpp.infra_message
    assert (py.verdict, py.reward) == (Verdict.OK, 1.0)
    # each pool process publishes what it inherited: the failed language is 0 on /metrics
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    gauges = {ln.split('language="')[1].split('"')[0]: float(ln.rsplit(" ", 1)[1])
              for ln in text.splitlines() if ln.startswith("cpfleet_language_ok{")}
    assert gauges["cpp"] == 0.0 and gauges["python3"] == 1.0, gauges


def test_a_pass_is_remembered_per_toolchain_and_a_failure_never(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("CPFLEET_COMPILE_CACHE_DIR", str(tmp_path))
    first = selftest.check_cached("python3")
    again = selftest.check_cached("python3")
    assert first.ok and first.detail == "" and again.ok and "passed before" in again.detail
    if languages.missing_tools("cpp"):
        return
    monkeypatch.setenv("CPFLEET_CPP_STD", "gnu++99")  # another compile line: another toolchain identity
    languages.table.cache_clear()
    try:
        for _ in range(2):
            broken = selftest.check_cached("cpp")
            assert not broken.ok and "gnu++99" in broken.detail
    finally:
        monkeypatch.undo()
        languages.table.cache_clear()


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_a_noexec_temporary_folder_fails_the_self_test_saying_so_and_how_to_fix_it(tmp_path: Path) -> None:
    """Docker mounts a container's tmpfs noexec unless told ``exec``: the C self-test's program,
    compiled there, cannot run, and the language goes unavailable on a healthy toolchain. The
    reason must say it is the mount, not the compiler. A tmpfs mounted noexec in a private
    mount namespace (a user namespace maps us to root there) stands in for the container's /tmp."""
    if languages.missing_tools("c"):
        pytest.skip("gcc not installed here")
    noexec = tmp_path / "noexec"
    noexec.mkdir()
    probe = "from cpfleet.sandbox import selftest; print(selftest.check('c').detail)"
    ran = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
         'mount -t tmpfs -o noexec tmpfs "$1" && TMPDIR="$1" exec "$2" -c "$3"', "sh", str(noexec), sys.executable, probe],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if ran.returncode != 0 and "mount" in ran.stderr:
        pytest.skip(f"no private mount namespace here: {ran.stderr.strip()}")
    assert ran.returncode == 0, ran.stderr
    assert "Permission denied" in ran.stdout
    assert f"{noexec} is mounted noexec: point TMPDIR at a folder that allows running programs" in ran.stdout
