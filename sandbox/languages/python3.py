"""CPython: the program is loaded into the fork server's own interpreter (no compile step; a
SyntaxError is the compile error the fork server reports).

``CPFLEET_SOLUTION_PYTHON``: the Python executable solutions run under (e.g. a venv's
``bin/python`` with numpy and sortedcontainers, as AtCoder offers); default: the worker's own
interpreter. It must be the same CPython minor version as the worker (the fork server runs the
sandbox's own modules in it). Its installed packages are part of the fingerprint.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from cpfleet.sandbox.languages.base import PROG_DIR, SELF_TEST_EXPECTED, Language

# the worker's start-up check (sandbox/selftest.py) compiles and runs it
SELF_TEST = (
    f'print("{SELF_TEST_EXPECTED}")\n'
)


def solution_python() -> str:
    """The Python executable solutions run under (CPFLEET_SOLUTION_PYTHON, else this one)."""
    configured = os.environ.get("CPFLEET_SOLUTION_PYTHON")
    if configured:
        return configured
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def toolchain(env: Mapping[str, str]) -> Language:
    python = env.get("CPFLEET_SOLUTION_PYTHON") or solution_python()
    return Language(
        "python3", "solution.py", None, (python, f"{PROG_DIR}/solution.py"), "address_space", tools=(python,),
        packages_of=python, in_process=True, oom_markers=(b"\nMemoryError",),
    )
