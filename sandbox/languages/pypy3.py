"""PyPy: a syntax check by PyPy itself is the compile step (a SyntaxError is COMPILE_ERROR, as
for CPython), then the source runs under ``pypy3`` in the ``cgroup`` memory model (PyPy reserves
far more address space than it uses).

``CPFLEET_PYPY`` (default: ``pypy3`` on PATH): the PyPy executable. Its installed packages are
part of the fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping

from cpfleet.sandbox import syntax_errors
from cpfleet.sandbox.languages.base import PROG_DIR, SELF_TEST_EXPECTED, SOURCES, CompileStep, Language, which

# the worker's start-up check (sandbox/selftest.py) compiles and runs it
SELF_TEST = (
    f'print("{SELF_TEST_EXPECTED}")\n'
)


def toolchain(env: Mapping[str, str]) -> Language:
    pypy = env.get("CPFLEET_PYPY") or which("pypy3")
    return Language(
        "pypy3", "solution.py",
        # a syntax check by PyPy itself, so a SyntaxError is COMPILE_ERROR as for CPython
        CompileStep((pypy, "-c", syntax_errors.pypy_check_script(), SOURCES), (pypy, "--version")),
        (pypy, f"{PROG_DIR}/solution.py"), "cgroup", extra_cgroup_mb=64, tools=(pypy,),
        compile_memory_model="cgroup", packages_of=pypy, oom_markers=(b"\nMemoryError",),
    )
