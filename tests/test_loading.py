"""The problem loader: basic cases, formats, cap edge cases and duplicate ids."""

from __future__ import annotations

import gzip
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cpfleet.datasets.loading import (
    DuplicateProblemError,
    ProblemFileError,
    ProblemFileNotFoundError,
    load_problems,
)

REPO = Path(__file__).resolve().parents[1]


def problem(pid: str, n_public: int = 2, n_hidden: int = 3, **extra: Any) -> dict[str, Any]:
    return {
        "id": pid,
        "public_tests": [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(n_public)],
        "hidden_tests": [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(100, 100 + n_hidden)],
        **extra,
    }


def write_jsonl(path: Path, records: list[Any]) -> Path:
    with path.open("w") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


def test_malformed_lines_are_skipped_with_bounded_warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lines: list[Any] = []
    for i in range(200):
        lines.append(problem(f"p{i}"))
        if i % 20 == 0:  # ten bad lines of different kinds
            lines.append(["{not json", '"a string"', '{"id": "bad", "public_tests": "x"}', "[1, 2]"][i // 20 % 4])
    path = write_jsonl(tmp_path / "p.jsonl", lines)
    with caplog.at_level(logging.WARNING, logger="cpfleet.datasets.loading"):
        result = load_problems(path, max_warnings=3)
    assert len(result) == 200
    assert result.stats.malformed == 10
    assert len(result.stats.warnings) == 3
    shown = [r.getMessage() for r in caplog.records]
    assert len(shown) == 4  # three warnings + one "N more not shown"
    assert "7 more skipped records" in shown[-1]
    assert ":2:" in shown[0]  # line numbers point at the bad line


def test_blank_lines_are_not_malformed(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(problem("a")) + "\n\n   \n" + json.dumps(problem("b")) + "\n")
    result = load_problems(path)
    assert [p.id for p in result] == ["a", "b"]
    assert result.stats.malformed == 0


def test_problems_the_judging_rule_refuses_for_the_mode_are_skipped(tmp_path: Path) -> None:
    """Full mode (the default, and what the store holds) needs hidden tests; public tests are
    optional (interactive problems often have none). Public mode needs public tests."""
    path = write_jsonl(
        tmp_path / "p.jsonl",
        [problem("ok"), problem("nopub", n_public=0), problem("nohid", n_hidden=0), problem("nothing", 0, 0)],
    )
    result = load_problems(path)
    assert [p.id for p in result] == ["ok", "nopub"]
    assert (result.stats.no_hidden, result.stats.no_public, result.stats.skipped) == (2, 0, 2)
    public = load_problems(path, mode="public")
    assert [p.id for p in public] == ["ok", "nohid"]
    assert (public.stats.no_public, public.stats.no_hidden, public.stats.skipped) == (2, 0, 2)


def test_max_problems_caps_kept_problems(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("skipme", n_hidden=0)] + [problem(f"p{i}") for i in range(10)])
    result = load_problems(path, max_problems=4)
    assert [p.id for p in result] == ["p0", "p1", "p2", "p3"]
    assert result.stats.stopped_at_max_problems
    assert load_problems(path, max_problems=0).problems == []


def test_max_public_tests_caps_public_tests(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a", n_public=5), problem("b", n_public=1)])
    result = load_problems(path, max_public_tests=2)
    by_id = result.by_id()
    assert [t.input for t in by_id["a"].public_tests] == ["0\n", "1\n"]
    assert len(by_id["b"].public_tests) == 1
    assert len(by_id["a"].hidden_tests) == 3
    assert result.stats.public_truncated == 1


def test_max_hidden_tests_caps_hidden_tests(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a", n_hidden=7)])
    (a,) = load_problems(path, max_hidden_tests=4).problems
    assert [t.input for t in a.hidden_tests] == ["100\n", "101\n", "102\n", "103\n"]
    assert len(a.public_tests) == 2


def test_a_hidden_cap_that_would_keep_only_the_shown_tests_skips_the_problem(tmp_path: Path) -> None:
    """Kattis records and TACO-shaped ones reward the shown tests too, listed first among the
    hidden ones: capped to those, the reward was paid for printing answers the feedback shows."""
    shown = [{"input": "1\n", "output": "1\n"}, {"input": "2\n", "output": "4\n"}]
    rec = {"id": "k", "public_tests": shown, "hidden_tests": [*shown, {"input": "3\n", "output": "9\n"}]}
    path = write_jsonl(tmp_path / "p.jsonl", [rec])
    capped = load_problems(path, max_hidden_tests=2)
    assert capped.problems == [] and capped.stats.no_hidden == 1
    (kept,) = load_problems(path, max_hidden_tests=3).problems
    assert len(kept.hidden_tests) == 3
    (public,) = load_problems(path, max_hidden_tests=2, mode="public").problems  # its reward is the public tests'
    assert len(public.hidden_tests) == 2


def test_zero_test_cap_leaves_no_tests_so_every_problem_is_skipped(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a"), problem("b")])
    result = load_problems(path, max_hidden_tests=0)
    assert result.problems == []
    assert result.stats.no_hidden == 2
    assert load_problems(path, max_public_tests=0, mode="public").stats.no_public == 2


@pytest.mark.parametrize("cap", ["max_problems", "max_public_tests", "max_hidden_tests"])
@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_negative_or_non_int_caps_are_rejected(tmp_path: Path, cap: str, value: Any) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a")])
    with pytest.raises(ValueError, match=cap):
        load_problems(path, **{cap: value})


def test_missing_file_is_a_specific_error_with_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(ProblemFileNotFoundError) as info:
        load_problems(missing)
    assert info.value.path == str(missing)
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(ProblemFileError, match="directory"):
        load_problems(tmp_path)


def test_missing_file_on_the_cli_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "cpfleet", "load", str(missing), "--redis", "redis://127.0.0.1:1/0"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"cpfleet load: {missing}: problem file not found"]
    assert "Traceback" not in proc.stderr


def test_duplicate_ids_are_an_error_by_default(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a"), problem("b"), problem("a", n_public=1)])
    with pytest.raises(DuplicateProblemError) as info:
        load_problems(path)
    assert (info.value.problem_id, info.value.first_line, info.value.line) == ("a", 1, 3)


def test_duplicate_ids_first_or_last_keep_one_and_count(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [problem("a"), problem("b"), problem("a", n_public=1)])
    first = load_problems(path, on_duplicate="first")
    last = load_problems(path, on_duplicate="last")
    assert [p.id for p in first] == [p.id for p in last] == ["a", "b"]
    assert len(first.by_id()["a"].public_tests) == 2
    assert len(last.by_id()["a"].public_tests) == 1
    assert first.stats.duplicates == last.stats.duplicates == 1
    with pytest.raises(ValueError, match="on_duplicate"):
        load_problems(path, on_duplicate="merge")  # type: ignore[arg-type]


def test_gzip_parquet_and_arrow_load_the_same_problems(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = [
        # columnar files need the same columns in every row: nulls stand for "absent"
        problem("a", time_limit_s=None, memory_limit_mb=None, checker={"type": "float", "abs": 1e-6}),
        problem("b", time_limit_s=1.5, memory_limit_mb=256, checker={"type": "tokens"}),
    ]
    plain = load_problems(write_jsonl(tmp_path / "p.jsonl", records)).problems
    gz = tmp_path / "p.jsonl.gz"
    with gzip.open(gz, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    table = pa.Table.from_pylist(records)
    pq.write_table(table, tmp_path / "p.parquet")
    with pa.OSFile(str(tmp_path / "p.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    with pa.OSFile(str(tmp_path / "stream.bin"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    for name, fmt in [("p.jsonl.gz", "jsonl.gz"), ("p.parquet", "parquet"), ("p.arrow", "arrow"), ("stream.bin", "arrow")]:
        result = load_problems(tmp_path / name)
        assert result.stats.format == fmt
        assert result.problems == plain, name
        assert [p.content_version() for p in result] == [p.content_version() for p in plain]


def test_parquet_checker_files_and_multipliers_of_other_rows_do_not_refuse_a_problem(tmp_path: Path) -> None:
    # a column of objects is the union of every row's keys: row a's checker files came back with
    # row b's path set to None (and b's with a's), and a's multipliers with b's language: both
    # problems were refused as malformed when read from parquet, loaded from JSONL
    import pyarrow as pa
    import pyarrow.parquet as pq

    def validator(path: str) -> dict[str, Any]:
        return {"type": "kattis_validator", "files": {path: "import sys\nsys.exit(42)\n"},
                "entry_points": [path], "language": "python3"}

    records = [
        problem("a", checker=validator("v/a.py"), time_limit_multipliers={"python3": 2.0}),
        problem("b", checker=validator("w/b.py"), time_limit_multipliers={"cpp": 1.5}),
    ]
    plain = load_problems(write_jsonl(tmp_path / "p.jsonl", records)).problems
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "p.parquet")
    result = load_problems(tmp_path / "p.parquet")
    assert result.stats.malformed == 0
    assert result.problems == plain
    assert [p.content_version() for p in result] == [p.content_version() for p in plain]


def test_truncated_gzip_is_a_file_error_not_a_traceback(tmp_path: Path) -> None:
    gz = tmp_path / "p.jsonl.gz"
    with gzip.open(gz, "wt") as f:
        f.writelines(json.dumps(problem(f"p{i}", n_hidden=50)) + "\n" for i in range(200))
    gz.write_bytes(gz.read_bytes()[: gz.stat().st_size // 2])
    with pytest.raises(ProblemFileError, match="read failed"):
        load_problems(gz)


def test_corrupt_gzip_is_a_file_error_not_a_traceback(tmp_path: Path) -> None:
    """Deflate data that does not decode raises zlib.error, no OSError: it escaped as a traceback."""
    gz = tmp_path / "p.jsonl"  # named as plain JSONL: gzip is known by its magic bytes
    data = bytearray(gzip.compress("".join(json.dumps(problem(f"p{i}", n_hidden=50)) + "\n"
                                           for i in range(200)).encode()))
    data[20:60] = bytes(b ^ 0xFF for b in data[20:60])
    gz.write_bytes(bytes(data))
    with pytest.raises(ProblemFileError, match="read failed"):
        load_problems(gz)


ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
MUL = "a, b = map(int, input().split())\nprint(a * b)\n"


def arithmetic(pid: str, op: Any) -> dict[str, Any]:
    pairs = [(3, 5), (2, 2), (10, 7), (0, 9), (123, 456)]
    tests = [{"input": f"{a} {b}\n", "output": f"{op(a, b)}\n"} for a, b in pairs]
    return {"id": pid, "public_tests": tests[:2], "hidden_tests": tests[2:], "time_limit_s": 2}


@pytest.mark.parametrize("kind", ["forkserver", "subprocess"])
def test_end_to_end_load_then_evaluate_add_and_mul(tmp_path: Path, kind: str) -> None:
    from cpfleet.sandbox.env import evaluate
    from cpfleet.sandbox.runners import make_runner

    path = write_jsonl(tmp_path / "p.jsonl", [arithmetic("add", lambda a, b: a + b), "{bad line",
                                               arithmetic("mul", lambda a, b: a * b)])
    loaded = load_problems(path)
    assert loaded.stats.malformed == 1
    problems = loaded.by_id()
    fenced = lambda code: f"```python\n{code}```\n"  # noqa: E731
    runner = make_runner(kind)
    try:
        results = {
            (pid, name): evaluate(problems[pid], fenced(code), runner)
            for pid in ("add", "mul")
            for name, code in (("add", ADD), ("mul", MUL))
        }
        fraction = evaluate(problems["add"], fenced(MUL), runner, reward_shape="fraction")
    finally:
        runner.close()
    assert results["add", "add"].reward == 1.0
    assert results["mul", "mul"].reward == 1.0
    assert results["add", "mul"].reward == 0.0  # 2*2 == 2+2 passes one public test, not the hidden ones
    assert results["mul", "add"].reward == 0.0
    assert results["add", "mul"].public.passed == 1
    assert fraction.reward == 0.0  # no hidden test of 'add' has a*b == a+b
    assert not any(r.infra_error for r in results.values())


def test_unknown_checker_is_rejected_when_the_problem_is_read() -> None:
    """A bad checker fails at load time with the problem's id, never per job later."""
    from cpfleet.core.problem import Problem, ProblemFormatError

    base = {"id": "p1", "public_tests": [{"input": "1", "output": "1"}], "hidden_tests": []}
    with pytest.raises(ProblemFormatError, match="p1"):
        Problem.from_dict({**base, "checker": {"type": "no_such_checker"}})
    with pytest.raises(ProblemFormatError, match="p1"):
        Problem.from_dict({**base, "checker": {"type": "float", "abs": "not a number"}})
    assert Problem.from_dict({**base, "checker": {"type": "float", "abs": 1e-6}}).checker["type"] == "float"
