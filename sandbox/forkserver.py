"""The runner side of the zygote: ZygoteRunner, and ForkServerRunner (the default runner).

A runner owns one sandbox slot (uid, cgroup) and the zygote that forks its jobs
(sandbox/zygote.py): it starts and self-tests the zygote and restarts it when it dies, keeps a
spare job ready between jobs, loads programs into jobs, and runs their tests: it sends a test's
fds and limits, drains and caps its output, and maps what the job init reports to a verdict.
The pieces apart: starting a zygote and its self-test (sandbox/zygote_process.py), the job's
channel and fds (sandbox/jobs.py), the verdict mapping (sandbox/verdicts.py), interactive pairs
(sandbox/pairs.py), PyPy's own zygote (sandbox/pypy_zygote.py) and the subprocess runner, whose
tests exec a fresh interpreter (sandbox/subprocess_runner.py). The module is 639 lines: ZygoteRunner stays one class
of ~505 lines: supervision, the spare job and a test's run share the slot, the zygote, the
loaded job and the restart on failure, which split apart would each need all of.
"""

from __future__ import annotations

import logging
import marshal
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cpfleet.core.errors import SandboxBroken
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import pairs, zygote
from cpfleet.sandbox.capacity import MemoryCapacity, memory_capacity, slots_memory
from cpfleet.sandbox.cgroups import SlotCgroup
from cpfleet.sandbox.jobinit import LOAD_ANSWER_S
from cpfleet.sandbox.jobs import (
    READ_CHUNK,
    REPLY_GRACE_S,
    Job,
    TestStdio,
    elf_load_bytes,
    files_memfd,
    send_source,
)
from cpfleet.sandbox.languages.base import JVM_AS_FALLBACK_MB
from cpfleet.sandbox.runner import CodeRunner, IsolationReport, Limits, ProgramImage, RunResult
from cpfleet.sandbox.slots import Slot, claim_slot
from cpfleet.sandbox.verdicts import (
    OOM_OUTSIDE,
    OOM_OWN,
    cpu_rlimit_s,
    judge_run,
    outside_oom_message,
    wall_fields,
)
from cpfleet.sandbox.zygote_process import (
    check_self_test,
    pch_root,
    recv_within,
    refuse_interpreter_under_tmp,
    refuse_missing_interpreter,
    remove_tree,
    self_test_probe,
    site_packages,
    solution_python_dirs,
    spawn_zygote,
    stop_zygote,
    toolchain_dirs,
)

if TYPE_CHECKING:
    from cpfleet.sandbox.pypy_zygote import PyPyZygote

log = logging.getLogger("cpfleet.sandbox")

STDERR_TAIL = 4096
# the job's cgroup allows the problem's memory limit for ALL its processes together, plus room
# for the kernel's own charges (pipe buffers, page tables); the test directory's tmpfs counts inside it
CGROUP_SLACK_BYTES = 32 << 20

# CPFLEET_FORK_AHEAD: whether a job's init forks each next test's child while the runner judges
# the last test ("1"), never ("0"), or only while the machine has a CPU to spare ("auto")
FORK_AHEAD_ENV = "CPFLEET_FORK_AHEAD"
FORK_AHEAD_SETTINGS = ("auto", "1", "0")


def _warn(msg: str) -> None:
    """Once on stderr: through logging where a handler already writes there (a worker's log),
    else printed (``cpfleet judge``) and logged only to handlers of the caller's own (logging's
    last-resort handler would print it a second time)."""
    streams = (sys.stderr, sys.__stderr__)
    if any(isinstance(h, logging.StreamHandler) and h.stream in streams for h in logging.getLogger().handlers):
        log.warning(msg)
        return
    print(f"cpfleet: WARNING: {msg}", file=sys.stderr)
    if log.hasHandlers():
        log.warning(msg)


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


