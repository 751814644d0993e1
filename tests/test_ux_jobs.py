"""`cpfleet judge` / `submit` read JOBS by the problems' rule (skip, count, --strict), refuse an
oversized completion by the one limit naming the job, tell a job of a skipped problem why, and
stop on Ctrl-C with an "N of M judged" summary and no traceback. Real CLI in subprocesses; the
Ctrl-C test sends SIGINT to the real process group, as a terminal does."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core import protocol
from cpfleet.jobs.files import read_jobs

REPO = Path(__file__).resolve().parents[1]

ADD = {
    "id": "add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": f"{i} {i}\n", "output": f"{2 * i}\n"} for i in range(1, 4)],
    "time_limit_s": 1,
}
NO_HIDDEN = {"id": "lonely", "public_tests": [{"input": "1\n", "output": "1\n"}], "hidden_tests": []}
CORRECT_ADD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cpfleet", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def test_judge_skips_bad_job_lines_counts_them_and_judges_the_rest(tmp_path: Path) -> None:
    problems = _write(tmp_path / "p.jsonl", [ADD])
    jobs = _write(tmp_path / "j.jsonl", [
        {"problem_id": "add", "completion": CORRECT_ADD, "job_id": "good"},
        '{"problem_id": "add", "completion": ',  # cut short
        {"problem_id": "add", "completion": 7, "job_id": "bad-type"},
        {"problem_id": "add", "completion": CORRECT_ADD},
    ])
    out = _cli("judge", str(problems), str(jobs), "--workers", "1", "--no-progress")
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["job_id"], r["reward"]) for r in results] == [("good", 1.0), ("3", 1.0)]
    assert f"{jobs}:2: skipped job line: invalid JSON" in out.stderr
    assert f"{jobs}:3: skipped job line: job 'bad-type': 'completion' must be a string" in out.stderr
    assert "jobs: 2 jobs read from 4 lines, 2 skipped" in out.stderr
    assert "Traceback" not in out.stderr

    strict = _cli("judge", str(problems), str(jobs), "--workers", "1", "--no-progress", "--strict")
    assert strict.returncode == 2 and strict.stdout == ""
    assert f"{jobs}:2: invalid JSON" in strict.stderr and "--strict" in strict.stderr


def test_a_jobs_line_that_is_not_utf8_is_skipped_like_any_bad_line_and_a_bom_is_no_bad_line(tmp_path: Path) -> None:
    """A completion pasted from a Latin-1 log: that line is skipped with its number, as a problem
    file's would be, not the whole file refused; a byte-order mark from an editor is no line's fault."""
    problems = _write(tmp_path / "p.jsonl", [ADD])
    good = json.dumps({"problem_id": "add", "completion": CORRECT_ADD, "job_id": "good"}).encode()
    latin1 = b'{"problem_id": "add", "completion": "print(\xe9t\xe9)", "job_id": "latin1"}'
    jobs = tmp_path / "j.jsonl"
    jobs.write_bytes(b"\xef\xbb\xbf" + good + b"\n" + latin1 + b"\n")
    out = _cli("judge", str(problems), str(jobs), "--workers", "1", "--no-progress")
    assert out.returncode == 0, out.stderr
    assert [(r["job_id"], r["reward"]) for r in map(json.loads, out.stdout.splitlines())] == [("good", 1.0)]
    assert f"{jobs}:2: skipped job line: not UTF-8 text" in out.stderr
    assert "jobs: 1 jobs read from 2 lines, 1 skipped" in out.stderr and "Traceback" not in out.stderr
    strict = _cli("judge", str(problems), str(jobs), "--workers", "1", "--no-progress", "--strict")
    assert strict.returncode == 2 and f"{jobs}:2: not UTF-8 text" in strict.stderr


def test_a_problem_line_that_is_not_utf8_is_named_so_as_a_jobs_line_is(tmp_path: Path) -> None:
    """The problems reader handed the line's bytes to json.loads, which guesses UTF-16 or -32
    from them: a Latin-1 line was reported as a 'utf-16-le' or 'utf-32-be' codec error."""
    latin1 = b'\xff\xfe{"id": "caf\xe9", "hidden_tests": [{"input": "", "output": "1\\n"}]}'
    problems = tmp_path / "p.jsonl"
    problems.write_bytes(b"\xef\xbb\xbf" + json.dumps(ADD).encode() + b"\n" + latin1 + b"\n")
    jobs = _write(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD, "job_id": "good"}])
    out = _cli("judge", str(problems), str(jobs), "--workers", "1", "--no-progress")
    assert out.returncode == 0, out.stderr
    assert [(r["job_id"], r["reward"]) for r in map(json.loads, out.stdout.splitlines())] == [("good", 1.0)]
    assert f"{problems}:2: skipped malformed record: not UTF-8 text" in out.stderr, out.stderr
    assert "utf-16" not in out.stderr and "utf-32" not in out.stderr


def test_the_completion_size_limit_is_one_rule_naming_the_job(tmp_path: Path, redis_url: str) -> None:
    big = "x" * (protocol.MAX_COMPLETION_BYTES + 1)
    path = _write(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": big, "job_id": "huge"}, {"problem_id": "add", "completion": "y"}])
    read = read_jobs(path)
    assert [j["completion"] for j in read.jobs] == ["y"]
    limit = f"job 'huge': completion of {len(big)} bytes exceeds the limit of {protocol.MAX_COMPLETION_BYTES} bytes (32 MiB)"
    assert read.warnings == [f"{path}:1: skipped job line: {limit}"]

    from cpfleet.producer.client import FleetClient

    with FleetClient(redis_url) as client, pytest.raises(ValueError) as err:
        client.submit("add", big, job_id="huge")
    assert str(err.value) == limit

    submit = _cli("submit", str(path), "--redis", redis_url, "--strict", "--no-progress")
    assert submit.returncode == 2 and limit in submit.stderr and "Traceback" not in submit.stderr


def test_a_job_of_a_skipped_problem_says_why_it_was_skipped(tmp_path: Path) -> None:
    problems = _write(tmp_path / "p.jsonl", [ADD, NO_HIDDEN])
    jobs = _write(tmp_path / "j.jsonl", [
        {"problem_id": "lonely", "completion": CORRECT_ADD, "job_id": "l"},
        {"problem_id": "typo", "completion": CORRECT_ADD, "job_id": "t"},
    ])
    out = _cli("judge", str(problems), str(jobs), "--workers", "1", "--no-progress")
    assert out.returncode == 3, out.stderr  # both jobs' problems unknown: nothing was judged
    by = {r["job_id"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert by["l"]["verdict"] == "UNKNOWN_PROBLEM" and by["l"]["reward"] is None
    assert by["l"]["infra_message"].startswith(f"problem 'lonely' was skipped when loading {problems}:2: unjudgeable problem:")
    assert "no hidden tests" in by["l"]["infra_message"]
    assert by["t"]["infra_message"] == "unknown problem 'typo'"


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rfind(b")") + 2 :].split()[1]), []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            found.add(kid)
            todo.append(kid)
    return found


@contextlib.contextmanager
def _group_killed_on_the_way_out(proc: subprocess.Popen[str]) -> Iterator[None]:
    """A command started with ``start_new_session``: its whole process group is SIGKILLed if it
    still runs when the block ends (a failed assertion, a timeout), never left to the session."""
    try:
        yield
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _sigint_as_at_a_terminal() -> None:
    """In the command's child: SIGINT at its default, as a terminal starts a command. A test run
    started in the background (``cmd &`` in a script, nohup) passes SIGINT on ignored, and a
    command started with it ignored rightly keeps ignoring it, so Ctrl-C would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ctrl_c(proc: subprocess.Popen[str]) -> tuple[str, str, float]:
    """What a terminal's Ctrl-C does (SIGINT to the process group), then the command's remaining
    stdout and stderr and the seconds it took to exit."""
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=60)
    return out, err, time.monotonic() - t0


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


