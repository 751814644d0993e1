"""The runner side of the zygote: ForkServerRunner (default) and SubprocessRunner.

Both drive the same zygote (sandbox/zygote.py), so every child gets the same isolation; they
differ only in what the child does once confined: run the pre-compiled code object (fork
server), or exec a fresh ``python3 solution.py`` (subprocess: the reference semantics).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import marshal
import math
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cpfleet.core.errors import SandboxBroken
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages, zygote
from cpfleet.sandbox.cgroups import SlotCgroup
from cpfleet.sandbox.languages import JVM_AS_FALLBACK_MB
from cpfleet.sandbox.runner import CodeRunner, IsolationReport, Limits, ProgramImage, RunResult
from cpfleet.sandbox.slots import Slot, claim_slot

if TYPE_CHECKING:
    from cpfleet.sandbox.pypy_zygote import PyPyZygote

log = logging.getLogger("cpfleet.sandbox")

READ_CHUNK = 1 << 20
PIPE_BYTES = 1 << 20
F_SETPIPE_SZ = 1031
STDERR_TAIL = 4096
# the job's cgroup allows the problem's memory limit for ALL its processes together, plus room
# for the kernel's own charges (pipe buffers, page tables); the test directory's tmpfs counts inside it
CGROUP_SLACK_BYTES = 32 << 20
CPU_RLIMIT_FACTOR = 1.5  # RLIMIT_CPU sits at ceil(1.5 x limit) + 1 s: see cpu_rlimit_s
CPU_RLIMIT_SLACK_S = 1
PEER_GRACE_S = 1.0  # interactive: how long the solution may run on after the interactor ended
REPLY_GRACE_S = 10.0  # how long past its own deadline we wait for the job init before declaring it broken



# CPFLEET_FORK_AHEAD: whether a job's init forks each next test's child while the runner judges
# the last test ("1"), never ("0"), or only while the machine has a CPU to spare ("auto")
FORK_AHEAD_ENV = "CPFLEET_FORK_AHEAD"
FORK_AHEAD_SETTINGS = ("auto", "1", "0")

CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": "/box"}


def wall_fields(limits: Limits) -> dict[str, float]:
    """The wall-clock backstop of one test, as the job init polices it (zygote's ``_police``):
    it fires at ``wall_s`` unless the test waited for a CPU by then, and moves by that wait, up
    to ``wall_max_s``. One rule for every run, single or one side of an interactive pair, so
    machine load turns neither into a TIME_LIMIT."""
    return {"wall_s": min(limits.wall_backstop_s, limits.wall_max_s), "wall_max_s": limits.wall_max_s}


def fork_ahead_setting(value: str | None = None) -> str:
    """``CPFLEET_FORK_AHEAD`` (or ``value``), checked: ``auto`` (the default), ``1`` or ``0``."""
    raw = os.environ.get(FORK_AHEAD_ENV, "auto") if value is None else value
    setting = raw.strip().lower() or "auto"
    if setting not in FORK_AHEAD_SETTINGS:
        raise SandboxBroken(f"{FORK_AHEAD_ENV} must be one of {', '.join(FORK_AHEAD_SETTINGS)}, not {raw!r}")
    return setting


def spare_cpu() -> bool:
    """Whether a CPU is likely idle: the 1-minute load average is below the CPUs this process
    may run on.

    Forking the next test's child ahead pays off only then: the fork, the child's detaching
    and its ``__main__`` overlap the judging of the last test on a CPU that would otherwise
    idle. On a busy machine (a batch of tiny tests on every core) nothing overlaps, and the
    ahead protocol costs CPU of its own: a socket pair and a status pipe per child, the test
    sent to it, and the init working between tests while a child shares all its pages, so
    each page the init writes is copied instead of reused. On the APPS-shaped set
    (bench/bench_tiny_tests.py, a loaded 2-CPU machine) a test cost 0.25-0.45 ms more CPU
    forked ahead than forked on demand, of about 3 ms in all."""
    try:
        return os.getloadavg()[0] < len(os.sched_getaffinity(0))
    except OSError:
        return True


def zygote_command(python: str | None = None) -> list[str]:
    """``python -I -S``: no site, so no .pth hooks (editable installs, setuptools' shims)
    import dozens of modules into the process that every test forks from.

    Without site there is no editable-install finder either, and ``cpfleet/__init__.py`` is
    not wanted in the zygote, so the boot line registers bare ``cpfleet`` and
    ``cpfleet.sandbox`` package objects whose ``__path__`` is this folder: the zygote's own
    imports resolve there and nothing else of the project is loaded or on ``sys.path``.

    The boot line first raises its stack rlimit to the hard limit and execs itself again when it
    was lower: the kernel lays out a process's memory at exec by that limit (a small one leaves
    the stack ~128 MB below the shared libraries), and every forked Python test inherits this
    layout, so only then can a test's stack grow to its memory limit (isolation.confine_to_test).
    """
    sandbox_dir = os.path.dirname(os.path.abspath(zygote.__file__))
    boot = (
        "import sys, os, resource as R; s, h = R.getrlimit(R.RLIMIT_STACK); "
        "s != h and (R.setrlimit(R.RLIMIT_STACK, (h, h)), "
        "os.execv(sys.executable, open('/proc/self/cmdline', 'rb').read().split(b'\\0')[:-1])); "
        "M = type(sys); top = M('cpfleet'); top.__path__ = []; "
        f"sub = M('cpfleet.sandbox'); sub.__path__ = [{sandbox_dir!r}]; top.sandbox = sub; "
        "sys.modules.update({'cpfleet': top, 'cpfleet.sandbox': sub}); "
        "import cpfleet.sandbox.zygote as z; z.main()"
    )
    return [python or sys.executable, "-I", "-S", "-c", boot]


def spawn_zygote(python: str | None, config: dict[str, Any], cgroup_fds: list[int]) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start a zygote under ``python`` (None: this interpreter) and send it its ``config`` and
    the slot's cgroup fds: the process and our end of its control channel (the caller reads
    its setup reply)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = subprocess.Popen(
            [*zygote_command(python), str(theirs.fileno()), str(os.getpid())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            # its own process group: a terminal's Ctrl-C is for the command that owns the
            # runner, which closes it; the zygote dies with its runner (PDEATHSIG) anyway
            process_group=0,
            env=CHILD_ENV,  # never the worker's: it holds the broker URL and its password
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    try:
        zygote.send(ours, config, cgroup_fds)
    except BaseException:
        ours.close()
        proc.kill()
        proc.wait()
        raise
    return proc, ours


def recv_within(sock: socket.socket, timeout: float) -> Any:
    """The next message from a zygote or job init; SandboxBroken when none comes in time or
    the process exited."""
    r, _, _ = select.select([sock], [], [], timeout)
    if not r:
        raise SandboxBroken(f"no answer from the sandbox within {timeout:.0f}s")
    msg, fds = zygote.recv(sock)
    for fd in fds:
        os.close(fd)
    if msg is None:
        raise SandboxBroken("the sandbox process exited")
    return msg


def self_test_probe(port: int) -> str:
    """A program that reports what a test child sees: whether it reaches a loopback listener
    of ours on ``port`` (a self-test must never send traffic off the machine, even when the
    network namespace is missing), its uid, its pid and its seccomp mode."""
    return (
        "import os, socket\n"
        "r = []\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1); r.append('net-open')\n"
        "except OSError: pass\n"
        "r.append('uid=%d' % os.getuid())\n"
        "r.append('pid=%d' % os.getpid())\n"
        "try:\n    r += ['seccomp=' + l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')]\n"
        "except OSError: pass\n"
        "print(' '.join(r))\n"
    )


def check_self_test(err: str | None, res: RunResult, layers: dict[str, bool], notes: list[str], uid: int) -> None:
    """Mark in ``layers`` (with a note) each layer the probe's run shows missing."""
    out = res.stdout.decode(errors="replace").split()
    if err or res.status != Verdict.OK:
        layers["self_test"] = False
        notes.append(f"self-test failed: {err or res.status} {res.error} {res.stderr[-300:]!r}")
        return
    layers["self_test"] = True
    if "net-open" in out:
        layers["netns"] = False
        notes.append("self-test reached a loopback port: no network isolation")
    if layers.get("uid_drop") and f"uid={uid}" not in out:
        layers["uid_drop"] = False
        notes.append(f"self-test ran as {out}, not uid {uid}")
    if layers.get("pidns") and not any(o.startswith("pid=") and int(o[4:]) < 10 for o in out):
        layers["pidns"] = False
    if layers.get("seccomp") and "seccomp=2" not in out:
        layers["seccomp"] = False
        notes.append("self-test ran without its seccomp filter")


class ZygoteRunner(CodeRunner):
    mode = "fork"

    def __init__(self, isolate: bool = True, python: str | None = None, fork_ahead: str | None = None) -> None:
        self._isolate = isolate
        self._fork_ahead = fork_ahead_setting(fork_ahead)
        # CPFLEET_SOLUTION_PYTHON (e.g. a venv with numpy): the zygote itself runs under it, so
        # fork-mode tests import its packages, and exec mode runs it (not resolved: a venv's
        # python is a link whose own path is what makes it the venv)
        self._solution_python = python or os.environ.get("CPFLEET_SOLUTION_PYTHON") or None
        if isolate:
            _refuse_interpreter_under_tmp(self._solution_python)
        self._python = self._solution_python or os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctrl: socket.socket | None = None
        self._job: Job | None = None
        self._spare: Job | None = None  # the next job's processes, made ahead (see prepare_next)
        # PyPy programs' fork server (sandbox/pypy_zygote.py): started by the first PyPy job;
        # why it could not be, once it could not (PyPy programs then take the exec path)
        self._pypy: PyPyZygote | None = None
        self._pypy_refused = ""
        self._report = IsolationReport()
        self._cgroup: SlotCgroup | None = None
        self._slot: Slot = claim_slot()
        try:
            self._cgroup = SlotCgroup(self._slot.cgroup_name) if isolate else None
            self._ooms_seen = self._cgroup.oom_kills() if self._cgroup is not None else 0
            self._pch_host_dir = _pch_root()
            self._start_zygote()
            self._self_test()
        except BaseException:
            # a failed start is retried by the caller (a worker tries again on its next job):
            # whatever this attempt holds (zygote, slot lock, cgroup fds) goes back now
            self.close()
            raise

    # -- zygote lifecycle -------------------------------------------------------------
    def _start_zygote(self) -> None:
        cgroup_fds = self._cgroup.open_join_fds() if self._cgroup is not None else []
        try:
            self._proc, ours = spawn_zygote(self._solution_python, {
                "uid": self._slot.uid, "gid": self._slot.gid, "python": self._python,
                "site_packages": _site_packages(self._solution_python),
                "python_dirs": _solution_python_dirs(self._solution_python),
                "isolate": self._isolate, "pch_dir": self._pch_host_dir}, cgroup_fds)
        finally:
            for fd in cgroup_fds:
                os.close(fd)
        self._ctrl = ours
        reply = self._recv_within(ours, 30.0)
        layers = dict(reply["layers"])
        notes = list(reply["notes"])
        if self._cgroup is not None and not self._cgroup.ok:
            notes.append(f"cgroup unavailable ({self._cgroup.error}): memory is bounded per process only")
        if self._cgroup is None:
            layers["cgroup"] = False
        self._report = IsolationReport(layers=layers, notes=notes)

    def _stop_zygote(self) -> None:
        self._end_job()
        self._drop_spare()
        if self._ctrl is not None:
            self._ctrl.close()
            self._ctrl = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            self._proc = None
        if self._cgroup is not None and not self._report.layers.get("pidns"):
            # Without a pid namespace, a test interrupted by this stop (a soft time limit resets
            # the runner mid-test) leaves its orphans to the host once the job init dies: the
            # slot's cgroup holds them all. With one, the namespace's end already killed them.
            self._cgroup.kill_all()

    def _restart_zygote(self) -> None:
        log.warning("restarting the sandbox zygote")
        self._stop_zygote()
        self._start_zygote()

    def _recv_within(self, sock: socket.socket, timeout: float) -> Any:
        return recv_within(sock, timeout)

    def _self_test(self) -> None:
        """Run a probe through the whole path and record which layers really hold (see
        ``self_test_probe``)."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        try:
            err = self.load(self_test_probe(listener.getsockname()[1]))
            res = self.run(b"", Limits(time_s=5))
        finally:
            listener.close()
        layers = self._report.layers
        check_self_test(err, res, layers, self._report.notes, self._slot.uid)
        self._end_job()
        missing = [k for k, v in layers.items() if not v]
        if missing:
            msg = f"SANDBOX ISOLATION INCOMPLETE ({self.name}): missing {missing}; " + "; ".join(self._report.notes)
            log.warning(msg)
            print(f"cpfleet: WARNING: {msg}", file=sys.stderr)

    # -- CodeRunner -----------------------------------------------------------------------
    @property
    def isolation(self) -> IsolationReport:
        return self._report

    @property
    def loaded_job(self) -> Job | None:
        """The job of the program ``load``/``load_program`` loaded (None: none is)."""
        return self._job

    def sandbox_path(self, host_path: str) -> str | None:
        """Where a host path under the precompiled-header root is seen by sandboxed programs
        (None: it is not visible there)."""
        root = self._pch_host_dir
        if not root or not (host_path == root or host_path.startswith(root + "/")):
            return None
        if self._report.layers.get("hidden_fs"):
            from cpfleet.sandbox.isolation import PCH

            return PCH + host_path[len(root):]
        return host_path

    @property
    def slot(self) -> Slot:
        return self._slot

    def load(self, source: str, fn_name: str | None = None) -> str | None:
        """``fn_name`` set: a function-call problem; each run calls that function with the JSON
        arguments given as stdin and returns its JSON value on stdout (sandbox/callharness.py)."""
        self._end_job()
        # surrogatepass: a lone surrogate becomes invalid UTF-8, i.e. a compile error, not INTERNAL
        job, error = self._open_job(self.mode, source.encode("utf-8", errors="surrogatepass"), fn_name)
        self._job = job
        return error

    def forks_pypy(self) -> bool:
        """Whether PyPy programs run in this runner's PyPy fork server (``load_pypy``), started
        here on the first ask. False for the subprocess runner (its reference semantics are a
        fresh interpreter per test), with CPFLEET_PYPY_FORK=0, and where the PyPy zygote
        cannot start or lacks a layer this runner has (said once, loudly): the caller then runs
        PyPy programs on the exec path (sandbox/programs.py), with the same isolation."""
        if self.mode != "fork" or os.environ.get("CPFLEET_PYPY_FORK", "1") == "0" or self._pypy_refused:
            return False
        if self._pypy is None:
            self._start_pypy()
        return self._pypy is not None

    def _start_pypy(self) -> None:
        from cpfleet.sandbox.pypy_zygote import PyPyZygote, pypy_executable

        pypy = pypy_executable()
        try:
            if self._isolate:
                _refuse_interpreter_under_tmp(pypy)
            self._pypy = PyPyZygote(pypy, self._slot, self._cgroup, self._isolate)
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            try:
                err = self.load_pypy(self_test_probe(listener.getsockname()[1]))
                res = self.run(b"", Limits(time_s=5))
            finally:
                listener.close()
                self._end_job()
            layers, notes = self._pypy.layers, self._pypy.notes
            check_self_test(err, res, layers, notes, self._slot.uid)
            missing = [k for k, v in self._report.layers.items() if v and not layers.get(k)]
            if missing:
                raise SandboxBroken(f"it lacks {missing} ({'; '.join(notes)})")
        except (OSError, SandboxBroken) as e:
            self._pypy_refused = f"{type(e).__name__}: {e}"
            if self._pypy is not None:
                self._pypy.stop()
                self._pypy = None
            msg = f"no PyPy fork server ({self._pypy_refused}): PyPy programs start a fresh PyPy per test"
            log.warning(msg)
            print(f"cpfleet: WARNING: {msg}", file=sys.stderr)

    @property
    def pypy_isolation(self) -> IsolationReport | None:
        """The PyPy fork server's layers, as its self-test found them (None: none is running)."""
        if self._pypy is None:
            return None
        return IsolationReport(layers=dict(self._pypy.layers), notes=list(self._pypy.notes))

    def load_pypy(self, source: str) -> str | None:
        """Compile ``source`` with PyPy in the PyPy fork server for the following runs (see
        ``forks_pypy``, which must have said True): None, or the syntax error text."""
        self._end_job()
        if self._pypy is None:
            raise SandboxBroken("no PyPy fork server on this runner")
        job, reply = self._pypy.open_job(source.encode("utf-8", errors="surrogatepass"))
        if "pidns" in reply.get("layers", {}):  # known once a job init tried
            self._pypy.layers.setdefault("pidns", bool(reply["layers"]["pidns"]))
        self._job, error = self._opened(job, reply)
        return error

    def load_program(self, image: ProgramImage) -> None:
        self._end_job()
        self._job = self.open_program(image)

    def expect_runs(self, n: int) -> None:
        """After the last of ``n`` runs the loaded job forks no test child ahead (one that
        would only be thrown away: each costs a fork and an exit)."""
        if self._job is not None:
            self._job.runs_expected = max(0, n)

    def open_program(self, image: ProgramImage) -> Job:
        """A job running ``image`` next to the loaded one (a checker beside the solution): run
        its tests with ``run_job``, end it with ``Job.close()``. Raises SandboxBroken when its
        files cannot be placed."""
        payload = marshal.dumps({"files": {k: (bytes(v[0]), int(v[1])) for k, v in image.files.items()},
                                 "argv": list(image.argv), "env": dict(image.env)})
        job, error = self._open_job("program", payload)
        if job is None:
            raise SandboxBroken(error or "the program could not be loaded")
        job.memory_model = image.memory_model
        job.extra_cgroup_bytes = image.extra_cgroup_mb << 20
        main = image.argv[0] if image.argv else ""
        if main.startswith("{prog}/") and main[len("{prog}/"):] in image.files:
            job.image_bytes = elf_load_bytes(image.files[main[len("{prog}/"):]][0])
        return job

    def prepare_next(self) -> None:
        """Have the zygote start the next job's processes now, while the caller is idle, not
        when its program arrives: the fork of the job process and of its init, the namespaces,
        /proc, the seccomp filter and the first test directory cost ~2 ms that a job otherwise
        waits for. The spare runs nothing until ``_load_spare`` sends it a program, and serves
        that one job only. Made on request only: in a stream of jobs with no idle time between
        them, building it beside a running test would only compete with that test for a CPU."""
        if self._spare is not None or self._ctrl is None:
            return
        if self._proc is None or self._proc.poll() is not None:
            return  # the zygote is gone: the next job restarts it
        job = Job()
        try:
            zygote.send(self._ctrl, {"op": "job", "mode": self.mode, "spare": True,
                                     "box_bytes": Limits().file_size_mb << 20}, [job.theirs.fileno()])
        except OSError as e:  # the zygote is gone: the next job restarts it
            log.warning("could not start a spare sandbox job: %s", e)
            job.close()
            return
        job.theirs.close()  # the init holds it now: its death alone is our EOF
        self._spare = job

    def _drop_spare(self) -> None:
        if self._spare is not None:
            self._spare.close()  # the spare's init sees EOF and exits unused
            self._spare = None

    def _load_spare(self, job: Job, payload: bytes, fn_name: str | None) -> Any:
        """Send the spare its program; its compile answer, or None when the spare failed (it
        is closed, and the caller starts a job the usual way)."""
        try:
            _send_source(job.sock, {"op": "load"}, [], payload, fn_name)
            return self._recv_within(job.sock, 60.0)
        except (OSError, SandboxBroken) as e:
            log.warning("the spare sandbox job failed (%s): starting a new one", e)
            job.close()
            return None

    def _open_job(self, mode: str, payload: bytes, fn_name: str | None = None) -> tuple[Job | None, str | None]:
        if self._proc is None or self._proc.poll() is not None:
            self._restart_zygote()
        assert self._ctrl is not None
        if mode == self.mode and self._spare is not None:
            job, self._spare = self._spare, None
            reply = self._load_spare(job, payload, fn_name)
            if reply is not None:
                return self._opened(job, reply)
        job = Job()
        try:
            _send_source(self._ctrl, {"op": "job", "mode": mode}, [job.theirs.fileno()], payload, fn_name)
            job.theirs.close()  # the init holds it now: its death alone is our EOF
            reply = self._recv_within(job.sock, 60.0)
        except (OSError, SandboxBroken) as e:
            job.close()
            self._restart_zygote()
            if isinstance(e, SandboxBroken):
                raise
            raise SandboxBroken(f"starting the job failed: {type(e).__name__}: {e}") from e
        return self._opened(job, reply)

    def _opened(self, job: Job, reply: dict[str, Any]) -> tuple[Job | None, str | None]:
        """``job`` after the init's answer to its program: loaded, or closed with the error."""
        if "pidns" in reply.get("layers", {}):
            self._report.layers.setdefault("pidns", bool(reply["layers"]["pidns"]))
        if not reply["ok"]:
            job.close()
            if reply.get("infra"):
                raise SandboxBroken(str(reply["error"]))
            return None, str(reply["error"]) or "SyntaxError"
        job.fork_ahead = self._fork_ahead == "1" or (self._fork_ahead == "auto" and spare_cpu())
        return job, None

    def _end_job(self) -> None:
        if self._job is not None:
            self._job.close()  # the job init sees EOF and exits; its namespace dies with it
            self._job = None

    def run(self, stdin: bytes, limits: Limits) -> RunResult:
        if self._job is None:
            return RunResult(Verdict.INTERNAL, error="run() without a successfully loaded program")
        res = self.run_job(self._job, stdin, limits)
        if res.status == Verdict.INTERNAL:
            self._end_job()
        return res

    def run_job(self, job: Job, stdin: bytes, limits: Limits, *, argv: tuple[str, ...] | list[str] = (),
                files: Mapping[str, bytes] | None = None, collect: Sequence[str] = ()) -> RunResult:
        """One test of ``job``: ``argv`` is appended to a program's argv, ``files`` are placed
        read-only (root-owned, mode 0444) in the test's working directory before it starts (a
        name ending in "/" is a directory the program may write in), and the files named in
        ``collect`` are read back from it afterwards into ``RunResult.files``."""
        try:
            return self._run(job, stdin, limits, argv, files, collect)
        except (OSError, SandboxBroken) as e:
            job.close()
            return RunResult(Verdict.INTERNAL, error=f"sandbox failure: {e}")

    def _set_cgroup(self, memory_bytes: int, nproc: int) -> bool:
        if self._cgroup is None or not self._cgroup.ok:
            return False
        self._cgroup.set_limits(memory_bytes + CGROUP_SLACK_BYTES, nproc)
        return True

    def child_limits(self, job: Job, limits: Limits, cgroup_ok: bool) -> tuple[dict[str, int], int]:
        """The rlimits of one test of ``job``, and its CPU rlimit."""
        mem = limits.memory_mb << 20
        if job.memory_model == "cgroup":
            # no cgroup: a loose bound on the address space, where the heap and the main
            # thread's stack (languages.py: -Xss) may each reserve the memory limit
            as_bytes = -1 if cgroup_ok else 2 * mem + (JVM_AS_FALLBACK_MB << 20)
        else:
            as_bytes = mem
        cpu_rlimit = cpu_rlimit_s(limits)
        return ({"cpu_s": cpu_rlimit, "as_bytes": as_bytes, "fsize_bytes": limits.file_size_mb << 20,
                 "nproc": limits.nproc, "nofile": limits.nofile}, cpu_rlimit)

    def _run(self, job: Job, stdin: bytes, limits: Limits, argv: tuple[str, ...] | list[str],
             files: Mapping[str, bytes] | None, collect: Sequence[str] = ()) -> RunResult:
        if job.sock.fileno() < 0:
            return RunResult(Verdict.INTERNAL, error="the job was closed (an earlier sandbox failure)")
        if job.memory_model == "address_space" and job.image_bytes > limits.memory_mb << 20:
            # the kernel would refuse (or kill) the exec itself; say why instead of a bare signal
            return RunResult(Verdict.MEMORY_LIMIT, error=f"the program's static data and code "
                             f"({job.image_bytes >> 20} MB) exceed the memory limit {limits.memory_mb} MB")
        cgroup_ok = self._set_cgroup((limits.memory_mb << 20) + job.extra_cgroup_bytes, limits.nproc)
        child_limits, cpu_rlimit = self.child_limits(job, limits, cgroup_ok)
        stdio = TestStdio(stdin)
        files_fd = -1
        try:
            fds = list(stdio.child_ends)
            if files:
                files_fd = _files_memfd(files)
                fds.append(files_fd)
            zygote.send(job.sock, {"op": "run", "limits": child_limits, **wall_fields(limits), "argv": list(argv),
                                   "mem_mb": limits.memory_mb, "collect": list(collect),
                                   "cpu_limit_s": limits.time_s, "more": job.next_run() and job.fork_ahead}, fds)
            stdio.sent()
            res, done = self._drain(job, stdio, limits, limits.wall_max_s + REPLY_GRACE_S)
        finally:
            stdio.close()
            if files_fd >= 0:
                os.close(files_fd)
        return _judge_run(res, done, limits, cpu_rlimit, self._new_oom())

    def run_pair(self, job_a: Job, limits_a: Limits, job_b: Job, limits_b: Limits, *,
                 argv: list[str], files: Mapping[str, bytes] | None,
                 collect: Sequence[str] = ()) -> tuple[RunResult, RunResult, bool]:
        """Run a test of ``job_a`` and one of ``job_b`` at once, each one's stdout piped into
        the other's stdin (an interactive problem: a the solution, b the interactor, which gets
        ``argv`` and ``files``). When b ends, a is stopped (killed, error "stopped: the
        interactor exited"); stderr of both is captured. INTERNAL when the sandbox failed.
        The flag: whether a's test ended (every process of it dead) before b's did."""
        try:
            return self._run_pair(job_a, limits_a, job_b, limits_b, argv, files, collect)
        except (OSError, SandboxBroken) as e:
            job_a.close()
            job_b.close()
            failed = RunResult(Verdict.INTERNAL, error=f"sandbox failure: {e}")
            return failed, failed, False

    def _run_pair(self, job_a: Job, limits_a: Limits, job_b: Job, limits_b: Limits, argv: list[str],
                  files: Mapping[str, bytes] | None, collect: Sequence[str]) -> tuple[RunResult, RunResult, bool]:
        total = (limits_a.memory_mb << 20) + job_a.extra_cgroup_bytes + (limits_b.memory_mb << 20) \
            + job_b.extra_cgroup_bytes
        cgroup_ok = self._set_cgroup(total, limits_a.nproc + limits_b.nproc)
        rl_a, cpu_a = self.child_limits(job_a, limits_a, cgroup_ok)
        rl_b, cpu_b = self.child_limits(job_b, limits_b, cgroup_ok)
        own: list[int] = []
        try:
            a2b_r, a2b_w = os.pipe2(os.O_CLOEXEC)
            own += [a2b_r, a2b_w]
            b2a_r, b2a_w = os.pipe2(os.O_CLOEXEC)
            own += [b2a_r, b2a_w]
            err_a_r, err_a_w = os.pipe2(os.O_CLOEXEC)
            own += [err_a_r, err_a_w]
            err_b_r, err_b_w = os.pipe2(os.O_CLOEXEC)
            own += [err_b_r, err_b_w]
            fds_b = [a2b_r, b2a_w, err_b_w]
            if files:
                files_fd = _files_memfd(files)
                own.append(files_fd)
                fds_b.append(files_fd)
            # each side's backstop as a single test's (wall_fields): moved by the time that
            # side waited for a CPU; the CPU limits are enforced on exact runtime
            zygote.send(job_b.sock, {"op": "run", "limits": rl_b, **wall_fields(limits_b),
                                     "cpu_limit_s": limits_b.time_s, "argv": argv, "mem_mb": limits_b.memory_mb,
                                     "collect": list(collect), "more": job_b.next_run()}, fds_b)
            zygote.send(job_a.sock, {"op": "run", "limits": rl_a, **wall_fields(limits_a),
                                     "cpu_limit_s": limits_a.time_s, "argv": [], "mem_mb": limits_a.memory_mb,
                                     "more": job_a.next_run()}, [b2a_r, a2b_w, err_a_w])
            for fd in (a2b_r, a2b_w, b2a_r, b2a_w, err_a_w, err_b_w, *fds_b[3:]):
                own.remove(fd)
                os.close(fd)
            for fd in (err_a_r, err_b_r):
                os.set_blocking(fd, False)
            timeout = max(limits_a.wall_max_s, limits_b.wall_max_s) + REPLY_GRACE_S
            done, errs, a_first = self._drain_pair(job_a, job_b, err_a_r, err_b_r, limits_a, limits_b, timeout)
        finally:
            for fd in own:
                os.close(fd)
        oom = self._new_oom()
        results = []
        for which, limits, cpu_rlimit in ((0, limits_a, cpu_a), (1, limits_b, cpu_b)):
            res = RunResult(Verdict.OK, stderr=errs[which][0], stderr_truncated=errs[which][1])
            d = done[which]
            killed_by_oom = oom and os.WIFSIGNALED(d["status"]) and os.WTERMSIG(d["status"]) == signal.SIGKILL
            peer = d["killed"] == "peer"
            if peer:
                d = dict(d, killed="")
            res = _judge_run(res, d, limits, cpu_rlimit, killed_by_oom)
            if peer and res.status == Verdict.RUNTIME_ERROR:
                res.error = "stopped: the interactor exited"
            results.append(res)
        return results[0], results[1], a_first

    def _drain_pair(self, job_a: Job, job_b: Job, err_a: int, err_b: int, limits_a: Limits, limits_b: Limits,
                    timeout: float) -> tuple[list[dict[str, Any]], list[tuple[bytes, bool]], bool]:
        done: list[dict[str, Any] | None] = [None, None]
        errs = [bytearray(), bytearray()]
        trunc = [False, False]
        totals = [0, 0]
        caps = [limits_a, limits_b]
        socks = {job_a.sock.fileno(): 0, job_b.sock.fileno(): 1}
        pipes = {err_a: 0, err_b: 1}
        poller = select.poll()
        for fd in (*socks, *pipes):
            poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        killed = [False, False]
        jobs = (job_a, job_b)
        stop_a_at: float | None = None  # when a is stopped after b ended (PEER_GRACE_S later)
        ended: list[int] = []  # the order the two tests' ends were reported in
        while done[0] is None or done[1] is None:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                raise SandboxBroken("a job init did not report the interactive test's end")
            if stop_a_at is not None and done[0] is None and not killed[0]:
                if now >= stop_a_at:
                    zygote.send(job_a.sock, {"op": "kill", "reason": "peer"})
                    killed[0] = True
                else:
                    remaining = min(remaining, stop_a_at - now)
            for fd, _ in poller.poll(int(remaining * 1000) + 1):
                if fd in socks:
                    i = socks[fd]
                    msg, extra = zygote.recv(jobs[i].sock)
                    for x in extra:
                        os.close(x)
                    if msg is None:
                        raise SandboxBroken("a job init exited")
                    done[i] = msg
                    ended.append(i)
                    poller.unregister(fd)
                    if i == 1 and done[0] is None and not killed[0]:
                        # a gets a moment to end on its own (its exit status counts: a program
                        # that crashes after an accepted dialogue is judged by its crash), then
                        # it is stopped (one still waiting to read would otherwise wait forever)
                        stop_a_at = time.monotonic() + PEER_GRACE_S
                    continue
                i = pipes[fd]
                with contextlib.suppress(BlockingIOError):
                    chunk = os.read(fd, READ_CHUNK)
                    if not chunk:
                        poller.unregister(fd)
                        continue
                    totals[i] += len(chunk)
                    room = caps[i].stderr_keep_bytes - len(errs[i])
                    if room > 0:
                        errs[i] += chunk[:room]
                    if len(chunk) > room:
                        trunc[i] = True
                    if totals[i] > caps[i].stderr_bytes and done[i] is None and not killed[i]:
                        zygote.send(jobs[i].sock, {"op": "kill", "reason": "output"})
                        killed[i] = True
        for i, fd in enumerate((err_a, err_b)):  # every process is dead: the rest is in the pipe
            while True:
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                room = caps[i].stderr_keep_bytes - len(errs[i])
                if room > 0:
                    errs[i] += chunk[:room]
                if len(chunk) > room:
                    trunc[i] = True
        assert done[0] is not None and done[1] is not None
        return [done[0], done[1]], [(bytes(errs[0]), trunc[0]), (bytes(errs[1]), trunc[1])], ended[0] == 0

    def _new_oom(self) -> bool:
        """Whether the slot's cgroup OOM-killed something since the last look (read after every
        test: the OOM killer may pick a grandchild, not the main process)."""
        if self._cgroup is None or not self._cgroup.ok:
            return False
        ooms = self._cgroup.oom_kills()
        oom, self._ooms_seen = ooms > self._ooms_seen, ooms
        return oom

    def _drain(self, job: Job, stdio: TestStdio, limits: Limits, timeout: float) -> tuple[RunResult, dict[str, Any]]:
        """Read stdout/stderr while the program runs, enforcing the caps, until the init reports
        the test's end (by then every process of the test is dead: what is left in the pipes is
        all there will be)."""
        out = bytearray()
        err = bytearray()
        err_tail = b""
        err_total = 0
        res = RunResult(Verdict.OK)
        done: dict[str, Any] | None = None
        out_r, err_r, sock = stdio.stdout, stdio.stderr, job.sock
        poller = select.poll()
        for fd in (sock.fileno(), out_r, err_r):
            poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        kill_sent = False
        while True:
            if done is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SandboxBroken("the job init did not report the test's end")
                ready = [fd for fd, _ in poller.poll(int(remaining * 1000) + 1)]
            else:
                ready = [out_r, err_r]
            progressed = False
            for fd in ready:
                if fd == sock.fileno():
                    msg, extra = zygote.recv(sock)
                    for x in extra:
                        os.close(x)
                    if msg is None:
                        raise SandboxBroken("the job init exited")
                    done = msg
                    continue
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    continue
                progressed = True
                if fd == out_r:
                    res.stdout_total += len(chunk)
                    room = limits.stdout_bytes - len(out)
                    out += chunk[:room]
                    if len(chunk) > room:
                        res.stdout_truncated = True
                else:
                    err_total += len(chunk)
                    room = limits.stderr_keep_bytes - len(err)
                    if room > 0:
                        err += chunk[:room]
                    if len(chunk) > room:
                        res.stderr_truncated = True
                    err_tail = (err_tail + chunk)[-STDERR_TAIL:]
                if not kill_sent and done is None and (res.stdout_truncated or err_total > limits.stderr_bytes):
                    zygote.send(sock, {"op": "kill", "reason": "output"})
                    kill_sent = True
            if done is not None and not progressed:
                break
        res.stdout = bytes(out)
        res.stderr = bytes(err)
        res.stderr_total = err_total
        if res.stderr_truncated:
            res.stderr += b"\n...[stderr truncated]...\n" + err_tail
        return res, done

    def close(self) -> None:
        self._stop_zygote()
        if self._pypy is not None:
            self._pypy.stop()
            self._pypy = None
        if self._cgroup is not None:
            self._cgroup.close()
        self._slot.release()


@functools.lru_cache(maxsize=8)
def _site_packages(python: str | None) -> list[str]:
    """The site-packages of a configured solution interpreter, asked of the interpreter itself
    with site on (the zygote runs it with -S, where a venv's own directories are not set up)."""
    if python is None:
        return []
    out = subprocess.run([python, "-c", "import json, site, sys; print(json.dumps(site.getsitepackages()))"],
                         capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0:
        raise SandboxBroken(f"the solution interpreter {python} does not run: {out.stderr.strip()[-300:]}")
    return [str(p) for p in json.loads(out.stdout)]


def _refuse_interpreter_under_tmp(python: str | None) -> None:
    """A configured interpreter must live outside /tmp: inside the sandbox /tmp is the test's
    own directory, so a venv there cannot be shown at its path, and every solution would fail
    to start, as if by its own fault. Refused here, as the worker's setup error it is."""
    if python is None:
        return
    tree = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(python))))
    if tree == "/tmp" or tree.startswith("/tmp/"):
        raise SandboxBroken(
            f"the solution interpreter {python} lives under /tmp, which the sandbox replaces with each "
            f"test's own directory: put its venv elsewhere (CPFLEET_SOLUTION_PYTHON)"
        )


