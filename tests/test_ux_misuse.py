"""Misuse as people really do it, through the real CLI: a port out of range or taken, a jobs
file with nothing in it, a job naming a language that does not exist, a host missing a
toolchain, a job whose language decides how its untagged code block runs. Each ends in a clear
line and the documented exit status, never a traceback, and ``judge`` and ``submit`` read a
jobs file the same way."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_helpers import FleetWorker

REPO = Path(__file__).resolve().parents[1]
PROBLEM = {"id": "ux/add", "public_tests": [{"input": "1 2\n", "output": "3\n"}], "hidden_tests": [{"input": "5 7\n", "output": "12\n"}]}
CPP_UNTAGGED = "```\n#include <cstdio>\nint main(){int a,b;scanf(\"%d %d\",&a,&b);printf(\"%d\\n\",a+b);}\n```"


def _cli(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")} | (env_extra or {})
    return subprocess.run([sys.executable, "-m", "cpfleet", *args], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)


def _write(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _no_traceback(proc: subprocess.CompletedProcess[str], code: int) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["serve", "--port", "80000"], "argument --port: '80000' is not a port: want 1-65535"),
        (["serve", "--port", "-1"], "argument --port: '-1' is not a port"),
        (["up", "--flower-port", "-5"], "'-5' is not a port: want 1-65535, 0 (any free port) or -1 (off)"),
        (["up", "--metrics-port", "99999"], "argument --metrics-port: '99999' is not a port"),
        (["up", "--redis-port", "abc"], "argument --redis-port: 'abc' is not a port: want 1-65535 or 0 (any free port)"),
        (["serve", "--host", "0.0.0.0"], "cpfleet serve: refusing to listen on 0.0.0.0 without --token"),
        (["serve", "--timeout", "0"], "cpfleet serve: error: argument --timeout: expected a number > 0, got '0'"),
        (["serve", "--max-body-mb", "inf"], "cpfleet serve: error: argument --max-body-mb: expected a number > 0, got 'inf'"),
        (["serve", "--max-body-mb", "0"], "cpfleet serve: error: argument --max-body-mb: expected a number > 0, got '0'"),
        (["serve", "--coalesce-ms", "nan"], "cpfleet serve: error: argument --coalesce-ms: expected a number >= 0, got 'nan'"),
        (["serve", "--coalesce-ms", "-1"], "cpfleet serve: error: argument --coalesce-ms: expected a number >= 0, got '-1'"),
        (["demo", "--timeout", "0"], "cpfleet demo: error: argument --timeout: expected a number > 0, got '0'"),
        (["demo", "--max-problems", "-1"], "cpfleet demo: error: argument --max-problems: expected a whole number >= 1, got '-1'"),
        (["demo", "--jobs", "0"], "cpfleet demo: error: argument --jobs: expected a whole number >= 1, got '0'"),
        (["demo", "--logs", "README.md"], "cpfleet demo: error: argument --logs: README.md: is a file, expected a folder"),
        (["up", "--logs", "README.md"], "cpfleet up: error: argument --logs: README.md: is a file, expected a folder"),
        (["up", "--data-dir", "README.md/x"], "argument --data-dir: README.md/x: README.md is a file, so no folder"),
        # a judging process per sandbox slot, as a worker's -c: past a host's slots each further
        # one's jobs all ended INTERNAL ("all 1024 sandbox slots are taken")
        (["judge", "p.jsonl", "j.jsonl", "--workers", "5000"],
         "argument --workers: expected a whole number from 1 to 1024 (the sandbox slots one host has), got '5000'"),
        (["validate", "p.jsonl", "--workers", "1025"], "argument --workers: expected a whole number from 1 to 1024"),
        (["submit", "jobs.jsonl", "--queue", ""], "cpfleet submit: error: argument --queue: a queue name must be non-empty text"),
        (["run", "x.py", "--queue", "a,b"], "cpfleet run: error: argument --queue: queue name 'a,b' holds a comma"),
        (["serve", "--queue", " cpfleet"], "cpfleet serve: error: argument --queue: queue name ' cpfleet' begins or ends with blanks"),
        # a pool process per sandbox slot: past a host's slots it would fork until the host gives out
        (["worker", "-c", "100000", "--redis", "redis://127.0.0.1:1/0"],
         "CPFLEET_CONCURRENCY='100000' is not valid (above 1024, the sandbox slots one host has"),
    ],
)
def test_a_bad_option_value_is_a_usage_error(argv: list[str], words: str) -> None:
    proc = _cli(*argv)
    _no_traceback(proc, 2)
    assert words in proc.stderr


def test_serve_on_a_taken_port_says_to_pick_another(redis_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _cli("serve", "--redis", redis_url, "--port", str(port))
    _no_traceback(proc, 2)
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use; pick another --port" in proc.stderr


def test_serve_on_a_port_another_server_shares_says_so(redis_url: str) -> None:
    """The port is bound with SO_REUSEPORT (for rolling restarts), so a second ``cpfleet serve``
    started by mistake on a port one already serves (the same user's) started without a word and
    silently took half of its connections, maybe for another fleet's Redis."""
    with socket.socket() as other:  # a replica already serving the port, as `cpfleet serve` binds it
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-m", "cpfleet", "serve", "--redis", redis_url, "--port", str(port)],
                                stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True)
        try:
            assert proc.stderr is not None
            lines = []
            while not (line := proc.stderr.readline()).startswith("cpfleet serve: http://"):
                assert line, "".join(lines)  # it exited before serving
                lines.append(line)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert f"cpfleet serve: warning: another server already listens on 127.0.0.1:{port}" in "".join(lines), lines


