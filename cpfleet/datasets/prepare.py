"""``cpfleet prepare``: an RL code dataset -> problem JSONL in the shared schema.

Datasets (``--format``, told from the columns when absent): ``code_contests``, ``taco``,
``apps``, ``livecodebench`` (``code_generation_lite``), ``deepcoder`` (configs
``primeintellect``, ``taco``, ``lcbv5``, ``codeforces``), ``primeintellect``
(``verifiable-coding-problems``), ``codeforces`` (open-r1) and ``kattis`` (a folder of problem
packages). A hub name goes to ``datasets.load_dataset`` (``--config``, ``--data-files``); a
local file or folder (parquet, JSON, JSONL, Arrow) in the same schema goes through the packaged
``parquet`` / ``json`` / ``arrow`` builders, so tests and offline machines run the very same
conversion code as a hub download. A folder holding ``problem.yaml`` packages is read as Kattis.

Per problem (output: the project's problem JSONL, what ``cpfleet.datasets.loading`` reads):

- each format's conversion is its own module in cpfleet.datasets.formats (code_contests, taco
  and apps, livecodebench, deepcoder, primeintellect, codeforces, kattis), which says what it
  keeps; test shapes are normalised by cpfleet.core.testshapes, the code inline problems use
  too. Function-call problems carry ``fn_name`` (tests: JSON text of the argument list / the
  plain return value) and ``languages`` Python.
- ``--with-solutions``: code_contests keeps language 3 (Python 3) solutions as
  ``correct_solutions`` / ``incorrect_solutions``; Python 2 (language 1) and other languages
  are counted and dropped. TACO/APPS/DeepCoder solutions (Python) and PrimeIntellect Python
  gold answers become ``correct_solutions``; Kattis submissions become ``submissions`` (every
  language, with the expected verdict) and Python 3 ``correct_``/``incorrect_solutions``.

Every record is checked against the shared schema (cpfleet.core.records) and, where this
build registers its checker type, by ``Problem.from_dict``. Filters: ``--min-public N``,
``--difficulty LO:HI`` (inclusive, either side optional; TACO and APPS names map to ranks, see
DIFFICULTY_RANKS), ``--max-samples`` (stop after N kept), ``--max-hidden N`` (a problem it would
leave only public tests of, whose answers are shown, is skipped). A summary (read,
kept, skipped per reason with the first rows skipped for it, notes, solution counts) goes to
stderr at the end, with a progress bar while it works.

Over 500 lines: the command's driver (hub and local datasets, the row and folder loops, the
filters, the atomic write) and its reporting; each format is its own module, registered in
cpfleet.datasets.formats.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cpfleet.argtypes import memory_limit_mb, nonnegative_int, output_file, time_limit_seconds
from cpfleet.core.errors import DatasetUnavailableError, PrepareError
from cpfleet.core.problem import DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIME_LIMIT_S, cap_keeps_only_shown
from cpfleet.core.records import loader_check, record_errors
from cpfleet.datasets import formats
from cpfleet.datasets.formats import PrepareOptions

# TACO and APPS give difficulty as names; ranks make --difficulty LO:HI work for them too.
DIFFICULTY_RANKS: dict[str, int] = {
    "UNKNOWN_DIFFICULTY": 0,
    "EASY": 1,
    "MEDIUM": 2,
    "MEDIUM_HARD": 3,
    "HARD": 4,
    "VERY_HARD": 5,
    "introductory": 1,
    "interview": 2,
    "competition": 3,
}
MAX_EXAMPLES = 3  # rows named per skip reason in the log (the rest are only counted)
LOCAL_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".arrow": "arrow"}


@dataclass(slots=True)
class PrepareSummary:
    dataset: str = ""
    format: str = ""
    read: int = 0
    kept: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    solutions: Counter[str] = field(default_factory=Counter)
    hidden_capped: int = 0  # problems whose hidden tests were cut by --max-hidden
    notes: Counter[str] = field(default_factory=Counter)  # per-problem remarks of kept problems
    unchecked: Counter[str] = field(default_factory=Counter)  # checker types this build cannot build yet
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> first few rows skipped for it

    def lines(self) -> list[str]:
        out = [f"prepare {self.dataset} ({self.format}): read {self.read}, kept {self.kept}, "
               f"skipped {sum(self.skipped.values())}"]
        for reason, n in self.skipped.most_common():
            out.append(f"  skipped {n}: {reason}")
        if self.hidden_capped:
            out.append(f"  hidden tests capped by --max-hidden in {self.hidden_capped} problems")
        for kind, n in sorted(self.solutions.items()):
            out.append(f"  solutions {kind}: {n}")
        for note, n in self.notes.most_common():
            out.append(f"  note {n}: {note}")
        for kind, n in sorted(self.unchecked.items()):
            out.append(f"  {n} problems with checker {kind!r}: written after the shared-schema check; "
                       "this build's loader cannot build that checker (type or parameters unknown to it)")
        return out

    def skip(self, reason: str, row: str) -> None:
        """Count a skipped row; remember the first MAX_EXAMPLES rows per reason for the log."""
        self.skipped[reason] += 1
        seen = self.examples.setdefault(reason, [])
        if len(seen) < MAX_EXAMPLES:
            seen.append(row)


# --- opening the dataset -----------------------------------------------------------------------


# A file given the way `judge` and `load` take theirs (positional) is what --dataset is for.
UNRECOGNIZED_HINT = "; the dataset to convert is --dataset NAME_OR_PATH (a hub name, or a local file or folder)"


def open_dataset(dataset: str, split: str, *, streaming: bool = False, cache_dir: str | None = None,
                 config: str | None = None, data_files: tuple[str, ...] = ()) -> Any:
    """A ``datasets`` Dataset (or IterableDataset): from the hub (``config`` and ``data_files``
    select within the repository), or from local files in its schema. A Hub that cannot be
    reached is found by a quick probe (``cpfleet.datasets.hub``): the dataset is then opened
    from the local cache in offline mode, or refused at once naming the cause, never after a
    minute of retries."""
    path = Path(dataset)
    if path.exists() or dataset.startswith((".", "/")) or dataset.endswith(tuple(LOCAL_BUILDERS)):
        return _open(dataset, split, streaming, cache_dir, config, data_files)
    from cpfleet.datasets import hub

    why = None if hub.offline_requested() else hub.unreachable()
    if why is None:
        return _open(dataset, split, streaming, cache_dir, config, data_files)
    try:
        with hub.offline_mode():  # a dataset in the local cache still opens
            return _open(dataset, split, streaming, cache_dir, config, data_files)
    except PrepareError:
        raise
    except OSError as e:  # not in the cache: the Hub libraries' ConnectionError (offline) or FileNotFoundError
        # (anything else, a cached file that does not parse, is the data's own error, the caller's to name)
        raise DatasetUnavailableError(
            f"cannot load {dataset!r}: the Hugging Face Hub cannot be reached ({why}) and the dataset is not in the "
            f"local cache ({_first_line(str(e))}); without network to the Hub, download it elsewhere "
            f"(huggingface-cli download {dataset} --repo-type dataset --local-dir DIR), copy DIR here and pass "
            f"--dataset DIR"
        ) from e


def _open(dataset: str, split: str, streaming: bool, cache_dir: str | None, config: str | None,
          data_files: tuple[str, ...]) -> Any:
    import datasets

    path = Path(dataset)
    if path.exists():
        builder, files = _local_files(path, split)
        return datasets.load_dataset(
            builder, data_files={split: files}, split=split, streaming=streaming, cache_dir=cache_dir
        )
    if dataset.startswith((".", "/")) or dataset.endswith(tuple(LOCAL_BUILDERS)):
        raise PrepareError(f"{dataset}: no such file or folder")
    if data_files:
        here = [f for f in data_files if Path(f).exists()]
        if here:  # the user meant a file of theirs: the hub would retry it for a minute, then fail
            raise PrepareError(
                f"--data-files {here[0]} is a file here, but --data-files names files inside the hub dataset "
                f"{dataset!r}; to convert a local file pass it as --dataset {here[0]}"
            )
        # named files of a hub repository: fetched one by one and read with the packaged
        # builders, which also works for repositories that still carry a loading script
        # (livecodebench/code_generation_lite), refused by datasets >= 4 as a whole
        from huggingface_hub import hf_hub_download

        builders = {_builder_for(Path(f)) for f in data_files}
        if None in builders or len(builders) != 1:
            raise PrepareError(f"--data-files must be of one kind (parquet, json, jsonl, arrow), got {list(data_files)}")
        local = [hf_hub_download(repo_id=dataset, filename=f, repo_type="dataset") for f in data_files]
        return datasets.load_dataset(
            str(builders.pop()), data_files={split: local}, split=split, streaming=streaming, cache_dir=cache_dir
        )
    return datasets.load_dataset(dataset, config, split=split, streaming=streaming, cache_dir=cache_dir)


def _builder_for(p: Path) -> str | None:
    name = p.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return LOCAL_BUILDERS.get(Path(name).suffix)


def _local_files(path: Path, split: str) -> tuple[str, list[str]]:
    if path.is_file():
        builder = _builder_for(path)
        if builder is None:
            raise PrepareError(f"{path}: unsupported file type (parquet, json, jsonl[.gz], arrow)")
        if path.stat().st_size == 0:
            raise PrepareError(f"{path}: empty file")
        _check_parquet(path)
        return builder, [str(path)]
    files = sorted(f for f in path.rglob("*") if f.is_file() and _builder_for(f))
    if not files:
        raise PrepareError(f"{path}: no parquet / json / jsonl / arrow files in this folder")
    for f in files:
        _check_parquet(f)
    of_split = [f for f in files if f.name.startswith(split) or f.parent.name == split]
    files = of_split or files
    builders = {_builder_for(f) for f in files}
    if len(builders) > 1:
        raise PrepareError(f"{path}: mixed file types {sorted(b or '' for b in builders)}; point at one kind")
    return str(builders.pop()), [str(f) for f in files]


def _check_parquet(path: Path) -> None:
    """A local parquet file whose footer cannot be read is the caller's file's fault, named in
    one line as ``cpfleet judge`` names it (cpfleet.datasets.loading), before ``datasets`` logs
    its own lines about it and fails with an error that reads as a dataset it could not fetch."""
    if _builder_for(path) != "parquet":
        return
    import pyarrow.parquet as pq

    try:
        pq.read_schema(path)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError for a corrupt or foreign file
        raise PrepareError(f"{path}: not a readable parquet file: {_first_line(str(e))}") from None


def detect_format(columns: Iterable[str]) -> str:
    """The dataset format from its column names (each format's ``detect``, cpfleet.datasets.formats);
    PrepareError when they do not tell."""
    cols = set(columns)
    found = formats.detect_columns(cols)
    if found is not None:
        return found
    if {"id", "public_tests", "hidden_tests"} <= cols:  # cpfleet's own problem format: no format reads it
        raise PrepareError("this is already cpfleet's problem format (id, public_tests, hidden_tests): nothing to "
                           "convert; use the file as it is (cpfleet load, judge, validate)")
    if {"problem_id", "completion"} <= cols and "id" not in cols:  # a JOBS file: --format would not help
        raise PrepareError(f"the columns {sorted(cols)} are a JOBS file's ({{problem_id, completion}}), not a dataset's: "
                           "jobs are judged by cpfleet judge PROBLEMS JOBS or cpfleet submit JOBS, not prepared")
    raise PrepareError(f"cannot tell the dataset format from its columns {sorted(cols)}: pass --format")


# --- per-row conversion ------------------------------------------------------------------------


def _difficulty_rank(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if value.strip().lstrip("-").isdigit():
            return int(value)
        return DIFFICULTY_RANKS.get(value.strip(), DIFFICULTY_RANKS.get(value.strip().upper()))
    return None


HIDDEN_CAP_SHOWN_ONLY = "--max-hidden keeps only public tests (their answers are shown: the reward would pay for printing them)"


def _filter(rec: dict[str, Any], opts: PrepareOptions, summary: PrepareSummary) -> str | None:
    if opts.difficulty is not None:
        lo, hi = opts.difficulty
        rank = _difficulty_rank(rec.get("difficulty"))
        if rank is None or (lo is not None and rank < lo) or (hi is not None and rank > hi):
            return "difficulty outside --difficulty"
    if not rec["public_tests"] and opts.min_public > 0:
        return "no public tests"
    if len(rec["public_tests"]) < opts.min_public:
        return f"fewer than {opts.min_public} public tests (--min-public)"
    if not rec["hidden_tests"]:
        return "no hidden tests"
    if opts.max_hidden is not None and len(rec["hidden_tests"]) > opts.max_hidden:
        public, hidden = ([(t.get("input"), t.get("output")) for t in rec[key]] for key in ("public_tests", "hidden_tests"))
        if cap_keeps_only_shown(public, hidden, opts.max_hidden):
            return HIDDEN_CAP_SHOWN_ONLY
        rec["hidden_tests"] = rec["hidden_tests"][: opts.max_hidden]
        summary.hidden_capped += 1
    if not rec["id"]:
        return "no id (empty name)"
    return None


def convert_row(row: Mapping[str, Any], index: int, fmt: str, opts: PrepareOptions,
                counts: Counter[str]) -> dict[str, Any] | str:
    """One dataset row in format ``fmt`` -> a record, or the reason it is skipped."""
    declared = formats.get(fmt)
    if declared is None or declared.convert is None:
        raise PrepareError(f"format {fmt!r} is not read row by row")
    return declared.convert(row, index, opts, counts)


def fill_limits(rec: dict[str, Any] | str, declared: formats.DatasetFormat, opts: PrepareOptions,
                counts: Counter[str]) -> None:
    """Set the limits ``rec`` is judged under: ``--time-limit`` / ``--memory-limit`` for every
    problem; else the row's own; else, for the time limit, what the dataset's own grader gives
    (``DatasetFormat.harness_time_limit_s``); else null, the project's defaults. A limit set here
    names its origin in ``time_limit_source`` / ``memory_limit_source``."""
    if isinstance(rec, str):
        return
    if opts.time_limit_s is not None:
        rec["time_limit_s"] = opts.time_limit_s
        rec["time_limit_source"] = "--time-limit"
    elif rec.get("time_limit_s") is None and declared.harness_time_limit_s is not None:
        rec["time_limit_s"] = declared.harness_time_limit_s
        rec["time_limit_source"] = f"{declared.harness} ({declared.harness_time_limit_s:g} s per test)"
        counts[f"no time limit stated: {declared.harness_time_limit_s:g} s per test, as {declared.harness} gives"] += 1
    if opts.memory_limit_mb is not None:
        rec["memory_limit_mb"] = opts.memory_limit_mb
        rec["memory_limit_source"] = "--memory-limit"


def _row_name(row: Mapping[str, Any], index: int) -> str:
    for key in ("id", "question_id", "problem_id", "name", "in_source_id"):
        value = row.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return f"row {index} ({key} {str(value)[:60]})"
    return f"row {index}"


def admit(rec: dict[str, Any] | str, opts: PrepareOptions, summary: PrepareSummary,
          seen: set[str]) -> str | None:
    """Filter and validate one converted record; the skip reason, or None to keep it.

    Every record must meet the shared schema (:func:`record_errors`); when this build's loader
    registers the record's checker type, ``Problem.from_dict`` must accept it too. A record whose
    checker type the loader does not know yet is written and counted in ``summary.unchecked``."""
    if isinstance(rec, str):
        return rec
    reason = _filter(rec, opts, summary)
    if reason is not None:
        return reason
    if rec["id"] in seen:
        return "duplicate id"
    errors = record_errors(rec)
    if errors:
        return f"invalid problem ({errors[0]})"
    error, checked = loader_check(rec)
    if error is not None:
        return f"invalid problem ({error})"
    if not checked:
        summary.unchecked[str((rec.get("checker") or {}).get("type"))] += 1
    return None


def convert_rows(rows: Iterable[Mapping[str, Any]], fmt: str, opts: PrepareOptions,
                 summary: PrepareSummary) -> Iterator[dict[str, Any]]:
    """Yield converted, filtered, validated records; every row lands in ``summary``."""
    declared = formats.get(fmt)
    if declared is None or declared.convert is None:
        rows_formats = [n for n, f in formats.formats().items() if f.convert is not None]
        raise PrepareError(f"unknown format {fmt!r} for dataset rows (known: {', '.join(rows_formats)})")
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if opts.max_samples is not None and summary.kept >= opts.max_samples:
            break
        summary.read += 1
        counts: Counter[str] = Counter()
        try:
            rec = convert_row(row, index, fmt, opts, counts)
        except RecursionError:  # hostile nesting in a JSON or pickled column
            rec = "tests nested too deeply"
        fill_limits(rec, declared, opts, counts)
        kept = _keep(rec, _row_name(row, index), opts, summary, seen, counts)
        if kept is not None:
            yield kept


def _keep(rec: dict[str, Any] | str, name: str, opts: PrepareOptions, summary: PrepareSummary,
          seen: set[str], counts: Counter[str]) -> dict[str, Any] | None:
    """The converted record ``rec`` (of the row or package ``name``) if ``admit`` keeps it, counted
    kept with its conversion's ``counts``; else None, counted skipped with the reason."""
    reason = admit(rec, opts, summary, seen)
    if reason is not None:
        summary.skip(reason, name)
        return None
    assert isinstance(rec, dict)
    seen.add(rec["id"])
    summary.kept += 1
    _merge_counts(summary, counts)
    return rec


def _merge_counts(summary: PrepareSummary, counts: Counter[str]) -> None:
    for key, n in counts.items():
        if key.startswith(("correct ", "incorrect ", "submissions ")):
            summary.solutions[key] += n
        else:
            summary.notes[key] += n


def convert_packages(root: Path, opts: PrepareOptions, summary: PrepareSummary,
                     fmt: str = "kattis") -> Iterator[dict[str, Any]]:
    """A folder in a folder format (default: Kattis problem packages) -> validated records."""
    declared = formats.get(fmt)
    if declared is None or declared.items is None or declared.convert_item is None:
        raise PrepareError(f"format {fmt!r} is not a folder format")
    seen: set[str] = set()
    for pid, item in declared.items(root):
        if opts.max_samples is not None and summary.kept >= opts.max_samples:
            break
        summary.read += 1
        counts: Counter[str] = Counter()
        try:
            rec = declared.convert_item(item, pid, opts, counts)
        except (PrepareError, OSError) as e:
            rec = f"unreadable package ({_first_line(str(e))[:120]})"
        fill_limits(rec, declared, opts, counts)
        kept = _keep(rec, pid, opts, summary, seen, counts)
        if kept is not None:
            yield kept


# --- the whole run -----------------------------------------------------------------------------


def prepare(
    dataset: str,
    out: str | Path,
    opts: PrepareOptions = PrepareOptions(),
    *,
    streaming: bool = False,
    cache_dir: str | None = None,
    progress: bool = True,
) -> PrepareSummary:
    """Convert ``dataset`` (hub name or local path) to problem JSONL at ``out`` ("-": stdout).

    The file is written to a temporary name and renamed at the end, so an interrupted run never
    leaves a half-written problem file behind; ``.gz`` in ``out`` compresses it.
    """
    from tqdm import tqdm

    root = Path(dataset)
    chosen = formats.get(opts.fmt) if opts.fmt else None
    folder_fmt = chosen.name if chosen is not None and chosen.folder else None
    if opts.fmt is None:
        folder_fmt = formats.detect_path(root)
    if folder_fmt is not None:
        declared = formats.get(folder_fmt)
        assert declared is not None
        if declared.detect_path is not None and not declared.detect_path(root):
            raise PrepareError(f"{dataset}: no {declared.summary} here or one or two levels down")
        summary = PrepareSummary(dataset=dataset, format=folder_fmt)
        _write_jsonl(out, convert_packages(root, opts, summary, folder_fmt))
        return summary
    try:
        ds = open_dataset(dataset, opts.split, streaming=streaming, cache_dir=cache_dir,
                          config=opts.config, data_files=opts.data_files)
    except PrepareError:
        raise
    except Exception as e:  # hub unreachable, unknown name, no such split: datasets raises many kinds
        bad = _first_bad_json_line(root)
        if bad is not None:  # datasets says only "An error occurred while generating the dataset"
            raise PrepareError(bad) from e
        if root.exists():  # a local file or folder datasets cannot read: the input's fault, exit 2 as for judge
            raise PrepareError(f"{dataset}: cannot be read as a dataset: {_first_line(str(e))}") from e
        hint = ""
        if not root.exists() and ("reach" in str(e) or isinstance(e, (ConnectionError, OSError))):
            # a machine without the Hub: the line says how to get the data there, not only that it failed
            hint = (f"; without network to the Hub, download it elsewhere (huggingface-cli download {dataset} "
                    f"--repo-type dataset --local-dir DIR), copy DIR here and pass --dataset DIR")
        raise DatasetUnavailableError(f"cannot load {dataset!r} split {opts.split!r}: {_first_line(str(e))}{hint}") from e
    mixed = _mixed_type_columns(ds) if root.exists() else []
    if mixed:
        raise PrepareError(
            f"{dataset}: column {mixed[0]} holds values of different types in different rows (text in one, a "
            f"number or a list in another); the datasets library then reads that column as JSON, turning text "
            f"such as \"12\" into the number 12, so even the well-formed rows would be converted wrongly: make "
            f"each column's values one type across the file")
    columns = _columns(ds)
    fmt = opts.fmt or detect_format(columns)
    declared = formats.get(fmt)
    if declared is not None and declared.options is not None:
        opts = declared.options(opts)
    if declared is not None and declared.drop_columns is not None:
        heavy = declared.drop_columns(opts, columns)
        if heavy:  # most of the dataset's bytes: do not even decode them
            ds = ds.remove_columns(heavy)
    summary = PrepareSummary(dataset=dataset, format=fmt)
    total = len(ds) if hasattr(ds, "__len__") else None
    if total is not None and opts.max_samples is not None:
        total = None  # we stop at max_samples kept, an unknown number of rows
    bar = tqdm(ds, total=total, desc="prepare", unit="problem", file=sys.stderr, disable=not progress)
    records = convert_rows(bar, fmt, opts, summary)
    try:
        _write_jsonl(out, records)
    finally:
        bar.close()
    return summary


def _first_bad_json_line(path: Path) -> str | None:
    """``FILE:LINE: invalid JSON: ...`` for the first unparsable line of a local JSON Lines file,
    None when it is not one or every line parses. Read only after ``datasets`` failed on it."""
    if not path.is_file() or _builder_for(path) != "json":
        return None
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if path.name.endswith(".gz") else path.open(encoding="utf-8")) as f:
            first = f.read(1)
            if first == "[":  # one JSON array, not JSON Lines
                return None
            f.seek(0)
            for lineno, line in enumerate(f, 1):
                if line.strip():
                    try:
                        json.loads(line)
                    except json.JSONDecodeError as e:
                        return f"{path}:{lineno}: invalid JSON: {e}"
    except (OSError, UnicodeDecodeError, EOFError) as e:
        return f"{path}: cannot read: {e}"
    return None


