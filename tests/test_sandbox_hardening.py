"""Sandbox hardening: the seccomp additions, the inherited-fd sweep, a runner
whose start fails, orphans in degraded mode, and the slot lock directory."""

from __future__ import annotations

import gc
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from runner_helpers import run

from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.runner import CodeRunner


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


CORE_LIMIT_PROBE = src("""
    import ctypes, mmap, os, resource
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    def core():
        return resource.getrlimit(resource.RLIMIT_CORE)
    print('start', core())
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    print('setrlimit', core())
    zero = (ctypes.c_ulong * 2)(0, 0)
    print('raw setrlimit', libc.syscall(160, 4, ctypes.addressof(zero)), core())
    # a new limit at an address whose low 32 bits are 0: the filter reads both words of it
    at = libc.mmap(0x7F0000000000, 4096, mmap.PROT_READ | mmap.PROT_WRITE,
                   mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x100000, -1, 0)  # MAP_FIXED_NOREPLACE
    assert at == 0x7F0000000000, hex(at or 0)
    ctypes.memmove(at, zero, 16)
    print('prlimit64', libc.syscall(302, 0, 4, ctypes.c_void_p(at), None), core())
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    print('other limits', resource.getrlimit(resource.RLIMIT_FSIZE))
    print(flush=True)
    os.abort()
""")


def test_a_test_dumps_no_core_of_any_kind_and_cannot_lower_its_core_limit(runner: CodeRunner) -> None:
    # RLIMIT_CORE 1: no file core (below a page), and a core_pattern pipe is skipped at exactly 1,
    # where the kernel ignores the limit otherwise and starts the host's helper as root; lowering
    # it to 0 would re-arm that, so setting it succeeds and changes nothing
    if not runner.isolation.layers.get("seccomp"):
        pytest.skip("no seccomp filter on this architecture")
    res = run(runner, CORE_LIMIT_PROBE)
    assert res.status == Verdict.RUNTIME_ERROR, res
    assert res.stdout.decode().splitlines() == [
        "start (1, 1)",
        "setrlimit (1, 1)",
        "raw setrlimit 0 (1, 1)",
        "prlimit64 0 (1, 1)",
        f"other limits ({1 << 20}, {1 << 20})",
        "",
    ], res.stderr[-800:]


