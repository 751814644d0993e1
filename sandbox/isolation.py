"""The isolation layers, applied in two places.

Once per zygote (``isolate_zygote``): an empty network namespace (no route anywhere, loopback
Redis included) and a private mount namespace whose root is a read-only tmpfs holding only
the system and Python directories, bound read-only. Host files (problem files, UNIX sockets
such as Redis's or docker.sock, the project's tests) are not on any path a child can open.

Once per job (sandbox/zygote.py): a pid namespace (emptied after every test), a mount + IPC
namespace, a private /proc, the test directory (``TestBox``: one tmpfs serving as cwd, /tmp,
/dev/shm and /run, replaced by a fresh one before any test that would see a trace of an
earlier test in it), and on the job init no_new_privs and the seccomp filter, which every
test child inherits (the filter also refuses creating System V IPC objects and POSIX message
queues, so the job's IPC namespace stays empty from test to test).

Once per test child (``confine_test_child``): own session, the slot's cgroups, only fds
0/1/2, rlimits, and the slot's unprivileged uid/gid with no supplementary groups (a child
forked ahead of its test does the session and fd cleanup first, the rest once its test
arrives).

Without a mount namespace a job's program files and each test's directory are host directories,
removed after use by ``remove_tree`` (however deep a test nested them, following no link).

Every layer is tried, recorded, and reported; a refused layer is a loud warning, not a crash.
"""

from __future__ import annotations

import _socket as socket  # the C module: `socket` would import enum into every fork
import marshal
import os
import resource
import sys

from cpfleet.sandbox import cgroups, linux

PCH = "/pch"  # precompiled headers, bound read-only from the host (sandbox/programs.py)
PROG = "/prog"  # a compiled program's files (read-only tmpfs per job, program mode)
BOX = "/box"  # the test directory (cwd, /tmp, /dev/shm, /run), a tmpfs kept fresh per test (TestBox)
# host paths bound read-only into the sandbox root (symlinks are recreated as symlinks)
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
# RLIMIT_CORE of everything a test runs: 1 byte, not 0. A file core is never written below a
# page, and a core_pattern pipe (apport, systemd-coredump), for which the kernel ignores the
# limit and starts the helper as root outside the test's cgroup, is skipped at exactly 1. The
# seccomp filter keeps a program from lowering it to 0 (sandbox/seccomp.py).
NO_CORE = (1, 1)
# paths the sandbox's root makes itself: a host folder under one of them cannot be shown to
# programs at its own path (/tmp is where the root is built, then each test's own folder)
SANDBOX_MADE = ("/tmp", "/var/tmp", "/run", "/dev", "/proc", "/old-root", BOX, PROG, PCH)


def within(path: str, folders: tuple[str, ...]) -> bool:
    """Whether ``path`` (normalised) is one of ``folders`` or lies under one."""
    return any(path == f or path.startswith(f + "/") for f in folders)


def hidden_from_sandbox(path: str) -> bool:
    """Whether a host folder cannot be bound at its own path into the sandbox's root: one under
    a folder the root makes itself, or one holding such a folder (``/var``, which holds
    ``/var/tmp``): bound read-only, it leaves the root no place to make that folder, and the
    whole minimal root fails, for every language. ``/`` itself is never bound (it is the root)."""
    real = os.path.normpath(path)
    return within(real, SANDBOX_MADE) or (real != "/" and any(within(p, (real,)) for p in SANDBOX_MADE))


O_PATH = getattr(os, "O_PATH", 0o10000000)  # PyPy 3.9's os lacks the name (the value is Linux's)
# PyPy 3.9's resource lacks these two names (the values are Linux's)
RLIMIT_NICE = getattr(resource, "RLIMIT_NICE", 13)
RLIMIT_RTPRIO = getattr(resource, "RLIMIT_RTPRIO", 14)


class ZygoteSetup:
    """Which layers the zygote got, with a note for each one the kernel refused."""

    def __init__(self) -> None:
        self.layers: dict[str, bool] = {}
        self.notes: list[str] = []


