"""Thin wrappers over the Linux calls Python does not expose (unshare, mount, pivot_root,
prctl, close_range, seccomp). Errors raise OSError with errno, like the os module.

Two foreign-function backends with one interface: ctypes under CPython, cffi under PyPy (the
fork server runs under either, sandbox/zygote.py). PyPy's ctypes is written in Python: its
first call in a freshly forked test child cost ~0.6 ms (the pages it touches are copied),
cffi's ~0.1 ms, and not importing ctypes keeps the PyPy zygote ~15 MB smaller, which every
fork copies the page tables of.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time (see sandbox/zygote.py)
if TYPE_CHECKING:
    from typing import Any


class _Ctypes:
    """libc through ctypes (CPython)."""

    def __init__(self) -> None:
        import ctypes

        self.c = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.keep: list[Any] = []

    def errno(self) -> int:
        return int(self.c.get_errno())

    def unshare(self, flags: int) -> int:
        return int(self.libc.unshare(self.c.c_int(flags)))

    def mount(self, source: bytes, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> int:
        return int(self.libc.mount(source, target, fstype, self.c.c_ulong(flags), data))

    def umount2(self, target: bytes, flags: int) -> int:
        return int(self.libc.umount2(target, self.c.c_int(flags)))

    def prctl(self, option: int, arg2: int, arg3: int) -> int:
        return int(self.libc.prctl(self.c.c_int(option), self.c.c_ulong(arg2), self.c.c_ulong(arg3), 0, 0))

    def syscall(self, number: int, *args: int | bytes) -> int:
        conv = [a if isinstance(a, bytes) else self.c.c_ulong(a) for a in args]
        return int(self.libc.syscall(self.c.c_long(number), *conv))

    def pin(self, data: bytes) -> int:
        buf = self.c.create_string_buffer(data, len(data))
        self.keep.append(buf)
        return int(self.c.addressof(buf))


class _Cffi:
    """libc through PyPy's built-in ``_cffi_backend``, without the ``cffi`` package (whose
    ``cdef`` parser, pycparser, would add ~60 MB to the zygote every test is forked from)."""

    def __init__(self) -> None:
        import _cffi_backend as b

        self.b = b
        lib = b.load_library(None)
        c_int, c_long = b.new_primitive_type("int"), b.new_primitive_type("long")
        self.c_ulong = b.new_primitive_type("unsigned long")
        self.c_char_p = b.new_pointer_type(b.new_primitive_type("char"))
        self.c_chars = b.new_array_type(self.c_char_p, None)
        p = self.c_char_p

        def fn(name: str, args: tuple[Any, ...], result: Any, varargs: bool = False) -> Any:
            return lib.load_function(b.new_function_type(args, result, varargs), name)

        self._unshare = fn("unshare", (c_int,), c_int)
        self._mount = fn("mount", (p, p, p, self.c_ulong, p), c_int)
        self._umount2 = fn("umount2", (p, c_int), c_int)
        self._prctl = fn("prctl", (c_int, self.c_ulong, self.c_ulong, self.c_ulong, self.c_ulong), c_int)
        # syscall(2) declared with a fixed prototype: a variadic call through _cffi_backend
        # builds its call description on every call (~0.3 ms in a fresh fork). glibc's
        # syscall only moves registers, where a fixed and a variadic call put the same values.
        self._syscall = fn("syscall", (c_long, *(self.c_ulong,) * 5), c_long)
        self.null = b.cast(p, 0)
        self.keep: list[Any] = []

    def errno(self) -> int:
        return int(self.b.get_errno())

    def _str(self, data: bytes | None) -> Any:
        return self.null if data is None else self.b.newp(self.c_chars, data + b"\0")

    def unshare(self, flags: int) -> int:
        return int(self._unshare(flags))

    def mount(self, source: bytes, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> int:
        return int(self._mount(self._str(source), self._str(target), self._str(fstype), flags, self._str(data)))

    def umount2(self, target: bytes, flags: int) -> int:
        return int(self._umount2(self._str(target), flags))

    def prctl(self, option: int, arg2: int, arg3: int) -> int:
        return int(self._prctl(option, arg2, arg3, 0, 0))

    def syscall(self, number: int, *args: int | bytes) -> int:
        keep = [self._str(a) if isinstance(a, bytes) else a for a in args]  # alive during the call
        conv = [int(self.b.cast(self.c_ulong, a)) if not isinstance(a, int) else a for a in keep]
        return int(self._syscall(number, *conv, *(0,) * (5 - len(conv))))

    def pin(self, data: bytes) -> int:
        buf = self.b.newp(self.c_chars, data)
        self.keep.append(buf)
        return int(self.b.cast(self.c_ulong, buf))


_libc: _Ctypes | _Cffi = _Cffi() if sys.implementation.name == "pypy" else _Ctypes()

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
        err = _libc.errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), None if fstype is None else fstype.encode(), flags,
                       None if data is None else data.encode()), f"mount {target}")


def umount2(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_libc.syscall(SYS_pivot_root, new_root.encode(), put_old.encode()), "pivot_root")


SYS_close_range = 436  # the same number on x86_64 and aarch64
MAX_FD = 0xFFFFFFFF  # close_range's "to the end"


def close_range(first: int, last: int) -> None:
    """close_range(2) over ``first..last`` inclusive (OSError where the kernel lacks it)."""
    _check(_libc.syscall(SYS_close_range, first, last, 0), "close_range")


SYS_pidfd_open = 434  # the same number on x86_64 and aarch64


def pidfd_open(pid: int) -> int:
    """os.pidfd_open, or the raw system call where the interpreter lacks it (PyPy 3.9)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is not None:
        return int(opener(pid))
    fd = _libc.syscall(SYS_pidfd_open, pid, 0)
    if fd < 0:
        err = _libc.errno()
        raise OSError(err, f"pidfd_open: {os.strerror(err)}")
    os.set_inheritable(fd, False)  # as os.pidfd_open's: the flag PIDFD_CLOEXEC does not exist
    return fd


def parent_pidfd(parent: int) -> int:
    """A pidfd of the process ``parent`` (-1 where the kernel or a seccomp filter refuses
    pidfds), to learn when that whole process exits: PR_SET_PDEATHSIG fires when the *thread*
    that forked us exits. The caller then checks ``os.getppid() == parent``: a parent that died
    before the pidfd was open gave us to another process (and its pid may be another's now)."""
    try:
        return pidfd_open(parent)
    except OSError:  # a kernel before 5.3, or a seccomp filter refusing it
        return -1


def prctl(option: int, arg2: int = 0) -> None:
    _check(_libc.prctl(option, arg2, 0), f"prctl {option}")


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
    _check(_libc.prctl(option, arg2, pointer), f"prctl {option}")


def syscall_ptr(number: int, arg1: int, arg2: int, pointer: int) -> None:
    """A raw system call taking (int, int, pointer) that returns 0 on success (seccomp)."""
    _check(_libc.syscall(number, arg1, arg2, pointer), f"syscall {number}")


def pinned(data: bytes) -> int:
    """The address of a copy of ``data`` that stays in place for the life of the process (the
    seccomp program, handed to the kernel by address)."""
    return _libc.pin(data)