def test_fds_numbered_above_65536_are_closed_before_the_program_runs(tmp_path: Path) -> None:
    """confine_test_child (the real one, in a fresh process as root) must close an fd above any
    fixed bound: RLIMIT_NOFILE may be far higher than 65536, and a limit lowered after an fd was
    opened does not close it."""
    try:
        subprocess.run([sys.executable, "-c", "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (200000, 200000))"],
                       check=True, capture_output=True)
    except subprocess.CalledProcessError:
        pytest.skip("this machine does not let RLIMIT_NOFILE go above 65536 (hard limit or nr_open), "
                    "so no fd can be numbered above 65536 here")
    result = tmp_path / "result"
    script = src(f"""
        import json, os, resource, sys
        from cpfleet.sandbox import isolation
        resource.setrlimit(resource.RLIMIT_NOFILE, (200000, 200000))
        r, w = os.pipe()
        os.dup2(w, 150000, inheritable=True)
        os.dup2(w, 70000, inheritable=True)
        out = os.open({str(result)!r}, os.O_WRONLY | os.O_CREAT, 0o600)
        null = os.open('/dev/null', os.O_RDWR)
        limits = isolation.ChildLimits(cpu_s=10, as_bytes=1 << 34, fsize_bytes=1 << 20, nproc=64, nofile=64)
        isolation.confine_test_child((null, null, null), 0, 0, [], limits, {{}}, keep_fd=out,
                                     fallback_cwd={str(tmp_path)!r})
        left = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))
        os.write(out, json.dumps(left).encode())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=str(Path(__file__).resolve().parent.parent))
    assert proc.returncode == 0, proc.stderr
    left = json.loads(result.read_text())
    assert 150000 not in left and 70000 not in left, left
    assert set(left) <= {0, 1, 2, 3, 4, 5}, left  # stdio, the kept fd, listdir's own handle


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_failed_runner_starts_release_the_slot_lock_and_cgroup_fds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injection: the zygote command is a real process that exits at once (as a broken
    interpreter would). Each failed start must give back its slot lock, cgroup fds and process,
    since a worker retries the start on every job."""
    from cpfleet.sandbox import forkserver, zygote_process
    from cpfleet.sandbox.slots import MAX_SLOTS, claim_slot, uid_base

    monkeypatch.setenv("CPFLEET_SLOT_DIR", str(tmp_path / "slots"))
    # slots of a private directory need their own uids (and so cgroups): a failed start kills
    # what its slot's cgroup holds, which must never be a test of a runner outside this test
    monkeypatch.setenv("CPFLEET_SANDBOX_UID_BASE", str(uid_base() + MAX_SLOTS))
    monkeypatch.setattr(zygote_process, "zygote_command", lambda python=None: [sys.executable, "-c", "import sys; sys.exit(3)"])
    for _ in range(2):  # warm up whatever the first attempt imports or caches
        with pytest.raises((forkserver.SandboxBroken, OSError)):
            forkserver.ForkServerRunner()
    # what earlier tests left for the collector closes its fds now, not during the count below
    gc.collect()
    before = _open_fds()
    for _ in range(5):
        with pytest.raises((forkserver.SandboxBroken, OSError)):
            forkserver.ForkServerRunner()
    gc.collect()
    assert _open_fds() - before == set()  # no failed start kept an fd open
    slot = claim_slot(str(tmp_path / "slots"))  # slot 0 is free again: no attempt kept its lock
    try:
        assert slot.index == 0
    finally:
        slot.release()


def test_slot_lock_directory_that_is_a_planted_symlink_is_refused(tmp_path: Path) -> None:
    from cpfleet.core.errors import SlotDirError
    from cpfleet.sandbox.slots import claim_slot

    target = tmp_path / "where-the-link-points"
    target.mkdir(mode=0o700)
    link = tmp_path / "slots"
    link.symlink_to(target)
    with pytest.raises(SlotDirError, match="symlink"):
        claim_slot(str(link))
    assert list(target.iterdir()) == []  # no lock file was created through the link


def test_slot_lock_file_that_is_a_planted_symlink_is_refused(tmp_path: Path) -> None:
    from cpfleet.core.errors import SlotDirError
    from cpfleet.sandbox.slots import claim_slot

    slots = tmp_path / "slots"
    slots.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    (slots / "slot-0.lock").symlink_to(victim)
    with pytest.raises(SlotDirError, match="slot-0.lock"):
        claim_slot(str(slots))
    assert not victim.exists()


def test_slot_lock_directory_writable_by_others_or_foreign_owned_is_refused(tmp_path: Path) -> None:
    from cpfleet.core.errors import SlotDirError
    from cpfleet.sandbox.slots import claim_slot

    open_dir = tmp_path / "world-writable"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(SlotDirError, match="writable by no one else"):
        claim_slot(str(open_dir))
    if os.geteuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o700)
        os.chown(foreign, 65534, 65534)
        with pytest.raises(SlotDirError, match="owned by uid 65534"):
            claim_slot(str(foreign))
    fresh = tmp_path / "fresh"
    slot = claim_slot(str(fresh))
    try:
        assert slot.index == 0
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
        assert (fresh / "slot-0.lock").is_file() and not (fresh / "slot-0.lock").is_symlink()
    finally:
        slot.release()