def _mixed_type_columns(ds: Any) -> list[str]:
    """The columns (dotted paths) of a local file that ``datasets`` typed ``Json``: its JSON
    builder gives that type to a column whose rows disagree on the type, and decodes every text
    value of it as JSON ("12" becomes 12, "[1]" a list), so the rows no longer say what the file
    does. Hub datasets declare their own features and are not checked."""
    try:
        from datasets.features import Json
    except ImportError:  # older datasets refuse such a file instead (ArrowInvalid)
        return []
    found: list[str] = []

    def walk(feature: Any, path: str) -> None:
        if isinstance(feature, Json):
            found.append(path)
        elif isinstance(feature, dict):
            for name, sub in feature.items():
                walk(sub, f"{path}.{name}" if path else str(name))
        elif hasattr(feature, "feature"):  # List / Sequence / LargeList of something
            walk(feature.feature, path)

    walk(getattr(ds, "features", None) or {}, "")
    return found


def _columns(ds: Any) -> list[str]:
    names = getattr(ds, "column_names", None)
    if names:
        return list(names)
    features = getattr(ds, "features", None)
    if features:
        return list(features)
    first = next(iter(ds), None)  # a streamed dataset of unknown features: peek at one row
    return list(first or {})


def _write_jsonl(out: str | Path, records: Iterable[dict[str, Any]]) -> None:
    if str(out) == "-":
        for rec in records:
            sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        return
    path = Path(out)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        f: IO[str]
        f = gzip.open(tmp, "wt", encoding="utf-8") if path.name.endswith(".gz") else tmp.open("w", encoding="utf-8")
        with f:
            for rec in records:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --- CLI ---------------------------------------------------------------------------------------