def isolate_zygote(python_dirs: list[str], binds: dict[str, str] | None = None) -> ZygoteSetup:
    """Enter an empty network namespace and a private, minimal, read-only root. ``binds``:
    {path in the sandbox: host directory} bound read-only too (the precompiled headers)."""
    setup = ZygoteSetup()
    try:
        linux.unshare(linux.CLONE_NEWNET)
        setup.layers["netns"] = True
    except OSError as e:
        setup.layers["netns"] = False
        setup.notes.append(f"network namespace refused ({e}): children HAVE NETWORK ACCESS")
    try:
        linux.unshare(linux.CLONE_NEWNS)
        linux.mount("none", "/", None, linux.MS_REC | linux.MS_PRIVATE)
        setup.layers["mountns"] = True
    except OSError as e:
        setup.layers["mountns"] = False
        setup.layers["hidden_fs"] = False
        setup.notes.append(f"mount namespace refused ({e}): no private /tmp, host files visible")
        return setup
    try:
        _pivot_to_minimal_root(python_dirs, binds or {})
        setup.layers["hidden_fs"] = True
    except OSError as e:
        setup.layers["hidden_fs"] = False
        setup.notes.append(f"minimal root failed ({e}): host files readable by the sandbox uid stay visible")
        os.makedirs(BOX, exist_ok=True)
    return setup


def _pivot_to_minimal_root(python_dirs: list[str], binds: dict[str, str]) -> None:
    new_root = "/tmp"  # mounted over in this private namespace only; the host's /tmp is untouched
    # the binds' host directories are opened before /tmp is covered (they may live under it)
    bind_fds = {inside: os.open(host, O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for inside, host in binds.items()
                if os.path.isdir(host)}
    linux.mount("tmpfs", new_root, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "size=1m,mode=0755")
    for path in SYSTEM_PATHS:
        _bind_into(new_root, path)
    for path in python_dirs:
        _bind_into(new_root, path)
    for inside, fd in bind_fds.items():
        target = new_root + inside
        os.makedirs(target, mode=0o755, exist_ok=True)
        linux.mount(f"/proc/self/fd/{fd}", target, None, linux.MS_BIND)
        linux.mount("none", target, None,
                    linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)
        os.close(fd)
    dev = new_root + "/dev"
    os.makedirs(dev, exist_ok=True)
    for name in DEVICES:
        target = f"{dev}/{name}"
        open(target, "w").close()
        linux.mount(f"/dev/{name}", target, None, linux.MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"), ("shm", BOX)):
        os.symlink(target, f"{dev}/{name}")
    for d in ("proc", BOX.lstrip("/"), PROG.lstrip("/"), "old-root", "var"):
        os.makedirs(f"{new_root}/{d}", exist_ok=True)
    # the test directory serves as cwd, /tmp, /var/tmp, /dev/shm and /run: a single mount
    # and no mkdir/chown when it is replaced
    for name in ("tmp", "run", "var/tmp"):
        os.symlink(BOX, f"{new_root}/{name}")
    linux.pivot_root(new_root, new_root + "/old-root")
    os.chdir("/")
    linux.umount2("/old-root", linux.MNT_DETACH)
    os.rmdir("/old-root")
    linux.mount("none", "/", None, linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)


def _bind_into(new_root: str, path: str) -> None:
    if not os.path.lexists(path) or os.path.lexists(new_root + path):
        return
    parent = os.path.dirname(new_root + path)
    os.makedirs(parent, mode=0o755, exist_ok=True)
    if os.path.islink(path):
        os.symlink(os.readlink(path), new_root + path)
        return
    os.makedirs(new_root + path, exist_ok=True)
    linux.mount(path, new_root + path, None, linux.MS_BIND | linux.MS_REC)
    linux.mount("none", new_root + path, None,
                linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)


def drop_priority_allowances() -> None:
    """No test may raise its scheduling priority: RLIMIT_RTPRIO and RLIMIT_NICE at 0 on the
    zygote, which every job and test inherits. A worker started with an allowance (``ulimit
    -r``, a container's ``--ulimit rtprio``, limits.conf) would otherwise pass it on, and an
    unprivileged program could take SCHED_FIFO and spin, starving the worker, the job init that
    polices its time and every other test on its CPU (the kernel's real-time throttling leaves
    them 5%). Once per zygote, no cost per test; nothing of the sandbox's own raises its
    priority."""
    for limit in (RLIMIT_RTPRIO, RLIMIT_NICE):
        resource.setrlimit(limit, (0, 0))


def python_dirs() -> list[str]:
    """Directories the sandboxed interpreter needs to read (stdlib, and the venv for exec mode)."""
    dirs = []
    for p in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))):
        real = os.path.realpath(p)
        if not within(real, SYSTEM_PATHS) and real not in dirs:
            dirs.append(real)
    return dirs


