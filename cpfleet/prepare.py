"""``cpfleet prepare``: a HuggingFace CP dataset (code_contests, TACO, APPS) -> problem JSONL.

The seed's ``prepare_cp_data.py``, ported and extended. The dataset comes from
``datasets.load_dataset``: a hub name (``deepmind/code_contests``) goes to the hub; a local
file or folder (parquet, JSON, JSONL, Arrow) in the same schema goes through the packaged
``parquet`` / ``json`` / ``arrow`` builders, so tests and offline machines run the very same
conversion code as a hub download.

Per problem (output: the project's problem JSONL, what ``cpfleet.loading`` reads):

- code_contests: ``id`` = the problem ``name``; public = ``public_tests``; hidden =
  ``private_tests`` ++ ``generated_tests`` capped by ``--max-hidden``; time limit from
  ``{seconds, nanos}``, memory from bytes (MiB); checker ``{"type": "code_contests"}`` (the
  official tester's comparison). Problems that read or write named files (``input_file`` /
  ``output_file``) are skipped: the sandbox feeds stdin and reads stdout.
- TACO / APPS: tests from the ``input_output`` JSON (``inputs`` / ``outputs``). They have no
  public/hidden split: public = the first ``--num-public`` tests, hidden = all tests (public
  ones included, so the reward covers every test), capped by ``--max-hidden``. Call-based
  problems (``fn_name``) are counted and skipped: the sandbox judges stdin/stdout programs.
  ``id`` = ``taco/<split>/<row>`` or ``apps/<split>/<problem_id>``.
- ``--with-solutions``: code_contests keeps language 3 (Python 3) solutions as
  ``correct_solutions`` / ``incorrect_solutions``; Python 2 (language 1) and other languages
  are counted and dropped. TACO/APPS solutions (Python) become ``correct_solutions``.

Filters: ``--min-public N``, ``--difficulty LO:HI`` (inclusive, either side optional; TACO and
APPS names map to ranks, see DIFFICULTY_RANKS), ``--max-samples`` (stop after N kept). A summary
(read, kept, skipped per reason) goes to stderr at the end, with a progress bar while it works.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cpfleet.core.errors import DatasetUnavailableError, PrepareError
from cpfleet.core.problem import Problem, ProblemFormatError

FORMATS = ("code_contests", "taco", "apps")
CODE_CONTESTS_CHECKER = {"type": "code_contests"}
# code_contests Language enum
LANG_PYTHON2 = 1
LANG_PYTHON3 = 3
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
LOCAL_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".arrow": "arrow"}
CALL_BASED_REASON = "call-based (fn_name): the sandbox judges stdin/stdout programs only"


@dataclass(frozen=True, slots=True)
class PrepareOptions:
    split: str = "test"
    fmt: str | None = None
    max_hidden: int | None = None
    min_public: int = 1
    difficulty: tuple[int | None, int | None] | None = None
    max_samples: int | None = None
    with_solutions: bool = False
    max_solutions: int | None = None
    num_public: int = 1  # TACO/APPS only


@dataclass(slots=True)
class PrepareSummary:
    dataset: str = ""
    format: str = ""
    read: int = 0
    kept: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    solutions: Counter[str] = field(default_factory=Counter)
    hidden_capped: int = 0  # problems whose hidden tests were cut by --max-hidden

    def lines(self) -> list[str]:
        out = [f"prepare {self.dataset} ({self.format}): read {self.read}, kept {self.kept}, "
               f"skipped {sum(self.skipped.values())}"]
        for reason, n in self.skipped.most_common():
            out.append(f"  skipped {n}: {reason}")
        if self.hidden_capped:
            out.append(f"  hidden tests capped by --max-hidden in {self.hidden_capped} problems")
        for kind, n in sorted(self.solutions.items()):
            out.append(f"  solutions {kind}: {n}")
        return out


# --- opening the dataset -----------------------------------------------------------------------


def open_dataset(dataset: str, split: str, *, streaming: bool = False, cache_dir: str | None = None) -> Any:
    """A ``datasets`` Dataset (or IterableDataset): from the hub, or from local files in its schema."""
    import datasets

    path = Path(dataset)
    if path.exists():
        builder, files = _local_files(path, split)
        return datasets.load_dataset(
            builder, data_files={split: files}, split=split, streaming=streaming, cache_dir=cache_dir
        )
    if dataset.startswith((".", "/")) or dataset.endswith(tuple(LOCAL_BUILDERS)):
        raise PrepareError(f"{dataset}: no such file or folder")
    return datasets.load_dataset(dataset, split=split, streaming=streaming, cache_dir=cache_dir)


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
        return builder, [str(path)]
    files = sorted(f for f in path.rglob("*") if f.is_file() and _builder_for(f))
    if not files:
        raise PrepareError(f"{path}: no parquet / json / jsonl / arrow files in this folder")
    of_split = [f for f in files if f.name.startswith(split) or f.parent.name == split]
    files = of_split or files
    builders = {_builder_for(f) for f in files}
    if len(builders) > 1:
        raise PrepareError(f"{path}: mixed file types {sorted(b or '' for b in builders)}; point at one kind")
    return str(builders.pop()), [str(f) for f in files]


def detect_format(columns: Iterable[str]) -> str:
    """code_contests / taco / apps from the column names; PrepareError when they do not tell."""
    cols = set(columns)
    if {"public_tests", "private_tests"} <= cols or {"public_tests", "generated_tests"} <= cols:
        return "code_contests"
    if "input_output" in cols:
        if "problem_id" in cols and not cols & {"raw_tags", "skill_types", "tags"}:
            return "apps"
        return "taco"
    raise PrepareError(f"cannot tell the dataset format from its columns {sorted(cols)}: pass --format")


# --- per-row conversion ------------------------------------------------------------------------


def _tests(raw: Any) -> list[dict[str, str]]:
    """code_contests ``{"input": [...], "output": [...]}`` -> ``[{"input", "output"}]``."""
    if not raw:
        return []
    inputs, outputs = raw.get("input") or [], raw.get("output") or []
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    return [{"input": i, "output": o} for i, o in zip(inputs, outputs, strict=True)]


def time_limit_seconds(raw: Any) -> float | None:
    """``{"seconds", "nanos"}`` -> seconds; None (project default) when absent or zero."""
    if not isinstance(raw, Mapping):
        return None
    total = float(raw.get("seconds") or 0) + float(raw.get("nanos") or 0) / 1e9
    return total if total > 0 else None


def memory_limit_mb(raw: Any) -> int | None:
    """Bytes -> MiB (rounded); None (project default) when absent or zero."""
    if not isinstance(raw, int | float) or raw <= 0:
        return None
    return max(1, round(raw / (1 << 20)))


def _python3_solutions(raw: Any, kind: str, counts: Counter[str], cap: int | None) -> list[str]:
    if not raw:
        return []
    kept: list[str] = []
    for lang, code in zip(raw.get("language") or [], raw.get("solution") or [], strict=False):
        if lang == LANG_PYTHON3:
            kept.append(code)
        elif lang == LANG_PYTHON2:
            counts[f"{kind} python2 dropped"] += 1
        else:
            counts[f"{kind} other languages dropped"] += 1
    if cap is not None and len(kept) > cap:
        counts[f"{kind} python3 over --max-solutions"] += len(kept) - cap
        kept = kept[:cap]
    counts[f"{kind} python3 kept"] += len(kept)
    return kept


def convert_code_contests(row: Mapping[str, Any], opts: PrepareOptions, counts: Counter[str]) -> dict[str, Any] | str:
    """One code_contests row -> a problem record, or the reason it is skipped.

    ``counts`` receives the solution accounting of this row (merged into the summary only
    when the problem is kept)."""
    if row.get("input_file") or row.get("output_file"):
        return "reads or writes named files (input_file/output_file), not stdin/stdout"
    try:
        public = _tests(row.get("public_tests"))
        hidden = _tests(row.get("private_tests")) + _tests(row.get("generated_tests"))
    except (ValueError, AttributeError, TypeError) as e:
        return f"malformed tests ({e.__class__.__name__})"
    rec: dict[str, Any] = {
        "id": row.get("name") or "",
        "name": row.get("name") or "",
        "description": row.get("description") or "",
        "public_tests": public,
        "hidden_tests": hidden,
        "time_limit_s": time_limit_seconds(row.get("time_limit")),
        "memory_limit_mb": memory_limit_mb(row.get("memory_limit_bytes")),
        "checker": dict(CODE_CONTESTS_CHECKER),
        "difficulty": row.get("difficulty"),
    }
    if opts.with_solutions:
        rec["correct_solutions"] = _python3_solutions(row.get("solutions"), "correct", counts, opts.max_solutions)
        rec["incorrect_solutions"] = _python3_solutions(
            row.get("incorrect_solutions"), "incorrect", counts, opts.max_solutions
        )
    return rec


def _io_text(v: Any) -> str:
    """TACO/APPS inputs/outputs are strings, or lists of lines, or bare numbers."""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(_io_text(x) for x in v) + "\n"
    return json.dumps(v) if isinstance(v, dict | bool) or v is None else str(v)


_SECONDS = re.compile(r"([0-9]*\.?[0-9]+)\s*(?:s\b|sec|second)", re.I)
_MEGABYTES = re.compile(r"([0-9]*\.?[0-9]+)\s*(?:mb\b|mib\b|megabyte)", re.I)


def convert_taco(row: Mapping[str, Any], index: int, opts: PrepareOptions, fmt: str,
                 counts: Counter[str]) -> dict[str, Any] | str:
    """One TACO / APPS row -> a problem record, or the reason it is skipped."""
    raw = row.get("input_output")
    try:
        io = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return "malformed input_output JSON"
    if not isinstance(io, Mapping):
        return "no input_output tests"
    if io.get("fn_name"):
        return CALL_BASED_REASON
    inputs, outputs = io.get("inputs") or [], io.get("outputs") or []
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        return "malformed input_output (inputs/outputs lengths differ)"
    tests = [{"input": _io_text(i), "output": _io_text(o)} for i, o in zip(inputs, outputs, strict=True)]
    if fmt == "apps" and row.get("problem_id") is not None:
        pid = f"apps/{opts.split}/{row['problem_id']}"
    else:
        pid = f"{fmt}/{opts.split}/{index}"
    tl = _SECONDS.search(str(row.get("time_limit") or ""))
    ml = _MEGABYTES.search(str(row.get("memory_limit") or ""))
    rec: dict[str, Any] = {
        "id": pid,
        "name": row.get("name") or row.get("url") or pid,
        "description": row.get("question") or "",
        "public_tests": tests[: opts.num_public],
        "hidden_tests": tests,
        "time_limit_s": float(tl.group(1)) if tl and float(tl.group(1)) > 0 else None,
        "memory_limit_mb": round(float(ml.group(1))) if ml and float(ml.group(1)) >= 16 else None,
        "difficulty": row.get("difficulty"),
    }
    if opts.with_solutions:
        sols = row.get("solutions")
        try:
            parsed = json.loads(sols) if isinstance(sols, str) and sols else (sols or [])
        except ValueError:
            parsed = []
            counts["correct malformed solutions field"] += 1
        kept = [s for s in parsed if isinstance(s, str)]
        if opts.max_solutions is not None and len(kept) > opts.max_solutions:
            counts["correct python3 over --max-solutions"] += len(kept) - opts.max_solutions
            kept = kept[: opts.max_solutions]
        counts["correct python3 kept"] += len(kept)
        rec["correct_solutions"] = kept
    return rec


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


def _filter(rec: dict[str, Any], opts: PrepareOptions, summary: PrepareSummary) -> str | None:
    if opts.difficulty is not None:
        lo, hi = opts.difficulty
        rank = _difficulty_rank(rec.get("difficulty"))
        if rank is None or (lo is not None and rank < lo) or (hi is not None and rank > hi):
            return "difficulty outside --difficulty"
    if not rec["public_tests"]:
        return "no public tests"
    if len(rec["public_tests"]) < opts.min_public:
        return f"fewer than {opts.min_public} public tests (--min-public)"
    if not rec["hidden_tests"]:
        return "no hidden tests"
    if opts.max_hidden is not None and len(rec["hidden_tests"]) > opts.max_hidden:
        rec["hidden_tests"] = rec["hidden_tests"][: opts.max_hidden]
        summary.hidden_capped += 1
    if not rec["id"]:
        return "no id (empty name)"
    return None


def convert_rows(rows: Iterable[Mapping[str, Any]], fmt: str, opts: PrepareOptions,
                 summary: PrepareSummary) -> Iterator[dict[str, Any]]:
    """Yield converted, filtered, validated records; every row lands in ``summary``."""
    if fmt not in FORMATS:
        raise PrepareError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if opts.max_samples is not None and summary.kept >= opts.max_samples:
            break
        summary.read += 1
        counts: Counter[str] = Counter()
        if fmt == "code_contests":
            rec = convert_code_contests(row, opts, counts)
        else:
            rec = convert_taco(row, index, opts, fmt, counts)
        reason = rec if isinstance(rec, str) else _filter(rec, opts, summary)
        if reason is None:
            assert isinstance(rec, dict)
            if rec["id"] in seen:
                reason = "duplicate id"
            else:
                try:
                    Problem.from_dict(rec)  # the loader must accept what we write
                except ProblemFormatError as e:
                    reason = f"invalid problem ({str(e).split(': ', 1)[-1]})"
        if reason is not None:
            summary.skipped[reason] += 1
            continue
        assert isinstance(rec, dict)
        seen.add(rec["id"])
        summary.kept += 1
        summary.solutions.update(counts)
        yield rec


# --- the whole run -----------------------------------------------------------------------------


def prepare(
    dataset: str,
    out: str | Path,
    opts: PrepareOptions = PrepareOptions(),  # frozen: a shared default is safe
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

    try:
        ds = open_dataset(dataset, opts.split, streaming=streaming, cache_dir=cache_dir)
    except PrepareError:
        raise
    except Exception as e:  # hub unreachable, unknown name, no such split: datasets raises many kinds
        raise DatasetUnavailableError(f"cannot load {dataset!r} split {opts.split!r}: {e}") from e
    columns = _columns(ds)
    fmt = opts.fmt or detect_format(columns)
    if fmt == "code_contests" and not opts.with_solutions:
        heavy = [c for c in ("solutions", "incorrect_solutions") if c in columns]
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


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {n}")
    return n


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="deepmind/code_contests",
                        help="hub name, or a local file/folder (parquet, json, jsonl, arrow) in that schema")
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", required=True, help="output problem JSONL ('-': stdout; .gz: compressed)")
    parser.add_argument("--format", dest="fmt", choices=FORMATS, default=None,
                        help="dataset schema when the columns do not tell")
    parser.add_argument("--max-hidden", type=_non_negative, default=None,
                        help="keep at most N hidden tests per problem (default: all)")
    parser.add_argument("--min-public", type=_non_negative, default=1, help="skip problems with fewer public tests")
    parser.add_argument("--difficulty", type=parse_difficulty, default=None, metavar="LO:HI",
                        help="keep difficulty in [LO, HI] (either side optional)")
    parser.add_argument("--max-samples", type=_non_negative, default=None, help="stop after N kept problems")
    parser.add_argument("--with-solutions", action="store_true",
                        help="keep Python 3 reference / incorrect solutions (for cpfleet validate)")
    parser.add_argument("--max-solutions", type=_non_negative, default=None,
                        help="with --with-solutions: keep at most N of each kind per problem")
    parser.add_argument("--num-public", type=_non_negative, default=1,
                        help="TACO/APPS: how many of the tests are shown as public (default 1)")
    parser.add_argument("--streaming", action="store_true", help="stream from the hub instead of downloading")
    parser.add_argument("--cache-dir", default=None, help="datasets cache folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    opts = PrepareOptions(
        split=args.split, fmt=args.fmt, max_hidden=args.max_hidden, min_public=args.min_public,
        difficulty=args.difficulty, max_samples=args.max_samples, with_solutions=args.with_solutions,
        max_solutions=args.max_solutions, num_public=args.num_public,
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
    return 0


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
