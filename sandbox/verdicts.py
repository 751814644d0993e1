"""One test's verdict, from what the job init reported about its end (sandbox/jobinit.py's
"done" message) and what the runner saw (its output, the cgroup's OOM count): the one mapping
every test of every runner goes through, single or one side of an interactive pair."""

from __future__ import annotations

import math
import os
import signal
from typing import Any

from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages
from cpfleet.sandbox.runner import Limits, RunResult

CPU_RLIMIT_FACTOR = 1.5  # RLIMIT_CPU sits at ceil(1.5 x limit) + 1 s: see cpu_rlimit_s
CPU_RLIMIT_SLACK_S = 1


def wall_fields(limits: Limits) -> dict[str, float]:
    """The wall-clock backstop of one test, as the job init polices it (sandbox/police.py):
    it fires at ``wall_s`` unless the test waited for a CPU by then, and moves by that wait, up
    to ``wall_max_s``. One rule for every run, single or one side of an interactive pair, so
    machine load turns neither into a TIME_LIMIT."""
    return {"wall_s": min(limits.wall_backstop_s, limits.wall_max_s), "wall_max_s": limits.wall_max_s}


def cpu_rlimit_s(limits: Limits) -> int:
    """The RLIMIT_CPU a test runs under: a backstop well above the time limit, not the limit.

    The kernel checks RLIMIT_CPU against tick-sampled CPU time, which under load runs ahead of
    the exact per-task runtime (by a quarter on a loaded 2-CPU host here); judging TIME_LIMIT by
    the rlimit firing made a program near the limit flip between runs. The job init kills a
    test whose exact runtime passes ``limits.time_s`` (sandbox/police.py) and the verdict is
    decided on the exact CPU time of every process of the test (``cpu_s``); the rlimit only
    stops what that does not see (a CPU-bound child process)."""
    return math.ceil(CPU_RLIMIT_FACTOR * limits.time_s) + CPU_RLIMIT_SLACK_S


# what ``ZygoteRunner._new_oom`` tells: the slot's own limit killed, or something above it did
OOM_OWN, OOM_OUTSIDE = "own", "outside"


def outside_oom_message(memory_mb: int) -> str:
    """An OOM kill the run's own limit did not make: an infrastructure shortfall (INTERNAL), never
    the program's MEMORY_LIMIT (sandbox/cgroups.py, ``SlotCgroup.limit_reached``)."""
    return (f"the kernel's OOM killer killed a process of this run while its slot was below its own memory limit "
            f"({memory_mb} MB): the memory of all slots together, the worker's cgroup or the host ran short, "
            "not the program's doing")


