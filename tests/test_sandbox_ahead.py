"""The job init forks each next test's child ahead, while the runner judges the last test
(sandbox/zygote.py ``_fork_ahead``). A test served by such a child sees exactly what a child
forked on demand shows it; one that died while waiting costs only a fresh fork; the runner's
``expect_runs`` hint leaves no child waiting after the last run."""

from __future__ import annotations

import os
import signal

import pytest
from fleet_helpers import wait_until
from runner_helpers import children

from cpfleet.core.errors import SandboxBroken
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.forkserver import FORK_AHEAD_ENV, ForkServerRunner, fork_ahead_setting
from cpfleet.sandbox.runner import Limits

# what a test can see of how it was started: pid, session and group, fds, rlimits, identity,
# directory, cgroups, filter, std streams and interpreter state
PROBE = """\
import os, resource, sys
names = [n for n in dir(resource) if n.startswith("RLIMIT_")]
status = [l.split(":", 1)[1].strip() for l in open("/proc/self/status")
          if l.split(":")[0] in ("Seccomp", "NoNewPrivs", "CapEff", "Groups")]
print(os.getpid(), os.getsid(0), os.getpgid(0), sorted(os.listdir("/proc/self/fd")))
print([(n, resource.getrlimit(getattr(resource, n))) for n in sorted(names)])
print(os.getuid(), os.getgid(), os.getgroups(), os.getcwd(), sorted(os.listdir(".")), status)
print(open("/proc/self/cgroup").read().split())
print(sys.argv, sys.path[0], sys.stdin.name, sys.stdout.mode, sys.get_int_max_str_digits(), __name__)
print(input())
"""


def _waiting_children(runner: ForkServerRunner) -> list[int]:
    """Processes below the loaded job's init: a child forked ahead, waiting for its test."""
    assert runner._proc is not None
    found = []
    for job_process in children(runner._proc.pid):
        for init in children(job_process):
            found += children(init)
    return found


def _none_waits_for_a_while(runner: ForkServerRunner) -> bool:
    """No child is waiting, nor appears for a while: the init forks ahead right after its
    reply, so a single look just after a run could come before a fork that does happen."""
    return not wait_until(lambda: bool(_waiting_children(runner)), timeout=0.3, interval=0.01)


def test_a_child_forked_ahead_shows_the_test_what_a_child_forked_on_demand_shows(fork_runner: ForkServerRunner) -> None:
    assert fork_runner.load(PROBE) is None
    on_demand = fork_runner.run(b"x\n", Limits(time_s=5))  # a job's first test: forked on demand
    assert wait_until(lambda: len(_waiting_children(fork_runner)) == 1, 60), "no child was forked ahead"
    ahead = fork_runner.run(b"x\n", Limits(time_s=5))
    assert ahead.status == on_demand.status == Verdict.OK, (ahead.stderr[-500:], on_demand.stderr[-500:])
    assert ahead.stdout == on_demand.stdout
    first = ahead.stdout.decode().splitlines()[0].split(None, 3)
    assert first[0] == first[1] == first[2] == "2"  # pid 2 of the job's namespace, its own session and group


def test_rlimits_come_from_each_tests_own_limits(fork_runner: ForkServerRunner) -> None:
    """The child waits before its rlimits are set: a test with other limits than the last gets its own."""
    assert fork_runner.load("import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[0] >> 20)\n") is None
    seen = [fork_runner.run(b"", Limits(time_s=5, memory_mb=mb)).stdout for mb in (256, 64, 512)]
    assert seen == [b"256\n", b"64\n", b"512\n"]


def test_a_child_that_died_waiting_is_replaced_and_the_test_still_runs(fork_runner: ForkServerRunner) -> None:
    assert fork_runner.load("print(input()[::-1])\n") is None
    assert fork_runner.run(b"abc\n", Limits(time_s=5)).stdout == b"cba\n"
    assert wait_until(lambda: len(_waiting_children(fork_runner)) == 1, 60), "no child is waiting for the next test"
    (waiting,) = _waiting_children(fork_runner)
    os.kill(waiting, signal.SIGKILL)
    res = fork_runner.run(b"xyz\n", Limits(time_s=5))
    assert res.status == Verdict.OK and res.stdout == b"zyx\n", (res.status, res.error)
    assert fork_runner.run(b"123\n", Limits(time_s=5)).stdout == b"321\n"


