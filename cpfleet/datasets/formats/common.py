"""Helpers the inline-JSON row formats share (TACO / APPS, DeepCoder): their solutions columns
and their limits stated as text."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.testshapes import parse_json_field

# A number (digits with an optional fraction, or a bare fraction) then its unit, each number read
# in one way and only from the start of its digit run: ``[0-9]*\.?[0-9]+`` would read a run of
# digits in every split of it from every position inside it, time cubic in the run (800 digits
# 1.5 s) on a dataset row in ``cpfleet prepare``; a start inside a run can only end where the run's
# own start ends, so skipping it finds the same first match and the same number.
_NUMBER = r"(?<![0-9])([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*+"
_SECONDS = re.compile(_NUMBER + r"(?:s\b|sec|second)", re.I)
_MEGABYTES = re.compile(_NUMBER + r"(?:mb\b|mib\b|megabyte)", re.I)


def solution_list(raw: Any, counts: Counter[str], cap: int | None) -> list[str]:
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


def limit_text_seconds(raw: Any) -> float | None:
    """A time limit written as text (``"2 seconds"``) -> seconds; None when absent or not positive."""
    m = _SECONDS.search(str(raw or ""))
    return float(m.group(1)) if m and float(m.group(1)) > 0 else None


def limit_text_mb(raw: Any) -> int | None:
    """A memory limit written as text (``"256 megabytes"``) -> MB; None when absent or under 16."""
    m = _MEGABYTES.search(str(raw or ""))
    return round(float(m.group(1))) if m and float(m.group(1)) >= 16 else None
