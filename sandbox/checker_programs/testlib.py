"""``testlib``: a testlib checker, ``checker input output answer``.

Exit 0 accepts; 1 (WA), 2 (PE), 4 (extra output) and 8 (unexpected end of output) reject, the
checker's message the detail; 7 and 50 + k (``_pc(k)``, built with PC_BASE_EXIT_CODE=50) are
partial credit, never a pass; 3 (FAIL) is the checker's own claim of a jury-side failure
(CheckerBroken, as Codeforces' "judgement failed"); anything else says nothing about the output
(``CannotJudge``: the expected answer is tried next).
"""

from __future__ import annotations

from cpfleet.core.checkers import ProgramSpec
from cpfleet.core.errors import CheckerBroken
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
        raise CheckerBroken(f"the testlib checker reported a judge failure (FAIL): {msg[:500]}")
    raise CannotJudge(f"the testlib checker failed (exit {rr.exit_code}): {msg[:500]}", rr)