class ZygoteRunner(CodeRunner):
    mode = "fork"

    def __init__(self, isolate: bool = True, python: str | None = None, fork_ahead: str | None = None) -> None:
        self._isolate = isolate
        self._fork_ahead = fork_ahead_setting(fork_ahead)
        # CPFLEET_SOLUTION_PYTHON (e.g. a venv with numpy): the zygote itself runs under it, so
        # fork-mode tests import its packages, and exec mode runs it (not resolved: a venv's
        # python is a link whose own path is what makes it the venv)
        self._solution_python = python or os.environ.get("CPFLEET_SOLUTION_PYTHON") or None
        if isolate:  # the more telling advice first: a venv under /tmp exists, yet cannot be shown
            refuse_interpreter_under_tmp(self._solution_python)
        refuse_missing_interpreter(self._solution_python)
        self._python = self._solution_python or os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctrl: socket.socket | None = None
        self._scratch = ""  # the zygote's scratch directory (spawn_zygote), removed with it
        self._job: Job | None = None
        self._spare: Job | None = None  # the next job's processes, made ahead (see prepare_next)
        # PyPy programs' fork server (sandbox/pypy_zygote.py): started by the first PyPy job;
        # why it could not be, once it could not (PyPy programs then take the exec path)
        self._pypy: PyPyZygote | None = None
        self._pypy_refused = ""
        self._report = IsolationReport()
        self.memory_capacity: MemoryCapacity = memory_capacity()
        self._cgroup: SlotCgroup | None = None
        self._slots_bytes: int | None = None  # the bound on all slots together (``cpfleet/``)
        self._slot: Slot = claim_slot()
        try:
            slots = slots_memory()
            self._slots_bytes = None if slots is None else slots[0] << 20
            self._cgroup = SlotCgroup(self._slot.cgroup_name, self._slots_bytes) if isolate else None
            if self._cgroup is not None and self._cgroup.slots_limit_error:
                log.warning("%s", self._cgroup.slots_limit_error)
            self._ooms_seen = self._cgroup.oom_kills() if self._cgroup is not None else 0
            self._pch_host_dir = pch_root()
            self._start_zygote()
            self._self_test()
        except BaseException:
            # a failed start is retried by the caller (a worker tries again on its next job):
            # whatever this attempt holds (zygote, slot lock, cgroup fds) goes back now
            self.close()
            raise

    # -- zygote lifecycle -------------------------------------------------------------
    def _start_zygote(self) -> None:
        cgroup_fds, cpu_counted = self._cgroup.open_zygote_fds() if self._cgroup is not None else ([], False)
        try:
            self._proc, ours, self._scratch = spawn_zygote(self._solution_python, {
                "uid": self._slot.uid, "gid": self._slot.gid, "python": self._python,
                "site_packages": site_packages(self._solution_python),
                "python_dirs": solution_python_dirs(self._solution_python), "tool_dirs": toolchain_dirs(),
                "isolate": self._isolate, "pch_dir": self._pch_host_dir, "cpu_usage_fd": cpu_counted}, cgroup_fds)
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
        stop_zygote(self._proc, self._ctrl)
        self._proc, self._ctrl = None, None
        if self._cgroup is not None and not self._report.layers.get("pidns"):
            # Without a pid namespace, a test interrupted by this stop (a soft time limit resets
            # the runner mid-test) leaves its orphans to the host once the job init dies: the
            # slot's cgroup holds them all. With one, the namespace's end already killed them.
            self._cgroup.kill_all()
        if self._scratch:  # after the orphans: none is left writing in it while it goes
            remove_tree(self._scratch)
            self._scratch = ""

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
            msg = (f"SANDBOX ISOLATION INCOMPLETE ({self.name}): missing {missing}; " + "; ".join(self._report.notes)
                   + "; for every layer run as root, or in a container with the capabilities docker-compose.yml "
                   "grants (docs/security.md)")
            _warn(msg)

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
                refuse_interpreter_under_tmp(pypy)
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
            _warn(f"no PyPy fork server ({self._pypy_refused}): PyPy programs start a fresh PyPy per test")

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
            send_source(job.sock, {"op": "load"}, [], payload, fn_name)
            return self._recv_within(job.sock, LOAD_ANSWER_S)
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
            send_source(self._ctrl, {"op": "job", "mode": mode}, [job.theirs.fileno()], payload, fn_name)
            job.theirs.close()  # the init holds it now: its death alone is our EOF
            reply = self._recv_within(job.sock, LOAD_ANSWER_S)
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

    def memory_refusal(self, *limits: Limits, overhead_bytes: int = 0) -> str | None:
        """Why a run under ``limits`` (one slot's cgroup holds them all) must not start here:
        the memory limits a problem or a caller stated, together, exceed what this worker may
        give (sandbox/capacity.py), or the slot's whole limit (theirs, the runtimes' allowance
        ``overhead_bytes``, the sandbox's slack and what the slot holds stuck) exceeds the bound
        on all slots together: a program going over its own limit would meet that bound first,
        and its own MEMORY_LIMIT would read as the host's shortfall (INTERNAL). Checked before
        every run, so it holds for every path that states a limit (a test, a checker, an
        interactor and its program, a run job)."""
        stated = [lim.memory_mb for lim in limits if lim.stated]
        if not stated:
            return None
        what = "the stated memory limit" if len(stated) == 1 else \
            f"the memory limits of the program and the interactor together ({' + '.join(map(str, stated))} MB)"
        refusal = self.memory_capacity.refusal(sum(stated), what)
        if refusal is not None or self._slots_bytes is None or self._cgroup is None or not self._cgroup.ok:
            return refusal
        slot = (sum(lim.memory_mb for lim in limits) << 20) + overhead_bytes + CGROUP_SLACK_BYTES \
            + self._cgroup.stuck_bytes
        if slot <= self._slots_bytes:
            return None
        return (f"{what}: {sum(stated)} MB needs a slot cgroup of {slot >> 20} MB here (with the runtime's and the "
                f"sandbox's allowance), but all slots together may hold at most {self._slots_bytes >> 20} MB: not run, "
                "as a program over its own limit would meet that bound first and its MEMORY_LIMIT would read as the "
                "host's shortfall; judge this problem on a larger worker")

    def _set_cgroup(self, memory_bytes: int, nproc: int) -> bool:
        if self._cgroup is None or not self._cgroup.ok:
            return False
        self._cgroup.await_memory_settled()  # what the last run left in flight is not this run's
        # nor is what nothing frees: on top of the limit, or a program would be stopped short of
        # its own limit (v2: a MEMORY_LIMIT it did not earn; v1: the limit write refused, EBUSY)
        self._cgroup.set_limits(memory_bytes + CGROUP_SLACK_BYTES + self._cgroup.stuck_bytes, nproc)
        self._cgroup.mark_run_start()
        return True

    def child_limits(self, job: Job, limits: Limits, cgroup_ok: bool) -> tuple[dict[str, int], int]:
        """The rlimits of one test of ``job``, and its CPU rlimit."""
        mem = limits.memory_mb << 20
        if job.memory_model == "cgroup":
            # no cgroup: a loose bound on the address space, where the heap and the main
            # thread's stack (languages/java.py: -Xss) may each reserve the memory limit
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
        refusal = self.memory_refusal(limits, overhead_bytes=job.extra_cgroup_bytes)
        if refusal is not None:
            return RunResult(Verdict.INTERNAL, error=refusal)
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
                files_fd = files_memfd(files)
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
        oom = self._new_oom()
        if oom == OOM_OUTSIDE:
            return RunResult(Verdict.INTERNAL, error=outside_oom_message(limits.memory_mb))
        return judge_run(res, done, limits, cpu_rlimit, oom == OOM_OWN, allowance_bytes=job.extra_cgroup_bytes)

    def run_pair(self, job_a: Job, limits_a: Limits, job_b: Job, limits_b: Limits, *,
                 argv: list[str], files: Mapping[str, bytes] | None,
                 collect: Sequence[str] = ()) -> tuple[RunResult, RunResult, bool, bool]:
        """A test of ``job_a`` and one of ``job_b`` at once, connected by pipes (an interactive
        problem: sandbox/pairs.py)."""
        return pairs.run_pair(self, job_a, limits_a, job_b, limits_b, argv=argv, files=files, collect=collect)

    def _new_oom(self) -> str:
        """Whether the OOM killer killed something in the slot since the last look (read after
        every test: it may pick a grandchild, not the main process): ``OOM_OWN`` when the slot's
        own limit was reached meanwhile, ``OOM_OUTSIDE`` when it was not (a bound above the slot
        or the host ran short: not the test's doing), "" for no kill."""
        if self._cgroup is None or not self._cgroup.ok:
            return ""
        ooms = self._cgroup.oom_kills()
        killed, self._ooms_seen = ooms > self._ooms_seen, ooms
        if not killed:
            return ""
        return OOM_OWN if self._cgroup.limit_reached() else OOM_OUTSIDE

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


class ForkServerRunner(ZygoteRunner):
    """Default: compile once per job, fork a confined child per test from a warm interpreter."""

    name = "forkserver"
    mode = "fork"


