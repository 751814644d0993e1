"""Interactive problems: the program and the problem's interactor, run concurrently.

``checker.type = "interactive"`` (Kattis interactor protocol: ``interactor input answer
feedback_dir [flags]``, exit 42 accept, 43 reject; ``protocol: "testlib"``: a testlib
interactor, ``interactor input tout answer``, exit 0 accept, 1/2 reject, 7 partial). Both run
confined, each as a test of its own job in the runner's zygote (``programs.run_interactive``:
the solution's stdout is the interactor's stdin and the interactor's stdout the solution's
stdin; when the interactor exits, the solution has ``pairs.PEER_GRACE_S`` to end on its
own, then it is stopped). The solution's side ends as any test does, when the last process it
started ends, within its limits (``police.await_the_rest``): what a process it forked flushes
at its exit (``print(3); os.fork()`` writes "3" twice) reaches the interactor as it does from
``python3 solution.py`` on real pipes, deterministically, and the interactor sees the end of its
input only then; a process it left running with the pipe open is stopped at its CPU limit or
wall-clock backstop (TIME_LIMIT) or by the interactor's end and the grace above. The
interactor's side ends with its main process (what it left is killed then): its exit status and
feedback are its verdict, and a child it left (paused forever) must not hold the dialogue open.

Verdict: the program's time limit applies to the program (CPU time), its wall-clock backstop
ends a deadlock (both sides waiting to read) as TIME_LIMIT, once the reference solution below
has shown that the interactor answers at all (one that stalls its dialogue too is broken).
Then the interactor decides: a rejection is WRONG_ANSWER; an acceptance is OK unless the program
failed on its own before the interactor finished or right after (a non-zero exit, a crash on
the closed pipe, a memory limit: the program's own verdict, as on Kattis). A program still running past the grace after
the interactor accepted and exited is stopped and has completed the interaction. An
interactor that crashes, is killed, or exits with any other code after the program had ended
was cut short by the program (one reading a line the program never sent): the
program's own verdict, else WRONG_ANSWER; unless the interactor fails the reference solution
below too, since which end is seen first is a race when both end within a moment.

An interactor that fails so (a crash, its own time or output limit, an exit outside its
protocol, the pair's memory cgroup killing it) while the program still runs is either broken or
provoked: a program can send text
a dataset interactor does not parse (``int(input())``) or make a slow one run out of time, then
wait. Kattis and DOMjudge call both a judge error; here that would be INTERNAL (reward None),
an escape from a 0 a policy could learn. So the interactor is vouched for as ``run_checker``
vouches for a checker with the expected answer: the problem's correct solution (``Reference``,
chosen by sandbox/judging.py) is run against it on the same test with the problem's limits.
If the interactor accepts that dialogue, it works on this test and its failure was the
program's doing: WRONG_ANSWER, naming it (non-deterministic when the interactor's own time or
memory limit decided it, so never cached). If it fails or rejects the reference too, the
problem is broken: CheckerBroken (INTERNAL), naming both; so too when the pair's memory cgroup
killed any process during the reference's accepted dialogue (a child the interactor forked: the
OOM killer takes the largest process, so the interactor overran there as well and which process
died was the moment's choice, never the program's doing).

With no correct solution that can run here (a Kattis package prepared without
``--with-solutions``, a hand-written record), the interactor is run alone on the test instead
(``_alone``): its input a pipe held open and never written (``SILENT``), for at least
``ALONE_MIN_S`` and twice as long as it ran before failing. A program reaches its interactor
only through what it writes and through closing its output; an interactor that fails outside its
protocol with neither, before the silent side is stopped, fails on its own: CheckerBroken
(INTERNAL), naming it. Otherwise its failure needed the program's output, and no reference says
the program's output was fine: the program's WRONG_ANSWER, saying no reference could vouch for
the interactor (non-deterministic when the interactor's own time or memory limit decided it, or
when alone it computed for half the wait or more, so more time might have shown it failing on its
own), and a warning in the worker's log. Whether the interactor read a byte of the program's output cannot
be read soundly from outside (a pipe keeps no count; ``/proc/<pid>/io`` counts every read and
write of a process, files included, and not splice or vmsplice), so the run alone answers the
question instead: what happens with nothing to read. A broken interactor that fails only on a
program's (valid) output thus costs every program its reward rather than masking it; the
operator sees it in the log, and ``cpfleet prepare`` names such problems. An interactor that
gives up on its own after some seconds with nothing to read is INTERNAL for a program silent that
long, as for a correct program thinking that long (neither wrote anything it could fail on); its
failure alone excuses only a failure on the program's dialogue no sooner than it came (within
``ALONE_SLACK_S``): one the program's output brought sooner is its own, however long it was waited. The run alone is
remembered per process (``ALONE``: a failure on its own when no limit decided it, else how long
it was waited for), so provoking it again on a test costs no further run there unless it
must be waited for longer.
The vouch for (interactor, test, reference, limits) is
remembered in the process (``VOUCHES``, a failed one too), so however often a program provokes
it the reference runs at most once per test per process. It runs as a job of its own beside the
loaded program, which stays loaded for the job's next tests. A testlib interactor's FAIL (exit
3) while the program runs is decided the same way, as for checkers: an interactor that FAILs on
what a program sent (a guess past the bound it announced, an answer better than the jury's) but
works with the reference is the program's WRONG_ANSWER, never a masked sample.
"""
from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import NoReturn

