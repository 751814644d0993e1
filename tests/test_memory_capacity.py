"""A memory limit a problem or a caller states that this worker cannot give is an infrastructure
error (INTERNAL, ``infra_error``, reward None) naming the limit asked and what the worker gives,
decided before the run starts, for every path that states one: a test in each language, a
checker program, an interactive pair, a run job. Never a 0 (clamping would be the program's
MEMORY_LIMIT), and never the limit given as asked (one program could take the host down).

The capacity is made small with CPFLEET_MAX_MEMORY_MB (300 MB), so nothing here allocates much:
the refused runs never start, and the runs within it are the usual small programs, under the
slot's real cgroup where the kernel gives one (``runner.isolation`` says which layers)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import start_worker  # noqa: F401  (fixture)

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import capacity
from cpfleet.sandbox.capacity import MemoryCapacity, cgroup_memory_mb
from cpfleet.sandbox.compiled import missing_toolchain
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner, make_runner
from cpfleet.sandbox.runs import execute

REPO = Path(__file__).resolve().parent.parent
CAP_MB = 300

PROGRAMS = {  # reads n, prints n + 1
    "python3": "print(int(input()) + 1)",
    "pypy3": "print(int(input()) + 1)",
    "cpp": "#include <cstdio>\nint main(){int n; scanf(\"%d\",&n); printf(\"%d\\n\", n+1);}",
    "c": "#include <stdio.h>\nint main(void){int n; scanf(\"%d\",&n); printf(\"%d\\n\", n+1); return 0;}",
    "java": "import java.util.*;\npublic class Main { public static void main(String[] a) "
            "{ Scanner s = new Scanner(System.in); System.out.println(s.nextInt() + 1); } }",
}
FENCE = {"python3": "python", "pypy3": "python", "cpp": "cpp", "c": "c", "java": "java"}


@pytest.fixture(scope="module", params=["forkserver", "subprocess"])
def small_runner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodeRunner]:
    """A runner whose worker may give a test at most CAP_MB (the operator's setting)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CPFLEET_MAX_MEMORY_MB", str(CAP_MB))
    mp.setenv("CPFLEET_COMPILE_CACHE_DIR", str(tmp_path_factory.mktemp("compile-cache")))
    runner = make_runner(request.param)
    try:
        yield runner
    finally:
        runner.close()
        mp.undo()


def problem(pid: str, memory_limit_mb: int, **extra: Any) -> Problem:
    return Problem.from_dict({
        "id": pid, "time_limit_s": 2, "memory_limit_mb": memory_limit_mb,
        "public_tests": [{"input": "1\n", "output": "2\n"}],
        "hidden_tests": [{"input": "41\n", "output": "42\n"}],
        **extra,
    })


def fenced(language: str, code: str) -> str:
    return f"```{FENCE[language]}\n{code}\n```\n"


def assert_refused(res: Any, asked: int) -> None:
    assert res.verdict == Verdict.INTERNAL and res.infra_error and res.reward is None, (res.verdict, res.infra_message)
    assert f"{asked} MB" in res.infra_message and f"at most {CAP_MB} MB" in res.infra_message, res.infra_message
    assert "CPFLEET_MAX_MEMORY_MB=300" in res.infra_message, res.infra_message


@pytest.mark.parametrize("language", list(PROGRAMS))
def test_a_limit_above_the_capacity_is_internal_naming_both_numbers(small_runner: CodeRunner, language: str) -> None:
    if missing_toolchain(language):
        pytest.skip(f"{language}: {missing_toolchain(language)}")
    prob = problem(f"cap/{language}-64g", 65536, languages=[language])
    assert_refused(evaluate(prob, fenced(language, PROGRAMS[language]), small_runner), 65536)
    # the program's own failure would be a 0 it earned: a refusal is not that, whatever it runs
    hog = "x = bytearray(1 << 40)" if language in ("python3", "pypy3") else None
    if hog is not None:
        assert_refused(evaluate(prob, fenced(language, hog), small_runner), 65536)


@pytest.mark.parametrize("language", list(PROGRAMS))
def test_a_limit_within_the_capacity_is_judged_as_before(small_runner: CodeRunner, language: str) -> None:
    if missing_toolchain(language):
        pytest.skip(f"{language}: {missing_toolchain(language)}")
    prob = problem(f"cap/{language}-256m", 256, languages=[language])
    ok = evaluate(prob, fenced(language, PROGRAMS[language]), small_runner)
    assert (ok.verdict, ok.reward, ok.infra_error) == (Verdict.OK, 1.0, False), ok.observation
    wrong = evaluate(prob, fenced(language, PROGRAMS[language].replace("+ 1", "+ 2").replace("n+1", "n+2")), small_runner)
    assert (wrong.verdict, wrong.reward, wrong.infra_error) == (Verdict.WRONG_ANSWER, 0.0, False), wrong.observation


def test_a_program_over_its_own_limit_within_the_capacity_still_earns_its_memory_limit(small_runner: CodeRunner) -> None:
    prob = problem("cap/hog-64m", 64)
    res = evaluate(prob, fenced("python3", "x = bytearray(200 << 20)\nprint(int(input()) + 1)"), small_runner)
    assert (res.verdict, res.reward, res.infra_error) == (Verdict.MEMORY_LIMIT, 0.0, False), res.observation


PY_CHECKER = "import sys\ngot = open(sys.argv[3]).read().split()\nprint(1 if got == open(sys.argv[2]).read().split() else 0)\n"


def test_a_checker_limit_above_the_capacity_is_internal(small_runner: CodeRunner) -> None:
    big = problem("cap/checker-4g", 256, checker={"type": "python", "source": PY_CHECKER, "memory_limit_mb": 4096})
    assert_refused(evaluate(big, fenced("python3", PROGRAMS["python3"]), small_runner), 4096)
    fits = problem("cap/checker-128m", 256, checker={"type": "python", "source": PY_CHECKER, "memory_limit_mb": 128})
    ok = evaluate(fits, fenced("python3", PROGRAMS["python3"]), small_runner)
    assert (ok.verdict, ok.reward) == (Verdict.OK, 1.0), (ok.observation, ok.infra_message)


INTERACTOR = r"""
#include <cstdio>
#include <fstream>
int main(int argc, char** argv) {
    std::ifstream in(argv[1]); int n; in >> n;
    printf("%d\n", n); fflush(stdout);
    int g; if (scanf("%d", &g) != 1) return 43;
    return g == n + 1 ? 42 : 43;
}
"""


def test_an_interactive_pair_above_the_capacity_together_is_internal(small_runner: CodeRunner) -> None:
    if missing_toolchain("cpp"):
        pytest.skip(f"cpp: {missing_toolchain('cpp')}")
    checker = {"type": "interactive", "files": {"i/interactor.cpp": INTERACTOR}, "entry_points": ["i/interactor.cpp"],
               "language": "cpp", "memory_limit_mb": 200}
    tests = {"public_tests": [{"input": "1\n", "output": ""}], "hidden_tests": [{"input": "41\n", "output": ""}]}
    solution = fenced("python3", PROGRAMS["python3"])
    # 200 MB for the program and 200 MB for the interactor share the slot's cgroup: 400 MB
    big = Problem.from_dict({"id": "cap/pair-400m", "time_limit_s": 2, "memory_limit_mb": 200, "checker": checker, **tests})
    res = evaluate(big, solution, small_runner)
    assert_refused(res, 400)
    assert "200 + 200 MB" in res.infra_message, res.infra_message
    fits = Problem.from_dict({"id": "cap/pair-64m", "time_limit_s": 2, "memory_limit_mb": 64,
                              "checker": {**checker, "memory_limit_mb": 64}, **tests})
    ok = evaluate(fits, solution, small_runner)
    assert (ok.verdict, ok.reward) == (Verdict.OK, 1.0), (ok.observation, ok.infra_message)


def test_a_run_job_above_the_capacity_is_internal(small_runner: CodeRunner) -> None:
    res = execute(small_runner, "print(int(input()) + 1)", [b"1\n"], language="python3", memory_limit_mb=4096)
    assert res.infra_error and str(res.status) == "INTERNAL", res
    assert "4096 MB" in res.infra_message and f"at most {CAP_MB} MB" in res.infra_message, res.infra_message
    fits = execute(small_runner, "print(int(input()) + 1)", [b"1\n"], language="python3", memory_limit_mb=128)
    assert not fits.infra_error and [r.stdout for r in fits.runs] == ["2\n"], fits


# --- where the capacity comes from ------------------------------------------------------------


def test_the_setting_caps_what_the_host_and_cgroup_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPFLEET_MAX_MEMORY_MB", "300")
    cap = capacity.memory_capacity()
    assert cap == MemoryCapacity(300, "CPFLEET_MAX_MEMORY_MB=300")
    assert cap.describe() == "300 MB per test (CPFLEET_MAX_MEMORY_MB=300)"
    assert cap.refusal(300) is None and cap.refusal(301) is not None
    monkeypatch.setenv("CPFLEET_MAX_MEMORY_MB", str(1 << 30))  # above the host: what all slots may hold wins
    slots = capacity.slots_memory()
    host = capacity.host_memory_mb()
    assert slots is not None and host is not None and capacity.memory_capacity() == MemoryCapacity(*slots)
    assert slots[0] == host - capacity.reserve_mb(host) or slots[1].startswith("the memory limit of the worker's cgroup")


def test_the_reserve_kept_for_the_worker() -> None:
    assert [capacity.reserve_mb(mb) for mb in (1024, 4096, 16384, 262144)] == [512, 1024, 2048, 32768]


def _fake_proc(tmp_path: Path, cgroup: str, mounts: list[str]) -> tuple[str, str]:
    (tmp_path / "cgroup").write_text(cgroup)
    (tmp_path / "mountinfo").write_text("".join(mounts))
    return str(tmp_path / "cgroup"), str(tmp_path / "mountinfo")


def test_the_least_limit_of_the_workers_cgroup_and_its_ancestors_v2(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    (fs / "system.slice" / "worker.service").mkdir(parents=True)
    (fs / "system.slice" / "memory.max").write_text(f"{8 << 30}\n")
    (fs / "system.slice" / "worker.service" / "memory.max").write_text("max\n")
    files = _fake_proc(tmp_path, "0::/system.slice/worker.service\n",
                       [f"35 25 0:30 / {fs} rw,relatime shared:9 - cgroup2 cgroup2 rw\n"])
    assert cgroup_memory_mb(*files) == (8192, str(fs / "system.slice"))


def test_a_v1_memory_hierarchy_bind_mounted_from_the_containers_own_cgroup(tmp_path: Path) -> None:
    fs = tmp_path / "memory"
    (fs / "init").mkdir(parents=True)
    (fs / "memory.limit_in_bytes").write_text(f"{2 << 30}\n")  # the container's own limit, at the mount's root
    (fs / "init" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "none"
    files = _fake_proc(tmp_path, "12:pids:/docker/abc\n4:memory:/docker/abc/init\n0::/\n",
                       [f"40 31 0:32 /docker/abc {fs} rw,relatime - cgroup cgroup rw,memory\n"])
    assert cgroup_memory_mb(*files) == (2048, str(fs))


def test_no_cgroup_limit_is_none(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    files = _fake_proc(tmp_path, "0::/\n", [f"35 25 0:30 / {fs} rw - cgroup2 cgroup2 rw\n"])
    assert cgroup_memory_mb(*files) is None


@pytest.mark.parametrize("value", ["lots", "8", "-1", "1.5"])
def test_a_bad_setting_is_one_clear_line_at_the_workers_start(value: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")} | {"CPFLEET_MAX_MEMORY_MB": value}
    proc = subprocess.run([sys.executable, "-m", "cpfleet", "worker", "--dry-run"], env=env, capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "CPFLEET_MAX_MEMORY_MB" in ln]
    assert f"CPFLEET_MAX_MEMORY_MB={value!r} is not valid" in line and "whole number of MiB >= 16" in line, line


# --- all slots together, and the OOM kills a slot's own limit did not make -------------------


def _v1_or_v2_limit_file(folder: str) -> str:
    return os.path.join(folder, "memory.limit_in_bytes" if os.path.exists(os.path.join(folder, "memory.limit_in_bytes"))
                        else "memory.max")


def _slot_folder(runner: CodeRunner) -> str:
    cgroup = getattr(runner, "_cgroup", None)
    if cgroup is None or not cgroup.ok:
        pytest.skip(f"no slot cgroup here: {getattr(cgroup, 'error', '') or runner.isolation.summary()}")
    return os.path.dirname(cgroup.procs_files[0])


def test_all_slots_together_are_bounded_by_what_the_host_leaves(small_runner: CodeRunner,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.path.dirname(_slot_folder(small_runner))
    assert os.path.basename(parent) == "cpfleet"
    limit_file = _v1_or_v2_limit_file(parent)
    with open(limit_file, "w") as f:  # no bound, as a host has before any worker starts
        f.write("max" if limit_file.endswith("memory.max") else "-1")
    monkeypatch.setenv("CPFLEET_MAX_MEMORY_MB", str(CAP_MB))
    runner = make_runner("forkserver")  # a runner's start bounds them
    try:
        slots = capacity.slots_memory()
        assert slots is not None
        with open(limit_file) as f:
            assert int(f.read()) == slots[0] << 20
        # a test may hold no more than all slots together: the per-test capacity is within it
        assert runner.memory_capacity.mb <= slots[0]  # type: ignore[attr-defined]
    finally:
        runner.close()


TOUCH_180MB = "x = b'x' * (180 << 20)\nprint(int(input()) + 1)"
# 4 processes of 70 MB each against a 128 MB limit: only the slot's cgroup sees them together
FORKS_280MB = """
import os, time
pids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        y = b"y" * (70 << 20)
        time.sleep(2)
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
print(int(input()) + 1)
"""


@pytest.fixture
def bounded_parent(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[CodeRunner, str]]:
    """A forkserver runner whose slot sits in a folder of its own under ``cpfleet/``, bounded at
    128 MB: what the bound of all slots (or a container, or the host) does to a test that is
    within its own limit, without asking this shared host for more than that."""
    from cpfleet.sandbox.slots import Slot

    name = f"memcap-test-{os.getpid()}"
    monkeypatch.setattr(Slot, "cgroup_name", property(lambda self: f"{name}/slot-{self.uid}"))
    monkeypatch.setenv("CPFLEET_MAX_MEMORY_MB", str(CAP_MB))
    runner = make_runner("forkserver")
    folder = os.path.dirname(_slot_folder(runner))
    try:
        with open(_v1_or_v2_limit_file(folder), "w") as f:
            f.write(str(128 << 20))
        yield runner, folder
    finally:
        runner.close()
        for sub in sorted(Path(folder).glob("*"), reverse=True):
            if sub.is_dir():
                sub.rmdir()
        for root in ("/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup"):
            for leftover in sorted(Path(root, "cpfleet", name).glob("*/"), reverse=True):
                leftover.rmdir()
            if Path(root, "cpfleet", name).is_dir():
                Path(root, "cpfleet", name).rmdir()


def test_an_oom_kill_above_the_slot_is_internal_never_memory_limit(bounded_parent: tuple[CodeRunner, str]) -> None:
    runner, _ = bounded_parent
    res = evaluate(problem("cap/outside-oom", 256), fenced("python3", TOUCH_180MB), runner)
    assert res.verdict == Verdict.INTERNAL and res.infra_error and res.reward is None, (res.verdict, res.observation)
    assert "below its own memory limit (256 MB)" in res.infra_message, res.infra_message
    # the same runner, a test within what is there: judged as before
    ok = evaluate(problem("cap/outside-fits", 256), fenced("python3", PROGRAMS["python3"]), runner)
    assert (ok.verdict, ok.reward) == (Verdict.OK, 1.0), (ok.observation, ok.infra_message)


def test_an_oom_kill_by_the_slots_own_limit_is_still_memory_limit(small_runner: CodeRunner) -> None:
    _slot_folder(small_runner)
    res = evaluate(problem("cap/own-oom", 128), fenced("python3", FORKS_280MB), small_runner)
    assert (res.verdict, res.reward, res.infra_error) == (Verdict.MEMORY_LIMIT, 0.0, False), (res.observation,
                                                                                              res.infra_message)
    assert "killed by the memory cgroup" in res.observation, res.observation


# --- a real worker node ------------------------------------------------------------------------


def test_a_worker_says_its_capacity_at_start_and_answers_a_64gb_problem_internal(
        redis_url: str, start_worker: Any) -> None:  # noqa: F811
    from cpfleet.producer.client import FleetClient

    worker = start_worker(redis_url, concurrency=1, env={"CPFLEET_MAX_MEMORY_MB": str(CAP_MB)})
    assert f"cpfleet worker memory: at most {CAP_MB} MB per test (CPFLEET_MAX_MEMORY_MB={CAP_MB})" in worker.log_text()
    big, fits = problem("cap/fleet-64g", 65536), problem("cap/fleet-256m", 256)
    with FleetClient(redis_url, timeout=120) as fleet:
        fleet.register_problems([big, fits])
        solution = fenced("python3", PROGRAMS["python3"])
        refused, judged = fleet.gather(fleet.submit_many([
            {"problem_id": big.id, "completion": solution, "job_id": "big"},
            {"problem_id": fits.id, "completion": solution, "job_id": "fits"}]), timeout=120)
    assert_refused(refused, 65536)
    assert (judged.verdict, judged.reward, judged.infra_error) == (Verdict.OK, 1.0, False), judged.infra_message


# --- how a slot tells its own limit from one above it, on files shaped as each version writes them


def _fake_slot(tmp_path: Path, version: int, limit: int) -> Any:
    from cpfleet.sandbox.cgroups import SlotCgroup

    slot = SlotCgroup.__new__(SlotCgroup)  # the files only: no cgroup is made
    slot.version, slot.procs_files, slot._current_limits = version, [str(tmp_path / "cgroup.procs")], (limit, 128)
    slot._oom_file = str(tmp_path / "memory.events")
    slot._peak_files = (str(tmp_path / "memory.max_usage_in_bytes"),)
    slot._max_events = 0
    return slot


def test_v2_the_slots_own_max_events_tell_its_limit_was_reached(tmp_path: Path) -> None:
    slot = _fake_slot(tmp_path, 2, 256 << 20)
    events = tmp_path / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    slot.mark_run_start()
    events.write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 2\n")  # a kill, no new max: from above
    assert not slot.limit_reached()
    events.write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 3\n")
    assert slot.limit_reached()


def test_v1_the_slots_peak_near_its_limit_tells_it_was_reached(tmp_path: Path) -> None:
    slot = _fake_slot(tmp_path, 1, 256 << 20)
    peak = tmp_path / "memory.max_usage_in_bytes"
    peak.write_text(str(300 << 20))
    slot.mark_run_start()  # resets the peak, as v1 does on a write of 0
    assert peak.read_text() == "0" and not slot.limit_reached()
    peak.write_text(str(130 << 20))  # killed from above at half its limit
    assert not slot.limit_reached()
    peak.write_text(str((256 << 20) - (1 << 20)))
    assert slot.limit_reached()


def test_what_a_program_fails_before_any_test_is_still_its_own(small_runner: CodeRunner) -> None:
    # the compile (its limit the fleet's own) and the extraction do not need the stated memory:
    # their failures are judged as on any worker; only the tests are refused
    prob = problem("cap/compile-64g", 65536)
    broken = evaluate(prob, fenced("cpp", "int main( {"), small_runner)
    assert (broken.verdict, broken.reward, broken.infra_error) == (Verdict.COMPILE_ERROR, 0.0, False), broken.observation
    none = evaluate(prob, "no code here", small_runner)
    assert (none.verdict, none.reward, none.infra_error) == (Verdict.NO_CODE, 0.0, False), none.observation


def test_a_kill_the_counters_cannot_place_stays_the_tests_own(tmp_path: Path) -> None:
    # a kernel without the v1 peak file, or a v2 memory.events that cannot be read: a kill in
    # the slot is MEMORY_LIMIT as it always was, never an INTERNAL that would hide the program's
    v1 = _fake_slot(tmp_path, 1, 256 << 20)
    v1._peak_files = ()  # the kernel has none
    v1.mark_run_start()
    assert v1.limit_reached()
    v2 = _fake_slot(tmp_path, 2, 256 << 20)
    v2.mark_run_start()
    assert v2.limit_reached()


HOG = "x = []\nwhile True:\n    x.append(b'x' * (1 << 20))\n"


def test_a_limit_whose_slot_the_bound_on_all_slots_cannot_hold_is_refused_for_every_program(
        bounded_parent: tuple[CodeRunner, str]) -> None:
    """All slots together may hold 128 MB here; a 128 MB test's slot gets 128 MB and the
    sandbox's slack, so a program going past its limit meets the bound above first, its own
    MEMORY_LIMIT reading as the host's shortfall, while a correct one passes: refused up front
    for every program instead. A limit whose slot fits is judged, the hog's MEMORY_LIMIT its own."""
    runner, _ = bounded_parent
    runner._slots_bytes = 128 << 20  # type: ignore[attr-defined]  # what this runner wrote on the folder
    for code in (PROGRAMS["python3"], HOG):
        res = evaluate(problem("cap/slot-over-bound", 128), fenced("python3", code), runner)
        assert res.verdict == Verdict.INTERNAL and res.infra_error and res.reward is None, (res.verdict, res.observation)
        assert "all slots together may hold at most 128 MB" in res.infra_message, res.infra_message
    res = evaluate(problem("cap/slot-within-bound", 64), fenced("python3", HOG), runner)
    assert (res.verdict, res.reward, res.infra_error) == (Verdict.MEMORY_LIMIT, 0.0, False), (res.observation,
                                                                                              res.infra_message)


def test_a_mount_point_not_in_utf8_does_not_stop_the_runner_reading_its_limit(tmp_path: Path) -> None:
    # mountinfo escapes only blanks and backslashes: another mount's name may be any bytes
    fs = tmp_path / "fs"
    fs.mkdir()
    (fs / "memory.max").write_text(f"{2 << 30}\n")
    (tmp_path / "cgroup").write_text("0::/\n")
    (tmp_path / "mountinfo").write_bytes(b"30 25 0:40 / /mnt/caf\xe9 rw - ext4 /dev/sdb1 rw\n"
                                         + f"35 25 0:30 / {fs} rw - cgroup2 cgroup2 rw\n".encode())
    assert cgroup_memory_mb(str(tmp_path / "cgroup"), str(tmp_path / "mountinfo")) == (2048, str(fs))
