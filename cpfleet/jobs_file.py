"""The JOBS files that ``cpfleet judge`` and ``cpfleet submit`` read. One reader, one set of
rules: both commands accept exactly the same JOBS input (their outputs already share
``JobResult.to_dict``). Strict on purpose: a bad line stops the run before it starts.
(Problem files have their own reader, ``cpfleet.loading``, shared by judge, load and validate.)"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from cpfleet.core.errors import InputFileError


def open_text(path: str) -> IO[str]:
    """A text stream for a path, ``-`` (stdin) or a ``.gz`` file."""
    if path == "-":
        return sys.stdin
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_records(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) for each non-blank line."""
    name = str(path)
    try:
        f = open_text(name)
    except OSError as e:
        raise InputFileError(f"{name}: cannot read: {e}") from None
    try:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise InputFileError(f"{name}:{lineno}: invalid JSON: {e}") from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputFileError(f"{name}: cannot read: {e}") from None
    finally:
        if f is not sys.stdin:
            f.close()


def read_jobs(path: str | Path) -> list[dict[str, Any]]:
    """``{problem_id, completion, job_id?, language?}`` per line; job_id may be a string or an integer."""
    jobs: list[dict[str, Any]] = []
    for lineno, record in read_records(path):
        if not isinstance(record, dict):
            raise InputFileError(f"{path}:{lineno}: a job must be an object")
        if not isinstance(record.get("problem_id"), str):
            raise InputFileError(f"{path}:{lineno}: 'problem_id' must be a string")
        if not isinstance(record.get("completion"), str):
            raise InputFileError(f"{path}:{lineno}: 'completion' must be a string")
        job_id = record.get("job_id")
        if job_id is not None and not isinstance(job_id, str | int):
            raise InputFileError(f"{path}:{lineno}: 'job_id' must be a string or an integer")
        language = record.get("language")
        if language is not None and not isinstance(language, str):
            raise InputFileError(f"{path}:{lineno}: 'language' must be a string")
        job: dict[str, Any] = {"problem_id": record["problem_id"], "completion": record["completion"], "job_id": job_id}
        if language is not None:
            job["language"] = language
        jobs.append(job)
    return jobs