class TestBox:
    """The test directory of one job, kept fresh for every test at the price of a stat.

    Mounting a tmpfs (and making a mount + IPC namespace) per test child cost ~0.2 ms of
    kernel time per test, about a tenth of all of it. Each job mounts one instead and,
    after each test, the init compares it with the state it had right after mounting
    (``TestBoxState``): entries, inode and block use, mode, owner, times and extended
    attributes. Anything a test can leave there changes one of them (creating anything uses
    an inode; chmod, utimes and xattrs change the root's attributes), and then the tmpfs is
    unmounted at once and a new one mounted before the next test. Every process of a test is
    dead by then, so nothing holds the old one. noatime: reading the directory (Python's import system lists
    cwd) is not a change.

    This half mounts (in the job process, which may); the init's half only looks.
    """

    def __init__(self, uid: int, gid: int, owned: bool) -> None:
        self.owner = f",uid={uid},gid={gid}" if owned else ""
        self.mounted = False

    def mount_fresh(self, size_bytes: int) -> tuple[object, ...]:
        """Make BOX a new, empty tmpfs of ``size_bytes``; return its pristine state."""
        if self.mounted:
            self.mounted = False
            linux.umount2(BOX, linux.MNT_DETACH)
        linux.mount("tmpfs", BOX, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOATIME,
                    f"size={size_bytes},nr_inodes=4096,mode=0700{self.owner}")  # FSIZE bounds one file, size= all
        self.mounted = True
        return (size_bytes, *box_state())


