"""The JOBS files that ``cpfleet judge`` and ``cpfleet submit`` read. One reader, one set of
rules for both commands, and the same rule as for problem files (``cpfleet.datasets.loading``): a bad
line (invalid JSON, a field of the wrong type, an id holding a lone UTF-16 surrogate, a completion
over the size limit) is skipped, warned about (the first few, with their line number and job id)
and counted, so a long file with a handful of bad lines is still judged; ``strict=True`` (``--strict``) makes the first bad
line an error instead. A file that cannot be read at all is always an error."""

from __future__ import annotations

import gzip
import io
import json
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

from cpfleet.core import protocol
from cpfleet.core.errors import InputFileError
from cpfleet.core.languages import LANGUAGES

DEFAULT_MAX_WARNINGS = 5
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(slots=True)
class JobsRead:
    """The usable jobs of a file in file order, plus what was skipped and why."""

    jobs: list[dict[str, Any]]
    path: str
    records: int = 0  # non-blank lines looked at
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)  # the first few skipped lines, each explained
    warnings_suppressed: int = 0  # skipped lines beyond those: counted, not shown

    def summary(self) -> str:
        return f"{len(self.jobs)} jobs read from {self.records} lines, {self.skipped} skipped"


def _open_bytes(path: str) -> tuple[BinaryIO, BinaryIO]:
    """(the lines' byte stream, the stream under it) for a path or ``-`` (stdin): decompressed
    when it is gzip, known by its first bytes as problem files are (``cpfleet.datasets.loading``),
    so a gzipped file under any name, or piped in, is read too. Closing the first leaves the
    second open: the caller closes a file's, never stdin. Lines are decoded one by one, so one
    line that is not UTF-8 is that line's fault, not the file's."""
    raw = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        magic = raw.peek(len(GZIP_MAGIC))[: len(GZIP_MAGIC)] if isinstance(raw, io.BufferedReader) else b""
    except OSError:
        if raw is not sys.stdin.buffer:
            raw.close()
        raise
    if magic == GZIP_MAGIC:
        return cast(BinaryIO, gzip.GzipFile(fileobj=raw, mode="rb")), raw
    return raw, raw


