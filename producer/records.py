"""Problem records as the converters write them, and their check against the shared schema.

The shared record (docs/problems.md): ``id``, ``public_tests`` / ``hidden_tests``
(``[{"input": str, "output": str}]``), ``time_limit_s``, ``memory_limit_mb``, ``checker`` and the
optional ``fn_name`` (tests are then JSON text of the argument list / return value),
``starter_code``, ``languages``, ``time_limit_multipliers``, ``correct_solutions`` /
``incorrect_solutions`` (Python 3 sources) and ``submissions`` (every jury submission with its
``language`` and ``expected`` verdict, the shape of $CPFLEET_SHARED_DATA/icpc-kattis-31.jsonl.gz).

:func:`record_errors` checks exactly that, independently of which checker types the running
build has registered, so converters can validate records whose checker (``kattis_validator``,
``python``, ...) the loader of this build does not know yet. :func:`loader_check` then runs
``Problem.from_dict`` whenever the checker type is registered here, and says so when it is not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from cpfleet.core.checkers import BUILD_RUN, get_checker, registered_checkers
from cpfleet.core.errors import CheckerSpecError, ProblemFormatError
from cpfleet.core.problem import Problem
from cpfleet.producer.testshapes import Test, TestSet, as_records

LANGUAGES = ("python3", "pypy3", "cpp", "c", "java")
PYTHON_LANGUAGES = ["python3", "pypy3"]  # a function-call harness is Python
CHECKER_TYPES = (
    "tokens", "code_contests", "float", "exact_tokens", "testlib", "kattis_validator", "python", "interactive",
)
PROGRAM_CHECKERS = ("testlib", "kattis_validator", "interactive")
# a dataset's language name -> the project's languages for it (None: not judged here)
DATASET_LANGUAGES: dict[str, list[str]] = {
    "python": ["python3", "pypy3"], "python3": ["python3", "pypy3"], "py": ["python3", "pypy3"],
    "pypy": ["pypy3"], "pypy3": ["pypy3"], "cpp": ["cpp"], "c++": ["cpp"], "c": ["c"], "java": ["java"],
}
SUBMISSION_VERDICTS = (
    "accepted", "wrong_answer", "time_limit_exceeded", "run_time_error", "partially_accepted",
    "memory_limit_exceeded", "output_limit_exceeded", "compile_error",
)


def languages_for(stated: str | None) -> list[str] | None:
    """The project's languages for a dataset's stated language; ValueError when none judges it."""
    if stated is None:
        return None
    langs = DATASET_LANGUAGES.get(stated.strip().lower())
    if langs is None:
        raise ValueError(f"language {stated[:20]!r} is not judged by cpfleet")
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
    calls ``fn_name`` is Python."""
    rec: dict[str, Any] = {
        "id": pid,
        "name": name if name is not None else pid,
        "description": description or "",
        "public_tests": as_records(tests.public),
        "hidden_tests": as_records(tests.hidden),
        "time_limit_s": time_limit_s,
        "memory_limit_mb": memory_limit_mb,
    }
    if checker is not None:
        rec["checker"] = dict(checker)
    if tests.fn_name:
        rec["fn_name"] = tests.fn_name
        if languages is None:
            languages = list(PYTHON_LANGUAGES)
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


def _files_errors(chk: Mapping[str, Any], kind: str) -> list[str]:
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
    if chk.get("language") not in (*LANGUAGES, BUILD_RUN):  # build_run: a folder with build/run scripts
        errors.append(f"checker {kind}: 'language' must be one of {', '.join((*LANGUAGES, BUILD_RUN))}")
    flags = chk.get("validator_flags")
    if flags is not None and not isinstance(flags, str):
        errors.append(f"checker {kind}: 'validator_flags' must be a string or null")
    return errors


def checker_errors(chk: Any) -> list[str]:
    """Shape errors of a ``checker`` object (not whether this build can run it)."""
    if chk is None:
        return []
    if not isinstance(chk, Mapping) or not isinstance(chk.get("type"), str):
        return ["checker must be an object with a 'type'"]
    kind = chk["type"]
    if kind not in CHECKER_TYPES:
        return [f"checker type {kind!r} is not in the shared schema"]
    if kind in ("kattis_validator", "interactive"):
        return _files_errors(chk, kind)
    if kind == "testlib":
        if isinstance(chk.get("source"), str) and chk["source"]:
            return []
        return _files_errors(chk, kind)
    if kind == "python":
        src = chk.get("source")
        return [] if isinstance(src, str) and src.strip() else ["checker python: 'source' must be Python source"]
    if kind == "float":
        errors = [f"checker float: {k!r} must be a finite number"
                  for k in ("abs", "rel", "float_tolerance", "float_absolute_tolerance", "float_relative_tolerance")
                  if k in chk and not _is_num(chk[k])]
        flags = chk.get("validator_flags")
        if flags is not None and not isinstance(flags, str):
            errors.append("checker float: 'validator_flags' must be a string")
        return errors
    return []


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
    errors += _tests_errors(rec, "public_tests", call)
    errors += _tests_errors(rec, "hidden_tests", call)
    tl, ml = rec.get("time_limit_s"), rec.get("memory_limit_mb")
    if tl is not None and not (_is_num(tl) and 0 < tl <= 600):
        errors.append("time_limit_s must be in (0, 600] or null")
    if ml is not None and not (isinstance(ml, int) and not isinstance(ml, bool) and 16 <= ml <= 65536):
        errors.append("memory_limit_mb must be an int in [16, 65536] or null")
    errors += checker_errors(rec.get("checker"))
    langs = rec.get("languages")
    if langs is not None and (not isinstance(langs, list) or not langs or any(x not in LANGUAGES for x in langs)):
        errors.append(f"languages must be a non-empty list of {', '.join(LANGUAGES)} or null")
    mult = rec.get("time_limit_multipliers")
    if mult is not None and (not isinstance(mult, Mapping)
                             or any(k not in LANGUAGES or not _is_num(v) or v <= 0 for k, v in mult.items())):
        errors.append("time_limit_multipliers must map languages to positive numbers")
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
