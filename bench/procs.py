"""Process helpers the fleet benchmarks share: stopping a worker they started in its own session,
and walking a process tree through /proc to sum its CPU."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


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


def shared_file(name: str) -> Path | None:
    """A shared dataset file: in ``$CPFLEET_SHARED_DATA``, else in a ``shared/data`` beside the
    repository or one of its parents; None when absent (the benchmark then says it skips it)."""
    env = os.environ.get("CPFLEET_SHARED_DATA")
    repo = Path(__file__).resolve().parents[1]
    for base in ([Path(env)] if env else []) + [p / "shared" / "data" for p in repo.parents]:
        if (base / name).exists():
            return base / name
    return None
