"""The runner's end of a job (sandbox/jobinit.py's JobInit holds the other): its control
channel, one test's standard fds, and the memfds that carry a program and a test's files."""

from __future__ import annotations

import fcntl
import marshal
import os
import socket
import struct
from collections.abc import Mapping
from typing import Any

from cpfleet.sandbox import zygote

READ_CHUNK = 1 << 20
PIPE_BYTES = 1 << 20
F_SETPIPE_SZ = 1031
REPLY_GRACE_S = 10.0  # how long past its own deadline we wait for the job init before declaring it broken


class Job:
    """The runner's end of one job's control channel (the init holds the other), and how its
    tests are bounded in memory (see ProgramImage)."""

    def __init__(self) -> None:
        self.sock, self.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.memory_model = "address_space"
        self.extra_cgroup_bytes = 0
        self.image_bytes = 0  # memory its executable maps at exec (ELF PT_LOAD segments)
        # runs its caller still means to make (``expect_runs``); None: unknown, assume more
        self.runs_expected: int | None = None
        # fork each next run's child ahead (decided when the job is loaded: see forkserver.spare_cpu)
        self.fork_ahead = True

    def next_run(self) -> bool:
        """Count one run; True when another is expected after it (its init then forks that
        run's test child ahead, while we judge this one)."""
        if self.runs_expected is None:
            return True
        self.runs_expected = max(0, self.runs_expected - 1)
        return self.runs_expected > 0

    def close(self) -> None:
        self.theirs.close()
        self.sock.close()


class TestStdio:
    """Fresh kernel objects for one test's fds 0/1/2: a memfd holding its input and two pipes
    we drain. Nothing a test can attach to an open file (locks, xattrs, F_SETOWN/F_SETSIG,
    status flags) survives into the next test, since the next test gets new ones."""

    def __init__(self, stdin: bytes) -> None:
        self._fds: list[int] = []
        try:
            memfd = self._own(zygote.memfd_holding("stdin", stdin))  # offset 0, shared with the child's fd 0
            self.stdout, out_w = (self._own(fd) for fd in os.pipe2(os.O_CLOEXEC))
            self.stderr, err_w = (self._own(fd) for fd in os.pipe2(os.O_CLOEXEC))
            for r in (self.stdout, self.stderr):
                os.set_blocking(r, False)
                try:
                    fcntl.fcntl(r, F_SETPIPE_SZ, PIPE_BYTES)
                except OSError:  # above /proc/sys/fs/pipe-max-size for an unprivileged worker
                    pass
        except BaseException:
            self.close()
            raise
        self.child_ends = [memfd, out_w, err_w]

    def _own(self, fd: int) -> int:
        self._fds.append(fd)
        return fd

    def sent(self) -> None:
        """The init holds its copies now; drop ours so only the test's processes can write."""
        for fd in self.child_ends:
            self._fds.remove(fd)
            os.close(fd)
        self.child_ends = []

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def send_source(sock: socket.socket, msg: dict[str, Any], fds: list[int], payload: bytes, fn_name: str | None) -> None:
    """Send ``msg`` with ``fds`` and the program's source as a memfd after them (and its
    ``fn_name``, for a function-call problem): a job start or a spare's load."""
    memfd = zygote.memfd_holding("solution", payload)
    try:
        if fn_name is not None:
            msg["fn_name"] = fn_name
        zygote.send(sock, msg, [*fds, memfd])
    finally:
        os.close(memfd)


def files_memfd(files: Mapping[str, bytes]) -> int:
    """A test's own files (read-only, mode 0444) as the memfd its init places them from."""
    return zygote.memfd_holding("files", marshal.dumps({k: (bytes(v), 0o444) for k, v in files.items()}))


def elf_load_bytes(data: bytes) -> int:
    """Total memory size of an ELF64 executable's loadable segments (0 when not ELF64): the
    address space its exec needs before the first instruction (a ``static char a[1 << 30]``)."""
    if len(data) < 64 or data[:5] != b"\x7fELF\x02":
        return 0
    order = "<" if data[5] == 1 else ">"
    phoff = struct.unpack_from(order + "Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36)
    total = 0
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 0x30 > len(data):
            break
        if struct.unpack_from(order + "I", data, off)[0] == 1:  # PT_LOAD
            total += struct.unpack_from(order + "Q", data, off + 0x28)[0]
    return total
