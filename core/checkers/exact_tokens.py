"""``exact_tokens``: the Kattis default output validator (problemtools default_validator.cc).

Whitespace tokens compared case-insensitively unless ``case_sensitive`` is given, exactly as
problemtools does (the jury's accepted submissions rely on it: an answer file saying ``NO``
accepts ``no``); ``"case_sensitive": true`` (or the flag) makes case count, ``validator_flags``
honoured (``space_change_sensitive``: every run of whitespace, leading and trailing ones
included, must be the answer's exactly).

The validator's flags and its comparison (``KattisTokensChecker``) live here, once: ``float``
with Kattis flags (floats.py) is the same validator with its float tolerances.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from itertools import zip_longest
from typing import Any

from cpfleet.core.checkers.base import (
    _ASCII_LOWER,
    _C_SPACE,
    _C_TOKEN,
    DESCRIPTIVE_KEYS,
    Checker,
    CheckerKind,
    CheckResult,
    _as_real,
    _clip,
    _iter_tokens,
    _no_shape,
)
from cpfleet.core.errors import CheckerSpecError

_C_SPACE_RUN = re.compile(f"[{re.escape(_C_SPACE)}]+")
_DEC_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # one reading each (base._REAL)
KATTIS_FLAG_KEYS = ("float_tolerance", "float_absolute_tolerance", "float_relative_tolerance",
                    "case_sensitive", "space_change_sensitive")


def parse_validator_flags(flags: Any) -> dict[str, Any]:
    """Kattis ``validator_flags`` (a string or a list of words) -> {flag: value} (a flag's last
    value); unknown flags or a tolerance that is not a number raise CheckerSpecError, as the
    default validator's usage error would make every test a judging error."""
    return dict(_flag_words(flags))


