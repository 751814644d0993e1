"""Helper processes live as long as the process that owns them, not the thread that started
them: a sandbox runner's zygotes (sandbox/zygote.py) and its jobs survive the end of the thread
that made the runner, and die when its process dies, however (kill -9), with a pidfd of the
runner or, where pidfds are refused, by the parent pid the zygote checks each second; a
LocalFleet's Redis and worker (cpfleet/fleet/processes.py, ``popen_lasting``) likewise."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fleet_helpers import wait_until

from cpfleet.core.verdict import Verdict
from cpfleet.fleet.local import LocalFleet
from cpfleet.fleet.processes import alive, descendants
from cpfleet.sandbox.forkserver import ForkServerRunner
from cpfleet.sandbox.runner import Limits

REPO = Path(__file__).resolve().parents[1]
ADD_ONE = "print(int(input()) + 1)\n"


def _in_a_thread_that_ends(work: Callable[[], None]) -> None:
    """Run ``work`` in a thread and return once that thread is gone from the kernel too."""
    native: list[int] = []
    thread = threading.Thread(target=lambda: (native.append(threading.get_native_id()), work()))
    thread.start()
    thread.join()
    # liveness wait (not a timing assertion): the kernel reaps the thread after join returns
    assert wait_until(lambda: not os.path.exists(f"/proc/self/task/{native[0]}"), 30)


def test_a_runner_made_by_a_thread_that_then_exits_keeps_its_zygote_and_loaded_job() -> None:
    """A library caller (or a gateway thread) makes a runner and loads a program in a thread
    that ends, and runs the tests from another. The zygote was armed with PR_SET_PDEATHSIG,
    which fires when the *thread* that started it exits: it was SIGKILLed with its jobs, and the
    loaded program's next run was INTERNAL ("Broken pipe"), a job lost to infrastructure."""
    made: list[ForkServerRunner] = []

    def make_and_load() -> None:
        made.append(ForkServerRunner())
        made[0].forks_pypy()  # its PyPy zygote too, where PyPy is installed
        assert made[0].load(ADD_ONE) is None
        made[0].prepare_next()  # a spare job too, waiting in the zygote

    _in_a_thread_that_ends(make_and_load)
    runner = made[0]
    try:
        zygote = runner._proc
        assert zygote is not None
        res = runner.run(b"41\n", Limits(time_s=5))
        assert (res.status, res.stdout, res.error) == (Verdict.OK, b"42\n", "")
        # the spare made by the ended thread serves the next program, from the same zygote
        assert runner.load(ADD_ONE) is None
        assert runner.run(b"1\n", Limits(time_s=5)).stdout == b"2\n"
        assert runner._proc is zygote and zygote.poll() is None
        pypy = runner._pypy
        if pypy is not None:
            pypy_zygote = pypy._proc
            assert runner.load_pypy(ADD_ONE) is None
            assert runner.run(b"2\n", Limits(time_s=5)).stdout == b"3\n"
            assert pypy._proc is pypy_zygote and pypy.alive()
    finally:
        runner.close()


OWNER_SCRIPT = """
import sys, threading, time
from cpfleet.sandbox.forkserver import ForkServerRunner
from cpfleet.sandbox.runner import Limits

made = []
def make():
    runner = ForkServerRunner()
    made.append(runner)
    assert runner.load("import time\\ntime.sleep(120)\\n") is None
    runner.prepare_next()
    if runner.forks_pypy():
        made.append(runner._pypy)
if sys.argv[1] == "thread":
    t = threading.Thread(target=make)
    t.start()
    t.join()
else:
    make()
runner = made[0]
print(runner._proc.pid, len(made) > 1, flush=True)
runner.run(b"", Limits(time_s=100))  # this process is SIGKILLed meanwhile
"""


