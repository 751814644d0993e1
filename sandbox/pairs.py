"""Interactive pairs: a test of one job (the solution) and one of another (the interactor) at
once, each one's stdout piped into the other's stdin (``ZygoteRunner.run_pair``, used by
sandbox/interactive.py), each judged by the one verdict mapping (sandbox/verdicts.py)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cpfleet.core.errors import SandboxBroken
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import zygote
from cpfleet.sandbox.jobs import READ_CHUNK, REPLY_GRACE_S, Job, files_memfd
from cpfleet.sandbox.runner import Limits, RunResult
from cpfleet.sandbox.verdicts import OOM_OUTSIDE, OOM_OWN, judge_run, outside_oom_message, wall_fields

if TYPE_CHECKING:
    from cpfleet.sandbox.forkserver import ZygoteRunner

PEER_GRACE_S = 1.0  # how long the solution may run on after the interactor ended


def run_pair(runner: ZygoteRunner, job_a: Job, limits_a: Limits, job_b: Job, limits_b: Limits, *,
             argv: list[str], files: Mapping[str, bytes] | None,
             collect: Sequence[str] = ()) -> tuple[RunResult, RunResult, bool, bool]:
    """Run a test of ``job_a`` and one of ``job_b`` at once, each one's stdout piped into
    the other's stdin (an interactive problem: a the solution, b the interactor, which gets
    ``argv`` and ``files``). a's test ends when the last process it started ends (what a
    process it forked flushes at its exit reaches b), b's when its main process does. When b
    ends, a is stopped ``PEER_GRACE_S`` later (killed, error "stopped: the interactor exited");
    stderr of both is captured. INTERNAL when the sandbox failed.
    The flags: whether a's test ended (every process of it dead) before b's did, and whether
    the pair's memory cgroup OOM-killed any process meanwhile (a child either side forked, too:
    neither run's own status shows that)."""
    try:
        return _run_pair(runner, job_a, limits_a, job_b, limits_b, argv, files, collect)
    except (OSError, SandboxBroken) as e:
        job_a.close()
        job_b.close()
        failed = RunResult(Verdict.INTERNAL, error=f"sandbox failure: {e}")
        return failed, failed, False, False

