"""Helpers for runner tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cpfleet.sandbox import languages
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult


def run(runner: CodeRunner, source: str, stdin: str | bytes = b"", **limits: object) -> RunResult:
    """Load ``source`` (which must compile) and run it once."""
    err = runner.load(source)
    assert err is None, err
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return runner.run(data, Limits(**limits))  # type: ignore[arg-type]


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s children (of all its threads), from /proc."""
    kids: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids += [int(x) for x in f.read().split()]
    return kids


def built_c_reference(code: str, folder: Path) -> Path:
    """``code`` built by this host's gcc outside the sandbox, as a reference binary a test compares
    the judged program with; the test is skipped where gcc is missing."""
    missing = languages.missing_tools("c")
    if missing:
        pytest.skip(f"gcc not installed here: {missing}")
    (folder / "prog.c").write_text(code)
    subprocess.run([languages.get("c").tools[0], "-O2", "-o", str(folder / "prog"), str(folder / "prog.c")],
                   check=True, timeout=120)
    return folder / "prog"