@pytest.mark.parametrize("made_by", ["main", "thread"])
def test_killing_the_process_that_owns_a_runner_leaves_no_zygote_job_or_program(made_by: str) -> None:
    """kill -9 of a process whose runner has a program running and a spare job waiting (and a
    PyPy zygote where PyPy is installed): nothing of its sandbox is left, whether the runner was
    made by its main thread or by a thread that has since exited."""
    proc = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, made_by], stdout=subprocess.PIPE, text=True,
                            cwd=REPO)
    with _owner(proc) as tree:
        assert proc.stdout is not None
        zygote, pypy = proc.stdout.readline().split()
        assert pypy == str(shutil.which("pypy3") is not None)

        def program_running() -> bool:
            # the sleeping test program: a process in a session of its own under the zygote
            return any(_session(pid) == pid for pid in descendants(int(zygote)))

        assert wait_until(program_running, 60)  # liveness wait for the test program to start
        tree.update(descendants(proc.pid))
        assert int(zygote) in tree
        _kill_owner(proc, tree, 30)


SERVING_SCRIPT = """
import os, sys, time
from cpfleet.sandbox import linux
from cpfleet.sandbox.zygote import Zygote

ctrl = __import__("_socket").socket(fileno=int(sys.argv[1]))
owner = os.getpid()
pid = os.fork()
if pid == 0:  # the zygote's serving loop, on a channel whose other end the test holds
    watch = linux.parent_pidfd(owner) if sys.argv[2] == "pidfd" else -1
    if os.getppid() != owner:
        os._exit(1)
    zygote = Zygote(ctrl, {"uid": os.getuid(), "gid": os.getgid(), "python": sys.executable}, [], owner, watch)
    print(os.getpid(), flush=True)
    zygote.serve()
    os._exit(2)
time.sleep(120)
"""


@pytest.mark.parametrize("watch", ["pidfd", "parent pid (no pidfd)"])
def test_a_zygote_whose_channel_is_still_open_exits_when_its_runners_process_dies(watch: str) -> None:
    """The end of the runner's process alone ends the zygote, even while another process (one
    the runner forked) still holds the other end of its channel, so no EOF comes: through a
    pidfd of the runner, and where the kernel refuses pidfds through the parent pid, checked
    each second. Both paths run here for real."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.Popen([sys.executable, "-c", SERVING_SCRIPT, str(theirs.fileno()), watch.split()[0]],
                            pass_fds=[theirs.fileno()], stdout=subprocess.PIPE, text=True, cwd=REPO)
    theirs.close()
    try:
        _the_child_it_prints_dies_with_it(proc, "the serving loop outlived its runner's process")
    finally:
        ours.close()


def _the_child_it_prints_dies_with_it(proc: subprocess.Popen[str], failure: str) -> None:
    """kill -9 of ``proc`` ends the child whose pid it printed (and every other process of its tree)."""
    with _owner(proc) as tree:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        tree.update(alive(descendants(proc.pid)))
        assert pid in tree
        _kill_owner(proc, tree, 30, failure)


@contextlib.contextmanager
def _owner(proc: subprocess.Popen[str]) -> Iterator[dict[int, int]]:
    """The process tree of ``proc`` as the test fills it in; on the way out ``proc`` and whatever
    is left of that tree are killed, so a failing run leaves no process behind."""
    tree: dict[int, int] = {}
    try:
        yield tree
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in alive(tree):
            os.kill(pid, signal.SIGKILL)


def _kill_owner(proc: subprocess.Popen[str], tree: dict[int, int], within_s: float, failure: str = "") -> None:
    """kill -9 of ``proc``, then a liveness wait (not a timing assertion) for its ``tree`` to be gone."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert wait_until(lambda: not alive(tree), within_s), failure or alive(tree)


POOL_PROCESS_SCRIPT = """
import os, sys, threading, time
from cpfleet.jobs import pool

owner = os.getpid()
pid = os.fork()
if pid == 0:  # a pool process's watch on its judging process, from its own thread
    watch = pool.linux.parent_pidfd(owner) if sys.argv[1] == "pidfd" else -1
    threading.Thread(target=pool._watch_parent, args=(owner, watch), daemon=True).start()
    print(os.getpid(), flush=True)
    time.sleep(120)
    os._exit(2)
time.sleep(120)
"""


