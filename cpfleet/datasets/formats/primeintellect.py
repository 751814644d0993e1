"""``primeintellect``: ``PrimeIntellect/verifiable-coding-problems`` (SYNTHETIC-1) rows:
``verification_info`` JSON with ``language`` and ``test_cases``; Python gold answers become
``correct_solutions``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.languages import dataset_languages
from cpfleet.core.records import languages_for, make_record
from cpfleet.core.testshapes import check_primeintellect_task, from_verification_info, split_public
from cpfleet.datasets.formats import Converted, DatasetFormat, PrepareOptions, register_format

_FENCE_TAG = re.compile(r"[ \t]*([A-Za-z0-9_+#-]*)")


def _fenced_code(text: str) -> tuple[str | None, str]:
    """The first fenced block of a gold-standard answer: (fence tag, code); the text itself
    when it has no fence.

    The block opens at the first ``` that has a line end after it, its tag is the leading word
    after the fence's blanks, and it runs from the next line to the next ```. Only the first ```
    can open one: a later ``` has its line end no earlier and so no closing ``` where the first
    has none. Found with three ``find`` calls, each reading the text once (a search for
    ``` ... \n(.*?)``` from every ``` would read to the end from each, time quadratic in a
    row of unclosed fences)."""
    start = text.find("```")
    line_end = text.find("\n", start + 3) if start >= 0 else -1
    close = text.find("```", line_end + 1) if line_end >= 0 else -1
    if close < 0:
        return None, text
    tag = m.group(1) if (m := _FENCE_TAG.match(text, start + 3)) else ""  # it always matches
    return (tag.lower() or None), text[line_end + 1:close]


def convert_primeintellect(row: Mapping[str, Any], index: int, opts: PrepareOptions,
                           counts: Counter[str]) -> Converted:
    """One ``PrimeIntellect/verifiable-coding-problems`` (SYNTHETIC-1) row: ``verification_info``
    JSON with ``language`` and ``test_cases``; the stated language becomes ``languages``
    (rust / javascript rows are skipped: cpfleet judges python3, pypy3, cpp, c, java)."""
    try:
        check_primeintellect_task(row)  # shared with a row passed whole as inline tests
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


register_format(DatasetFormat(
    "primeintellect", "PrimeIntellect verifiable-coding-problems (verification_info)", convert=convert_primeintellect,
    detect=lambda cols: "verification_info" in cols, priority=31))
