"""``cpfleet run`` as a user runs it (a real subprocess): one program through a real fleet with
its outputs on the matching streams and its exit code, a JSONL batch in and out, and --local
without Redis on the worker's code path."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_helpers import REPO, start_worker  # noqa: F401  (fixture)


def _cli(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "cpfleet", "run", *args], input=stdin, capture_output=True,
                          timeout=300, env=full_env, check=False)


def test_one_program_through_the_fleet(redis_url: str, start_worker, tmp_path: Path) -> None:  # noqa: F811
    worker = start_worker(redis_url, concurrency=1)
    prog = tmp_path / "rev.py"
    prog.write_text("import sys\ns = sys.stdin.read()\nprint(s[::-1])\nprint('note', file=sys.stderr)\nsys.exit(len(s))\n")
    out = _cli(str(prog), "--stdin", "-", "--redis", redis_url, stdin=b"abcd")
    assert out.returncode == 4, out.stderr
    assert out.stdout == b"dcba\n" and b"note" in out.stderr and b"exit 4" in out.stderr
    js = _cli(str(prog), "--stdin", "-", "--redis", redis_url, "--json", stdin=b"xy")
    result = json.loads(js.stdout)
    assert js.returncode == 0 and result["worker"] == worker.hostname
    assert result["runs"][0]["stdout"] == "yx\n" and result["runs"][0]["exit_code"] == 2


def test_a_batch_through_the_fleet(redis_url: str, start_worker, tmp_path: Path) -> None:  # noqa: F811
    start_worker(redis_url, concurrency=2)
    batch = tmp_path / "runs.jsonl"
    batch.write_text("\n".join(json.dumps(r) for r in [
        {"code": "print(input())", "stdin": ["1", "2"]},
        {"completion": "```python\nprint(open('a').read()); open('b', 'w').write('out')\n```",
         "files": {"a": {"b64": base64.b64encode(b"hi").decode()}}, "fetch_files": ["b"], "job_id": "files"},
        {"code": "int main( {", "language": "c"},
    ]) + "\n")
    out = _cli("--batch", str(batch), "--redis", redis_url)
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["job_id"] for r in results] == ["0", "files", "2"]
    assert [x["stdout"] for x in results[0]["runs"]] == ["1\n", "2\n"]
    assert results[1]["runs"][0]["stdout"] == "hi\n" and base64.b64decode(results[1]["runs"][0]["files"]["b"]) == b"out"
    assert results[2]["status"] == "COMPILE_ERROR" and "error" in results[2]["compile"]["stderr"]


def test_local_mode_needs_no_redis_and_refuses_bad_requests(tmp_path: Path) -> None:
    prog = tmp_path / "p.py"
    prog.write_text("import os\nprint(os.getpid())\nraise SystemExit(3)\n")
    out = _cli(str(prog), "--local", env={"CPFLEET_REDIS_URL": "redis://127.0.0.1:1/0"})
    assert out.returncode == 3 and out.stdout.strip() == b"2"  # pid 2 in the sandbox's own pid namespace
    bad = _cli(str(prog), "--local", "--fetch", "../x")
    assert bad.returncode == 2 and b"'..'" in bad.stderr and b"Traceback" not in bad.stderr
    (tmp_path / "prog.rs").write_text("fn main() {}\n")
    unknown = _cli(str(tmp_path / "prog.rs"), "--local")
    assert unknown.returncode == 2 and b"--language" in unknown.stderr and b"Traceback" not in unknown.stderr


def test_a_batch_request_no_worker_could_take_is_refused_naming_its_request(tmp_path: Path) -> None:
    # refused before anything is sent (Redis is never reached: port 1), and the line says which
    # request of the batch is wrong, so a user can find it among thousands
    batch = tmp_path / "runs.jsonl"
    rows = [{"code": "print(1)"}, {"code": "print(2)"}, {"code": "x", "language": "cobol"}]
    batch.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = _cli("--batch", str(batch), "--redis", "redis://127.0.0.1:1/0")
    assert out.returncode == 2 and out.stdout == b""
    assert out.stderr.decode().strip() == f"cpfleet run: {batch}: request 2: unknown language 'cobol'; known: python3, pypy3, cpp, c, java"
    batch.write_text(json.dumps({"code": "print(1)", "files": {"a": {"b64": "!!"}}}) + "\n")
    out = _cli("--batch", str(batch), "--redis", "redis://127.0.0.1:1/0")
    assert out.returncode == 2 and out.stderr.decode().startswith(f"cpfleet run: {batch}: request 0: ")


def test_a_batch_file_is_read_as_jobs_files_are_and_an_empty_or_binary_one_is_refused_naming_it(tmp_path: Path) -> None:
    """A batch saved by a Windows editor (a byte-order mark, CRLF) was refused as "not JSON
    (Unexpected UTF-8 BOM)" where every JOBS file is read; a binary one (gzip) was refused by a
    bare "'utf-8' codec can't decode byte 0x8b" naming no file; an empty one ran nothing and
    exited 0, where an empty JOBS file is an error."""
    batch = tmp_path / "runs.jsonl"
    batch.write_bytes(b"\xef\xbb\xbf" + json.dumps({"code": "print(6 * 7)", "language": "python3"}).encode() + b"\r\n")
    out = _cli("--batch", str(batch), "--local")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["runs"][0]["stdout"] == "42\n"
    batch.write_bytes(b"\n  \n")
    out = _cli("--batch", str(batch), "--local")
    assert out.returncode == 2 and out.stderr.decode().strip() == f"cpfleet run: {batch}: no request in it", out.stderr
    batch.write_bytes(b"\x1f\x8b\x08\x00binary")
    out = _cli("--batch", str(batch), "--local")
    assert out.returncode == 2 and out.stderr.decode().startswith(f"cpfleet run: {batch}: not UTF-8 text"), out.stderr


def test_a_file_or_single_run_option_given_with_batch_is_a_usage_error_naming_the_conflict(tmp_path: Path) -> None:
    """`cpfleet run prog.py --batch b.jsonl` ran the batch and ignored prog.py in silence."""
    prog = tmp_path / "prog.py"
    prog.write_text("print(1)\n")
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"code": "print(2)"}) + "\n")
    for extra, named in (([str(prog)], "FILE"), (["--language", "cpp"], "--language"),
                         (["--stdin", str(prog)], "--stdin"), ([str(prog), "--time-limit", "2"], "FILE and --time-limit")):
        proc = _cli(*extra, "--batch", str(batch), "--local")
        err = proc.stderr.decode()
        assert proc.returncode == 2, (extra, proc.returncode, err)
        assert err.startswith(f"cpfleet run: {named} cannot go with --batch"), err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert proc.stdout == b""  # nothing was run
    proc = _cli("--batch", str(batch), "--local")  # the batch alone runs
    assert proc.returncode == 0 and json.loads(proc.stdout)["runs"][0]["stdout"] == "2\n"


def test_a_zero_limit_given_with_batch_is_refused_not_ignored() -> None:
    """``--time-limit 0`` and ``--memory-mb 0`` are given options too (0 == False in Python):
    with --batch they were ignored in silence. A zero is now refused by the option's own range,
    and a limit in range given with --batch is named as a conflict."""
    import argparse

    from cpfleet.jobs import run

    parser = argparse.ArgumentParser()
    run.configure(parser)
    for extra in (["--time-limit", "0"], ["--memory-mb", "0"]):
        with pytest.raises(SystemExit):
            parser.parse_args([*extra, "--batch", "b.jsonl"])
    for extra, named in ((["--time-limit", "1"], "--time-limit"), (["--memory-mb", "16"], "--memory-mb")):
        args = parser.parse_args([*extra, "--batch", "b.jsonl"])
        conflict = run._batch_conflict(args)
        assert conflict is not None and conflict.startswith(f"{named} cannot go with --batch"), (extra, conflict)
    assert run._batch_conflict(parser.parse_args(["--batch", "b.jsonl"])) is None


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--time-limit", "61", "expected seconds in (0, 60]"),
    ("--time-limit", "-1", "expected a number > 0"),
    ("--memory-mb", "5", "expected a whole number >= 16"),
    ("--memory-mb", "99999999", "expected whole MB in [16, 16384]"),
    ("--output-cap", "-1", "expected a whole number >= 0"),
])
def test_a_run_limit_out_of_range_is_a_usage_error_naming_the_option(tmp_path: Path, option: str, value: str, says: str) -> None:
    """It was refused later by the wire check, naming the field ("run field 'time_limit_s' must
    be in (0, 60] or nil"), which the user never wrote."""
    prog = tmp_path / "prog.py"
    prog.write_text("print(1)\n")
    proc = _cli(str(prog), option, value, "--local")
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert f"argument {option}: {says}" in err and "run field" not in err and "Traceback" not in err, err
    assert proc.stdout == b""


def test_the_command_lines_docs_run_jobs_shows_run_as_written(redis_url: str, start_worker, tmp_path: Path) -> None:  # noqa: F811
    """docs/run-jobs.md's "Command line" block, each line run by a shell as shown (the fleet from
    $CPFLEET_REDIS_URL), on files that line names: what its comment says happens."""
    start_worker(redis_url, concurrency=2)
    page = (REPO / "docs" / "run-jobs.md").read_text()
    block = page.split("## Command line", 1)[1].split("```\n", 2)[1]
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert len(lines) == 5, lines
    (tmp_path / "solution.cpp").write_text(
        "#include <cstdio>\nint main() { long a, b; std::scanf(\"%ld %ld\", &a, &b); std::printf(\"%ld\\n\", a + b); }\n")
    (tmp_path / "1.in").write_text("1 2\n")
    (tmp_path / "2.in").write_text("3 4\n")
    (tmp_path / "double.py").write_text("import sys\nn = int(input())\nprint(n * 2)\nsys.exit(n % 7 + 3)\n")
    (tmp_path / "answer.md").write_text("Square it.\n\n```python\nimport sys\nprint(int(sys.stdin.read() or 5) ** 2)\n```\n")
    (tmp_path / "runs.jsonl").write_text(json.dumps({"code": "print(input()[::-1])", "stdin": ["ab", "cd"]}) + "\n")
    (tmp_path / "prog.py").write_text("print('local', 6 * 7)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "CPFLEET_REDIS_URL": redis_url,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def shell(line: str) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert "Traceback" not in out.stderr, (line, out.stderr)
        return out

    compiled = shell(lines[0])
    assert compiled.returncode == 0 and compiled.stdout.split() == ["3", "7"], (compiled.stdout, compiled.stderr)
    doubled = shell(lines[1])
    assert doubled.returncode == 3 and doubled.stdout == "42\n", (doubled.stdout, doubled.stderr)  # 21 % 7 + 3
    as_json = shell(lines[2])
    result = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and result["status"] == "FINISHED" and result["runs"][0]["stdout"] == "25\n"
    batch = shell(lines[3])
    assert batch.returncode == 0 and batch.stdout == ""  # redirected to the file the line names
    (written,) = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [x["stdout"] for x in written["runs"]] == ["ba\n", "dc\n"]
    local = shell(lines[4])
    assert local.returncode == 0 and local.stdout == "local 42\n", (local.stdout, local.stderr)
