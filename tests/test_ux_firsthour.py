"""A new user's first hour, walked literally from a fresh clone: each test is a mistake such a
user made (a zero or negative deadline, a key the docs spelled wrong, a file path handed to an
API that wants problems) and what it must give back: one line naming the mistake and the
documented exit status through the real CLI, a clear error through the real client, never a
traceback or a silent default. Real redis-server, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
JOB = {"problem_id": "ux/add", "completion": "```python\nprint(3)\n```"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    return subprocess.run([sys.executable, "-m", "cpfleet", *args], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [
        ("submit", "--timeout", "-1"),
        ("submit", "--timeout", "0"),
        ("submit", "--max-in-flight", "0"),
        ("run", "--timeout", "-5"),
        ("serve", "--timeout", "0"),
        ("serve", "--wait", "-1"),
        ("serve", "--max-backlog", "0"),
    ],
)
def test_a_deadline_or_bound_at_or_below_zero_is_a_usage_error(
    tmp_path: Path, redis_url: str, command: str, option: str, value: str
) -> None:
    """`cpfleet submit --timeout -1` against a live Redis, --max-in-flight 0 and the like are
    the user's typo: named in one line with exit 2 before anything connects, not FleetClient's
    ValueError as a traceback (exit 1) nor a bound quietly made 1."""
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps(JOB) + "\n")
    prog = tmp_path / "p.py"
    prog.write_text("print(1)\n")
    target = {"submit": [str(jobs)], "run": [str(prog)], "serve": []}[command]
    proc = _cli(command, *target, "--redis", redis_url, f"{option}={value}")
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    assert option in proc.stderr and repr(value) in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"jobs": [{"problem_id": "ux/add", "completion": "x", "reward": "fraction"}]}, "'reward'"),
        ({"jobs": [{"problem_id": "ux/add", "completion": "x", "timeout": 5}]}, "'timeout'"),
        ({"jobs": [{"problem_id": "ux/add", "completion": "x"}], "reward": "fraction"}, "'reward'"),
    ],
)
def test_v1_judge_refuses_a_key_it_does_not_read(redis_url: str, payload: dict, named: str) -> None:
    """A key /v1/judge does not read (a misspelt `reward` for `reward_shape`) is a 422 naming it
    and listing the accepted ones, before anything is queued: ignored, it would leave the user
    with all_or_nothing rewards and no word said."""
    from gateway_helpers import http, serving

    from cpfleet.gateway import ServeConfig

    with serving(ServeConfig(redis_url=redis_url, timeout_s=60)) as base:
        status, body, _ = http(f"{base}/v1/judge", payload)
    assert status == 422, (status, body)
    assert named in body["error"] and "reward_shape" in body["error"], body


def test_the_docs_name_the_keys_v1_judge_reads() -> None:
    from cpfleet.gateway.native import JOB_KEYS

    for doc in ("docs/trainers.md", "docs/gateway.md"):
        row = next(line for line in (REPO / doc).read_text().splitlines() if line.startswith("| `POST /v1/judge`"))
        for key in JOB_KEYS:
            if key not in ("problem_id", "tests"):
                assert f"{key}?" in row or key == "completion" and "completion" in row, (doc, key, row)
        assert "reward?" not in row, (doc, row)


@pytest.mark.parametrize("sharded", [False, True], ids=["FleetClient", "ShardedFleetClient"])
def test_register_problems_given_a_path_or_one_problem_says_so(redis_url: str, tmp_path: Path, sharded: bool) -> None:
    """`fleet.register_problems("problems.jsonl")` iterated the path's characters and
    `register_problems({...one problem...})` its keys; both said "problem #0: a problem must be
    an object, got str". Now each names the mistake and the fix, and stores nothing."""
    import redis

    from cpfleet import FleetClient, ProblemFormatError, ShardedFleetClient

    problem = {"id": "ux/fh-add", "public_tests": [{"input": "1 2\n", "output": "3\n"}],
               "hidden_tests": [{"input": "5 7\n", "output": "12\n"}]}
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps(problem) + "\n")
    fleet = ShardedFleetClient([redis_url]) if sharded else FleetClient(redis_url)
    with fleet:
        for wrong in (str(path), path):
            with pytest.raises(ProblemFormatError, match=r"load_problems\(path\)|cpfleet load"):
                fleet.register_problems(wrong)  # type: ignore[arg-type]
        with pytest.raises(ProblemFormatError, match=r"one problem: pass it in a list"):
            fleet.register_problems(problem)  # type: ignore[arg-type]
    assert not redis.Redis.from_url(redis_url).keys("*fh-add*")


