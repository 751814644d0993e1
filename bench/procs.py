"""Process helpers the fleet benchmarks share: stopping a worker they started in its own session,
and walking a process tree through /proc to sum its CPU."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (a Celery warm shutdown: running jobs finish), then SIGKILL whatever of its session
    is left after 30 s, so a benchmark never leaves pool processes or sandboxes behind."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (every thread's list); [] once it is gone."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out
