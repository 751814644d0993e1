"""The one problem loader: JSONL, JSONL.gz, parquet and Arrow files in the project's format.

Every command that reads a problem file (``cpfleet judge``, ``cpfleet load``, ``cpfleet
validate``) reads it through :func:`load_problems`, and ``FleetClient.register_problems`` applies
the same per-record rules (``Problem.from_dict`` then ``validate_for_judging``), so all four
accept and refuse exactly the same problems:

- A malformed record (bad JSON, or a record ``Problem.from_dict`` rejects) is skipped; the
  first ``max_warnings`` are logged with their line number, the rest only counted, and the
  final count is in :class:`LoadStats` (a long file with a handful of bad lines still loads).
- Caps: ``None`` means no cap; ``0`` means zero (zero problems, or zero tests of that kind, in
  which case every problem is skipped for having no tests of that kind); a negative cap, or
  one that is not an int, raises ``ValueError``. Reading stops as soon as ``max_problems``
  problems are kept, so later lines (and duplicates among them) are never looked at.
- A problem the judging rule refuses for ``mode`` (``cpfleet.core.problem.validate_for_judging``:
  full mode needs a hidden test, public mode a public test, after the test caps) is skipped,
  warned about and counted, like a malformed record.
- ``strict=True`` makes the first skipped record (malformed, invalid, or refused by the rule)
  an :class:`InputFileError` naming its record number instead.
- Duplicate ids follow ``on_duplicate``: ``"error"`` (default) raises
  :class:`DuplicateProblemError` naming both line numbers; ``"first"`` keeps the first record
  and ``"last"`` keeps the last one (in the first one's position). Both count and log every
  duplicate. Never a silent overwrite.
- A missing or unreadable file raises :class:`ProblemFileError` (a ``FileNotFoundError`` for a
  missing one) carrying the path, so a CLI can print one line instead of a traceback.

The format is sniffed from the file's first bytes (gzip, parquet, Arrow IPC), falling back to
the suffix, then to JSONL.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from cpfleet.core.errors import (
    DuplicateProblemError,
    InputFileError,
    NoHiddenTestsError,
    NoPublicTestsError,
    OptionError,
    ProblemFileError,
    ProblemFileNotFoundError,
)
from cpfleet.core.problem import Problem, ProblemFormatError, cap_keeps_only_shown, validate_for_judging
from cpfleet.core.protocol import check_mode, rewarded_tests

log = logging.getLogger(__name__)

OnDuplicate = Literal["error", "first", "last"]
DEFAULT_MAX_WARNINGS = 5
_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"
_ARROW_FILE_MAGIC = b"ARROW1"
_ARROW_STREAM_CONTINUATION = b"\xff\xff\xff\xff"


@dataclass(slots=True)
class LoadStats:
    """What happened to every record of the file."""

    path: str = ""
    format: str = ""
    records: int = 0  # non-blank records looked at
    loaded: int = 0
    malformed: int = 0
    no_public: int = 0  # skipped in public mode: no public tests (after max_public_tests)
    no_hidden: int = 0  # skipped in full mode: no hidden tests (after max_hidden_tests)
    duplicates: int = 0  # records dropped or replaced under on_duplicate first/last
    public_truncated: int = 0  # problems whose public tests were cut by the cap
    hidden_truncated: int = 0
    stopped_at_max_problems: bool = False
    warnings: list[str] = field(default_factory=list)  # the logged ones (at most max_warnings)
    warnings_suppressed: int = 0  # skipped records beyond max_warnings: counted, not shown
    # id -> why its record was skipped, for records that still name an id: a job naming it is
    # told that, not "unknown problem"
    skipped_ids: dict[str, str] = field(default_factory=dict)

    @property
    def skipped(self) -> int:
        return self.malformed + self.no_public + self.no_hidden + self.duplicates

    def summary(self) -> str:
        parts = [f"{self.loaded} loaded", f"{self.records} read", f"{self.skipped} skipped"]
        reasons = [
            (self.malformed, "malformed"),
            (self.no_public, "no public tests"),
            (self.no_hidden, "no hidden tests"),
            (self.duplicates, "duplicate id"),
        ]
        detail = ", ".join(f"{n} {why}" for n, why in reasons if n)
        text = ", ".join(parts) + (f" ({detail})" if detail else "")
        if self.stopped_at_max_problems:
            text += "; stopped at max_problems"
        return text


@dataclass(slots=True)
class LoadResult:
    """The kept problems in file order, plus the accounting."""

    problems: list[Problem]
    stats: LoadStats

    def by_id(self) -> dict[str, Problem]:
        return {p.id: p for p in self.problems}

    def __len__(self) -> int:
        return len(self.problems)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems)


def check_cap(name: str, value: int | None) -> int | None:
    """Validate a cap: None (no cap), 0 (zero), positive; anything else is a ValueError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionError(f"{name} must be an int or None, got {value!r}")
    if value < 0:
        raise OptionError(f"{name} must be >= 0 (None for no cap), got {value}")
    return value


