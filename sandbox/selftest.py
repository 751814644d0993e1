"""Each language's self-test: compile and run a tiny program with its toolchain, at worker start.

A toolchain can be present and still not work: a C++ standard the compiler rejects
(``CPFLEET_CPP_STD``), a missing static libstdc++ under ``-static``, a JDK that cannot start,
a PyPy that crashes. Without this check every job in such a language would come back
COMPILE_ERROR (reward 0, the model punished for the host) or RUNTIME_ERROR. As DMOJ's judge
does for its executors, a worker runs each language's :data:`PROGRAMS` entry (the ``SELF_TEST``
of its module in cpfleet.sandbox.languages) through the very compile and run lines of its
toolchain at start (``run_all``, the languages in parallel threads; a toolchain that passed on this host before, same fingerprint, is not compiled
again) and remembers the result in this process (``record``); pool processes forked
after that inherit it. A job in a language whose self-test failed is answered INTERNAL naming it
(sandbox/compiled.py: ``unavailable``), never judged.

The programs are ours and trusted, so they run unconfined in a private temporary directory: the
check is of the toolchain, not of the sandbox (whose own start-up check is the isolation
report). A language without an entry in PROGRAMS (a toy one) is checked for its tools only.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import hashlib
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cpfleet.core.errors import SlotDirError
from cpfleet.sandbox import languages, programs

EXPECTED = languages.SELF_TEST_EXPECTED
TIMEOUT_S = 120.0  # a cold javac on a loaded host takes seconds; a hang is a failure
# each built-in language's ``SELF_TEST``, kept in its own module of cpfleet.sandbox.languages
PROGRAMS: dict[str, str] = languages.SELF_TESTS


@dataclass(frozen=True, slots=True)
class SelfTest:
    language: str
    ok: bool
    detail: str = ""  # why not (the toolchain's own words, clipped)


def _clip(data: bytes | str, n: int = 400) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _fill(argv: Iterable[str], prog: str, entries: list[str], main: str) -> list[str]:
    out: list[str] = []
    for a in argv:
        if a == languages.SOURCES:
            out += [os.path.join(prog, e) for e in entries]
        elif a == "{pch}":
            continue
        else:
            out.append(a.replace(languages.PROG_DIR, prog).replace("{mem}", "256").replace("{stack}", "64")
                       .replace("{main}", main))
    return out


def _noexec_hint(folder: str, error: OSError) -> str:
    """Why a program compiled into ``folder`` may not run, and the fix: the temporary folder is on
    a noexec mount (Docker mounts a container's tmpfs noexec unless told ``exec``)."""
    if error.errno != errno.EACCES:
        return ""
    try:
        noexec = bool(os.statvfs(folder).f_flag & os.ST_NOEXEC)
    except OSError:
        return ""
    if not noexec:
        return ""
    return (f" ({tempfile.gettempdir()} is mounted noexec: point TMPDIR at a folder that allows running "
            "programs, or mount it with exec, as docker-compose.yml's worker /tmp does)")


def check(name: str, program: str | None = None) -> SelfTest:
    """Compile and run ``name``'s self-test program (default: its PROGRAMS entry) with this
    process's toolchain; it must print EXPECTED and exit 0."""
    missing = languages.missing_tools(name)
    if missing:
        return SelfTest(name, False, f"missing {', '.join(missing)}")
    source = program if program is not None else PROGRAMS.get(name)
    if source is None:
        return SelfTest(name, True, "no self-test program: tools present")
    lang = languages.get(name)
    main = lang.main_class(source) if lang.main_class is not None else ""
    with tempfile.TemporaryDirectory(prefix="cpfleet-selftest-") as tmp:
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        entry = lang.source_file(source)
        with open(os.path.join(src, entry), "w") as f:
            f.write(source)
        prog = src
        try:
            if lang.compile is not None:
                os.mkdir(os.path.join(tmp, "out"))
                done = subprocess.run(_fill(lang.compile.argv, src, [entry], main), cwd=tmp, capture_output=True,
                                      timeout=TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
                if done.returncode != 0:
                    return SelfTest(name, False, f"the self-test program does not compile (exit "
                                                 f"{done.returncode}): {_clip(done.stderr or done.stdout)}")
                prog = os.path.join(tmp, "out")
            ran = subprocess.run(_fill(lang.run_argv, prog, [entry], main), cwd=tmp, capture_output=True,
                                 timeout=TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return SelfTest(name, False, f"the self-test did not finish in {TIMEOUT_S:g}s")
        except OSError as e:
            return SelfTest(name, False, f"cannot run the toolchain: {e}{_noexec_hint(tmp, e)}")
    if ran.returncode != 0 or ran.stdout.decode(errors="replace").strip() != EXPECTED:
        return SelfTest(name, False, f"the self-test program exited {ran.returncode} printing "
                                     f"{_clip(ran.stdout, 80)!r}: {_clip(ran.stderr)}")
    return SelfTest(name, True)


def _passed_marker(name: str) -> str | None:
    """The file that says ``name``'s self-test passed with exactly this toolchain (its
    fingerprint: table entry, version line, installed packages) and program; None when the
    language is not available (nothing to remember)."""
    if languages.missing_tools(name):
        return None
    digest = hashlib.sha256(f"{languages.fingerprint(name)}\n{PROGRAMS.get(name, '')}".encode()).hexdigest()[:24]
    return os.path.join(programs.default_cache_dir(), "selftest", f"{name}-{digest}")


def check_cached(name: str) -> SelfTest:
    """``check``, skipped when this host's cache says the same toolchain passed before (a
    worker restart, a second worker on the host). Only passes are remembered: a failure is
    checked again at the next start, so a repaired toolchain is seen."""
    marker = _passed_marker(name)
    if marker is not None and os.path.exists(marker):
        return SelfTest(name, True, "passed before with this toolchain")
    found = check(name)
    if found.ok and marker is not None:
        with contextlib.suppress(OSError, SlotDirError):  # not remembered: checked again next start
            programs.own_cache_dir()  # the cache's folder first, by its ownership rule, never as a parent
            os.makedirs(os.path.dirname(marker), mode=0o700, exist_ok=True)
            with open(marker, "w") as f:
                f.write(f"{name} self-test passed\n")
    return found


_lock = threading.Lock()
_RESULTS: dict[str, SelfTest] = {}


def run_all(names: Iterable[str] | None = None, *, cached: bool = True) -> dict[str, SelfTest]:
    """Self-test ``names`` (default: every language) in parallel and remember the results in
    this process (the pool processes forked later inherit them). ``cached``: a language whose
    toolchain passed on this host before is not compiled again (``check_cached``)."""
    todo = list(languages.LANGUAGES if names is None else names)
    one = check_cached if cached else check
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
        results = dict(zip(todo, pool.map(one, todo), strict=True))
    record(results)
    return results


def record(results: Mapping[str, SelfTest]) -> None:
    with _lock:
        _RESULTS.update(results)


def forget() -> None:
    with _lock:
        _RESULTS.clear()


def results() -> dict[str, SelfTest]:
    """What this process's self-tests found ({} when none ran: a local judge, a test)."""
    with _lock:
        return dict(_RESULTS)


def failure(name: str) -> str:
    """'' unless ``name``'s self-test ran in this process (or its parent) and failed: then why."""
    with _lock:
        found = _RESULTS.get(name)
    return "" if found is None or found.ok else found.detail


def summary_line(found: Mapping[str, SelfTest]) -> str:
    """One start-up line: ``self-test: python3 ok, cpp FAILED (...)``."""
    parts = [f"{n} ok" if r.ok else f"{n} FAILED ({r.detail})" for n, r in found.items()]
    return "self-test: " + (", ".join(parts) if parts else "no languages")
