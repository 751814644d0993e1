"""What a Python program writes through C stdio (``ctypes``' libc ``printf``, as a C extension
writes) comes out as under ``python3 solution.py``, whose exit flushes the C streams after the
interpreter's own: the fork server's test child ends in ``_exit``, which flushes nothing, so a
right answer printed so was judged on empty output (WRONG_ANSWER). Each case is compared with
the real interpreter run on the same input."""

from __future__ import annotations

import subprocess
import sys

import pytest

import cpfleet
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.runner import CodeRunner

SUM = Problem.from_dict({
    "id": "c-stdio-sum", "time_limit_s": 2,
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}, {"input": "100 23\n", "output": "123\n"}],
})
LIBC = "import ctypes\nlibc = ctypes.CDLL(None)\na, b = map(int, input().split())\n"
PROGRAMS = {
    # the whole answer through C stdio (buffered: stdout is a pipe)
    "c-printf": LIBC + 'libc.printf(b"%d\\n", a + b)\n',
    # Python's buffer is flushed first at exit, then C's: "12" then nothing, or the order swapped
    "python-then-c": LIBC + 'libc.printf(b"\\n")\nprint(a + b, end="")\n',
    # a failure after the C write: the status is still the failure's
    "c-printf-then-raise": LIBC + 'libc.printf(b"%d\\n", a + b)\nraise ValueError("after")\n',
}


def _reference(code: str, stdin: str) -> tuple[str, int]:
    done = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True, timeout=60,
                          check=False, env={"PATH": "/usr/bin:/bin"})
    return done.stdout, done.returncode


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_c_stdio_output_is_judged_as_the_interpreter_ends_it(runner: CodeRunner, name: str) -> None:
    code = PROGRAMS[name]
    passes = all(_reference(code, t.input) == (t.output, 0) for t in (*SUM.public_tests, *SUM.hidden_tests))
    result = cpfleet.judge_locally(SUM, f"```python\n{code}```", runner)
    assert not result.infra_error, result.infra_message
    if passes:
        assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation
    else:
        assert result.reward == 0.0 and result.verdict is not Verdict.OK, result.observation
    if name == "c-printf":
        assert passes  # the reference prints the answer: the case is about a right answer
