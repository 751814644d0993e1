"""Checker programs from the problem data: compiled once, run confined after each test.

A problem's ``checker`` may be a program (``ProgramSpec`` in sandbox/checkers.py validates it
when the problem is loaded): a testlib checker, a Kattis output validator, an open-r1
``generated_checker`` (Python), or an interactor (sandbox/interactive.py). It is data from a
dataset, so it is as untrusted as the program it judges:

- Compiled once per content (the hash of its files) with g++/gcc, the binary cached in memory
  and on disk (``CPFLEET_CHECKER_CACHE``, default ``$XDG_CACHE_HOME/cpfleet/checkers``).
  A checker that does not compile is a problem error: INTERNAL (reward None) for every job of
  that problem, compiled once and the failure remembered, never a 0 for the completion.
  testlib.h comes from the checker's own ``files`` when it ships one, else from the directory
  ``CPFLEET_TESTLIB_DIR`` names (never from the repository; the Dockerfile shows how to mount
  it). The compiler itself runs with CPU/memory rlimits and a timeout.
- Run in a second zygote of the worker (``ProgramRunner``: same isolation layers, its own
  sandbox uid and cgroup, no network), after the program's run is complete, with its own
  limits. The files it reads (test input, the program's output, the answer) reach it as
  memfds opened by ``/dev/fd/N`` paths; it sees nothing of other tests.
- Exit codes by protocol (``ProgramSpec`` docstring). A checker that crashes, is killed, runs
  out of time or memory, or exits with anything but its accept/reject codes is INTERNAL with
  infra_error: the problem is broken, the completion is not judged.
"""

from __future__ import annotations

import logging
import os
import resource
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from cpfleet.core.checkers import ProgramSpec
from cpfleet.core.errors import CheckerBroken
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.forkserver import ZygoteRunner
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult

log = logging.getLogger("cpfleet.sandbox.checkers")

COMPILE_TIMEOUT_S = 120.0
COMPILE_MEMORY_BYTES = 2 << 30
TESTLIB_ENV = "CPFLEET_TESTLIB_DIR"
CACHE_ENV = "CPFLEET_CHECKER_CACHE"
DETAIL_BYTES = 2048
TESTLIB_OK, TESTLIB_WA, TESTLIB_PE, TESTLIB_FAIL, TESTLIB_PARTIAL = 0, 1, 2, 3, 7
KATTIS_AC, KATTIS_WA = 42, 43


@dataclass(frozen=True, slots=True)
class CheckerVerdict:
    ok: bool
    detail: str = ""


def testlib_dir() -> str | None:
    """Where testlib.h is (``CPFLEET_TESTLIB_DIR``), or None."""
    d = os.environ.get(TESTLIB_ENV)
    return d if d and os.path.isfile(os.path.join(d, "testlib.h")) else None


def cache_dir() -> Path:
    d = os.environ.get(CACHE_ENV)
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cpfleet" / "checkers"


# ---------------------------------------------------------------------------------------------
# Compile cache

_lock = threading.Lock()
_compiled: dict[str, bytes | CheckerBroken] = {}


