"""How each language is compiled and run: one module per language, found by this registry.

A language is declared once in cpfleet.core.languages (name, fence tags, dataset names,
extensions: what the layers above the sandbox need); its toolchain is the ``toolchain`` function
of the module of this package named after it (``cpfleet.sandbox.languages.java``), or a builder
bound with ``register_toolchain`` (a plug-in, a test's toy language). A toolchain returns the
language's :class:`Language` settings from the environment: how a source set is compiled
(compiler, flags, output), how the compiled program is started (argv), which memory model fits
its runtime, its default time multiplier, what its runtime prints when an allocation fails, and
how it names its source file. Everything else (the compile cache, the confined compile, the
per-test exec, the verdict mapping) reads the table built from these toolchains.
docs/ARCHITECTURE.md has the recipe for adding a language.

The built-in languages (core.languages.BUILTIN) each have a module here: ``python3``, ``pypy3``,
``cpp``, ``c``, ``java``; each module's docstring names the settings an operator may change for it
(``CPFLEET_SOLUTION_PYTHON``, ``CPFLEET_PYPY``, ``CPFLEET_CPP_STD``, ``CPFLEET_STATIC_LINK``,
``CPFLEET_JAVA_HOME``, ``CPFLEET_JAVA_GC``), read from the environment when a table is built.
``base`` holds the types and what several languages share (memory models: its docstring).

Time multipliers: every language's default is 1.0 (datasets usually state one limit, set for
C++; a problem raises it per language with ``time_limit_multipliers``, e.g. ``{"java": 2,
"python3": 3}``, and ``CPFLEET_TIME_MULTIPLIERS`` = ``java=2,pypy3=1.5`` changes a worker's defaults).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Mapping
from types import ModuleType

from cpfleet.core import envvars
from cpfleet.core import languages as core_languages
from cpfleet.core.errors import RegistrationError, UnknownLanguage
from cpfleet.core.languages import FENCE_TAGS, LANGUAGES
from cpfleet.sandbox.languages.base import (
    JVM_AS_FALLBACK_MB,
    PROG_DIR,
    SELF_TEST_EXPECTED,
    SOURCES,
    CompileStep,
    Language,
    Toolchain,
)

__all__ = ["FENCE_TAGS", "LANGUAGES", "UnknownLanguage", "Language", "CompileStep", "Toolchain", "SOURCES", "PROG_DIR",
           "JVM_AS_FALLBACK_MB", "SELF_TEST_EXPECTED", "TOOLCHAINS", "SELF_TESTS", "builtin_module",
           "register_toolchain", "unregister_toolchain", "oom_markers", "build_table", "table", "get", "availability",
           "availability_line", "fingerprint", "installed_packages", "missing_tools", "time_multiplier",
           "toolchain_version"]


def builtin_module(name: str) -> ModuleType:
    """This package's module named ``name``: a built-in language's file, holding its
    ``toolchain`` (environment -> :class:`Language`) and ``SELF_TEST`` (a program printing
    ``SELF_TEST_EXPECTED``, run by sandbox/selftest.py at a worker's start)."""
    return importlib.import_module(f"{__name__}.{name}")


_toolchains_lock = threading.Lock()
# every built-in language of core.languages has its module here, found by its name; a plug-in
# adds its own with register_toolchain
_BUILTIN_MODULES = {info.name: builtin_module(info.name) for info in core_languages.BUILTIN}
TOOLCHAINS: dict[str, Toolchain] = {name: module.toolchain for name, module in _BUILTIN_MODULES.items()}
SELF_TESTS: dict[str, str] = {name: module.SELF_TEST for name, module in _BUILTIN_MODULES.items()}


def register_toolchain(name: str, builder: Toolchain, *, replace: bool = False) -> None:
    """Bind how ``name`` (declared in cpfleet.core.languages) is compiled and run. The builder
    gets the environment and returns the language's settings; this process's table is rebuilt."""
    if core_languages.info(name) is None:
        raise UnknownLanguage(f"declare {name!r} in cpfleet.core.languages (register_language) first")
    with _toolchains_lock:
        if name in TOOLCHAINS and not replace:
            raise RegistrationError(f"toolchain {name!r} is already registered (pass replace=True)")
        TOOLCHAINS[name] = builder
    _forget()


def unregister_toolchain(name: str) -> None:
    with _toolchains_lock:
        TOOLCHAINS.pop(name, None)
    _forget()


def _forget() -> None:
    """Drop what this process computed from the old set of toolchains."""
    table.cache_clear()
    toolchain_version.cache_clear()


def build_table(env: Mapping[str, str] | None = None) -> dict[str, Language]:
    """The per-language settings of every declared language with a toolchain, from the
    environment (see the module docstring)."""
    env = os.environ if env is None else env
    multipliers: dict[str, float] = envvars.read("CPFLEET_TIME_MULTIPLIERS", {}, env)
    table = {name: TOOLCHAINS[name](env) for name in LANGUAGES if name in TOOLCHAINS}
    for name, factor in multipliers.items():
        if name in table:
            table[name] = dataclasses.replace(table[name], time_multiplier=factor)
    return table


def oom_markers() -> tuple[bytes, ...]:
    """What any of this process's runtimes prints when an allocation fails in the memory limit."""
    return tuple(m for lang in table().values() for m in lang.oom_markers)


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Language]:
    """This process's table (built once from its environment)."""
    return build_table()