def test_a_job_of_the_wrong_shape_is_a_job_format_error_naming_it(redis_url: str) -> None:
    """`submit_many("demo/a-plus-b")` (a string, not jobs), a job mapping without `problem_id`
    and an int problem id are each a JobFormatError (a CpfleetError and a ValueError) saying
    what a job is and which one was wrong, not "not enough values to unpack" or a bare
    KeyError from deep inside; nothing of the call is published."""
    import redis

    from cpfleet import CpfleetError, FleetClient, JobFormatError

    problem = {"id": "ux/fh-shape", "public_tests": [{"input": "1 2\n", "output": "3\n"}],
               "hidden_tests": [{"input": "5 7\n", "output": "12\n"}]}
    good = ("ux/fh-shape", "```python\nprint(3)\n```")
    with FleetClient(redis_url) as fleet:
        fleet.register_problems([problem])
        cases: list[tuple[object, str]] = [
            ("ux/fh-shape", "takes a list of jobs"),
            ({"problem_id": "ux/fh-shape", "completion": "x"}, "takes a list of jobs"),
            ([good, {"completion": "x"}], r"job #1: .*needs 'problem_id' or 'tests'"),
            ([good, "ux/fh-shape"], r"job #1: a job is \(problem_id, completion\)"),
            ([good, ("ux/fh-shape", "x", "extra")], r"job #1: a job is \(problem_id, completion\)"),
            ([{"problem_id": 5, "completion": "x"}], r"job #0: problem_id must be a non-empty"),
        ]
        for jobs, match in cases:
            with pytest.raises(JobFormatError, match=match) as info:
                fleet.submit_many(jobs)  # type: ignore[arg-type]
            assert isinstance(info.value, CpfleetError) and isinstance(info.value, ValueError)
        assert redis.Redis.from_url(redis_url).llen(fleet.queue) == 0  # nothing of any call sent


def test_cpfleet_run_names_a_missing_or_wrong_file_in_words(tmp_path: Path) -> None:
    """`cpfleet run nope.py` says "PATH: no such file" (exit 2) as every other command does, not
    Python's "[Errno 2] No such file or directory: 'nope.py'". --local: no Redis is involved."""
    missing = tmp_path / "nope.py"
    for args, needle in (
        ([str(missing)], f"{missing}: no such file"),
        ([str(tmp_path)], f"{tmp_path}: is a directory"),
        (["--batch", str(tmp_path / "runs.jsonl")], f"{tmp_path / 'runs.jsonl'}: no such file"),
    ):
        proc = _cli("run", *args, "--local")
        assert proc.returncode == 2, (proc.returncode, proc.stderr)
        assert f"cpfleet run: {needle}" in proc.stderr, proc.stderr
        assert "Errno" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_redis_url_naming_a_database_the_server_lacks_says_so(redis_url: str) -> None:
    """redis://HOST:PORT/99 on a Redis with 16 databases: the client and `cpfleet worker` say
    what to fix (more than redis's "DB index is out of range"), and the worker refuses to start
    (exit 3, as for a wrong password) rather than wait for a Redis that answers: waiting never
    heals a wrong URL."""
    from cpfleet import BrokerUnavailable, FleetClient

    wrong = redis_url.rsplit("/", 1)[0] + "/99"
    with pytest.raises(BrokerUnavailable, match=r"no database .*below the server's `databases` setting"):
        FleetClient(wrong)
    proc = _cli("worker", "--redis", wrong)
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert "no database" in proc.stderr and "waits for it" not in proc.stderr, proc.stderr


def _reply_streams_emptied(redis_url: str) -> bool:
    """Every client reply stream on this Redis exists and is empty: delivered and trimmed."""
    import redis

    from cpfleet.core.protocol import reply_stream_key

    with redis.Redis.from_url(redis_url) as r:
        keys = list(r.scan_iter(match=reply_stream_key("*"), _type="stream"))
        return bool(keys) and all(r.xlen(k) == 0 for k in keys)