def _compile_limits() -> None:  # pragma: no cover - runs in the compiler's child process
    resource.setrlimit(resource.RLIMIT_AS, (COMPILE_MEMORY_BYTES, COMPILE_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (int(COMPILE_TIMEOUT_S), int(COMPILE_TIMEOUT_S) + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _compile(spec: ProgramSpec) -> bytes:
    files = dict(spec.files)
    include = []
    if spec.language == "cpp" and "testlib.h" not in {Path(p).name for p in files}:
        tl = testlib_dir()
        if tl is not None:
            include = ["-I", tl]
    with tempfile.TemporaryDirectory(prefix="cpfleet-checker-") as tmp:
        for path, text in files.items():
            target = Path(tmp, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", errors="surrogateescape")
        out = os.path.join(tmp, "checker.bin")
        if spec.language == "c":
            cmd = ["gcc", "-O2", "-std=gnu11", "-pipe", *include, *spec.entry_points, "-o", out, "-lm"]
        else:
            cmd = ["g++", "-O2", "-std=gnu++17", "-pipe", *include, *spec.entry_points, "-o", out]
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, timeout=COMPILE_TIMEOUT_S,
                                  preexec_fn=_compile_limits, env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C"},
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise CheckerBroken(f"the {spec.kind} checker did not compile within {COMPILE_TIMEOUT_S:.0f}s") from None
        except OSError as e:
            raise CheckerBroken(f"cannot run the compiler for the {spec.kind} checker: {e}") from None
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", errors="replace")
            hint = ""
            if "testlib.h" in err and not include:
                hint = f" (testlib.h not found: set {TESTLIB_ENV} to the directory holding it)"
            raise CheckerBroken(f"the {spec.kind} checker does not compile{hint}: {err[-1500:]}")
        return Path(out).read_bytes()


def executable(spec: ProgramSpec) -> tuple[str, bytes]:
    """("python", source) or ("binary", ELF bytes), compiling on first use; CheckerBroken if it
    cannot be built (remembered: the compiler runs once per checker content and process)."""
    if spec.language == "python3":
        return "python", dict(spec.files)[spec.entry_points[0]].encode("utf-8", errors="surrogatepass")
    key = spec.key()
    with _lock:
        got = _compiled.get(key)
        if got is None:
            got = _load_or_compile(spec, key)
            _compiled[key] = got
    if isinstance(got, CheckerBroken):
        raise got
    return "binary", got


def _load_or_compile(spec: ProgramSpec, key: str) -> bytes | CheckerBroken:
    path = cache_dir() / f"{key}.bin"
    try:
        data = path.read_bytes()
        if data[:4] == b"\x7fELF":
            return data
    except OSError:
        pass
    try:
        data = _compile(spec)
    except CheckerBroken as e:
        log.error("problem checker %s: %s", key, e)  # once per checker and process
        return e
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:  # a read-only cache is a slower worker, not a failure
        log.warning("cannot cache the compiled checker in %s: %s", path.parent, e)
    return data


# ---------------------------------------------------------------------------------------------
# The confined runner for checkers and interactors


class ProgramRunner(ZygoteRunner):
    """A second zygote per worker process, for checker and interactor programs (own slot)."""

    name = "programs"
    mode = "exec"

    def __init__(self, isolate: bool = True) -> None:
        super().__init__(isolate=isolate)
        self.loaded_key = ""

    def ensure(self, spec: ProgramSpec) -> None:
        """Load ``spec``'s program as this runner's job unless it already is."""
        if self.loaded_key == spec.key() and self._job is not None:
            return
        kind, data = executable(spec)
        self.loaded_key = ""
        error = self.load_program(data, kind)
        if error is not None:
            raise CheckerBroken(f"the {spec.kind} checker does not compile: {error.strip()[-1000:]}")
        self.loaded_key = spec.key()


def programs_for(runner: CodeRunner) -> ProgramRunner:
    """The checker runner that goes with ``runner`` (started on first use, closed with it)."""
    existing = getattr(runner, "companion", None)
    if isinstance(existing, ProgramRunner):
        return existing
    isolate = bool(getattr(runner, "_isolate", True))
    pr = ProgramRunner(isolate=isolate)
    try:
        runner.companion = pr
    except AttributeError:  # pragma: no cover - a runner with __slots__: one shared instance
        pass
    return pr


def checker_limits(spec: ProgramSpec) -> Limits:
    return Limits(time_s=spec.time_limit_s, memory_mb=spec.memory_limit_mb, wall_factor=2.0, wall_slack_s=2.0)


def detail_of(*parts: bytes) -> str:
    for p in parts:
        text = p.decode("utf-8", errors="replace").strip()
        if text:
            return text[:DETAIL_BYTES]
    return ""


def failed_run(spec: ProgramSpec, rr: RunResult) -> str | None:
    """Why this checker run says nothing about the answer, or None if its exit code counts."""
    if rr.status == Verdict.INTERNAL:
        return f"sandbox failure running the {spec.kind} checker: {rr.error}"
    if rr.status in (Verdict.TIME_LIMIT, Verdict.OUTPUT_LIMIT) or rr.signal is not None or rr.exit_code is None:
        return f"the {spec.kind} checker failed ({rr.status}: {rr.error or 'killed'}): {detail_of(rr.stderr)[:500]}"
    if rr.status == Verdict.MEMORY_LIMIT and "cgroup" in rr.error:
        return f"the {spec.kind} checker ran out of memory ({spec.memory_limit_mb} MB)"
    return None


def run_checker(programs: ProgramRunner, spec: ProgramSpec, test_input: str, answer: str, output: bytes) -> CheckerVerdict:
    """Judge one test's output with the problem's checker program; CheckerBroken if it cannot."""
    programs.ensure(spec)
    inp = test_input.encode("utf-8")
    ans = answer.encode("utf-8")
    if spec.kind == "testlib":
        rr, _ = programs.run_program(b"", checker_limits(spec), argv=["/dev/fd/3", "/dev/fd/4", "/dev/fd/5"],
                                     files=[inp, output, ans])
        why = failed_run(spec, rr)
        if why:
            raise CheckerBroken(why)
        msg = detail_of(rr.stderr, rr.stdout)
        if rr.exit_code == TESTLIB_OK:
            return CheckerVerdict(True, msg)
        if rr.exit_code == TESTLIB_WA:
            return CheckerVerdict(False, msg or "wrong answer")
        if rr.exit_code == TESTLIB_PE:
            return CheckerVerdict(False, msg or "presentation error")
        if rr.exit_code == TESTLIB_PARTIAL:
            return CheckerVerdict(False, f"partially correct (not a full pass): {msg}")
        raise CheckerBroken(f"the testlib checker failed (exit {rr.exit_code}): {msg[:500]}")
    if spec.kind == "kattis_validator":
        rr, files = programs.run_program(
            output, checker_limits(spec), argv=["/dev/fd/3", "/dev/fd/4", "feedback/", *spec.flags],
            files=[inp, ans, None], links=[("feedback/judgemessage.txt", 5)],
        )
        why = failed_run(spec, rr)
        if why:
            raise CheckerBroken(why)
        msg = detail_of(files[2] if len(files) > 2 else b"", rr.stderr, rr.stdout)
        if rr.exit_code == KATTIS_AC:
            return CheckerVerdict(True, msg)
        if rr.exit_code == KATTIS_WA:
            return CheckerVerdict(False, msg or "wrong answer")
        raise CheckerBroken(f"the output validator failed (exit {rr.exit_code}, expected 42 or 43): {msg[:500]}")
    if spec.kind == "python":
        rr, _ = programs.run_program(b"", checker_limits(spec), argv=["/dev/fd/3", "/dev/fd/4", "/dev/fd/5"],
                                     files=[inp, ans, output])
        why = failed_run(spec, rr)
        if why:
            raise CheckerBroken(why)
        said = rr.stdout.decode("utf-8", errors="replace").strip()
        if rr.exit_code != 0:
            raise CheckerBroken(f"the python checker exited {rr.exit_code}: {detail_of(rr.stderr)[:500]}")
        if said == "1":
            return CheckerVerdict(True)
        if said == "0":
            return CheckerVerdict(False, detail_of(rr.stderr) or "the checker rejected the output")
        raise CheckerBroken(f"the python checker printed {said[:80]!r}, not 1 or 0")
    raise CheckerBroken(f"checker kind {spec.kind!r} is not an output checker")