@pytest.mark.parametrize("watch", ["pidfd", "parent pid (no pidfd)"])
def test_a_local_pool_process_dies_with_its_judging_process_with_or_without_a_pidfd(watch: str) -> None:
    """The local pool's processes (cpfleet/jobs/pool.py) watch the judging process from a thread
    of their own: through a pidfd, or where the kernel refuses pidfds through the parent pid,
    checked each second. Both paths run here for real: kill -9 of the judging process ends the
    pool process."""
    proc = subprocess.Popen([sys.executable, "-c", POOL_PROCESS_SCRIPT, watch.split()[0]], stdout=subprocess.PIPE,
                            text=True, cwd=REPO)
    _the_child_it_prints_dies_with_it(proc, "the pool process outlived its judging process")


def test_a_local_fleet_started_by_a_thread_that_then_exits_keeps_redis_and_its_worker(tmp_path: Path) -> None:
    """A notebook or a test harness starts a LocalFleet in a thread that ends. Its children were
    armed with PR_SET_PDEATHSIG by the thread that forked them: Redis and the worker got SIGTERM
    as that thread ended, and the fleet was gone under its owner."""
    from fleet_helpers import store_problems

    from cpfleet.producer.client import FleetClient

    made: list[LocalFleet] = []
    _in_a_thread_that_ends(lambda: made.append(
        LocalFleet(workers=1, flower_port=None, metrics_port=None, log_dir=str(tmp_path)).start()))
    fleet = made[0]
    try:
        assert fleet.redis_url is not None
        store_problems(fleet.redis_url, "add")
        with FleetClient(fleet.redis_url, timeout=120, use_cache=False) as client:
            [result] = client.evaluate_many([{"problem_id": "add", "completion": ADD}])
        assert (result.verdict, result.reward, result.infra_error) == (Verdict.OK, 1.0, False), result.infra_message
        assert fleet.worker is not None and fleet.worker.proc.poll() is None
    finally:
        started = fleet.pids()
        fleet.stop()
    assert wait_until(lambda: not alive(started), 60), alive(started)


ADD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"

FLEET_OWNER_SCRIPT = """
import sys, threading, time
from cpfleet.fleet.local import LocalFleet

made = []
t = threading.Thread(target=lambda: made.append(
    LocalFleet(workers=1, flower_port=0, metrics_port=None, log_dir=sys.argv[1]).start()))
t.start()
t.join()
print(made[0].redis.proc.pid, made[0].worker.proc.pid, made[0].flower.proc.pid, flush=True)
time.sleep(600)  # SIGKILLed meanwhile
"""


def test_killing_the_process_of_a_local_fleet_started_by_an_ended_thread_leaves_nothing(tmp_path: Path) -> None:
    """kill -9 of a process whose LocalFleet was started by a thread that has since exited: no
    Redis, worker, pool process, zygote or Flower outlives it (they get SIGTERM as its last
    thread dies, by PR_SET_PDEATHSIG from the spawning thread that lasts as long as it)."""
    proc = subprocess.Popen([sys.executable, "-c", FLEET_OWNER_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, cwd=REPO)
    with _owner(proc) as tree:
        assert proc.stdout is not None
        children = [int(pid) for pid in proc.stdout.readline().split()]
        assert len(children) == 3, "the fleet did not start"
        # liveness wait for the worker's pool process and its zygote (the worker's grandchildren)
        assert wait_until(lambda: len(descendants(children[1])) >= 2, 120)
        tree.update(descendants(proc.pid))
        assert set(children) <= set(tree)
        _kill_owner(proc, tree, 120)  # the worker's warm shutdown, then its pool and sandboxes


def _session(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
        return int(stat.rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return -1


def test_a_fleet_child_started_by_a_thread_holding_signals_blocked_starts_with_none_blocked() -> None:
    """A child inherits the signal mask of the thread that forks it: one started from a thread
    holding SIGTERM blocked (as the local pool's start holds SIGINT) would ignore the SIGTERM
    that stops it, and its parent's death, until the stop's SIGKILL."""
    from cpfleet.fleet.processes import die_with_parent, popen_lasting

    shown: list[bytes] = []

    def start() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        child = popen_lasting(die_with_parent(["grep", "^SigBlk:", "/proc/self/status"]), stdout=subprocess.PIPE)
        shown.append(child.communicate(timeout=60)[0])

    _in_a_thread_that_ends(start)
    assert int(shown[0].split()[1], 16) == 0, shown
