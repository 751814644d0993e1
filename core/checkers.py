"""Output checkers: is the program's stdout an accepted answer for this test?

A problem names its checker in its ``checker`` field (``{"type": "tokens"}`` when absent). All
shipped checkers compare whitespace-separated tokens position by position and require the same
token count: never sets, never ``zip`` truncation (both accept wrong answers). On failure the
detail names the first differing line and token, because that is what the model sees next turn.

- ``tokens``: exact token equality after splitting on whitespace.

Whitespace, for every kind, is what the reference judges split on: ASCII (C ``isspace``; the
CodeContests tester's `` \n\t\r\v``), never the Unicode and control separators Python's
``str.split()`` adds (U+3000, NBSP, U+001C..U+001F): those are part of a token there. Numbers
are ASCII digits only, and case-insensitive kinds fold ASCII letters only (``strcasecmp``,
``AsciiStrToLower``): Python's parsers read any Unicode digit and ``str.lower()`` folds the
Kelvin sign to ``k``, which no judge does (tests/test_comparisons_hostile.py).
- ``code_contests``: the official CodeContests tester's ``OutputsMatch`` (execution/
  tester_sandboxer.cc): tokens split on `` \\n\\t\\r\\v``, ASCII-lowercased; identical token lists
  match; otherwise, pairwise, a token that is not a number must be equal, two integers must be
  equal, and a pair where either is a real number matches when ``|a - b| < 1e-5`` (in doubles,
  so NaN and infinities never match pairwise). One deliberate difference: the tester parses
  integers into a 32-bit ``int`` and compares bigger ones as doubles (so two 20-digit integers
  that differ in the last digit "match" there); here integers of any size are compared exactly.
- ``float``: tokens; two integers exactly, a pair with a real number within ``abs`` or ``rel``
  (relative to the expected value; both default to 1e-6), computed exactly in decimal; NaN and
  infinities never match; words exactly (case-sensitive).
- ``lcb``: LiveCodeBench's stdin/stdout grading (``grade_stdio``), set by ``cpfleet prepare``
  and inline problems for LiveCodeBench-shaped stdin tests: both outputs stripped and cut into
  lines, each line stripped; equal line counts, and each line equal as text or all its tokens
  equal as decimal numbers (``0.50`` is ``0.5``; no tolerance). Line structure counts.
- ``lines``: the same lines, each equal as text only: open-r1's ``code_reward`` script
  template's comparison without its ``zip`` truncation (the E2B/Morph router route uses it).
- ``sandboxfusion``: the same lines, each equal case-insensitively or as one real number within
  relative 1e-5: SandboxFusion's CommonOJ comparison (``/submit`` with ``provided_data``).

- ``exact_tokens``: the Kattis default output validator (problemtools default_validator.cc):
  whitespace tokens compared case-insensitively unless ``case_sensitive`` is given, exactly as
  problemtools does (the jury's accepted submissions rely on it: an answer file saying ``NO``
  accepts ``no``); ``"case_sensitive": true`` (or the flag) makes case count,
  ``validator_flags`` honoured (``space_change_sensitive``: every run of whitespace, leading and
  trailing ones included, must be the answer's exactly).
- ``float`` with Kattis ``validator_flags`` (or the same names as keys: ``float_tolerance``,
  ``float_absolute_tolerance``, ``float_relative_tolerance``, ``case_sensitive``,
  ``space_change_sensitive``): the default validator's rules, without running a program: a
  token of the answer that parses as a finite float must be matched by a finite float within
  the absolute OR the relative tolerance (integers included, as there); other tokens compare
  as strings, case-insensitively unless ``case_sensitive``.
- Checker programs, specs validated here (so a bad one fails when the problem is loaded) and run
  by sandbox/checker_programs.py: ``testlib``, ``kattis_validator``, ``python`` (open-r1
  ``generated_checker``) and ``interactive`` (sandbox/interactive.py). See ``ProgramSpec``.

Every kind is one ``CheckerKind`` in the registry at the end of this module (``BUILTIN_KINDS``),
read by the loader, the record check of the converters (core/records.py) and the sandbox.
Custom checkers: ``register_checker("mine", factory)`` where ``factory(params) -> Checker`` gets
the spec without its ``type``; problems then say ``{"type": "mine", ...}``. A checker program
kind: ``register_checker("mine", program_factory("mine"), role=PROGRAM)`` plus its protocol in
sandbox/checker_programs.py (``register_protocol``); docs/ARCHITECTURE.md has the recipe.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cpfleet.core.comparisons import (
    CODE_CONTESTS_TOLERANCE,
    KATTIS_FLAG_KEYS,
    Checker,
    CheckerFactory,
    CheckResult,
    CodeContestsChecker,
    FloatChecker,
    KattisTokensChecker,
    TokensChecker,
    _exact_factory,
    _float_or_kattis_factory,
    _no_params,
    kattis_float_flags,
    parse_validator_flags,
)
from cpfleet.core.errors import CheckerSpecError, RegistrationError
from cpfleet.core.line_comparisons import LcbLinesChecker, LinesChecker, SandboxFusionLinesChecker
from cpfleet.core.program_specs import (
    BUILD_RUN,
    ProgramSpec,
    checker_language,
    program_factory,
    program_languages,
)

# One import surface for checkers: the comparison kinds (core/comparisons.py) and the checker
# programs' specs (core/program_specs.py) are re-exported with the registry.
__all__ = [
    "BUILD_RUN", "CODE_CONTESTS_TOLERANCE", "COMPARE", "DEFAULT_CHECKER", "INTERACTOR", "KATTIS_FLAG_KEYS",
    "PROGRAM", "BUILTIN_KINDS", "Checker", "CheckerFactory", "CheckerKind", "CheckerSpecError", "CheckResult",
    "CodeContestsChecker", "FloatChecker", "KattisTokensChecker", "LcbLinesChecker", "LinesChecker", "SandboxFusionLinesChecker", "ProgramSpec", "ShapeCheck", "TokensChecker",
    "checker_kind", "checker_language", "get_checker", "is_interactor", "kattis_float_flags",
    "parse_validator_flags", "program_checkers", "program_factory", "program_languages", "register_checker",
    "registered_checkers", "unregister_checker",
]

DEFAULT_CHECKER = "tokens"

# ---------------------------------------------------------------------------------------------
# The registry: one declaration per checker kind, read by the loader (get_checker), the record
# shape check (core/records.py: checker_errors), the converters and the sandbox (which kinds
# are programs, which one is an interactor).

COMPARE, PROGRAM, INTERACTOR = "compare", "program", "interactor"
ShapeCheck = Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True, slots=True)
class CheckerKind:
    """A checker type a problem's ``checker`` may name.

    ``role``: ``compare`` (the factory's Checker compares in this process), ``program`` (the
    factory returns a ProgramSpec that sandbox/checker_programs.py runs confined after each
    test, by the protocol registered there under the same name) or ``interactor`` (a
    ProgramSpec that talks to the program, sandbox/interactive.py). ``shape``: the shape errors
    of a record's spec (``{"type": ..., ...}``) that the shared schema defines, without
    building it; None: only building it (the factory) tells."""

    name: str
    factory: CheckerFactory
    role: str = COMPARE
    shape: ShapeCheck | None = None


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


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


def _float_shape(chk: Mapping[str, Any]) -> list[str]:
    errors = [f"checker float: {k!r} must be a finite number"
              for k in ("abs", "rel", "float_tolerance", "float_absolute_tolerance", "float_relative_tolerance")
              if k in chk and not _is_num(chk[k])]
    flags = chk.get("validator_flags")
    if flags is not None and not isinstance(flags, str):
        errors.append("checker float: 'validator_flags' must be a string")
    return errors


def _no_shape(chk: Mapping[str, Any]) -> list[str]:
    return []


BUILTIN_KINDS: tuple[CheckerKind, ...] = (
    CheckerKind("tokens", _no_params("tokens", TokensChecker), shape=_no_shape),
    CheckerKind("code_contests", _no_params("code_contests", CodeContestsChecker), shape=_no_shape),
    CheckerKind("float", _float_or_kattis_factory, shape=_float_shape),
    CheckerKind("lcb", _no_params("lcb", LcbLinesChecker), shape=_no_shape),
    CheckerKind("lines", _no_params("lines", LinesChecker), shape=_no_shape),
    CheckerKind("sandboxfusion", _no_params("sandboxfusion", SandboxFusionLinesChecker), shape=_no_shape),
    CheckerKind("exact_tokens", _exact_factory, shape=_no_shape),
    CheckerKind("testlib", program_factory("testlib"), PROGRAM, _files_shape("testlib")),
    CheckerKind("kattis_validator", program_factory("kattis_validator"), PROGRAM, _files_shape("kattis_validator")),
    CheckerKind("python", program_factory("python"), PROGRAM, _python_shape),
    CheckerKind("interactive", program_factory("interactive"), INTERACTOR, _files_shape("interactive")),
)

_lock = threading.Lock()
_KINDS: dict[str, CheckerKind] = {k.name: k for k in BUILTIN_KINDS}
_CACHE: dict[str, Checker] = {}


def register_checker(name: str, factory: CheckerFactory, *, replace: bool = False, role: str = COMPARE,
                     shape: ShapeCheck | None = None) -> None:
    """Make ``{"type": name, ...}`` usable in problems, everywhere a problem is read (the
    loader, ``cpfleet prepare``'s and the inline problems' record check). ``factory`` validates
    its params (raise CheckerSpecError) and returns a stateless Checker, which is cached per
    distinct spec; with ``role="program"`` it returns a ProgramSpec of kind ``name``, run by the
    protocol ``cpfleet.sandbox.checker_programs.register_protocol`` binds to ``name``."""
    if not name or not isinstance(name, str):
        raise RegistrationError("a checker needs a non-empty name")
    if role not in (COMPARE, PROGRAM, INTERACTOR):
        raise RegistrationError(f"a checker's role is {COMPARE}, {PROGRAM} or {INTERACTOR}, got {role!r}")
    with _lock:
        if name in _KINDS and not replace:
            raise RegistrationError(f"checker {name!r} is already registered (pass replace=True)")
        _KINDS[name] = CheckerKind(name, factory, role, shape)
        for key in [k for k in _CACHE if json.loads(k)[0] == name]:
            del _CACHE[key]


def unregister_checker(name: str) -> None:
    """Remove a registered checker kind (tests register toy ones and take them back)."""
    with _lock:
        if name in {k.name for k in BUILTIN_KINDS}:
            raise RegistrationError(f"{name!r} is a built-in checker")
        _KINDS.pop(name, None)
        for key in [k for k in _CACHE if json.loads(k)[0] == name]:
            del _CACHE[key]


def registered_checkers() -> list[str]:
    return sorted(_KINDS)


def checker_kind(name: str) -> CheckerKind | None:
    return _KINDS.get(name)


def program_checkers() -> tuple[str, ...]:
    """The kinds that are programs run in the sandbox (output checkers and interactors)."""
    return tuple(n for n, k in _KINDS.items() if k.role != COMPARE)


def is_interactor(kind: str) -> bool:
    k = _KINDS.get(kind)
    return k is not None and k.role == INTERACTOR


def get_checker(spec: Mapping[str, Any] | None) -> Checker:
    """The checker a problem's ``checker`` field names; CheckerSpecError when it cannot be built."""
    if spec is None:
        spec = {"type": DEFAULT_CHECKER}
    if not isinstance(spec, Mapping):
        raise CheckerSpecError(f"checker must be an object with a 'type', got {spec!r}")
    kind = spec.get("type", DEFAULT_CHECKER)
    params = {k: v for k, v in spec.items() if k != "type"}
    try:
        key = json.dumps([kind, params], sort_keys=True)
    except (TypeError, ValueError) as e:
        raise CheckerSpecError(f"checker spec is not plain JSON: {e}") from None
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    declared = _KINDS.get(kind) if isinstance(kind, str) else None
    if declared is None:
        raise CheckerSpecError(f"unknown checker type {kind!r} (known: {', '.join(registered_checkers())})")
    checker = declared.factory(params)
    with _lock:
        _CACHE[key] = checker
    return checker