def detect_format(path: Path) -> str:
    """``jsonl``, ``jsonl.gz``, ``parquet`` or ``arrow``, from the magic bytes first."""
    with path.open("rb") as f:
        head = f.read(8)
    if head.startswith(_GZIP_MAGIC):
        return "jsonl.gz"
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    if head.startswith(_ARROW_FILE_MAGIC) or head.startswith(_ARROW_STREAM_CONTINUATION):
        return "arrow"
    suffix = path.name.lower()
    if suffix.endswith((".parquet", ".pq")):
        return "parquet"
    if suffix.endswith((".arrow", ".feather", ".ipc")):
        return "arrow"
    return "jsonl"


def iter_records(path: str | Path, fmt: str | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(record_number, record)``; ``record`` is a dict, or the exception that made it malformed.

    Record numbers are 1-based line numbers for JSONL (blank lines are skipped but counted)
    and 1-based row numbers for parquet/Arrow.
    """
    p = Path(path)
    _check_readable(p)
    fmt = fmt or detect_format(p)
    if fmt in ("jsonl", "jsonl.gz"):
        yield from _iter_jsonl(p, gz=fmt == "jsonl.gz")
    elif fmt == "parquet":
        yield from _iter_parquet(p)
    elif fmt == "arrow":
        yield from _iter_arrow(p)
    else:
        raise OptionError(f"unknown problem file format {fmt!r}")


def load_problems(
    path: str | Path,
    *,
    max_problems: int | None = None,
    max_public_tests: int | None = None,
    max_hidden_tests: int | None = None,
    on_duplicate: OnDuplicate = "error",
    max_warnings: int = DEFAULT_MAX_WARNINGS,
    fmt: str | None = None,
    strict: bool = False,
    log_warnings: bool = True,
    mode: str = "full",
) -> LoadResult:
    """Load a problem file under the rules in this module's docstring. ``log_warnings=False``
    only collects the warnings in ``stats.warnings`` (a CLI prints them itself)."""
    check_mode(mode)
    max_problems = check_cap("max_problems", max_problems)
    max_public_tests = check_cap("max_public_tests", max_public_tests)
    max_hidden_tests = check_cap("max_hidden_tests", max_hidden_tests)
    if on_duplicate not in ("error", "first", "last"):
        raise OptionError(f"on_duplicate must be 'error', 'first' or 'last', got {on_duplicate!r}")
    p = Path(path)
    _check_readable(p)
    stats = LoadStats(path=str(p), format=fmt or detect_format(p))
    kept: dict[str, Problem] = {}
    first_seen: dict[str, int] = {}
    suppressed = 0

    def warn(msg: str) -> None:
        nonlocal suppressed
        if len(stats.warnings) < max_warnings:
            stats.warnings.append(msg)
            if log_warnings:
                log.warning("%s", msg)
        else:
            suppressed += 1

    if max_problems == 0:
        stats.stopped_at_max_problems = True
        return LoadResult([], stats)
    def skip(lineno: int, what: str, why: object, record: object = None) -> None:
        if strict:
            raise InputFileError(f"{p}:{lineno}: {what}: {why} (--strict: any bad record is an error)")
        warn(f"{p}:{lineno}: skipped {what}: {why}")
        pid = record.get("id") if isinstance(record, dict) else None
        if isinstance(pid, str) and pid not in kept:
            stats.skipped_ids[pid] = f"problem {pid!r} was skipped when loading {p}:{lineno}: {what}: {why}"

    for lineno, rec in iter_records(p, stats.format):
        stats.records += 1
        if isinstance(rec, Exception):
            stats.malformed += 1
            skip(lineno, "malformed record", rec)
            continue
        try:
            problem = Problem.from_dict(rec)
        except ProblemFormatError as e:
            stats.malformed += 1
            skip(lineno, "invalid problem", e, rec)
            continue
        if max_hidden_tests is not None and rewarded_tests(mode) == "hidden" and cap_keeps_only_shown(
                [(t.input, t.output) for t in problem.public_tests],
                [(t.input, t.output) for t in problem.hidden_tests], max_hidden_tests):
            stats.no_hidden += 1
            skip(lineno, "unjudgeable problem", f"{problem.id}: max_hidden_tests {max_hidden_tests} keeps only "
                 "public tests, whose answers are shown: the reward would pay for printing them", rec)
            continue
        problem = _apply_caps(problem, max_public_tests, max_hidden_tests, stats)
        try:
            validate_for_judging(problem, mode)
        except (NoPublicTestsError, NoHiddenTestsError) as e:
            if isinstance(e, NoPublicTestsError):
                stats.no_public += 1
            else:
                stats.no_hidden += 1
            skip(lineno, "unjudgeable problem", e, rec)
            continue
        if problem.id in kept:
            if on_duplicate == "error":
                raise DuplicateProblemError(p, problem.id, first_seen[problem.id], lineno)
            stats.duplicates += 1
            rule = "kept the first" if on_duplicate == "first" else "kept this one"
            warn(f"{p}:{lineno}: duplicate id {problem.id!r} (first on record {first_seen[problem.id]}): {rule}")
            if on_duplicate == "last":
                kept[problem.id] = problem
            continue
        kept[problem.id] = problem
        stats.skipped_ids.pop(problem.id, None)  # a later good record of that id wins
        first_seen[problem.id] = lineno
        if max_problems is not None and len(kept) >= max_problems:
            stats.stopped_at_max_problems = True
            break
    stats.warnings_suppressed = suppressed
    if suppressed and log_warnings:
        log.warning("%s: %d more skipped records not shown", p, suppressed)
    stats.loaded = len(kept)
    return LoadResult(list(kept.values()), stats)


def _apply_caps(problem: Problem, max_public: int | None, max_hidden: int | None, stats: LoadStats) -> Problem:
    changes: dict[str, Any] = {}
    if max_public is not None and len(problem.public_tests) > max_public:
        changes["public_tests"] = problem.public_tests[:max_public]
        stats.public_truncated += 1
    if max_hidden is not None and len(problem.hidden_tests) > max_hidden:
        changes["hidden_tests"] = problem.hidden_tests[:max_hidden]
        stats.hidden_truncated += 1
    return dataclasses.replace(problem, **changes) if changes else problem


def _check_readable(p: Path) -> None:
    if str(p) == "-" and not p.exists():  # JOBS take "-"; "problem file not found" would puzzle
        raise ProblemFileError(p, "problems are read from a file, not from stdin ('-' is for the JOBS file): "
                                  "write them to a file and pass its path")
    if not p.exists():
        raise ProblemFileNotFoundError(p)
    if p.is_dir():
        raise ProblemFileError(p, "is a directory, expected a problem file (JSONL, JSONL.gz, parquet, Arrow)")
    try:
        with p.open("rb"):
            pass
    except OSError as e:
        raise ProblemFileError(p, f"cannot be read: {e.strerror or e}") from None


def _iter_jsonl(p: Path, *, gz: bool) -> Iterator[tuple[int, Any]]:
    try:
        raw: IO[bytes] = gzip.GzipFile(p, "rb") if gz else p.open("rb")  # type: ignore[assignment]
    except OSError as e:
        raise ProblemFileError(p, f"cannot be read: {e}") from None
    with raw:
        lineno = 0
        try:
            for line in raw:
                lineno += 1
                if not line.strip():
                    continue
                try:  # UTF-8 as the jobs files (cpfleet.jobs.files): json.loads would guess UTF-16/32 from bytes
                    text = line.decode("utf-8").removeprefix("\ufeff") if lineno == 1 else line.decode("utf-8")
                except UnicodeDecodeError as e:
                    yield lineno, ProblemFormatError(f"not UTF-8 text: {e}")
                    continue
                try:
                    rec = json.loads(text)
                except (ValueError, RecursionError) as e:  # nested past the decoder's depth
                    yield lineno, ProblemFormatError(f"invalid JSON: {e}")
                    continue
                if not isinstance(rec, dict):
                    yield lineno, ProblemFormatError(f"expected a JSON object, got {type(rec).__name__}")
                    continue
                yield lineno, rec
        except (OSError, EOFError, zlib.error) as e:  # truncated or corrupt gzip stream (zlib.error: its data)
            raise ProblemFileError(p, f"read failed after line {lineno}: {e}") from None


def _iter_parquet(p: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(p)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError for corrupt files
        raise ProblemFileError(p, f"not a readable parquet file: {e}") from None
    n = 0
    for batch in pf.iter_batches(batch_size=256):
        for rec in batch.to_pylist():
            n += 1
            yield n, _columnar_record(rec)


def _iter_arrow(p: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow as pa

    source = pa.memory_map(str(p), "r")
    try:
        try:
            reader: Any = pa.ipc.open_file(source)
            batches: Iterator[Any] = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:
            source.seek(0)
            try:
                reader = pa.ipc.open_stream(source)
            except pa.ArrowInvalid as e:
                raise ProblemFileError(p, f"not a readable Arrow IPC file: {e}") from None
            batches = iter(reader)
        n = 0
        for batch in batches:
            for rec in batch.to_pylist():
                n += 1
                yield n, _columnar_record(rec)
    finally:
        source.close()


def _columnar_record(rec: dict[str, Any]) -> dict[str, Any]:
    """Undo the struct unification of columnar formats: a column of objects is the union of
    every row's keys, so ``{"type": "tokens"}`` comes back with ``abs: None, rel: None``, a
    checker program's ``files`` with every other row's paths set to None, and
    ``time_limit_multipliers`` with every other row's languages set to None. Those keys are
    absent in the row's own record: dropped (at every depth of the mapping fields), so the
    problem loads as it does from JSONL, with the same content version, instead of being refused
    for a None source or factor it never had."""
    for key in ("checker", "time_limit_multipliers"):
        value = rec.get(key)
        if isinstance(value, dict):
            rec[key] = _without_nulls(value)
    return rec


def _without_nulls(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` without its None entries, in it and in the mappings it holds."""
    return {k: _without_nulls(v) if isinstance(v, dict) else v for k, v in value.items() if v is not None}
