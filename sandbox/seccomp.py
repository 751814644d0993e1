"""A seccomp-bpf filter for test children: the system calls a competitive program never needs
and an attacker would use, refused with an errno (the program sees an ordinary failure).

Refused: ptrace and process_vm_* (a traced zombie could wedge the job init), the kernel
keyrings (add_key/keyctl/request_key: storage that outlives the test, shared by the slot's
uid), new namespaces (unshare, setns, clone with namespace flags; clone3 answers ENOSYS so
glibc falls back to clone, whose flags a classic filter can inspect), the mount APIs, bpf,
perf_event_open, userfaultfd, io_uring, the calls that reach into another process
(pidfd_getfd, process_madvise, kcmp), modify_ldt and personality (other than the query
``personality(0xffffffff)``: a persona can turn off address randomisation), the file-handle
calls (open_by_handle_at reopens a file by handle, bypassing path lookup and so the mount
namespace's view; name_to_handle_at only serves it), sockets and socket pairs of any
family but AF_UNIX, AF_INET and AF_INET6 (EAFNOSUPPORT: netlink, packet, AF_ALG crypto,
vsock, which a network namespace does not cover and which reaches the hypervisor, and the
rarely used families where kernel bugs cluster), and creating System V IPC objects or POSIX
message queues (the tests of a job share its IPC namespace: with nothing creatable there,
nothing passes from one test to the next; Python's multiprocessing uses /dev/shm instead),
and unnamed files (O_TMPFILE, and openat2 whose flags a filter cannot read): they would
advance the shared test directory's inode counter without a visible change to it. Python's
tempfile falls back to a named file on EOPNOTSUPP. Setting RLIMIT_CORE (setrlimit, prlimit64
with a new limit) succeeds without changing it: a test's core limit is 1 (``isolation.NO_CORE``),
which stops the kernel's core dumps of every kind, and a program lowering it to 0 would start
the host's pipe helper (apport, systemd-coredump) as root on each crash, since the kernel
ignores the limit for a ``core_pattern`` pipe. Everything else is allowed.

The program is built once in the zygote (``Filter``) and installed once per job, on the job
init after its own setup and no_new_privs; every test child inherits it (installing it per
child cost ~0.1 ms of each test). Only x86_64 is encoded; elsewhere the layer is reported
missing.
"""

from __future__ import annotations

import errno
import os
import sys

from cpfleet.sandbox import linux

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000

OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
NAMESPACE_FLAGS = (
    linux.CLONE_NEWNS | linux.CLONE_NEWCGROUP | linux.CLONE_NEWUTS | linux.CLONE_NEWIPC
    | linux.CLONE_NEWUSER | linux.CLONE_NEWPID | linux.CLONE_NEWNET
)

X86_64_DENIED = {
    101: errno.EPERM,  # ptrace
    310: errno.EPERM,  # process_vm_readv
    311: errno.EPERM,  # process_vm_writev
    248: errno.EPERM,  # add_key
    249: errno.EPERM,  # request_key
    250: errno.EPERM,  # keyctl
    272: errno.EPERM,  # unshare
    308: errno.EPERM,  # setns
    165: errno.EPERM,  # mount
    166: errno.EPERM,  # umount2
    155: errno.EPERM,  # pivot_root
    321: errno.EPERM,  # bpf
    298: errno.EPERM,  # perf_event_open
    323: errno.EPERM,  # userfaultfd
    425: errno.EPERM,  # io_uring_setup
    426: errno.EPERM,  # io_uring_enter
    427: errno.EPERM,  # io_uring_register
    428: errno.EPERM,  # open_tree
    429: errno.EPERM,  # move_mount
    430: errno.EPERM,  # fsopen
    431: errno.EPERM,  # fsconfig
    432: errno.EPERM,  # fsmount
    433: errno.EPERM,  # fspick
    442: errno.EPERM,  # mount_setattr
    438: errno.EPERM,  # pidfd_getfd
    440: errno.EPERM,  # process_madvise
    312: errno.EPERM,  # kcmp
    154: errno.EPERM,  # modify_ldt
    303: errno.EPERM,  # name_to_handle_at
    304: errno.EPERM,  # open_by_handle_at
    437: errno.ENOSYS,  # openat2: its flags are behind a pointer; libc and Python use openat
    29: errno.ENOSYS,  # shmget
    64: errno.ENOSYS,  # semget
    68: errno.ENOSYS,  # msgget
    240: errno.ENOSYS,  # mq_open
    435: errno.ENOSYS,  # clone3: glibc then uses clone, checked below
}
NR_CLONE, NR_SOCKET, NR_SOCKETPAIR, NR_OPEN, NR_OPENAT, NR_PERSONALITY = 56, 41, 53, 2, 257, 135
NR_SETRLIMIT, NR_PRLIMIT64, RLIMIT_CORE = 160, 302, 4
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
ALLOWED_SOCKET_FAMILIES = (AF_UNIX, AF_INET, AF_INET6)
PERSONALITY_QUERY = 0xFFFFFFFF  # personality(0xffffffff) reads the persona without changing it
O_TMPFILE_BIT = 0o20000000  # __O_TMPFILE


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return code.to_bytes(2, "little") + bytes((jt, jf)) + (k & 0xFFFFFFFF).to_bytes(4, "little")


