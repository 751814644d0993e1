"""Watching and killing a running test, in the job init (sandbox/jobinit.py): its CPU time
against the limit, the wall-clock backstop (moved by the time it waited for a CPU), the runner's
kill requests; once its main process ended, the processes it left, until they end too or reach
the test's limits (``await_the_rest``); and then every process still there (double-forked,
setsid'd orphans)."""

from __future__ import annotations

import _signal as signal  # the C module: `signal` would import enum into every fork
import _socket as socket  # the C module: `socket` would import array, selectors and enum
import os
import resource
import select
import time

from cpfleet.sandbox import cgroups, linux
from cpfleet.sandbox.channel import recv

CPU_POLL_MS = 50  # how often a running test's CPU time is compared with its limit
RUNNER_GONE = "runner gone"  # await_the_rest: the runner closed the job's socket
REAPS_PER_LOOK = 64  # await_the_rest: ended processes reaped between two looks at the limits


class TreeCpu:
    """The CPU time a running test's processes have used together, from the slot cgroup's
    counter (sandbox/cgroups.py): the test's processes are its only members while it runs,
    except in an interactive pair, whose other side runs in the slot too (``shared``)."""

    __slots__ = ("fd", "base", "shared", "reaped_base")

    def __init__(self, fd: int, base: float, shared: bool) -> None:
        self.fd = fd
        self.base = base
        self.shared = shared
        self.reaped_base = 0.0  # the init's RUSAGE_CHILDREN CPU when the test started (shared)

    @classmethod
    def start(cls, fd: int, shared: bool = False) -> TreeCpu | None:
        """The count from now on, or None where the slot has no counter (the main process is
        then policed alone; the verdict still counts every process once it is reaped)."""
        if fd < 0:
            return None
        try:
            return cls(fd, cgroups.cpu_usage_s(fd), shared)
        except (OSError, ValueError):
            return None

    def used_s(self) -> float:
        try:
            return cgroups.cpu_usage_s(self.fd) - self.base
        except (OSError, ValueError):
            return 0.0

    def over(self, limit_s: float) -> bool:
        """Whether the test's processes together used more than ``limit_s``. In a shared slot
        the count holds the other side's CPU too: past the limit, this test's own is counted
        (``own_cpu_s``), so an interactor's thinking never stops the program at its limit, nor
        the program's the interactor. Costs nothing until the slot's count passes the limit."""
        if self.used_s() <= limit_s:
            return False
        return not self.shared or own_cpu_s(self.reaped_base) > limit_s


def police(pid: int, sock: socket.socket, deadline: float, hard_deadline: float,
           cpu_limit_s: float | None = None, tree: TreeCpu | None = None) -> tuple[str, float]:
    """Wait for the test to exit; kill it at its CPU time limit, at the wall-clock backstop or
    on the runner's request.

    The CPU time limit is enforced here, every CPU_POLL_S, on the scheduler's exact runtime
    of the main process's threads, and, where the slot counts it (``tree``), on the CPU time
    of all the test's processes together, the count the verdict is judged on (a program that
    spins in children is stopped at its limit, not at the wall-clock backstop with a multiple
    of it used); not by RLIMIT_CPU: the kernel checks that against tick-sampled time, which
    under load runs ahead of the exact count by tens of percent. RLIMIT_CPU stays as a
    per-process backstop above.

    The backstop is for programs that sleep or block, and machine load must not move it:
    when it comes, the time the test's main process spent runnable but waiting for a CPU
    (the scheduler's run delay) is credited and the backstop moves that far, never past
    ``hard_deadline``. Returns why it was killed ("" if it was not) and the credit given."""
    pidfd = linux.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(sock.fileno(), select.POLLIN)
    killed = ""
    credit = 0.0
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                waited = run_delay_s(pid)
                if waited > credit + 0.001 and deadline < hard_deadline:
                    deadline = min(hard_deadline, deadline + (waited - credit))
                    credit = waited
                    continue
                kill_test(pid)
                return killed or "wall", credit
            wait_ms = max(1, int(remaining * 1000) + 1)
            if cpu_limit_s is not None and not killed:
                wait_ms = min(wait_ms, CPU_POLL_MS)
            events = poller.poll(wait_ms)
            if not events and cpu_limit_s is not None and not killed and (
                    runtime_s(pid) > cpu_limit_s or (tree is not None and tree.over(cpu_limit_s))):
                killed = "cpu"
                kill_test(pid)
                continue
            for fd, _ in events:
                if fd == pidfd:
                    return killed, credit
                msg, extra = recv(sock)
                for x in extra:
                    os.close(x)
                if msg is None:  # the runner is gone: end the job
                    kill_test(pid)
                    os._exit(0)
                if msg.get("op") == "kill":
                    killed = killed or str(msg.get("reason", "request"))
                    kill_test(pid)
    finally:
        os.close(pidfd)

