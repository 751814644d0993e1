"""Checker programs from the problem data: compiled once, run confined after each test.

A problem's ``checker`` may be a program (``ProgramSpec`` in core/checkers/program_specs.py
validates it when the problem is loaded): a testlib checker, a Kattis output validator, an open-r1
``generated_checker`` (Python), or an interactor (sandbox/interactive.py). It is data from a
dataset, so it is as untrusted as the program it judges. Compiling and running go through
sandbox/programs.py, the one primitive for every non-Python program:

- Compiled once per content, confined like a test, the artifact cached on the host
  (``programs.compile_program``; failures are remembered in this process too). A checker that
  does not compile is a problem error: INTERNAL (reward None) for every job of that problem,
  never a 0 for the completion. testlib.h comes from the checker's own ``files`` when it ships
  one, else from the directory ``CPFLEET_TESTLIB_DIR`` names (never from the repository; the
  Dockerfile shows how an operator provides it).
- Run as a job of its own next to the loaded solution in the runner's zygote (every isolation
  layer of a test: pid/mount/IPC namespaces, seccomp, cgroup, rlimits, the slot's uid, no
  network), after the program's run is complete, with its own limits. Its files (test input,
  the program's output, the answer) are placed read-only in its fresh working directory; it
  sees nothing of other tests. One job per checker is kept open per runner and reused.
- Exit codes by protocol (``ProgramSpec`` docstring). A checker that crashes, is killed, runs
  out of time or memory, or exits with anything but its accept/reject codes is run again on the
  expected answer (``run_checker``): if it judges that, the program's output made it fail
  (WRONG_ANSWER, never a masked sample a policy could learn to provoke); if not, the problem is
  broken: INTERNAL with infra_error, the completion is not judged.

One module per protocol, how a kind's program is called and what its exit says (testlib.py,
kattis_validator.py, python.py), bound by the kind's name in ``PROTOCOLS`` here; what they share
(compiling, sessions, limits, exit codes, details) is in base.py. A new program kind is one
protocol module plus its ``register_protocol`` (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import threading

from cpfleet.core.errors import CheckerBroken, RegistrationError
from cpfleet.sandbox.checker_programs import kattis_validator, python, testlib
from cpfleet.sandbox.checker_programs.base import (
    CHECKER_DEFINES,
    DETAIL_BYTES,
    JUDGEMESSAGE,
    KATTIS_AC,
    KATTIS_WA,
    TESTLIB_DIRT,
    TESTLIB_ENV,
    TESTLIB_FAIL,
    TESTLIB_OK,
    TESTLIB_PARTIAL,
    TESTLIB_PC_BASE,
    TESTLIB_PE,
    TESTLIB_REJECTS,
    TESTLIB_UNEXPECTED_EOF,
    TESTLIB_WA,
    CannotJudge,
    CheckerVerdict,
    ProgramSpec,
    Protocol,
    checker_limits,
    detail_of,
    drop_session,
    failed_run,
    image_for,
    program_folder,
    run_program,
    session_for,
    source_set,
    testlib_dir,
    testlib_partial,
    toolchain_identity,
)
from cpfleet.sandbox.runner import CodeRunner

# The import surface others use (the judge, the interactors, the result cache, the recipes'
# toy protocols): the shared pieces of base.py, re-exported with the protocol registry.
__all__ = [
    "CHECKER_DEFINES", "DETAIL_BYTES", "JUDGEMESSAGE", "KATTIS_AC", "KATTIS_WA", "PROTOCOLS", "TESTLIB_DIRT",
    "TESTLIB_ENV", "TESTLIB_FAIL", "TESTLIB_OK", "TESTLIB_PARTIAL", "TESTLIB_PC_BASE", "TESTLIB_PE",
    "TESTLIB_REJECTS", "TESTLIB_UNEXPECTED_EOF", "TESTLIB_WA", "CannotJudge", "CheckerVerdict", "Protocol",
    "ProgramSpec", "checker_limits", "detail_of", "drop_session", "failed_run", "image_for", "program_folder",
    "register_protocol", "run_checker", "run_program", "session_for", "source_set", "testlib_dir",
    "testlib_partial", "toolchain_identity", "unregister_protocol",
]


def run_checker(runner: CodeRunner, spec: ProgramSpec, test_input: str, answer: str, output: bytes) -> CheckerVerdict:
    """Judge one test's complete output with the problem's checker program; CheckerBroken if
    the checker cannot judge, SandboxFailure if the sandbox failed.

    A checker that fails on the program's output (a crash on text it did not expect, a limit, an
    exit code outside its protocol) is run once more with the expected answer as the output,
    the sanity check judges run on a jury's checker: if it accepts that, the checker works and
    the failure is the output's doing (WRONG_ANSWER, naming it), never an infrastructure error a
    policy could learn to provoke; if not, the problem is broken (CheckerBroken). A testlib
    checker's own FAIL verdict (exit 3) goes the same way (testlib.py): checkers commonly FAIL when
    an answer beats the jury's, so a FAIL on the program's output alone is WRONG_ANSWER, and only
    a FAIL on the expected answer too is CheckerBroken (Codeforces' "judgement failed")."""
    inp = test_input.encode("utf-8")
    ans = answer.encode("utf-8")
    try:
        return _check(runner, spec, inp, ans, output)
    except CannotJudge as failure:
        if output == ans:
            raise
        try:
            sane = _check(runner, spec, inp, ans, ans)
        except CheckerBroken as e:
            raise CheckerBroken(f"{failure}; on the expected answer as output it fails too: {e}") from None
        if not sane.ok:
            raise CheckerBroken(f"{failure}; and it rejects the expected answer as output") from None
        return CheckerVerdict(False, f"the checker could not judge this output (it accepts the expected "
                                     f"answer): {failure}", deterministic=failure.deterministic)


# --- the protocols: one module per checker program kind, bound by the kind's name ---------------

_protocols_lock = threading.Lock()
PROTOCOLS: dict[str, Protocol] = {"testlib": testlib.judge, "kattis_validator": kattis_validator.judge,
                                  "python": python.judge}


def register_protocol(kind: str, protocol: Protocol, *, replace: bool = False) -> None:
    """Bind how a checker program of ``kind`` (declared in core/checkers/ with role
    ``program``) is called and judged: ``protocol(runner, spec, input, answer, output)`` runs it
    (``run_program``) and returns its verdict, raising CheckerBroken when it cannot judge."""
    with _protocols_lock:
        if kind in PROTOCOLS and not replace:
            raise RegistrationError(f"checker protocol {kind!r} is already registered (pass replace=True)")
        PROTOCOLS[kind] = protocol


def unregister_protocol(kind: str) -> None:
    with _protocols_lock:
        PROTOCOLS.pop(kind, None)


def _check(runner: CodeRunner, spec: ProgramSpec, inp: bytes, ans: bytes, output: bytes) -> CheckerVerdict:
    protocol = PROTOCOLS.get(spec.kind)
    if protocol is None:
        raise CheckerBroken(f"checker kind {spec.kind!r} is not an output checker")
    return protocol(runner, spec, inp, ans, output)