@pytest.mark.parametrize("attempt", range(3))  # where the Ctrl-C lands in a start-up is a race: three tries
def test_ctrl_c_while_judges_pool_processes_start_prints_no_traceback_and_leaves_none_behind(tmp_path: Path, attempt: int) -> None:
    """A pool process leaves the terminal's process group only in its initializer: a Ctrl-C
    while it still imported printed its KeyboardInterrupt traceback (or, landing in the parent's
    submit, a RuntimeError from the executor's shutdown), and one started as the parent was
    interrupted was never killed and waited on its queue for ever."""
    problems = _write(tmp_path / "p.jsonl", [ADD])
    jobs = _write(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD} for _ in range(4)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", "2", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
        preexec_fn=_sigint_as_at_a_terminal,
    )

    def starting_pool_processes() -> set[int]:
        """Pool processes still in the command's process group: started, not yet initialised."""
        found = set()
        for pid in _descendants(proc.pid):
            try:
                stat = Path(f"/proc/{pid}/stat").read_bytes()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            # in the group still, and past the interpreter's start (a tick of CPU): importing
            if b"spawn_main" in cmdline and int(fields[2]) == proc.pid and int(fields[11]) + int(fields[12]) >= 1:
                found.add(pid)
        return found

    with _group_killed_on_the_way_out(proc):
        deadline = time.monotonic() + 60
        while not (caught := starting_pool_processes()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert caught, "no pool process seen while it started"
        _, err, _ = _ctrl_c(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    deadline = time.monotonic() + 30  # a liveness wait for their exit, not a timing assertion
    while any(map(_alive, caught)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in caught if _alive(pid)]
    for pid in left:  # never leak into the rest of the session
        os.kill(pid, signal.SIGKILL)
    assert left == [], "pool processes outlived the interrupted command"


@pytest.mark.parametrize("workers", ["2", "1"])
def test_ctrl_c_on_judge_stops_promptly_with_a_summary_and_no_traceback(tmp_path: Path, workers: str) -> None:
    slow = "```python\nimport time\ntime.sleep(8)\na, b = map(int, input().split())\nprint(a + b)\n```"
    problems = _write(tmp_path / "p.jsonl", [{**ADD, "time_limit_s": 30}])
    jobs = _write(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD, "job_id": "fast"}]
                  + [{"problem_id": "add", "completion": slow, "job_id": f"s{i}"} for i in range(6)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", workers, "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
        preexec_fn=_sigint_as_at_a_terminal,
    )
    with _group_killed_on_the_way_out(proc):
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the fast job's result: judging is under way
        assert json.loads(first)["job_id"] == "fast"
        time.sleep(1.0)  # the slow jobs' programs are running now
        started = _descendants(proc.pid)
        assert started, "no pool process or sandbox found"
        rest, err, took = _ctrl_c(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "cpfleet judge: interrupted: 1 of 7 judged (mean reward 1.000 over 1" in err
    assert rest == ""
    # generous: without the fix the pool finished its 8 s tests first (and the zygotes printed tracebacks)
    assert took < 7.5, f"took {took:.1f}s to stop"
    deadline = time.monotonic() + 60  # liveness wait for exits, not a timing assertion
    while any(_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in started if _alive(p)], "processes of the judge run outlived it"


@pytest.mark.slow
def test_ctrl_c_on_submit_withdraws_the_rest_with_a_summary_and_no_traceback(tmp_path: Path, redis_url: str) -> None:
    from fleet_helpers import FleetWorker

    problems = _write(tmp_path / "p.jsonl", [{**ADD, "time_limit_s": 30}])
    slow = "```python\nimport time  # {i}\ntime.sleep(3)\na, b = map(int, input().split())\nprint(a + b)\n```"
    jobs = _write(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD, "job_id": "fast"}]
                  + [{"problem_id": "add", "completion": slow.format(i=i), "job_id": f"s{i}"} for i in range(8)])
    with FleetWorker(redis_url, tmp_path, concurrency=1):
        proc = subprocess.Popen(
            [sys.executable, "-m", "cpfleet", "submit", str(jobs), "--redis", redis_url, "--problems", str(problems),
             "--no-progress"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
            preexec_fn=_sigint_as_at_a_terminal,
        )  # fmt: skip
        with _group_killed_on_the_way_out(proc):
            assert proc.stdout is not None
            assert json.loads(proc.stdout.readline())["job_id"] == "fast"
            rest, err, took = _ctrl_c(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    m = re.search(r"cpfleet submit: interrupted: (\d) of 9 judged \(mean reward 1\.000 over \1", err)
    assert m and 1 <= int(m.group(1)) < 9, err
    assert "the rest were withdrawn" in err
    assert took < 7.5, f"took {took:.1f}s to stop"  # generous; each remaining job would take 3+ s


def test_sigterm_on_judge_stops_with_a_summary_like_ctrl_c_and_no_warning(tmp_path: Path) -> None:
    """A batch scheduler, a container stop or ``timeout`` ends a command with SIGTERM: it killed
    ``cpfleet judge`` on the spot, with no "N of M judged" line and with multiprocessing's warning
    about leaked semaphores instead. It stops as on Ctrl-C, with the status of a SIGTERM (143)."""
    slow = "```python\nimport time\ntime.sleep(8)\na, b = map(int, input().split())\nprint(a + b)\n```"
    problems = _write(tmp_path / "p.jsonl", [{**ADD, "time_limit_s": 30}])
    jobs = _write(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD, "job_id": "fast"}]
                  + [{"problem_id": "add", "completion": slow, "job_id": f"s{i}"} for i in range(4)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", "2", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
    )
    with _group_killed_on_the_way_out(proc):
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["job_id"] == "fast"
        time.sleep(1.0)  # the slow jobs' programs are running now
        started = _descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)  # to the command alone, as `kill PID` sends it
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "leaked semaphore" not in err, err
    assert "cpfleet judge: interrupted: 1 of 5 judged (mean reward 1.000 over 1" in err
    deadline = time.monotonic() + 60  # liveness wait for exits, not a timing assertion
    while any(_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in started if _alive(p)], "processes of the judge run outlived it"


