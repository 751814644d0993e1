"""``deepcoder``: ``agentica-org/DeepCoder-Preview-Dataset`` rows (configs primeintellect, taco,
lcbv5, codeforces; ``--config`` picks the subset and names the ids). The rows state no limits:
each test gets the 6 s rLLM's grader (DeepCoder's) gives it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.records import make_record
from cpfleet.core.rowlimits import DEEPCODER_TIME_LIMIT_S
from cpfleet.core.testshapes import from_deepcoder_row
from cpfleet.datasets.formats import Converted, DatasetFormat, PrepareOptions, register_format
from cpfleet.datasets.formats.common import solution_list


def convert_deepcoder(row: Mapping[str, Any], index: int, opts: PrepareOptions,
                      counts: Counter[str]) -> Converted:
    """One ``agentica-org/DeepCoder-Preview-Dataset`` row (configs primeintellect, taco, lcbv5,
    codeforces), read by :func:`cpfleet.core.testshapes.from_deepcoder_row`, as inline tests
    given the row whole read it."""
    try:
        ts = from_deepcoder_row(row, num_public=opts.num_public, counts=counts)
    except TestShapeError as e:
        return str(e)
    subset = opts.subset or "deepcoder"
    rec = make_record(
        f"deepcoder/{subset}/{opts.split}/{index}", ts,
        description=row.get("problem") or "",
        starter_code=row.get("starter_code") or None,
    )
    if opts.with_solutions:
        rec["correct_solutions"] = solution_list(row.get("solutions"), counts, opts.max_solutions)
    return rec


register_format(DatasetFormat(
    "deepcoder", "DeepCoder (configs primeintellect, taco, lcbv5, codeforces; --config picks the subset)",
    convert=convert_deepcoder, detect=lambda cols: {"tests", "problem"} <= cols, priority=32,
    harness_time_limit_s=DEEPCODER_TIME_LIMIT_S, harness="rLLM's DeepCoder grader",
    options=lambda opts: dataclasses.replace(opts, subset=opts.config) if opts.subset is None and opts.config else opts))