def test_ctrl_c_on_submit_writes_every_result_it_counted(redis_url: str, tmp_path: Path) -> None:
    """`cpfleet submit` prints results in input order, holding those that finish ahead of an
    earlier job. On Ctrl-C every result its summary counts ("3 of 4 judged") is on stdout, the
    held ones too (out of order, each with its job_id), not only those before the first job
    still running."""
    import signal

    from fleet_helpers import FleetWorker, wait_until

    problems = tmp_path / "problems.jsonl"
    slow = {"id": "ux/fh-slow", "public_tests": [{"input": "\n", "output": "1\n"}],
            "hidden_tests": [{"input": "\n", "output": "1\n"}], "time_limit_s": 60}
    add = {"id": "ux/fh-add2", "public_tests": [{"input": "1 2\n", "output": "3\n"}],
           "hidden_tests": [{"input": "5 7\n", "output": "12\n"}]}
    problems.write_text(json.dumps(slow) + "\n" + json.dumps(add) + "\n")
    jobs = tmp_path / "jobs.jsonl"
    first = {"problem_id": "ux/fh-slow", "completion": "```python\nimport time\ntime.sleep(40)\nprint(1)\n```", "job_id": "slow"}
    fast = [{"problem_id": "ux/fh-add2", "completion": f"```python\na, b = map(int, input().split())\nprint(a + b + {k})\n```",
             "job_id": f"fast{k}"} for k in range(3)]
    jobs.write_text("".join(json.dumps(j) + "\n" for j in [first, *fast]))
    assert _cli("load", str(problems), "--redis", redis_url).returncode == 0
    node = FleetWorker(redis_url, tmp_path, concurrency=2).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    out = tmp_path / "out.jsonl"
    try:
        with out.open("w") as stdout:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cpfleet", "submit", str(jobs), "--redis", redis_url, "--no-cache", "--no-progress"],
                stdout=stdout, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            # the three fast jobs are judged (the worker logs each) while the slow one sleeps
            assert wait_until(lambda: node.log_text().count("succeeded in") >= 3, timeout=240), node.log_text()[-3000:]
            # each task pushed its reply before the worker logged it; the client trims its reply
            # stream only of entries it has delivered, so an empty stream means it holds all three
            assert wait_until(lambda: _reply_streams_emptied(redis_url), timeout=120)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
    finally:
        node.stop(timeout=60)
    assert proc.returncode == 130, err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    counted = int(err.split("interrupted: ", 1)[1].split(" of ", 1)[0])
    assert counted == 3 and len(lines) == counted, (err, lines)
    assert sorted(r["job_id"] for r in lines) == ["fast0", "fast1", "fast2"]


