"""``cpfleet prepare`` for ``open-r1/codeforces``: official tests, the separately shipped
generated tests, the generated Python checker, and the limits.

Per row (dataset card; ``open_r1/utils/competitive_programming/cf_scoring.py``):

- ``id`` ``"2063/A"`` -> problem id ``codeforces/2063/A``; ``time_limit`` (s) and
  ``memory_limit`` (MB) as stated.
- public = ``examples`` (the statement's), else the first ``--num-public`` hidden tests;
  hidden = ``official_tests`` then the generated tests, capped by ``--max-hidden``.
- Generated tests ship as ``generated_tests/test_cases_{contest_id:04d}.parquet`` (columns
  ``problem_id, input, output``, and usually ``test_case_i``) beside the dataset; pass that
  folder as ``--generated-tests DIR``. Only the rows of the problem at hand are read (a
  parquet filter), so a contest's multi-GB file never sits in memory whole.
- ``generated_checker`` (Python source) -> ``{"type": "python", "source": ...}``: the problem
  accepts several answers and its checker decides.
- Skipped, each with its own count: interactive rows (``interaction_format`` set: the dataset
  carries the protocol as prose, no interactor program), ``input_mode`` other than ``stdio``
  (named files), rows without tests.
- The ``verifiable-prompts`` subset's ``language`` (python / cpp) becomes ``languages``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.records import languages_for, make_record
from cpfleet.core.rowlimits import row_limits
from cpfleet.core.testshapes import (
    Test,
    check_codeforces_row,
    codeforces_checker,
    from_codeforces_row,
    stdio_text,
)
from cpfleet.datasets.formats import Converted, DatasetFormat, PrepareOptions, register_format


def generated_tests_file(folder: Path, contest_id: int) -> Path:
    return folder / f"test_cases_{contest_id:04d}.parquet"


def load_generated_tests(folder: Path, contest_id: int, problem_id: str) -> list[Test] | None:
    """The generated tests of one problem, in ``test_case_i`` order; None when the contest's
    file is absent."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = generated_tests_file(folder, contest_id)
    if not path.is_file():
        return None
    pf = pq.ParquetFile(path)
    names = set(pf.schema_arrow.names)
    cols = ["input", "output"] + (["test_case_i"] if "test_case_i" in names else [])
    table = pq.read_table(path, columns=cols, filters=pc.field("problem_id") == problem_id)
    rows = table.to_pylist()
    if "test_case_i" in names:
        rows.sort(key=lambda r: (r.get("test_case_i") is None, r.get("test_case_i") or 0))
    return [(stdio_text(r["input"]), stdio_text(r["output"])) for r in rows]


def _description(row: Mapping[str, Any]) -> str:
    parts = [str(row.get("description") or "")]
    for title, key in (("Input", "input_format"), ("Output", "output_format"), ("Note", "note")):
        if row.get(key):
            parts.append(f"{title}\n\n{row[key]}")
    return "\n\n".join(p for p in parts if p)


def convert_codeforces(row: Mapping[str, Any], index: int, opts: PrepareOptions,
                       counts: Counter[str]) -> Converted:
    """One open-r1/codeforces row -> a problem record, or the reason it is skipped (the row read
    by :func:`cpfleet.core.testshapes.from_codeforces_row` and its limits by
    :mod:`cpfleet.core.rowlimits`, as inline tests given the row whole read them)."""
    try:
        check_codeforces_row(row)
    except TestShapeError as e:
        return str(e)
    cf_id = str(row.get("id") or "")
    if row.get("official_tests_complete") is False:
        counts["official tests incomplete (kept as given)"] += 1
    generated: list[Test] = []
    n_generated = row.get("generated_tests")
    if isinstance(n_generated, int) and n_generated > 0:
        folder = opts.generated_tests
        contest = row.get("contest_id")
        if folder is None:
            counts["generated tests not read (no --generated-tests folder)"] += 1
        elif not isinstance(contest, int | str) or not str(contest).isdigit():
            counts["generated tests not read (no contest_id)"] += 1
        else:
            try:
                loaded = load_generated_tests(Path(folder), int(contest), cf_id)
            except TestShapeError as e:  # a generated test with a null side
                return f"generated tests: {e}"
            if loaded is None:
                counts["generated tests not read (contest file absent)"] += 1
            else:
                generated = loaded
                counts["generated tests read"] += len(loaded)
                if len(loaded) != n_generated:
                    counts["generated tests: count differs from the row's generated_tests"] += 1
    try:
        tests = from_codeforces_row(row, num_public=opts.num_public, generated=generated)
        languages = languages_for(tests.language) if tests.language is not None else None
    except (TestShapeError, ValueError) as e:
        return str(e)
    limits = row_limits(row)
    return make_record(
        f"codeforces/{cf_id}", tests,
        name=str(row.get("title") or cf_id),
        description=_description(row),
        time_limit_s=limits.get("time_limit_s"),
        memory_limit_mb=limits.get("memory_limit_mb"),
        checker=codeforces_checker(row),
        languages=languages,
        extra={"difficulty": row.get("rating"), "tags": list(row.get("tags") or [])},
    )


register_format(DatasetFormat(
    "codeforces", "open-r1 codeforces (official_tests; generated tests from --generated-tests)",
    convert=convert_codeforces, detect=lambda cols: "official_tests" in cols, priority=20))
