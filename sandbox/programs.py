"""Compile a source set once, run the result confined: the one API for every non-Python program.

Solutions in C, C++, Java and PyPy, and the judge's own programs (testlib checkers, Kattis output
validators, interactors), all go through here::

    from cpfleet.sandbox import programs

    built = programs.compile_program(runner, "cpp", {"check.cpp": src, "testlib.h": lib}, ["check.cpp"])
    if not built.ok:            # built.diagnostics: clipped compiler output; built.limit: what fired
        ...                     # for a solution: COMPILE_ERROR; for a checker: broken problem data
    with programs.open_session(runner, built.image) as checker:   # one job, many runs
        rr = checker.run(b"", Limits(time_s=10), argv=["input", "output", "answer"],
                         files={"input": inp, "output": out, "answer": ans})
    rr.exit_code, rr.stdout, rr.stderr, rr.status   # a RunResult, as for Python tests

    rr = programs.run_program(runner, built.image, stdin=b"...", limits=Limits())  # a single run
    sol, inter = programs.run_interactive(runner, sol_image, sol_limits, inter_image, inter_limits,
                                          argv=["input", "answer", "feedback/"], files={...})

Compilation is confined exactly like a test (it IS a test of a program job, see below): its own
CPU/wall/memory limits (``COMPILE_LIMITS``), no network, a fresh writable directory, the sources
read-only, nothing of the host but the system directories (the toolchains) visible, the slot's
unprivileged uid. The compiler's output directory comes back as a tar stream on its stdout
(bounded: a gigantic binary is an output limit), its stderr is the diagnostics. A compile that
exceeds a limit (``#include "/dev/zero"``, template bombs, a binary over the cap) is a failed
compile with a message naming the limit, never a hung worker.

Running: each run is one test of a *program job* in the runner's zygote (sandbox/zygote.py): the
artifact's files sit read-only in ``/prog`` (a tmpfs of the job's mount namespace), ``files``
are placed root-owned and read-only in the test's fresh working directory, and the child execs
``argv`` after the same confinement as a Python test (pid namespace, seccomp, cgroup, rlimits,
uid drop, no network). Verdicts are those of Python tests (``RunResult.status``).

The compile cache (``CompileCache``) keys artifacts by (language, compile argv and flags,
toolchain version, precompiled header, every source file) and keeps them as single files in a
per-host directory, replaced atomically (write + rename) so pool processes racing for one key
each see a whole entry, bounded in bytes (least recently used evicted). A GRPO group's
duplicates compile once. Ordinary compile errors are cached too (deterministic); a compile that
hit a limit is not (a quieter machine might finish it).

Precompiled ``bits/stdc++.h`` (``PchCache``): built once per toolchain and flag set from the
system header (trusted input, so outside the sandbox), in a directory every zygote binds
read-only; a C++ compile gets ``-I that -Winvalid-pch`` so GCC uses it for ``#include
<bits/stdc++.h>`` and falls back to the real header (with a warning) when it does not match.

Over 500 lines because compile, session, single run and interactive pair are one API over one
program image; the languages' toolchains live in sandbox/languages/ (one module each), the runner in forkserver.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgpack

from cpfleet.core import envvars
from cpfleet.core.checkers import BUILD_RUN
from cpfleet.core.errors import ProgramError, SandboxBroken, SandboxFailure, SlotDirError
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages, slots
from cpfleet.sandbox.jobinit import COMPILE_CPU_S
from cpfleet.sandbox.languages.java import JVM_OVERHEAD_MB
from cpfleet.sandbox.runner import CodeRunner, Limits, ProgramImage, RunResult

if TYPE_CHECKING:
    from cpfleet.sandbox.forkserver import ZygoteRunner
    from cpfleet.sandbox.jobs import Job

MiB = 1024 * 1024
DIAGNOSTICS_CHARS = 2000  # compiler output kept for feedback (the first lines matter most)
# A compile is bounded like a test, with room for g++ -O2 on a large source and the JVM of javac.
COMPILE_LIMITS = Limits(time_s=float(COMPILE_CPU_S), memory_mb=2048, wall_s=60.0, stdout_bytes=64 * MiB,
                        stderr_bytes=1 * MiB, stderr_keep_bytes=64 * 1024, file_size_mb=256, nproc=64,
                        nofile=256)
SHELL = "/bin/sh"
# whether the sandbox can run "$1" (a path, or a name on its PATH): asked of a compiler that
# ended as the shell ends a command it cannot run (126, 127), in a job of its own
_CAN_RUN = 'case $1 in */*) [ -f "$1" ] && [ -x "$1" ];; *) command -v "$1" >/dev/null;; esac'
DEFAULT_RUN_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class Compiled:
    """The outcome of one compile. ``ok``: ``image`` can be run. Otherwise ``diagnostics``
    holds the compiler's first messages (clipped) and ``limit`` names the limit that ended the
    compile ("" for an ordinary compile error)."""

    ok: bool
    language: str
    image: ProgramImage | None = None
    diagnostics: str = ""
    limit: str = ""
    seconds: float = 0.0  # wall time of the compile (0 on a cache hit)
    cache_hit: bool = False
    key: str = ""
    # False: the limit that ended it depended on machine load (the wall-clock backstop, a CPU
    # rlimit running ahead): another compile may pass, so no result built on it may be cached
    deterministic: bool = True


# --- the compile cache ---------------------------------------------------------------------------
def default_cache_dir() -> str:
    return os.environ.get("CPFLEET_COMPILE_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), f"cpfleet-compile-{os.geteuid()}")


def own_cache_dir(root: str | None = None) -> str:
    """The compile cache's folder (``root``, else ``default_cache_dir()``), made 0700 or checked
    by the slot folder's ownership rule (``slots.open_own_dir``; SlotDirError otherwise): the
    cached artifacts are run as programs and checkers, so a folder someone else made or may
    write in (the default is in the shared /tmp) could hand any submission their binary. Every
    folder kept in it (the artifacts, the self-test's markers) is made through this first: one
    made as a parent on the way (``os.makedirs``) would take the umask's mode, group-writable
    under umask 002, and the cache would then refuse its own folder."""
    top = root or default_cache_dir()
    # the default folder, and only it, is ours to replace when others may write in it; a folder
    # the operator named is refused instead (it may hold anything)
    ours = root is None and not os.environ.get("CPFLEET_COMPILE_CACHE_DIR")
    os.close(slots.open_own_dir(top, 0o700, "compile cache directory", disposable=ours))
    return top


class CompileCache:
    """Artifacts on disk, one file per key, bounded in bytes (LRU by mtime, touched on a hit)."""

    def __init__(self, root: str | None = None, max_bytes: int | None = None) -> None:
        self.root = os.path.join(own_cache_dir(root), "artifacts")
        mb: int = envvars.read("CPFLEET_COMPILE_CACHE_MB", 512)
        self.max_bytes = max_bytes if max_bytes is not None else mb * MiB
        os.close(slots.open_own_dir(self.root, 0o700, "compile cache directory", disposable=True))
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key + ".art")

    def get(self, key: str, *, count_miss: bool = True) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
            os.utime(path)
            entry = msgpack.unpackb(data, raw=False)
        except (OSError, ValueError, msgpack.UnpackException):
            entry = None
        if not isinstance(entry, dict):
            self.misses += count_miss
            return None
        self.hits += 1
        return entry

    @contextlib.contextmanager
    def compiling(self, key: str) -> Iterator[None]:
        """Hold the key's lock while compiling it: pool processes that race for one key
        compile it once, the others wait and then read the entry."""
        fd = os.open(os.path.join(self.root, key + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        data = msgpack.packb(dict(entry), use_bin_type=True)
        if len(data) > self.max_bytes:
            return
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self._path(key))  # atomic: a racing reader sees the old or the new whole file
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return
        self._evict()

    def size_bytes(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _entries(self) -> list[tuple[float, int, str]]:
        out = []
        with os.scandir(self.root) as it:
            for e in it:
                if e.name.endswith(".art"):
                    with contextlib.suppress(OSError):
                        st = e.stat()
                        out.append((st.st_mtime, st.st_size, e.path))
        return out

    def _evict(self) -> None:
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)  # a reader that opened it keeps reading a whole file
            with contextlib.suppress(OSError):
                # a process holding it still compiles correctly; a newcomer may compile once more
                os.unlink(path[: -len(".art")] + ".lock")
            total -= size


_default_cache: CompileCache | None = None


def default_cache() -> CompileCache:
    """This process's compile cache. A folder refused by its ownership rule (``SlotDirError``:
    planted, foreign, writable by others) is the worker's setup failing, so it is raised as
    ``SandboxFailure``, which every judging path answers as an infrastructure error, never as
    the program's verdict nor as an exception out of ``judge_locally``; the next compile looks
    again (the folder may have been repaired)."""
    global _default_cache
    if _default_cache is None:
        try:
            _default_cache = CompileCache()
        except SlotDirError as e:
            raise SandboxFailure(f"no compile cache: {e}") from e
    return _default_cache


# --- precompiled bits/stdc++.h -------------------------------------------------------------------
def pch_root() -> str:
    """Where precompiled headers live (``CPFLEET_PCH_DIR``, default a per-user folder in the temp
    directory): bound read-only into every zygote, so world-readable."""
    return os.environ.get("CPFLEET_PCH_DIR") or default_pch_dir()


def default_pch_dir() -> str:
    return os.path.join(tempfile.gettempdir(), f"cpfleet-pch-{os.geteuid()}")


class PchCache:
    """One precompiled ``bits/stdc++.h`` per (toolchain version, flags), built on first use."""

    def __init__(self, root: str | None = None) -> None:
        self.root = root or pch_root()

    def ensure_root(self) -> str:
        """The root, ours alone (``slots.open_own_dir``: a planted header would be compiled into
        every C++ submission) and readable by the zygotes that bind it."""
        # the default folder, and only it, is ours to replace when others may write in it
        ours = self.root == default_pch_dir() and not os.environ.get("CPFLEET_PCH_DIR")
        fd = slots.open_own_dir(self.root, 0o755, "precompiled header directory", disposable=ours)
        try:
            os.fchmod(fd, 0o755)
        finally:
            os.close(fd)
        return self.root

    def include_dir(self, compiler: str, flags: Sequence[str], version: str) -> str | None:
        """The directory to put first on the include path (None: no PCH could be built here)."""
        if os.environ.get("CPFLEET_PCH", "1") == "0" or not version:
            return None
        key = hashlib.blake2b(repr((compiler, tuple(flags), version)).encode(), digest_size=10).hexdigest()
        try:
            d = os.path.join(self.ensure_root(), key)
        except SlotDirError:  # refused (the runner's start logged why): compile without a header
            return None
        gch = os.path.join(d, "bits", "stdc++.h.gch")
        if os.path.exists(gch):
            return d
        failed = os.path.join(self.root, key + ".failed")
        if os.path.exists(failed):
            return None
        lock_fd = os.open(os.path.join(self.root, key + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)  # one build per host; the others wait for it
            if os.path.exists(gch):
                return d
            os.makedirs(os.path.join(d, "bits"), mode=0o755, exist_ok=True)
            header = os.path.join(d, "stdc++-pch.h")
            with open(header, "w") as f:
                f.write("#include <bits/stdc++.h>\n")
            tmp = gch + f".tmp{os.getpid()}"
            proc = subprocess.run([compiler, *flags, "-x", "c++-header", header, "-o", tmp],
                                  capture_output=True, timeout=300, check=False)
            if proc.returncode != 0:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                with open(failed, "wb") as f:
                    f.write(proc.stderr[-4000:])
                return None
            os.chmod(tmp, 0o644)
            os.replace(tmp, gch)
            return d
        except (OSError, subprocess.TimeoutExpired):
            return None
        finally:
            os.close(lock_fd)


_pch = PchCache()


# --- compiling -----------------------------------------------------------------------------------
def solution_sources(language: str, code: str) -> tuple[dict[str, bytes], list[str]]:
    """A single-file solution as a source set: its file name (Java: the public class's) and entry."""
    name = languages.get(language).source_file(code)
    return {name: code.encode("utf-8", errors="surrogatepass")}, [name]


def _check_name(name: str) -> str:
    parts = name.split("/")
    if not name or name.startswith("/") or "\0" in name or any(p in ("", ".", "..") for p in parts):
        raise ProgramError(f"bad source file name {name!r}")
    return name


def _compile_argv(lang: languages.Language, entries: Sequence[str], pch_dir: str | None) -> list[str]:
    assert lang.compile is not None
    argv: list[str] = []
    for a in lang.compile.argv:
        if a == "{pch}":
            if pch_dir:
                argv += ["-I", pch_dir, "-Winvalid-pch"]
        elif a == languages.SOURCES:
            argv += [f"{languages.PROG_DIR}/{e}" for e in entries]
        else:
            argv.append(a)
    return argv


def cache_key(language: str, argv: Sequence[str], version: str, files: Mapping[str, bytes],
              entries: Sequence[str]) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(msgpack.packb([language, list(argv), version, sorted(entries)], use_bin_type=True))
    for name in sorted(files):
        h.update(msgpack.packb([name, files[name]], use_bin_type=True))
    return h.hexdigest()


def compile_program(
    runner: CodeRunner,
    language: str,
    files: Mapping[str, str | bytes],
    entry_points: Sequence[str],
    *,
    cache: CompileCache | None = None,
    limits: Limits = COMPILE_LIMITS,
    use_pch: bool = True,
    defines: Sequence[str] = (),
) -> Compiled:
    """Compile ``files`` (relative path -> source) whose ``entry_points`` are the translation
    units (Java: the first is the one with ``main``); ``defines`` (``NAME=VALUE``, C and C++
    only) are passed as ``-D`` flags and are part of the cache key. Raises ProgramError for a
    source set that cannot be compiled as asked, and SandboxFailure (infrastructure) when the
    sandbox fails or the compile cache folder is refused (``default_cache``)."""
    lang = languages.get(language)
    if lang.compile is None:
        raise ProgramError(f"{language} programs are not compiled: run them with the Python runner")
    blobs = {_check_name(k): (v.encode("utf-8", errors="surrogatepass") if isinstance(v, str) else bytes(v))
             for k, v in files.items()}
    entries = [_check_name(e) for e in entry_points]
    if not entries or any(e not in blobs for e in entries):
        raise ProgramError(f"entry points {entries} must name files of the source set {sorted(blobs)}")
    version = languages.toolchain_version(language)
    pch_dir = None
    if use_pch and lang.precompiled_header and any(b"bits/stdc++.h" in blobs[e] for e in entries):
        pch_dir = _pch.include_dir(lang.compile.argv[0], lang.flags, version)
    if pch_dir is not None:
        pch_dir = _sandbox_path(runner, pch_dir)
    argv = _compile_argv(lang, entries, pch_dir)
    if defines:
        if not lang.preprocessor:
            raise ProgramError(f"preprocessor defines apply to C and C++, not {language}")
        argv[1:1] = [f"-D{d}" for d in defines]
    main = ""
    if lang.main_class is not None:
        main = lang.main_class(blobs[entries[0]].decode("utf-8", errors="replace"))
    key = cache_key(language, argv, version, blobs, entries)
    cache = cache if cache is not None else default_cache()
    entry = cache.get(key)
    if entry is not None:
        return _from_entry(lang, entry, key, main, cache_hit=True)
    with cache.compiling(key):  # a racing pool process compiling the same key: wait for its result
        entry = cache.get(key, count_miss=False)
        if entry is not None:
            return _from_entry(lang, entry, key, main, cache_hit=True)
        t0 = time.perf_counter()
        entry, cacheable = _compile_confined(runner, lang, blobs, argv, limits)
        seconds = time.perf_counter() - t0
        if cacheable:
            cache.put(key, entry)
    return _from_entry(lang, entry, key, main, cache_hit=False, seconds=seconds)


# A program folder built by its own ``build`` script and run by its ``run`` script, as problemtools'
# BuildRun: ``build`` runs in a writable copy of the folder (its output goes to the diagnostics,
# as problemtools discards it), must leave an executable ``run`` there, and the whole folder is the
# artifact; ``run`` is then the program. A folder with only ``run`` is run as it is. Like
# problemtools (which applies no memory rlimit to such programs, since ``run`` may start a JVM),
# the runs are bounded by the cgroup, with the JVM's allowance.
# The folder is kept with its links followed (``tar -h``, ``--hard-dereference``): a build that links
# ``run`` to its validator, as problemtools runs it in place, keeps the file the link names.
# What ``build`` prints goes to a log beside the folder, and only a failed build's last words
# (``DIAGNOSTICS_CHARS``: the failure is at a build log's end) become its diagnostics:
# problemtools discards a build's output, so a chatty build (a make printing every command) must
# not be stopped by the cap of a compile's messages.
_BUILD_SCRIPT = (
    'mkdir out && cp -R "$1"/. out/ && cd out && if [ -e build ]; then ./build > ../build.log 2>&1 || '
    '{ s=$?; tail -c ' + str(DIAGNOSTICS_CHARS) + ' ../build.log >&2; exit $s; }; fi && '
    '{ [ -f run ] && [ -x run ] || { echo \'the build script did not produce an executable called "run"\' >&2; '
    'exit 1; }; } && exec tar -ch --hard-dereference -f - .'
)


def build_run_program(runner: CodeRunner, files: Mapping[str, str | bytes], *, cache: CompileCache | None = None,
                      limits: Limits = COMPILE_LIMITS) -> Compiled:
    """Build a program folder (``files``: path inside the folder -> content) with its ``build``
    script, confined and cached like a compile (the key: the folder's files, the script and the
    C++ toolchain's version line, the usual tool of a build script); or take it as it is when it
    has only a ``run`` script. ``ok`` False with the script's messages when the build fails."""
    blobs = {_check_name(k): (v.encode("utf-8", errors="surrogatepass") if isinstance(v, str) else bytes(v))
             for k, v in files.items()}
    if "build" not in blobs and "run" not in blobs:
        raise ProgramError(f"a build/run program folder needs a 'build' or 'run' script, got {sorted(blobs)}")
    modes = {k: 0o755 if k in ("build", "run") else 0o644 for k in blobs}
    run_limits = JVM_OVERHEAD_MB
    if "build" not in blobs:
        image = ProgramImage(files={k: (v, modes[k]) for k, v in blobs.items()}, argv=(f"{languages.PROG_DIR}/run",),
                             memory_model="cgroup", extra_cgroup_mb=run_limits)
        return Compiled(True, BUILD_RUN, image)
    version = languages.toolchain_version("cpp")
    argv = [SHELL, "-c", _BUILD_SCRIPT, "build", languages.PROG_DIR]
    key = cache_key(BUILD_RUN, argv, version, blobs, ["build"])
    cache = cache if cache is not None else default_cache()
    entry = cache.get(key)
    cache_hit = entry is not None
    seconds = 0.0
    if entry is None:
        with cache.compiling(key):
            entry = cache.get(key, count_miss=False)
            cache_hit = entry is not None
            if entry is None:
                t0 = time.perf_counter()
                image = ProgramImage(files={k: (v, modes[k]) for k, v in blobs.items()}, argv=tuple(argv),
                                     memory_model="cgroup", extra_cgroup_mb=0)
                entry, cacheable, _ = _run_build(runner, image, limits)
                seconds = time.perf_counter() - t0
                if cacheable:
                    cache.put(key, entry)
    if not entry.get("ok"):
        return Compiled(False, BUILD_RUN, None, str(entry.get("diagnostics", "")), str(entry.get("limit", "")),
                        seconds, cache_hit, key, deterministic=bool(entry.get("deterministic", True)))
    built = {str(k): (bytes(v[0]), int(v[1])) for k, v in entry["files"].items()}
    image = ProgramImage(files=built, argv=(f"{languages.PROG_DIR}/run",), memory_model="cgroup",
                         extra_cgroup_mb=run_limits)
    return Compiled(True, BUILD_RUN, image, str(entry.get("diagnostics", "")), "", seconds, cache_hit, key)


def source_image(language: str, source: str) -> ProgramImage:
    """A program of an interpreted language (no compile step: a Python checker, a reference
    solution), run from its source as is."""
    lang = languages.get(language)
    data = source.encode("utf-8", errors="surrogatepass")
    return ProgramImage(files={lang.source_name: (data, 0o444)}, argv=lang.run_argv_for(),
                        memory_model=lang.memory_model, extra_cgroup_mb=lang.extra_cgroup_mb)


def _from_entry(lang: languages.Language, entry: Mapping[str, Any], key: str, main: str, *, cache_hit: bool,
                seconds: float = 0.0) -> Compiled:
    if not entry.get("ok"):
        return Compiled(False, lang.name, None, str(entry.get("diagnostics", "")), str(entry.get("limit", "")),
                        seconds, cache_hit, key, deterministic=bool(entry.get("deterministic", True)))
    files = {str(k): (bytes(v[0]), int(v[1])) for k, v in entry["files"].items()}
    image = ProgramImage(files=files, argv=lang.run_argv_for(main),
                         memory_model=lang.memory_model, extra_cgroup_mb=lang.extra_cgroup_mb)
    return Compiled(True, lang.name, image, str(entry.get("diagnostics", "")), "", seconds, cache_hit, key)


def _clip_diagnostics(text: str) -> str:
    text = text.strip("\n")
    if len(text) <= DIAGNOSTICS_CHARS:
        return text
    return text[:DIAGNOSTICS_CHARS] + "\n... [diagnostics clipped]"


def _compile_confined(runner: CodeRunner, lang: languages.Language, blobs: Mapping[str, bytes],
                      argv: Sequence[str], limits: Limits) -> tuple[dict[str, Any], bool]:
    """Run the compiler as a program job; returns (cache entry, whether to cache it). A compile
    stopped because its messages passed their cap (``limits.stderr_bytes``) may have been
    printing warnings only (gcc quotes the whole source line in each: a table on one line with
    an overflowing constant per entry makes megabytes) and would have succeeded: it is compiled
    again with the language's ``quiet_flag``, and that compile decides (warnings do not change
    the program; errors still end it, now without the warnings around them)."""
    # The compiler's stdin is /dev/null and its messages (stdout and stderr alike) go to a file,
    # copied to the job's stderr once it ends: a source that includes /dev/stdout or /dev/stderr
    # (/proc/self/fd/1, 2) then reads a file, never a pipe the compiler itself holds open for
    # writing, where the read would wait until the wall clock stopped the compile
    script = ('mkdir out .msg && { "$@" </dev/null >.msg/log 2>&1; s=$?; cat .msg/log >&2; [ "$s" = 0 ] || exit "$s"; } '
              '&& exec tar -C out -cf - .')

    def build(compile_argv: Sequence[str]) -> tuple[dict[str, Any], bool, bool]:
        image = ProgramImage(files={k: (v, 0o644) for k, v in blobs.items()},
                             argv=(SHELL, "-c", script, "compile", *compile_argv),
                             memory_model=lang.compile_memory_model, extra_cgroup_mb=0)
        return _run_build(runner, image, limits, compiler=compile_argv[0])

    entry, cacheable, flooded = build(argv)
    if not (flooded and lang.quiet_flag):
        return entry, cacheable
    entry, cacheable, _ = build([argv[0], lang.quiet_flag, *argv[1:]])
    note = (f"(the compiler's messages passed {limits.stderr_bytes // MiB} MiB: compiled again with "
            f"{lang.quiet_flag}, without its warnings)")
    entry["diagnostics"] = f"{note}\n{entry['diagnostics']}" if entry.get("diagnostics") else note
    return entry, cacheable


def _sandbox_can_run(runner: CodeRunner, tool: str) -> bool:
    """Whether ``tool`` is there to run inside the sandbox, asked by a job that runs nothing of a
    program's (a compile's own exit status, which a compile step that runs the source's code can
    choose, says nothing trustworthy about it)."""
    image = ProgramImage(files={"probe": (b"", 0o644)}, argv=(SHELL, "-c", _CAN_RUN, "probe", tool),
                         memory_model="cgroup", extra_cgroup_mb=0)
    return run_program(runner, image, stdin=b"", limits=DEFAULT_RUN_LIMITS).status == Verdict.OK


def _run_build(runner: CodeRunner, image: ProgramImage, limits: Limits,
               compiler: str | None = None) -> tuple[dict[str, Any], bool, bool]:
    """Run a build (a compiler, a build script) as a program job whose stdout is the tar stream
    of its output; returns (cache entry, whether to cache it, whether it was stopped because
    its messages on stderr passed ``limits.stderr_bytes``). A ``compiler`` the sandbox cannot
    run (installed where its root does not show it) is the host's failure: the shell's "not
    found" was every program's COMPILE_ERROR, and cached."""
    rr = run_program(runner, image, stdin=b"", limits=limits)
    flooded = rr.status == Verdict.OUTPUT_LIMIT and not rr.stdout_truncated
    diagnostics = _clip_diagnostics(rr.stderr.decode("utf-8", errors="replace"))
    if rr.status == Verdict.INTERNAL:
        raise SandboxBroken(f"compiling failed in the sandbox: {rr.error}")
    if (compiler is not None and rr.status == Verdict.RUNTIME_ERROR and rr.signal is None
            and rr.exit_code in (126, 127) and not _sandbox_can_run(runner, compiler)):
        raise SandboxBroken(f"the compiler {compiler} cannot be run inside the sandbox "
                            "(installed under a folder its root does not show?)")
    if rr.status != Verdict.OK:
        # a compile stopped by the wall clock waited (reading a pipe of its own, a loaded host):
        # named so, not as the CPU limit it never reached
        cpu_or_wall = f"the compile time limit ({limits.time_s:g}s CPU)" if rr.deterministic else \
            f"the compile's wall-clock limit ({rr.error})"
        what = {Verdict.TIME_LIMIT: cpu_or_wall,
                Verdict.MEMORY_LIMIT: f"the compile memory limit ({limits.memory_mb} MB)",
                Verdict.OUTPUT_LIMIT: f"the size limit of a compiled program ({limits.stdout_bytes // MiB} MB) "
                                      "or of the compiler's messages",
                }.get(rr.status, f"the compiler failed ({rr.error})")
        message = f"compilation stopped: it exceeded {what}" if rr.status != Verdict.RUNTIME_ERROR else \
            f"compilation failed: {what}"
        limit = str(rr.status) if rr.status != Verdict.RUNTIME_ERROR else ""
        if rr.status == Verdict.RUNTIME_ERROR and rr.signal is None:
            # the compiler's own exit status: an ordinary compile error, deterministic
            return {"ok": False, "diagnostics": diagnostics or f"compiler exit code {rr.exit_code}"}, True, False
        return {"ok": False, "diagnostics": (diagnostics + "\n" if diagnostics else "") + message,
                "limit": limit, "deterministic": rr.deterministic}, False, flooded
    try:
        files = _untar(rr.stdout, limits.stdout_bytes)
    except (tarfile.TarError, ValueError) as e:
        if compiler is None:
            # a build script's own folder: what it left there (a fifo) is the build's failure
            return {"ok": False, "diagnostics": f"{diagnostics}\nthe build left a file that cannot be kept: {e}"}, True, False
        raise SandboxBroken(f"the compiler's output could not be read: {e}") from e
    if not files:
        return {"ok": False, "diagnostics": diagnostics or "the compiler produced no program"}, True, False
    return {"ok": True, "files": files, "diagnostics": diagnostics}, True, False


def _untar(data: bytes, max_bytes: int) -> dict[str, tuple[bytes, int]]:
    """Regular files of a tar stream written by our compile script (names checked anyway)."""
    files: dict[str, tuple[bytes, int]] = {}
    total = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            if member.isdir():
                continue
            if not member.isfile():
                raise ValueError(f"unexpected {member.name!r} in the compiled output")
            name = os.path.normpath(member.name)
            _check_name(name)
            total += member.size
            if total > max_bytes:
                raise ValueError("compiled output too large")
            f = tar.extractfile(member)
            assert f is not None
            files[name] = (f.read(), 0o755 if member.mode & 0o111 else 0o644)
    return files


def _sandbox_path(runner: CodeRunner, host_path: str) -> str | None:
    mapper = getattr(runner, "sandbox_path", None)
    return mapper(host_path) if mapper is not None else None


# --- running -------------------------------------------------------------------------------------
def _zygote_runner(runner: CodeRunner) -> ZygoteRunner:
    from cpfleet.sandbox.forkserver import ZygoteRunner

    if not isinstance(runner, ZygoteRunner):
        raise ProgramError(f"runner {runner.name} cannot run compiled programs")
    return runner


@dataclass
class ProgramSession:
    """One job of a program in the runner's zygote: run it many times, then close it."""

    runner: ZygoteRunner
    job: Job
    owned: bool = True  # False: the runner's loaded solution, which the runner closes
    closed: bool = field(default=False)

    def run(self, stdin: bytes = b"", limits: Limits = DEFAULT_RUN_LIMITS, *, argv: Sequence[str] = (),
            files: Mapping[str, bytes] | None = None, collect: Sequence[str] = ()) -> RunResult:
        """One confined run: ``argv`` appended to the program's, ``files`` placed read-only in
        its working directory (a name ending in "/": a directory it may write in), ``collect``
        read back from there afterwards into ``RunResult.files`` (at most 4 files of 12 KiB).
        INTERNAL in the result means the sandbox, not the program, failed."""
        return self.runner.run_job(self.job, stdin, limits, argv=list(argv), files=files, collect=collect)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.owned:
                self.job.close()

    def __enter__(self) -> ProgramSession:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def open_session(runner: CodeRunner, image: ProgramImage) -> ProgramSession:
    """Start a job for ``image`` beside whatever the runner has loaded (a checker next to the
    solution). Raises SandboxBroken when its files cannot be placed."""
    zr = _zygote_runner(runner)
    return ProgramSession(zr, zr.open_program(image))


def run_program(runner: CodeRunner, image: ProgramImage, *, stdin: bytes = b"", limits: Limits = DEFAULT_RUN_LIMITS,
                argv: Sequence[str] = (), files: Mapping[str, bytes] | None = None,
                collect: Sequence[str] = ()) -> RunResult:
    """Start ``image`` once, confined (a job of its own, closed afterwards)."""
    with open_session(runner, image) as session:
        return session.run(stdin, limits, argv=argv, files=files, collect=collect)


def loaded_session(runner: CodeRunner) -> ProgramSession:
    """The runner's loaded solution (any language: ``load`` or ``load_program``) as a session,
    for ``run_interactive``; closing it does not unload the solution."""
    zr = _zygote_runner(runner)
    job = zr.loaded_job
    if job is None:
        raise ProgramError("no program is loaded in the runner")
    return ProgramSession(zr, job, owned=False)


@dataclass(frozen=True, slots=True)
class InteractiveResult:
    solution: RunResult
    interactor: RunResult
    solution_ended_first: bool = False  # the solution's test ended before the interactor's
    oom_killed: bool = False  # the pair's memory cgroup killed a process (either side's, a child too)


def run_interactive(runner: CodeRunner, solution: ProgramSession, solution_limits: Limits,
                    interactor: ProgramSession, interactor_limits: Limits, *, argv: Sequence[str] = (),
                    files: Mapping[str, bytes] | None = None, collect: Sequence[str] = ()) -> InteractiveResult:
    """Run two sessions at once, the solution's stdout feeding the interactor's stdin and the
    interactor's stdout feeding the solution's stdin; ``argv``/``files`` go to the interactor.
    Each side is confined as a test of its own job; both are bounded by the slot's cgroup
    together (its limit is the sum of both memory limits). Their stdout is not captured (it is
    the other's input); stderr is, as for any run."""
    zr = _zygote_runner(runner)
    sol, inter, sol_first, oom = zr.run_pair(solution.job, solution_limits, interactor.job, interactor_limits,
                                        argv=list(argv), files=files, collect=collect)
    return InteractiveResult(sol, inter, sol_first, oom)
