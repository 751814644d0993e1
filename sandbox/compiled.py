"""Load a solution into the runner in its language: the step between extraction and the tests.

CPython solutions are compiled by the fork server itself (``runner.load``: a syntax error is
COMPILE_ERROR), and so are PyPy solutions where the runner has a PyPy fork server
(sandbox/pypy_zygote.py). Every other language (C, C++, Java, PyPy elsewhere) is compiled once per job by
``cpfleet.sandbox.programs.compile_program`` (confined, cached) and loaded as a program image whose
tests exec the binary or the runtime under the same confinement. A language whose toolchain this
host lacks, or whose self-test at worker start failed (sandbox/selftest.py), is an
infrastructure error naming why (the trainer can route the job to a worker that has it), never
a zero.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

from cpfleet.core.errors import SandboxFailure
from cpfleet.sandbox import languages, programs, selftest
from cpfleet.sandbox.extract import Extracted
from cpfleet.sandbox.runner import CodeRunner

# The largest PyPy source (in characters) compiled in the PyPy fork server. Its job init
# compiles with no CPU or memory limit of its own, charged to the worker: PyPy's compiler takes
# ~17 s and ~2.2 GB for a 4 MB `x = (1,1,...)`. A larger source takes the exec path, whose
# compile step runs confined (programs.COMPILE_LIMITS) and whose every test compiles again
# under the test's own limits, as `pypy3 solution.py` does. Solutions are far smaller.
PYPY_FORK_MAX_SOURCE_CHARS = 256 * 1024


@dataclass(frozen=True, slots=True)
class Prepared:
    """What loading produced: ready to run (both messages empty), a compile error (the
    program's fault), or an infrastructure failure."""

    compile_error: str | None = None
    infra_message: str = ""
    compile_ms: float = 0.0
    cache_hit: bool = False
    # False: the compile error is a limit that machine load decided (programs.Compiled): a
    # result built on it must not be cached, or a loaded moment fails the program for good
    deterministic: bool = True


def missing_toolchain(language: str) -> str:
    """'' when ``language`` can be judged here, else which tools are missing (checked once per
    process and toolchain: installing a toolchain means restarting the worker, which reports it
    at start; registering one in this process is seen at once)."""
    return _missing(language, languages.table().get(language))


@functools.cache
def _missing(language: str, toolchain: languages.Language | None) -> str:
    return ", ".join(languages.missing_tools(language))


def prepare(runner: CodeRunner, found: Extracted, fn_name: str | None = None) -> Prepared:
    lang = found.language
    missing = missing_toolchain(lang)
    if missing:
        return Prepared(infra_message=f"language {lang} is not available on this worker: missing {missing}")
    failed = selftest.failure(lang)
    if failed:  # the host's toolchain is broken: never a COMPILE_ERROR the program did not earn
        return Prepared(infra_message=f"language {lang} is not available on this worker: its self-test "
                                      f"at start failed: {failed}")
    if languages.get(lang).in_process:
        try:
            error = runner.load(found.code) if fn_name is None else runner.load(found.code, fn_name=fn_name)
        except SandboxFailure as e:  # a runner that cannot load is infrastructure
            return Prepared(infra_message=f"runner {runner.name} failed to load the program: {e}")
        return Prepared(compile_error=error)
    if lang == "pypy3" and fn_name is None and len(found.code) <= PYPY_FORK_MAX_SOURCE_CHARS and runner.forks_pypy():
        try:
            return Prepared(compile_error=runner.load_pypy(found.code))
        except SandboxFailure as e:
            return Prepared(infra_message=f"runner {runner.name} failed to load the PyPy program: {e}")
    files, entries = programs.solution_sources(lang, found.code)
    t0 = time.perf_counter()
    try:
        built = programs.compile_program(runner, lang, files, entries, limits=programs.COMPILE_LIMITS)
    except SandboxFailure as e:  # the sandbox failed, not the program
        return Prepared(infra_message=f"compiling {lang} failed in the sandbox: {e}")
    compile_ms = 0.0 if built.cache_hit else (time.perf_counter() - t0) * 1000.0
    if not built.ok or built.image is None:
        return Prepared(compile_error=built.diagnostics or "compilation failed", compile_ms=compile_ms,
                        cache_hit=built.cache_hit, deterministic=built.deterministic)
    try:
        runner.load_program(built.image)
    except SandboxFailure as e:
        return Prepared(infra_message=f"runner {runner.name} failed to load the {lang} program: {e}",
                        compile_ms=compile_ms)
    return Prepared(compile_ms=compile_ms, cache_hit=built.cache_hit)
