"""One job's processes, below the zygote (sandbox/zygote.py): the job process (new pid, mount
and IPC namespaces; places a program's files, mounts a fresh test directory whenever the init
asks) and the job init, ``JobInit``: pid 1 of the job's pid namespace, which compiles the
program once, installs the seccomp filter, and per test forks a child (ahead of the test where
it can), confines it and runs the program, then reports the test's end. Watching and killing the
running test is sandbox/police.py's.

834 lines: the job init is one process's life (compile, filter, per-test fork, report), and its
steps share that process's state; watching and killing already moved out.
"""

from __future__ import annotations

import _signal as signal  # the C module: `signal` would import enum into every fork
import _socket as socket  # the C module: `socket` would import array, selectors and enum
import _warnings  # the C module the compiler warns through: `warnings` is not loaded here
import gc
import marshal
import os
import resource
import time

from cpfleet.sandbox import callharness, child, isolation, linux, police, syntax_errors
from cpfleet.sandbox.channel import memfd_holding, read_all, recv, send
from cpfleet.sandbox.isolation import ChildLimits

TYPE_CHECKING = False  # typing is not imported at run time (see sandbox/zygote.py)
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from cpfleet.sandbox.zygote import Zygote

CONFINE_FAILED = 125
# {stack} in a program's argv: its main thread's stack, the memory limit but at most 1 GB, the
# largest -Xss a JVM accepts (a larger one stops the JVM before the program runs)
MAX_MAIN_STACK_MB = 1024
GOT_TEST = "+"  # a child forked ahead writes it on its status pipe when its test reaches it
# What compiling a program may add to the init's data segment (RLIMIT_DATA, for the compile
# only): the init is in the worker's cgroup, not a test's. PyPy's compiler folds `"a" * 10**9`
# into a 1 GB constant (CPython stops at 4096 items), and compiling a 4 MB constant tuple takes
# ~1.5-2.2 GB under either interpreter. Past the budget PyPy leaves the product unfolded (it is
# then computed, under the test's own limits, when the program runs) and a compile that needs
# more is a MemoryError, the program's COMPILE_ERROR.
COMPILE_DATA_BUDGET = 512 << 20
# CPU seconds a compile may take, here and for compiled languages (sandbox/programs.py
# COMPILE_LIMITS). Every source is compiled in a child of the init under this RLIMIT_CPU
# (``_compile_in_child``), never by the init itself, which has no CPU limit: a compile's time is
# not bounded by the source's size. CPython's compile of one f-string of n fields takes time
# quadratic in n, its check of a call's keyword names too (43k names, 255 kB: 26 s), and it
# compiles a ``finally`` body once per way out of its ``try``, so each nesting level doubles the
# work of what it holds: a 58 kB call of 10k keywords eight ``finally`` blocks deep compiled for
# minutes, past the runner's wait for the init's answer (LOAD_ANSWER_S), an INTERNAL
# the program provoked, with the worker's CPU burnt all along.
COMPILE_CPU_S = 15
# How long a runner waits for a job init's answer to a program, in the CPython and the PyPy fork
# server alike: its compile may use COMPILE_CPU_S of CPU (a quadratic f-string does), and on a
# loaded host that CPU comes at a fraction of a core. A wait of 4 x COMPILE_CPU_S (the PyPy fork
# server's 60 s) made a compile stopped at its own limit an INTERNAL wherever it got less than a
# quarter of one; this waits for it down to an eighth.
LOAD_ANSWER_S = 8.0 * COMPILE_CPU_S


def gc_freeze() -> None:
    """CPython's gc.freeze (moves every tracked object to a generation no collection walks);
    PyPy has none: its generational GC is a different design (see docs/pypy.md)."""
    freeze = getattr(gc, "freeze", None)
    if freeze is not None:
        freeze()


def _limit_data(budget: int) -> tuple[int, int] | None:
    """Lower RLIMIT_DATA's soft limit to the data segment now plus ``budget``: the limit it
    had, to restore, or None when the segment's size is unknown (/proc unreadable) and
    nothing was changed."""
    used = -1
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmData:"):
                    used = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        return None
    if used < 0:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    want = used + budget
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft != resource.RLIM_INFINITY and soft <= want:
        return None  # already as low
    resource.setrlimit(resource.RLIMIT_DATA, (want, hard))
    return soft, hard