@pytest.mark.parametrize("command", ["judge", "load", "validate"])
def test_problems_from_stdin_are_refused_as_such_not_as_a_missing_file(command: str, tmp_path: Path) -> None:
    """``cat problems.jsonl | cpfleet load -`` said "-: problem file not found"."""
    jobs = _write(tmp_path / "j.jsonl", {"problem_id": "ux/add", "completion": "print(3)"})
    argv = [command, "-", str(jobs)] if command == "judge" else [command, "-"]
    proc = subprocess.run([sys.executable, "-m", "cpfleet", *argv], input=json.dumps(PROBLEM) + "\n", text=True,
                          capture_output=True, timeout=120, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")})
    _no_traceback(proc, 2)
    assert f"cpfleet {command}: -: problems are read from a file, not from stdin" in proc.stderr


@pytest.mark.parametrize("queue", ["", "   ", "a,b", "cpfleet "])
def test_a_queue_no_worker_could_consume_is_refused_by_every_client(queue: str, redis_url: str) -> None:
    """Jobs published to such a queue waited out their whole deadline with nothing said (a
    worker's queue list is comma-separated and stripped, so it never takes them)."""
    from cpfleet import FleetClient, TRLReward
    from cpfleet.core.errors import OptionError

    with pytest.raises(OptionError, match="queue name"):
        FleetClient(redis_url, queue=queue)
    if queue.strip():  # the adapters take an empty queue as the default one
        with pytest.raises(OptionError, match="queue name"):
            TRLReward(redis_url, queue=queue)


@pytest.mark.parametrize(
    ("host", "words"),
    [
        ("192.0.2.1", "cannot listen on 192.0.2.1:{port}: Cannot assign requested address; check --host"),
        ("no-such-host.invalid", "cannot listen on no-such-host.invalid:{port}: "),
    ],
)
def test_serve_on_a_host_that_is_not_this_machines_says_to_check_the_host_not_the_port(
        host: str, words: str, redis_url: str) -> None:
    with socket.socket() as probe:  # a port nobody holds, so only the host can be wrong
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = _cli("serve", "--redis", redis_url, "--host", host, "--port", str(port), "--token", "t")
    _no_traceback(proc, 2)
    assert words.format(port=port) in proc.stderr
    assert "check --host" in proc.stderr and "pick another --port" not in proc.stderr


@pytest.mark.parametrize("command", ["judge", "submit"])
def test_an_empty_jobs_file_is_an_error_as_an_empty_problem_file_is(command: str, tmp_path: Path, redis_url: str) -> None:
    problems = _write(tmp_path / "p.jsonl", PROBLEM)
    jobs = tmp_path / "j.jsonl"
    jobs.write_text("\n")
    argv = ["judge", str(problems), str(jobs)] if command == "judge" else ["submit", str(jobs), "--redis", redis_url]
    proc = _cli(*argv)
    _no_traceback(proc, 2)
    assert f"cpfleet {command}: no usable job in {jobs}: 0 jobs read from 0 lines, 0 skipped" in proc.stderr


def test_a_job_in_an_unknown_language_is_skipped_with_its_line_not_judged_internal(tmp_path: Path) -> None:
    problems = _write(tmp_path / "p.jsonl", PROBLEM)
    jobs = _write(
        tmp_path / "j.jsonl",
        {"problem_id": "ux/add", "completion": "```python\nprint(sum(map(int, input().split())))\n```", "job_id": "good"},
        {"problem_id": "ux/add", "completion": "```cobol\nDISPLAY 3.\n```", "job_id": "bad", "language": "cobol"},
    )
    proc = _cli("judge", str(problems), str(jobs), "--no-progress")
    _no_traceback(proc, 0)
    assert f"{jobs}:2: skipped job line: job 'bad': unknown language 'cobol'; known: python3, pypy3, cpp, c, java" in proc.stderr
    assert [json.loads(line)["job_id"] for line in proc.stdout.splitlines()] == ["good"]
    strict = _cli("judge", str(problems), str(jobs), "--strict")
    _no_traceback(strict, 2)
    assert "unknown language 'cobol'" in strict.stderr


def test_the_summary_names_a_missing_toolchain(tmp_path: Path) -> None:
    problems = _write(tmp_path / "p.jsonl", PROBLEM)
    java = "```java\npublic class Main { public static void main(String[] a) { System.out.println(3); } }\n```"
    jobs = _write(tmp_path / "j.jsonl", *({"problem_id": "ux/add", "completion": java, "job_id": f"j{i}"} for i in range(2)))
    proc = _cli("judge", str(problems), str(jobs), "--no-progress", env_extra={"CPFLEET_JAVA_HOME": str(tmp_path / "no-jdk")})
    _no_traceback(proc, 3)  # no job got a reward
    assert "infrastructure errors 2; INTERNAL 2" in proc.stderr
    assert f"cpfleet judge: infrastructure error x2: language java is not available on this worker: missing {tmp_path}/no-jdk/bin/javac" in proc.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_submit_keeps_each_jobs_language_as_judge_does(tmp_path: Path, redis_url: str) -> None:
    """An untagged block is the job's language: under cpp this program is correct, under the
    default (python3) a compile error. judge and submit must agree."""
    problems = _write(tmp_path / "p.jsonl", PROBLEM)
    jobs = _write(tmp_path / "j.jsonl", {"problem_id": "ux/add", "completion": CPP_UNTAGGED, "job_id": "c1", "language": "cpp"})
    judged = _cli("judge", str(problems), str(jobs), "--no-progress")
    _no_traceback(judged, 0)
    local = json.loads(judged.stdout)
    assert (local["verdict"], local["language"]) == ("OK", "cpp")
    assert _cli("load", str(problems), "--redis", redis_url).returncode == 0
    node = FleetWorker(redis_url, tmp_path, concurrency=1).start()
    try:
        submitted = _cli("submit", str(jobs), "--redis", redis_url, "--no-progress", "--timeout", "120")
    finally:
        node.stop(timeout=15)
    _no_traceback(submitted, 0)
    assert "no worker has sent a heartbeat" not in submitted.stderr  # one was running
    fleet = json.loads(submitted.stdout)
    assert (fleet["verdict"], fleet["language"], fleet["reward"]) == ("OK", "cpp", 1.0), fleet


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0, reason="needs setpriv and root to drop capabilities")
def test_judge_without_privileges_still_judges_and_says_once_what_is_missing_and_what_to_do(tmp_path: Path) -> None:
    """What a user who is not root gets: namespaces refused, the verdicts still right, one
    warning per judging process naming the missing layers and how to get them."""
    problems = _write(tmp_path / "p.jsonl", PROBLEM)
    jobs = _write(tmp_path / "j.jsonl", {"problem_id": "ux/add", "completion": "```python\nprint(sum(map(int, input().split())))\n```"})
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    proc = subprocess.run(
        ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs",
         sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", "1", "--no-progress"],
        env=env, capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    _no_traceback(proc, 0)
    assert json.loads(proc.stdout)["verdict"] == "OK"
    (warning,) = [ln for ln in proc.stderr.splitlines() if "ISOLATION" in ln]
    assert warning.startswith("cpfleet: WARNING: SANDBOX ISOLATION INCOMPLETE (forkserver): missing [")
    assert "netns" in warning and "for every layer run as root" in warning and "docs/security.md" in warning


# --- cpfleet prepare on a local file, as people get it wrong --------------------------------

TACO_ROW = {"question": "echo", "input_output": json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})}


