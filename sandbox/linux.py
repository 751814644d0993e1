"""Thin ctypes wrappers over the Linux calls Python 3.11 does not expose (unshare, mount,
pivot_root, prctl). Errors raise OSError with errno, like the os module."""

from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_NOATIME = 1024
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

SYS_pivot_root = 155  # x86_64
if os.uname().machine in ("aarch64", "arm64"):
    SYS_pivot_root = 41


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            None if fstype is None else fstype.encode(),
            ctypes.c_ulong(flags),
            None if data is None else data.encode(),
        ),
        f"mount {target}",
    )


def umount2(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_libc.syscall(SYS_pivot_root, new_root.encode(), put_old.encode()), "pivot_root")


SYS_close_range = 436  # the same number on x86_64 and aarch64
MAX_FD = 0xFFFFFFFF  # close_range's "to the end"


def close_range(first: int, last: int) -> None:
    """close_range(2) over ``first..last`` inclusive (OSError where the kernel lacks it)."""
    _check(_libc.syscall(ctypes.c_long(SYS_close_range), ctypes.c_uint(first), ctypes.c_uint(last),
                         ctypes.c_uint(0)), "close_range")


def prctl(option: int, arg2: int = 0) -> None:
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), 0, 0, 0), f"prctl {option}")


CAP_SETGID = 6
CAP_SETUID = 7
CAP_SYS_ADMIN = 21


def effective_capabilities() -> int:
    """The CapEff bit mask of this process (root in a container may have few or none)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def has_capability(cap: int) -> bool:
    return bool(effective_capabilities() >> cap & 1)


def prctl_ptr(option: int, arg2: int, pointer: int) -> None:
    """prctl with a pointer third argument (PR_SET_SECCOMP)."""
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_void_p(pointer), 0, 0), f"prctl {option}")


def syscall_ptr(number: int, arg1: int, arg2: int, pointer: int) -> None:
    """A raw system call taking (int, int, pointer) that returns 0 on success (seccomp)."""
    _check(_libc.syscall(ctypes.c_long(number), ctypes.c_ulong(arg1), ctypes.c_ulong(arg2), ctypes.c_void_p(pointer)),
           f"syscall {number}")