def _safe_relpath(name: str) -> str:
    """A relative path with no '..', no empty or absolute part: the files of a program come
    from datasets (checkers, interactors) and are written here by root, unfiltered."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\0" in name:
        raise ValueError(f"bad file name {name!r}")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"bad file name {name!r}")
    return name


def write_files(root: str, files: dict[str, Any], owner: tuple[int, int] | None = None) -> None:
    """Write {relative path: (bytes, mode)} under ``root`` (as root; modes are kept as given,
    without write permission for anyone but the owner). A name ending in "/" is a directory
    the program may write in (owned by ``owner``, the test's uid/gid)."""
    for name, (data, mode) in files.items():
        if name.endswith("/"):
            path = _make_dirs(root, _safe_relpath(name.rstrip("/")), 0o700)
            if owner is not None:
                os.chown(path, owner[0], owner[1])
            continue
        path = root + "/" + _safe_relpath(name)
        parent = os.path.dirname(path)
        if parent != root:
            _make_dirs(root, parent[len(root) + 1:], 0o755)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, int(mode) & 0o755)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)


def _make_dirs(root: str, relpath: str, mode: int) -> str:
    """``os.makedirs(root/relpath, mode, exist_ok=True)`` one component at a time: makedirs
    recurses once per component, and a compiled program names its own files (a Java class in a
    package 1200 names deep) past the recursion limit, which ended the zygote's job process
    while it placed them (INTERNAL for a program's doing, and a zygote restart). As makedirs,
    ``mode`` is the last directory's; the ones above get the default."""
    path = root
    parts = relpath.split("/")
    for i, part in enumerate(parts):
        path += "/" + part
        try:
            os.mkdir(path, mode if i == len(parts) - 1 else 0o777)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
    return path


PLACED_ROOM_STEP = 16 << 20


