"""A memory + pids cgroup per slot, so a whole job (all its processes) is bounded, not only
each process's address space. cgroup v1 (separate hierarchies) and v2 (unified) are handled;
where neither is writable the runner reports the layer as missing and relies on rlimits.

The slot's cgroup also counts the CPU time of every process in it (v2's ``cpu.stat``, v1's
``cpuacct`` hierarchy): a test's processes are the only members while it runs, so the job init
polices the whole tree's CPU time against the limit, not only the main process's (a program
that spins in children it never waits for is stopped at its limit, not at the wall backstop).

Memory a test leaves charged to the slot after its last process is gone (memfds or pipes full of
data it sent over a unix socket to itself and never received: only the kernel's asynchronous
unix-socket garbage collection frees them, tens of ms after the test's end) is waited for before
the next run starts there (``await_memory_settled``): the run after a test is often its
checker, whose limit would otherwise hold the program's leftovers too. What neither reclaim nor
time frees is added to the next runs' limits (``stuck_bytes``), so no program is stopped short
of its own limit.

All slots together are bounded too: the ``cpfleet`` folder above them gets the memory limit
the worker computes for them (``capacity.slots_memory``: the host's or its own cgroup's
memory less a reserve for the worker itself), so N programs at their limits at once meet the
kernel's OOM killer there, not the host's (which would pick the worker). A kill that bound (or
the host) makes is told from one the test's own limit makes by the slot's own count of limit
hits (``limit_reached``: v2 ``memory.events`` ``max``, which only the slot's own limit raises; v1
its peak usage against its limit): the runner reports it as an infrastructure error, never
MEMORY_LIMIT."""

from __future__ import annotations

import os
import time

# What may stay charged to an empty slot besides its file pages (slab, RCU-delayed frees): a
# run starts once the slot, reclaimed, holds no more, or after SETTLE_S (the kernel's collection
# is never that slow: logged, and the run starts with the rest charged)
LEFTOVER_BYTES = 8 << 20
SETTLE_S = 2.0
# v1: a run whose peak usage came this close to the slot's limit reached it (the charge that
# fails there is a page batch or a huge page: at most a few MiB)
LIMIT_REACHED_MARGIN = 8 << 20

V1_ROOT = "/sys/fs/cgroup"