def test_sigterm_on_submit_withdraws_the_queued_jobs_with_a_summary(tmp_path: Path, redis_url: str) -> None:
    """SIGTERM killed ``cpfleet submit`` without closing its client: its claim stayed in Redis for
    its whole expiry, so a worker arriving meanwhile judged every job nobody would read. It
    withdraws them as Ctrl-C does (the claim released at once) and says how far it got."""
    import redis

    problems = _write(tmp_path / "p.jsonl", [ADD])
    jobs = _write(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD} for _ in range(3)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpfleet", "submit", str(jobs), "--redis", redis_url, "--problems", str(problems),
         "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
    )  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    with _group_killed_on_the_way_out(proc):
        deadline = time.monotonic() + 60
        while client.llen("cpfleet") < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # no worker: the jobs stay queued
        assert client.llen("cpfleet") == 3
        claims = client.keys(protocol.client_claim_key("*"))
        assert claims, "the submitting client holds no claim"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert "cpfleet submit: interrupted: 0 of 3 judged" in err and "the rest were withdrawn" in err, err
    assert client.exists(*claims) == 0, "the claim outlived the command: a worker would still judge its jobs"


def test_a_gzipped_jobs_file_is_read_by_its_content_as_problem_files_are(tmp_path: Path) -> None:
    """Problem files are sniffed (gzip by its magic bytes, whatever the name), JOBS files went by
    the ``.gz`` suffix alone: a gzipped file named ``jobs.jsonl``, or piped in (``-``), gave one
    "not UTF-8 text" warning per line and "no usable job" instead of being judged."""
    import gzip

    problems = _write(tmp_path / "p.jsonl", [ADD])
    rows = [{"problem_id": "add", "completion": CORRECT_ADD, "job_id": f"j{i}"} for i in range(2)]
    packed = gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode())
    misnamed = tmp_path / "jobs.jsonl"
    misnamed.write_bytes(packed)
    read = read_jobs(misnamed)
    assert [j["job_id"] for j in read.jobs] == ["j0", "j1"] and read.skipped == 0, read.warnings
    out = subprocess.run([sys.executable, "-m", "cpfleet", "judge", str(problems), "-", "--workers", "1", "--no-progress"],
                         input=packed, capture_output=True, timeout=240, cwd=REPO)
    assert out.returncode == 0, out.stderr.decode()
    assert [json.loads(line)["reward"] for line in out.stdout.decode().splitlines()] == [1.0, 1.0]


