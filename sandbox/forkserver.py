"""The runner side of the zygote: ForkServerRunner (default) and SubprocessRunner.

Both drive the same zygote (sandbox/zygote.py), so every child gets the same isolation; they
differ only in what the child does once confined: run the pre-compiled code object (fork
server), or exec a fresh ``python3 solution.py`` (subprocess: the reference semantics).
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from cpfleet.core.errors import SandboxBroken
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import zygote
from cpfleet.sandbox.cgroups import SlotCgroup
from cpfleet.sandbox.runner import CodeRunner, IsolationReport, Limits, RunResult
from cpfleet.sandbox.slots import Slot, claim_slot

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
REPLY_GRACE_S = 10.0  # how long past its own deadline we wait for the job init before declaring it broken


CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": "/box"}


def zygote_command() -> list[str]:
    """``python -I -S``: no site, so no .pth hooks (editable installs, setuptools' shims)
    import dozens of modules into the process that every test forks from.

    Without site there is no editable-install finder either, and ``cpfleet/__init__.py`` is
    not wanted in the zygote, so the boot line registers bare ``cpfleet`` and
    ``cpfleet.sandbox`` package objects whose ``__path__`` is this folder: the zygote's own
    imports resolve there and nothing else of the project is loaded or on ``sys.path``."""
    sandbox_dir = os.path.dirname(os.path.abspath(zygote.__file__))
    boot = (
        "import sys; M = type(sys); top = M('cpfleet'); top.__path__ = []; "
        f"sub = M('cpfleet.sandbox'); sub.__path__ = [{sandbox_dir!r}]; top.sandbox = sub; "
        "sys.modules.update({'cpfleet': top, 'cpfleet.sandbox': sub}); "
        "import cpfleet.sandbox.zygote as z; z.main()"
    )
    return [sys.executable, "-I", "-S", "-c", boot]


class ZygoteRunner(CodeRunner):
    mode = "fork"

    def __init__(self, isolate: bool = True, python: str | None = None) -> None:
        self._isolate = isolate
        self._python = python or os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctrl: socket.socket | None = None
        self._job: Job | None = None
        self._report = IsolationReport()
        self._cgroup: SlotCgroup | None = None
        self._slot: Slot = claim_slot()
        try:
            self._cgroup = SlotCgroup(f"slot-{self._slot.index}") if isolate else None
            self._ooms_seen = self._cgroup.oom_kills() if self._cgroup is not None else 0
            self._start_zygote()
            self._self_test()
        except BaseException:
            # a failed start is retried by the caller (a worker tries again on its next job):
            # whatever this attempt holds (zygote, slot lock, cgroup fds) goes back now
            self.close()
            raise

    # -- zygote lifecycle -------------------------------------------------------------
    def _start_zygote(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [*zygote_command(), str(theirs.fileno()), str(os.getpid())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                env=CHILD_ENV,  # never the worker's: it holds the broker URL and its password
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._ctrl = ours
        cgroup_fds = self._cgroup.open_join_fds() if self._cgroup is not None else []
        try:
            zygote.send(ours, {"uid": self._slot.uid, "gid": self._slot.gid, "python": self._python,
                               "isolate": self._isolate}, cgroup_fds)
        finally:
            for fd in cgroup_fds:
                os.close(fd)
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
        r, _, _ = select.select([sock], [], [], timeout)
        if not r:
            raise SandboxBroken(f"no answer from the sandbox within {timeout:.0f}s")
        msg, fds = zygote.recv(sock)
        for fd in fds:
            os.close(fd)
        if msg is None:
            raise SandboxBroken("the sandbox process exited")
        return msg

    def _self_test(self) -> None:
        """Run a probe through the whole path and record which layers really hold. The network
        probe only targets a loopback listener of our own: a self-test must never send traffic
        off the machine, even when the network namespace is missing."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        probe = (
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
        try:
            err = self.load(probe)
            res = self.run(b"", Limits(time_s=5))
        finally:
            listener.close()
        out = res.stdout.decode(errors="replace").split()
        layers = self._report.layers
        if err or res.status != Verdict.OK:
            layers["self_test"] = False
            self._report.notes.append(f"self-test failed: {err or res.status} {res.error} {res.stderr[-300:]!r}")
        else:
            layers["self_test"] = True
            if "net-open" in out:
                layers["netns"] = False
                self._report.notes.append("self-test reached a loopback port: no network isolation")
            if layers.get("uid_drop") and f"uid={self._slot.uid}" not in out:
                layers["uid_drop"] = False
                self._report.notes.append(f"self-test ran as {out}, not uid {self._slot.uid}")
            if layers.get("pidns") and not any(o.startswith("pid=") and int(o[4:]) < 10 for o in out):
                layers["pidns"] = False
            if layers.get("seccomp") and "seccomp=2" not in out:
                layers["seccomp"] = False
                self._report.notes.append("self-test ran without its seccomp filter")
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
    def slot(self) -> Slot:
        return self._slot

    def load(self, source: str) -> str | None:
        self._end_job()
        if self._proc is None or self._proc.poll() is not None:
            self._restart_zygote()
        assert self._ctrl is not None
        job = Job()
        memfd = os.memfd_create("solution", os.MFD_CLOEXEC)
        try:
            # surrogatepass: a lone surrogate becomes invalid UTF-8, i.e. a compile error, not INTERNAL
            _write_all(memfd, source.encode("utf-8", errors="surrogatepass"))
            zygote.send(self._ctrl, {"op": "job", "mode": self.mode}, [job.theirs.fileno(), memfd])
            job.theirs.close()  # the init holds it now: its death alone is our EOF
            reply = self._recv_within(job.sock, 60.0)
        except (OSError, SandboxBroken) as e:
            job.close()
            self._restart_zygote()
            if isinstance(e, SandboxBroken):
                raise
            raise SandboxBroken(f"starting the job failed: {type(e).__name__}: {e}") from e
        finally:
            os.close(memfd)
        if "pidns" in reply.get("layers", {}):
            self._report.layers.setdefault("pidns", bool(reply["layers"]["pidns"]))
        if not reply["ok"]:
            job.close()
            return str(reply["error"]) or "SyntaxError"
        self._job = job
        return None

    def _end_job(self) -> None:
        if self._job is not None:
            self._job.close()  # the job init sees EOF and exits; its namespace dies with it
            self._job = None

    def run(self, stdin: bytes, limits: Limits) -> RunResult:
        if self._job is None:
            return RunResult(Verdict.INTERNAL, error="run() without a successfully loaded program")
        try:
            return self._run(stdin, limits)
        except (OSError, SandboxBroken) as e:
            self._end_job()
            return RunResult(Verdict.INTERNAL, error=f"sandbox failure: {e}")

    def _run(self, stdin: bytes, limits: Limits) -> RunResult:
        assert self._job is not None
        mem = limits.memory_mb << 20
        if self._cgroup is not None and self._cgroup.ok:
            self._cgroup.set_limits(mem + CGROUP_SLACK_BYTES, limits.nproc)
        cpu_rlimit = cpu_rlimit_s(limits)
        child_limits = {"cpu_s": cpu_rlimit, "as_bytes": mem, "fsize_bytes": limits.file_size_mb << 20,
                        "nproc": limits.nproc, "nofile": limits.nofile}
        job = self._job
        wall = min(limits.wall_backstop_s, limits.wall_max_s)
        stdio = TestStdio(stdin)
        try:
            run = {"op": "run", "limits": child_limits, "wall_s": wall, "wall_max_s": limits.wall_max_s,
                   "cpu_limit_s": limits.time_s}
            zygote.send(job.sock, run, stdio.child_ends)
            stdio.sent()
            res, done = self._drain(job, stdio, limits, limits.wall_max_s + REPLY_GRACE_S)
        finally:
            stdio.close()
        oom = False
        if self._cgroup is not None and self._cgroup.ok:
            # read after every test: the OOM killer may pick a grandchild, not the main process
            ooms = self._cgroup.oom_kills()
            oom, self._ooms_seen = ooms > self._ooms_seen, ooms
        return _judge_run(res, done, limits, cpu_rlimit, oom)

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
        if res.stderr_truncated:
            res.stderr += b"\n...[stderr truncated]...\n" + err_tail
        return res, done

    def close(self) -> None:
        self._stop_zygote()
        if self._cgroup is not None:
            self._cgroup.close()
        self._slot.release()


class Job:
    """The runner's end of one job's control channel (the init holds the other)."""

    def __init__(self) -> None:
        self.sock, self.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

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
            memfd = self._own(os.memfd_create("stdin", os.MFD_CLOEXEC))
            _write_all(memfd, stdin)  # the file offset, which the child's fd 0 shares, stays 0
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


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` at offset 0 with pwrite, leaving the file offset where it was (0)."""
    view = memoryview(data)
    while view:
        view = view[os.pwrite(fd, view, len(data) - len(view)):]


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
    elif tail.startswith(b"MemoryError"):
        res.status, res.error = Verdict.MEMORY_LIMIT, f"memory limit {limits.memory_mb} MB: MemoryError"
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
