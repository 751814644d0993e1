"""``livecodebench``: ``livecodebench/code_generation_lite`` rows (``public_test_cases`` /
``private_test_cases``, the private ones plain or base64-zlib-pickle, read by the restricted
unpickler). Public tests are shown; public + private decide the reward, as LiveCodeBench grades.
The rows state no limits: each test gets the 6 s LiveCodeBench's run_test gives it
(:data:`cpfleet.core.rowlimits.LIVECODEBENCH_TIME_LIMIT_S`, which inline tests give a row passed whole).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.records import make_record
from cpfleet.core.rowlimits import LIVECODEBENCH_TIME_LIMIT_S
from cpfleet.core.testshapes import from_lcb
from cpfleet.datasets.formats import Converted, DatasetFormat, PrepareOptions, register_format


def convert_livecodebench(row: Mapping[str, Any], index: int, opts: PrepareOptions,
                          counts: Counter[str]) -> Converted:
    """One ``livecodebench/code_generation_lite`` row: public tests shown, public + private
    (plain or base64-zlib-pickle, read by the restricted unpickler) decide the reward."""
    try:
        ts = from_lcb(row.get("public_test_cases"), row.get("private_test_cases"), row.get("metadata"))
    except TestShapeError as e:
        return str(e)
    qid = row.get("question_id") or index
    return make_record(
        f"lcb/{qid}", ts,
        name=row.get("question_title") or str(qid),
        description=row.get("question_content") or "",
        starter_code=row.get("starter_code") or None,
        extra={"difficulty": row.get("difficulty"), "platform": row.get("platform"),
               "contest_date": str(row["contest_date"]) if row.get("contest_date") is not None else None},
    )


register_format(DatasetFormat(
    "livecodebench", "LiveCodeBench code_generation_lite (public/private test cases)", convert=convert_livecodebench,
    detect=lambda cols: {"public_test_cases", "private_test_cases"} <= cols, priority=30,
    harness_time_limit_s=LIVECODEBENCH_TIME_LIMIT_S, harness="LiveCodeBench's run_test"))
