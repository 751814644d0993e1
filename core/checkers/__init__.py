"""Output checkers: is the program's stdout an accepted answer for this test? The registry.

A problem names its checker in its ``checker`` field (``{"type": "tokens"}`` when absent). All
shipped comparison kinds compare position by position and require the same count of tokens (or
lines): never sets, never ``zip`` truncation (both accept wrong answers). On failure the detail
names the first differing line and token, because that is what the model sees next turn.

Rules every kind shares (their one home is base.py): whitespace is what the reference judges
split on: ASCII (C ``isspace``; the CodeContests tester's `` \\n\\t\\r\\v``), never the
Unicode and control separators Python's ``str.split()`` adds (U+3000, NBSP, U+001C..U+001F):
those are part of a token there. Numbers are ASCII digits only, and case-insensitive kinds fold
ASCII letters only (``strcasecmp``, ``AsciiStrToLower``): Python's parsers read any Unicode
digit and ``str.lower()`` folds the Kelvin sign to ``k``, which no judge does
(tests/test_comparisons_hostile.py). Outputs are read one block at a time, so the judge's
memory is O(output) whatever the output's shape.

The kinds, one module each (its docstring states its rules):

- ``tokens`` (tokens.py): exact token equality; the default.
- ``code_contests`` (code_contests.py): the official CodeContests tester's ``OutputsMatch``.
- ``float`` (floats.py): tokens with an ``abs``/``rel`` tolerance, or with Kattis
  ``validator_flags`` the default validator's float rules.
- ``real_tokens`` (real_tokens.py): tokens, the answer's real numbers within 1e-6 and inside
  TACO/APPS's own float closeness, integers and words exactly (TACO/APPS stdin tests).
- ``exact_tokens`` (exact_tokens.py): the Kattis default output validator.
- ``lines`` (lines.py, with the line reader the next two share), ``lcb`` (lcb.py, LiveCodeBench's
  ``grade_stdio``), ``sandboxfusion`` (sandboxfusion.py, SandboxFusion's CommonOJ comparison).
- Checker programs, specs validated in program_specs.py (so a bad one fails when the problem is
  loaded) and run by sandbox/checker_programs/: ``testlib``, ``kattis_validator``, ``python``
  (open-r1 ``generated_checker``) and ``interactive`` (sandbox/interactive.py). See
  ``ProgramSpec``.

Each module declares its ``KIND`` (a ``CheckerKind``); ``BUILTIN_KINDS`` below lists them, and
is read by the loader, the record check of the converters (core/records.py) and the sandbox.
Custom checkers: ``register_checker("mine", factory)`` where ``factory(params) -> Checker`` gets
the spec without its ``type``; problems then say ``{"type": "mine", ...}``. A checker program
kind: ``register_checker("mine", program_factory("mine"), role=PROGRAM)`` plus its protocol in
sandbox/checker_programs/ (``register_protocol``); docs/ARCHITECTURE.md has the recipe.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from cpfleet.core.checkers import (
    code_contests,
    exact_tokens,
    floats,
    lcb,
    lines,
    program_specs,
    real_tokens,
    sandboxfusion,
    tokens,
)
from cpfleet.core.checkers.base import (
    COMPARE,
    INTERACTOR,
    PROGRAM,
    Checker,
    CheckerFactory,
    CheckerKind,
    CheckResult,
    ShapeCheck,
)
from cpfleet.core.checkers.code_contests import CODE_CONTESTS_TOLERANCE, CodeContestsChecker
from cpfleet.core.checkers.exact_tokens import KATTIS_FLAG_KEYS, KattisTokensChecker, parse_validator_flags
from cpfleet.core.checkers.floats import FloatChecker, kattis_float_flags
from cpfleet.core.checkers.lcb import LcbLinesChecker
from cpfleet.core.checkers.lines import LinesChecker
from cpfleet.core.checkers.program_specs import (
    BUILD_RUN,
    ProgramSpec,
    checker_language,
    program_factory,
    program_languages,
)
from cpfleet.core.checkers.real_tokens import RealTokensChecker
from cpfleet.core.checkers.sandboxfusion import SandboxFusionLinesChecker
from cpfleet.core.checkers.tokens import TokensChecker
from cpfleet.core.errors import CheckerSpecError, RegistrationError

# One import surface for checkers: the kinds' checkers (one module each) and the checker
# programs' specs (program_specs.py) are re-exported with the registry.
__all__ = [
    "BUILD_RUN", "CODE_CONTESTS_TOLERANCE", "COMPARE", "DEFAULT_CHECKER", "INTERACTOR", "KATTIS_FLAG_KEYS",
    "PROGRAM", "BUILTIN_KINDS", "Checker", "CheckerFactory", "CheckerKind", "CheckerSpecError", "CheckResult",
    "CodeContestsChecker", "FloatChecker", "KattisTokensChecker", "LcbLinesChecker", "LinesChecker", "RealTokensChecker", "SandboxFusionLinesChecker", "ProgramSpec", "ShapeCheck", "TokensChecker",
    "checker_kind", "checker_language", "get_checker", "is_interactor", "kattis_float_flags",
    "parse_validator_flags", "program_checkers", "program_factory", "program_languages", "register_checker",
    "registered_checkers", "unregister_checker",
]

DEFAULT_CHECKER = "tokens"

# ---------------------------------------------------------------------------------------------
# The registry: one declaration per checker kind (each module's ``KIND``), read by the loader
# (get_checker), the record shape check (core/records.py: checker_errors), the converters and
# the sandbox (which kinds are programs, which one is an interactor).

BUILTIN_KINDS: tuple[CheckerKind, ...] = (
    tokens.KIND,
    code_contests.KIND,
    floats.KIND,
    real_tokens.KIND,
    lcb.KIND,
    lines.KIND,
    sandboxfusion.KIND,
    exact_tokens.KIND,
    *program_specs.KINDS,
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
