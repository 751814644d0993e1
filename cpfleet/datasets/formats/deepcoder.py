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
from cpfleet.core.testshapes import (
    from_cases,
    from_input_output,
    parse_json_field,
    split_public,
    tests_by_rules,
)
from cpfleet.datasets.formats import Converted, DatasetFormat, PrepareOptions, register_format
from cpfleet.datasets.formats.common import solution_list


def convert_deepcoder(row: Mapping[str, Any], index: int, opts: PrepareOptions,
                      counts: Counter[str]) -> Converted:
    """One ``agentica-org/DeepCoder-Preview-Dataset`` row (configs primeintellect, taco, lcbv5,
    codeforces): ``tests`` is a TACO dict or a list of cases typed ``stdin`` / ``stdin_stdout`` /
    ``functional`` (or PrimeIntellect's ``type``); the function name comes from the case or
    from the row's ``metadata`` (``func_name``)."""
    try:
        meta = parse_json_field(row.get("metadata"), "metadata")
        fn_name = meta.get("func_name") if isinstance(meta, Mapping) else None
        if fn_name is not None and not isinstance(fn_name, str):
            return "metadata func_name is not a string"
        raw = parse_json_field(row.get("tests"), "tests")
        if isinstance(raw, Mapping) and ("inputs" in raw or "outputs" in raw):
            io_ = dict(raw)
            if fn_name and not io_.get("fn_name"):
                io_["fn_name"] = fn_name
            tests, fn, rule = from_input_output(io_, counts)
        elif isinstance(raw, Mapping) and "test_cases" in raw:
            tests, fn, rule = from_cases(raw["test_cases"])
        else:
            tests, fn, rule = from_cases(raw, fn_name=fn_name)
    except TestShapeError as e:
        return str(e)
    if rule == "primeintellect":
        # rLLM, DeepCoder's grader, runs its PrimeIntellect rows' plain outputs through TACO's
        # run_test (rllm/rewards/code_reward.py primeintellect_check_correctness); stdin/stdout
        # rows labelled stdin_stdout (its TACO and PrimeIntellect rows) come as ``apps`` already
        rule = "apps"
    public, hidden = split_public(tests, opts.num_public)
    subset = opts.subset or "deepcoder"
    rec = make_record(
        f"deepcoder/{subset}/{opts.split}/{index}", tests_by_rules(public, hidden, fn, rule),
        description=row.get("problem") or "",
        starter_code=row.get("starter_code") or None,
    )
    if opts.with_solutions:
        rec["correct_solutions"] = solution_list(row.get("solutions"), counts, opts.max_solutions)
    return rec


register_format(DatasetFormat(
    "deepcoder", "DeepCoder (configs primeintellect, taco, lcbv5, codeforces; --config picks the subset)",
    convert=convert_deepcoder, detect=lambda cols: {"tests", "problem"} <= cols, priority=32,
    harness_time_limit_s=6.0, harness="rLLM's DeepCoder grader",
    options=lambda opts: dataclasses.replace(opts, subset=opts.config) if opts.subset is None and opts.config else opts))