def await_the_rest(sock: socket.socket, deadline: float, cpu_limit_s: float | None, tree: TreeCpu | None,
                   reaped_base: float, own_proc: bool) -> str | None:
    """After the test's main process ended on its own and was reaped (the caller is pid 1 of the
    job's namespace, or the subreaper of the test's processes, so every process the test left is
    a descendant of ours): wait until they have all ended too, within the test's limits. A
    process the program forked flushes its own copy of a buffer it inherited when it exits
    (``print(3); os.fork()`` writes "3" twice under ``python3 solution.py``, as does C's
    ``printf("3\n"); fork();`` into a pipe), and a judge that reads the program's stdout to EOF
    (``subprocess.run(..., capture_output=True)``) judges what they all wrote: killing them the
    moment the main process ended made the output depend on which got the CPU first.

    None when nothing is left (all reaped: the common case costs one ``waitpid``); otherwise
    why what is left must be killed now: ``RUNNER_GONE`` (the caller ends the job), "wall" at
    the wall-clock backstop ``deadline`` (a descendant still running, e.g. sleeping, or one that
    closed its std streams), "cpu" once the test's processes together passed ``cpu_limit_s``,
    or the runner's kill request. ``reaped_base``: the caller's RUSAGE_CHILDREN CPU when the
    test started, to count the CPU of a test without a slot counter (``tree``) where /proc
    shows this namespace alone."""
    poller: select.poll | None = None
    pause_ms = 1
    while True:
        try:
            # a bounded number per pass: processes forking and exiting as fast as they are
            # reaped must not keep this loop from its limits
            for _ in range(REAPS_PER_LOOK):
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
        except ChildProcessError:
            return None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "wall"
        if cpu_limit_s is not None and (tree.over(cpu_limit_s) if tree is not None
                                        else own_proc and own_cpu_s(reaped_base) > cpu_limit_s):
            return "cpu"
        if poller is None:
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
        # no event says that a descendant ended: look again soon, then less often (the programs
        # that fork are few; one whose children end at once waits a millisecond or two)
        if poller.poll(min(pause_ms, int(remaining * 1000) + 1)):
            msg, extra = recv(sock)
            for x in extra:
                os.close(x)
            if msg is None:
                return RUNNER_GONE
            if msg.get("op") == "kill":
                return str(msg.get("reason", "request"))
        pause_ms = min(pause_ms * 2, CPU_POLL_MS)


def kill_test(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the test's own session/group, stopped members included
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass

def kill_everything_left(pid: int, ns_init: bool, subreaper: bool, uid_drop: bool, uid: int) -> None:
    """Nothing a test started may outlive it (double-forked, setsid'd orphans included).
    ``ns_init``: the caller is pid 1 of the job's own pid namespace."""
    if ns_init:  # init of our own pid namespace: kill(-1) reaches only this job's processes
        # _run_test SIGKILLed every process of the job but us just before reaping the test's
        # main process, and a process with SIGKILL pending cannot complete a fork: reap what
        # is left, killing again after each reap all the same (one kill(-1) walks every
        # process of the host, so none is made when nothing is left, the common case)
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                return
            kill_all_but_init()
    if subreaper and _kill_descendants():
        return
    if uid_drop:  # no pid namespace: kill every process of the slot's uid
        killer = os.fork()
        if killer == 0:
            try:
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(killer, 0)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass

def _kill_descendants() -> bool:
    """Without a pid namespace (degraded mode): kill and reap every process the test left.

    As the subreaper, this init becomes the parent of every orphan of the test, so the
    processes still alive are exactly our children and their descendants: kill our
    children, reap, and repeat until none is left (a killed process's own children are
    re-parented to us in turn). No process can leave this subtree (ptrace is refused by the
    filter; CLONE_PARENT keeps it under us), whereas a test with the worker's uid could move
    itself out of the slot's cgroup, and a kill by uid needs a uid of its own. False when
    /proc cannot list our children (a hidden root without /proc): the caller falls back."""
    me = os.getpid()
    path = f"/proc/{me}/task/{me}/children"
    while True:
        try:
            with open(path, "rb") as f:
                kids = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            return False
        if not kids:
            return True
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)  # every child was just SIGKILLed: one exits promptly
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return True


def _schedstat(pid: int) -> list[list[int]]:
    """The schedstat fields (runtime ns, run delay ns, timeslices) of each thread of ``pid``."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    stats = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                stats.append([int(x) for x in f.read().split()[:3]])
        except (OSError, ValueError):
            continue
    return stats


def own_cpu_s(reaped_base: float) -> float:
    """The CPU a running test's processes have used, as pid 1 of its job's namespace sees them:
    what the init has reaped since ``reaped_base`` (RUSAGE_CHILDREN) and, for every process alive
    in the namespace (the init's own excepted), ``process_cpu_s``: its threads, the ended ones
    too, and the children it reaped itself. A program must not hide CPU from this count in
    short-lived threads or in children a long-lived process of its own waits for (RLIMIT_CPU
    sees neither a reaped child's CPU nor, in time, several children's). /proc lists processes in
    pid order, a parent before the children it forks: a child reaped between the two reads is
    missed, never counted twice, so this stays a lower bound."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = ru.ru_utime + ru.ru_stime - reaped_base
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit() and name != "1"]
    except OSError:
        return total
    for name in pids:
        total += process_cpu_s(int(name))
    return total


def process_cpu_s(pid: int) -> float:
    """The CPU of process ``pid``: the exact runtime of its live threads, or its whole thread
    group's time from /proc/<pid>/stat where that is more (it holds the threads that ended;
    in clock ticks), plus the CPU of the children it has reaped (cutime + cstime)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    except (OSError, ValueError, IndexError):
        return runtime_s(pid)
    tick = os.sysconf("SC_CLK_TCK")
    return max(runtime_s(pid), (utime + stime) / tick) + (cutime + cstime) / tick


def runtime_s(pid: int) -> float:
    """Exact CPU time of the threads of ``pid`` alive now (the scheduler's sum_exec_runtime)."""
    return sum(s[0] for s in _schedstat(pid) if s) / 1e9


def run_delay_s(pid: int) -> float:
    """Seconds the most delayed thread of ``pid`` spent runnable but waiting for a CPU (the
    second schedstat field); 0 when the kernel does not say."""
    return max((s[1] for s in _schedstat(pid) if len(s) > 1), default=0) / 1e9


def kill_all_but_init() -> None:
    """As pid 1 of the job's namespace, kill(-1) reaches every process of the job but us."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
