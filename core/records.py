"""Problem records as the converters write them, and their check against the shared schema.

The shared record (docs/problems.md): ``id``, ``public_tests`` / ``hidden_tests``
(``[{"input": str, "output": str}]``), ``time_limit_s``, ``memory_limit_mb``, ``checker`` and the
optional ``fn_name`` (tests are then JSON text of the argument list / return value) and ``fn_semantics``,
``starter_code``, ``languages``, ``time_limit_multipliers``, ``python3_interpreter``, ``correct_solutions`` /
``incorrect_solutions`` (Python 3 sources) and ``submissions`` (every jury submission with its
``language`` and ``expected`` verdict, the shape of $CPFLEET_SHARED_DATA/icpc-kattis-31.jsonl.gz).

:func:`record_errors` checks exactly that; the languages and checker kinds it accepts are the
registries' (core/languages.py, core/checkers/: a kind registered with ``register_checker`` is
accepted here too, its spec shape checked as its declaration says). :func:`loader_check` then
runs ``Problem.from_dict`` whenever this build can build the record's checker.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from cpfleet.core.checkers import checker_kind, get_checker, registered_checkers
from cpfleet.core.errors import CheckerSpecError, ProblemFormatError, UnknownLanguage
from cpfleet.core.languages import LANGUAGES, dataset_languages, family_of
from cpfleet.core.problem import (
    MAX_MEMORY_LIMIT_MB,
    MAX_TIME_LIMIT_S,
    MIN_MEMORY_LIMIT_MB,
    Problem,
    refuse_lone_surrogates,
)
from cpfleet.core.testshapes import Test, TestSet, as_records

SUBMISSION_VERDICTS = (
    "accepted", "wrong_answer", "time_limit_exceeded", "run_time_error", "partially_accepted",
    "memory_limit_exceeded", "output_limit_exceeded", "compile_error",
)


def languages_for(stated: str | None) -> list[str] | None:
    """The project's languages for a dataset's stated language; ValueError when none judges it."""
    if stated is None:
        return None
    langs = dataset_languages(stated)  # core.languages: each language's ``dataset_names``
    if langs is None:
        raise UnknownLanguage(f"language {stated[:20]!r} is not judged by cpfleet")
    return list(langs)


def make_record(
    pid: str,
    tests: TestSet,
    *,
    name: str | None = None,
    description: str = "",
    time_limit_s: float | None = None,
    memory_limit_mb: int | None = None,
    checker: Mapping[str, Any] | None = None,
    languages: list[str] | None = None,
    starter_code: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A record in the shared schema; optional fields are written only when set.

    A function-call problem without stated languages is limited to Python: the harness that
    calls ``fn_name`` is Python. Without ``checker``, stdin/stdout tests whose shape has its own
    reference comparison (``tests.stdio_checker``: LiveCodeBench's, CodeContests') get that checker."""
    rec: dict[str, Any] = {
        "id": pid,
        "name": name if name is not None else pid,
        "description": description or "",
        "public_tests": as_records(tests.public),
        "hidden_tests": as_records(tests.hidden),
        "time_limit_s": time_limit_s,
        "memory_limit_mb": memory_limit_mb,
    }
    if checker is None and tests.stdio_checker is not None and not tests.fn_name:
        checker = {"type": tests.stdio_checker}  # the shape's reference comparison
    if checker is not None:
        rec["checker"] = dict(checker)
    if tests.fn_name:
        rec["fn_name"] = tests.fn_name
        if tests.fn_semantics is not None and tests.fn_semantics != "python":
            rec["fn_semantics"] = tests.fn_semantics
        if languages is None:
            languages = list(family_of("python3"))  # the function-call harness is Python
    if starter_code:
        rec["starter_code"] = starter_code
    if languages is not None:
        rec["languages"] = list(languages)
    if extra:
        rec.update(extra)
    return rec


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _tests_errors(rec: Mapping[str, Any], key: str, call: bool) -> list[str]:
    raw = rec.get(key)
    if raw is None:
        return []
    if not isinstance(raw, list):
        return [f"{key} is not a list"]
    errors: list[str] = []
    for i, t in enumerate(raw):
        if not isinstance(t, Mapping) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            errors.append(f"{key}[{i}] is not {{input: str, output: str}}")
            continue
        if call:
            try:
                args = json.loads(t["input"])
                json.loads(t["output"])
            except (ValueError, RecursionError):
                errors.append(f"{key}[{i}]: function-call input/output is not JSON text")
                continue
            if not isinstance(args, list):
                errors.append(f"{key}[{i}]: function-call input is not a JSON argument list")
    return errors


def checker_errors(chk: Any) -> list[str]:
    """Shape errors of a ``checker`` object (not whether this build can run it): the shape its
    kind declares (core/checkers/: ``CheckerKind.shape``; a kind registered without one is
    checked by building it, :func:`loader_check`)."""
    if chk is None:
        return []
    if not isinstance(chk, Mapping) or not isinstance(chk.get("type"), str):
        return ["checker must be an object with a 'type'"]
    kind = checker_kind(chk["type"])
    if kind is None:
        return [f"checker type {chk['type']!r} is not in the shared schema nor registered here "
                f"(known: {', '.join(registered_checkers())})"]
    return kind.shape(chk) if kind.shape is not None else []


