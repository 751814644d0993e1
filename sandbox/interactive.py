"""Interactive problems: the program and the problem's interactor, run concurrently.

``checker.type = "interactive"`` (Kattis interactor protocol: ``interactor input answer
feedback_dir [flags]``, exit 42 accept, 43 reject; ``protocol: "testlib"``: a testlib
interactor, ``interactor input tout answer``, exit 0 accept, 1/2 reject, 7 partial). Both run
confined, each in its own zygote and sandbox uid (the program in the job's runner, the
interactor in the checker runner, sandbox/checker_programs.py), with two pipes crossed: the
program's stdout is the interactor's stdin and the interactor's stdout the program's stdin. We
hold no end of those pipes, so when either side exits the other sees end of file.

Verdict: the program's time limit applies to the program (CPU time), its wall-clock backstop
ends a deadlock (both sides waiting to read) as TIME_LIMIT. Then the interactor decides: a
rejection is WRONG_ANSWER; an acceptance is OK only if the program itself exited 0 within its
limits (else the program's own verdict: RUNTIME_ERROR, MEMORY_LIMIT ...). An interactor that
crashes, is killed, or exits with any other code is a broken problem: INTERNAL.
"""

from __future__ import annotations

import os
import select
import time
from dataclasses import dataclass
from typing import Any

from cpfleet.core.checkers import ProgramSpec
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import zygote
from cpfleet.sandbox.checker_programs import (
    KATTIS_AC,
    KATTIS_WA,
    TESTLIB_OK,
    TESTLIB_PARTIAL,
    TESTLIB_PE,
    TESTLIB_WA,
    CheckerBroken,
    ProgramRunner,
    checker_limits,
    detail_of,
    failed_run,
)
from cpfleet.sandbox.forkserver import REPLY_GRACE_S, SandboxBroken, ZygoteRunner, _write_all
from cpfleet.sandbox.runner import Limits, RunResult

READ_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class InteractiveOutcome:
    verdict: Verdict
    run: RunResult  # the program's run
    detail: str = ""


class _Side:
    """One of the two processes: its runner, its stderr pipe, its end-of-test report."""

    def __init__(self, runner: ZygoteRunner, err_r: int, limits: Limits, keep: int) -> None:
        self.runner = runner
        self.err_r = err_r
        self.limits = limits
        self.keep = keep
        self.err = bytearray()
        self.done: dict[str, Any] | None = None
        self.cpu_rlimit = 1

    def read_err(self) -> bool:
        try:
            chunk = os.read(self.err_r, READ_CHUNK)
        except BlockingIOError:
            return False
        if chunk and len(self.err) < self.keep:
            self.err += chunk[: self.keep - len(self.err)]
        return bool(chunk)


