"""Interactive problems: the program and the problem's interactor, run concurrently.

``checker.type = "interactive"`` (Kattis interactor protocol: ``interactor input answer
feedback_dir [flags]``, exit 42 accept, 43 reject; ``protocol: "testlib"``: a testlib
interactor, ``interactor input tout answer``, exit 0 accept, 1/2 reject, 7 partial). Both run
confined, each as a test of its own job in the runner's zygote (``programs.run_interactive``:
the solution's stdout is the interactor's stdin and the interactor's stdout the solution's
stdin; when the interactor exits, the solution has ``pairs.PEER_GRACE_S`` to end on its
own, then it is stopped).

Verdict: the program's time limit applies to the program (CPU time), its wall-clock backstop
ends a deadlock (both sides waiting to read) as TIME_LIMIT. Then the interactor decides: a
rejection is WRONG_ANSWER; an acceptance is OK unless the program failed on its own before the
interactor finished or right after (a non-zero exit, a crash on the closed pipe, a memory
limit: the program's own verdict, as on Kattis). A program still running past the grace after
the interactor accepted and exited is stopped and has completed the interaction. An
interactor that crashes, is killed, or exits with any other code after the program had ended
was cut short by the program (one writing its reply to a closed pipe dies of it): the
program's own verdict, else WRONG_ANSWER. One that does so while the program still runs is a
broken problem: INTERNAL. (The one case left ambiguous: an interactor that crashes on text it
did not expect while the program waits for a reply. No reference program exists to tell a
broken interactor from a provoked one, so it stays INTERNAL, as on Kattis and DOMjudge.)
"""

from __future__ import annotations

from dataclasses import dataclass

from cpfleet.core.checkers import ProgramSpec
from cpfleet.core.errors import CheckerBroken, SandboxFailure
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import programs
from cpfleet.sandbox.checker_programs import (
    JUDGEMESSAGE,
    KATTIS_AC,
    KATTIS_WA,
    TESTLIB_OK,
    TESTLIB_REJECTS,
    checker_limits,
    detail_of,
    drop_session,
    failed_run,
    session_for,
    testlib_partial,
)
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult

STOPPED_BY_PEER = "stopped: the interactor exited"


@dataclass(frozen=True, slots=True)
class InteractiveOutcome:
    verdict: Verdict
    run: RunResult  # the program's run
    detail: str = ""


def run_interactive(runner: CodeRunner, spec: ProgramSpec, test_input: str, answer: str,
                    limits: Limits) -> InteractiveOutcome:
    """One test of an interactive problem; CheckerBroken when the interactor cannot judge,
    SandboxFailure when the sandbox fails."""
    interactor = session_for(runner, spec)
    solution = programs.loaded_session(runner)
    inp, ans = test_input.encode("utf-8"), answer.encode("utf-8")
    base = checker_limits(spec)
    # the interactor outlives the program's backstop however far its CPU-wait credit moves it
    # (``limits.wall_max_s``), so a deadlock ends on the program's side
    ilimits = Limits(time_s=base.time_s, memory_mb=base.memory_mb,
                     wall_s=max(base.wall_backstop_s, limits.wall_max_s + 5.0))
    collect: tuple[str, ...] = ()
    if spec.protocol == "testlib":
        argv, files = ["input", "tout/out", "answer"], {"input": inp, "answer": ans, "tout/": b""}
    else:
        argv = ["input", "answer", "feedback/", *spec.flags]
        files, collect = {"input": inp, "answer": ans, "feedback/": b""}, (JUDGEMESSAGE,)
    res = programs.run_interactive(runner, solution, limits, interactor, ilimits, argv=argv, files=files,
                                   collect=collect)
    rp, ri = res.solution, res.interactor
    if rp.status == Verdict.INTERNAL or ri.status == Verdict.INTERNAL:
        drop_session(runner)
        raise SandboxFailure(f"sandbox failure in an interactive test: {rp.error or ri.error}")
    return decide(spec, rp, ri, res.solution_ended_first)


def decide(spec: ProgramSpec, rp: RunResult, ri: RunResult, solution_ended_first: bool = False) -> InteractiveOutcome:
    """The test's verdict from both runs (see the module docstring)."""
    if rp.status == Verdict.TIME_LIMIT:
        return InteractiveOutcome(Verdict.TIME_LIMIT, rp, rp.error)
    if ri.status == Verdict.MEMORY_LIMIT and "cgroup" in ri.error:
        # one memory cgroup bounds the pair (the sum of both limits), and its OOM killer takes the
        # process with the most resident memory: the interactor, when the program holds its
        # memory in files (memfd, tmpfs) that no process's RSS shows. The overrun is the program's.
        return InteractiveOutcome(Verdict.MEMORY_LIMIT, rp, "the program and the interactor together went over "
                                  "their memory limit (the memory cgroup killed the interactor)")
    why = failed_run(spec, ri, "the interactor")
    if why:
        return _interactor_failed(rp, why, solution_ended_first)
    msg = detail_of(ri.files.get(JUDGEMESSAGE, b""), ri.stderr, ri.stdout)
    if spec.protocol == "testlib":
        accepted = ri.exit_code == TESTLIB_OK
        rejected = ri.exit_code in TESTLIB_REJECTS or testlib_partial(ri.exit_code)
    else:
        accepted = ri.exit_code == KATTIS_AC
        rejected = ri.exit_code == KATTIS_WA
    if rejected:
        return InteractiveOutcome(Verdict.WRONG_ANSWER, rp, msg or "the interactor rejected the interaction")
    if not accepted:
        return _interactor_failed(rp, f"the interactor failed (exit {ri.exit_code}): {msg[:500]}", solution_ended_first)
    if rp.error == STOPPED_BY_PEER:
        return InteractiveOutcome(Verdict.OK, rp, msg)  # the dialogue was complete and accepted
    if rp.status != Verdict.OK:
        return InteractiveOutcome(rp.status, rp, rp.error)
    if rp.exit_code != 0:
        return InteractiveOutcome(Verdict.RUNTIME_ERROR, rp, f"exit code {rp.exit_code}")
    return InteractiveOutcome(Verdict.OK, rp, msg)


def _interactor_failed(rp: RunResult, why: str, solution_ended_first: bool) -> InteractiveOutcome:
    """An interactor that ended outside its protocol. After the program had already ended, the
    program cut the dialogue short (an interactor writing its next line to a closed pipe dies of
    it): the program's own failure if it failed, else WRONG_ANSWER, never an infrastructure
    error the program could provoke by leaving early. While the program was still running, the
    interactor is broken: CheckerBroken."""
    if not solution_ended_first:
        raise CheckerBroken(why)
    early = f"the program ended before the interaction was complete, then {why}"
    if rp.status != Verdict.OK:
        return InteractiveOutcome(rp.status, rp, f"{rp.error}; {early}" if rp.error else early)
    if rp.exit_code != 0:
        return InteractiveOutcome(Verdict.RUNTIME_ERROR, rp, f"exit code {rp.exit_code}; {early}")
    return InteractiveOutcome(Verdict.WRONG_ANSWER, rp, early)
