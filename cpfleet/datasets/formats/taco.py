"""``taco`` and ``apps``: TACO and APPS rows (one schema: ``input_output`` JSON, call-based rows
carry ``fn_name`` and become function-call problems; APPS is told apart by ``problem_id`` and no
tags). Public tests: the first ``num_public``; the rest hidden. Solutions (Python) become
``correct_solutions``. Limits: the row's ``time_limit`` / ``memory_limit`` text; a row without a
time limit gets the 4 s per test that TACO's and APPS's own graders give every test (their
run_test reads no row's limit). A row passed whole as inline tests gets the same limits, read by
:mod:`cpfleet.core.rowlimits`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.records import make_record
from cpfleet.core.rowlimits import TACO_TIME_LIMIT_S, text_mb, text_seconds
from cpfleet.core.testshapes import from_input_output, split_public, tests_by_rules
from cpfleet.datasets.formats import Converted, DatasetFormat, PrepareOptions, register_format
from cpfleet.datasets.formats.common import solution_list


def convert_taco(row: Mapping[str, Any], index: int, opts: PrepareOptions, fmt: str,
                 counts: Counter[str]) -> Converted:
    """One TACO / APPS row; call-based rows (``fn_name``) become function-call problems, judged
    by APPS's call rules; stdin/stdout rows get ``real_tokens`` (its float closeness, not its
    fallbacks that pay wrong answers)."""
    try:
        tests, fn_name, rules = from_input_output(row.get("input_output"), counts)
    except TestShapeError as e:
        return str(e)
    public, hidden = split_public(tests, opts.num_public)
    if fmt == "apps" and row.get("problem_id") is not None:
        pid = f"apps/{opts.split}/{row['problem_id']}"
    else:
        pid = f"{fmt}/{opts.split}/{index}"
    rec = make_record(
        pid, tests_by_rules(public, hidden, fn_name, rules),
        name=row.get("name") or row.get("url") or pid,
        description=row.get("question") or "",
        time_limit_s=text_seconds(row.get("time_limit")),
        memory_limit_mb=text_mb(row.get("memory_limit")),
        starter_code=row.get("starter_code") or None,
        extra={"difficulty": row.get("difficulty")},
    )
    if opts.with_solutions:
        rec["correct_solutions"] = solution_list(row.get("solutions"), counts, opts.max_solutions)
    return rec


register_format(DatasetFormat(
    "taco", "TACO rows (input_output JSON; call-based problems carry fn_name)",
    convert=lambda row, index, opts, counts: convert_taco(row, index, opts, "taco", counts),
    detect=lambda cols: "input_output" in cols, priority=60,
    harness_time_limit_s=TACO_TIME_LIMIT_S, harness="TACO's run_test"))
register_format(DatasetFormat(
    "apps", "APPS rows (as TACO, told apart by problem_id and no tags)",
    convert=lambda row, index, opts, counts: convert_taco(row, index, opts, "apps", counts),
    detect=lambda cols: "input_output" in cols and "problem_id" in cols and not cols & {"raw_tags", "skill_types", "tags"},
    priority=50, harness_time_limit_s=TACO_TIME_LIMIT_S, harness="APPS's run_test"))