def _run_pair(runner: ZygoteRunner, job_a: Job, limits_a: Limits, job_b: Job, limits_b: Limits, argv: list[str],
              files: Mapping[str, bytes] | None, collect: Sequence[str]) -> tuple[RunResult, RunResult, bool, bool]:
    refusal = runner.memory_refusal(limits_a, limits_b,
                                    overhead_bytes=job_a.extra_cgroup_bytes + job_b.extra_cgroup_bytes)
    if refusal is not None:
        refused = RunResult(Verdict.INTERNAL, error=refusal)
        return refused, refused, False, False
    total = (limits_a.memory_mb << 20) + job_a.extra_cgroup_bytes + (limits_b.memory_mb << 20) \
        + job_b.extra_cgroup_bytes
    cgroup_ok = runner._set_cgroup(total, limits_a.nproc + limits_b.nproc)
    rl_a, cpu_a = runner.child_limits(job_a, limits_a, cgroup_ok)
    rl_b, cpu_b = runner.child_limits(job_b, limits_b, cgroup_ok)
    # Both sides run as the slot's uid, and RLIMIT_NPROC bounds the uid's processes and threads
    # as a whole against the limit of the one that forks: at a's own limit a holds at most its
    # share, and b's limit of both shares (the pids cgroup's too) keeps b's share free whatever a
    # holds. An interactor left no process to start (a JVM's threads) would fail by a's doing.
    rl_b["nproc"] = limits_a.nproc + limits_b.nproc
    own: list[int] = []
    try:
        a2b_r, a2b_w = os.pipe2(os.O_CLOEXEC)
        own += [a2b_r, a2b_w]
        b2a_r, b2a_w = os.pipe2(os.O_CLOEXEC)
        own += [b2a_r, b2a_w]
        err_a_r, err_a_w = os.pipe2(os.O_CLOEXEC)
        own += [err_a_r, err_a_w]
        err_b_r, err_b_w = os.pipe2(os.O_CLOEXEC)
        own += [err_b_r, err_b_w]
        fds_b = [a2b_r, b2a_w, err_b_w]
        if files:
            files_fd = files_memfd(files)
            own.append(files_fd)
            fds_b.append(files_fd)
        # each side's backstop as a single test's (wall_fields): moved by the time that
        # side waited for a CPU; the CPU limits are enforced on exact runtime, each side's on its
        # own processes: the slot's CPU counter, which a single test is policed on as a whole
        # tree, counts both sides here ("tree_cpu": "shared", see police.TreeCpu.over), and an
        # interactor's CPU must never stop the program at its limit, nor the program's the
        # interactor at its own. a's test ends, as any single test does, when the last process it
        # started ends ("await_rest", JobInit._await_the_rest): what a process it forked flushes
        # at its exit reaches b, as from ``python3 solution.py`` on a pipe. b's ends with its main
        # process: its exit status is its verdict, and a child it left must not hold the dialogue
        zygote.send(job_b.sock, {"op": "run", "limits": rl_b, **wall_fields(limits_b),
                                 "cpu_limit_s": limits_b.time_s, "argv": argv, "mem_mb": limits_b.memory_mb,
                                 "collect": list(collect), "more": job_b.next_run(), "tree_cpu": "shared"}, fds_b)
        zygote.send(job_a.sock, {"op": "run", "limits": rl_a, **wall_fields(limits_a),
                                 "cpu_limit_s": limits_a.time_s, "argv": [], "mem_mb": limits_a.memory_mb,
                                 "more": job_a.next_run(), "tree_cpu": "shared", "await_rest": True},
                   [b2a_r, a2b_w, err_a_w])
        # b2a_r stays open here, as problemtools' ``interactive`` never closes the read end of
        # the interactor -> program pipe: an interactor writing its last reply ("correct") to a
        # program that already left must not die of it (a Python interactor's print raises
        # BrokenPipeError, EPIPE or not), or a right answer printed just before exiting is lost.
        # Once a's test has ended, _drain_pair reads and discards what b still writes there, so
        # b never blocks on a full pipe either.
        for fd in (a2b_r, a2b_w, b2a_w, err_a_w, err_b_w, *fds_b[3:]):
            own.remove(fd)
            os.close(fd)
        for fd in (err_a_r, err_b_r):
            os.set_blocking(fd, False)
        timeout = max(limits_a.wall_max_s, limits_b.wall_max_s) + REPLY_GRACE_S
        done, errs, a_first = _drain_pair(job_a, job_b, err_a_r, err_b_r, limits_a, limits_b, timeout, b2a_r)
    finally:
        for fd in own:
            os.close(fd)
    kill = runner._new_oom()
    if kill == OOM_OUTSIDE:
        outside = RunResult(Verdict.INTERNAL, error=outside_oom_message(limits_a.memory_mb + limits_b.memory_mb))
        return outside, outside, False, False
    oom = kill == OOM_OWN
    results = []
    for which, limits, cpu_rlimit, job in ((0, limits_a, cpu_a, job_a), (1, limits_b, cpu_b, job_b)):
        res = RunResult(Verdict.OK, stderr=errs[which][0], stderr_truncated=errs[which][1])
        d = done[which]
        killed_by_oom = oom and os.WIFSIGNALED(d["status"]) and os.WTERMSIG(d["status"]) == signal.SIGKILL
        peer = d["killed"] == "peer"
        if peer:
            d = dict(d, killed="")
        res = judge_run(res, d, limits, cpu_rlimit, killed_by_oom, allowance_bytes=job.extra_cgroup_bytes)
        if peer and res.status == Verdict.RUNTIME_ERROR:
            res.error = "stopped: the interactor exited"
        results.append(res)
    return results[0], results[1], a_first, oom