def test_prepare_with_a_local_file_as_data_files_says_to_use_dataset_without_asking_the_hub(tmp_path: Path) -> None:
    rows = _write(tmp_path / "taco.jsonl", TACO_ROW)
    proc = _cli("prepare", "--format", "taco", "--data-files", str(rows), "--out", str(tmp_path / "o.jsonl"),
                env_extra={"HF_HUB_OFFLINE": "1"})
    _no_traceback(proc, 2)
    assert f"--data-files {rows} is a file here" in proc.stderr and f"pass it as --dataset {rows}" in proc.stderr
    ok = _cli("prepare", "--format", "taco", "--dataset", str(rows), "--out", str(tmp_path / "o.jsonl"), "--no-progress")
    _no_traceback(ok, 0)
    assert "read 1, kept 1" in ok.stderr


def test_an_extra_argument_is_named_by_the_subcommand_and_prepare_says_where_its_file_goes(tmp_path: Path) -> None:
    """`cpfleet prepare FILE --out OUT`, as `judge` and `load` take a file: the refusal came as
    `cpfleet: error` under the top-level usage, with no word of --dataset."""
    rows = _write(tmp_path / "taco.jsonl", TACO_ROW)
    proc = _cli("prepare", str(rows), "--out", str(tmp_path / "o.jsonl"))
    _no_traceback(proc, 2)
    assert f"cpfleet prepare: error: unrecognized arguments: {rows}; the dataset to convert is --dataset" in proc.stderr
    assert "usage: cpfleet prepare" in proc.stderr and not (tmp_path / "o.jsonl").exists()
    extra = _cli("judge", str(rows), str(rows), "surplus")
    _no_traceback(extra, 2)
    assert "cpfleet judge: error: unrecognized arguments: surplus" in extra.stderr


