"""C++ with g++: ``-O2 -DONLINE_JUDGE``, linked statically unless ``CPFLEET_STATIC_LINK=0``
(base.static_link), compiled against the precompiled ``bits/stdc++.h`` when the program
includes it.

``CPFLEET_CPP_STD`` (default ``gnu++17``): the C++ standard (``-std=``), as judges differ.
"""

from __future__ import annotations

from collections.abc import Mapping

from cpfleet.core import envvars
from cpfleet.sandbox.languages.base import PROG_DIR, SOURCES, CompileStep, Language, static_link, which


def toolchain(env: Mapping[str, str]) -> Language:
    std: str = envvars.read("CPFLEET_CPP_STD", "gnu++17", env)
    gxx = which("g++")
    cpp_flags = (f"-std={std}", "-O2", "-DONLINE_JUDGE", "-pipe")
    return Language(
        "cpp", "solution.cpp",
        CompileStep((gxx, *cpp_flags, "{pch}", "-o", "out/a.out", SOURCES, *static_link(env)), (gxx, "--version")),
        (f"{PROG_DIR}/a.out",), "address_space", tools=(gxx,), flags=cpp_flags,
        preprocessor=True, precompiled_header=True, oom_markers=(b"std::bad_alloc",),
    )