def read_records(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON, or the InputFileError that makes the line unusable) for each
    non-blank line; raises InputFileError only when the file itself cannot be read."""
    name = str(path)
    try:
        f, source = _open_bytes(name)
    except OSError as e:
        raise InputFileError(f"{name}: cannot read: {e}") from None
    try:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield lineno, InputFileError(f"not UTF-8 text: {e}")
                continue
            if lineno == 1:
                line = line.removeprefix("\ufeff")  # an editor's byte-order mark
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except (json.JSONDecodeError, RecursionError) as e:  # nested past the decoder's depth
                yield lineno, InputFileError(f"invalid JSON: {e}")
    except (OSError, EOFError, zlib.error) as e:  # zlib.error: gzip whose compressed data is corrupt
        raise InputFileError(f"{name}: cannot read: {e}") from None
    finally:
        for stream in {f, source} - {sys.stdin.buffer}:  # a GzipFile's close leaves its source open
            stream.close()


def parse_job(record: Any, index: int) -> dict[str, Any]:
    """One job line's record as ``{problem_id, completion, job_id, language?}``; raises
    InputFileError saying what is wrong (``index``: the job's 0-based position, its default id)."""
    if isinstance(record, InputFileError):
        raise record
    if not isinstance(record, dict):
        raise InputFileError("a job must be an object")
    job_id = record.get("job_id")
    if job_id is not None and not isinstance(job_id, str | int):
        raise InputFileError("'job_id' must be a string or an integer")
    shown_id = job_id if job_id is not None else index
    if "problem_id" not in record:  # a job with inline "tests", as FleetClient and /v1/judge take them
        raise InputFileError(f"job {shown_id!r}: no 'problem_id' (a JOBS line names a problem of the PROBLEMS file "
                             f"or the store; inline tests are for FleetClient and POST /v1/judge)")
    if not isinstance(record.get("problem_id"), str):
        raise InputFileError(f"job {shown_id!r}: 'problem_id' must be a string")
    for name in ("job_id", "problem_id"):
        # a lone surrogate (JSON's "\ud800" escape): no result naming it can be written as UTF-8,
        # and the fleet's client refuses it (JobFormatError)
        if isinstance(record.get(name), str) and not protocol.encodes_as_utf8(record[name]):
            raise InputFileError(f"job {shown_id!r}: {name!r} is not Unicode text: it holds a lone surrogate")
    completion = record.get("completion")
    if not isinstance(completion, str):
        raise InputFileError(f"job {shown_id!r}: 'completion' must be a string")
    too_large = protocol.completion_size_error(shown_id, len(completion.encode("utf-8", "surrogatepass")))
    if too_large is not None:
        raise InputFileError(too_large)
    language = record.get("language")
    if language is not None and not isinstance(language, str):
        raise InputFileError(f"job {shown_id!r}: 'language' must be a string")
    if language is not None and language not in LANGUAGES:  # the caller's typo, not the fleet's failure
        raise InputFileError(f"job {shown_id!r}: unknown language {language!r}; known: {', '.join(LANGUAGES)}")
    job: dict[str, Any] = {"problem_id": record["problem_id"], "completion": completion, "job_id": job_id}
    if language is not None:
        job["language"] = language
    return job


def read_jobs(path: str | Path, *, strict: bool = False, max_warnings: int = DEFAULT_MAX_WARNINGS) -> JobsRead:
    """``{problem_id, completion, job_id?, language?}`` per line; job_id may be a string or an
    integer and defaults to the job's 0-based position among the lines read (skipped ones
    included, so an id never depends on which other lines were bad)."""
    out = JobsRead([], str(path))
    for lineno, record in read_records(path):
        index = out.records
        out.records += 1
        try:
            job = parse_job(record, index)
        except InputFileError as e:
            if strict:
                raise InputFileError(f"{path}:{lineno}: {e} (--strict: any bad job line is an error)") from None
            out.skipped += 1
            if len(out.warnings) < max_warnings:
                out.warnings.append(f"{path}:{lineno}: skipped job line: {e}")
            else:
                out.warnings_suppressed += 1
            continue
        if job["job_id"] is None:
            job["job_id"] = index
        out.jobs.append(job)
    return out


def print_skipped(read: JobsRead, command: str) -> None:
    """The skipped lines' warnings and count on stderr, as ``cpfleet load`` prints a problem file's."""
    for warning in read.warnings:
        print(f"cpfleet {command}: warning: {warning}", file=sys.stderr)
    if read.warnings_suppressed:
        print(f"cpfleet {command}: {read.warnings_suppressed} more skipped job lines not shown", file=sys.stderr)
    if read.skipped:
        print(f"cpfleet {command}: jobs: {read.summary()}", file=sys.stderr)


def print_no_jobs(read: JobsRead, path: str | Path, command: str, problems_hint: str) -> None:
    """Why a jobs file gave no job, on stderr: nothing to do is a mistake, as a problem file that
    loads no problem is; ``problems_hint`` is what to do instead when the file holds problems."""
    print(f"cpfleet {command}: no usable job in {path}: {read.summary()}", file=sys.stderr)
    if looks_like(path) == "problem":
        print(f"cpfleet {command}: {path} holds problems, not jobs: {problems_hint}", file=sys.stderr)
    elif (hint := json_document_hint(path)) is not None:
        print(f"cpfleet {command}: {hint}", file=sys.stderr)


def json_document_hint(path: str | Path) -> str | None:
    """What to do when the file is one JSON document (an array of records, or one object spread
    over lines) instead of JSONL: each of its lines is then "invalid JSON", which does not tell a
    user that the whole file has the wrong shape. None when it does not look so (or for stdin,
    which cannot be read twice)."""
    if str(path) == "-":
        return None
    try:
        f, source = _open_bytes(str(path))
    except OSError:
        return None
    try:
        head = f.read(4096)
    except (OSError, EOFError, zlib.error):
        return None
    finally:
        for stream in {f, source}:
            stream.close()
    first = next((line.strip() for line in head.splitlines() if line.strip()), b"").removeprefix(b"\xef\xbb\xbf")
    if first.startswith(b"[") or first == b"{":
        return (f"{path} looks like one JSON document (an array, or an object over several lines), not JSONL: "
                f"the file must hold one JSON object per line (jq -c '.[]' turns an array into that)")
    return None


class Tally:
    """What ``cpfleet judge`` and ``cpfleet submit`` count of the results they print, and their
    one summary line. Infrastructure errors are counted by message, so the summary names the
    commonest: "INTERNAL 40" alone does not tell a user that Java is missing on the host."""

    def __init__(self) -> None:
        self.verdicts: Counter[str] = Counter()
        self.rewards: list[float] = []
        self.infra_messages: Counter[str] = Counter()

    def add(self, result: Any) -> None:
        self.verdicts[str(result.verdict)] += 1
        if result.reward is None:
            self.infra_messages[str(result.infra_message)[:300]] += 1
        else:
            self.rewards.append(result.reward)

    @property
    def done(self) -> int:
        return sum(self.verdicts.values())

    def summary(self) -> str:
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else 0.0
        counts = ", ".join(f"{k} {v}" for k, v in self.verdicts.most_common())
        infra = sum(self.infra_messages.values())
        return f"mean reward {mean:.3f} over {len(self.rewards)}, infrastructure errors {infra}" + (f"; {counts}" if counts else "")

    @property
    def judged_none(self) -> bool:
        """Every job came back without a reward (an infrastructure error each, or a problem the
        store does not hold): the command judged nothing, and says so in its exit status."""
        return self.done > 0 and not self.rewards

    def infra_lines(self, command: str, shown: int = 3) -> list[str]:
        """The commonest infrastructure errors, one line each with how many jobs had it."""
        out = [f"cpfleet {command}: infrastructure error x{n}: {message}" for message, n in self.infra_messages.most_common(shown)]
        if len(self.infra_messages) > shown:
            out.append(f"cpfleet {command}: ... and {len(self.infra_messages) - shown} other infrastructure errors (see infra_message)")
        if self.judged_none:
            out.append(f"cpfleet {command}: no job got a reward: exit status 3 (the results above say why)")
        return out


def looks_like(path: str | Path) -> str | None:
    """``"job"`` or ``"problem"`` when the file's first record has that kind's fields and not
    the other's; None otherwise (or for stdin, which cannot be read twice). For the hint when a
    command got its two files the wrong way round."""
    if str(path) == "-":
        return None
    try:
        first = next((rec for _, rec in read_records(path)), None)
    except InputFileError:
        return None
    if not isinstance(first, dict):
        return None
    if "problem_id" in first and "completion" in first and "id" not in first:
        return "job"
    if "id" in first and ("hidden_tests" in first or "public_tests" in first) and "completion" not in first:
        return "problem"
    return None
