"""What every checker-program protocol shares: compiling a checker once, running it confined,
the exit codes the protocols and the interactors read, and the detail a verdict quotes.

The protocol modules (testlib.py, kattis_validator.py, python.py) import these; the package
(__init__.py) binds the protocols by kind and judges with ``run_checker``; sandbox/interactive.py
reads the same exit codes and sessions. The package docstring says how a checker program is
built, confined and trusted.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cpfleet.core.checkers import BUILD_RUN, ProgramSpec
from cpfleet.core.errors import CheckerBroken, ProgramError, SandboxFailure
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages, programs
from cpfleet.sandbox.runner import CodeRunner, Limits, ProgramImage, RunResult

log = logging.getLogger(__name__)

TESTLIB_ENV = "CPFLEET_TESTLIB_DIR"
DETAIL_BYTES = 2048
# testlib's partial credit ``quitf(_pc(k), ...)`` exits PC_BASE_EXIT_CODE + k. Its default base
# is 0 (50 only when the judge defines TESTSYS), which would make _pc(0) an accept and _pc(3) a
# FAIL: C++ checker programs are compiled with the base that testing systems use, and any exit
# from it up is a partial result, never a pass. TESTSYS too: older testlib.h copies, still shipped
# with checkers, define the base 0 outright (a -D is redefined, with a warning) and 50 only
# under TESTSYS. Their points (``quitp``) exit POINTS_EXIT_CODE, which 0.9.2 defaults to 0 (an
# accept) where today's testlib says 7: set to 7, the partial result it is.
TESTLIB_PC_BASE = 50
TESTLIB_OK, TESTLIB_WA, TESTLIB_PE, TESTLIB_FAIL, TESTLIB_PARTIAL = 0, 1, 2, 3, 7
CHECKER_DEFINES = (f"PC_BASE_EXIT_CODE={TESTLIB_PC_BASE}", "TESTSYS", f"POINTS_EXIT_CODE={TESTLIB_PARTIAL}")
# testlib's other verdicts about the contestant's output: "dirt" (4, extra output; testlib maps it
# to PE) and "unexpected eof" (8, when built with ENABLE_UNEXPECTED_EOF; PE otherwise)
TESTLIB_DIRT, TESTLIB_UNEXPECTED_EOF = 4, 8
TESTLIB_REJECTS = {TESTLIB_WA: "wrong answer", TESTLIB_PE: "presentation error", TESTLIB_DIRT: "extra output",
                   TESTLIB_UNEXPECTED_EOF: "unexpected end of output"}
KATTIS_AC, KATTIS_WA = 42, 43
JUDGEMESSAGE = "feedback/judgemessage.txt"


def testlib_partial(exit_code: int | None) -> bool:
    """Whether a testlib program's exit code is partial credit (points or ``_pc``): not a pass."""
    return exit_code is not None and (exit_code == TESTLIB_PARTIAL or exit_code >= TESTLIB_PC_BASE)


@dataclass(frozen=True, slots=True)
class CheckerVerdict:
    ok: bool
    detail: str = ""
    deterministic: bool = True  # False: the checker's own time or memory limit decided it


class CannotJudge(CheckerBroken):
    """A protocol's "this run says nothing": the checker failed on one output (crashed, hit a
    limit, exited or printed something its protocol does not define). Broken, unless it judges
    the expected answer, which ``run_checker`` tries next."""

    def __init__(self, why: str, rr: RunResult) -> None:
        super().__init__(why)
        self.deterministic = rr.status not in (Verdict.TIME_LIMIT, Verdict.MEMORY_LIMIT)


def testlib_dir() -> str | None:
    """Where testlib.h is (``CPFLEET_TESTLIB_DIR``), or None."""
    d = os.environ.get(TESTLIB_ENV)
    return d if d and os.path.isfile(os.path.join(d, "testlib.h")) else None


# ---------------------------------------------------------------------------------------------
# Building

_lock = threading.Lock()
_broken: dict[str, CheckerBroken] = {}  # checkers that do not compile, by content key


def source_set(spec: ProgramSpec) -> dict[str, str]:
    """The checker's files, plus testlib.h from CPFLEET_TESTLIB_DIR when it needs one it lacks."""
    files = dict(spec.files)
    if spec.language == "cpp" and "testlib.h" not in {Path(p).name for p in files}:
        uses = any("testlib.h" in files[e] for e in spec.entry_points)
        tl = testlib_dir()
        if uses and tl is not None:
            files["testlib.h"] = Path(tl, "testlib.h").read_text(encoding="utf-8", errors="surrogateescape")
    return files


def toolchain_identity(spec: ProgramSpec) -> str:
    """What besides its own files decides how a checker program judges, for the result cache:
    its language's toolchain (``languages.fingerprint``) and the testlib.h it is built with
    when it brings none of its own (``source_set``)."""
    # a build script's tools are its own choice; the C++ toolchain stands for them, as in
    # the build's compile-cache key (programs.build_run_program)
    parts = [spec.language, languages.fingerprint("cpp" if spec.language == BUILD_RUN else spec.language)]
    if spec.language == "cpp":
        parts.extend(CHECKER_DEFINES)  # they decide its exit codes (a partial result's above all)
    if spec.language == "cpp" and "testlib.h" not in {Path(p).name for p, _ in spec.files}:
        tl = testlib_dir()
        if tl is not None:
            path = os.path.join(tl, "testlib.h")
            try:
                st = os.stat(path)
                parts.append(_file_digest(path, st.st_mtime_ns, st.st_size))
            except OSError:
                parts.append("testlib.h unreadable")
    return " ".join(parts)


