"""Sandbox hardening (issue 9, hole 9): the seccomp additions, the inherited-fd sweep, a runner
whose start fails, orphans in degraded mode, and the slot lock directory."""

from __future__ import annotations

import textwrap

import pytest
from runner_helpers import run

from sandbox.runner import CodeRunner
from sandbox.verdict import Verdict


def src(code: str) -> str:
    return textwrap.dedent(code).lstrip()


SYSCALL_PROBE = src("""
    import ctypes, os, socket
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    def call(*args):
        ctypes.set_errno(0)
        ret = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
        return 'ok' if ret >= 0 else os.strerror(ctypes.get_errno())
    pidfd = os.pidfd_open(os.getpid())
    print('pidfd_getfd', call(438, pidfd, 0, 0))
    iov = (ctypes.c_char * 16)()
    print('process_madvise', call(440, pidfd, ctypes.addressof(iov), 0, 20, 0))
    print('kcmp', call(312, os.getpid(), os.getpid(), 0, 0, 0))
    ldt = ctypes.create_string_buffer(64)
    print('modify_ldt', call(154, 0, ctypes.addressof(ldt), 64))
    print('personality query', call(135, 0xFFFFFFFF))
    print('personality set', call(135, 0x0040000))  # ADDR_NO_RANDOMIZE
    handle = ctypes.create_string_buffer(8 + 128)
    ctypes.memmove(handle, (128).to_bytes(4, 'little'), 4)
    mount_id = ctypes.c_int()
    print('name_to_handle_at', call(303, -100, ctypes.c_char_p(b'/'), ctypes.addressof(handle),
                                    ctypes.addressof(mount_id), 0))
    print('open_by_handle_at', call(304, -100, ctypes.addressof(handle), 0))
    pair = (ctypes.c_int * 2)()
    for name, family, kind in (('netlink', 16, socket.SOCK_RAW), ('packet', 17, socket.SOCK_RAW),
                               ('alg', 38, socket.SOCK_SEQPACKET), ('vsock', 40, socket.SOCK_STREAM)):
        print('socket', name, call(41, family, kind, 0))
        print('socketpair', name, call(53, family, kind, 0, ctypes.addressof(pair)))
    for name, family in (('unix', socket.AF_UNIX), ('inet', socket.AF_INET), ('inet6', socket.AF_INET6)):
        try:
            socket.socket(family, socket.SOCK_STREAM).close()
            print('socket', name, 'ok')
        except OSError as e:
            print('socket', name, e.strerror)
    a, b = socket.socketpair()
    a.sendall(b'x')
    print('socketpair unix', 'ok' if b.recv(1) == b'x' else 'broken')
""")


def test_seccomp_refuses_cross_process_handle_persona_calls_and_exotic_socket_families(runner: CodeRunner) -> None:
    if not runner.isolation.layers.get("seccomp"):
        pytest.skip("no seccomp filter on this architecture")
    res = run(runner, SYSCALL_PROBE)
    assert res.status == Verdict.OK, res.stderr[-800:]
    eperm, eafnosupport = "Operation not permitted", "Address family not supported by protocol"
    assert res.stdout.decode().splitlines() == [
        f"pidfd_getfd {eperm}",
        f"process_madvise {eperm}",
        f"kcmp {eperm}",
        f"modify_ldt {eperm}",
        "personality query ok",
        f"personality set {eperm}",
        f"name_to_handle_at {eperm}",
        f"open_by_handle_at {eperm}",
        f"socket netlink {eafnosupport}",
        f"socketpair netlink {eafnosupport}",
        f"socket packet {eafnosupport}",
        f"socketpair packet {eafnosupport}",
        f"socket alg {eafnosupport}",
        f"socketpair alg {eafnosupport}",
        f"socket vsock {eafnosupport}",
        f"socketpair vsock {eafnosupport}",
        "socket unix ok",
        "socket inet ok",
        "socket inet6 ok",
        "socketpair unix ok",
    ]