def _drain_pair(job_a: Job, job_b: Job, err_a: int, err_b: int, limits_a: Limits, limits_b: Limits,
                timeout: float, to_a: int) -> tuple[list[dict[str, Any]], list[tuple[bytes, bool]], bool]:
    """Wait for both tests' ends, capturing both stderr pipes; ``to_a``: the read end of b's
    output to a, held open and drained (discarded) once a's test has ended."""
    done: list[dict[str, Any] | None] = [None, None]
    errs = [bytearray(), bytearray()]
    trunc = [False, False]
    totals = [0, 0]
    caps = [limits_a, limits_b]
    socks = {job_a.sock.fileno(): 0, job_b.sock.fileno(): 1}
    pipes = {err_a: 0, err_b: 1}
    poller = select.poll()
    for fd in (*socks, *pipes):
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    killed = [False, False]
    jobs = (job_a, job_b)
    stop_a_at: float | None = None  # when a is stopped after b ended (PEER_GRACE_S later)
    ended: list[int] = []  # the order the two tests' ends were reported in
    while done[0] is None or done[1] is None:
        now = time.monotonic()
        remaining = deadline - now
        if remaining <= 0:
            raise SandboxBroken("a job init did not report the interactive test's end")
        if stop_a_at is not None and done[0] is None and not killed[0]:
            if now >= stop_a_at:
                zygote.send(job_a.sock, {"op": "kill", "reason": "peer"})
                killed[0] = True
            else:
                remaining = min(remaining, stop_a_at - now)
        for fd, _ in poller.poll(int(remaining * 1000) + 1):
            if fd in socks:
                i = socks[fd]
                msg, extra = zygote.recv(jobs[i].sock)
                for x in extra:
                    os.close(x)
                if msg is None:
                    raise SandboxBroken("a job init exited")
                done[i] = msg
                ended.append(i)
                poller.unregister(fd)
                if i == 0 and done[1] is None:
                    # a left: what b still writes to it is discarded. Non-blocking only now: the
                    # flag belongs to the pipe's open file, which was a's stdin while a ran
                    os.set_blocking(to_a, False)
                    poller.register(to_a, select.POLLIN)
                if i == 1 and done[0] is None and not killed[0]:
                    # a gets a moment to end on its own (its exit status counts: a program
                    # that crashes after an accepted dialogue is judged by its crash), then
                    # it is stopped (one still waiting to read would otherwise wait forever)
                    stop_a_at = time.monotonic() + PEER_GRACE_S
                continue
            if fd == to_a:
                with contextlib.suppress(BlockingIOError):
                    if not os.read(to_a, READ_CHUNK):
                        poller.unregister(to_a)
                continue
            i = pipes[fd]
            with contextlib.suppress(BlockingIOError):
                chunk = os.read(fd, READ_CHUNK)
                if not chunk:
                    poller.unregister(fd)
                    continue
                totals[i] += len(chunk)
                room = caps[i].stderr_keep_bytes - len(errs[i])
                if room > 0:
                    errs[i] += chunk[:room]
                if len(chunk) > room:
                    trunc[i] = True
                if totals[i] > caps[i].stderr_bytes and done[i] is None and not killed[i]:
                    zygote.send(jobs[i].sock, {"op": "kill", "reason": "output"})
                    killed[i] = True
    for i, fd in enumerate((err_a, err_b)):  # every process is dead: the rest is in the pipe
        while True:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                break
            if not chunk:
                break
            room = caps[i].stderr_keep_bytes - len(errs[i])
            if room > 0:
                errs[i] += chunk[:room]
            if len(chunk) > room:
                trunc[i] = True
    assert done[0] is not None and done[1] is not None
    return [done[0], done[1]], [(bytes(errs[0]), trunc[0]), (bytes(errs[1]), trunc[1])], ended[0] == 0