def test_no_child_waits_after_the_expected_runs_and_a_closed_job_leaves_none(fork_runner: ForkServerRunner) -> None:
    assert fork_runner.load("print(1)\n") is None
    fork_runner.expect_runs(2)
    for _ in range(2):
        assert fork_runner.run(b"", Limits(time_s=5)).stdout == b"1\n"
    assert _none_waits_for_a_while(fork_runner)
    assert fork_runner.load("print(2)\n") is None  # no hint: a child waits after each run
    assert fork_runner.run(b"", Limits(time_s=5)).stdout == b"2\n"
    assert wait_until(lambda: len(_waiting_children(fork_runner)) == 1, 60)
    (waiting,) = _waiting_children(fork_runner)
    assert fork_runner.load("print(3)\n") is None  # ends the last job, its waiting child included
    assert wait_until(lambda: not _alive(waiting), 60), "the ended job's waiting child outlived it"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_traceback_shows_the_source_even_when_the_program_made_a_solution_py(fork_runner: ForkServerRunner) -> None:
    """The interpreter's printer reads solution.py from the program's directory, written there
    only for the traceback; a file of that name made by the program is left as it is, and the
    printer shows what python3 shows of a script that overwrote itself: the frame, without the
    line it no longer holds (the traceback module, which printed it from memory, is imported
    after the program ran: a module the program planted ran there, test_harness_hostile.py).
    The next test's directory is fresh."""
    code = "import os\nif os.listdir('.'):\n    print(sorted(os.listdir('.')))\nopen('solution.py', 'w').write('mine')\nx = {}\nprint(x['k'])\n"
    assert fork_runner.load(code) is None
    for _ in range(2):
        res = fork_runner.run(b"", Limits(time_s=5))
        assert res.status == Verdict.RUNTIME_ERROR and res.stdout == b""
        assert res.stderr == b'Traceback (most recent call last):\n  File "solution.py", line 6, in <module>\nKeyError: \'k\'\n', \
            res.stderr
    assert fork_runner.load("x = {}\nprint(x['k'])\n") is None
    first = fork_runner.run(b"", Limits(time_s=5))
    assert b"print(x['k'])" in first.stderr and b"~^^^^^" in first.stderr
    assert fork_runner.load("import os\nprint(sorted(os.listdir('.')))\nraise SystemExit(int(input()))\n") is None
    assert fork_runner.run(b"0\n", Limits(time_s=5)).stdout == b"[]\n"


def test_a_spare_jobs_child_forked_before_its_program_shows_the_same(fork_runner: ForkServerRunner) -> None:
    """A spare job forks its first test's child before any program exists; the child is sent
    the compiled code with its test, and shows the program what a child forked on demand does."""
    assert fork_runner.load(PROBE) is None
    fork_runner.expect_runs(1)
    on_demand = fork_runner.run(b"x\n", Limits(time_s=5))
    assert _none_waits_for_a_while(fork_runner)
    fork_runner.prepare_next()
    assert wait_until(lambda: len(_waiting_children(fork_runner)) == 1, 60), "the spare forked no child ahead"
    (waiting,) = _waiting_children(fork_runner)
    assert fork_runner.load(PROBE) is None
    from_spare = fork_runner.run(b"x\n", Limits(time_s=5))
    assert on_demand.status == from_spare.status == Verdict.OK, (on_demand.stderr[-500:], from_spare.stderr[-500:])
    assert from_spare.stdout == on_demand.stdout
    assert not _alive(waiting), "the test did not run in the child the spare forked ahead"


def test_a_spare_jobs_child_prints_tracebacks_with_the_programs_source(fork_runner: ForkServerRunner) -> None:
    fork_runner.prepare_next()
    assert fork_runner.load("def f(d):\n    return d['k']\n\nprint(f({}))\n") is None
    res = fork_runner.run(b"", Limits(time_s=5))
    assert res.status == Verdict.RUNTIME_ERROR
    assert b"return d['k']" in res.stderr and b"print(f({}))" in res.stderr, res.stderr



def test_a_runner_that_never_forks_ahead_leaves_no_child_waiting_and_shows_the_same() -> None:
    """CPFLEET_FORK_AHEAD=0 (and ``auto`` on a machine with no CPU to spare): every test's
    child is forked on demand; the program sees exactly what it sees from a child forked ahead."""
    ahead = ForkServerRunner(fork_ahead="1")
    try:
        assert ahead.load(PROBE) is None
        seen_ahead = [ahead.run(b"x\n", Limits(time_s=5)) for _ in range(3)]
    finally:
        ahead.close()
    runner = ForkServerRunner(fork_ahead="0")
    try:
        assert runner.load(PROBE) is None
        seen = []
        for _ in range(3):
            seen.append(runner.run(b"x\n", Limits(time_s=5)))
            assert _none_waits_for_a_while(runner)
    finally:
        runner.close()
    assert [r.status for r in seen] == [r.status for r in seen_ahead] == [Verdict.OK] * 3
    assert [_but_the_slot(r.stdout) for r in seen] == [_but_the_slot(r.stdout) for r in seen_ahead]


def _but_the_slot(probe_output: bytes) -> list[str]:
    """PROBE's lines without what names the runner's slot (its uid and gid, its cgroup): two
    runners may hold different slots."""
    lines = probe_output.decode().splitlines()
    return lines[:2] + [lines[2].split(" ", 2)[2]] + lines[4:]


def test_the_fork_ahead_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [fork_ahead_setting(v) for v in ("auto", "1", "0", " AUTO ", "")] == ["auto", "1", "0", "auto", "auto"]
    monkeypatch.setenv(FORK_AHEAD_ENV, "0")
    assert fork_ahead_setting() == "0"
    monkeypatch.setenv(FORK_AHEAD_ENV, "sometimes")
    with pytest.raises(SandboxBroken, match=FORK_AHEAD_ENV):
        ForkServerRunner()