def get(name: str) -> Language:
    try:
        return table()[name]
    except KeyError:
        if name in LANGUAGES:
            raise UnknownLanguage(f"language {name!r} has no toolchain on this worker "
                                  f"(cpfleet.sandbox.languages.register_toolchain)") from None
        raise UnknownLanguage(f"unknown language {name!r}; known: {', '.join(LANGUAGES)}") from None


@functools.cache
def toolchain_version(name: str) -> str:
    """The first line of the toolchain's version output ('' when it cannot be run)."""
    lang = get(name)
    argv = lang.compile.version_argv if lang.compile is not None else (lang.tools[0], "--version")
    try:
        out = subprocess.run(list(argv), capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (out.stdout or out.stderr).decode(errors="replace").strip()
    return text.splitlines()[0] if text and out.returncode == 0 else ""


@functools.cache
def installed_packages(python: str) -> str:
    """A digest of what ``python``'s site-packages directories hold: the sorted names of their
    entries (a ``*.dist-info`` name carries its version), asked of the interpreter itself.
    Computed once per process: a worker sees a changed venv when it restarts."""
    try:
        out = subprocess.run([python, "-c", "import json, site; print(json.dumps(site.getsitepackages()))"],
                             capture_output=True, timeout=60, check=False)
        dirs = json.loads(out.stdout) if out.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        dirs = []
    h = hashlib.sha256()
    for d in dirs if isinstance(dirs, list) else []:
        try:
            names = sorted(os.listdir(d))
        except (OSError, TypeError):
            names = []
        h.update("\0".join([str(d), *names]).encode(errors="surrogateescape") + b"\n")
    return h.hexdigest()[:16]


def fingerprint(name: str) -> str:
    """A short digest of how this process judges a ``name`` program: its table entry (compile and
    run argv, flags, memory model, default time multiplier), its toolchain's version line and,
    for an interpreter, the listing of its installed packages. The result cache keys by it, so
    workers that would judge one program differently (another compiler or interpreter, C++
    standard, linking, multiplier or set of packages) never serve each other's results, and a
    fleet upgraded mid-run does not hand out verdicts of the old toolchain. It includes the
    environment its programs are exec'd with where that decides verdicts (``_exec_environment``)."""
    lang = get(name)
    packages = installed_packages(lang.packages_of) if lang.packages_of else ""
    return hashlib.sha256(f"{lang!r}\n{toolchain_version(name)}\n{packages}\n{_exec_environment(lang)}".encode()).hexdigest()[:16]


def _exec_environment(lang: Language) -> str:
    """What a program of ``lang`` gets in its environment beyond the table entry, where it
    changes verdicts: exec'd under RLIMIT_AS (C, C++), one malloc arena (sandbox/child.py
    ``ONE_MALLOC_ARENA``); a CPython program is forked, not exec'd."""
    from cpfleet.sandbox import child  # read at call time: the rule's one home

    return child.ONE_MALLOC_ARENA if lang.memory_model == "address_space" and not lang.in_process else ""


def missing_tools(name: str) -> list[str]:
    """The executables this language needs that this host lacks (empty: available)."""
    if name in LANGUAGES and name not in table():
        return ["its toolchain (none registered on this worker)"]
    lang = get(name)
    missing = []
    for tool in lang.tools:
        path = tool if os.path.isabs(tool) else shutil.which(tool)
        if not path or not os.access(path, os.X_OK):
            missing.append(tool)
    if lang.sandbox_dirs:
        from cpfleet.sandbox.isolation import hidden_from_sandbox  # the sandbox's view, read at call time

        missing += [f"{d} (sandboxed programs cannot see it there: /tmp, /run and the like are the sandbox's own)"
                    for d in lang.sandbox_dirs if hidden_from_sandbox(d)]
    if not missing and not toolchain_version(name):
        missing.append(f"{lang.tools[0]} (present but does not run)")
    return missing


def availability() -> dict[str, list[str]]:
    """{language: missing tools}; an empty list means the language is available here."""
    return {name: missing_tools(name) for name in LANGUAGES}


def availability_line() -> str:
    """One line for a worker's or ``cpfleet up``'s start-up log."""
    parts = []
    for name, missing in availability().items():
        if missing:
            parts.append(f"{name} (missing: {', '.join(missing)})")
            continue
        lang = get(name)
        why = lang.start_warning(lang) if lang.start_warning is not None else ""
        parts.append(f"{name} (WARNING: {why})" if why else name)
    return "languages: " + ", ".join(parts)


def time_multiplier(name: str, per_problem: Mapping[str, float] | None) -> float:
    if per_problem and name in per_problem:
        return float(per_problem[name])
    return get(name).time_multiplier