def _solution_python_dirs(python: str | None) -> list[str]:
    """Directories the sandbox must show for a configured interpreter: its own tree (a venv's
    bin/ and pyvenv.cfg; exec mode runs it by that path) and its site-packages."""
    if python is None:
        return []
    return [os.path.dirname(os.path.dirname(os.path.abspath(python))), *_site_packages(python)]


def elf_load_bytes(data: bytes) -> int:
    """Total memory size of an ELF64 executable's loadable segments (0 when not ELF64): the
    address space its exec needs before the first instruction (a ``static char a[1 << 30]``)."""
    if len(data) < 64 or data[:5] != b"\x7fELF\x02":
        return 0
    order = "<" if data[5] == 1 else ">"
    phoff = struct.unpack_from(order + "Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36)
    total = 0
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 0x30 > len(data):
            break
        if struct.unpack_from(order + "I", data, off)[0] == 1:  # PT_LOAD
            total += struct.unpack_from(order + "Q", data, off + 0x28)[0]
    return total


def _pch_root() -> str:
    """The host directory of precompiled headers (created world-readable; '' when it cannot be)."""
    from cpfleet.sandbox.programs import PchCache

    try:
        return PchCache().ensure_root()
    except OSError as e:
        log.warning("no precompiled headers: %s", e)
        return ""


class Job:
    """The runner's end of one job's control channel (the init holds the other), and how its
    tests are bounded in memory (see ProgramImage)."""

    def __init__(self) -> None:
        self.sock, self.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.memory_model = "address_space"
        self.extra_cgroup_bytes = 0
        self.image_bytes = 0  # memory its executable maps at exec (ELF PT_LOAD segments)
        # runs its caller still means to make (``expect_runs``); None: unknown, assume more
        self.runs_expected: int | None = None
        # fork each next run's child ahead (decided when the job is loaded: see spare_cpu)
        self.fork_ahead = True

    def next_run(self) -> bool:
        """Count one run; True when another is expected after it (its init then forks that
        run's test child ahead, while we judge this one)."""
        if self.runs_expected is None:
            return True
        self.runs_expected = max(0, self.runs_expected - 1)
        return self.runs_expected > 0

    def close(self) -> None:
        self.theirs.close()
        self.sock.close()


class TestStdio:
    """Fresh kernel objects for one test's fds 0/1/2: a memfd holding its input and two pipes
    we drain. Nothing a test can attach to an open file (locks, xattrs, F_SETOWN/F_SETSIG,
    status flags) survives into the next test, since the next test gets new ones."""

    def __init__(self, stdin: bytes) -> None:
        self._fds: list[int] = []
        try:
            memfd = self._own(zygote.memfd_holding("stdin", stdin))  # offset 0, shared with the child's fd 0
            self.stdout, out_w = (self._own(fd) for fd in os.pipe2(os.O_CLOEXEC))
            self.stderr, err_w = (self._own(fd) for fd in os.pipe2(os.O_CLOEXEC))
            for r in (self.stdout, self.stderr):
                os.set_blocking(r, False)
                try:
                    fcntl.fcntl(r, F_SETPIPE_SZ, PIPE_BYTES)
                except OSError:  # above /proc/sys/fs/pipe-max-size for an unprivileged worker
                    pass
        except BaseException:
            self.close()
            raise
        self.child_ends = [memfd, out_w, err_w]

    def _own(self, fd: int) -> int:
        self._fds.append(fd)
        return fd

    def sent(self) -> None:
        """The init holds its copies now; drop ours so only the test's processes can write."""
        for fd in self.child_ends:
            self._fds.remove(fd)
            os.close(fd)
        self.child_ends = []

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def _send_source(sock: socket.socket, msg: dict[str, Any], fds: list[int], payload: bytes, fn_name: str | None) -> None:
    """Send ``msg`` with ``fds`` and the program's source as a memfd after them (and its
    ``fn_name``, for a function-call problem): a job start or a spare's load."""
    memfd = zygote.memfd_holding("solution", payload)
    try:
        if fn_name is not None:
            msg["fn_name"] = fn_name
        zygote.send(sock, msg, [*fds, memfd])
    finally:
        os.close(memfd)


def _files_memfd(files: Mapping[str, bytes]) -> int:
    """A test's own files (read-only, mode 0444) as the memfd its init places them from."""
    return zygote.memfd_holding("files", marshal.dumps({k: (bytes(v), 0o444) for k, v in files.items()}))


def cpu_rlimit_s(limits: Limits) -> int:
    """The RLIMIT_CPU a test runs under: a backstop well above the time limit, not the limit.

    The kernel checks RLIMIT_CPU against tick-sampled CPU time, which under load runs ahead of
    the exact per-task runtime (by a quarter on a loaded 2-CPU host here); judging TIME_LIMIT by
    the rlimit firing made a program near the limit flip between runs. The job init kills a
    test whose exact runtime passes ``limits.time_s`` (zygote ``_police``) and the verdict is
    decided on the exact CPU time of every process of the test (``cpu_s``); the rlimit only
    stops what that does not see (a CPU-bound child process)."""
    return math.ceil(CPU_RLIMIT_FACTOR * limits.time_s) + CPU_RLIMIT_SLACK_S


def _judge_run(res: RunResult, done: dict[str, Any], limits: Limits, cpu_rlimit: int, oom: bool) -> RunResult:
    """Turn the raw exit into a verdict whose message names what fired, with the real numbers.

    TIME_LIMIT is judged on the precise CPU time; the wall-clock backstop (for programs that
    sleep or block) and a CPU rlimit that fired below the limit depend on machine load, so
    those verdicts are marked non-deterministic (never cached). So is MEMORY_LIMIT inferred from
    a peak RSS near the limit rather than from a MemoryError or the memory cgroup.
    """
    status: int = done["status"]
    res.files = dict(done.get("files") or {})
    res.cpu_s = float(done["cpu"])
    res.wall_s = float(done["wall"])
    res.max_rss_kb = int(done["maxrss"])
    killed: str = done["killed"]
    if os.WIFEXITED(status):
        res.exit_code = os.WEXITSTATUS(status)
    elif os.WIFSIGNALED(status):
        res.signal = os.WTERMSIG(status)
    used = f"{res.cpu_s:.2f}s CPU, {res.wall_s:.2f}s wall"
    near_memory_limit = res.max_rss_kb * 1024 >= 0.9 * (limits.memory_mb << 20)
    rlimit_fired = res.signal == signal.SIGXCPU or (res.signal == signal.SIGKILL and res.cpu_s >= cpu_rlimit - 0.05)
    tail = res.stderr.rstrip().rsplit(b"\n", 1)[-1]
    if done["internal"]:
        res.status, res.error = Verdict.INTERNAL, done["internal"]
    elif done.get("exec_errno"):
        res.status, res.error = Verdict.MEMORY_LIMIT, f"the program's image does not fit the memory limit " \
            f"{limits.memory_mb} MB ({os.strerror(done['exec_errno'])})"
    elif killed == "output":
        res.status = Verdict.OUTPUT_LIMIT
        if res.stdout_truncated:
            res.error = f"stdout limit ({limits.stdout_bytes >> 20} MiB) exceeded"
        else:
            res.error = f"stderr limit ({limits.stderr_bytes >> 20} MiB) exceeded"
    elif oom:
        res.status = Verdict.MEMORY_LIMIT
        res.error = f"memory limit {limits.memory_mb} MB: killed by the memory cgroup"
    elif res.cpu_s > limits.time_s:
        res.status = Verdict.TIME_LIMIT
        res.error = f"CPU time limit {limits.time_s:g}s exceeded ({used})"
    elif killed == "cpu":
        # the init saw the exact runtime pass the limit; rusage rounds differently at the edge
        res.status = Verdict.TIME_LIMIT
        res.error = f"CPU time limit {limits.time_s:g}s exceeded ({used})"
    elif killed == "wall":
        res.status, res.deterministic = Verdict.TIME_LIMIT, False
        credit = float(done.get("wall_credit", 0.0))
        moved = f", moved {credit:.2f}s for the time spent waiting for a CPU" if credit >= 0.005 else ""
        if limits.wall_cap_s is not None and limits.wall_cap_s <= limits.wall_backstop_s + credit:
            res.error = (
                f"the job's time budget ran out: this test was cut at {limits.wall_cap_s:.2f}s wall "
                f"({used}; CPU time limit {limits.time_s:g}s not reached)"
            )
        else:
            res.error = (
                f"wall-clock backstop {limits.wall_backstop_s:.1f}s fired ({used}{moved}; "
                f"CPU time limit {limits.time_s:g}s not reached: the program waited)"
            )
    elif rlimit_fired:
        res.status, res.deterministic = Verdict.TIME_LIMIT, False
        res.error = f"CPU rlimit {cpu_rlimit}s fired ({used}; the kernel's tick-sampled CPU time ran ahead)"
    elif res.exit_code == 0:
        res.status = Verdict.OK
    elif tail.startswith(b"MemoryError") or any(m in res.stderr for m in languages.oom_markers()):
        res.status, res.error = Verdict.MEMORY_LIMIT, f"memory limit {limits.memory_mb} MB: an allocation failed"
    elif near_memory_limit:
        res.status, res.deterministic = Verdict.MEMORY_LIMIT, False
        res.error = (
            f"memory limit {limits.memory_mb} MB: exited with "
            + (f"exit code {res.exit_code}" if res.signal is None else f"signal {res.signal}")
            + f" at peak RSS {res.max_rss_kb >> 10} MB"
        )
    else:
        res.status = Verdict.RUNTIME_ERROR
        res.error = f"exit code {res.exit_code}" if res.signal is None else f"killed by signal {res.signal}"
    return res


class ForkServerRunner(ZygoteRunner):
    """Default: compile once per job, fork a confined child per test from a warm interpreter."""

    name = "forkserver"
    mode = "fork"


class SubprocessRunner(ZygoteRunner):
    """Reference semantics: each test execs a fresh ``python3 solution.py`` (same isolation)."""

    name = "subprocess"
    mode = "exec"
