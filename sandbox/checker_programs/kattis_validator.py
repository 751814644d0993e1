"""``kattis_validator``: a Kattis output validator, ``validator input answer feedback_dir [flags]
< output``.

Exit 42 accepts, 43 rejects (the detail from ``feedback/judgemessage.txt``, else its stderr or
stdout); anything else says nothing about the output (``CannotJudge``: the expected answer is
tried next).
"""

from __future__ import annotations

from cpfleet.core.checkers import ProgramSpec
from cpfleet.sandbox.checker_programs.base import (
    JUDGEMESSAGE,
    KATTIS_AC,
    KATTIS_WA,
    CannotJudge,
    CheckerVerdict,
    detail_of,
    failed_run,
    run_program,
)
from cpfleet.sandbox.runner import CodeRunner


def judge(runner: CodeRunner, spec: ProgramSpec, inp: bytes, ans: bytes, output: bytes) -> CheckerVerdict:
    rr = run_program(runner, spec, output, ["input", "answer", "feedback/", *spec.flags],
                     {"input": inp, "answer": ans, "feedback/": b""}, (JUDGEMESSAGE,))
    why = failed_run(spec, rr)
    if why:
        raise CannotJudge(why, rr)
    msg = detail_of(rr.files.get(JUDGEMESSAGE, b""), rr.stderr, rr.stdout)
    if rr.exit_code == KATTIS_AC:
        return CheckerVerdict(True, msg)
    if rr.exit_code == KATTIS_WA:
        return CheckerVerdict(False, msg or "wrong answer")
    raise CannotJudge(f"the output validator failed (exit {rr.exit_code}, expected 42 or 43): {msg[:500]}", rr)