def judge_run(res: RunResult, done: dict[str, Any], limits: Limits, cpu_rlimit: int, oom: bool, *,
              allowance_bytes: int) -> RunResult:
    """Turn the raw exit into a verdict whose message names what fired, with the real numbers.

    TIME_LIMIT is judged on the precise CPU time; the wall-clock backstop (for programs that
    sleep or block) and a CPU rlimit that fired below the limit depend on machine load, so
    those verdicts are marked non-deterministic (never cached). So is MEMORY_LIMIT inferred from
    a peak RSS near the memory the test may hold rather than from a MemoryError or the memory
    cgroup: the limit plus ``allowance_bytes``, the runtime's own allowance beyond it where only
    the cgroup bounds it (the JVM, PyPy: ``Language.extra_cgroup_mb``), whose peak RSS includes
    the runtime itself. (Against the limit alone, a Java program failing with an index out of
    bounds after filling 200 MB of a 256 MB heap was a MEMORY_LIMIT.)
    """
    status: int = done["status"]
    res.files = dict(done.get("files") or {})
    res.cpu_s = float(done["cpu"])
    res.wall_s = float(done["wall"])
    res.max_rss_kb = int(done["maxrss"])
    killed: str = done["killed"]
    if os.WIFEXITED(status):
        res.exit_code = os.WEXITSTATUS(status)
    elif os.WIFSIGNALED(status):
        res.signal = os.WTERMSIG(status)
    used = f"{res.cpu_s:.2f}s CPU, {res.wall_s:.2f}s wall"
    near_memory_limit = res.max_rss_kb * 1024 >= 0.9 * ((limits.memory_mb << 20) + allowance_bytes)
    # the rlimit fires on the kernel's tick-sampled CPU time, which runs ahead of the exact time
    # by a quarter at most: a SIGXCPU after less than half the rlimit's CPU is one the program
    # sent itself (os.kill, raise), its own runtime error
    rlimit_fired = (res.signal == signal.SIGXCPU and res.cpu_s >= cpu_rlimit / 2) or (
        res.signal == signal.SIGKILL and res.cpu_s >= cpu_rlimit - 0.05)
    tail = res.stderr.rstrip().rsplit(b"\n", 1)[-1]
    if done["internal"]:
        res.status, res.error = Verdict.INTERNAL, done["internal"]
    elif done.get("exec_errno"):
        res.status, res.error = Verdict.MEMORY_LIMIT, f"the program's image does not fit the memory limit " \
            f"{limits.memory_mb} MB ({os.strerror(done['exec_errno'])})"
    elif killed == "output":
        res.status = Verdict.OUTPUT_LIMIT
        if res.stdout_truncated:
            res.error = f"stdout limit ({limits.stdout_bytes >> 20} MiB) exceeded"
        else:
            res.error = f"stderr limit ({limits.stderr_bytes >> 20} MiB) exceeded"
    elif oom:
        res.status = Verdict.MEMORY_LIMIT
        res.error = f"memory limit {limits.memory_mb} MB: killed by the memory cgroup"
    elif res.cpu_s > limits.time_s:
        res.status = Verdict.TIME_LIMIT
        res.error = f"CPU time limit {limits.time_s:g}s exceeded ({used})"
    elif killed == "cpu":
        # the init saw the exact runtime pass the limit; rusage rounds differently at the edge
        res.status = Verdict.TIME_LIMIT
        res.error = f"CPU time limit {limits.time_s:g}s exceeded ({used})"
    elif killed == "wall":
        res.status, res.deterministic = Verdict.TIME_LIMIT, False
        credit = float(done.get("wall_credit", 0.0))
        moved = f", moved {credit:.2f}s for the time spent waiting for a CPU" if credit >= 0.005 else ""
        if limits.wall_cap_s is not None and limits.wall_cap_s <= limits.wall_backstop_s + credit:
            res.error = (
                f"the job's time budget ran out: this test was cut at {limits.wall_cap_s:.2f}s wall "
                f"({used}; CPU time limit {limits.time_s:g}s not reached)"
            )
        elif done.get("outlived"):
            res.error = (
                f"wall-clock backstop {limits.wall_backstop_s:.1f}s fired ({used}{moved}): the main process had "
                "ended, but a process it started was still running (a test ends when the last of its processes does)"
            )
        else:
            res.error = (
                f"wall-clock backstop {limits.wall_backstop_s:.1f}s fired ({used}{moved}; "
                f"CPU time limit {limits.time_s:g}s not reached: the program waited)"
            )
    elif rlimit_fired:
        res.status, res.deterministic = Verdict.TIME_LIMIT, False
        res.error = f"CPU rlimit {cpu_rlimit}s fired ({used}; the kernel's tick-sampled CPU time ran ahead)"
    elif res.exit_code == 0:
        res.status = Verdict.OK
    elif tail.startswith(b"MemoryError") or any(m in res.stderr for m in languages.oom_markers()):
        res.status, res.error = Verdict.MEMORY_LIMIT, f"memory limit {limits.memory_mb} MB: an allocation failed"
    elif near_memory_limit:
        res.status, res.deterministic = Verdict.MEMORY_LIMIT, False
        res.error = (
            f"memory limit {limits.memory_mb} MB: exited with "
            + (f"exit code {res.exit_code}" if res.signal is None else f"signal {res.signal}")
            + f" at peak RSS {res.max_rss_kb >> 10} MB"
        )
    else:
        res.status = Verdict.RUNTIME_ERROR
        res.error = f"exit code {res.exit_code}" if res.signal is None else f"killed by {signal_name(res.signal, limits)}"
    return res


# what a death by these signals means for a program judged here: feedback the model reads
_SIGNAL_CAUSES = {
    signal.SIGSEGV: "an invalid memory access, or the stack overflowed",
    signal.SIGABRT: "abort(): a failed assertion or an uncaught C++ exception",
    signal.SIGFPE: "an arithmetic error, such as an integer division by zero",
    signal.SIGPIPE: "a write to a pipe nobody reads",
    signal.SIGBUS: "an invalid memory access",
    signal.SIGILL: "an illegal instruction",
}


def signal_name(number: int, limits: Limits) -> str:
    """``signal 11 (SIGSEGV: an invalid memory access, or the stack overflowed)``: the number,
    its name where it has one, and what a program's death by it usually means."""
    try:
        sig = signal.Signals(number)
    except ValueError:
        return f"signal {number}"
    cause = (f"a file written past the file size limit of {limits.file_size_mb} MB" if sig == signal.SIGXFSZ
             else _SIGNAL_CAUSES.get(sig))
    return f"signal {number} ({sig.name}: {cause})" if cause else f"signal {number} ({sig.name})"
