"""Inline problems: tests carried by a job (or a dataset column) -> a problem record with a
content-hash id.

Trainers keep the tests in a dataset column, in whatever shape their dataset uses
(code_contests, TACO/APPS ``input_output``, LiveCodeBench test lists, PrimeIntellect
``verification_info``, verl/PRIME ``{"inputs", "outputs", "fn_name"}``: see
:mod:`cpfleet.core.testshapes`). :func:`problem_from_tests` normalises them and names the problem
by a hash of everything that decides a verdict (tests, fn_name, limits, checker, languages), so
the 8-16 completions of one GRPO group, which share one test set, map to one problem id and the
client registers it once; two different test sets never share an id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cpfleet.core.errors import InlineProblemError, TestShapeError
from cpfleet.core.records import languages_for, make_record, record_errors
from cpfleet.core.rowlimits import (
    LIMIT_KEYS,
    grader_time_limit_s,
    is_codeforces_row,
    row_limits,
    row_tests_column,
    unread_limit_columns,
)
from cpfleet.core.testshapes import (
    ROW_COLUMNS,
    TestSet,
    codeforces_checker,
    normalize_tests,
    parse_json_field,
)

INLINE_PREFIX = "inline/"
# LIMIT_KEYS (core/rowlimits.py): the limits inline tests may state beside them (``{"inputs":
# ..., "outputs": ..., "time_limit_s": 6}``, or ``{"tests": <any shape>, "time_limit_s": 6,
# "memory_limit_mb": 1024}`` around a shape that is a list or has no room for them): the tests
# alone cannot say how long a dataset's grader lets a program run, and a trainer's tests column
# is all the fleet gets
__all__ = ["INLINE_PREFIX", "LIMIT_KEYS", "content_id", "problem_from_tests", "stated_fields", "stated_limits"]


def stated_limits(tests: Any) -> tuple[Any, dict[str, Any]]:
    """Inline ``tests`` (parsed or JSON text) -> (the tests without their stated limits, the
    limits they state by ``LIMIT_KEYS``, or in a dataset row's own columns (a code_contests row's
    ``time_limit`` and ``memory_limit_bytes``, a TACO / APPS row's ``time_limit`` /
    ``memory_limit`` text, a codeforces row's numbers, read by
    :func:`cpfleet.core.rowlimits.row_limits` as ``cpfleet prepare`` reads them); tests that
    state none come back as they are, with {}. A row limit column that no shape of the tests
    reads (TACO's ``time_limit`` text beside its ``inputs`` and ``outputs``) is an
    :class:`InlineProblemError`, never dropped. A mapping left with only ``tests`` is the wrapper
    form: its ``tests`` are the test set; one left with only a row's column (``ROW_COLUMNS``), or
    a whole TACO / PrimeIntellect / DeepCoder row, is read inside that column too, so limits
    stated there are never dropped in silence."""
    raw = parse_json_field(tests, "tests") if isinstance(tests, str | bytes) else tests
    if not isinstance(raw, Mapping):
        return tests, {}
    unread = unread_limit_columns(raw)
    if unread:  # a limit stated in a column no shape of these tests reads would be ignored in silence
        raise InlineProblemError(
            f"the tests state {unread[0]} {str(raw[unread[0]])[:40]!r}, which cpfleet reads only in a whole "
            f"code_contests, TACO / APPS or codeforces row: state the limits as time_limit_s (seconds) / "
            f"memory_limit_mb (MB)")
    limits = {k: raw[k] for k in LIMIT_KEYS if k in raw}
    for name, value in row_limits(raw).items():  # a dataset row's own columns, read as prepare reads them
        if limits.get(name) is not None and limits[name] != value:
            raise InlineProblemError(f"the row states {name} {value!r} in its own columns and {limits[name]!r} "
                                     f"beside them")
        limits[name] = value
    rest = {k: v for k, v in raw.items() if k not in LIMIT_KEYS}
    column = row_tests_column(rest)  # a whole row: its tests column may state limits too
    wrapper = column or (next(iter(rest)) if len(rest) == 1 else None)
    if column is None and not (wrapper in ROW_COLUMNS or (wrapper == "tests" and limits)):
        return (rest, limits) if limits else (tests, {})
    inner, inner_limits = stated_limits(rest[wrapper])  # a wrapper around tests that state their own
    if not limits and not inner_limits:
        return tests, {}
    for name, value in inner_limits.items():
        if name in limits and limits[name] is not None and value is not None and limits[name] != value:
            raise InlineProblemError(f"the tests state {name} {value!r} and their wrapper {limits[name]!r}")
        if limits.get(name) is None:
            limits[name] = value
    return (inner if wrapper == "tests" and column is None else {**rest, wrapper: inner}), limits


# The judged fields of the project's own problem record besides its tests and limits. A record
# passed as inline tests (``{"public_tests", "hidden_tests", "checker", ...}``) keeps them: an
# interactive problem's tests hold no outputs, and under the default checker a program that
# printed nothing would pass them; a float checker's problem would refuse right answers.
RECORD_FIELDS = ("checker", "languages", "time_limit_multipliers", "python3_interpreter")


def stated_fields(tests: Any) -> dict[str, Any]:
    """The ``RECORD_FIELDS`` inline ``tests`` (parsed; as :func:`stated_limits` leaves them) state
    beside them, or inside a dataset row's column passed whole (``ROW_COLUMNS``); nulls are
    absent. An open-r1 codeforces row states its checker as ``generated_checker``."""
    if not isinstance(tests, Mapping):
        return {}
    if len(tests) == 1 and next(iter(tests)) in ROW_COLUMNS:
        inner = tests[next(iter(tests))]
        return stated_fields(parse_json_field(inner, "tests") if isinstance(inner, str | bytes) else inner)
    fields = {k: tests[k] for k in RECORD_FIELDS if tests.get(k) is not None}
    if is_codeforces_row(tests) and "checker" not in fields:  # its generated_checker, as prepare reads it
        checker = codeforces_checker(tests)
        if checker is not None:
            fields["checker"] = checker
    return fields


def _field(name: str, given: Any, stated: Mapping[str, Any]) -> Any:
    """The caller's ``name`` (checker, languages), else the one the tests state; both, and
    different, is an error (one of them would be ignored in silence)."""
    if name not in stated:
        return given
    if given is not None and given != stated[name]:
        raise InlineProblemError(f"the tests state {name} {stated[name]!r} but the caller gives {given!r}")
    return stated[name]


def _limit(name: str, given: Any, stated: Mapping[str, Any]) -> Any:
    """The caller's limit ``name``, else the one the tests state; both, and different, is an error
    (one of them would be ignored in silence)."""
    if name not in stated or stated[name] is None:
        return given
    if isinstance(stated[name], bool) or not isinstance(stated[name], int | float):
        raise InlineProblemError(f"the tests state {name} {stated[name]!r}, which is not a number")
    if given is not None and given != stated[name]:
        raise InlineProblemError(f"the tests state {name} {stated[name]!r} but the caller gives {given!r}")
    return stated[name]


def content_id(rec: Mapping[str, Any], prefix: str = INLINE_PREFIX) -> str:
    """``prefix`` + 32 hex digits of BLAKE2b over the judged content of ``rec``: its tests,
    ``fn_name`` and ``fn_semantics``, limits, checker, languages and python3 interpreter (not its id, name,
    statement or starter code)."""
    judged = {
        "public_tests": rec.get("public_tests") or [],
        "hidden_tests": rec.get("hidden_tests") or [],
        "fn_name": rec.get("fn_name"),
        "time_limit_s": None if rec.get("time_limit_s") is None else float(rec["time_limit_s"]),
        "memory_limit_mb": rec.get("memory_limit_mb"),
        "checker": rec.get("checker"),
        "languages": rec.get("languages"),
        "time_limit_multipliers": rec.get("time_limit_multipliers"),
    }
    if rec.get("python3_interpreter") not in (None, "python3"):  # only when set: other ids stay
        judged["python3_interpreter"] = rec["python3_interpreter"]
    if rec.get("fn_semantics") not in (None, "python"):  # the same tests judged by other rules
        judged["fn_semantics"] = rec["fn_semantics"]
    blob = json.dumps(judged, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return prefix + hashlib.blake2b(blob.encode("utf-8"), digest_size=16).hexdigest()


def problem_from_tests(
    tests: Any,
    *,
    fn_name: str | None = None,
    time_limit_s: float | None = None,
    memory_limit_mb: int | None = None,
    checker: Mapping[str, Any] | None = None,
    languages: list[str] | None = None,
    starter_code: str | None = None,
    num_public: int = 1,
    id_prefix: str = INLINE_PREFIX,
) -> dict[str, Any]:
    """Inline tests in any supported shape (parsed or JSON text) -> a problem record.

    ``fn_name`` names the function when the tests do not (a LiveCodeBench row's metadata);
    shapes without a public/private split show the first ``num_public`` tests and reward on
    all of them. ``languages`` defaults to what the tests state (PrimeIntellect's ``language``:
    a language cpfleet does not judge is an error), else Python for function-call tests. Limits
    are the arguments, else what the tests state (:func:`stated_limits`), else, for the time
    limit of a whole LiveCodeBench, TACO / APPS or DeepCoder row, its grader's (6 s, 4 s, 6 s), as ``cpfleet
    prepare`` gives it (:func:`cpfleet.core.rowlimits.grader_time_limit_s`), else None: the
    project's defaults. A dataset row passed whole (code_contests, TACO / APPS, LiveCodeBench,
    PrimeIntellect, DeepCoder) is the problem ``cpfleet prepare`` makes of it. A problem record passed as
    the tests keeps its checker, languages, ``time_limit_multipliers`` and ``python3_interpreter``
    (:func:`stated_fields`; a caller's different checker or languages is an error). The record's
    ``id`` is :func:`content_id`. Raises :class:`InlineProblemError` with a one-line reason."""
    if num_public < 0:
        raise InlineProblemError("num_public must be >= 0")
    try:
        tests = parse_json_field(tests, "tests")  # JSON text read once: it may be tens of MB
        tests, stated = stated_limits(tests)
        time_limit_s = _limit("time_limit_s", time_limit_s, stated)
        memory_limit_mb = _limit("memory_limit_mb", memory_limit_mb, stated)
        if time_limit_s is None:  # none given nor stated: a whole row's grader's, as prepare gives it
            time_limit_s = grader_time_limit_s(tests)
        fields = stated_fields(tests)
        checker = _field("checker", checker, fields)
        languages = _field("languages", languages, fields)
        ts: TestSet = normalize_tests(tests, fn_name=fn_name, num_public=num_public)
    except TestShapeError as e:
        raise InlineProblemError(str(e)) from None
    except RecursionError:
        raise InlineProblemError("tests nested too deeply") from None
    if not ts.hidden:
        raise InlineProblemError("no tests")
    if languages is None and ts.language is not None:
        try:
            languages = languages_for(ts.language)
        except ValueError as e:
            raise InlineProblemError(str(e)) from None
    rec = make_record(
        "", ts, name="", time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb,
        checker=checker, languages=languages, starter_code=starter_code,
    )
    for name in ("time_limit_multipliers", "python3_interpreter"):
        if name in fields:
            rec[name] = fields[name]
    try:
        rec["id"] = content_id(rec, id_prefix)
    except UnicodeEncodeError as e:  # JSON's "\ud800" escape: text that no UTF-8 carries
        raise InlineProblemError(f"the tests hold a lone UTF-16 surrogate ({e.object[e.start:e.end]!r}), "
                                 "which is not Unicode text") from None
    except ValueError as e:  # NaN / infinite limits
        raise InlineProblemError(f"limits are not finite numbers ({e})") from None
    rec["name"] = rec["id"]
    errors = record_errors(rec)
    if errors:
        raise InlineProblemError("; ".join(errors[:3]))
    return rec