class TestBoxState:
    """The init's half of ``TestBox``: compares, and asks the job process for a new mount."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.clean: tuple[object, ...] | None = None
        # found pristine after the last test ended (``settle``): nothing has run since
        self.settled = False

    def ensure_fresh(self, size_bytes: int) -> None:
        """Make BOX an empty tmpfs of ``size_bytes`` that no earlier test has touched."""
        settled, self.settled = self.settled, False
        if self.clean is not None and self.clean[0] == size_bytes and (settled or self.clean[1:] == box_state()):
            return
        self._mount(size_bytes)

    def settle(self) -> None:
        """Once a test has ended (every process of it dead, the files it left collected): a
        directory it used is replaced at once, before the test's end is reported, not before
        the next test. What it wrote there (up to its file size limit, 64 MB by default) is
        memory of the slot's cgroup, and the next run in the slot is often another job's: this
        test's checker, whose memory limit it would eat into (a checker the cgroup then killed
        made the program's answer an INTERNAL). The comparison moves here from the next test's
        start, and the replacement is the one the next test would have made: a test costs what
        it did."""
        if self.clean is None:
            return
        try:
            untouched = self.clean[1:] == box_state()
        except OSError:  # unreadable: replaced all the same
            untouched = False
        if untouched:
            self.settled = True
            return
        size = self.clean[0]
        if not isinstance(size, int):
            return
        try:
            self._mount(size)
        except OSError:
            return  # the next test's ensure_fresh tries again, and reports the failure
        self.settled = True

    def _mount(self, size_bytes: int) -> None:
        self.clean = None
        try:
            self.sock.send(marshal.dumps(size_bytes))
            data = self.sock.recv(1 << 16)
        except OSError as e:
            data = marshal.dumps(str(e))
        reply = marshal.loads(data) if data else "the job process is gone"
        if isinstance(reply, str):
            raise OSError(f"mounting a fresh test directory failed: {reply}")
        self.clean = reply


def box_state() -> tuple[object, ...]:
    st = os.stat(BOX)
    fs = os.statvfs(BOX)
    return (st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_nlink, st.st_size, st.st_atime_ns,
            st.st_mtime_ns, st.st_ctime_ns, fs.f_bfree, fs.f_ffree, _xattr_names(BOX))


def _xattr_names(path: str) -> object:
    """The names of ``path``'s extended attributes, or, when the kernel cannot list them (a
    test may set more than the 64 KiB a listing holds: E2BIG), a value equal to no state, so
    the box counts as touched and is replaced: the test's own doing, never the judge's error."""
    try:
        return tuple(os.listxattr(path))
    except OSError:
        return object()


class ChildLimits:
    """Resource limits of one test child (built by the runner from cpfleet.sandbox.runner.Limits).
    A plain class: the zygote avoids importing dataclasses/typing to stay small to fork."""

    __slots__ = ("cpu_s", "as_bytes", "fsize_bytes", "nproc", "nofile")

    def __init__(self, cpu_s: int, as_bytes: int, fsize_bytes: int, nproc: int, nofile: int) -> None:
        self.cpu_s = cpu_s
        self.as_bytes = as_bytes
        self.fsize_bytes = fsize_bytes
        self.nproc = nproc
        self.nofile = nofile


def close_inherited_fds(*keep_fds: int) -> None:
    """Close every fd above 2 but ``keep_fds``, however high: close_range(2) up to ~0, so an fd
    numbered above any fixed bound (RLIMIT_NOFILE may be far above 65536, and an fd may sit above
    a limit lowered after it was opened) cannot reach the program. Without close_range (kernels
    before 5.9) the bound is the highest fd /proc lists, or the hard RLIMIT_NOFILE."""
    first = 3
    for keep in sorted(k for k in keep_fds if k >= 3):
        _close_range(first, keep - 1)
        first = keep + 1
    _close_range(first, linux.MAX_FD)


def _close_range(first: int, last: int) -> None:
    if first > last:
        return
    try:
        linux.close_range(first, last)
        return
    except OSError:
        pass
    bound = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    try:
        bound = max(bound, 1 + max(int(fd) for fd in os.listdir("/proc/self/fd")))
    except (OSError, ValueError):
        pass
    os.closerange(first, min(last, bound) + 1)


def confine_test_child(
    fds: tuple[int, int, int],
    uid: int,
    gid: int,
    cgroup_fds: list[int],
    limits: ChildLimits,
    layers: dict[str, bool],
    keep_fd: int,
    fallback_cwd: str | None = None,
) -> None:
    """Runs in the freshly forked test child, as root, before any untrusted code.

    ``keep_fd`` (the status pipe to the job init) survives the fd cleanup. Raises OSError if
    a layer the zygote reported as working fails now: the runner turns that into an INTERNAL
    verdict rather than run the program unconfined. The two halves may run apart: a child
    forked ahead of its test (sandbox/zygote.py) does the first while it waits.
    """
    detach_test_child(layers, keep_fd, *fds, *cgroup_fds)
    confine_to_test(fds, uid, gid, cgroup_fds, limits, layers, keep_fd, fallback_cwd)


def detach_test_child(layers: dict[str, bool], *keep_fds: int) -> None:
    """The half that needs nothing of the test: a session of its own, death with the init
    where no pid namespace ensures it, and no fd of the init's but ``keep_fds`` (which must
    include the slot's cgroup fds, joined later)."""
    os.setsid()
    if not layers.get("pidns"):  # in a pid namespace, the init's death kills us anyway
        linux.prctl(linux.PR_SET_PDEATHSIG, 9)
    close_inherited_fds(*keep_fds)


