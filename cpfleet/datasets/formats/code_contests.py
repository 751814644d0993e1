"""``code_contests``: deepmind/code_contests rows.

``id`` = the problem ``name``; public = ``public_tests``; hidden = ``private_tests`` ++
``generated_tests``; time limit from ``{seconds, nanos}``, memory from bytes (MiB), read by
:mod:`cpfleet.core.rowlimits` as inline tests given the row read them; checker
``{"type": "code_contests"}`` (the official tester's comparison). Problems that read or write
named files (``input_file`` / ``output_file``) are skipped. ``--with-solutions`` keeps language 3
(Python 3) solutions as ``correct_solutions`` / ``incorrect_solutions``; Python 2 (language 1)
and other languages are counted and dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.rowlimits import code_contests_mb, code_contests_seconds
from cpfleet.core.testshapes import (
    CODE_CONTESTS_NAMED_FILES,
    as_records,
    code_contests_named_files,
    from_code_contests_row,
)
from cpfleet.datasets.formats import DatasetFormat, PrepareOptions, register_format

CODE_CONTESTS_CHECKER = {"type": "code_contests"}
# code_contests Language enum
LANG_PYTHON2 = 1
LANG_PYTHON3 = 3


def _python3_solutions(raw: Any, kind: str, counts: Counter[str], cap: int | None) -> list[str]:
    if not raw:
        return []
    if not isinstance(raw, Mapping) or not all(isinstance(raw.get(k) or [], list) for k in ("language", "solution")):
        counts[f"{kind} malformed solutions field"] += 1
        return []
    kept: list[str] = []
    for lang, code in zip(raw.get("language") or [], raw.get("solution") or [], strict=False):
        if lang == LANG_PYTHON3:
            kept.append(code)
        elif lang == LANG_PYTHON2:
            counts[f"{kind} python2 dropped"] += 1
        else:
            counts[f"{kind} other languages dropped"] += 1
    if cap is not None and len(kept) > cap:
        counts[f"{kind} python3 over --max-solutions"] += len(kept) - cap
        kept = kept[:cap]
    counts[f"{kind} python3 kept"] += len(kept)
    return kept


def convert_code_contests(row: Mapping[str, Any], opts: PrepareOptions, counts: Counter[str]) -> dict[str, Any] | str:
    """One code_contests row -> a problem record, or the reason it is skipped.

    ``counts`` receives the solution accounting of this row (merged into the summary only
    when the problem is kept)."""
    if code_contests_named_files(row):
        return CODE_CONTESTS_NAMED_FILES
    try:  # the one reading of the row, shared with inline tests (cpfleet.core.testshapes)
        tests = from_code_contests_row(row)
    except TestShapeError as e:
        return f"malformed tests ({e})"
    rec: dict[str, Any] = {
        "id": row.get("name") or "",
        "name": row.get("name") or "",
        "description": row.get("description") or "",
        "public_tests": as_records(tests.public),
        "hidden_tests": as_records(tests.hidden),
        "time_limit_s": code_contests_seconds(row.get("time_limit")),
        "memory_limit_mb": code_contests_mb(row.get("memory_limit_bytes")),
        "checker": dict(CODE_CONTESTS_CHECKER),
        "difficulty": row.get("difficulty"),
    }
    if opts.with_solutions:
        rec["correct_solutions"] = _python3_solutions(row.get("solutions"), "correct", counts, opts.max_solutions)
        rec["incorrect_solutions"] = _python3_solutions(
            row.get("incorrect_solutions"), "incorrect", counts, opts.max_solutions
        )
    return rec


register_format(DatasetFormat(
    "code_contests", "deepmind/code_contests (public/private/generated tests, the official tester's comparison)",
    convert=lambda row, index, opts, counts: convert_code_contests(row, opts, counts),
    detect=lambda cols: {"public_tests", "private_tests"} <= cols or {"public_tests", "generated_tests"} <= cols,
    priority=10,
    drop_columns=lambda opts, cols: [] if opts.with_solutions else [c for c in ("solutions", "incorrect_solutions")
                                                                    if c in cols]))