def record_errors(rec: Any) -> list[str]:
    """Every way ``rec`` departs from the shared schema; [] when it conforms."""
    if not isinstance(rec, Mapping):
        return ["a problem must be an object"]
    errors: list[str] = []
    if not isinstance(rec.get("id"), str) or not rec["id"]:
        errors.append("missing or empty 'id'")
    fn_name = rec.get("fn_name")
    if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
        errors.append("fn_name must be a Python identifier")
    call = isinstance(fn_name, str)
    semantics = rec.get("fn_semantics")
    if semantics is not None:
        from cpfleet.core.fncall import SEMANTICS

        if not call:
            errors.append("fn_semantics applies to function-call problems (fn_name) only")
        elif semantics not in SEMANTICS:
            errors.append(f"fn_semantics must be one of {', '.join(SEMANTICS)}")
    errors += _tests_errors(rec, "public_tests", call)
    errors += _tests_errors(rec, "hidden_tests", call)
    tl, ml = rec.get("time_limit_s"), rec.get("memory_limit_mb")
    if tl is not None and not (_is_num(tl) and 0 < tl <= MAX_TIME_LIMIT_S):
        errors.append(f"time_limit_s must be in (0, {MAX_TIME_LIMIT_S:g}] or null")
    if ml is not None and not (isinstance(ml, int) and not isinstance(ml, bool)
                               and MIN_MEMORY_LIMIT_MB <= ml <= MAX_MEMORY_LIMIT_MB):
        errors.append(f"memory_limit_mb must be an int in [{MIN_MEMORY_LIMIT_MB}, {MAX_MEMORY_LIMIT_MB}] or null")
    errors += checker_errors(rec.get("checker"))
    langs = rec.get("languages")
    if langs is not None and (not isinstance(langs, list) or not langs or any(x not in LANGUAGES for x in langs)):
        errors.append(f"languages must be a non-empty list of {', '.join(LANGUAGES)} or null")
    mult = rec.get("time_limit_multipliers")
    if mult is not None and (not isinstance(mult, Mapping)
                             or any(k not in LANGUAGES or not _is_num(v) or v <= 0 for k, v in mult.items())):
        errors.append("time_limit_multipliers must map languages to positive numbers")
    if rec.get("python3_interpreter") not in (None, "python3", "pypy3"):
        errors.append("python3_interpreter must be python3 or pypy3 (or absent)")
    if "starter_code" in rec and not isinstance(rec["starter_code"], str):
        errors.append("starter_code must be a string")
    for key in ("correct_solutions", "incorrect_solutions"):
        sols = rec.get(key)
        if sols is not None and (not isinstance(sols, list) or not all(isinstance(s, str) for s in sols)):
            errors.append(f"{key} must be a list of strings")
    subs = rec.get("submissions")
    if subs is not None:
        if not isinstance(subs, list):
            errors.append("submissions must be a list")
        else:
            for i, s in enumerate(subs):
                if (not isinstance(s, Mapping) or s.get("language") not in LANGUAGES
                        or not isinstance(s.get("source"), str) or s.get("expected") not in SUBMISSION_VERDICTS):
                    errors.append(f"submissions[{i}] must be {{language, source, expected, ...}}")
    try:
        # every field, the ones the loader drops too (a submission's file name, the package's
        # name): a record is written as UTF-8 JSON, which no lone surrogate survives
        refuse_lone_surrogates(rec)
    except ProblemFormatError as e:
        errors.append(str(e).removeprefix(f"{rec.get('id')}: "))
    return errors


def registered_checker_types() -> set[str]:
    """Checker types the running build's loader accepts."""
    return set(registered_checkers())


def loader_check(rec: Mapping[str, Any]) -> tuple[str | None, bool]:
    """``(error, checked)``: ``Problem.from_dict`` on ``rec`` when this build can build its
    checker (``checked`` True; ``error`` is the loader's complaint, None when accepted).

    When this build's registry does not know the checker type, or knows it with fewer
    parameters than the shared schema gives it (Kattis ``validator_flags`` on ``float``), the
    record is not checked here (``checked`` False): its shape is :func:`record_errors`' job."""
    spec = rec.get("checker") or {"type": "tokens"}
    if spec.get("type") not in registered_checker_types():
        return None, False
    try:
        get_checker(spec)
    except CheckerSpecError:
        return None, False
    try:
        Problem.from_dict(dict(rec))
    except ProblemFormatError as e:
        return str(e).split(": ", 1)[-1], True
    return None, True


def pairs_of(rec: Mapping[str, Any], key: str) -> list[Test]:
    """A record's tests back as ``(input, output)`` pairs."""
    return [(t["input"], t["output"]) for t in rec.get(key) or []]