import msgpack

from cpfleet.core.checkers import ProgramSpec
from cpfleet.core.errors import CheckerBroken, SandboxFailure
from cpfleet.core.lru import LRU
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages, programs
from cpfleet.sandbox.checker_programs import (
    JUDGEMESSAGE,
    KATTIS_AC,
    KATTIS_WA,
    TESTLIB_FAIL,
    TESTLIB_OK,
    TESTLIB_REJECTS,
    checker_limits,
    detail_of,
    drop_session,
    failed_run,
    session_for,
    testlib_partial,
)
from cpfleet.sandbox.runner import CodeRunner, Limits, ProgramImage, RunResult

STOPPED_BY_PEER = "stopped: the interactor exited"
VOUCHED = "the interactor failed on this program's dialogue (it accepts the reference solution)"
UNVOUCHED = ("the interactor failed on this program's dialogue (no reference solution could vouch for it, "
             "and with no output from a program it does not fail)")
# the interactor alone (``_alone``): a program that writes nothing, keeps its output open, and
# drains the interactor's; it is waited for at least ALONE_MIN_S, and twice as long as the
# interactor ran before it failed on the program's dialogue, plus ALONE_SLACK_S
SILENT = "import sys, time\nwhile sys.stdin.buffer.read1(65536):\n    pass\ntime.sleep(86400)\n"
SILENT_MEMORY_MB = 256
ALONE_MIN_S = 2.0
ALONE_SLACK_S = 0.5
log = logging.getLogger("cpfleet.sandbox")


@dataclass(frozen=True, slots=True)
class InteractiveOutcome:
    verdict: Verdict
    run: RunResult  # the program's run
    detail: str = ""
    deterministic: bool = True  # False: the interactor's own time or memory limit decided it
    oom_killed: bool = False  # the pair's memory cgroup killed a process during the dialogue


@dataclass(frozen=True, slots=True)
class Reference:
    """A correct solution of the problem that can run here, to vouch for the interactor
    (``source`` empty: there is none, and ``missing`` says why)."""

    language: str = ""
    source: str = ""
    limits: Limits = Limits()
    missing: str = ""


class InteractorFailed(CheckerBroken):
    """The interactor ended outside its protocol: broken, unless it accepts the reference
    solution's dialogue on the same test (``run_interactive``). ``early``: the program's own
    outcome when its end was seen first (see ``_interactor_failed``)."""

    def __init__(self, why: str, rp: RunResult, ri: RunResult, early: InteractiveOutcome | None = None) -> None:
        super().__init__(why)
        self.run = rp
        self.interactor_wall_s = ri.wall_s
        self.early = early
        self.deterministic = ri.status not in (Verdict.TIME_LIMIT, Verdict.MEMORY_LIMIT)