def parse_difficulty(text: str) -> tuple[int | None, int | None]:
    """``LO:HI`` (inclusive; either side may be empty) or a single ``N``."""
    lo_s, sep, hi_s = text.partition(":")
    try:
        if not sep:
            return int(lo_s), int(lo_s)
        lo = int(lo_s) if lo_s.strip() else None
        hi = int(hi_s) if hi_s.strip() else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"--difficulty wants LO:HI integers, got {text!r}") from None
    if lo is not None and hi is not None and lo > hi:
        raise argparse.ArgumentTypeError(f"--difficulty {text!r}: LO is above HI")
    return lo, hi


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="deepmind/code_contests",
                        help="hub name, or a local file/folder (parquet, json, jsonl, arrow) in that schema")
    parser.add_argument("--split", default="test", help="dataset split to convert, e.g. train, valid, test (default: test)")
    parser.add_argument("--out", required=True, type=output_file, help="output problem JSONL ('-': stdout; .gz: compressed); required, no default")
    parser.add_argument("--format", dest="fmt", choices=formats.names(), default=None,
                        help="dataset schema when the columns do not tell (default: detected from the columns "
                             "or the folder): " + formats.help_text())
    parser.add_argument("--max-hidden", type=nonnegative_int, default=None,
                        help="keep at most N hidden tests per problem (default: all)")
    parser.add_argument("--min-public", type=nonnegative_int, default=1, help="skip problems with fewer public tests")
    parser.add_argument("--difficulty", type=parse_difficulty, default=None, metavar="LO:HI",
                        help="keep difficulty in [LO, HI] (either side optional; default: every difficulty)")
    parser.add_argument("--max-samples", type=nonnegative_int, default=None, help="stop after N kept problems (default: no limit)")
    parser.add_argument("--with-solutions", action="store_true",
                        help="keep Python 3 reference / incorrect solutions (for cpfleet validate)")
    parser.add_argument("--max-solutions", type=nonnegative_int, default=None,
                        help="with --with-solutions: keep at most N of each kind per problem (default: all)")
    parser.add_argument("--num-public", type=nonnegative_int, default=1,
                        help="formats without a public/hidden split (TACO, APPS, DeepCoder, PrimeIntellect): "
                             "how many of the tests are shown as public (default 1)")
    parser.add_argument("--config", default=None,
                        help="hub dataset config (DeepCoder: primeintellect, taco, lcbv5, codeforces; "
                             "open-r1/codeforces: default, verifiable, verifiable-prompts)")
    parser.add_argument("--subset", default=None, help="DeepCoder: the config name used in ids (default: --config)")
    parser.add_argument("--data-files", nargs="+", default=(), metavar="FILE",
                        help="hub repository files to load (e.g. LiveCodeBench test6.jsonl)")
    parser.add_argument("--generated-tests", default=None, metavar="DIR",
                        help="open-r1/codeforces: folder with generated_tests/test_cases_XXXX.parquet (default: none, the dataset's own tests only)")
    graders = ", ".join(f"{f.name} {f.harness_time_limit_s:g} s" for f in formats.formats().values()
                        if f.harness_time_limit_s is not None)
    parser.add_argument("--time-limit", type=time_limit_seconds, default=None, metavar="SECONDS",
                        help="every problem's time limit in CPU seconds per test, whatever its row states "
                             "(default: the row's own; a row with none gets what the dataset's grader gives "
                             f"({graders}), else the project's {DEFAULT_TIME_LIMIT_S:g} s)")
    parser.add_argument("--memory-limit", type=memory_limit_mb, default=None, metavar="MB",
                        help="every problem's memory limit in MB, whatever its row states (default: the row's "
                             f"own, else the project's {DEFAULT_MEMORY_LIMIT_MB} MB)")
    parser.add_argument("--streaming", action="store_true", help="stream from the hub instead of downloading")
    parser.add_argument("--cache-dir", default=None, help="datasets cache folder (default: the datasets library's, ~/.cache/huggingface)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    opts = PrepareOptions(
        split=args.split, fmt=args.fmt, max_hidden=args.max_hidden, min_public=args.min_public,
        difficulty=args.difficulty, max_samples=args.max_samples, with_solutions=args.with_solutions,
        max_solutions=args.max_solutions, num_public=args.num_public, config=args.config, subset=args.subset,
        generated_tests=args.generated_tests, data_files=tuple(args.data_files),
        time_limit_s=args.time_limit, memory_limit_mb=args.memory_limit,
    )
    try:
        summary = prepare(args.dataset, args.out, opts, streaming=args.streaming, cache_dir=args.cache_dir,
                          progress=not args.no_progress)
    except DatasetUnavailableError as e:
        print(f"cpfleet prepare: {_first_line(str(e))}", file=sys.stderr)
        return 1
    except PrepareError as e:
        print(f"cpfleet prepare: {e}", file=sys.stderr)
        return 2
    for line in summary.lines():
        print(line, file=sys.stderr)
    for reason, rows in summary.examples.items():
        more = summary.skipped[reason] - len(rows)
        print(f"  first skipped for {reason!r}: {', '.join(rows)}" + (f" (+{more} more)" if more > 0 else ""),
              file=sys.stderr)
    if summary.read and not summary.kept:  # as judge and load refuse a file with no problem in it
        hint = "" if args.fmt is None else f" (is --format {args.fmt} the dataset's schema?)"
        print(f"cpfleet prepare: no problem kept from {summary.read} rows{hint}: see the reasons above", file=sys.stderr)
        return 2
    return 0


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