def _flag_words(flags: Any) -> list[tuple[str, Any]]:
    """The flags of ``validator_flags`` in the order written, each with its value."""
    if flags is None:
        return []
    if isinstance(flags, str):
        words = flags.split()
    elif isinstance(flags, list) and all(isinstance(w, str) for w in flags):
        words = [w for f in flags for w in f.split()]
    else:
        raise CheckerSpecError(f"validator_flags must be a string or a list of strings, got {flags!r}")
    out: list[tuple[str, Any]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("case_sensitive", "space_change_sensitive"):
            out.append((w, True))
        elif w in ("float_tolerance", "float_absolute_tolerance", "float_relative_tolerance"):
            value = _as_real(words[i + 1]) if i + 1 < len(words) else None
            if value is None or not math.isfinite(value):
                raise CheckerSpecError(f"validator flag {w} needs a finite number after it")
            out.append((w, value))
            i += 1
        else:
            raise CheckerSpecError(f"unknown validator flag {w!r} (known: {', '.join(KATTIS_FLAG_KEYS)})")
        i += 1
    return out


def _set_flag(settings: dict[str, Any], flag: str, value: Any) -> None:
    settings[flag] = value
    if flag == "float_tolerance":  # both tolerances, until a later specific flag sets its own
        settings["float_absolute_tolerance"] = settings["float_relative_tolerance"] = value


def _kattis_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Flags from ``validator_flags`` and from same-named keys (the keys win), resolved as the
    default validator reads its arguments: in order, ``float_tolerance`` setting both the
    absolute and the relative tolerance and a specific one overriding its part, so
    ``float_tolerance 1e-3 float_absolute_tolerance 1e-9`` is absolute 1e-9, relative 1e-3, and
    the reverse order 1e-3 for both. Keys have no order: a ``float_tolerance`` key applies
    first, the specific keys after it; a key repeating the value the string gives the same flag
    (the shape ``cpfleet prepare`` writes) leaves the string's order standing."""
    words = _flag_words(spec.get("validator_flags"))
    written = dict(words)
    settings: dict[str, Any] = {}
    for flag, value in words:
        _set_flag(settings, flag, value)
    for key in KATTIS_FLAG_KEYS:  # float_tolerance first
        if spec.get(key) is None:
            continue
        value = spec[key]
        if key in ("case_sensitive", "space_change_sensitive"):
            if not isinstance(value, bool):
                raise CheckerSpecError(f"{key} must be true or false, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise CheckerSpecError(f"{key} must be a finite number, got {value!r}")
        if key in written and written[key] == value:
            continue
        _set_flag(settings, key, value)
    return settings


def _leads_with_space(text: str) -> bool:
    """Whether ``text`` begins with a whitespace run (C ``isspace``)."""
    return bool(text) and text[0] in _C_SPACE


class KattisTokensChecker:
    """The Kattis default output validator's comparison (see the module docstring)."""

    def __init__(self, name: str, *, case_sensitive: bool, space_change_sensitive: bool,
                 abs_tol: float = -1.0, rel_tol: float = -1.0) -> None:
        self.name = name
        self.case_sensitive = case_sensitive
        self.space_change_sensitive = space_change_sensitive
        self.abs_tol = abs_tol
        self.rel_tol = rel_tol
        self.use_floats = abs_tol >= 0 or rel_tol >= 0

    def tolerance_words(self) -> str:
        """The tolerances in force, for the feedback (a model must know how close is close enough)."""
        parts = [f"{what} {tol:g}" for what, tol in (("absolute", self.abs_tol), ("relative", self.rel_tol)) if tol >= 0]
        return "allowed: " + " or ".join(parts)

    @staticmethod
    def _float(tok: str) -> float | None:
        if _DEC_FLOAT.fullmatch(tok) is None:
            return None
        v = float(tok)
        return v if math.isfinite(v) else None

    def _same(self, judge: str, team: str) -> str | None:
        """None if the pair matches, else why not."""
        if self.use_floats:
            j = self._float(judge)
            if j is not None:
                t = self._float(team)
                if t is None:
                    return f"expected a float, got {_clip(team, 40)!r}"
                diff = abs(j - t)
                if diff <= self.abs_tol or diff <= self.rel_tol * abs(j):
                    return None
                return (f"too large difference: expected {_clip(judge, 40)}, got {_clip(team, 40)}"
                        f" ({self.tolerance_words()})")
        # strcasecmp in the "C" locale folds ASCII letters only (str.lower() makes the Kelvin
        # sign a k)
        if judge == team or (not self.case_sensitive and judge.translate(_ASCII_LOWER) == team.translate(_ASCII_LOWER)):
            return None
        return f"expected {_clip(judge, 40)!r}, got {_clip(team, 40)!r}"

    def check(self, expected: str, got: str) -> CheckResult:
        # Both texts are walked lazily (whitespace runs one match at a time, tokens one block at
        # a time), so an output of millions of tokens costs no list of them.
        if self.space_change_sensitive:
            # the whitespace runs, in order, must be the answer's exactly, and in the same places:
            # the validator reads the answer's whitespace before each token and demands the same
            # characters from the output, so a run leading one text must lead the other too
            # (else "1\n" and "\n1" would have the same runs, and the same tokens, in another
            # arrangement). With the same leading-ness, the same runs and the same tokens, each
            # run sits between the same tokens (and a trailing run trails in both).
            if _leads_with_space(expected) != _leads_with_space(got):
                return CheckResult(False, "whitespace differs from the answer's at the start of the output "
                                          "(space_change_sensitive)")
            runs = zip_longest(_C_SPACE_RUN.finditer(expected), _C_SPACE_RUN.finditer(got))
            runs_differ = False
            for i, (a, b) in enumerate(runs):
                if a is None or b is None:
                    runs_differ = True
                    break
                if a.group() != b.group():
                    return CheckResult(False, f"whitespace differs from the answer's at run {i + 1} (space_change_sensitive)")
        e_toks = _iter_tokens(expected, _C_TOKEN.findall)
        g_toks = _iter_tokens(got, _C_TOKEN.findall)
        n = 0
        for a, b in zip_longest(e_toks, g_toks):
            if a is None:
                assert b is not None
                return CheckResult(False, f"trailing output: {_clip(b, 40)!r}")
            if b is None:
                n_expected = n + 1 + sum(1 for _ in e_toks)
                return CheckResult(False, f"output ends after {n} tokens, expected {n_expected}")
            why = self._same(a, b)
            if why is not None:
                return CheckResult(False, f"token {n + 1}: {why}")
            n += 1
        if self.space_change_sensitive and runs_differ:
            return CheckResult(False, "whitespace differs from the answer's (space_change_sensitive)")
        return CheckResult(True)


def _exact_factory(params: Mapping[str, Any]) -> Checker:
    unknown = set(params) - {"validator_flags", "case_sensitive", "space_change_sensitive"} - DESCRIPTIVE_KEYS
    if unknown:
        raise CheckerSpecError(f"checker 'exact_tokens': unknown parameters {sorted(unknown)}")
    st = _kattis_settings(params)
    if any(k.startswith("float") for k in st):
        raise CheckerSpecError("checker 'exact_tokens' takes no float tolerance: use type 'float'")
    return KattisTokensChecker("exact_tokens", case_sensitive=bool(st.get("case_sensitive", False)),
                               space_change_sensitive=bool(st.get("space_change_sensitive", False)))


KIND = CheckerKind("exact_tokens", _exact_factory, shape=_no_shape)