def _room_for(files: dict[str, Any] | None) -> int:
    """Test-directory room for the files placed in it, on top of what the test may write
    (``fsize_bytes``): a checker's files hold the program's output, up to the 64 MiB stdout
    cap, which must never fail to fit (an INTERNAL the program could provoke). Rounded up in
    steps, so checkers of outputs of similar size reuse one mount."""
    if not files:
        return 0
    total = sum(len(data) + 4096 for data, _ in files.values())
    return -(-total // PLACED_ROOM_STEP) * PLACED_ROOM_STEP


def place_program(files: dict[str, Any], mounted: bool, scratch: str | None = None) -> str:
    """Put a program's files where its tests can read (not write) them: a read-only tmpfs at
    isolation.PROG in the job's mount namespace, or a fresh host directory in ``scratch`` without one."""
    total = sum(len(data) + 4096 for data, _ in files.values())
    # every directory on the files' paths is an inode too: a Java class in a package 100 names
    # deep is one file in 100 directories (its compiled output, named by the program)
    dirs = {name[:i] for name in files for i, c in enumerate(name) if c == "/"}
    if mounted and os.path.isdir(isolation.PROG):
        linux.mount("tmpfs", isolation.PROG, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV,
                    f"size={total + (1 << 20)},nr_inodes={len(files) * 2 + len(dirs) + 64},mode=0755")
        write_files(isolation.PROG, files)
        linux.mount("none", isolation.PROG, None,
                    linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)
        return isolation.PROG
    import tempfile

    root = tempfile.mkdtemp(prefix="cpfleet-prog-", dir=scratch)
    os.chmod(root, 0o755)
    write_files(root, files)
    return root


def serve_box(sock: socket.socket, box: isolation.TestBox) -> None:
    """Mount a fresh test directory whenever the init asks (it cannot: its seccomp filter
    refuses mounts, which is what lets every test child inherit the filter instead of
    installing it), and make the source's directory read-only once the init placed the source
    (``{"op": "seal"}``: ``JobInit._place_script``). Runs outside the job's pid namespace, out
    of reach of its processes."""
    while True:
        msg, _ = recv(sock)
        if msg is None:
            return
        try:
            if isinstance(msg, dict):
                if msg.get("op") != "seal":
                    raise ValueError(f"unknown request {msg!r}")
                linux.mount("none", isolation.PROG, None,
                            linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)
                send(sock, None)
            else:
                send(sock, box.mount_fresh(msg))
        except (OSError, ValueError) as e:
            send(sock, str(e))


_NEW_SCRIPT = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW

# The most a fork-mode job's source may take in its directory (a bound, not an allocation: a
# tmpfs holds only what is written in it)
SCRIPT_ROOM = 1 << 30


def place_script_dir(mounted: bool, scratch: str | None = None) -> str:
    """The directory a fork-mode job's source is placed in (``JobInit._place_script``), made by
    the job process before the init (which cannot mount) and before the source may exist (a
    spare job): an empty tmpfs at isolation.PROG in the job's mount namespace, writable by the
    init's uid alone, or a fresh host directory in ``scratch`` without one (removed with the job)."""
    if mounted and os.path.isdir(isolation.PROG):
        linux.mount("tmpfs", isolation.PROG, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV,
                    f"size={SCRIPT_ROOM},nr_inodes=16,mode=0755")
        return isolation.PROG
    import tempfile

    root = tempfile.mkdtemp(prefix="cpfleet-src-", dir=scratch)
    os.chmod(root, 0o755)
    return root


class JobInit:
    """pid 1 of one job's pid namespace: compiles once, forks and polices one child per test.

    Each test's fds 0/1/2 (a memfd holding its input, and two pipes the runner drains) arrive
    with its "run" message and are closed when it ends; the runner treats our "done" message
    (sent after every process of the test is dead) as the end of its output.
    """

    def __init__(self, z: Zygote, msg: dict[str, Any], fds: list[int], box: socket.socket | None,
                 program: dict[str, Any] | None = None, program_error: str = "", script_dir: str = "",
                 script_error: str = "") -> None:
        self.z = z
        self.mode: str = msg["mode"]
        self.fn_name: str | None = msg.get("fn_name") or None  # a function-call problem's entry point
        self.call_globals: dict[str, Any] | None = None
        self.sock = socket.socket(fileno=fds[0])
        self.program = program  # program mode: {"dir", "argv", "env"}
        self.program_error = program_error
        # A spare job is started before its program exists: the runner's "load" message brings
        # the source (see _await_source); its test directory size is known ahead (box_bytes).
        self.spare = bool(msg.get("spare")) and self.mode != "program"
        self.box_bytes = int(msg.get("box_bytes") or 0)
        self.source = b"" if self.mode == "program" or self.spare else read_all(fds[1])
        if len(fds) > 1:
            os.close(fds[1])
        self.code: Any = None
        self.box = isolation.TestBoxState(box) if box is not None else None
        # where the source is placed for ``__main__.__file__`` (``_place_script``), made by the
        # job process (``place_script_dir``): known before any test child is forked, so one
        # forked ahead of the program names it too
        self.script_dir = script_dir
        self.script_error = script_error  # the job process could not make it (an infrastructure error)
        if self.mode == "fork" and self.script_dir:
            child.SCRIPT_PATH = self.script_dir + "/" + child.SCRIPT_NAME
        self.last_pid_fd = -1
        self.subreaper = False
        self.ns_init = False  # pid 1 of the job's own pid namespace (set in run)
        self.own_proc = False  # /proc shows that namespace alone (set in run)
        # a test child forked ahead and waiting for its test: (pid, socket, status pipe, forked
        # before the program existed: it is sent the program with its first test)
        self.ahead: tuple[int, Any, int, bool] | None = None

    def run(self) -> None:
        try:
            linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
            self.ns_init = os.getpid() == 1
            if not self.ns_init:
                # no pid namespace: become the subreaper of every process a test starts, so
                # orphans (double-forked, setsid'd) are re-parented here, where they can be
                # found, killed and reaped after the test, and their CPU time counted
                try:
                    linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)
                    self.subreaper = True
                except OSError as e:
                    self.z.notes.append(f"child subreaper refused ({e}): orphans may outlive their test")
            if self.box is not None and self.z.layers.get("pidns"):
                try:
                    linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
                except OSError as e:
                    self.z.notes.append(f"private /proc failed: {e}")
                else:
                    self.own_proc = self.ns_init
                    self._open_pid_counter()
            self._restrict_self()
            if self.spare and not self._await_source():
                return
            error = self._compile()
            if self.ahead is not None and (error is not None or self.fn_name is not None):
                self._drop_ahead()  # no test follows, or one the child was not prepared for
            send(self.sock, {"ok": error is None, "error": error or "", "layers": self.z.layers,
                             "notes": self.z.notes, "infra": bool(self.program_error)})
            if error is None:
                self._serve()
        finally:
            os._exit(0)

    def _open_pid_counter(self) -> None:
        """ns_last_pid of the job's namespace, reset before every test (see _run_test)."""
        fd = -1
        try:
            fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_WRONLY | os.O_CLOEXEC)
            os.pwrite(fd, b"1", 0)
        except OSError as e:
            if fd >= 0:
                os.close(fd)
            self.z.notes.append(f"pid counter not resettable ({e}): a test's pid reveals earlier tests' forks")
            return
        self.last_pid_fd = fd

    def _restrict_self(self) -> None:
        """no_new_privs and the seccomp filter, once: every test child inherits both (installing
        the filter per child cost ~0.1 ms of each test). Nothing the init does later needs a
        refused call; mounting a fresh test directory is the job process's work. The core limit
        first: under the filter, setting it changes nothing (sandbox/seccomp.py)."""
        resource.setrlimit(resource.RLIMIT_CORE, isolation.NO_CORE)
        linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
        if self.z.seccomp_filter is not None:
            try:
                self.z.seccomp_filter.install()
            except OSError as e:
                self.z.layers["seccomp"] = False
                self.z.notes.append(f"seccomp filter refused ({e})")

    def _await_source(self) -> bool:
        """A spare job: everything that does not depend on the program (namespaces, /proc, the
        filter, a fresh test directory of the usual size) is done while the runner is idle;
        then wait for the "load" message carrying the source (a memfd) and the fn_name.
        False: the runner dropped the spare (EOF) or sent something else, and the job ends
        unused."""
        if self.box is not None and self.box_bytes > 0:
            try:
                self.box.ensure_fresh(self.box_bytes)
            except OSError:
                pass  # not clean: the first test asks again and reports the failure
        if self.mode == "fork":
            # the first test's child too, before the program exists: it gets the compiled code
            # with its test (a function-call job, told only by the load, drops it)
            self._fork_ahead()
        msg, fds = recv(self.sock)
        try:
            if msg is None or msg.get("op") != "load" or len(fds) != 1:
                return False
            self.fn_name = msg.get("fn_name") or None
            self.source = read_all(fds[0])
            return True
        finally:
            for fd in fds:
                os.close(fd)

    def _compile(self) -> str | None:
        if self.mode == "program":
            return self.program_error or None  # compiled already (sandbox/programs.py)
        limit = _limit_data(COMPILE_DATA_BUDGET)
        try:
            compiled = _compile_in_child(self.source)
            if compiled is None:  # the child failed otherwise (a code object marshal refuses)
                compiled = _compile_here(self.source)
        finally:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_DATA, limit)
        if isinstance(compiled, str):
            return compiled
        self.code = compiled
        child.SOURCE = self.source  # for tracebacks (linecache is filled only if one is printed)
        error = self._place_script()
        if error is not None:
            self.program_error = error  # the judge's failure, not the program's
            return error
        if self.fn_name is not None and self.mode == "fork":
            # the function-call harness's globals, imported once per job instead of per test
            self.call_globals = callharness.job_globals(self.fn_name, self.source)
        gc_freeze()  # the tests' shutdown collections need not walk (and copy) the job's objects
        return None

    def _place_script(self) -> str | None:
        """Put the source where ``child.SCRIPT_PATH`` names it, for every test of the job (fork
        mode; exec mode writes solution.py into each test's directory): a file the init's uid
        owns, mode 0444, in a directory only it may write in. Tests that run as the init's own
        uid (no uid drop) could still change it for the next test: the job process then
        remounts the directory read-only, a round trip (~0.5 ms measured) kept off the usual path."""
        if self.mode != "fork":
            return None
        if self.script_error or not self.script_dir:
            return self.script_error or "no directory for the program's source"
        try:
            fd = os.open(self.script_dir + "/" + child.SCRIPT_NAME, _NEW_SCRIPT, 0o444)
            try:
                child.write_all(fd, self.source)
            finally:
                os.close(fd)
            if self.box is not None and self.script_dir == isolation.PROG and not self.z.layers.get("uid_drop"):
                send(self.box.sock, {"op": "seal"})
                data = self.box.sock.recv(1 << 16)
                reply = marshal.loads(data) if data else "the job process is gone"
                if reply is not None:
                    raise OSError(reply)
        except (OSError, ValueError) as e:
            return f"placing the program's source failed: {type(e).__name__}: {e}"
        return None

    def _serve(self) -> None:
        while True:
            msg, fds = recv(self.sock)
            if msg is None:
                return
            try:
                if msg.get("op") == "run":
                    files_fd = fds.pop() if len(fds) == 4 else -1
                    try:
                        send(self.sock, self._run_test(msg, fds, files_fd))
                    finally:
                        if files_fd >= 0:
                            os.close(files_fd)
            finally:
                for fd in fds:
                    os.close(fd)
            if msg.get("more"):  # the runner expects another test of this job
                self._fork_ahead()

    def _run_test(self, msg: dict[str, Any], fds: list[int], files_fd: int = -1) -> dict[str, Any]:
        if len(fds) != 3:
            return _not_run(f"a test needs 3 standard fds, got {len(fds)}")
        stdio = (fds[0], fds[1], fds[2])
        limits = ChildLimits(**msg["limits"])
        wall_s: float = msg["wall_s"]
        wall_max_s: float = float(msg.get("wall_max_s", wall_s))
        cpu_limit_s: float | None = msg.get("cpu_limit_s")
        fallback_cwd = None
        if not self.z.layers.get("mountns"):
            import tempfile

            fallback_cwd = tempfile.mkdtemp(prefix="cpfleet-test-", dir=self.z.scratch)
            if self.z.layers.get("uid_drop"):
                os.chown(fallback_cwd, self.z.uid, self.z.gid)
        placed: dict[str, Any] | None = None
        if files_fd >= 0:
            try:
                placed = marshal.loads(read_all(files_fd))
            except (OSError, ValueError, TypeError, EOFError) as e:
                return _not_run(f"reading the test's files failed: {type(e).__name__}: {e}")
        if self.box is not None:
            try:
                self.box.ensure_fresh(limits.fsize_bytes + _room_for(placed))
            except (OSError, TypeError) as e:
                return _not_run(str(e))
        if placed is not None:
            # the test's own read-only inputs (a checker's input, answer and output files)
            try:
                owner = (self.z.uid, self.z.gid) if self.z.layers.get("uid_drop") else None
                write_files(fallback_cwd or isolation.BOX, placed, owner)
            except (OSError, ValueError, TypeError) as e:
                return _not_run(f"placing the test's files failed: {type(e).__name__}: {e}")
        # the slot's CPU counter holds this test's processes alone, except in an interactive pair
        # ("shared"), whose other side runs in the slot too: its own processes' CPU then decides
        # (police.TreeCpu.over), which only pid 1 of a namespace with a /proc of its own can
        # count; without one, only the main process is policed
        shared = msg.get("tree_cpu") == "shared"
        # the test ends when the last process it started ends (``_await_the_rest``), the program
        # side of a dialogue too ("await_rest"); an interactor's ends with its main process
        awaits = not shared or bool(msg.get("await_rest"))
        test = {"limits": msg["limits"], "cwd": fallback_cwd, "argv": msg.get("argv") or (),
                "mem_mb": msg.get("mem_mb", 0), "dialogue": shared}
        counted = not shared or self.own_proc
        while True:
            # taken before the child joins the slot
            tree_cpu = police.TreeCpu.start(self.z.cpu_usage_fd, shared) if counted else None
            started = self._start_ahead(test, stdio)
            if started is not None:
                pid, status_r, before, t0 = started
            else:
                status_r, status_w = os.pipe2(os.O_CLOEXEC)
                self._before_fork()
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.monotonic()
                pid = os.fork()
                if pid == 0:
                    self._become_test(stdio, status_w, limits, fallback_cwd, test["argv"], test["mem_mb"],
                                      test["dialogue"])
                os.close(status_w)
            if tree_cpu is not None:
                tree_cpu.reaped_base = before.ru_utime + before.ru_stime
            killed, credit = police.police(pid, self.sock, t0 + wall_s, t0 + max(wall_s, wall_max_s), cpu_limit_s,
                                           tree_cpu)
            deadline = min(t0 + wall_s + credit, t0 + max(wall_s, wall_max_s))
            outlived = False  # killed after the main process ended: what it left ran on
            ended = self._await_the_rest(pid, killed, deadline, cpu_limit_s, tree_cpu, before) if awaits else None
            wall = time.monotonic() - t0
            uid_drop = bool(self.z.layers.get("uid_drop"))
            if ended is None:
                if self.ns_init:
                    # kill the rest BEFORE reaping the main process: a zombie held by a ptrace
                    # tracer cannot be reaped until the tracer is gone (a program could hang us)
                    police.kill_all_but_init()
                _, status, ru = os.wait4(pid, 0)
                police.kill_everything_left(pid, self.ns_init, self.subreaper, uid_drop, self.z.uid)
            else:
                rest, status, ru = ended
                if rest:  # processes of the test still running at its end
                    killed, outlived = rest, True
                    if self.ns_init:
                        police.kill_all_but_init()
                    police.kill_everything_left(pid, self.ns_init, self.subreaper, uid_drop, self.z.uid)
                    if rest == police.RUNNER_GONE:
                        os._exit(0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # CPU of every process of the test, reaped by anyone (orphans reaped by this init too):
            # a program must not escape the time limit by burning CPU in children it never waits for
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            failure = os.read(status_r, 4096).decode(errors="replace")
            os.close(status_r)
            if started is None:
                break
            if failure.startswith(GOT_TEST):
                failure = failure[len(GOT_TEST):]
                break
            # The child forked ahead died (killed from outside) before its test reached it:
            # nothing of the program ran, so the test runs on a child forked now instead of
            # being judged on a death that was not the program's.
        exec_errno = 0
        if failure.startswith(child.EXEC_FAILED):  # "exec:<errno>:<message>" from exec_program
            _, errno_text, message = failure.split(":", 2)
            exec_errno, failure = int(errno_text), ""
            if exec_errno not in child.PROGRAM_EXEC_ERRNOS:
                failure = f"cannot start the program: {message}"
        collected = _collect(fallback_cwd or isolation.BOX, msg.get("collect") or ())
        if self.box is not None:
            self.box.settle()
        if fallback_cwd:
            isolation.remove_tree(fallback_cwd)  # however deep the test made it
        return {"status": status, "cpu": max(cpu, ru.ru_utime + ru.ru_stime), "maxrss": ru.ru_maxrss,
                "files": collected, "wall_credit": credit,
                "wall": wall, "killed": killed, "outlived": outlived, "internal": failure, "exec_errno": exec_errno}

    def _await_the_rest(self, pid: int, killed: str, deadline: float, cpu_limit_s: float | None,
                        tree_cpu: police.TreeCpu | None, before: Any) -> tuple[str, int, Any] | None:
        """The test's end when its main process ended on its own: it is reaped here, and the
        test lasts until every process it left has ended too, within its limits
        (``police.await_the_rest``): what they write is part of the output it is judged on, as
        under a judge that reads stdout to EOF. Returns why the rest must be killed ("" when
        nothing is left) and the main process's status and rusage; None when the main process
        was killed or this init cannot see the processes it left (no pid namespace and no
        subreaper: they are killed at once). Asked for the program side of an interactive
        dialogue too: what its forked processes flush into the interactor's input is part of the
        dialogue, as under a judge whose program is ``python3 solution.py`` on a pipe, and the
        pair's end rules still apply here (the interactor's end gives it ``pairs.PEER_GRACE_S``,
        then a "peer" kill request ends what is left). Not asked for the interactor's side: its
        verdict is its main process's exit status and feedback, and what it leaves (a child
        paused forever) must not hold the dialogue open; it is killed as its main process ends."""
        if killed or not (self.ns_init or self.subreaper):
            return None
        # the main process is a zombie now (the filter refuses ptrace, so no tracer holds it;
        # WNOHANG all the same, as a zombie that cannot be reaped must not hang the init)
        reaped, status, ru = os.wait4(pid, os.WNOHANG)
        if reaped != pid:
            return None
        reaped_base = before.ru_utime + before.ru_stime
        rest = police.await_the_rest(self.sock, deadline, cpu_limit_s, tree_cpu, reaped_base, self.own_proc)
        return rest or "", status, ru

    def _before_fork(self) -> None:
        # Empty the free lists and young generations here, where the pages are our own: the
        # child's full collection at exit would otherwise clear them in copied-on-write pages.
        # (PyPy: no collection at a child's exit, and gc.collect is a full major one)
        if not child.PYPY:
            gc.collect()
        if self.last_pid_fd >= 0:
            # every test is pid 2, as in a fresh namespace: the pid counter would otherwise
            # tell a test how many processes the earlier tests of its job started
            os.pwrite(self.last_pid_fd, b"1", 0)

    def _fork_ahead(self) -> None:
        """Fork the next test's child now, between tests, while the runner judges the last test
        and sends the next. The fork (it copies the page tables of this whole interpreter), the
        child's detaching (its session, the fd cleanup) and its ``__main__`` then leave the
        test's path when the machine has a CPU to spare. A spare job forks its first test's
        child this way before its program exists (``_start_ahead`` sends it the code); a job
        started on demand does not: the runner sends its first test right after the compile,
        before a fork could finish, and waking a waiting child then cost more than forking one
        (measured: ~0.5 ms slower per 1-test job). The child waits on a socket pair;
        everything bound to the test (the cgroups, fds 0/1/2, rlimits, uid, directory) it
        applies once its test arrives, exactly as a child forked on demand. Unused, it ends
        with the job (EOF on its socket; the init's death)."""
        if self.ahead is not None:
            return
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        self._before_fork()
        pid = os.fork()
        if pid == 0:
            mine.close()
            self._await_test(theirs, status_w)
        theirs.close()
        os.close(status_w)
        self.ahead = (pid, mine, status_r, self.code is None and self.mode != "program")

    def _drop_ahead(self) -> None:
        if self.ahead is not None:
            pid, go, status_r, _ = self.ahead
            self.ahead = None
            go.close()  # EOF: it exits
            os.close(status_r)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    def _start_ahead(self, test: dict[str, Any], stdio: tuple[int, int, int]) -> tuple[int, int, Any, float] | None:
        """Hand ``test`` and its fds to the child forked ahead: (pid, status pipe, the
        children's rusage before it, start time), or None when there is none or it is gone
        (reaped here, before the rusage snapshot, so its CPU is no test's)."""
        if self.ahead is None:
            return None
        pid, go, status_r, needs_program = self.ahead
        self.ahead = None
        program_fd = -1
        try:
            fds = list(stdio)
            if needs_program:
                # forked in a spare job before its program came: the compiled code and the
                # source (for tracebacks), as marshal writes a .pyc's code
                program_fd = memfd_holding("program", marshal.dumps((self.code, self.source)))
                fds.append(program_fd)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            send(go, test, fds)
            return pid, status_r, before, t0
        except (OSError, ValueError):
            # ValueError: marshal refuses code nested past its depth limit (a valid program of
            # ~1000 nested lambdas); the test then forks on demand from the code held here
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            os.close(status_r)
            return None
        finally:
            go.close()
            if program_fd >= 0:
                os.close(program_fd)

    def _await_test(self, go: Any, status_w: int) -> None:
        """A child forked ahead: detach, wait for the test, confine to it, run the program."""
        try:
            isolation.detach_test_child(self.z.layers, go.fileno(), status_w, *self.z.cgroup_fds)
            if self.mode == "fork" and self.fn_name is None:
                child.prepare_main()
            test, fds = recv(go)
            if test is None or len(fds) not in (3, 4):  # the job ended before another test came
                os._exit(0)
            os.write(status_w, GOT_TEST.encode())  # from here on, what happens to this child is the test's
            go.detach()  # its fd is closed below with the others; the object must not close it later
            if len(fds) == 4:  # forked before the program existed (see _start_ahead)
                self.code, self.source = marshal.loads(read_all(fds[3]))
                child.SOURCE = self.source
            stdio = (fds[0], fds[1], fds[2])
            limits = ChildLimits(**test["limits"])
            isolation.confine_to_test(stdio, self.z.uid, self.z.gid, self.z.cgroup_fds, limits, self.z.layers,
                                      keep_fd=status_w, fallback_cwd=test["cwd"])
        except BaseException as e:
            _confinement_failed(status_w, e)
        self._start_program(status_w, test["argv"], test["mem_mb"], bool(test.get("dialogue")))

    def _become_test(self, stdio: tuple[int, int, int], status_w: int, limits: ChildLimits,
                     fallback_cwd: str | None, extra_argv: list[str] | tuple[str, ...] = (), mem_mb: int = 0,
                     dialogue: bool = False) -> None:
        try:
            isolation.confine_test_child(
                stdio, self.z.uid, self.z.gid, self.z.cgroup_fds, limits, self.z.layers,
                keep_fd=status_w, fallback_cwd=fallback_cwd,
            )
        except BaseException as e:
            _confinement_failed(status_w, e)
        self._start_program(status_w, extra_argv, mem_mb, dialogue)

    def _start_program(self, status_w: int, extra_argv: list[str] | tuple[str, ...], mem_mb: int,
                       dialogue: bool = False) -> None:
        """In the confined child: become the program (exec it, or run the compiled code). The
        child's life ends here whatever escapes the harness: it must never unwind into the init's
        frames it was forked in, whose ``finally`` exits 0 (an uncaught exception whose report the
        program made fail, with fd 2 closed and a raising ``sys.excepthook``, ended as status 0
        and its printed answer was paid). 1 is the status CPython ends such a run with. The exit
        is ``child._exit_now``, bound before any program could replace ``os._exit``."""
        try:
            self._become_program(status_w, extra_argv, mem_mb, dialogue)
        except BaseException:  # whatever escaped, the status below is all that is left to say
            pass
        child._exit_now(1)

    def _become_program(self, status_w: int, extra_argv: list[str] | tuple[str, ...], mem_mb: int,
                        dialogue: bool = False) -> None:
        """Exec the program or its interpreter, or run the compiled code; returns only when the
        harness failed to end the process itself. ``dialogue``: one side of an interactive pair
        (``child.exec_program``)."""
        if self.mode == "program":
            assert self.program is not None
            prog_dir = self.program["dir"]
            argv = [a.replace("{prog}", prog_dir).replace("{mem}", str(mem_mb))
                    .replace("{stack}", str(min(mem_mb, MAX_MAIN_STACK_MB)))
                    for a in self.program["argv"]] + list(extra_argv)
            child.exec_program(argv, self.program.get("env") or {}, status_w, image_dir=prog_dir, dialogue=dialogue)
        os.close(status_w)  # kept only by a program exec, to report its failure
        if self.mode == "exec":
            child.exec_python(self.source, self.z.python, None, self.fn_name)
        if self.fn_name is not None:
            callharness.run_call(self.code, self.fn_name, self.call_globals or {})
        child.run_compiled(self.code)


def _compile_here(source: bytes) -> Any:
    """The program's code object, or its compile error's text (the program's COMPILE_ERROR).
    Warnings the compile raises (SyntaxWarning: ``x is 1``) are ignored: the init's stderr is
    the worker's own log, and a source can raise one per line (megabytes of log per job)."""
    filters = _warnings.filters
    saved = filters[:]
    filters.insert(0, ("ignore", None, Warning, None, 0))
    _filters_mutated()
    try:
        return compile(source, child.SCRIPT_NAME, "exec", dont_inherit=True)
    except MemoryError:
        return f"MemoryError: compiling the program needs more than {COMPILE_DATA_BUDGET >> 20} MB\n"
    except syntax_errors.COMPILE_ERRORS as e:
        return syntax_errors.compile_error_text(e)
    finally:
        filters[:] = saved
        _filters_mutated()


def _filters_mutated() -> None:
    """Tell the C warnings module that its filter list changed (it caches decisions per filter
    version). CPython's private hook, absent from the stubs and renamed in later versions: where
    it is missing, a warning not seen before is still matched against the list as it is."""
    hook = getattr(_warnings, "_filters_mutated", None)
    if hook is not None:
        hook()


def _compile_in_child(source: bytes) -> Any:
    """``_compile_here`` in a child of the init under RLIMIT_CPU (COMPILE_CPU_S) and the data
    budget the caller set, its outcome marshalled back through a memfd: a compile past the CPU
    limit is the program's COMPILE_ERROR, and so is a compile that crashes the compiler itself
    (``_compiler_died``). None when the child ended without an outcome otherwise, as where
    marshal refuses the code object (nested past its depth) of a compile the child finished
    within the limit: the caller then compiles in the init, at the cost the child's compile
    showed."""
    out = os.memfd_create("compiled", os.MFD_CLOEXEC)
    try:
        pid = os.fork()
        if pid == 0:
            try:
                resource.setrlimit(resource.RLIMIT_CPU, (COMPILE_CPU_S, COMPILE_CPU_S + 1))
                child.write_all(out, marshal.dumps(_compile_here(source)))
            finally:
                child._exit_now(0)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
            return f"compiling the program took more than {COMPILE_CPU_S} s of CPU (the compile time limit)\n"
        if (os.WIFSIGNALED(status) and os.WTERMSIG(status) in _CRASH_SIGNALS) or (
                os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0):
            return _compiler_died(status)
        data = read_all(out)
        return marshal.loads(data) if status == 0 and data else None
    except (OSError, ValueError, EOFError, TypeError):
        return None
    finally:
        os.close(out)


# what an interpreter dies of when it fails by itself (PyPy's fatal errors abort); a compiling
# child killed by any other signal was killed from outside, and the init compiles the source again
_CRASH_SIGNALS = frozenset({signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE,
                            signal.SIGTRAP, signal.SIGSYS})


def _compiler_died(status: int) -> str:
    """The COMPILE_ERROR of a compile that ended the interpreter compiling it (a wait ``status``
    that is neither a normal exit nor the CPU limit). PyPy's compiler aborts, rather than raise
    MemoryError, when its arenas pass the data budget (a comprehension twenty ``finally`` blocks
    deep is compiled 2**20 times, in 1 kB): the init, under the same budget and compiling the
    same source, would die the same way, so compiling there again (as for a code object marshal
    refuses) ended the job as INTERNAL for the program's own doing."""
    how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}"
    return (f"compiling the program killed the compiler ({how}): it needs more than the "
            f"{COMPILE_DATA_BUDGET >> 20} MB a compile may use, or more than the compiler can handle\n")


