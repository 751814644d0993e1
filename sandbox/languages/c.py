"""C with gcc: ``-std=gnu11 -O2 -DONLINE_JUDGE``, with libm, linked statically unless
``CPFLEET_STATIC_LINK=0`` (base.static_link)."""

from __future__ import annotations

from collections.abc import Mapping

from cpfleet.sandbox.languages.base import (
    PROG_DIR,
    SELF_TEST_EXPECTED,
    SOURCES,
    CompileStep,
    Language,
    static_link,
    which,
)

# the worker's start-up check (sandbox/selftest.py): stdio and libm
SELF_TEST = (
    f'#include <stdio.h>\n#include <math.h>\nint main(void) {{ printf("{SELF_TEST_EXPECTED}\\n"); return (int)floor(0.5); }}\n'
)


def toolchain(env: Mapping[str, str]) -> Language:
    gcc = which("gcc")
    # no -pipe: the compiler proper's stdout would be a pipe to the assembler, which a source
    # including /dev/stdout reads from until the wall clock stops the compile
    c_flags = ("-std=gnu11", "-O2", "-DONLINE_JUDGE")
    return Language(
        "c", "solution.c",
        CompileStep((gcc, *c_flags, "-o", "out/a.out", SOURCES, "-lm", *static_link(env)), (gcc, "--version")),
        (f"{PROG_DIR}/a.out",), "address_space", tools=(gcc,), flags=(*c_flags, "-lm"), preprocessor=True,
        quiet_flag="-w",
    )