@functools.lru_cache(maxsize=16)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def program_folder(spec: ProgramSpec) -> dict[str, str]:
    """A build/run checker's folder (the one holding its ``build`` or ``run`` script, its entry
    point): its files, by their path inside it."""
    top = spec.entry_points[0].rpartition("/")[0]
    prefix = top + "/" if top else ""
    return {p[len(prefix):]: text for p, text in spec.files if p.startswith(prefix)}


def image_for(runner: CodeRunner, spec: ProgramSpec) -> ProgramImage:
    """The runnable checker (compiled on first use); CheckerBroken when it cannot be built."""
    lang = None if spec.language == BUILD_RUN else languages.get(spec.language)
    if lang is not None and lang.compile is None:  # an interpreted checker runs its source as is
        return programs.source_image(spec.language, dict(spec.files)[spec.entry_points[0]])
    key = spec.key()
    with _lock:
        known = _broken.get(key)
    if known is not None:
        raise known
    files = source_set(spec)
    try:
        if spec.language == BUILD_RUN:
            built = programs.build_run_program(runner, program_folder(spec))
        else:
            built = programs.compile_program(runner, spec.language, files, list(spec.entry_points),
                                             defines=CHECKER_DEFINES if spec.language == "cpp" else ())
    except ProgramError as e:
        broken = CheckerBroken(f"the {spec.kind} checker cannot be compiled: {e}")
        with _lock:
            _broken[key] = broken
        raise broken from None
    if not built.ok or built.image is None:
        hint = ""
        if "testlib.h" in built.diagnostics and testlib_dir() is None:
            hint = f" (testlib.h not found: set {TESTLIB_ENV} to the directory holding it)"
        broken = CheckerBroken(f"the {spec.kind} checker does not compile{hint}: {built.diagnostics[-1500:]}")
        if not built.limit:  # a compile that hit a limit may pass on a quieter machine
            with _lock:
                _broken[key] = broken
            log.error("problem checker %s: %s", key, broken)  # once per checker and process
        raise broken
    return built.image


def session_for(runner: CodeRunner, spec: ProgramSpec) -> programs.ProgramSession:
    """The runner's open job for this checker (one kept per runner, replaced when another
    checker is needed)."""
    key = spec.key()
    held = getattr(runner, "checker_session", None)
    if held is not None:
        held_key, session = held
        if held_key == key and not session.closed:
            return session
        session.close()
        runner.checker_session = None
    session = programs.open_session(runner, image_for(runner, spec))
    runner.checker_session = (key, session)
    return session


def drop_session(runner: CodeRunner) -> None:
    held = getattr(runner, "checker_session", None)
    if held is not None:
        held[1].close()
        runner.checker_session = None


def checker_limits(spec: ProgramSpec) -> Limits:
    return Limits(time_s=spec.time_limit_s, memory_mb=spec.memory_limit_mb, wall_factor=2.0, wall_slack_s=2.0,
                  stated=True)


def detail_of(*parts: bytes) -> str:
    for p in parts:
        text = p.decode("utf-8", errors="replace").strip()
        if text:
            return text[:DETAIL_BYTES]
    return ""


def failed_run(spec: ProgramSpec, rr: RunResult, who: str = "") -> str | None:
    """Why this checker run says nothing about the answer, or None if its exit code counts."""
    who = who or f"the {spec.kind} checker"
    if rr.status in (Verdict.TIME_LIMIT, Verdict.OUTPUT_LIMIT) or rr.signal is not None or rr.exit_code is None:
        return f"{who} failed ({rr.status}: {rr.error or 'killed'}): {detail_of(rr.stderr)[:500]}"
    if rr.status == Verdict.MEMORY_LIMIT and "cgroup" in rr.error:
        return f"{who} ran out of memory ({spec.memory_limit_mb} MB)"
    return None


# How a checker program kind is called and what its exit says: one function per kind declared
# with role "program" in core/checkers/, in a module of its own, bound by the kind's name in
# the package's ``PROTOCOLS``.
Protocol = Callable[[CodeRunner, ProgramSpec, bytes, bytes, bytes], CheckerVerdict]


def run_program(runner: CodeRunner, spec: ProgramSpec, stdin: bytes, argv: list[str], files: dict[str, bytes],
                collect: tuple[str, ...] = ()) -> RunResult:
    """Run the checker program once, confined, with ``files`` placed read-only in its working
    directory; a sandbox failure raises SandboxFailure. Every protocol runs its program so,
    the built-in ones and those registered from outside."""
    session = session_for(runner, spec)
    rr = session.run(stdin, checker_limits(spec), argv=argv, files=files, collect=collect)
    if rr.status == Verdict.INTERNAL:
        drop_session(runner)
        raise SandboxFailure(f"sandbox failure running the {spec.kind} checker: {rr.error}")
    return rr
