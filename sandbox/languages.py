"""How each language is compiled and run: one toolchain builder per language, bound by name.

A language is declared once in cpfleet.core.languages (name, fence tags, dataset names,
extensions: what the layers above the sandbox need); its toolchain is one builder here
(``TOOLCHAINS``, or ``register_toolchain``) that returns its :class:`Language` settings from the
environment: how a source set is compiled (compiler, flags, output), how the compiled program is
started (argv), which memory model fits its runtime, its default time multiplier, what its
runtime prints when an allocation fails, and how it names its source file. Everything else
(the compile cache, the confined compile, the per-test exec, the verdict mapping) reads the
table built from these builders. docs/ARCHITECTURE.md has the recipe for adding a language.

The built-in names are ``python3``, ``pypy3``, ``cpp``, ``c``, ``java`` (the shared problem schema).

Settings that an operator may change, read from the environment when a table is built:

- ``CPFLEET_CPP_STD`` (default ``gnu++17``): the C++ standard (``-std=``), as judges differ.
- ``CPFLEET_STATIC_LINK`` (default ``1``): C and C++ programs are linked ``-static`` (as on
  Codeforces and Kattis), which makes each test's exec ~1 ms cheaper; ``0`` links dynamically.
- ``CPFLEET_SOLUTION_PYTHON``: the Python executable solutions run under (e.g. a venv's
  ``bin/python`` with numpy and sortedcontainers, as AtCoder offers); default: the worker's own
  interpreter. It must be the same CPython minor version as the worker (the fork server runs
  the sandbox's own modules in it).
- ``CPFLEET_PYPY`` (default: ``pypy3`` on PATH): the PyPy executable.
- ``CPFLEET_JAVA_HOME``: a JDK whose ``bin/javac`` and ``bin/java`` are used; default: PATH.

Memory models: ``address_space`` (C, C++, CPython: RLIMIT_AS = the memory limit, plus the
cgroup) and ``cgroup`` (the JVM and PyPy reserve far more address space than they use, so
RLIMIT_AS would kill correct programs: only the slot's cgroup bounds them; where no cgroup is
available a loose RLIMIT_AS of the limit + ``JVM_AS_FALLBACK_MB`` still bounds them). The JVM
gets ``-Xmx`` = the memory limit and a main thread whose stack is the memory limit too, at most
1 GB, the largest ``-Xss`` a JVM accepts (the
launcher sizes the main thread from ``-Xss``; the later ``-XX:ThreadStackSize``, which the
launcher does not read, gives every other thread 64 MB, as DOMjudge and Kattis give all of them), and
its cgroup allowance is the limit plus ``JVM_OVERHEAD_MB`` for what lives outside the heap
(metaspace, code cache, thread stacks).

Time multipliers: every language's default is 1.0 (datasets usually state one limit, set for
C++; a problem raises it per language with ``time_limit_multipliers``, e.g. ``{"java": 2,
"python3": 3}``, and ``CPFLEET_TIME_MULTIPLIERS`` = ``java=2,pypy3=1.5`` changes a worker's defaults).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cpfleet.core import envvars
from cpfleet.core import languages as core_languages
from cpfleet.core.errors import RegistrationError, UnknownLanguage
from cpfleet.core.languages import FENCE_TAGS, LANGUAGES
from cpfleet.core.protocol import NAME_MAX
from cpfleet.sandbox import syntax_errors

__all__ = ["FENCE_TAGS", "LANGUAGES", "UnknownLanguage", "Language", "CompileStep", "Toolchain", "TOOLCHAINS",
           "register_toolchain", "unregister_toolchain", "oom_markers", "java_main_class", "build_table", "table", "get",
           "availability", "availability_line", "fingerprint", "jvm_class_sharing", "missing_tools", "time_multiplier", "toolchain_version"]

JVM_OVERHEAD_MB = 256
JVM_AS_FALLBACK_MB = 4096
JVM_THREAD_STACK_KB = 64 << 10  # the stack of a Java thread other than main
# The JDK's own class-data-sharing archive (lib/server/classes.jsa, shipped by the JDK packages)
# maps the ~1,400 classes every start loads instead of parsing them; ``auto`` falls back to
# loading them when the archive is missing or does not fit (``jvm_class_sharing`` says so loudly
# at start-up), never failing the run. No per-program archive: an AppCDS archive of a
# solution's few classes saves less than one JVM start costs to build it.
JVM_START_FLAGS = ("-Xshare:auto", "-XX:-UsePerfData")
# Start-up work a contest program never pays back, where the JVM accepts the flags
# (``jvm_fast_start``; another JDK may lack one, and then none is used): the archive mapped at its
# own address instead of relocated to a random one (JDK 17.0.x builds relocate by default,
# ~8 ms of CPU per start; the sandbox, not the JVM's address layout, is the isolation), and no
# stubs generated for the AES, SHA, GHASH, Base64 and CRC32/Adler32 intrinsics (~5 ms; a program
# that uses those classes runs their Java code: the same results, slower). ~10 ms of ~65 ms of
# CPU per trivial Java test (bench/bench_jvm.py).
JVM_FAST_START_FLAGS = (
    "-XX:+UnlockDiagnosticVMOptions", "-XX:ArchiveRelocationMode=0",
    "-XX:-UseAESIntrinsics", "-XX:-UseAESCTRIntrinsics", "-XX:-UseGHASHIntrinsics", "-XX:-UseSHA",
    "-XX:-UseBASE64Intrinsics", "-XX:-UseCRC32Intrinsics", "-XX:-UseCRC32CIntrinsics", "-XX:-UseAdler32Intrinsics",
)
JAVA_GCS = {
    # DOMjudge's and Kattis's collector, the default: time limits sized on those judges hold;
    # ~25% less CPU than G1 on an allocation-heavy run (bench/bench_jvm.py)
    "serial": ("-XX:+UseSerialGC",),
    # G1 maps the archive's heap objects too (JDK 17 maps them for G1 only): the module graph
    # comes ready-made, ~15 ms of CPU less per test (~1.4x for a trivial program), for fleets
    # whose Java tests are short; with -XX:ActiveProcessorCount=1 it runs one GC thread
    "g1": ("-XX:+UseG1GC",),
}
SOURCES = "{sources}"  # placeholder for the entry points' paths in a compile argv
PROG_DIR = "{prog}"  # placeholder for the directory the artifact's files are placed in (read-only)


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
    # source text -> the name the program is started by ({main}), and its file is named after
    # (Java: the public class); None: the file is ``source_name``
    main_class: Callable[[str], str] | None = field(default=None, repr=False, compare=False)

    def run_argv_for(self, main: str = "") -> tuple[str, ...]:
        """The run argv with the main class filled in ({prog} and {mem} stay placeholders)."""
        return tuple(a.replace("{main}", main) for a in self.run_argv)

    def source_file(self, code: str) -> str:
        """The file a single-file solution ``code`` is saved as."""
        if self.main_class is None:
            return self.source_name
        suffix = os.path.splitext(self.source_name)[1]
        name = self.main_class(code).rsplit(".", 1)[-1] + suffix
        # a class name no file can have (past NAME_MAX bytes): the default name, and the
        # compiler says what it says of that (a public class: declared in the wrong file)
        return name if len(name.encode("utf-8", "surrogatepass")) <= NAME_MAX else self.source_name


def _which(name: str) -> str:
    return shutil.which(name, path="/usr/local/bin:/usr/bin:/bin") or shutil.which(name) or name


def _java_tool(tool: str) -> str:
    home = os.environ.get("CPFLEET_JAVA_HOME")
    if home:
        return os.path.join(home, "bin", tool)
    found = _which(tool)
    return os.path.realpath(found) if os.path.isabs(found) else found


def solution_python() -> str:
    """The Python executable solutions run under (CPFLEET_SOLUTION_PYTHON, else this one)."""
    import sys

    configured = os.environ.get("CPFLEET_SOLUTION_PYTHON")
    if configured:
        return configured
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


@functools.lru_cache(maxsize=8)
def jvm_fast_start(java: str) -> tuple[str, ...]:
    """``JVM_FAST_START_FLAGS`` when the JVM at ``java`` starts with them, else (): asked once per
    process and JVM, so a JDK without one of them runs Java at the plain start-up cost instead of
    failing every test."""
    if not os.path.isabs(java) or not os.access(java, os.X_OK):
        return ()
    try:
        out = subprocess.run([java, *JVM_FAST_START_FLAGS, "-XX:-UsePerfData", "-version"], capture_output=True,
                             timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return JVM_FAST_START_FLAGS if out.returncode == 0 else ()


def java_gc_flags(env: Mapping[str, str]) -> tuple[str, ...]:
    """The collector flags of ``CPFLEET_JAVA_GC`` (``serial``, the default, or ``g1``)."""
    gc: str = envvars.read("CPFLEET_JAVA_GC", "serial", env)
    return JAVA_GCS[gc]


# --- the toolchains: one builder per language, bound to core.languages' entry by its name ------

Toolchain = Callable[[Mapping[str, str]], Language]


_JAVA_PUBLIC = re.compile(r"\bpublic\s+(?:(?:final|abstract|strictfp)\s+)*(?:class|interface|enum|record)\s+([A-Za-z_$][\w$]*)")
_JAVA_CLASS = re.compile(r"\b(?:class|interface|enum|record)\s+([A-Za-z_$][\w$]*)")
_JAVA_MAIN = re.compile(r"\bstatic\s+(?:final\s+)?(?:public\s+)?void\s+main\s*\(")
_JAVA_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_JAVA_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)\s*;", re.M)


def java_main_class(source: str) -> str:
    """The class a Java solution is started by: its public class, else the class declared last
    before the first ``static void main`` (a package-qualified name when it declares a package)."""
    text = _JAVA_COMMENTS.sub(" ", source)
    m = _JAVA_PUBLIC.search(text)
    name = m.group(1) if m else ""
    if not name:
        main = _JAVA_MAIN.search(text)
        before = [c.group(1) for c in _JAVA_CLASS.finditer(text[: main.start() if main else len(text)])]
        name = before[-1] if before else "Main"
    pkg = _JAVA_PACKAGE.search(text)
    return f"{pkg.group(1)}.{name}" if pkg else name


def _python3(env: Mapping[str, str]) -> Language:
    python = env.get("CPFLEET_SOLUTION_PYTHON") or solution_python()
    return Language(
        "python3", "solution.py", None, (python, f"{PROG_DIR}/solution.py"), "address_space", tools=(python,),
        packages_of=python, in_process=True, oom_markers=(b"\nMemoryError",),
    )


def _pypy3(env: Mapping[str, str]) -> Language:
    pypy = env.get("CPFLEET_PYPY") or _which("pypy3")
    return Language(
        "pypy3", "solution.py",
        # a syntax check by PyPy itself, so a SyntaxError is COMPILE_ERROR as for CPython
        CompileStep((pypy, "-c", syntax_errors.pypy_check_script(), SOURCES), (pypy, "--version")),
        (pypy, f"{PROG_DIR}/solution.py"), "cgroup", extra_cgroup_mb=64, tools=(pypy,),
        compile_memory_model="cgroup", packages_of=pypy, oom_markers=(b"\nMemoryError",),
    )


def _static_link(env: Mapping[str, str]) -> tuple[str, ...]:
    # static linking, as Codeforces and Kattis do: no dynamic loader and relocation of libstdc++
    # at every test's exec (~1 ms of CPU per test for an iostream program here)
    return ("-static",) if envvars.read("CPFLEET_STATIC_LINK", "1", env) == "1" else ()


def _cpp(env: Mapping[str, str]) -> Language:
    std: str = envvars.read("CPFLEET_CPP_STD", "gnu++17", env)
    gxx = _which("g++")
    cpp_flags = (f"-std={std}", "-O2", "-DONLINE_JUDGE", "-pipe")
    return Language(
        "cpp", "solution.cpp",
        CompileStep((gxx, *cpp_flags, "{pch}", "-o", "out/a.out", SOURCES, *_static_link(env)), (gxx, "--version")),
        (f"{PROG_DIR}/a.out",), "address_space", tools=(gxx,), flags=cpp_flags,
        preprocessor=True, precompiled_header=True, oom_markers=(b"std::bad_alloc",),
    )


def _c(env: Mapping[str, str]) -> Language:
    gcc = _which("gcc")
    c_flags = ("-std=gnu11", "-O2", "-DONLINE_JUDGE", "-pipe")
    return Language(
        "c", "solution.c",
        CompileStep((gcc, *c_flags, "-o", "out/a.out", SOURCES, "-lm", *_static_link(env)), (gcc, "--version")),
        (f"{PROG_DIR}/a.out",), "address_space", tools=(gcc,), flags=(*c_flags, "-lm"), preprocessor=True,
    )


def _java(env: Mapping[str, str]) -> Language:
    javac, java = _java_tool("javac"), _java_tool("java")
    fast = jvm_fast_start(java)  # javac runs the same JDK's JVM
    return Language(
        "java", "Main.java",
        CompileStep((javac, "-J-Xmx768m", "-J-XX:+UseSerialGC", "-J-XX:-UsePerfData", "-J-Xss64m",
                     *(f"-J{flag}" for flag in fast),
                     "-J-XX:TieredStopAtLevel=1", "-encoding", "UTF-8", "-nowarn", "-d", "out",
                     SOURCES), (javac, "-version")),
        (java, "-Xmx{mem}m", "-Xss{stack}m", f"-XX:ThreadStackSize={JVM_THREAD_STACK_KB}", *java_gc_flags(env),
         *JVM_START_FLAGS, *fast, "-XX:CICompilerCount=2", "-XX:ActiveProcessorCount=1", "-Dfile.encoding=UTF-8",
         "-cp", PROG_DIR, "{main}"),
        "cgroup", extra_cgroup_mb=JVM_OVERHEAD_MB, tools=(javac, java), compile_memory_model="cgroup",
        oom_markers=(b"java.lang.OutOfMemoryError",), main_class=java_main_class,
    )


_toolchains_lock = threading.Lock()
TOOLCHAINS: dict[str, Toolchain] = {"python3": _python3, "pypy3": _pypy3, "cpp": _cpp, "c": _c, "java": _java}


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
    fleet upgraded mid-run does not hand out verdicts of the old toolchain."""
    lang = get(name)
    packages = installed_packages(lang.packages_of) if lang.packages_of else ""
    return hashlib.sha256(f"{lang!r}\n{toolchain_version(name)}\n{packages}".encode()).hexdigest()[:16]


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
    if not missing and not toolchain_version(name):
        missing.append(f"{lang.tools[0]} (present but does not run)")
    return missing


