"""What every toolchain module of cpfleet.sandbox.languages builds on: the settings a toolchain
returns (:class:`Language`, :class:`CompileStep`), the placeholders of its argv, and the helpers
more than one language uses (finding an executable, C and C++ static linking).

This module imports none of the language modules nor the package's registry, so each language
module imports it without a cycle.

Memory models: ``address_space`` (C, C++, CPython: RLIMIT_AS = the memory limit, plus the
cgroup) and ``cgroup`` (the JVM and PyPy reserve far more address space than they use, so
RLIMIT_AS would kill correct programs: only the slot's cgroup bounds them; where no cgroup is
available a loose RLIMIT_AS of the limit + ``JVM_AS_FALLBACK_MB`` still bounds them).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cpfleet.core import envvars
from cpfleet.core.protocol import NAME_MAX

__all__ = ["SOURCES", "PROG_DIR", "JVM_AS_FALLBACK_MB", "SELF_TEST_EXPECTED", "CompileStep", "Language", "Toolchain",
           "which", "static_link"]

SOURCES = "{sources}"  # placeholder for the entry points' paths in a compile argv
PROG_DIR = "{prog}"  # placeholder for the directory the artifact's files are placed in (read-only)
# the ``cgroup`` memory model without a cgroup: RLIMIT_AS = 2 x the limit (heap and main stack)
# plus this much for the runtime itself
JVM_AS_FALLBACK_MB = 4096
# what each language module's ``SELF_TEST`` program prints (sandbox/selftest.py runs it at start)
SELF_TEST_EXPECTED = "cpfleet-self-test-ok"


@dataclass(frozen=True, slots=True)
class CompileStep:
    """How one language turns a source set into an artifact, run confined in the sandbox.

    ``argv`` runs with cwd = a fresh writable directory, the sources readable under
    ``{prog}``; it must leave the artifact's files in ``out/`` (the compile's own temp files
    live in the same bounded directory).
    """

    argv: tuple[str, ...]
    version_argv: tuple[str, ...]  # prints the toolchain version (part of the cache key)


@dataclass(frozen=True, slots=True)
class Language:
    name: str
    source_name: str  # file the single-file solution is saved as (Java: the public class's name)
    compile: CompileStep | None
    run_argv: tuple[str, ...]  # how a test starts the artifact; {prog} = its directory, {mem} = MB,
    # {stack} = the main thread's stack in MB: the memory limit, at most 1024 (the JVM's -Xss maximum)
    memory_model: str  # "address_space" or "cgroup"
    extra_cgroup_mb: int = 0  # allowance beyond the memory limit for the runtime itself
    tools: tuple[str, ...] = ()  # executables that must exist for this language to be available
    time_multiplier: float = 1.0
    flags: tuple[str, ...] = field(default=())  # the flags that change the artifact (cache key)
    compile_memory_model: str = "address_space"  # javac is a JVM too
    # an interpreter whose installed packages a program may import: their listing is part of
    # the fingerprint (a worker whose venv gained numpy judges `import numpy` otherwise)
    packages_of: str = ""
    # the version of the rules ``main_class`` reads a source by (Java: java.MAIN_CLASS_RULES): a change
    # to them changes which file and class a program is compiled and started as, so its verdict
    main_class_rules: int = 0
    # the compiler flag that silences its warnings and nothing else (gcc's ``-w``): a compile whose
    # messages passed their cap (``programs.COMPILE_LIMITS``) is compiled again with it, so
    # warnings alone (each quoting a long source line) never make a valid program a COMPILE_ERROR;
    # in the fingerprint, since it decides whether such a program compiles
    quiet_flag: str = ""
    # Below: how the sandbox treats the language's programs; none of them changes an artifact or
    # a verdict's meaning, so they stay out of the fingerprint (repr=False).
    # loaded into the fork server's own interpreter (CPython), not compiled and exec'd
    in_process: bool = field(default=False, repr=False)
    # the source set's C preprocessor takes -D defines (checker programs: testlib's partial base)
    preprocessor: bool = field(default=False, repr=False)
    # a program including <bits/stdc++.h> is compiled against the precompiled header
    precompiled_header: bool = field(default=False, repr=False)
    # what the runtime prints on stderr when an allocation fails inside the memory limit
    oom_markers: tuple[bytes, ...] = field(default=(), repr=False)
    # source text -> the name the program is started by ({main}), and by default the one its file is
    # named after; None: the file is ``source_name``
    main_class: Callable[[str], str] | None = field(default=None, repr=False, compare=False)
    # source -> the class its file is named after, where that is not always ``main_class`` (Java:
    # the public class, which need not be the one holding main); None: ``main_class``
    file_class: Callable[[str], str] | None = field(default=None, repr=False, compare=False)
    # this entry -> '' when the runtime starts as fast as it should on this host, else a warning
    # for the start-up line (``availability_line``; Java: the JDK's class-data sharing archive)
    start_warning: Callable[[Language], str] | None = field(default=None, repr=False, compare=False)
    # host folders outside the sandbox's system ones that its tools live in (an operator's
    # CPFLEET_JAVA_HOME), bound read-only at their own paths into every zygote's root
    sandbox_dirs: tuple[str, ...] = field(default=(), repr=False)

    def run_argv_for(self, main: str = "") -> tuple[str, ...]:
        """The run argv with the main class filled in ({prog} and {mem} stay placeholders)."""
        return tuple(a.replace("{main}", main) for a in self.run_argv)

    def source_file(self, code: str) -> str:
        """The file a single-file solution ``code`` is saved as."""
        if self.main_class is None:
            return self.source_name
        suffix = os.path.splitext(self.source_name)[1]
        name = (self.file_class or self.main_class)(code).rsplit(".", 1)[-1] + suffix
        # a class name no file can have (past NAME_MAX bytes): the default name, and the
        # compiler says what it says of that (a public class: declared in the wrong file)
        return name if len(name.encode("utf-8", "surrogatepass")) <= NAME_MAX else self.source_name


# A language's toolchain: the environment -> its settings. Each language module's ``toolchain``.
Toolchain = Callable[[Mapping[str, str]], Language]


def which(name: str) -> str:
    """``name``'s path in the system directories first, else on PATH, else ``name`` itself
    (``missing_tools`` then reports it)."""
    return shutil.which(name, path="/usr/local/bin:/usr/bin:/bin") or shutil.which(name) or name


def static_link(env: Mapping[str, str]) -> tuple[str, ...]:
    """``-static`` unless ``CPFLEET_STATIC_LINK`` is ``0``: C and C++ programs are linked
    statically, as Codeforces and Kattis do: no dynamic loader and relocation of libstdc++ at
    every test's exec (~1 ms of CPU per test for an iostream program here)."""
    return ("-static",) if envvars.read("CPFLEET_STATIC_LINK", "1", env) == "1" else ()
