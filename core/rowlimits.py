"""The limits a dataset row states, read one way for ``cpfleet prepare`` and for inline tests.

Each dataset writes its limits in its own columns and units: code_contests ``time_limit
{seconds, nanos}`` and ``memory_limit_bytes``; TACO / APPS ``time_limit`` / ``memory_limit`` text
(``"2 seconds"``, ``"256 megabytes"``); open-r1 codeforces ``time_limit`` (s) and
``memory_limit`` (MB) as numbers. The format modules of ``cpfleet prepare``
(cpfleet/datasets/formats/) and the inline path (:func:`cpfleet.producer.inline.stated_limits`,
given a row whole) both read them through this module, so the same row gets the same limits by
either path. A value that states no usable limit (absent, zero, not a number) reads as None: the
project's default, or the format's grader's where ``cpfleet prepare`` knows one.

A row that states no time limit gets the one its dataset's own grader gives every test
(LiveCodeBench's run_test 6 s, TACO's and APPS's 4 s, rLLM's for DeepCoder 6 s), as ``cpfleet
prepare`` gives its rows and inline tests give the row passed whole (:func:`grader_time_limit_s`).
The ``is_*_row`` tests name the rows inline tests read whole, by the columns prepare tells their
format by.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

# A number (digits with an optional fraction, or a bare fraction) then its unit, each number read
# in one way and only from the start of its digit run: ``[0-9]*\.?[0-9]+`` would read a run of
# digits in every split of it from every position inside it, time cubic in the run (800 digits
# 1.5 s) on a dataset row; a start inside a run can only end where the run's own start ends, so
# skipping it finds the same first match and the same number.
_NUMBER = r"(?<![0-9])([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*+"
_SECONDS = re.compile(_NUMBER + r"(?:s\b|sec|second)", re.I)
_MEGABYTES = re.compile(_NUMBER + r"(?:mb\b|mib\b|megabyte)", re.I)


def code_contests_seconds(raw: Any) -> float | None:
    """code_contests ``time_limit`` ``{"seconds", "nanos"}`` -> seconds; None when absent, zero
    or not numbers (the record check then sees no limit rather than the converter failing)."""
    if not isinstance(raw, Mapping):
        return None
    seconds, nanos = raw.get("seconds") or 0, raw.get("nanos") or 0
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (seconds, nanos)):
        return None
    total = float(seconds) + float(nanos) / 1e9
    return total if math.isfinite(total) and total > 0 else None


def code_contests_mb(raw: Any) -> int | None:
    """code_contests ``memory_limit_bytes`` -> MiB (rounded); None when absent, zero or not a
    finite number."""
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw <= 0:
        return None
    return max(1, round(raw / (1 << 20)))


def positive_number(raw: Any) -> float | None:
    """An open-r1 codeforces ``time_limit`` (s) or ``memory_limit`` (MB): the number; None when
    absent, not a number (a bool neither: ``float(True)`` is 1) or not positive."""
    if isinstance(raw, bool):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def text_seconds(raw: Any) -> float | None:
    """A time limit written as text (TACO's ``"2 seconds"``) -> seconds; None when absent or not
    positive."""
    m = _SECONDS.search(str(raw or ""))
    return float(m.group(1)) if m and float(m.group(1)) > 0 else None


def text_mb(raw: Any) -> int | None:
    """A memory limit written as text (TACO's ``"256 megabytes"``) -> MB; None when absent or
    under 16."""
    m = _MEGABYTES.search(str(raw or ""))
    return round(float(m.group(1))) if m and float(m.group(1)) >= 16 else None


# The limits inline tests may state beside them, in the project's units (producer/inline.py)
LIMIT_KEYS = ("time_limit_s", "memory_limit_mb")
# The columns dataset rows state limits in (code_contests, TACO / APPS, open-r1 codeforces)
ROW_LIMIT_COLUMNS = ("time_limit", "memory_limit", "memory_limit_bytes")
CODE_CONTESTS_TEST_COLUMNS = ("public_tests", "private_tests", "generated_tests")


def is_code_contests_row(raw: Mapping[str, Any]) -> bool:
    """Whether ``raw`` is a deepmind/code_contests row (or its test columns): a test column that
    is ``{"input": [...], "output": [...]}``."""
    return any(isinstance(raw.get(k), Mapping) for k in CODE_CONTESTS_TEST_COLUMNS)


# The columns of a TACO / APPS row besides ``input_output`` (TACO's and APPS's schemas): one of
# them beside ``input_output`` says the mapping is the row, not the column with a key added
TACO_APPS_COLUMNS = frozenset({
    "question", "solutions", "starter_code", "difficulty", "time_limit", "memory_limit", "problem_id", "url",
    "name", "source", "tags", "raw_tags", "skill_types", "date", "picture_num", "Expected Auxiliary Space",
    "Expected Time Complexity"})
# The columns of a PrimeIntellect verifiable-coding-problems row besides ``verification_info``
PRIMEINTELLECT_COLUMNS = frozenset({
    "problem_id", "task_type", "prompt", "gold_standard_solution", "in_source_id", "source", "metadata"})


def is_taco_row(raw: Mapping[str, Any]) -> bool:
    """Whether ``raw`` is a TACO / APPS row passed whole: its ``input_output`` beside columns of
    the dataset's own (``{"input_output": ...}`` alone, or with ``LIMIT_KEYS``, is the column,
    whose row may state limits it does not carry)."""
    return "input_output" in raw and not TACO_APPS_COLUMNS.isdisjoint(raw)


def is_primeintellect_row(raw: Mapping[str, Any]) -> bool:
    """Whether ``raw`` is a PrimeIntellect verifiable-coding-problems row passed whole: its
    ``verification_info`` beside columns of the dataset's own (alone it is the column). Its rows
    state no limits."""
    return "verification_info" in raw and not PRIMEINTELLECT_COLUMNS.isdisjoint(raw)


def is_deepcoder_row(raw: Mapping[str, Any]) -> bool:
    """Whether ``raw`` is an agentica-org/DeepCoder-Preview-Dataset row passed whole: its
    ``tests`` beside its ``problem`` (the columns ``cpfleet prepare`` tells the format by). Its
    rows state no limits."""
    return "tests" in raw and "problem" in raw


def is_codeforces_row(raw: Mapping[str, Any]) -> bool:
    """Whether ``raw`` is an open-r1/codeforces row passed whole (its ``official_tests``, the
    column ``cpfleet prepare`` tells the format by)."""
    return "official_tests" in raw


def row_tests_column(raw: Mapping[str, Any]) -> str | None:
    """The column that holds the tests of a TACO / APPS, PrimeIntellect or DeepCoder row passed
    whole, None for any other mapping: limits stated inside it are read as inside the column
    passed alone (producer/inline.py ``stated_limits``)."""
    if is_taco_row(raw):
        return "input_output"
    if is_primeintellect_row(raw):
        return "verification_info"
    if is_deepcoder_row(raw):
        return "tests"
    return None


def row_limits(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The limits a dataset row passed whole as inline tests states in its own columns, as
    ``{"time_limit_s", "memory_limit_mb"}`` (only those it states), read as ``cpfleet prepare``
    reads them: a code_contests row's ``time_limit`` and ``memory_limit_bytes``, a TACO / APPS
    row's ``time_limit`` / ``memory_limit`` text, an open-r1 codeforces row's ``time_limit`` (s)
    and ``memory_limit`` (MB) numbers."""
    if is_code_contests_row(raw):
        found = {"time_limit_s": code_contests_seconds(raw.get("time_limit")),
                 "memory_limit_mb": code_contests_mb(raw.get("memory_limit_bytes"))}
    elif is_taco_row(raw):
        found = {"time_limit_s": text_seconds(raw.get("time_limit")),
                 "memory_limit_mb": text_mb(raw.get("memory_limit"))}
    elif is_codeforces_row(raw):
        memory = positive_number(raw.get("memory_limit"))
        found = {"time_limit_s": positive_number(raw.get("time_limit")),
                 "memory_limit_mb": round(memory) if memory is not None else None}
    else:
        return {}
    return {k: v for k, v in found.items() if v is not None}


# The per-test time limit LiveCodeBench's run_test gives every test (a 6 s alarm): its rows state
# none, and a solution that grader accepts must not be refused here for a limit it never set
LIVECODEBENCH_TIME_LIMIT_S = 6.0
# The per-test time limit rLLM's grader (DeepCoder's) gives every test: its rows state none
DEEPCODER_TIME_LIMIT_S = 6.0
# The per-test time limit TACO's and APPS's run_test give every test, whatever the row states
# (what prepare gives their rows that state none)
TACO_TIME_LIMIT_S = 4.0


def is_livecodebench_row(raw: Mapping[str, Any]) -> bool:
    """Whether ``raw`` is a livecodebench/code_generation_lite row (or its test columns)."""
    return "public_test_cases" in raw or "private_test_cases" in raw


def grader_time_limit_s(raw: Any) -> float | None:
    """The time limit the dataset's own grader gives every test of a row passed whole that
    states none, as ``cpfleet prepare`` gives it (``DatasetFormat.harness_time_limit_s``): a
    LiveCodeBench row's 6 s, a TACO / APPS row's 4 s, a DeepCoder row's 6 s (rLLM's grader);
    None for any other shape. Only a row the shape names without doubt: a TACO row's
    ``input_output`` column alone, or with columns but not its ``time_limit``, gets none (the
    row's own limit, which prepare reads first, may be shorter than TACO's 4 s), nor does a list
    of cases, whose dataset and grader it does not name."""
    if not isinstance(raw, Mapping) or is_code_contests_row(raw) or "public_tests" in raw or "hidden_tests" in raw:
        return None  # read as another shape first (core/testshapes.py normalize_tests)
    if is_livecodebench_row(raw):
        return LIVECODEBENCH_TIME_LIMIT_S
    if is_taco_row(raw) and ("time_limit" in raw or "problem_id" in raw):
        # a TACO row (it has the column, null when it states none) or an APPS one (none at all);
        # other columns without time_limit may have left the row's own limit behind
        return TACO_TIME_LIMIT_S
    if is_deepcoder_row(raw):
        return DEEPCODER_TIME_LIMIT_S
    return None


def unread_limit_columns(raw: Mapping[str, Any]) -> list[str]:
    """The row limit columns (``ROW_LIMIT_COLUMNS``) ``raw`` states that no inline shape of it
    reads: all it holds but for a code_contests, TACO / APPS or codeforces row (:func:`row_limits`). TACO's
    ``time_limit`` beside ``inputs`` and ``outputs``, dropped, judged them under the project's
    default."""
    if is_code_contests_row(raw) or is_taco_row(raw) or is_codeforces_row(raw):
        return []
    return [k for k in ROW_LIMIT_COLUMNS if raw.get(k) is not None]