def _confinement_failed(status_w: int, e: BaseException) -> NoReturn:
    """In a test child whose confinement failed: say why on the status pipe (the runner answers
    INTERNAL) and exit without running the program."""
    try:
        os.write(status_w, f"test confinement failed: {type(e).__name__}: {e}".encode())
    finally:
        os._exit(CONFINE_FAILED)


COLLECT_BYTES = 12 * 1024  # per file; at most COLLECT_FILES: the reply is one 64 KiB message
COLLECT_FILES = 4


def _collect(root: str, names: list[str] | tuple[str, ...]) -> dict[str, bytes]:
    """Files a finished test left that the runner asked for (a validator's feedback), read as
    root, component by component without following any link (the test owned the directory and
    may have planted one), regular files only, at most COLLECT_BYTES each."""
    out: dict[str, bytes] = {}
    for name in names[:COLLECT_FILES]:
        fds: list[int] = []
        try:
            parts = _safe_relpath(name).split("/")
            fds.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
            for part in parts[:-1]:
                fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
            fds.append(os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=fds[-1]))
            if os.fstat(fds[-1]).st_mode & 0o170000 == 0o100000:  # no fifo or device to block on
                out[name] = os.read(fds[-1], COLLECT_BYTES)
        except (OSError, ValueError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
    return out


def _not_run(why: str) -> dict[str, Any]:
    """The "done" reply for a test that could not be started (the runner reports INTERNAL)."""
    return {"status": 0, "cpu": 0.0, "maxrss": 0, "wall": 0.0, "killed": "", "internal": why, "exec_errno": 0}