def test_a_corrupt_gzipped_jobs_file_is_a_file_error_not_a_traceback(tmp_path: Path) -> None:
    """Deflate data that does not decode raises zlib.error, which is no OSError: ``cpfleet judge``
    printed its traceback (since JOBS files are gunzipped by content, for any file that opens
    with gzip's magic bytes), where a file it cannot read is one line naming it."""
    import gzip

    from cpfleet.core.errors import InputFileError

    packed = bytearray(gzip.compress(b"".join(b'{"problem_id": "add", "completion": "x"}\n' for _ in range(500))))
    packed[20:60] = bytes(b ^ 0xFF for b in packed[20:60])  # the compressed blocks, not the header
    bad = tmp_path / "jobs.jsonl"
    bad.write_bytes(bytes(packed))
    with pytest.raises(InputFileError, match="cannot read"):
        read_jobs(bad)
    out = subprocess.run([sys.executable, "-m", "cpfleet", "judge", str(_write(tmp_path / "p.jsonl", [ADD])), str(bad),
                          "--workers", "1", "--no-progress"], capture_output=True, text=True, timeout=240, cwd=REPO)
    assert out.returncode == 2 and "Traceback" not in out.stderr and str(bad) in out.stderr, out.stderr


def test_judge_into_a_pipe_closed_early_stops_quietly_and_leaves_nothing_running(tmp_path: Path) -> None:
    """``cpfleet judge P J | head -1``: the first write after head exited printed a BrokenPipeError
    traceback. It stops as the other end asked, with one line and the status of a SIGPIPE (141)."""
    slow = "```python\nimport time  # {i}\ntime.sleep(1)\na, b = map(int, input().split())\nprint(a + b)\n```"
    problems = _write(tmp_path / "p.jsonl", [{**ADD, "time_limit_s": 10}])
    jobs = _write(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD, "job_id": "fast"}]
                  + [{"problem_id": "add", "completion": slow.format(i=i), "job_id": f"s{i}"} for i in range(4)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", "1", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
    )
    with _group_killed_on_the_way_out(proc):
        assert proc.stdout is not None and proc.stderr is not None
        assert json.loads(proc.stdout.readline())["job_id"] == "fast"
        started = _descendants(proc.pid)
        proc.stdout.close()  # as `head -1` exits after its line
        err = proc.stderr.read()
        proc.wait(timeout=60)
    assert proc.returncode == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert "cpfleet judge: stopped: the output was closed" in err, err
    deadline = time.monotonic() + 60  # liveness wait for exits, not a timing assertion
    while any(_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in started if _alive(p)], "processes of the judge run outlived it"