def run_interactive(
    runner: ZygoteRunner, programs: ProgramRunner, spec: ProgramSpec, test_input: str, answer: str, limits: Limits
) -> InteractiveOutcome:
    """One test of an interactive problem; CheckerBroken when the interactor cannot judge,
    SandboxBroken/OSError when the sandbox fails (the caller's infrastructure error)."""
    programs.ensure(spec)
    owned: list[int] = []

    def own(fd: int) -> int:
        owned.append(fd)
        return fd

    try:
        to_prog_r, to_prog_w = (own(fd) for fd in os.pipe2(os.O_CLOEXEC))
        to_int_r, to_int_w = (own(fd) for fd in os.pipe2(os.O_CLOEXEC))
        perr_r, perr_w = (own(fd) for fd in os.pipe2(os.O_CLOEXEC))
        ierr_r, ierr_w = (own(fd) for fd in os.pipe2(os.O_CLOEXEC))
        for r in (perr_r, ierr_r):
            os.set_blocking(r, False)
        files = []
        for content in (test_input.encode("utf-8"), b"" if spec.protocol == "testlib" else answer.encode("utf-8"),
                        answer.encode("utf-8") if spec.protocol == "testlib" else b""):
            fd = own(os.memfd_create("file", os.MFD_CLOEXEC))
            _write_all(fd, content)
            files.append(fd)
        if spec.protocol == "testlib":
            argv = ["/dev/fd/3", "/dev/fd/4", "/dev/fd/5"]  # input, tout (written), answer
            links: list[tuple[str, int]] = []
        else:
            argv = ["/dev/fd/3", "/dev/fd/4", "feedback/", *spec.flags]
            links = [("feedback/judgemessage.txt", 5)]
        ilimits = checker_limits(spec)
        # the interactor outlives the program's backstop, so a deadlock ends on the program's side
        ilimits = Limits(time_s=ilimits.time_s, memory_mb=ilimits.memory_mb,
                         wall_s=max(ilimits.wall_backstop_s, limits.wall_backstop_s + 5.0))
        prog = _Side(runner, perr_r, limits, limits.stderr_keep_bytes)
        inter = _Side(programs, ierr_r, ilimits, 64 * 1024)
        prog.cpu_rlimit = runner.begin([to_prog_r, to_int_w, perr_w], limits, [])
        inter.cpu_rlimit = programs.begin([to_int_r, to_prog_w, ierr_w, *files], ilimits, argv, links)
        for fd in (to_prog_r, to_prog_w, to_int_r, to_int_w, perr_w, ierr_w):
            owned.remove(fd)
            os.close(fd)  # the inits hold them now: only the two processes keep the pipes open
        _wait_both(prog, inter, max(limits.wall_backstop_s, ilimits.wall_backstop_s) + REPLY_GRACE_S)
        feedback = os.pread(files[2], 4096, 0) if spec.protocol != "testlib" else b""
    finally:
        for fd in owned:
            os.close(fd)
    assert prog.done is not None and inter.done is not None
    rp = runner.conclude(RunResult(Verdict.OK, stderr=bytes(prog.err)), prog.done, limits, prog.cpu_rlimit)
    ri = programs.conclude(RunResult(Verdict.OK, stderr=bytes(inter.err)), inter.done, ilimits, inter.cpu_rlimit)
    return _decide(spec, rp, ri, feedback)


def _wait_both(prog: _Side, inter: _Side, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    sides = {prog.runner.job_socket.fileno(): prog, inter.runner.job_socket.fileno(): inter}
    errs = {prog.err_r: prog, inter.err_r: inter}
    poller = select.poll()
    for fd in (*sides, *errs):
        poller.register(fd, select.POLLIN)
    while prog.done is None or inter.done is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SandboxBroken("a job init did not report the interactive test's end")
        for fd, _ in poller.poll(int(remaining * 1000) + 1):
            if fd in sides:
                side = sides[fd]
                msg, extra = zygote.recv(side.runner.job_socket)
                for x in extra:
                    os.close(x)
                if msg is None:
                    raise SandboxBroken("a job init exited during an interactive test")
                side.done = msg
                poller.unregister(fd)
            elif not errs[fd].read_err():
                poller.unregister(fd)
    for side in (prog, inter):  # every process is dead: what is left in the pipes is all there is
        while side.read_err():
            pass


def _decide(spec: ProgramSpec, rp: RunResult, ri: RunResult, feedback: bytes) -> InteractiveOutcome:
    if rp.status == Verdict.INTERNAL:
        raise SandboxBroken(f"the program's side of the interactive test failed: {rp.error}")
    if rp.status == Verdict.TIME_LIMIT:
        return InteractiveOutcome(Verdict.TIME_LIMIT, rp, rp.error)
    why = failed_run(spec, ri)
    if why:
        raise CheckerBroken(why.replace(f"the {spec.kind} checker", "the interactor"))
    msg = detail_of(feedback, ri.stderr, ri.stdout)
    if spec.protocol == "testlib":
        accepted = ri.exit_code == TESTLIB_OK
        rejected = ri.exit_code in (TESTLIB_WA, TESTLIB_PE, TESTLIB_PARTIAL)
    else:
        accepted = ri.exit_code == KATTIS_AC
        rejected = ri.exit_code == KATTIS_WA
    if rejected:
        return InteractiveOutcome(Verdict.WRONG_ANSWER, rp, msg or "the interactor rejected the interaction")
    if not accepted:
        raise CheckerBroken(f"the interactor failed (exit {ri.exit_code}): {msg[:500]}")
    if rp.status != Verdict.OK:
        return InteractiveOutcome(rp.status, rp, rp.error)
    if rp.exit_code != 0:
        return InteractiveOutcome(Verdict.RUNTIME_ERROR, rp, f"exit code {rp.exit_code}")
    return InteractiveOutcome(Verdict.OK, rp, msg)
