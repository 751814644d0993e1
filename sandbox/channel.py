"""The zygote's messages: ``marshal``-encoded over SOCK_SEQPACKET socketpairs, fds with
SCM_RIGHTS, and memfds for what is too large for a message (sandbox/zygote.py says why marshal).
Shared by the zygote, its jobs and the runner."""

from __future__ import annotations

import _socket as socket  # the C module: `socket` would import array, selectors and enum
import errno  # built in: nothing more is imported into the zygote
import marshal
import os
import sys

from cpfleet.sandbox import child

TYPE_CHECKING = False  # typing is not imported at run time (see sandbox/zygote.py)
if TYPE_CHECKING:
    from typing import Any

MAX_FDS = 8
MSG_CMSG_CLOEXEC = 0x40000000
# what ``recv`` reads of one message: a longer one would arrive cut short, and the zygote or job
# init that failed to decode it exited (data of a problem, a 100 kB ``fn_name`` or checker flags,
# ended the runner's zygote on every job); so it is refused here, as the kernel refuses a
# message past the socket's buffer, before anything is sent
MAX_MSG_BYTES = 1 << 16


def send(sock: socket.socket, obj: Any, fds: list[int] | None = None) -> None:
    data = marshal.dumps(obj)
    if len(data) > MAX_MSG_BYTES:
        raise OSError(errno.EMSGSIZE, f"a message of {len(data)} bytes is over the channel's {MAX_MSG_BYTES}")
    if fds:
        rights = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds)
        sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
    else:
        sock.send(data)


def recv(sock: socket.socket) -> tuple[Any, list[int]]:
    """One message and its fds (close-on-exec); (None, []) when the peer closed the channel."""
    data, ancillary, _, _ = sock.recvmsg(MAX_MSG_BYTES, socket.CMSG_SPACE(MAX_FDS * 4), MSG_CMSG_CLOEXEC)
    fds = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds += [int.from_bytes(payload[i : i + 4], sys.byteorder, signed=True) for i in range(0, usable, 4)]
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return marshal.loads(data), fds


def memfd_holding(name: str, data: bytes) -> int:
    """A close-on-exec memfd holding ``data``, its offset at 0 (closed again if writing fails)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        child.write_all(fd, data)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)