def jvm_class_sharing(run_argv: tuple[str, ...] | None = None) -> str:
    """'' when the JVM of ``run_argv`` (default: the table's Java run line) maps its class-data
    sharing archive, else why not (the JVM's own words). Asked once with ``-Xshare:on``, which
    fails where ``-Xshare:auto`` silently starts without the archive: a worker whose JDK lost
    or corrupted it still judges correctly, only slower, and its start-up line says so."""
    argv = run_argv if run_argv is not None else get("java").run_argv
    flags = [a.replace("{mem}", "256").replace("{stack}", "256") for a in argv[1:] if a.startswith("-X") and not a.startswith("-Xshare")]
    try:
        out = subprocess.run([argv[0], *flags, "-Xshare:on", "-version"], capture_output=True, timeout=60,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run {argv[0]}: {e}"
    if out.returncode == 0:
        return ""
    said = (out.stdout + out.stderr).decode(errors="replace").split("\n")
    return " ".join(line.strip() for line in said if line.strip())[:300] or f"exit status {out.returncode}"


def availability() -> dict[str, list[str]]:
    """{language: missing tools}; an empty list means the language is available here."""
    return {name: missing_tools(name) for name in LANGUAGES}


def availability_line() -> str:
    """One line for a worker's or ``cpfleet up``'s start-up log."""
    parts = []
    for name, missing in availability().items():
        if not missing and name == "java" and (why := jvm_class_sharing()):
            parts.append(f"java (WARNING: no class-data sharing, each test starts ~2x slower: {why})")
            continue
        parts.append(name if not missing else f"{name} (missing: {', '.join(missing)})")
    return "languages: " + ", ".join(parts)


def time_multiplier(name: str, per_problem: Mapping[str, float] | None) -> float:
    if per_problem and name in per_problem:
        return float(per_problem[name])
    return get(name).time_multiplier