class Vouches:
    """Per process, bounded: whether the interactor worked on a test's reference dialogue
    ("": it accepted it; otherwise why not), by ``vouch_key``. ``runs`` counts reference runs."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._seen: LRU[str, str] = LRU(max_entries)
        self._lock = threading.Lock()
        self.runs = 0

    def get(self, key: str) -> str | None:
        with self._lock:
            return self._seen.get(key)

    def clear(self) -> None:
        """Forget every vouch (a process whose tools changed, a test starting afresh)."""
        with self._lock:
            self._seen.clear()

    def put(self, key: str, why: str) -> None:
        with self._lock:
            self._seen.put(key, why)


VOUCHES = Vouches()


class AloneRuns:
    """Per process, bounded: what the interactor did alone on a test (``_alone``), by key: why
    it failed on its own and when, or "" and how long it was waited for. ``runs`` counts
    the runs; ``unvouched`` the failures charged to a program with no reference to vouch (the
    worker's metric ``cpfleet_interactor_unvouched_failures``, workers/metrics.py)."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._seen: LRU[str, tuple[str, float]] = LRU(max_entries)
        self._lock = threading.Lock()
        self.runs = 0
        self.unvouched = 0

    def count_unvouched(self) -> None:
        with self._lock:
            self.unvouched += 1

    def get(self, key: str) -> tuple[str, float] | None:
        with self._lock:
            return self._seen.get(key)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()

    def put(self, key: str, seen: tuple[str, float]) -> None:
        with self._lock:
            self._seen.put(key, seen)


ALONE = AloneRuns()


def vouch_key(spec: ProgramSpec, reference: Reference, inp: bytes, ans: bytes) -> str:
    """What decides a vouch: the interactor (its files, protocol, flags and limits), the test,
    the reference and the limits it runs under."""
    # packed as a structure (msgpack): a reference's source cannot pass for a boundary between parts
    parts = [p.encode("utf-8", errors="surrogatepass") for p in (
        spec.key(), spec.protocol, repr(spec.flags), repr(spec.time_limit_s), str(spec.memory_limit_mb),
        reference.language, repr(reference.limits), reference.source)]
    return hashlib.blake2b(msgpack.packb([*parts, inp, ans], use_bin_type=True), digest_size=16).hexdigest()


def _interactor_limits(spec: ProgramSpec, limits: Limits) -> Limits:
    base = checker_limits(spec)
    # the interactor outlives the program's backstop however far its CPU-wait credit moves it
    # (``limits.wall_max_s``), so a deadlock ends on the program's side
    return Limits(time_s=base.time_s, memory_mb=base.memory_mb, wall_s=max(base.wall_backstop_s, limits.wall_max_s + 5.0),
                  stated=True)


def run_interactive(runner: CodeRunner, spec: ProgramSpec, test_input: str, answer: str,
                    limits: Limits, reference: Reference | None = None) -> InteractiveOutcome:
    """One test of an interactive problem; CheckerBroken when the interactor cannot judge,
    SandboxFailure when the sandbox fails. ``reference``: the problem's correct solution, run
    against the interactor when it fails while the program still runs (module docstring)."""
    inp, ans = test_input.encode("utf-8"), answer.encode("utf-8")
    collect: tuple[str, ...] = ()
    if spec.protocol == "testlib":
        argv, files = ["input", "tout/out", "answer"], {"input": inp, "answer": ans, "tout/": b""}
    else:
        argv = ["input", "answer", "feedback/", *spec.flags]
        files, collect = {"input": inp, "answer": ans, "feedback/": b""}, (JUDGEMESSAGE,)
    solution = programs.loaded_session(runner)
    try:
        return _dialogue(runner, spec, solution, limits, argv, files, collect)
    except InteractorFailed as failure:
        if reference is None or not reference.source:
            if failure.early is not None:
                return failure.early  # no reference to ask: the end seen first decides, as on Kattis
            return _unvouched(runner, spec, reference, failure, inp, ans, argv, files, collect)
        why = _vouch(runner, spec, reference, inp, ans, argv, files, collect)
        if why:
            raise CheckerBroken(f"{failure}; {why}") from None
        if failure.early is not None:
            return failure.early
        return InteractiveOutcome(Verdict.WRONG_ANSWER, failure.run, f"{VOUCHED}: {_why(failure)}",
                                  deterministic=failure.deterministic)


def _dialogue(runner: CodeRunner, spec: ProgramSpec, program: programs.ProgramSession, limits: Limits,
              argv: list[str], files: Mapping[str, bytes], collect: tuple[str, ...]) -> InteractiveOutcome:
    """Run ``program`` against the interactor once and decide."""
    interactor = session_for(runner, spec)
    res = programs.run_interactive(runner, program, limits, interactor, _interactor_limits(spec, limits), argv=argv,
                                   files=files, collect=collect)
    rp, ri = res.solution, res.interactor
    if rp.status == Verdict.INTERNAL or ri.status == Verdict.INTERNAL:
        drop_session(runner)
        raise SandboxFailure(f"sandbox failure in an interactive test: {rp.error or ri.error}")
    # a test the job's budget cut short is not vouched for: the reference would outrun the budget
    outcome = decide(spec, rp, ri, res.solution_ended_first, vouch_stalls=limits.wall_cap_s is None)
    return replace(outcome, oom_killed=True) if res.oom_killed else outcome


def _unvouched(runner: CodeRunner, spec: ProgramSpec, reference: Reference | None, failure: InteractorFailed,
               inp: bytes, ans: bytes, argv: list[str], files: Mapping[str, bytes],
               collect: tuple[str, ...]) -> InteractiveOutcome:
    """An interactor that failed while the program ran, with no reference to vouch for it: the
    program's WRONG_ANSWER, unless the interactor fails so on its own, with no output from any
    program at all (``_alone``): then it is broken (CheckerBroken). A program can provoke an
    interactor only through what it writes (or its end of input closing); it cannot provoke a
    failure that comes without either, so no program's doing is ever masked as INTERNAL."""
    missing = reference.missing if reference is not None and reference.missing else "no correct solution was given"
    wait_s = min(max(ALONE_MIN_S, 2 * failure.interactor_wall_s + ALONE_SLACK_S),
                 checker_limits(spec).wall_backstop_s)
    alone, steady = _alone(runner, spec, inp, ans, argv, files, collect, wait_s,
                           failure.interactor_wall_s + ALONE_SLACK_S)
    if alone:
        raise CheckerBroken(f"{failure}; with no output from any program it fails on its own too: {alone} "
                            f"(and no reference solution can run: {missing})") from None
    log.warning("interactive %s: the interactor failed on a program's dialogue and no reference solution can "
                "vouch for it (%s): charged to the program: %s", spec.key()[:16], missing, _why(failure)[:300])
    ALONE.count_unvouched()
    return InteractiveOutcome(Verdict.WRONG_ANSWER, failure.run, f"{UNVOUCHED} ({missing}): {_why(failure)}",
                              deterministic=failure.deterministic and steady)


def _alone(runner: CodeRunner, spec: ProgramSpec, inp: bytes, ans: bytes, argv: list[str],
           files: Mapping[str, bytes], collect: tuple[str, ...], wait_s: float,
           by_s: float) -> tuple[str, bool]:
    """Why the interactor fails on its own on this test, with no program output at all: its
    input a pipe held open and never written for ``wait_s`` (``SILENT``, which drains what the
    interactor writes, so it never blocks on a full pipe, and never ends on its own), or "" when
    it does not; and whether that answer is steady. Only an end reported before the silent side
    was stopped counts: once stopped, the interactor sees the end of its input, which any program
    could have sent. An interactor still computing for half the wait or more (not waiting for
    input) might have failed with more time, so "" is not steady then, nor a failure that a
    limit decided. A failure alone counts only when it came by ``by_s`` (when the interactor
    failed on the program's dialogue, plus ``ALONE_SLACK_S`` for timing): one that comes later
    alone came sooner with the program, so the program's output brought it, however long the
    run alone was waited. Steady answers are remembered in ``ALONE``: a failure with when it
    came, else how long it was waited."""
    key = vouch_key(spec, Reference(language="silent", source=SILENT), inp, ans)
    known = ALONE.get(key)
    if known is not None and (known[0] or known[1] >= wait_s):
        return (known[0] if known[0] and known[1] <= by_s else ""), True
    ALONE.runs += 1
    silent = Limits(time_s=wait_s, memory_mb=SILENT_MEMORY_MB, wall_s=wait_s)
    with programs.open_session(runner, programs.source_image("python3", SILENT)) as session:
        res = programs.run_interactive(runner, session, silent, session_for(runner, spec),
                                       _interactor_limits(spec, silent), argv=argv, files=files, collect=collect)
    if res.solution.status == Verdict.INTERNAL or res.interactor.status == Verdict.INTERNAL:
        drop_session(runner)
        raise SandboxFailure(f"sandbox failure running an interactor alone: {res.solution.error or res.interactor.error}")
    why, steady, at_s = "", res.interactor.cpu_s < wait_s / 2, wait_s
    if not res.solution_ended_first:
        try:
            decide(spec, RunResult(Verdict.OK), res.interactor)
        except InteractorFailed as e:
            why, steady, at_s = _why(e), e.deterministic, res.interactor.wall_s
    if steady:
        ALONE.put(key, (why, at_s))
    return (why if at_s <= by_s else ""), steady


def _vouch(runner: CodeRunner, spec: ProgramSpec, reference: Reference, inp: bytes, ans: bytes,
           argv: list[str], files: Mapping[str, bytes], collect: tuple[str, ...]) -> str:
    """"" when the interactor accepts the reference solution's dialogue on this test, else why
    it cannot be vouched for (remembered in ``VOUCHES`` when it lasts, see ``_run_reference``)."""
    key = vouch_key(spec, reference, inp, ans)
    known = VOUCHES.get(key)
    if known is not None:
        return known
    why, lasting = _run_reference(runner, spec, reference, argv, files, collect)
    if lasting:
        VOUCHES.put(key, why)
    return why


def _run_reference(runner: CodeRunner, spec: ProgramSpec, reference: Reference, argv: list[str],
                   files: Mapping[str, bytes], collect: tuple[str, ...]) -> tuple[str, bool]:
    """Run the reference against the interactor as a job of its own beside the loaded program
    (which stays loaded): "" when the interactor accepts its dialogue, else why not; and whether
    that answer lasts. A failure that may have come from the moment (a wall-clock stop on a
    loaded host, a stalled dialogue, a limit of either side) is not remembered: one
    slow reference run would otherwise make every later program that provokes the interactor
    on that test INTERNAL for the life of the process."""
    image = _reference_image(runner, reference)
    if isinstance(image, str):
        return image, True
    VOUCHES.runs += 1
    with programs.open_session(runner, image) as session:
        try:
            out = _dialogue(runner, spec, session, reference.limits, argv, files, collect)
        except CheckerBroken as e:
            lasting = isinstance(e, InteractorFailed) and e.deterministic and e.run.deterministic
            return f"on the reference solution's dialogue it fails too: {_why(e)}", lasting
    if out.verdict != Verdict.OK:
        return f"the reference solution gets {out.verdict} with it: {out.detail[:500]}", out.deterministic
    if out.oom_killed:
        # an accepted dialogue all the same: the OOM killer took a process the interactor
        # started (or another that the dialogue did not need), not the interactor. Which process
        # it takes depends on the moment's sizes, so this pair overflowing beside the reference
        # says the interactor's memory, not the program's, overran: never the program's 0
        return ("on the reference solution's dialogue it fails too: the pair went over its memory limit "
                "there as well (the memory cgroup killed one of its processes)", False)
    return "", True


def _why(e: CheckerBroken) -> str:
    return str(e).removeprefix(CheckerBroken.PREFIX)


def _reference_image(runner: CodeRunner, reference: Reference) -> ProgramImage | str:
    """The reference as a program to run (an interpreted one as is, as a Python checker runs),
    or why it cannot run."""
    if languages.get(reference.language).compile is None:
        return programs.source_image(reference.language, reference.source)
    sources, entries = programs.solution_sources(reference.language, reference.source)
    built = programs.compile_program(runner, reference.language, sources, entries)
    if not built.ok or built.image is None:
        return f"the reference solution does not compile as {reference.language}: {built.diagnostics[-500:]}"
    return built.image


def decide(spec: ProgramSpec, rp: RunResult, ri: RunResult, solution_ended_first: bool = False,
           vouch_stalls: bool = False) -> InteractiveOutcome:
    """The test's verdict from both runs (see the module docstring). ``vouch_stalls``: a program
    stopped by its wall-clock backstop (it waited) is the reference's to tell apart
    (``InteractorFailed``) instead of a TIME_LIMIT at once."""
    if rp.status == Verdict.TIME_LIMIT:
        timed_out = InteractiveOutcome(Verdict.TIME_LIMIT, rp, rp.error)
        if vouch_stalls and not rp.deterministic:
            # a program that waits for a reply that never comes: a deadlock of its making, or an
            # interactor that never answers (one that reads to the end of its input before it
            # replies). An interactor that answers the reference's dialogue makes it the
            # program's TIME_LIMIT; one that stalls that dialogue too is broken (INTERNAL)
            raise InteractorFailed(f"the dialogue stalled: {rp.error}", rp, ri, early=timed_out)
        return timed_out
    if ri.status == Verdict.MEMORY_LIMIT and "cgroup" in ri.error:
        # one memory cgroup bounds the pair (the sum of both limits), and its OOM killer takes the
        # process with the most resident memory: the interactor, when the program holds its
        # memory in files (memfd, tmpfs) that no process's RSS shows, and equally when the
        # interactor itself (or a process it forked) went past its share. Which side overran is
        # not in what the cgroup reports: the reference solution tells (``run_interactive``):
        # an interactor that works beside it was crowded out by the program (its MEMORY_LIMIT),
        # one killed beside it too is broken (INTERNAL, never a correct program's 0)
        together = "the program and the interactor together went over their memory limit " \
                   "(the memory cgroup killed the interactor)"
        raise InteractorFailed(together, rp, ri, early=InteractiveOutcome(Verdict.MEMORY_LIMIT, rp, together))
    why = failed_run(spec, ri, "the interactor")
    if why:
        _interactor_failed(rp, ri, why, solution_ended_first)
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
        if spec.protocol == "testlib" and ri.exit_code == TESTLIB_FAIL:
            why = f"the testlib interactor reported a judge failure (FAIL): {msg[:500]}"
        else:
            why = f"the interactor failed (exit {ri.exit_code}): {msg[:500]}"
        _interactor_failed(rp, ri, why, solution_ended_first)
    if rp.error == STOPPED_BY_PEER:
        return InteractiveOutcome(Verdict.OK, rp, msg)  # the dialogue was complete and accepted
    if rp.status != Verdict.OK:
        return InteractiveOutcome(rp.status, rp, rp.error)
    if rp.exit_code != 0:
        return InteractiveOutcome(Verdict.RUNTIME_ERROR, rp, f"exit code {rp.exit_code}")
    return InteractiveOutcome(Verdict.OK, rp, msg)


def _interactor_failed(rp: RunResult, ri: RunResult, why: str, solution_ended_first: bool) -> NoReturn:
    """An interactor that ended outside its protocol: InteractorFailed, for the reference
    solution to tell broken from provoked. When the program's end was seen first, the program
    cut the dialogue short (an interactor reading a line the program never sent fails on it) and
    its own outcome goes with the failure: its own failure if it failed, else WRONG_ANSWER, never
    an infrastructure error the program could provoke by leaving early. Which end is seen first
    is a race when both end within a moment (an interactor that crashes closes the program's
    input, and the program dies of the EOF), so a reference that fails with this interactor too
    makes even that case INTERNAL: a broken interactor never costs a correct program its reward.

    A failure of the program's own (a limit, a crash) is told in the program's words only: the
    interactor's (``why``, its messages) may quote the test's secret, and a limit's detail is
    shown in the feedback even for a hidden test (the job's stop note, sandbox/env.py), which a
    policy must never read a hidden answer from. The interactor's failure stays in the
    exception, for the operator."""
    if not solution_ended_first:
        raise InteractorFailed(why, rp, ri)
    cut_short = "the program ended before the interaction was complete"
    if rp.status != Verdict.OK:
        outcome = InteractiveOutcome(rp.status, rp, f"{rp.error}; {cut_short}" if rp.error else cut_short)
    elif rp.exit_code != 0:
        outcome = InteractiveOutcome(Verdict.RUNTIME_ERROR, rp, f"exit code {rp.exit_code}; {cut_short}")
    else:
        outcome = InteractiveOutcome(Verdict.WRONG_ANSWER, rp, f"{cut_short}, then {why}")
    raise InteractorFailed(why, rp, ri, early=outcome)
