"""A Kattis test file that is not UTF-8 skips its package, naming the file: a record holds tests
as text, and U+FFFD in place of the jury's bytes would hand the program another input and
compare its output with an answer no program prints."""

from __future__ import annotations

import json
from pathlib import Path

from cpfleet.datasets.prepare import PrepareOptions, prepare


def test_a_test_file_that_is_not_utf8_skips_its_package_naming_the_file(tmp_path: Path) -> None:
    good, bad = tmp_path / "c" / "good", tmp_path / "c" / "latin1"
    for pkg in (good, bad):
        (pkg / "data" / "secret").mkdir(parents=True)
        (pkg / "problem.yaml").write_text("name: p\n")
        (pkg / "data" / "secret" / "1.in").write_bytes("Åsa\n".encode())
    (good / "data" / "secret" / "1.ans").write_bytes("Åsa\n".encode())
    (bad / "data" / "secret" / "1.ans").write_bytes("Åsa\n".encode("latin-1"))
    out = tmp_path / "out.jsonl"
    summary = prepare(str(tmp_path / "c"), out, PrepareOptions(min_public=0), progress=False)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["c/good"]
    assert records[0]["hidden_tests"] == [{"input": "Åsa\n", "output": "Åsa\n"}]
    [reason] = summary.skipped
    assert "1.ans: not UTF-8" in reason