ORPHAN = src("""
    import os, time
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b'%d' % os.getpid())
            time.sleep(60)
        os._exit(0)
    os.close(w)
    print(os.read(r, 32).decode(), flush=True)
""")


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0, reason="needs root and setpriv")
@pytest.mark.parametrize("kind", ["forkserver", "subprocess"])
def test_degraded_mode_double_forked_orphan_does_not_outlive_its_test(kind: str) -> None:
    """No namespaces and no uid drop (capabilities dropped, as Docker's default does to some):
    the orphan is re-parented to the job init, waited for within the test's limits (it sleeps:
    a TIME_LIMIT at the wall-clock backstop), killed and reaped before the test's result."""
    script = src(f"""
        import os
        from cpfleet.sandbox.runners import make_runner
        from cpfleet.sandbox.runner import Limits
        def state(pid):
            try:
                with open('/proc/%d/stat' % pid) as f:
                    return f.read().rsplit(')', 1)[1].split()[0]
            except OSError:
                return 'gone'
        r = make_runner({kind!r})
        missing = sorted(k for k, v in r.isolation.layers.items() if not v)
        assert 'pidns' in missing and 'uid_drop' in missing, missing
        assert r.load({ORPHAN!r}) is None
        res = r.run(b'', Limits(time_s=0.5))
        orphan = int(res.stdout.decode().split()[0])
        print(res.status, state(orphan) if state(orphan) in ('gone', 'Z', 'X') else 'alive')
        r.load('print(1)')
        print(r.run(b'', Limits()).stdout.decode().strip())
        r.close()
        print('after close', state(orphan) if state(orphan) in ('gone', 'Z', 'X') else 'alive')
    """)
    proc = subprocess.run(
        ["setpriv", "--bounding-set=-all", "--inh-caps=-all", sys.executable, "-c", script],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["TIME_LIMIT gone", "1", "after close gone"], proc.stdout


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0, reason="needs root and setpriv")
def test_degraded_mode_orphan_of_an_interrupted_test_does_not_outlive_the_runner(tmp_path: Path) -> None:
    """A soft time limit interrupts run() mid-test and the worker closes the runner (as
    ``reset_runner`` does): the job init dies with the zygote, so only the slot's cgroup still
    knows the test's orphan. Closing the runner must kill it."""
    pid_file = tmp_path / "orphan.pid"
    pid_file.touch()
    pid_file.chmod(0o666)
    program = src(f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open({str(pid_file)!r}, 'w') as f:
                    f.write(str(os.getpid()))
                time.sleep(60)
            os._exit(0)
        time.sleep(30)
    """)
    script = src(f"""
        import signal, time
        from cpfleet.sandbox.runners import make_runner
        from cpfleet.sandbox.runner import Limits
        def state(pid):
            try:
                with open('/proc/%d/stat' % pid) as f:
                    s = f.read().rsplit(')', 1)[1].split()[0]
                return 'gone' if s in ('Z', 'X') else 'alive'
            except OSError:
                return 'gone'
        class SoftLimit(Exception):
            pass
        def soft_limit(*_):
            raise SoftLimit()
        r = make_runner('forkserver')
        if not r.isolation.layers.get('cgroup'):
            print('no cgroup')
            raise SystemExit(0)
        assert not r.isolation.layers.get('pidns')
        assert r.load({program!r}) is None
        signal.signal(signal.SIGALRM, soft_limit)
        signal.alarm(3)
        try:
            r.run(b'', Limits(time_s=10))
            print('test finished')
        except SoftLimit:
            print('interrupted')
        pid = int(open({str(pid_file)!r}).read())
        print('before close', state(pid))
        r.close()
        end = time.monotonic() + 60  # liveness wait for a SIGKILLed process to finish exiting
        while state(pid) == 'alive' and time.monotonic() < end:
            time.sleep(0.05)
        print('after close', state(pid))
    """)
    proc = subprocess.run(
        ["setpriv", "--bounding-set=-all", "--inh-caps=-all", sys.executable, "-c", script],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    if proc.stdout.strip() == "no cgroup":
        pytest.skip("no writable cgroup without capabilities on this machine")
    assert proc.stdout.splitlines() == ["interrupted", "before close alive", "after close gone"], proc.stdout


@pytest.mark.parametrize("planted", ["world-writable", "foreign", "symlink"])
def test_a_planted_compile_cache_or_header_folder_is_never_used(tmp_path: Path, planted: str) -> None:
    # the compile cache's artifacts are run as submissions and checkers, and the precompiled
    # header is compiled into every C++ one: a folder another local user made first in the
    # shared /tmp (or may write in) would let them choose what a submission runs
    from cpfleet.core.errors import SlotDirError
    from cpfleet.sandbox.programs import CompileCache, PchCache

    if planted == "foreign" and os.geteuid() != 0:
        pytest.skip("only root can make a folder of another uid here")
    for name in ("cache", "pch"):
        folder = tmp_path / name
        if planted == "symlink":
            target = tmp_path / f"{name}-target"
            target.mkdir(mode=0o700)
            folder.symlink_to(target)
        else:
            folder.mkdir(mode=0o755)
            if planted == "world-writable":
                folder.chmod(0o777)
            else:
                os.chown(folder, 65534, 65534)
    with pytest.raises(SlotDirError, match="compile cache directory"):
        CompileCache(str(tmp_path / "cache"))
    pch = PchCache(str(tmp_path / "pch"))
    with pytest.raises(SlotDirError, match="precompiled header directory"):
        pch.ensure_root()
    assert pch.include_dir("g++", ["-O2"], "13.2") is None  # compiles go on without a header
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []  # nothing written into either
    fresh = CompileCache(str(tmp_path / "fresh"))
    assert stat.S_IMODE(os.stat(fresh.root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(PchCache(str(tmp_path / "fresh-pch")).ensure_root()).st_mode) == 0o755


def test_the_default_cache_folders_left_writable_by_others_are_replaced_and_a_named_one_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an earlier version under umask 002 left the default compile cache folder group-writable:
    # refusing it would make every compiled job INTERNAL after an upgrade; it is this worker's
    # own disposable folder, so it is replaced (nothing in it trusted). A folder the operator
    # named may hold anything: refused, never removed.
    import tempfile

    from cpfleet.core.errors import SlotDirError
    from cpfleet.sandbox.programs import CompileCache, PchCache, default_cache_dir, default_pch_dir

    monkeypatch.delenv("CPFLEET_COMPILE_CACHE_DIR", raising=False)
    monkeypatch.delenv("CPFLEET_PCH_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for folder in (Path(default_cache_dir()), Path(default_pch_dir())):
        assert folder.parent == tmp_path
        (folder / "artifacts").mkdir(parents=True)
        (folder / "artifacts" / "planted").write_text("a binary someone chose")
        folder.chmod(0o775)
    cache = CompileCache()
    assert stat.S_IMODE(os.stat(default_cache_dir()).st_mode) == 0o700
    assert not (Path(cache.root) / "planted").exists()
    assert PchCache().ensure_root() == default_pch_dir()
    assert stat.S_IMODE(os.stat(default_pch_dir()).st_mode) == 0o755
    assert not (Path(default_pch_dir()) / "artifacts").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([Path(default_cache_dir()).name,
                                                                  Path(default_pch_dir()).name])

    named = tmp_path / "operators-cache"
    named.mkdir(mode=0o775)
    named.chmod(0o775)
    (named / "theirs").write_text("kept")
    monkeypatch.setenv("CPFLEET_COMPILE_CACHE_DIR", str(named))
    with pytest.raises(SlotDirError, match="writable by no one else"):
        CompileCache()
    assert (named / "theirs").read_text() == "kept"


def test_the_self_test_markers_leave_the_compile_cache_folder_usable_under_a_group_writable_umask(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a worker's start self-tests its languages and remembers a pass in the compile cache folder;
    # under umask 002 (many desktops' default) a folder made on the way there was group-writable,
    # so the cache refused its own folder and every compiled job and checker was INTERNAL after
    from cpfleet.sandbox import selftest
    from cpfleet.sandbox.programs import CompileCache, default_cache_dir

    monkeypatch.setenv("CPFLEET_COMPILE_CACHE_DIR", str(tmp_path / "cache"))
    old = os.umask(0o002)
    try:
        assert selftest.check_cached("python3").ok
        top = default_cache_dir()
        assert os.listdir(os.path.join(top, "selftest")) != []  # the pass is remembered
        cache = CompileCache()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(top).st_mode) == 0o700
    assert os.path.isdir(cache.root)


REFUSED_CACHE_JUDGE = """
import json, sys
from cpfleet.core.problem import Problem
from cpfleet.sandbox.env import judge_locally
from cpfleet.sandbox.forkserver import ForkServerRunner

problem = Problem.from_dict({"id": "add", "hidden_tests": [{"input": "1 2\\n", "output": "3\\n"}]})
code = "```cpp\\n#include <cstdio>\\nint main(){int a,b;scanf(\\"%d %d\\",&a,&b);printf(\\"%d\\\\n\\",a+b);}\\n```"
runner = ForkServerRunner()
try:
    r = judge_locally(problem, code, runner)
finally:
    runner.close()
print(json.dumps([r.infra_error, r.reward, r.infra_message]))
"""


def test_a_refused_compile_cache_folder_is_an_infrastructure_result_not_an_exception(tmp_path: Path) -> None:
    # a planted (world-writable) compile cache folder is refused: judge_locally must answer that
    # as the sandbox's failure (infra_error, reward None), as it promises for anything the
    # sandbox does, not raise SlotDirError out of the judging loop into its caller
    from cpfleet.sandbox import languages

    if languages.missing_tools("cpp"):
        pytest.skip("no C++ toolchain here")
    planted = tmp_path / "cache"
    planted.mkdir()
    planted.chmod(0o777)
    proc = subprocess.run([sys.executable, "-c", REFUSED_CACHE_JUDGE], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CPFLEET_COMPILE_CACHE_DIR": str(planted)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    infra_error, reward, message = json.loads(proc.stdout.splitlines()[-1])
    assert (infra_error, reward) == (True, None), message
    assert "compile cache directory" in message and str(planted) in message
