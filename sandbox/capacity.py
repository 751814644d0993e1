"""The most memory this worker may give one test, and the rule that a test asking for more is
not run.

A problem record or an inline caller states a test's memory limit (up to
``core.problem.MAX_MEMORY_LIMIT_MB``), and the slot's cgroup gets it as stated. Where the host
cannot give that much, running the test anyway lets one hostile program (or several slots at
once) push the host into its OOM killer or swap, killing the worker and its other jobs; clamping
the limit instead would turn the host's shortfall into the program's MEMORY_LIMIT, a 0 it did
not earn. So a run whose stated limit exceeds the capacity is refused before it starts, as an
infrastructure error (INTERNAL, ``infra_error``) naming both numbers: the trainer masks it, the
operator sees which worker is too small for which problem.

The capacity is the least of: the host's MemTotal and the memory limit of every cgroup above
the worker's own (its container, its systemd unit) as far as its cgroup mount shows them, less
a reserve for the worker itself (``reserve_mb``; that number also bounds all slots together:
``slots_memory``, sandbox/cgroups.py), and ``CPFLEET_MAX_MEMORY_MB`` (the operator's own cap). Only limits a problem or a caller states are
held to it (``Limits.stated``): the compile's limit is the fleet's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cpfleet.core import envvars
from cpfleet.core.problem import MAX_MEMORY_LIMIT_MB

MEMINFO = "/proc/meminfo"
SELF_CGROUP = "/proc/self/cgroup"
MOUNTINFO = "/proc/self/mountinfo"
# cgroup v1 writes "no limit" as the largest page-aligned 63-bit number: anything this large is none
_UNLIMITED = 1 << 62


@dataclass(frozen=True, slots=True)
class MemoryCapacity:
    """What this worker may give one test, in MiB, and where that number comes from."""

    mb: int
    source: str

    def describe(self) -> str:
        return f"{self.mb} MB per test ({self.source})"

    def refusal(self, stated_mb: int, what: str = "the stated memory limit") -> str | None:
        """None when ``stated_mb`` fits, else the infrastructure error naming both numbers."""
        if stated_mb <= self.mb:
            return None
        return (f"{what}: {stated_mb} MB, but this worker gives a test at most {self.mb} MB ({self.source}): "
                "not run, as the host's shortfall is not the program's; judge this problem on a larger worker "
                "(docs/configuration.md, CPFLEET_MAX_MEMORY_MB)")


def host_memory_mb(meminfo: str = MEMINFO) -> int | None:
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) >> 10  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _mounts(mountinfo: str) -> list[tuple[str, str, str, str]]:
    """(root, mount point, fs type, super options) of each cgroup mount."""
    found = []
    try:
        # another mount's name may be any bytes (mountinfo escapes only blanks and backslashes)
        with open(mountinfo, errors="surrogateescape") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                    found.append((fields[3], fields[4], tail[0], tail[2]))
    except OSError:
        pass
    return found


def cgroup_memory_mb(self_cgroup: str = SELF_CGROUP, mountinfo: str = MOUNTINFO) -> tuple[int, str] | None:
    """The least memory limit among this process's cgroup and its ancestors visible under the
    cgroup mount (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), with the folder that sets it;
    None when none is set or none can be read."""
    try:
        with open(self_cgroup, errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    paths: dict[str, str] = {}
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            paths["cgroup2"] = path
        elif "memory" in controllers.split(","):
            paths["memory"] = path
    best: tuple[int, str] | None = None
    for root, point, fstype, options in _mounts(mountinfo):
        if fstype == "cgroup2":
            own, limit_file = paths.get("cgroup2"), "memory.max"
        elif "memory" in options.split(","):
            own, limit_file = paths.get("memory"), "memory.limit_in_bytes"
        else:
            continue
        if own is None:
            continue
        # the mount shows the hierarchy from ``root`` (a container's own subtree, bind-mounted)
        rel = own if root == "/" else (own[len(root):] if own == root or own.startswith(root + "/") else None)
        if rel is None:
            continue
        folder = os.path.normpath(os.path.join(point, rel.lstrip("/")))
        while True:
            try:
                with open(os.path.join(folder, limit_file)) as f:
                    raw = f.read().strip()
                value = None if raw == "max" else int(raw)
            except (OSError, ValueError):
                value = None
            if value is not None and value < _UNLIMITED and (best is None or value >> 20 < best[0]):
                best = (value >> 20, folder)
            if folder == point or len(folder) <= len(point):
                break
            folder = os.path.dirname(folder)
    return best


def reserve_mb(total_mb: int) -> int:
    """What the worker keeps of ``total_mb`` for itself (its pool processes, their problem
    caches, the zygotes) and the system: an eighth, at least 1 GiB, at most half."""
    return min(max(total_mb // 8, 1024), total_mb // 2)


def slots_memory() -> tuple[int, str] | None:
    """The memory all slots together may hold (the limit of the ``cpfleet`` cgroup folder above
    them, sandbox/cgroups.py), with where it comes from: the least of the host's MemTotal and
    the worker's cgroup limits, less ``reserve_mb`` of it. None when neither can be read."""
    candidates: list[tuple[int, str]] = []
    host = host_memory_mb()
    if host is not None:
        candidates.append((host, f"the host's MemTotal, {host} MB"))
    own = cgroup_memory_mb()
    if own is not None:
        candidates.append((own[0], f"the memory limit of the worker's cgroup {own[1]}, {own[0]} MB"))
    if not candidates:
        return None
    total, source = min(candidates, key=lambda c: c[0])
    kept = reserve_mb(total)
    return total - kept, f"{source}, less {kept} MB kept for the worker"


def memory_capacity() -> MemoryCapacity:
    """This worker's capacity now (a few small reads; each runner reads it once, at its start):
    what all slots together may hold (``slots_memory``), or less by CPFLEET_MAX_MEMORY_MB."""
    candidates: list[tuple[int, str]] = []
    slots = slots_memory()
    if slots is not None:
        candidates.append(slots)
    cap: int | None = envvars.read("CPFLEET_MAX_MEMORY_MB")
    if cap is not None:
        candidates.append((cap, f"CPFLEET_MAX_MEMORY_MB={cap}"))
    if not candidates:
        return MemoryCapacity(MAX_MEMORY_LIMIT_MB, "nothing here tells the host's memory: the largest limit a problem may state")
    mb, source = min(candidates, key=lambda c: c[0])
    return MemoryCapacity(mb, source)
