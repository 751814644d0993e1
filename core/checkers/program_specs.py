"""Checker programs' specs (testlib, Kattis output validators, open-r1 Python checkers,
interactors): validated here, when a problem is loaded, so a bad spec fails then and not at
judging time; sandbox/checker_programs/ compiles and runs them confined. The program kinds'
declarations (``KINDS``) are here too, listed by the registry (core/checkers/__init__.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgpack

from cpfleet.core.checkers.base import (
    DESCRIPTIVE_KEYS,
    INTERACTOR,
    PROGRAM,
    Checker,
    CheckerFactory,
    CheckerKind,
    CheckResult,
    ShapeCheck,
)
from cpfleet.core.errors import CheckerSpecError
from cpfleet.core.languages import FENCE_TAGS, checker_languages
from cpfleet.core.languages import info as language_info

# ---------------------------------------------------------------------------------------------
# Checker programs: the spec is validated here, the program is run by sandbox/checker_programs/

# A Kattis program folder with its own ``build`` and/or ``run`` script (problemtools' BuildRun):
# ``build`` is run in a copy of the folder, then ``run`` is the program.
BUILD_RUN = "build_run"


def program_languages() -> tuple[str, ...]:
    """The ``language`` values a checker program may have: the languages core.languages marks
    for checker programs (``checker_source``), and ``build_run``."""
    return (*checker_languages(), BUILD_RUN)


def checker_language(stated: Any) -> str | None:
    """A checker spec's ``language`` as a program language (a fence tag such as ``python`` or
    ``c++`` names its language); None when checker programs cannot be in it."""
    if not isinstance(stated, str):
        return None
    name = FENCE_TAGS.get(stated.lower(), stated)
    return name if name in program_languages() else None
_MAX_PROGRAM_FILES = 64
_MAX_PROGRAM_BYTES = 8 << 20
MAX_FLAG_CHARS = 8192  # a real package's flags are a few words


@dataclass(frozen=True, slots=True)
class ProgramSpec:
    """A checker or interactor program, as data from the problem record.

    ``kind``: testlib (``checker input output answer``; exit 0 OK, 1 WA, 2 PE, 4 extra output, 8
    unexpected end of output, 7 and 50 + k partial (``_pc(k)``, built with PC_BASE_EXIT_CODE=50);
    3 (FAIL) and anything else a checker failure), kattis_validator (``validator input answer feedback_dir
    [flags] < output``; 42 AC, 43 WA, anything else a failure), python (open-r1
    ``generated_checker``: ``python3 checker.py input.txt correct_output.txt
    solution_output.txt`` prints 1 to accept, 0 to reject; anything else or a non-zero exit is a
    checker failure) or interactive (the Kattis arguments, talking to the program over its
    stdin/stdout; ``protocol: "testlib"``: a testlib interactor, ``interactor input output``
    with testlib's exit codes).
    """

    kind: str
    files: tuple[tuple[str, str], ...]  # (relative path, source text)
    entry_points: tuple[str, ...]
    language: str
    flags: tuple[str, ...] = ()
    protocol: str = "kattis"  # or "testlib" (testlib interactors)
    time_limit_s: float = 10.0
    memory_limit_mb: int = 1024

    @property
    def name(self) -> str:
        return self.kind

    def check(self, expected: str, got: str) -> CheckResult:
        raise RuntimeError(f"checker {self.kind!r} is a program: sandbox/checker_programs/ runs it")

    def key(self) -> str:
        """Content hash: the compile cache's key (same sources, same binary)."""
        import hashlib

        # packed as a structure (msgpack), so no file's text can pass for a boundary between
        # files: one file holding a separator and a second file's name never keys like the two
        def raw(text: str) -> bytes:
            return text.encode("utf-8", errors="surrogatepass")

        packed = msgpack.packb([raw(self.language), [raw(e) for e in self.entry_points],
                                [[raw(p), raw(t)] for p, t in self.files]], use_bin_type=True)
        return hashlib.blake2b(packed, digest_size=16).hexdigest()


def _safe_path(path: Any) -> str:
    if not isinstance(path, str) or not path or path.startswith("/") or "\0" in path:
        raise CheckerSpecError(f"checker file path must be a relative path, got {path!r}")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise CheckerSpecError(f"checker file path must not contain '', '.' or '..' parts: {path!r}")
    return path


def _build_run_script(files: Mapping[str, str]) -> str | None:
    """The program folder's ``build`` script (else its ``run`` script): the shallowest file of
    that name, so a folder's own script wins over one in a subfolder; None when neither exists."""
    for name in ("build", "run"):
        found = sorted((p for p in files if p.rsplit("/", 1)[-1] == name), key=lambda p: (p.count("/"), p))
        if found:
            return found[0]
    return None


def program_factory(kind: str) -> CheckerFactory:
    """The factory of a checker program kind: validates the spec (files, entry points, language,
    limits) and returns the ProgramSpec the sandbox runs by ``kind``'s protocol."""

    def factory(params: Mapping[str, Any]) -> Checker:
        allowed = {"files", "entry_points", "language", "source", "validator_flags", "protocol",
                   "time_limit_s", "memory_limit_mb"} | DESCRIPTIVE_KEYS
        unknown = set(params) - allowed
        if unknown:
            raise CheckerSpecError(f"checker {kind!r}: unknown parameters {sorted(unknown)}")
        validation = params.get("validation")
        if isinstance(validation, str) and "score" in validation.split():
            # a Kattis scoring problem's validator accepts (42) a partial answer and writes its
            # score beside: judged pass/fail, every accepted partial answer would be a full pass
            raise CheckerSpecError(f"checker {kind!r}: validation {validation!r} is a scoring problem's "
                                   "(per-test scores, not pass/fail): not judged here")
        default_lang = "python3" if kind == "python" else "cpp"
        stated = params.get("language") or default_lang
        language = checker_language(stated) or ""
        if not language:
            raise CheckerSpecError(f"checker {kind!r}: language must be one of {program_languages()}, got {stated!r}")
        raw_files = params.get("files")
        source = params.get("source")
        files: dict[str, str] = {}
        if raw_files is not None:
            if not isinstance(raw_files, dict) or not all(isinstance(v, str) for v in raw_files.values()):
                raise CheckerSpecError(f"checker {kind!r}: 'files' must map paths to source text")
            files = {_safe_path(p): v for p, v in raw_files.items()}
        entry = params.get("entry_points")
        script = _build_run_script(files)
        if script is not None and source is None and (language == BUILD_RUN or script.endswith("build")):
            # problemtools' rule: a program folder with a build script is built by it, whatever
            # its sources' languages; one with only a run script (language build_run) is run as is
            language, entry = BUILD_RUN, [script]
        elif language == BUILD_RUN:
            raise CheckerSpecError(f"checker {kind!r}: language build_run needs a 'build' or 'run' script in 'files'")
        if source is not None:
            if not isinstance(source, str) or not source.strip():
                raise CheckerSpecError(f"checker {kind!r}: 'source' must be non-empty source text")
            main = lang_info.checker_source if (lang_info := language_info(language)) else "checker.cpp"
            files[main] = source
            entry = entry or [main]
        if not files:
            raise CheckerSpecError(f"checker {kind!r} needs 'files' (+ 'entry_points') or 'source'")
        if len(files) > _MAX_PROGRAM_FILES or sum(len(v) for v in files.values()) > _MAX_PROGRAM_BYTES:
            raise CheckerSpecError(f"checker {kind!r}: too many or too large files")
        if entry is None:
            exts = lang_info.extensions if (lang_info := language_info(language)) else ()
            entry = [p for p in files if p.endswith(exts)]
            if len(entry) != 1:
                raise CheckerSpecError(f"checker {kind!r}: say which file is the entry point ('entry_points')")
        if not isinstance(entry, list) or not entry or not all(isinstance(e, str) and e in files for e in entry):
            raise CheckerSpecError(f"checker {kind!r}: entry_points must list files present in 'files', got {entry!r}")
        if language == "python3" and len(entry) != 1:
            raise CheckerSpecError(f"checker {kind!r}: a Python checker has exactly one entry point")
        flags = params.get("validator_flags")
        if flags is None:
            flag_words: tuple[str, ...] = ()
        elif isinstance(flags, str):
            flag_words = tuple(flags.split())
        elif isinstance(flags, list) and all(isinstance(f, str) for f in flags):
            flag_words = tuple(w for f in flags for w in f.split())
        else:
            raise CheckerSpecError(f"checker {kind!r}: validator_flags must be a string or a list of strings")
        if sum(len(w) + 1 for w in flag_words) > MAX_FLAG_CHARS or any("\0" in w for w in flag_words):
            # the flags are the program's arguments, sent to the job init in one message of at
            # most 64 KiB (a longer one killed it on every run) and passed to execve (no NUL)
            raise CheckerSpecError(f"checker {kind!r}: validator_flags must be at most {MAX_FLAG_CHARS} "
                                   "characters of text without NUL")
        protocol = "testlib" if (kind == "testlib" or params.get("protocol") == "testlib") else "kattis"
        if kind == "python":
            protocol = "open-r1"
        tl = params.get("time_limit_s", 10.0)
        ml = params.get("memory_limit_mb", 1024)
        if isinstance(tl, bool) or not isinstance(tl, int | float) or not (0 < tl <= 120):
            raise CheckerSpecError(f"checker {kind!r}: time_limit_s must be in (0, 120], got {tl!r}")
        if isinstance(ml, bool) or not isinstance(ml, int) or not (16 <= ml <= 16384):
            raise CheckerSpecError(f"checker {kind!r}: memory_limit_mb must be an integer in [16, 16384], got {ml!r}")
        return ProgramSpec(kind=kind, files=tuple(sorted(files.items())), entry_points=tuple(entry),
                           language=language, flags=flag_words, protocol=protocol,
                           time_limit_s=float(tl), memory_limit_mb=ml)

    return factory


# ---------------------------------------------------------------------------------------------
# The program kinds' declarations, listed by the registry (core/checkers/__init__.py)


def _files_shape(kind: str) -> ShapeCheck:
    def shape(chk: Mapping[str, Any]) -> list[str]:
        if kind == "testlib" and isinstance(chk.get("source"), str) and chk["source"]:
            return []
        errors: list[str] = []
        files = chk.get("files")
        if not isinstance(files, Mapping) or not files or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            return [f"checker {kind}: 'files' must be a non-empty {{path: source}}"]
        for path in files:
            if path.startswith("/") or ".." in path.split("/"):
                errors.append(f"checker {kind}: file path {path!r} escapes its folder")
        entry = chk.get("entry_points")
        if not isinstance(entry, list) or not entry or not all(isinstance(e, str) and e in files for e in entry):
            errors.append(f"checker {kind}: 'entry_points' must list files present in 'files'")
        if checker_language(chk.get("language")) is None:  # build_run: a folder with build/run scripts
            errors.append(f"checker {kind}: 'language' must be one of {', '.join(program_languages())}")
        flags = chk.get("validator_flags")
        if flags is not None and not isinstance(flags, str):
            errors.append(f"checker {kind}: 'validator_flags' must be a string or null")
        return errors

    return shape


def _python_shape(chk: Mapping[str, Any]) -> list[str]:
    src = chk.get("source")
    return [] if isinstance(src, str) and src.strip() else ["checker python: 'source' must be Python source"]


KINDS: tuple[CheckerKind, ...] = (
    CheckerKind("testlib", program_factory("testlib"), PROGRAM, _files_shape("testlib")),
    CheckerKind("kattis_validator", program_factory("kattis_validator"), PROGRAM, _files_shape("kattis_validator")),
    CheckerKind("python", program_factory("python"), PROGRAM, _python_shape),
    CheckerKind("interactive", program_factory("interactive"), INTERACTOR, _files_shape("interactive")),
)
