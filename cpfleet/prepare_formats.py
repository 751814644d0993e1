"""``cpfleet prepare`` converters for the RL datasets whose tests are inline JSON: TACO / APPS,
LiveCodeBench ``code_generation_lite``, DeepCoder and PrimeIntellect ``verifiable-coding-problems``.

Each converter turns one dataset row into a problem record in the shared schema
(:mod:`cpfleet.core.records`) or returns the reason the row is skipped; the test shapes
themselves are normalised by :mod:`cpfleet.core.testshapes`, the same code inline problems
go through, so a problem prepared from a file and the same tests sent inline judge alike.
``counts`` collects per-row notes (solutions kept or dropped, outputs taken as they are), merged
into the summary when the row is kept.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.languages import dataset_languages
from cpfleet.core.records import languages_for, make_record
from cpfleet.core.testshapes import (
    TestSet,
    from_cases,
    from_input_output,
    from_lcb,
    from_verification_info,
    parse_json_field,
    split_public,
    tests_by_rules,
)
from cpfleet.dataset_formats import DatasetFormat, register_format

if TYPE_CHECKING:
    from cpfleet.prepare import PrepareOptions

Converted = dict[str, Any] | str

_SECONDS = re.compile(r"([0-9]*\.?[0-9]+)\s*(?:s\b|sec|second)", re.I)
_MEGABYTES = re.compile(r"([0-9]*\.?[0-9]+)\s*(?:mb\b|mib\b|megabyte)", re.I)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+#-]*)[^\n]*\n(.*?)```", re.S)


def _solution_list(raw: Any, counts: Counter[str], cap: int | None) -> list[str]:
    """A solutions column (JSON text or a list) -> Python sources, capped and counted."""
    try:
        parsed = parse_json_field(raw, "solutions") or []
    except TestShapeError:
        counts["correct malformed solutions field"] += 1
        return []
    if not isinstance(parsed, list):
        counts["correct malformed solutions field"] += 1
        return []
    kept = [s for s in parsed if isinstance(s, str) and s.strip()]
    if cap is not None and len(kept) > cap:
        counts["correct python3 over --max-solutions"] += len(kept) - cap
        kept = kept[:cap]
    counts["correct python3 kept"] += len(kept)
    return kept


def _limit_text_seconds(raw: Any) -> float | None:
    m = _SECONDS.search(str(raw or ""))
    return float(m.group(1)) if m and float(m.group(1)) > 0 else None


def _limit_text_mb(raw: Any) -> int | None:
    m = _MEGABYTES.search(str(raw or ""))
    return round(float(m.group(1))) if m and float(m.group(1)) >= 16 else None


# --- TACO / APPS -------------------------------------------------------------------------------


def convert_taco(row: Mapping[str, Any], index: int, opts: PrepareOptions, fmt: str,
                 counts: Counter[str]) -> Converted:
    """One TACO / APPS row; call-based rows (``fn_name``) become function-call problems."""
    try:
        tests, fn_name, semantics = from_input_output(row.get("input_output"), counts)
    except TestShapeError as e:
        return str(e)
    public, hidden = split_public(tests, opts.num_public)
    if fmt == "apps" and row.get("problem_id") is not None:
        pid = f"apps/{opts.split}/{row['problem_id']}"
    else:
        pid = f"{fmt}/{opts.split}/{index}"
    rec = make_record(
        pid, TestSet(public, hidden, fn_name, fn_semantics=semantics),
        name=row.get("name") or row.get("url") or pid,
        description=row.get("question") or "",
        time_limit_s=_limit_text_seconds(row.get("time_limit")),
        memory_limit_mb=_limit_text_mb(row.get("memory_limit")),
        starter_code=row.get("starter_code") or None,
        extra={"difficulty": row.get("difficulty")},
    )
    if opts.with_solutions:
        rec["correct_solutions"] = _solution_list(row.get("solutions"), counts, opts.max_solutions)
    return rec


# --- LiveCodeBench -----------------------------------------------------------------------------


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


# --- DeepCoder ---------------------------------------------------------------------------------


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
            info = from_verification_info(raw)
            tests, fn, rule = list(info.hidden), info.fn_name, info.fn_semantics or info.stdio_checker
        else:
            tests, fn, rule = from_cases(raw, fn_name=fn_name)
    except TestShapeError as e:
        return str(e)
    if rule == "primeintellect":
        # rLLM, DeepCoder's grader, runs its PrimeIntellect rows' plain outputs through TACO's
        # run_test (rllm/rewards/code_reward.py primeintellect_check_correctness)
        rule = "apps"
    public, hidden = split_public(tests, opts.num_public)
    subset = opts.subset or "deepcoder"
    rec = make_record(
        f"deepcoder/{subset}/{opts.split}/{index}", tests_by_rules(public, hidden, fn, rule),
        description=row.get("problem") or "",
        starter_code=row.get("starter_code") or None,
    )
    if opts.with_solutions:
        rec["correct_solutions"] = _solution_list(row.get("solutions"), counts, opts.max_solutions)
    return rec


# --- PrimeIntellect ----------------------------------------------------------------------------


def _fenced_code(text: str) -> tuple[str | None, str]:
    """The first fenced block of a gold-standard answer: (fence tag, code); the text itself
    when it has no fence."""
    m = _FENCE.search(text)
    if m is None:
        return None, text
    return (m.group(1).lower() or None), m.group(2)


def convert_primeintellect(row: Mapping[str, Any], index: int, opts: PrepareOptions,
                           counts: Counter[str]) -> Converted:
    """One ``PrimeIntellect/verifiable-coding-problems`` (SYNTHETIC-1) row: ``verification_info``
    JSON with ``language`` and ``test_cases``; the stated language becomes ``languages``
    (rust / javascript rows are skipped: cpfleet judges python3, pypy3, cpp, c, java)."""
    task = row.get("task_type")
    if task is not None and task != "verifiable_code":
        return f"task_type {str(task)[:40]!r} is not verifiable_code"
    try:
        info = from_verification_info(row.get("verification_info"))
    except TestShapeError as e:
        return str(e)
    language = info.language
    try:
        languages = languages_for(language)
    except ValueError as e:
        return str(e)
    public, hidden = split_public(info.hidden, opts.num_public)
    pid = row.get("problem_id") or row.get("in_source_id") or index
    rec = make_record(
        f"primeintellect/{pid}", dataclasses.replace(info, public=public, hidden=hidden),
        name=str(row.get("in_source_id") or pid),
        description=row.get("prompt") or "",
        languages=languages,
        extra={"source": row.get("source")} if row.get("source") else None,
    )
    gold = row.get("gold_standard_solution")
    if opts.with_solutions:
        kept: list[str] = []
        if isinstance(gold, str) and gold.strip():
            tag, code = _fenced_code(gold)
            if "python3" in (dataset_languages(tag or language or "") or ()):
                kept.append(code)
                counts["correct python3 kept"] += 1
            else:
                counts["correct other languages dropped"] += 1
        rec["correct_solutions"] = kept
    return rec


def detect_inline_format(cols: set[str]) -> str | None:
    """The formats of this module told by their columns (None: none of them)."""
    if {"public_test_cases", "private_test_cases"} <= cols:
        return "livecodebench"
    if "verification_info" in cols:
        return "primeintellect"
    if {"tests", "problem"} <= cols:
        return "deepcoder"
    return None



register_format(DatasetFormat(
    "taco", "TACO rows (input_output JSON; call-based problems carry fn_name)",
    convert=lambda row, index, opts, counts: convert_taco(row, index, opts, "taco", counts),
    detect=lambda cols: "input_output" in cols, priority=60))
register_format(DatasetFormat(
    "apps", "APPS rows (as TACO, told apart by problem_id and no tags)",
    convert=lambda row, index, opts, counts: convert_taco(row, index, opts, "apps", counts),
    detect=lambda cols: "input_output" in cols and "problem_id" in cols and not cols & {"raw_tags", "skill_types", "tags"},
    priority=50))
register_format(DatasetFormat(
    "livecodebench", "LiveCodeBench code_generation_lite (public/private test cases)", convert=convert_livecodebench,
    detect=lambda cols: {"public_test_cases", "private_test_cases"} <= cols, priority=30))
register_format(DatasetFormat(
    "primeintellect", "PrimeIntellect verifiable-coding-problems (verification_info)", convert=convert_primeintellect,
    detect=lambda cols: "verification_info" in cols, priority=31))
register_format(DatasetFormat(
    "deepcoder", "DeepCoder (configs primeintellect, taco, lcbv5, codeforces; --config picks the subset)",
    convert=convert_deepcoder, detect=lambda cols: {"tests", "problem"} <= cols, priority=32,
    options=lambda opts: dataclasses.replace(opts, subset=opts.config) if opts.subset is None and opts.config else opts))
