"""``cpfleet demo`` and ``cpfleet up`` as a user runs them: real processes, real signals, and
nothing left running afterwards.

Leftovers are found with a subreaper: the command runs under a small harness that has
PR_SET_CHILD_SUBREAPER set, so every process the command (or its descendants) leaves behind is
re-parented to the harness instead of init, where the harness can see, report and kill it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from cpfleet.fleet.local import LocalFleet
from cpfleet.fleet.processes import alive, descendants, http_get

REPO = Path(__file__).resolve().parents[1]
CPFLEET = [sys.executable, "-m", "cpfleet"]

HARNESS = textwrap.dedent(
    """
    import ctypes, json, os, signal, subprocess, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    args = sys.argv[1:]
    trigger = None
    if args[0] == "--signal-on":  # send a signal to the command when its stderr shows TEXT
        trigger, sig, args = args[1], int(args[2]), args[3:]
    proc = subprocess.Popen(args, stdout=sys.stdout, stderr=subprocess.PIPE if trigger else sys.stderr, text=True)
    if trigger:
        sent = False
        for line in proc.stderr:
            sys.stderr.write(line)
            if not sent and trigger in line:
                proc.send_signal(sig)
                sent = True
    rc = proc.wait()

    def live_children():
        kids = []
        for e in os.listdir("/proc"):
            if not e.isdigit():
                continue
            try:
                stat = open(f"/proc/{e}/stat", "rb").read()
            except OSError:
                continue
            rest = stat[stat.rfind(b")") + 2:].split()
            if int(rest[1]) == os.getpid() and rest[0] not in (b"Z", b"X"):
                cmd = open(f"/proc/{e}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace")
                kids.append((int(e), cmd))
        return kids

    left = []
    for _ in range(20):  # orphans may take a moment to be re-parented
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        left = live_children()
        if not left:
            break
        time.sleep(0.1)
    for pid, _ in left:
        os.kill(pid, signal.SIGKILL)
    print("HARNESS " + json.dumps({"rc": rc, "left": left}), file=sys.stderr)
    """
)


def run_harnessed(args: list[str], timeout: float) -> tuple[int, str, str, list[list[Any]]]:
    proc = subprocess.run(
        [sys.executable, "-c", HARNESS, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )
    m = re.search(r"^HARNESS (.*)$", proc.stderr, re.M)
    assert m, f"harness did not report:\n{proc.stderr[-3000:]}"
    report = json.loads(m.group(1))
    return int(report["rc"]), proc.stdout, proc.stderr, report["left"]


@pytest.mark.slow
def test_cpfleet_demo_gets_every_expected_verdict_and_leaves_nothing_running() -> None:
    rc, out, err, left = run_harnessed([*CPFLEET, "demo", "--no-progress", "--flower-port", "0"], timeout=600)
    assert rc == 0, f"stdout:\n{out}\nstderr:\n{err[-4000:]}"
    assert left == [], f"processes left running: {left}"
    # the summary a user reads
    assert re.search(r"^51 jobs on 12 problems in [\d.]+ s, worker concurrency \d+$", out, re.M), out
    assert "expected verdicts: 51/51 as expected" in out
    for verdict in ("OK", "WRONG_ANSWER", "TIME_LIMIT", "COMPILE_ERROR", "RUNTIME_ERROR", "NO_CODE"):
        assert re.search(rf"^  {verdict}\s+\d+", out, re.M), f"{verdict} missing from:\n{out}"
    assert re.search(r"^  1\s+24\b", out, re.M), out  # reward histogram: 24 correct completions earn 1
    assert re.search(r"^throughput: [\d.]+ jobs/s, [\d.]+ tests/s", out, re.M)
    assert re.search(r"^latency submit->result: p50 \d+ ms, p99 \d+ ms", out, re.M)
    assert "sandbox isolation:" in out
    # one example of the feedback text a model would see, after the counts
    m = re.search(r"^the feedback a model sees \(JobResult.observation\) for one WRONG_ANSWER job on \S+:$", out, re.M)
    assert m, out
    feedback = [ln[4:] for ln in out[m.end():].splitlines() if ln.startswith("  | ")]
    assert 3 <= len(feedback) <= 25 and any("expected" in ln for ln in feedback), feedback
    # every folder the demo names still exists when it ends (a temporary one is not named)
    for folder in re.findall(r"logs(?: in|:) (/[^\s)]+)", out + err):
        assert Path(folder).is_dir(), folder


@pytest.mark.slow
def test_cpfleet_demo_with_a_problem_file_uses_its_correct_solutions(codecontests_path: Path) -> None:
    rc, out, err, left = run_harnessed(
        [*CPFLEET, "demo", "--problems", str(codecontests_path), "--max-problems", "4", "--no-progress",
         "--flower-port", "-1", "--metrics-port", "-1"],
        timeout=600,
    )  # fmt: skip
    assert rc == 0, f"stdout:\n{out}\nstderr:\n{err[-4000:]}"
    assert left == []
    assert re.search(r"^\d+ jobs on 4 problems", out, re.M), out
    m = re.search(r"^correct solutions accepted: (\d+)/(\d+)", out, re.M)
    assert m and int(m.group(2)) == 8, out  # two correct completions per problem
    # the fleet agrees with the local judge on the same completions (multi-answer problems
    # fail in both: the file's README lists them)
    from cpfleet.datasets.loading import load_problems
    from cpfleet.demo.command import generic_completions
    from cpfleet.jobs.pool import judge_iter

    problems = load_problems(codecontests_path, max_problems=4).problems
    jobs = [{"problem_id": p.id, "completion": generic_completions(p)["correct"]} for p in problems]
    judged = list(judge_iter({p.id: p for p in problems}, jobs, workers=2))
    rejected_by_judge = {r.problem_id for r in judged if str(r.verdict) != "OK"}
    rejected_by_fleet = set(re.findall(r"^  not accepted: (\S+) ", out, re.M))
    assert rejected_by_fleet == rejected_by_judge
    assert int(m.group(1)) == 2 * (len(problems) - len(rejected_by_judge))


@pytest.mark.slow
def test_cpfleet_demo_stopped_by_sigterm_mid_batch_leaves_nothing_running() -> None:
    rc, out, err, left = run_harnessed(
        ["--signal-on", "submitting", str(int(signal.SIGTERM)), *CPFLEET, "demo", "--no-progress"], timeout=300
    )
    assert rc == 143, err[-3000:]
    assert "stopping (SIGTERM)" in err
    assert left == [], f"processes left running: {left}"


def test_cpfleet_demo_rejects_a_missing_problem_file(tmp_path: Path) -> None:
    rc, out, err, left = run_harnessed([*CPFLEET, "demo", "--problems", str(tmp_path / "nope.jsonl")], timeout=120)
    assert rc == 2
    assert "nope.jsonl" in err
    assert left == []


def _group(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in:\n{text}"
    return m.group(1)


def _start_up(tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CPFLEET, "up", "--flower-port", "0", "--metrics-port", "0", "--workers", "2", "--logs", str(tmp_path), "--ephemeral"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip


def _wait_for_urls(proc: subprocess.Popen[str], timeout: float = 180) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("  stop"):
            return lines
    proc.kill()
    raise AssertionError(f"cpfleet up did not come up: {''.join(lines)}\n{proc.stderr.read() if proc.stderr else ''}")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cpfleet_up_prints_urls_and_a_signal_stops_everything_it_started(tmp_path: Path, sig: int) -> None:
    proc = _start_up(tmp_path)
    try:
        lines = _wait_for_urls(proc)
        text = "".join(lines)
        assert re.search(r"redis\s+redis://127\.0\.0\.1:\d+/0", text)
        assert re.search(r"flower\s+http://127\.0\.0\.1:\d+", text)
        assert re.search(r"metrics\s+http://127\.0\.0\.1:\d+/metrics", text)
        assert "concurrency=2" in text
        # up's Flower is loopback-only and its API open: it lists up's worker
        flower = _group(r"flower\s+(http://\S+)", text)
        node = _group(r"worker\s+(\S+)", text)
        deadline = time.monotonic() + 60
        while True:
            status, body = http_get(f"{flower}/api/workers?refresh=1", timeout=10)
            if (status == 200 and node in json.loads(body)) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert status == 200 and node in json.loads(body)
        started = descendants(proc.pid)
        # redis, worker main + 2 pool processes (+ their sandbox servers), flower
        assert len(started) >= 5, started
        proc.send_signal(sig)  # Ctrl-C reaches only `cpfleet up`: its children have their own sessions
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    deadline = time.monotonic() + 60  # liveness wait for exits, not a timing assertion
    while alive(started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive(started) == {}, "left running after stop"


@pytest.mark.slow
def test_a_killed_cpfleet_up_takes_its_children_down_with_it(tmp_path: Path) -> None:
    """SIGKILL leaves `up` no chance to clean up: PR_SET_PDEATHSIG must do it."""
    proc = _start_up(tmp_path)
    try:
        _wait_for_urls(proc)
        started = descendants(proc.pid)
        assert len(started) >= 5, started
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 120  # the worker's warm shutdown, then its pool and sandboxes
    while alive(started) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = alive(started)
    for pid in left:  # do not leak into the rest of the session if the test fails
        os.kill(pid, signal.SIGKILL)
    assert left == {}, "children outlived a SIGKILLed cpfleet up"


def test_local_fleet_on_an_external_redis_leaves_that_redis_alone(redis_url: str, tmp_path: Path) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    client.set("keep-me", b"1")
    with LocalFleet(redis_url, flower_port=None, metrics_port=None, workers=1, log_dir=str(tmp_path)) as fleet:
        assert fleet.redis is None
        assert fleet.concurrency == 1
        started = fleet.pids()
        assert started
    assert alive(started) == {}
    assert client.get("keep-me") == b"1"  # still up, data intact
    client.close()


def test_a_worker_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    from cpfleet.core.errors import FleetError

    fleet = LocalFleet(
        flower_port=None, metrics_port=None, log_dir=str(tmp_path), worker_env={"CPFLEET_RUNNER": "no-such-runner"}
    )
    with pytest.raises(FleetError, match="worker"):
        fleet.start(timeout=120)
    assert fleet.worker is None and fleet.redis is None  # start() cleaned up after itself
    assert os.path.exists(tmp_path / "worker.log")


def test_the_demo_batch_mixes_every_kind_and_jobs_n_repeats_or_cuts_it() -> None:
    from cpfleet.demo import problems as dp
    from cpfleet.demo.command import SLOW_EVERY, build_batch

    problems = dp.load_shipped()
    batch = build_batch(problems, dp.demo_completions(), True)
    kinds = [j.kind for j in batch]
    assert set(kinds) == set(dp.KINDS)
    assert kinds.count("correct") == 2 * len(problems)
    assert kinds.count("slow") == len(range(0, len(problems), SLOW_EVERY))
    assert all(j.expected == str(dp.KINDS[j.kind]) for j in batch)
    longer = build_batch(problems, dp.demo_completions(), True, jobs=len(batch) + 5)
    assert longer[: len(batch)] == batch and longer[len(batch) :] == batch[:5]
    assert build_batch(problems, dp.demo_completions(), True, jobs=3) == batch[:3]


def test_completions_for_any_problem_file_cover_the_failure_modes(codecontests_records: list[dict[str, Any]]) -> None:
    from cpfleet.core.problem import Problem
    from cpfleet.demo.command import generic_completions
    from cpfleet.sandbox.extract import extract_code

    problem = Problem.from_dict(codecontests_records[0])
    kinds = generic_completions(problem)
    assert set(kinds) == {"correct", "wrong", "slow", "syntax_error", "runtime_error", "no_code"}
    assert extract_code(kinds["correct"]) == problem.correct_solutions[0].rstrip() + "\n"
    assert extract_code(kinds["no_code"]) is None
    # the wrong one is the classic hack: print the first example's answer whatever the input
    assert repr(problem.public_tests[0].output.rstrip("\n")) in kinds["wrong"]


def test_summary_statistics() -> None:
    from cpfleet.demo.command import percentile, reward_histogram

    assert percentile([], 50) == 0.0
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0
    hist = dict(reward_histogram([0.0, 1.0, 1.0, 0.3, 0.8, None]))
    assert hist == {"0": 1, "(0.25, 0.5]": 1, "(0.75, 1)": 1, "1": 2, "masked (infra)": 1}


@pytest.mark.slow
def test_cpfleet_up_collects_the_orphans_it_inherits_while_it_runs(tmp_path: Path) -> None:
    """``up`` is the subreaper of its worker's tree: processes orphaned there (the worker's
    start-up self-tests, a replaced runner's) became its children and stayed zombies for as long
    as the fleet ran, a count that only grows on a long-lived fleet."""
    proc = _start_up(tmp_path)
    try:
        _wait_for_urls(proc)

        def zombie_children() -> list[int]:
            me = str(proc.pid)
            found = []
            for entry in filter(str.isdigit, os.listdir("/proc")):
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                fields = stat[stat.rfind(")") + 2 :].split()
                if fields[1] == me and fields[0] == "Z":
                    found.append(int(entry))
            return found

        deadline = time.monotonic() + 30  # a liveness wait for the next collection, not a timing assertion
        while zombie_children() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert zombie_children() == []
        assert proc.poll() is None  # its own children (redis, worker, flower) were left to it
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
