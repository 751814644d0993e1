"""Helpers the inline-JSON row formats share (TACO / APPS, DeepCoder): their solutions columns.
Their limits stated as text are read by :mod:`cpfleet.core.rowlimits`, the one reading of the limits
a row states."""

from __future__ import annotations

from collections import Counter
from typing import Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.testshapes import parse_json_field


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

