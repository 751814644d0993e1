"""``python``: open-r1's ``generated_checker``, ``python3 checker.py input.txt
correct_output.txt solution_output.txt``.

It prints 1 to accept, 0 to reject (its stderr the detail); a non-zero exit or anything else on
stdout says nothing about the output (``CannotJudge``: the expected answer is tried next).
"""

from __future__ import annotations

from cpfleet.core.checkers import ProgramSpec
from cpfleet.sandbox.checker_programs.base import (
    CannotJudge,
    CheckerVerdict,
    detail_of,
    failed_run,
    run_program,
)
from cpfleet.sandbox.runner import CodeRunner


def judge(runner: CodeRunner, spec: ProgramSpec, inp: bytes, ans: bytes, output: bytes) -> CheckerVerdict:
    rr = run_program(runner, spec, b"", ["input.txt", "correct_output.txt", "solution_output.txt"],
                     {"input.txt": inp, "correct_output.txt": ans, "solution_output.txt": output})
    why = failed_run(spec, rr)
    if why:
        raise CannotJudge(why, rr)
    said = rr.stdout.decode("utf-8", errors="replace").strip()
    if rr.exit_code != 0:
        raise CannotJudge(f"the python checker exited {rr.exit_code}: {detail_of(rr.stderr)[:500]}", rr)
    if said == "1":
        return CheckerVerdict(True)
    if said == "0":
        return CheckerVerdict(False, detail_of(rr.stderr) or "the checker rejected the output")
    raise CannotJudge(f"the python checker printed {said[:80]!r}, not 1 or 0", rr)
