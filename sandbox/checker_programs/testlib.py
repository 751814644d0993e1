"""``testlib``: a testlib checker, ``checker input output answer``.

Exit 0 accepts; 1 (WA), 2 (PE), 4 (extra output) and 8 (unexpected end of output) reject, the
checker's message the detail; 7 and 50 + k (``_pc(k)``, built with PC_BASE_EXIT_CODE=50) are
partial credit, never a pass; 3 (FAIL, the checker's claim of a jury-side failure) and anything
else say nothing about the output (``CannotJudge``): the expected answer is tried next, and only a
checker that cannot judge that either is broken (INTERNAL). A FAIL on the program's output alone is
the output's doing: checkers commonly FAIL when a participant's answer beats the jury's
("participant has the better answer"), and a policy that could turn a 0 into a masked sample by
printing an impossible optimum would learn to.
"""

from __future__ import annotations

from cpfleet.core.checkers import ProgramSpec
from cpfleet.sandbox.checker_programs.base import (
    TESTLIB_FAIL,
    TESTLIB_OK,
    TESTLIB_REJECTS,
    CannotJudge,
    CheckerVerdict,
    detail_of,
    failed_run,
    run_program,
    testlib_partial,
)
from cpfleet.sandbox.runner import CodeRunner


def judge(runner: CodeRunner, spec: ProgramSpec, inp: bytes, ans: bytes, output: bytes) -> CheckerVerdict:
    rr = run_program(runner, spec, b"", ["input", "output", "answer"], {"input": inp, "output": output, "answer": ans})
    why = failed_run(spec, rr)
    if why:
        raise CannotJudge(why, rr)
    msg = detail_of(rr.stderr, rr.stdout)
    if rr.exit_code == TESTLIB_OK:
        return CheckerVerdict(True, msg)
    if rr.exit_code in TESTLIB_REJECTS:
        return CheckerVerdict(False, msg or TESTLIB_REJECTS[rr.exit_code])
    if testlib_partial(rr.exit_code):
        return CheckerVerdict(False, f"partially correct (not a full pass): {msg}")
    if rr.exit_code == TESTLIB_FAIL:
        raise CannotJudge(f"the testlib checker reported a judge failure (FAIL): {msg[:500]}", rr)
    raise CannotJudge(f"the testlib checker failed (exit {rr.exit_code}): {msg[:500]}", rr)