def build_filter() -> bytes | None:
    """The filter as raw sock_filter instructions, or None where it is not encoded."""
    if os.uname().machine != "x86_64":
        return None
    p = [
        _ins(BPF_LD_W_ABS, OFF_ARCH),
        _ins(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        _ins(BPF_RET_K, RET_KILL_PROCESS),
        _ins(BPF_LD_W_ABS, OFF_NR),
        _ins(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),  # the x32 ABI would bypass the numbers below
        _ins(BPF_RET_K, RET_ERRNO | errno.ENOSYS),
    ]
    for nr, err in X86_64_DENIED.items():
        p += [_ins(BPF_JEQ_K, nr, 0, 1), _ins(BPF_RET_K, RET_ERRNO | err)]
    p += [  # clone with any namespace flag
        _ins(BPF_JEQ_K, NR_CLONE, 0, 4),
        _ins(BPF_LD_W_ABS, OFF_ARG0),
        _ins(BPF_JSET_K, NAMESPACE_FLAGS, 0, 1),
        _ins(BPF_RET_K, RET_ERRNO | errno.EPERM),
        _ins(BPF_RET_K, RET_ALLOW),
    ]
    for nr, flags_arg in ((NR_OPEN, 1), (NR_OPENAT, 2)):  # unnamed files (O_TMPFILE)
        p += [
            _ins(BPF_JEQ_K, nr, 0, 4),
            _ins(BPF_LD_W_ABS, OFF_ARG0 + 8 * flags_arg),
            _ins(BPF_JSET_K, O_TMPFILE_BIT, 0, 1),
            _ins(BPF_RET_K, RET_ERRNO | errno.EOPNOTSUPP),
            _ins(BPF_RET_K, RET_ALLOW),
        ]
    # socket/socketpair: only the families a program may use; the family is an int, so the low
    # word of the first argument is the whole value the kernel reads
    n = len(ALLOWED_SOCKET_FAMILIES)
    for nr in (NR_SOCKET, NR_SOCKETPAIR):
        p += [_ins(BPF_JEQ_K, nr, 0, n + 3), _ins(BPF_LD_W_ABS, OFF_ARG0)]
        p += [_ins(BPF_JEQ_K, family, n - i, 0) for i, family in enumerate(ALLOWED_SOCKET_FAMILIES)]
        p += [_ins(BPF_RET_K, RET_ERRNO | errno.EAFNOSUPPORT), _ins(BPF_RET_K, RET_ALLOW)]
    p += [  # personality: the query only (its argument is an unsigned int: the low word)
        _ins(BPF_JEQ_K, NR_PERSONALITY, 0, 4),
        _ins(BPF_LD_W_ABS, OFF_ARG0),
        _ins(BPF_JEQ_K, PERSONALITY_QUERY, 0, 1),
        _ins(BPF_RET_K, RET_ALLOW),
        _ins(BPF_RET_K, RET_ERRNO | errno.EPERM),
    ]
    p += [  # setrlimit(RLIMIT_CORE, ...): done, changing nothing
        _ins(BPF_JEQ_K, NR_SETRLIMIT, 0, 4),
        _ins(BPF_LD_W_ABS, OFF_ARG0),
        _ins(BPF_JEQ_K, RLIMIT_CORE, 0, 1),
        _ins(BPF_RET_K, RET_ERRNO | 0),
        _ins(BPF_RET_K, RET_ALLOW),
    ]
    p += [  # prlimit64(pid, RLIMIT_CORE, new, old) with a new limit (both words of the pointer):
        # done, changing nothing; reading it (new == NULL, what getrlimit does) is allowed
        _ins(BPF_JEQ_K, NR_PRLIMIT64, 0, 8),
        _ins(BPF_LD_W_ABS, OFF_ARG0 + 8),
        _ins(BPF_JEQ_K, RLIMIT_CORE, 0, 5),
        _ins(BPF_LD_W_ABS, OFF_ARG0 + 16),
        _ins(BPF_JEQ_K, 0, 0, 2),
        _ins(BPF_LD_W_ABS, OFF_ARG0 + 20),
        _ins(BPF_JEQ_K, 0, 1, 0),
        _ins(BPF_RET_K, RET_ERRNO | 0),
        _ins(BPF_RET_K, RET_ALLOW),
    ]
    p.append(_ins(BPF_RET_K, RET_ALLOW))
    return b"".join(p)


SYS_seccomp = 317  # x86_64
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_SPEC_ALLOW = 4


class Filter:
    """A filter program laid out in memory once (in the zygote), ready for each job to install."""

    def __init__(self, program: bytes) -> None:
        # struct sock_fprog {unsigned short len; struct sock_filter *filter;}: the pointer at
        # offset 8 on 64-bit Linux (the only layout encoded here, see build_filter)
        fprog = (len(program) // 8).to_bytes(2, sys.byteorder) + bytes(6) + linux.pinned(program).to_bytes(8, sys.byteorder)
        self._address = linux.pinned(fprog)

    def install(self) -> None:
        """Install the filter (no_new_privs must already be set).

        Through seccomp(2) with SPEC_ALLOW, as runc does: installing a filter otherwise also
        turns on the speculative-store-bypass mitigation for the task, which slowed every test
        by 10-20% here. SSB leaks within an address space, and nothing under the filter holds
        a secret in its own (the expected outputs never reach the job)."""
        try:
            linux.syscall_ptr(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, self._address)
        except OSError:  # kernels before 4.17 lack the flag
            linux.prctl_ptr(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self._address)


def build() -> Filter | None:
    """The filter for this machine, or None where it is not encoded."""
    program = build_filter()
    return None if program is None else Filter(program)