def test_judge_with_its_stderr_into_the_same_closed_pipe_still_exits_as_sigpipe(tmp_path: Path) -> None:
    """``cpfleet judge P J 2>&1 | head -1``: the line saying the output was closed went to the
    same closed pipe, and its BrokenPipeError escaped main (exit 1, "the work failed", where the
    command documents 141). Nobody is left to read the line: it is dropped."""
    problems = _write(tmp_path / "p.jsonl", [ADD])
    jobs = _write(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD, "job_id": f"j{i}"}
                                         for i in range(4)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", "1", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, start_new_session=True,
    )
    with _group_killed_on_the_way_out(proc):
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("judging 4 jobs")  # the first line head reads, on stderr
        proc.stdout.close()  # as `head -1` exits after its line
        proc.wait(timeout=120)
    assert proc.returncode == 141


def test_sigterm_anywhere_in_judges_start_prints_no_traceback_and_leaves_nothing_running(tmp_path: Path) -> None:
    """SIGTERM stops judge as Ctrl-C does, so it must be held while pool processes start as
    SIGINT is: landing there it left them printing "pickle data was truncated" (the demo's
    problems make that write long enough to hit), and a sandbox runner's zygote whose pool
    process was stopped as it set up printed a BrokenPipeError. Where it lands is a race: a
    sweep of moments over the start of the pool and of its sandbox runners."""
    problems, jobs = tmp_path / "p.jsonl", tmp_path / "j.jsonl"
    subprocess.run([sys.executable, "-m", "cpfleet.demo.problems", "-o", str(problems), "--jobs-out", str(jobs)],
                   check=True, cwd=REPO, timeout=120)
    for delay in (0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8):
        proc = subprocess.Popen(
            [sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", "2", "--no-progress"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
        )
        with _group_killed_on_the_way_out(proc):
            time.sleep(delay)
            started = _descendants(proc.pid)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err and "Error" not in err, (delay, err)
        assert proc.returncode in (143, -signal.SIGTERM), (delay, err)  # stopped, or killed still importing
        deadline = time.monotonic() + 30  # liveness wait for exits, not a timing assertion
        while any(_alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in started if _alive(p)], (delay, "processes of the judge run outlived it")