def _code_contests_row(name: str, tests: dict) -> dict:
    return {"name": name, "description": "d", "public_tests": tests, "private_tests": tests,
            "generated_tests": {"input": [], "output": []}}


def test_prepare_refuses_a_local_file_whose_column_mixes_types_instead_of_converting_its_text_as_json(
        tmp_path: Path) -> None:
    """One row whose tests are numbers made ``datasets`` type the column as JSON and decode every
    row's text in it: a well-formed row expecting the output ``"yes"`` (quotes included) was
    converted expecting ``yes``, which would pay a program that prints the wrong answer."""
    quoted = _code_contests_row("quoted", {"input": ["1 2\n"], "output": ['"yes"']})
    numbers = _code_contests_row("numbers", {"input": [1], "output": [2]})
    rows = _write(tmp_path / "cc.jsonl", quoted, numbers)
    out = tmp_path / "o.jsonl"
    proc = _cli("prepare", "--dataset", str(rows), "--out", str(out), "--no-progress")
    _no_traceback(proc, 2)
    assert f"cpfleet prepare: {rows}: column public_tests.input holds values of different types" in proc.stderr
    assert not out.exists()
    _write(rows, quoted)  # the same row alone keeps its text
    ok = _cli("prepare", "--dataset", str(rows), "--out", str(out), "--no-progress")
    _no_traceback(ok, 0)
    assert json.loads(out.read_text())["hidden_tests"][0]["output"] == '"yes"'


def test_prepare_in_the_wrong_format_keeps_nothing_and_says_so(tmp_path: Path) -> None:
    rows = _write(tmp_path / "taco.jsonl", TACO_ROW, {"question": "no tests here"})
    proc = _cli("prepare", "--format", "code_contests", "--dataset", str(rows), "--out", str(tmp_path / "o.jsonl"), "--no-progress")
    _no_traceback(proc, 2)
    assert "read 2, kept 0" in proc.stderr
    assert "no problem kept from 2 rows (is --format code_contests the dataset's schema?)" in proc.stderr
    # a row missing its tests field in the right format: skipped and counted, the rest kept
    right = _cli("prepare", "--format", "taco", "--dataset", str(rows), "--out", str(tmp_path / "o.jsonl"), "--no-progress")
    _no_traceback(right, 0)
    assert "read 2, kept 1, skipped 1" in right.stderr and "skipped 1: no input_output tests" in right.stderr


