"""Per-slot identities: each concurrent runner gets its own unprivileged uid/gid.

Separate uids make RLIMIT_NPROC a per-slot bound and stop one test's processes from
signalling another's. A slot is claimed with an flock on a file in a root-only directory,
so any process model (Celery prefork, multiprocessing, several workers on one host) gets
distinct slots without coordination, and a slot frees itself when its process dies.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import zlib
from dataclasses import dataclass

MAX_SLOTS = 1024


def uid_base() -> int:
    """First sandbox uid. Containers sharing a kernel (and its uid space) get different bases
    from their hostnames unless CPFLEET_SANDBOX_UID_BASE pins one."""
    env = os.environ.get("CPFLEET_SANDBOX_UID_BASE")
    if env:
        return int(env)
    return 200_000 + MAX_SLOTS * (zlib.crc32(socket.gethostname().encode()) % 4000)


@dataclass
class Slot:
    index: int
    uid: int
    gid: int
    lock_fd: int

    def release(self) -> None:
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


def claim_slot(lock_dir: str | None = None) -> Slot:
    """Claim the lowest free slot on this host (released when the process exits)."""
    lock_dir = (
        lock_dir
        or os.environ.get("CPFLEET_SLOT_DIR")
        or os.path.join(tempfile.gettempdir(), f"cpfleet-slots-{os.geteuid()}")
    )
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    base = uid_base()
    for i in range(MAX_SLOTS):
        fd = os.open(os.path.join(lock_dir, f"slot-{i}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return Slot(index=i, uid=base + i, gid=base + i, lock_fd=fd)
    raise RuntimeError(f"all {MAX_SLOTS} sandbox slots are taken in {lock_dir}")
