"""C++ with g++: ``-O2 -DONLINE_JUDGE``, linked statically unless ``CPFLEET_STATIC_LINK=0``
(base.static_link), compiled against the precompiled ``bits/stdc++.h`` when the program
includes it.

``CPFLEET_CPP_STD`` (default ``gnu++17``): the C++ standard (``-std=``), as judges differ.
"""

from __future__ import annotations

from collections.abc import Mapping

from cpfleet.core import envvars
from cpfleet.sandbox.languages.base import (
    PROG_DIR,
    SELF_TEST_EXPECTED,
    SOURCES,
    CompileStep,
    Language,
    static_link,
    which,
)

# the worker's start-up check (sandbox/selftest.py): bits/stdc++.h and the standard library
SELF_TEST = (
    f'#include <bits/stdc++.h>\nint main() {{ std::vector<int> v{{1}}; std::cout << "{SELF_TEST_EXPECTED}" << std::endl; return v[0] - 1; }}\n'
)


def toolchain(env: Mapping[str, str]) -> Language:
    std: str = envvars.read("CPFLEET_CPP_STD", "gnu++17", env)
    gxx = which("g++")
    # no -pipe: the compiler proper's stdout would be a pipe to the assembler, which a source
    # including /dev/stdout reads from until the wall clock stops the compile
    cpp_flags = (f"-std={std}", "-O2", "-DONLINE_JUDGE")
    return Language(
        "cpp", "solution.cpp",
        CompileStep((gxx, *cpp_flags, "{pch}", "-o", "out/a.out", SOURCES, *static_link(env)), (gxx, "--version")),
        (f"{PROG_DIR}/a.out",), "address_space", tools=(gxx,), flags=cpp_flags,
        preprocessor=True, precompiled_header=True, quiet_flag="-w", oom_markers=(b"std::bad_alloc",),
    )
