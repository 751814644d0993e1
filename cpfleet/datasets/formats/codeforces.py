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
from cpfleet.core.testshapes import Test, TestSet, stdio_text
from cpfleet.datasets.formats import Converted, DatasetFormat, PrepareOptions, register_format

INTERACTIVE_REASON = "interactive (interaction_format set): the dataset carries no interactor program"
FILE_IO_REASON = "input_mode is not stdio: reads or writes named files"


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


def _pairs(raw: Any) -> list[Test]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TestShapeError("official_tests / examples is not a list")
    out = []
    for t in raw:
        if not isinstance(t, Mapping) or t.get("input") is None or t.get("output") is None:
            raise TestShapeError("a test is not {input, output}")
        out.append((stdio_text(t["input"]), stdio_text(t["output"])))
    return out


def _description(row: Mapping[str, Any]) -> str:
    parts = [str(row.get("description") or "")]
    for title, key in (("Input", "input_format"), ("Output", "output_format"), ("Note", "note")):
        if row.get(key):
            parts.append(f"{title}\n\n{row[key]}")
    return "\n\n".join(p for p in parts if p)


def _positive(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def convert_codeforces(row: Mapping[str, Any], index: int, opts: PrepareOptions,
                       counts: Counter[str]) -> Converted:
    """One open-r1/codeforces row -> a problem record, or the reason it is skipped."""
    if isinstance(row.get("interaction_format"), str) and row["interaction_format"].strip():
        return INTERACTIVE_REASON
    mode = row.get("input_mode")
    if mode not in (None, "", "stdio"):
        return FILE_IO_REASON
    cf_id = str(row.get("id") or "")
    if not cf_id:
        return "no id"
    try:
        official = _pairs(row.get("official_tests"))
        examples = _pairs(row.get("examples"))
    except TestShapeError as e:
        return str(e)
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
    hidden = official + generated
    public = examples or hidden[: opts.num_public]
    checker = None
    src = row.get("generated_checker")
    if isinstance(src, str) and src.strip():
        checker = {"type": "python", "source": src}
    try:
        languages = languages_for(row["language"]) if isinstance(row.get("language"), str) else None
    except ValueError as e:
        return str(e)
    ml = _positive(row.get("memory_limit"))
    return make_record(
        f"codeforces/{cf_id}", TestSet(tuple(public), tuple(hidden)),
        name=str(row.get("title") or cf_id),
        description=_description(row),
        time_limit_s=_positive(row.get("time_limit")),
        memory_limit_mb=round(ml) if ml is not None else None,
        checker=checker,
        languages=languages,
        extra={"difficulty": row.get("rating"), "tags": list(row.get("tags") or [])},
    )


register_format(DatasetFormat(
    "codeforces", "open-r1 codeforces (official_tests; generated tests from --generated-tests)",
    convert=convert_codeforces, detect=lambda cols: "official_tests" in cols, priority=20))