def test_prepare_of_a_hub_dataset_without_the_hub_says_how_to_get_it_here(tmp_path: Path) -> None:
    """Offline, `cpfleet prepare --dataset deepmind/code_contests` says in one line what to do
    (download it where there is a network and pass the folder), not only that the Hub cannot
    be reached. HF_HUB_OFFLINE=1 makes the same failure without touching any network (and
    without 30 s of retries)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")} | {
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run([sys.executable, "-m", "cpfleet", "prepare", "--dataset", "deepmind/code_contests",
                           "--out", str(tmp_path / "p.jsonl"), "--no-progress"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "huggingface-cli download deepmind/code_contests" in lines[0] and "--dataset DIR" in lines[0], lines[0]
    assert not (tmp_path / "p.jsonl").exists()


def test_an_output_file_in_a_missing_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    """`cpfleet validate P --json out/report.json`, `cpfleet prepare --out out/p.jsonl` and the
    README's `python -m cpfleet.demo.problems -o out/demo.jsonl` check the output path with the
    arguments: where `out/` does not exist, one line naming the folder, exit 2, nothing
    written, rather than all the work done and then a FileNotFoundError traceback."""
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "ux/fh-v", "public_tests": [{"input": "1 2\n", "output": "3\n"}],
                                    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}],
                                    "correct_solutions": ["a, b = map(int, input().split())\nprint(a + b)\n"]}) + "\n")
    missing = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    runs = [
        ["-m", "cpfleet", "validate", str(problems), "--no-progress", "--json", str(missing / "report.json")],
        ["-m", "cpfleet", "prepare", "--dataset", str(problems), "--no-progress", "--out", str(missing / "p.jsonl")],
        ["-m", "cpfleet.demo.problems", "-o", str(missing / "demo.jsonl")],
        ["-m", "cpfleet.demo.problems", "-o", str(tmp_path / "d.jsonl"), "--jobs-out", str(missing / "jobs.jsonl")],
        ["-m", "cpfleet", "prepare", "--dataset", str(problems), "--out", str(tmp_path)],
    ]
    for argv in runs:
        proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
        assert proc.returncode == 2, (argv, proc.returncode, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (argv, proc.stderr)
        assert f"folder {missing} does not exist" in proc.stderr or "is a folder" in proc.stderr, (argv, proc.stderr)
    assert not missing.exists() and not (tmp_path / "d.jsonl").exists()


def test_a_negative_max_public_shown_is_refused_not_sliced(tmp_path: Path, fork_runner: object) -> None:
    """`cpfleet judge --max-public-shown -1` showed all public tests but the last (a Python
    slice [:-1]) without a word. The CLI refuses it (exit 2), and so do judge_locally and the
    local pool, before any job."""
    from cpfleet import judge_locally
    from cpfleet.core.problem import Problem
    from cpfleet.jobs.pool import judge_iter

    record = {"id": "ux/fh-shown", "public_tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "2 2\n", "output": "4\n"}],
              "hidden_tests": [{"input": "5 7\n", "output": "12\n"}]}
    problems, jobs = tmp_path / "p.jsonl", tmp_path / "j.jsonl"
    problems.write_text(json.dumps(record) + "\n")
    jobs.write_text(json.dumps({"problem_id": "ux/fh-shown", "completion": "```python\nprint(3)\n```"}) + "\n")
    proc = _cli("judge", str(problems), str(jobs), "--max-public-shown", "-1")
    assert proc.returncode == 2 and "--max-public-shown" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    problem = Problem.from_dict(record)
    with pytest.raises(ValueError, match="max_public_shown must be >= 0"):
        judge_locally(problem, "```python\nprint(3)\n```", fork_runner, max_public_shown=-1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_public_shown must be >= 0"):
        next(judge_iter({problem.id: problem}, [{"problem_id": problem.id, "completion": "x"}], max_public_shown=-1))


BROKEN_TESTS = '{"inputs": ["1 2\\n"], "outputs": ["3\\n"]'  # the closing brace lost


def test_inline_tests_that_are_broken_json_are_named_so_not_an_unknown_problem(redis_url: str) -> None:
    """Inline tests as JSON text with a syntax error are not taken for a problem id: TRL, verl
    and the HTTP endpoints say the tests are not valid JSON, where it breaks, rather than
    "unknown problem '{"inputs": ...'", which sends the user to look for a problem never
    meant; /v1/judge also refuses a `tests` string that is not JSON at all."""
    from gateway_helpers import http, serving

    from cpfleet import InlineProblemError, TRLReward, compute_score
    from cpfleet.gateway import ServeConfig

    answer = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    reward = TRLReward(redis_url, tests_column="verification_info")
    with pytest.raises(InlineProblemError, match="not valid JSON"):
        reward(prompts=["p"], completions=[answer], verification_info=[BROKEN_TESTS])
    with pytest.raises(InlineProblemError, match="not valid JSON"):
        compute_score("d", answer, BROKEN_TESTS, redis_url=redis_url)
    with serving(ServeConfig(redis_url=redis_url, timeout_s=60)) as base:
        for path, payload in (
            ("/v1/judge", {"jobs": [{"tests": BROKEN_TESTS, "completion": answer}]}),
            ("/v1/judge", {"jobs": [{"tests": "garbage", "completion": answer}]}),
            ("/get_reward", {"query": [answer], "prompts": [""], "labels": [BROKEN_TESTS]}),
            ("/slime", {"prompt": "", "response": answer, "label": BROKEN_TESTS}),
        ):
            status, body, _ = http(f"{base}{path}", payload)
            assert status == 422, (path, status, body)
            assert "not valid JSON" in body["error"] or "a problem id goes in problem_id" in body["error"], body
            assert "unknown problem" not in body["error"], body


@pytest.mark.parametrize(("command", "value"), [("judge", "0"), ("judge", "-2"), ("validate", "0")])
def test_local_judging_refuses_a_worker_count_below_one_before_reading_any_file(
        tmp_path: Path, command: str, value: str) -> None:
    """`cpfleet judge --workers 0` is the same usage error as `cpfleet up --workers 0` (the one
    rule of argtypes.positive_int): one line naming --workers and the value, exit 2, before the
    files are read, so the first error a user sees is the one they typed."""
    missing = tmp_path / "nope.jsonl"
    files = [str(missing), str(missing)] if command == "judge" else [str(missing)]
    proc = _cli(command, *files, "--workers", value)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "--workers" in proc.stderr and repr(value) in proc.stderr, proc.stderr
    assert "no such file" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("value", ["0", "-2"])
def test_cpfleet_up_refuses_a_worker_count_below_one(value: str) -> None:
    """`cpfleet up --workers 0` and `--workers -2` are a usage error naming --workers, before
    anything starts: not 0 read as "not given" (a process per CPU, silently), nor a refusal in
    the name of CPFLEET_CONCURRENCY, a variable the user never set."""
    proc = _cli("up", "--ephemeral", "--workers", value)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "--workers" in proc.stderr and "CPFLEET_CONCURRENCY" not in proc.stderr, proc.stderr
    assert "fleet is up" not in proc.stdout + proc.stderr


PROBLEM = {"id": "ux/add", "public_tests": [{"input": "1 2\n", "output": "3\n"}], "hidden_tests": [{"input": "2 2\n", "output": "4\n"}]}


@pytest.mark.parametrize("which", ["jobs", "problems"])
@pytest.mark.parametrize("shape", ["array", "pretty"])
def test_a_json_document_given_for_jsonl_is_named_so_not_only_as_bad_lines(tmp_path: Path, which: str, shape: str) -> None:
    record = JOB if which == "jobs" else PROBLEM
    document = tmp_path / f"{which}.json"
    document.write_text(json.dumps([record, record], indent=1) if shape == "array" else json.dumps(record, indent=2))
    jsonl = tmp_path / "other.jsonl"
    jsonl.write_text(json.dumps(PROBLEM if which == "jobs" else JOB) + "\n")
    args = (str(jsonl), str(document)) if which == "jobs" else (str(document), str(jsonl))
    proc = _cli("judge", *args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{document} looks like one JSON document" in proc.stderr and "one JSON object per line" in proc.stderr, proc.stderr


def test_prepare_names_a_corrupt_local_file_in_one_line_as_a_usage_error(tmp_path: Path) -> None:
    for name in ("data.parquet", "data.arrow"):
        corrupt = tmp_path / name
        corrupt.write_text("hello, not a table\n")
        proc = _cli("prepare", "--dataset", str(corrupt), "--out", str(tmp_path / "out.jsonl"), "--no-progress")
        assert proc.returncode == 2, (name, proc.returncode, proc.stderr)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"cpfleet prepare: {corrupt}: "), (name, proc.stderr)
        assert not (tmp_path / "out.jsonl").exists()


def test_prepare_of_a_jobs_file_says_it_holds_jobs_not_to_pass_a_format(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps(JOB) + "\n")
    proc = _cli("prepare", "--dataset", str(jobs), "--out", str(tmp_path / "out.jsonl"), "--no-progress")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "JOBS file" in proc.stderr and "cpfleet judge PROBLEMS JOBS" in proc.stderr and "pass --format" not in proc.stderr, proc.stderr


def test_submit_before_any_load_says_to_upload_the_problems(redis_url: str, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps(JOB) + "\n")
    proc = _cli("submit", str(jobs), "--redis", redis_url, "--no-progress")
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "UNKNOWN_PROBLEM"
    assert "holds no problem 'ux/add': upload the problem file first (cpfleet load PROBLEMS" in proc.stderr, proc.stderr


def test_submit_that_loses_redis_writes_the_results_it_had_before_its_one_line(tmp_path: Path) -> None:
    """A slow first job holds the later ones' results for input order; Redis going away then
    failed the run with exit 3, and those judged results were never written."""
    import time

    import redis
    from fleet_helpers import FleetWorker

    from cpfleet.core.store import register_problems
    from cpfleet.fleet.redis_server import RedisServer

    problem = {**PROBLEM, "id": "ux/slow", "time_limit_s": 30}
    jobs = tmp_path / "jobs.jsonl"
    lines = [{"job_id": "spin", "problem_id": "ux/slow", "completion": "```python\nwhile True:\n    pass\n```"}]
    lines += [{"job_id": f"fast{i}", "problem_id": "ux/slow", "completion": f"```python\nprint(sum(map(int, input().split())))  # {i}\n```"}
              for i in range(3)]
    jobs.write_text("".join(json.dumps(j) + "\n" for j in lines))
    server = RedisServer().start()
    try:
        client = redis.Redis.from_url(server.url)
        register_problems(client, [problem])
        client.close()
        with FleetWorker(server.url, tmp_path, concurrency=2) as worker:
            proc = subprocess.Popen([sys.executable, "-m", "cpfleet", "submit", str(jobs), "--redis", server.url, "--no-progress"],
                                    cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env={k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")})
            end = time.monotonic() + 120
            while sum(f'"job_id":"fast{i}/' in worker.log_text() for i in range(3)) < 3:  # judged and replied
                assert time.monotonic() < end and proc.poll() is None, worker.log_text()[-3000:]
                time.sleep(0.2)
            time.sleep(1.0)  # the client's reader takes the replies (it reads every few ms)
            server.stop(kill=True)
            out, err = proc.communicate(timeout=240)
    finally:
        server.close()
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    written = [json.loads(line) for line in out.splitlines()]
    assert sorted(r["job_id"] for r in written) == ["fast0", "fast1", "fast2"], out
    assert all(r["verdict"] == "OK" and r["reward"] == 1.0 for r in written), out
    assert "stopped: 3 of 4 judged" in err and "unreachable" in err, err