class SlotCgroup:
    """Creates ``cpfleet/<name>`` (``Slot.cgroup_name``) under the memory and pids controllers."""

    def __init__(self, name: str, slots_limit_bytes: int | None = None) -> None:
        self.name = name
        self.slots_limit_bytes = slots_limit_bytes  # written on the ``cpfleet`` folder above every slot
        self.slots_limit_error = ""  # why it could not be, when it could not
        self._peak_files: tuple[str, ...] = ()  # v1: the peak usage counters, reset before each run
        self._max_events = 0  # v2: the slot's ``max`` events when its run started
        self.procs_files: list[str] = []
        self._memory_limit_file = ""
        self._pids_max_file = ""
        self._oom_file = ""
        self._oom_fd = -1
        self._oom_key = b""
        self._mem_usage_file = ""
        self._mem_usage_fd = -1
        self._mem_stat_file = ""
        self._mem_stat_fd = -1
        self._file_keys: tuple[bytes, ...] = ()
        self._stuck_bytes = 0  # what an earlier wait found neither reclaim nor time frees
        self._cpu_usage_file = ""
        self._cpu_procs_file = ""
        self._current_limits: tuple[int, int] | None = None
        self.version = 0
        self.error = ""
        try:
            self._setup()
        except OSError as e:
            self.error = str(e)
            self.procs_files = []

    def _setup(self) -> None:
        mem_v1 = os.path.join(V1_ROOT, "memory")
        pids_v1 = os.path.join(V1_ROOT, "pids")
        if os.path.isfile(os.path.join(mem_v1, "memory.limit_in_bytes")) and os.path.isdir(pids_v1):
            mem = os.path.join(mem_v1, "cpfleet", self.name)
            pids = os.path.join(pids_v1, "cpfleet", self.name)
            os.makedirs(mem, exist_ok=True)
            self._bound_slots(os.path.join(mem_v1, "cpfleet", "memory.limit_in_bytes"))
            os.makedirs(pids, exist_ok=True)
            self._memory_limit_file = os.path.join(mem, "memory.limit_in_bytes")
            swap = os.path.join(mem, "memory.memsw.limit_in_bytes")
            self._swap_file = swap if os.path.exists(swap) else ""
            self._pids_max_file = os.path.join(pids, "pids.max")
            self._oom_file = os.path.join(mem, "memory.oom_control")
            self._oom_key = b"oom_kill"
            self._mem_usage_file = os.path.join(mem, "memory.usage_in_bytes")
            self._mem_stat_file = os.path.join(mem, "memory.stat")
            self._file_keys = (b"total_active_file", b"total_inactive_file")
            self._peak_files = tuple(p for p in (os.path.join(mem, "memory.max_usage_in_bytes"),
                                                 os.path.join(mem, "memory.memsw.max_usage_in_bytes"))
                                     if os.path.exists(p))
            self.procs_files = [os.path.join(mem, "cgroup.procs"), os.path.join(pids, "cgroup.procs")]
            self.version = 1
            cpuacct = os.path.join(V1_ROOT, "cpuacct")
            if os.path.isfile(os.path.join(cpuacct, "cpuacct.usage")):
                try:
                    acct = os.path.join(cpuacct, "cpfleet", self.name)
                    os.makedirs(acct, exist_ok=True)
                    self._cpu_usage_file = os.path.join(acct, "cpuacct.usage")
                    self._cpu_procs_file = os.path.join(acct, "cgroup.procs")
                except OSError:
                    pass  # the CPU count is optional: the init polices the main process alone
            return
        unified = V1_ROOT
        if os.path.isfile(os.path.join(unified, "cgroup.controllers")):
            base = os.path.join(unified, "cpfleet")
            os.makedirs(base, exist_ok=True)
            try:
                with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory +pids")
            except OSError:
                pass
            path = os.path.join(base, self.name)
            os.makedirs(path, exist_ok=True)
            self._bound_slots(os.path.join(base, "memory.max"))
            self._memory_limit_file = os.path.join(path, "memory.max")
            self._swap_file = os.path.join(path, "memory.swap.max")
            self._pids_max_file = os.path.join(path, "pids.max")
            self._oom_file = os.path.join(path, "memory.events")
            self._oom_key = b"oom_kill"
            self._mem_usage_file = os.path.join(path, "memory.current")
            self._mem_stat_file = os.path.join(path, "memory.stat")
            self._file_keys = (b"active_file", b"inactive_file")
            self.procs_files = [os.path.join(path, "cgroup.procs")]
            self._cpu_usage_file = os.path.join(path, "cpu.stat")
            self.version = 2
            return
        raise OSError("no writable cgroup v1 memory/pids or v2 hierarchy")

    @property
    def ok(self) -> bool:
        return bool(self.procs_files)

    def _bound_slots(self, limit_file: str) -> None:
        """Write the limit of all slots together on the ``cpfleet`` folder (every runner of the
        host computes the same number from the same host, so their writes agree). A refusal is
        kept in ``slots_limit_error`` (the runner reports it), never a failed start: the slot's
        own limit still holds each test."""
        if self.slots_limit_bytes is None:
            return
        try:
            _write(limit_file, str(self.slots_limit_bytes))
        except OSError as e:
            self.slots_limit_error = f"cannot bound all slots together in {limit_file}: {e.strerror or e}"

    def mark_run_start(self) -> None:
        """Start counting what ``limit_reached`` tells, for the run about to start."""
        if not self.ok:
            return
        if self.version == 2:
            self._max_events = self._event(b"max") or 0
            return
        for path in self._peak_files:
            try:
                _write(path, "0")
            except OSError:
                pass

    def limit_reached(self) -> bool:
        """Whether the slot's own memory limit was reached since ``mark_run_start``: v2 by its
        ``max`` events (raised only by the slot's own limit, not by one above it), v1 by its peak
        usage coming within ``LIMIT_REACHED_MARGIN`` of its limit (v1's ``failcnt`` is not
        raised where the memory+swap counter fails first). An OOM kill in the slot without it
        was made by a bound above the slot or by the host: not the test's doing. Where the
        counters cannot be read it says True: a kill it cannot place stays the test's, as a kill
        in the slot always was, rather than turning a program's own MEMORY_LIMIT into INTERNAL."""
        if not self.ok or self._current_limits is None:
            return True
        if self.version == 2:
            events = self._event(b"max")
            return events is None or events > self._max_events
        peaks = []
        for path in self._peak_files:
            try:
                with open(path, "rb") as f:
                    peaks.append(int(f.read()))
            except (OSError, ValueError):
                continue
        return not peaks or max(peaks) >= self._current_limits[0] - LIMIT_REACHED_MARGIN

    def _event(self, key: bytes) -> int | None:
        """One counter of the slot's memory.events (v2); None when it cannot be read."""
        try:
            with open(self._oom_file, "rb") as f:
                text = f.read()
        except OSError:
            return None
        for line in text.splitlines():
            name, _, value = line.partition(b" ")
            if name == key:
                return int(value)
        return None

    def set_limits(self, memory_bytes: int, pids: int) -> None:
        """Write limits only when they change (they are per problem, not per test)."""
        if not self.ok or self._current_limits == (memory_bytes, pids):
            return
        if self.version == 1 and self._swap_file:
            # v1 wants memory <= memory+swap at every moment: raise memsw first, lower it last
            raising = self._current_limits is None or memory_bytes > self._current_limits[0]
            order = [self._swap_file, self._memory_limit_file]
            for path in order if raising else order[::-1]:
                try:
                    _write(path, str(memory_bytes))
                except OSError:
                    if path == self._memory_limit_file:
                        raise
        else:
            _write(self._memory_limit_file, str(memory_bytes))
            if self._swap_file:
                try:
                    _write(self._swap_file, "0")
                except OSError:
                    pass
        _write(self._pids_max_file, str(pids))
        self._current_limits = (memory_bytes, pids)

    def oom_kills(self) -> int:
        """The cgroup's OOM-kill counter. Read after every test, so through an fd kept open
        (a pread at offset 0 regenerates the file) rather than an open() each time."""
        if not self.ok:
            return 0
        try:
            if self._oom_fd < 0:
                self._oom_fd = os.open(self._oom_file, os.O_RDONLY | os.O_CLOEXEC)
            text = os.pread(self._oom_fd, 4096, 0)
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(b" ")
            if key == self._oom_key:
                return int(value)
        return 0

    def leftover_bytes(self) -> int:
        """Memory charged to the slot that reclaim cannot take back (its usage less the file
        pages in its LRU lists), read when no run is in it. One pread of the usage counter on
        the common path; memory.stat only when the usage is above ``LEFTOVER_BYTES``."""
        if not self.ok or not self._mem_usage_file:
            return 0
        try:
            if self._mem_usage_fd < 0:
                self._mem_usage_fd = os.open(self._mem_usage_file, os.O_RDONLY | os.O_CLOEXEC)
            usage = int(os.pread(self._mem_usage_fd, 64, 0))
            if usage <= LEFTOVER_BYTES:
                return usage
            if self._mem_stat_fd < 0:
                self._mem_stat_fd = os.open(self._mem_stat_file, os.O_RDONLY | os.O_CLOEXEC)
            text = os.pread(self._mem_stat_fd, 16384, 0)
        except (OSError, ValueError):
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(b" ")
            if key in self._file_keys:
                usage -= int(value)
        return max(usage, 0)

    def await_memory_settled(self, timeout_s: float = SETTLE_S) -> int:
        """Wait until the memory the last run left charged to the slot is freed (at most
        ``timeout_s``), so the next run, a checker's most often, gets its whole limit: a program
        that leaves memfds or pipes in flight on a unix socket to itself (freed only by the
        kernel's asynchronous collection) must not get its checker OOM-killed, nor the limit
        write refused (v1: EBUSY below the usage), and so its own doing an infrastructure error.

        Past the threshold the slot is reclaimed once first (v1 ``memory.force_empty``, v2
        ``memory.reclaim``; no process is in it between runs): what a program can leave that
        reclaim frees (negative dentries: tens of MB of kernel memory, kept for good) is not
        waited for. What neither reclaim nor the collection frees in ``timeout_s`` is logged and
        becomes the level later runs wait for, so it costs one wait, not one per run. Returns
        what is left above that level."""
        left = self.leftover_bytes()
        if left <= self._stuck_bytes + LEFTOVER_BYTES:
            self._stuck_bytes = min(self._stuck_bytes, left)
            return 0
        self._reclaim(left)
        deadline = time.monotonic() + timeout_s
        left = self.leftover_bytes()
        while left > self._stuck_bytes + LEFTOVER_BYTES and time.monotonic() < deadline:
            time.sleep(0.002)
            left = self.leftover_bytes()
        if left > self._stuck_bytes + LEFTOVER_BYTES:
            # imported here, not at the top: the job init and every test child (forks of the
            # zygote) import this module, and logging would add to each test's address space,
            # which counts against a Python program's memory limit
            import logging

            logging.getLogger(__name__).warning(
                "slot %s still holds %d MiB that no reclaim frees, %.1f s after its last run ended: "
                "later runs get it on top of their limits", self.name, left >> 20, timeout_s)
            self._stuck_bytes = left
            return left
        return 0

    @property
    def stuck_bytes(self) -> int:
        """What the last wait found charged to the slot that neither reclaim nor time frees: not
        any later run's, so it is added to their limits (``ForkServerRunner._set_cgroup``)."""
        return self._stuck_bytes

    def _reclaim(self, nbytes: int) -> None:
        path = os.path.join(os.path.dirname(self._memory_limit_file),
                            "memory.force_empty" if self.version == 1 else "memory.reclaim")
        try:
            _write(path, "0" if self.version == 1 else str(nbytes))
        except OSError:
            pass  # v2's EAGAIN: less was reclaimable; what is left is waited for

    def open_join_fds(self) -> list[int]:
        """Write fds on the cgroup.procs files, for the zygote's test children to join through.
        A file this process cannot open (an unprivileged worker finding the directories made
        earlier by root) makes the layer unavailable, with the reason, instead of failing."""
        fds: list[int] = []
        if not self.ok:
            return fds
        try:
            for path in self.procs_files:
                fds.append(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
        except OSError as e:
            for fd in fds:
                os.close(fd)
            self.error = f"cannot open {path}: {e.strerror or e}"
            self.procs_files = []
            return []
        return fds

    def open_zygote_fds(self) -> tuple[list[int], bool]:
        """The fds a zygote's test children join the slot through (``open_join_fds``), then, if
        the slot counts CPU time, a read fd on the counter as the last one (the bool says so).
        Without the count only the test's main process is policed."""
        fds = self.open_join_fds()
        if not fds or not self._cpu_usage_file:
            return fds, False
        try:
            if self._cpu_procs_file:  # v1: the cpuacct hierarchy is joined too
                fds.append(os.open(self._cpu_procs_file, os.O_WRONLY | os.O_CLOEXEC))
            fds.append(os.open(self._cpu_usage_file, os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            for fd in fds[len(self.procs_files):]:
                os.close(fd)
            return fds[:len(self.procs_files)], False
        return fds, True

    def members(self) -> list[int]:
        """Pids in the slot's cgroup (as seen from this process's pid namespace)."""
        pids: set[int] = set()
        for path in self.procs_files:
            try:
                with open(path, "rb") as f:
                    pids.update(int(x) for x in f.read().split())
            except (OSError, ValueError):
                continue
        return sorted(pids)

    def kill_all(self, rounds: int = 100) -> None:
        """SIGKILL every process in the slot's cgroup, repeating while new ones appear (a
        forking process may add one between the read and the kill; pids.max bounds them)."""
        if not self.ok:
            return
        me = os.getpid()
        for _ in range(rounds):
            pids = [p for p in self.members() if p != me]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            time.sleep(0.001)

    def close(self) -> None:
        for name in ("_oom_fd", "_mem_usage_fd", "_mem_stat_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def cpu_usage_s(usage_fd: int) -> float:
    """Seconds of CPU the cgroup's processes have used, from an fd on v1's ``cpuacct.usage``
    (nanoseconds) or v2's ``cpu.stat`` (``usage_usec``); a pread at offset 0 regenerates it."""
    text = os.pread(usage_fd, 4096, 0)
    if text[:1].isdigit():
        return int(text) / 1e9
    for line in text.splitlines():
        key, _, value = line.partition(b" ")
        if key == b"usage_usec":
            return int(value) / 1e6
    raise OSError("no usage_usec in cpu.stat")


def join(procs_fds: list[int]) -> None:
    """Move the calling process into the slot's cgroups. Called in the test child while still
    root, through fds opened before the zygote hid the host filesystem ("0" = the caller)."""
    for fd in procs_fds:
        os.write(fd, b"0")
