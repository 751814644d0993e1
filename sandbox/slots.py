"""Per-slot identities: each concurrent runner gets its own unprivileged uid/gid.

Separate uids make RLIMIT_NPROC a per-slot bound and stop one test's processes from
signalling another's. A slot is claimed with an flock on a file in a root-only directory,
so any process model (Celery prefork, multiprocessing, several workers on one host) gets
distinct slots without coordination, and a slot frees itself when its process dies.

The default directory sits in the shared /tmp, where another local user may have planted a
symlink or a directory of their own before the first worker starts: the directory is opened
without following a symlink and must be owned by us and writable by no one else, and each
lock file is opened relative to it, again without following a symlink. Anything else is a
``SlotDirError`` naming the path, never a lock file created where the planted link points.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import socket
import stat
import tempfile
import time
import zlib
from dataclasses import dataclass

from cpfleet.core import envvars
from cpfleet.core.defaults import MAX_SLOTS
from cpfleet.core.errors import SlotDirError

log = logging.getLogger(__name__)



def uid_base() -> int:
    """First sandbox uid. Containers sharing a kernel (and its uid space) get different bases
    from their hostnames unless CPFLEET_SANDBOX_UID_BASE pins one."""
    pinned: int | None = envvars.read("CPFLEET_SANDBOX_UID_BASE")
    if pinned is not None:
        return pinned
    return 200_000 + MAX_SLOTS * (zlib.crc32(socket.gethostname().encode()) % 4000)


@dataclass
class Slot:
    index: int
    uid: int
    gid: int
    lock_fd: int

    @property
    def cgroup_name(self) -> str:
        """The slot's cgroup under ``cpfleet/``, named from its uid: the uid is the slot's
        identity on the host, so runners whose slots come from different lock directories with
        different uid bases never share (or kill the processes of) one cgroup."""
        return f"slot-{self.uid}"

    def release(self) -> None:
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


def default_lock_dir() -> str:
    return os.environ.get("CPFLEET_SLOT_DIR") or os.path.join(tempfile.gettempdir(), f"cpfleet-slots-{os.geteuid()}")


def open_own_dir(path: str, mode: int, what: str, *, disposable: bool = False) -> int:
    """A directory fd for ``path``, created with ``mode`` if missing: the rule for every folder
    the worker keeps in the shared temp directory (the slot locks, the compile cache, the
    precompiled headers), where another local user may have planted a symlink or a folder of
    their own first. The last component must be a real directory (not a symlink), owned by this
    euid, with no group or other write permission; anything else is a ``SlotDirError`` naming
    ``what`` and the path, never a folder used whose contents someone else chose.

    ``disposable`` (a cache, rebuilt on demand): a folder of this euid that others may write in
    (made by an earlier version under a permissive umask, or chmod-ed) is moved aside and
    removed, and a new one made, with a warning, instead of being refused: nothing in it can be
    trusted, and nothing in it is needed."""
    fd = _open_dir(path, mode, what)
    st = os.fstat(fd)
    if disposable and st.st_uid == os.geteuid() and st.st_mode & 0o022:
        os.close(fd)
        _replace_writable_by_others(path, stat.S_IMODE(st.st_mode), what)
        fd = _open_dir(path, mode, what)
        st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise SlotDirError(
            f"{what} {path} is owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}; "
            f"it must belong to uid {os.geteuid()} and be writable by no one else"
        )
    return fd


def _open_dir(path: str, mode: int, what: str) -> int:
    try:
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            os.makedirs(parent, mode=0o755, exist_ok=True)
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    except OSError as e:
        raise SlotDirError(f"cannot create the {what} {path}: {e.strerror or e}") from None
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        kind = "a symlink" if os.path.islink(path) else "not a directory we can open"
        raise SlotDirError(f"{what} {path} is {kind} ({e.strerror or e}); refusing it") from None


def _replace_writable_by_others(path: str, mode: int, what: str) -> None:
    """Move ``path`` aside (atomically: a process of this euid still using it keeps its open
    files) and remove it; the caller makes a new one."""
    aside = f"{path}.unsafe-{os.getpid()}-{time.monotonic_ns()}"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return  # another process of this euid moved it first
    except OSError as e:
        raise SlotDirError(f"{what} {path} has mode {mode:o} (writable by others) and cannot be moved aside: "
                           f"{e.strerror or e}") from None
    log.warning("%s %s had mode %o (writable by others): its contents are not trusted; removed, a new one is made",
                what, path, mode)
    shutil.rmtree(aside, ignore_errors=True)


def open_lock_dir(lock_dir: str) -> int:
    """A directory fd for ``lock_dir`` (``open_own_dir``), created 0700 if missing."""
    return open_own_dir(lock_dir, 0o700, "slot lock directory")


def claim_slot(lock_dir: str | None = None) -> Slot:
    """Claim the lowest free slot on this host (released when the process exits)."""
    lock_dir = lock_dir or default_lock_dir()
    dir_fd = open_lock_dir(lock_dir)
    try:
        base = uid_base()
        for i in range(MAX_SLOTS):
            name = f"slot-{i}.lock"
            try:
                fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
            except OSError as e:
                raise SlotDirError(f"slot lock file {lock_dir}/{name}: {e.strerror or e}; refusing it") from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                os.close(fd)
                raise SlotDirError(f"slot lock file {lock_dir}/{name} is not a regular file of uid {os.geteuid()}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return Slot(index=i, uid=base + i, gid=base + i, lock_fd=fd)
    finally:
        os.close(dir_fd)
    raise RuntimeError(f"all {MAX_SLOTS} sandbox slots are taken in {lock_dir}")