def confine_to_test(
    fds: tuple[int, int, int],
    uid: int,
    gid: int,
    cgroup_fds: list[int],
    limits: ChildLimits,
    layers: dict[str, bool],
    keep_fd: int,
    fallback_cwd: str | None = None,
) -> None:
    """The half bound to the test: the slot's cgroups (joined only now, so a child waiting
    for its test is never in the slot's memory and pids budget of another job's test), the
    test's fds as 0/1/2 and nothing else but ``keep_fd``, its rlimits, the slot's uid, its
    directory."""
    if layers.get("cgroup"):
        cgroups.join(cgroup_fds)
    if layers.get("ipcns") and not layers.get("seccomp"):
        # nothing refuses creating IPC objects: an IPC namespace per test keeps them from the next
        linux.unshare(linux.CLONE_NEWIPC)
    for target, fd in enumerate(fds):
        os.dup2(fd, target, inheritable=True)
    close_inherited_fds(keep_fd)
    # RLIMIT_CORE is the job init's NO_CORE, set before its seccomp filter (which keeps it)
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.as_bytes, limits.as_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_bytes, limits.fsize_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.nproc, limits.nproc))
    # The stack, as isolate (IOI, CMS) has it: no stack rlimit of its own (soft = the inherited
    # hard limit, usually unlimited), so the main thread's stack may grow as far as the memory
    # limit allows (RLIMIT_AS and the cgroup count it), as Kattis, DOMjudge and Codeforces give
    # it; a flood fill 500,000 frames deep needs ~100-200 MB. Threads are another matter: glibc
    # sizes every default thread stack from the soft limit read at start, and each counts
    # against RLIMIT_AS, so a soft limit of the memory limit would refuse a program its second
    # thread. With no limit glibc takes its architecture default (2 MB on x86-64) instead. The
    # zygote runs with the same limit since its exec (zygote_process.zygote_command): a forked
    # Python test's stack is the zygote's, laid out at that exec.
    _, stack_hard = resource.getrlimit(resource.RLIMIT_STACK)
    resource.setrlimit(resource.RLIMIT_STACK, (stack_hard, stack_hard))
    if layers.get("uid_drop"):
        # The test's own stdio (the runner's pipes, created by root with mode 0600, and its
        # memfd) becomes the slot uid's, so a program may reopen it by name (``/dev/stdout``,
        # ``/proc/self/fd/1``, ``freopen("/dev/stdout", "w", stdout)``) as every judge lets it,
        # instead of getting EACCES and losing the answer it writes there. They are new objects
        # of this test alone (sandbox/jobs.py TestStdio). Best effort: a worker without
        # CAP_CHOWN still runs the test (reopening by name then fails as before).
        for target in range(3):
            try:
                os.fchown(target, uid, gid)
            except OSError:
                pass
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    os.chdir(fallback_cwd or BOX)


def remove_tree(path: str) -> None:
    """Remove a directory a program's tests wrote in, and everything in it, however deep: one
    directory open at a time, going down by name and back up through "..", with the names on
    the way kept in a list (``shutil.rmtree`` and ``os.walk`` recurse once per level, and a
    program's 3000 nested directories raised RecursionError in the process cleaning up after it:
    the job init, or the worker stopping its zygote). A test that ran as our own uid (no uid
    drop: we are not root) may have taken our access to a directory away (chmod 0): it is given
    back before the directory is opened, so nothing stays behind. Links are removed, never
    followed. Errors are ignored (a path already gone, a file still being created), as
    ``shutil.rmtree(ignore_errors=True)`` does."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    allow = os.geteuid() != 0
    try:
        if allow and not os.path.islink(path):
            os.chmod(path, 0o700)
        fd = os.open(path, flags)
    except OSError:
        return
    names: list[str] = []  # from ``path`` down to the directory ``fd`` is
    pending = [_remove_files(fd)]  # per level: the subdirectories still to remove
    while True:
        if pending[-1]:
            name = pending[-1].pop()
            try:
                if allow:
                    os.chmod(name, 0o700, dir_fd=fd)  # a directory (scandir said so, without following)
                below = os.open(name, flags, dir_fd=fd)
            except OSError:
                continue
            os.close(fd)
            fd = below
            names.append(name)
            pending.append(_remove_files(fd))
            continue
        if not names:
            os.close(fd)
            try:
                os.rmdir(path)
            except OSError:
                pass
            return
        try:
            above = os.open("..", flags, dir_fd=fd)
        except OSError:
            os.close(fd)
            return
        os.close(fd)
        fd = above
        pending.pop()
        try:
            os.rmdir(names.pop(), dir_fd=fd)
        except OSError:
            pass


def _remove_files(fd: int) -> list[str]:
    """Unlink every entry of the directory ``fd`` but its subdirectories, whose names it returns."""
    subdirs: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.name)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
                except OSError:
                    pass
    except OSError:
        pass
    return subdirs