def test_prepare_names_an_empty_file_and_the_first_bad_json_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    proc = _cli("prepare", "--format", "taco", "--dataset", str(empty), "--out", str(tmp_path / "o.jsonl"))
    _no_traceback(proc, 2)
    assert f"cpfleet prepare: {empty}: empty file" in proc.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(TACO_ROW) + "\n{not json\n")
    proc = _cli("prepare", "--format", "taco", "--dataset", str(broken), "--out", str(tmp_path / "o.jsonl"))
    _no_traceback(proc, 2)
    assert f"cpfleet prepare: {broken}:2: invalid JSON: " in proc.stderr


def test_no_code_feedback_names_a_block_in_a_language_not_judged_here(tmp_path: Path) -> None:
    problems = _write(tmp_path / "p.jsonl", PROBLEM, {**PROBLEM, "id": "ux/add-cpp", "languages": ["cpp"]})
    jobs = _write(
        tmp_path / "j.jsonl",
        {"problem_id": "ux/add", "completion": "```rust\nfn main() {}\n```", "job_id": "rust"},
        {"problem_id": "ux/add", "completion": "Output:\n```text\n3\n```", "job_id": "text"},
        {"problem_id": "ux/add-cpp", "completion": "```python\nprint(3)\n```", "job_id": "py-on-cpp"},
        {"problem_id": "ux/add", "completion": "```python\na, b = map(int, input().split())\nprint(a + b)\n", "job_id": "unclosed"},
    )
    proc = _cli("judge", str(problems), str(jobs), "--no-progress")
    _no_traceback(proc, 0)
    got = {r["job_id"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert got["rust"]["verdict"] == "NO_CODE" and "(found ```rust: not a language judged here)" in got["rust"]["observation"]
    assert got["text"]["verdict"] == "NO_CODE" and "(found" not in got["text"]["observation"]  # sample output is no language
    assert got["py-on-cpp"]["verdict"] == "NO_CODE"
    assert got["py-on-cpp"]["observation"].startswith("No code found in cpp (found ```python: not a language judged here)")
    assert got["unclosed"]["verdict"] == "OK"  # a block cut by the token limit runs to the end of the text


def test_run_with_an_input_where_a_file_was_wanted_says_how_to_pass_it(tmp_path: Path) -> None:
    program = tmp_path / "echo.py"
    program.write_text("print(input())\n")
    proc = _cli("run", str(program), "--local", "--stdin", "1 2")
    _no_traceback(proc, 2)
    assert "--stdin 1 2: no such file (--stdin takes an input file, or - for this process's stdin" in proc.stderr


def test_the_fleet_gives_each_no_code_completion_its_own_feedback_not_a_cached_one(tmp_path: Path, redis_url: str) -> None:
    from cpfleet import FleetClient

    node = FleetWorker(redis_url, tmp_path, concurrency=1).start()
    try:
        with FleetClient(redis_url, timeout=120) as fleet:
            fleet.register_problems([PROBLEM])
            first = fleet.submit("ux/add", "```rust\nfn main() {}\n```").result(timeout=150)
            second = fleet.submit("ux/add", "I do not know.").result(timeout=150)
    finally:
        node.stop(timeout=15)
    assert (first.verdict, second.verdict) == ("NO_CODE", "NO_CODE")
    assert "(found ```rust" in first.observation
    assert not second.cache_hit and "(found" not in second.observation


def test_a_client_closed_with_jobs_queued_says_it_withdrew_its_own_jobs(redis_url: str, tmp_path: Path) -> None:
    """What a trainer script sees on Ctrl-C inside ``with FleetClient()`` (or any close with jobs
    unanswered): its own jobs withdrawn, worded as such, not as some other client's orphans."""
    from fleet_helpers import store_problems

    store_problems(redis_url, "ux/echo")
    script = (
        "from cpfleet import FleetClient\n"
        f"with FleetClient({redis_url!r}, queue='ux-nobody-listens') as fleet:\n"
        "    fleet.submit_many([('ux/echo', 'print(1)')] * 3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    _no_traceback(proc, 0)
    assert "withdrew 3 queued job(s) nobody waits for any more (this client's" in proc.stderr
    assert "gone clients" not in proc.stderr


def test_a_job_line_without_a_problem_id_says_it_is_missing_not_of_the_wrong_type(tmp_path: Path) -> None:
    """A job with inline tests (as FleetClient takes them) was told "'problem_id' must be a string"."""
    problems = _write(tmp_path / "p.jsonl", PROBLEM)
    jobs = _write(tmp_path / "j.jsonl", {"tests": PROBLEM["hidden_tests"], "completion": "print(12)", "job_id": "t1"})
    proc = _cli("judge", str(problems), str(jobs), "--no-progress")
    _no_traceback(proc, 2)
    assert "j.jsonl:1: skipped job line: job 't1': no 'problem_id' (a JOBS line names a problem" in proc.stderr


def test_files_the_wrong_way_round_are_named_as_such(tmp_path: Path, redis_url: str) -> None:
    problems = _write(tmp_path / "p.jsonl", PROBLEM)
    jobs = _write(tmp_path / "j.jsonl", {"problem_id": "ux/add", "completion": "print(3)"})
    swapped = _cli("judge", str(jobs), str(problems))
    _no_traceback(swapped, 2)
    assert f"{jobs} holds jobs ({{problem_id, completion}}), not problems: the problem file comes first" in swapped.stderr
    twice = _cli("judge", str(problems), str(problems))
    _no_traceback(twice, 2)
    assert f"{problems} holds problems, not jobs: cpfleet judge PROBLEMS JOBS" in twice.stderr
    submitted = _cli("submit", str(problems), "--redis", redis_url)
    _no_traceback(submitted, 2)
    assert f"{problems} holds problems, not jobs: upload them with cpfleet load" in submitted.stderr
    loaded = _cli("load", str(jobs), "--redis", redis_url)
    _no_traceback(loaded, 2)
    assert f"{jobs} holds jobs ({{problem_id, completion}}), not problems" in loaded.stderr


def test_submit_with_no_worker_running_says_the_jobs_wait_for_one(tmp_path: Path, redis_url: str) -> None:
    problems = _write(tmp_path / "p.jsonl", PROBLEM)
    jobs = _write(tmp_path / "j.jsonl", {"problem_id": "ux/add", "completion": "print(3)", "job_id": "w1"})
    assert _cli("load", str(problems), "--redis", redis_url).returncode == 0
    proc = _cli("submit", str(jobs), "--redis", redis_url, "--timeout", "1", "--no-progress")
    _no_traceback(proc, 3)  # no job got a reward
    assert ("warning: no worker has sent a heartbeat to this Redis: the jobs wait in queue 'cpfleet' until one "
            "starts (cpfleet worker --redis URL, or cpfleet up), or for 1 s, then end INTERNAL") in proc.stderr
    assert json.loads(proc.stdout)["infra_message"] == "no result within 1s"


def test_submit_to_a_queue_no_worker_ever_consumed_says_the_jobs_wait_there(tmp_path: Path, redis_url: str) -> None:
    """A typo in --queue, with workers running on the right one, was the same silent wait for the
    whole deadline as no worker at all."""
    problems = _write(tmp_path / "p.jsonl", PROBLEM)
    jobs = _write(tmp_path / "j.jsonl", {"problem_id": "ux/add", "completion": "print(3)", "job_id": "q1"})
    assert _cli("load", str(problems), "--redis", redis_url).returncode == 0
    node = FleetWorker(redis_url, tmp_path, concurrency=1).start()
    try:
        typo = _cli("submit", str(jobs), "--redis", redis_url, "--queue", "cpflet", "--timeout", "1", "--no-progress")
        right = _cli("submit", str(jobs), "--redis", redis_url, "--timeout", "120", "--no-progress")
    finally:
        node.stop(timeout=15)
    _no_traceback(typo, 3)
    assert ("warning: no worker has ever consumed queue 'cpflet' on this Redis: the jobs wait there until one "
            "does (cpfleet worker --queues cpflet), or for 1 s, then end INTERNAL") in typo.stderr
    _no_traceback(right, 0)
    assert "has ever consumed" not in right.stderr and not json.loads(right.stdout)["infra_error"]


def test_a_dataset_in_its_own_schema_given_as_problems_points_at_prepare(tmp_path: Path) -> None:
    rows = _write(tmp_path / "taco.jsonl", TACO_ROW)
    jobs = _write(tmp_path / "j.jsonl", {"problem_id": "taco/test/0", "completion": "print(1)"})
    proc = _cli("judge", str(rows), str(jobs))
    _no_traceback(proc, 2)
    assert "a problem record needs at least id and hidden_tests (docs/problems.md); a dataset in its own schema" in proc.stderr
    assert "is converted by cpfleet prepare" in proc.stderr
