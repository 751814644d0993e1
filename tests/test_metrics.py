"""Worker metrics: what record_job counts, that prefork children aggregate in the parent's
/metrics, that queue depth is read from the broker at scrape time, and a real worker's endpoint."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import complete_lines

from cpfleet.core.results import JobResult, Timings
from cpfleet.core.results import TestReport as Report
from cpfleet.core.results import TestSetSummary as SetSummary
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.local import LocalFleet
from cpfleet.fleet.processes import http_get
from cpfleet.fleet.redis_server import free_port
from cpfleet.sandbox import interactive
from cpfleet.workers import metrics

REPO = Path(__file__).resolve().parents[1]


def _result(job_id: str, verdict: Verdict, reward: float | None, public_ms: list[float], hidden_run: int) -> JobResult:
    tests = [Report(Verdict.OK, ms, ms / 2) for ms in public_ms]
    return JobResult(
        job_id=job_id,
        problem_id="p/1",
        reward=reward,
        verdict=verdict,
        infra_error=reward is None,
        public=SetSummary(passed=len(tests), total=len(tests), run=len(tests), tests=tests),
        hidden=SetSummary(passed=hidden_run, total=hidden_run, run=hidden_run),
        timings=Timings(queued_ms=30.0, executed_ms=120.0, cpu_ms=80.0),
        cache_hit=job_id.endswith("hit"),
    )


def _sample(name: str, labels: dict[str, str] | None = None) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def test_record_job_counts_verdicts_tests_latencies_and_cache_hits() -> None:
    before = {
        "ok": _sample("cpfleet_jobs_total", {"verdict": "OK", "infra_error": "false"}),
        "internal": _sample("cpfleet_jobs_total", {"verdict": "INTERNAL", "infra_error": "true"}),
        "public": _sample("cpfleet_tests_run_total", {"set": "public"}),
        "hidden": _sample("cpfleet_tests_run_total", {"set": "hidden"}),
        "test_obs": _sample("cpfleet_test_duration_seconds_count"),
        "job_obs": _sample("cpfleet_job_duration_seconds_count"),
        "hits": _sample("cpfleet_result_cache_hits_total"),
        "lookups": _sample("cpfleet_result_cache_lookups_total"),
        "reward_sum": _sample("cpfleet_reward_sum"),
        "reward_n": _sample("cpfleet_reward_count"),
    }
    metrics.record_job(_result("a-hit", Verdict.OK, 1.0, [2.0, 4.0, 600.0], hidden_run=5))
    metrics.record_job(_result("b", Verdict.OK, 0.5, [1.0], hidden_run=2))
    metrics.record_job(_result("c", Verdict.INTERNAL, None, [], hidden_run=0))

    assert _sample("cpfleet_jobs_total", {"verdict": "OK", "infra_error": "false"}) - before["ok"] == 2
    assert _sample("cpfleet_jobs_total", {"verdict": "INTERNAL", "infra_error": "true"}) - before["internal"] == 1
    assert _sample("cpfleet_tests_run_total", {"set": "public"}) - before["public"] == 4
    assert _sample("cpfleet_tests_run_total", {"set": "hidden"}) - before["hidden"] == 7
    assert _sample("cpfleet_test_duration_seconds_count") - before["test_obs"] == 4
    # the 600 ms test lands in the 1 s bucket, not below 0.5 s
    assert _sample("cpfleet_test_duration_seconds_bucket", {"le": "0.5"}) < _sample(
        "cpfleet_test_duration_seconds_bucket", {"le": "1.0"}
    )
    # infra errors say nothing about execution time: not observed
    assert _sample("cpfleet_job_duration_seconds_count") - before["job_obs"] == 2
    assert _sample("cpfleet_result_cache_hits_total") - before["hits"] == 1
    assert _sample("cpfleet_result_cache_lookups_total") - before["lookups"] == 3
    assert _sample("cpfleet_reward_count") - before["reward_n"] == 2  # the masked one is not a reward
    assert _sample("cpfleet_reward_sum") - before["reward_sum"] == pytest.approx(1.5)


def test_interactor_failures_charged_without_a_reference_are_counted() -> None:
    """sandbox/interactive.py counts them (it has no metrics); the next finished job adds them."""
    metrics.record_job(_result("settle", Verdict.OK, 1.0, [], hidden_run=0))  # counts any left from earlier tests
    before = _sample("cpfleet_interactor_unvouched_failures_total")
    interactive.ALONE.count_unvouched()
    interactive.ALONE.count_unvouched()
    metrics.record_job(_result("d", Verdict.WRONG_ANSWER, 0.0, [1.0], hidden_run=1))
    metrics.record_job(_result("e", Verdict.OK, 1.0, [1.0], hidden_run=1))  # counted once, not again
    assert _sample("cpfleet_interactor_unvouched_failures_total") - before == 2


def test_record_run_counts_run_jobs_and_each_input_by_status(caplog: pytest.LogCaptureFixture) -> None:
    from cpfleet.core.results import RunJobResult, RunOutput, RunStatus

    def sample(name: str, **labels: str) -> float:
        return _sample(name, labels)

    before = (sample("cpfleet_run_jobs_total", status="FINISHED", infra_error="false"),
              sample("cpfleet_runs_total", status="TIME_LIMIT"), sample("cpfleet_runs_total", status="FINISHED"),
              sample("cpfleet_run_jobs_total", status="INTERNAL", infra_error="true"), _sample("cpfleet_job_cpu_seconds_total"))
    runs = (RunOutput(RunStatus.FINISHED, exit_code=0, cpu_ms=100.0), RunOutput(RunStatus.TIME_LIMIT, cpu_ms=900.0))
    with caplog.at_level("INFO", logger="cpfleet.joblog"):
        metrics.record_run(RunJobResult("r1", RunStatus.FINISHED, runs=runs, queued_ms=5.0))
        metrics.record_run(RunJobResult.infra("r2", "sandbox died"))
    after = (sample("cpfleet_run_jobs_total", status="FINISHED", infra_error="false"),
             sample("cpfleet_runs_total", status="TIME_LIMIT"), sample("cpfleet_runs_total", status="FINISHED"),
             sample("cpfleet_run_jobs_total", status="INTERNAL", infra_error="true"), _sample("cpfleet_job_cpu_seconds_total"))
    assert [a - b for a, b in zip(after, before, strict=True)] == pytest.approx([1, 1, 1, 1, 1.0])
    lines = [json.loads(r.getMessage()) for r in caplog.records if '"run_done"' in r.getMessage()]
    assert [(x["job_id"], x["status"]) for x in lines] == [("r1", "FINISHED"), ("r2", "INTERNAL")]
    assert lines[1]["infra_message"] == "sandbox died"


def test_job_log_line_is_json_with_the_job_id() -> None:
    r = _result("job-42", Verdict.INTERNAL, None, [], hidden_run=0)
    r.infra_message = "worker lost"
    rec = json.loads(metrics.job_log_line(r))
    assert rec["event"] == "job_done"
    assert rec["job_id"] == "job-42"
    assert rec["verdict"] == "INTERNAL"
    assert rec["reward"] is None
    assert rec["infra_message"] == "worker lost"


def test_metrics_port_env_is_off_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(metrics.ENV_PORT, raising=False)
    assert metrics.metrics_port_from_env() is None
    monkeypatch.setenv(metrics.ENV_PORT, "0")
    assert metrics.metrics_port_from_env() is None
    monkeypatch.setenv(metrics.ENV_PORT, "9808")
    assert metrics.metrics_port_from_env() == 9808


# The multiprocess test runs in a fresh interpreter: switching prometheus_client to multiprocess
# mode is process-wide and must happen before any metric exists, as in a real worker.
MULTIPROCESS_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time, urllib.request
    import redis
    from cpfleet.workers import metrics
    from cpfleet.core.results import JobResult, TestReport, TestSetSummary, Timings
    from cpfleet.sandbox.runner import IsolationReport
    from cpfleet.core.verdict import Verdict

    mp_dir, port, redis_url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.environ[metrics.ENV_PORT] = str(port)
    os.environ[metrics.ENV_MULTIPROC] = mp_dir
    server = metrics.start_worker_metrics(redis_url, ["jobs"], addr="127.0.0.1")

    r = redis.Redis.from_url(redis_url)
    r.rpush("jobs", b"a", b"b", b"c")
    r.rpush("jobs" + "\\x06\\x16" + "9", b"d")  # a priority-9 message: still queued work

    def child(n, full):
        metrics.record_isolation(IsolationReport({"netns": True, "cgroup": full}))
        for i in range(n):
            tests = TestSetSummary(passed=2, total=2, run=2, tests=[TestReport(Verdict.OK, 3.0), TestReport(Verdict.OK, 5.0)])
            metrics.record_job(JobResult(f"j{i}", "p", 1.0, Verdict.OK, public=tests, timings=Timings(0, 50, 10)))

    pids = []
    for n, full in ((3, True), (4, False)):
        pid = os.fork()
        if pid == 0:
            child(n, full)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)

    def scrape():
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as resp:
            return resp.read().decode()

    before_death = scrape()
    metrics.mark_process_dead(pids[1])  # what worker_process_shutdown does for a pool child
    after_death = scrape()
    r.delete("jobs")
    r.delete("jobs" + "\\x06\\x16" + "9")
    drained = scrape()
    metrics.stop_worker_metrics()
    print(json.dumps({"before": before_death, "after": after_death, "drained": drained, "pids": pids}))
    """
)


def _value(text: str, prefix: str) -> float:
    lines = [ln for ln in text.splitlines() if ln.startswith(prefix)]
    assert lines, f"no sample {prefix!r} in:\n{text}"
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)


def test_prefork_children_aggregate_in_the_parent_endpoint_with_queue_depth(tmp_path: Path, redis_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", MULTIPROCESS_SCRIPT, str(tmp_path / "mp"), str(free_port()), redis_url],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    before, after, drained = out["before"], out["after"], out["drained"]
    pid_full, pid_partial = out["pids"]

    assert _value(before, 'cpfleet_jobs_total{infra_error="false",verdict="OK"}') == 7  # 3 + 4 from two processes
    assert _value(before, 'cpfleet_tests_run_total{set="public"}') == 14
    assert _value(before, "cpfleet_test_duration_seconds_count") == 14
    assert _value(before, 'cpfleet_queue_depth{queue="jobs"}') == 4
    assert _value(before, "cpfleet_broker_up") == 1
    # per-process isolation, and a fleet-wide layer that is 1 only if every live process has it
    assert _value(before, f'cpfleet_sandbox_isolation{{level="full",pid="{pid_full}"}}') == 1
    assert _value(before, f'cpfleet_sandbox_isolation{{level="partial",pid="{pid_partial}"}}') == 1
    assert _value(before, 'cpfleet_sandbox_isolation_layer{layer="cgroup"}') == 0
    assert _value(before, 'cpfleet_sandbox_isolation_layer{layer="netns"}') == 1
    # the dead child's live gauges are gone; its counters stay (counts are history)
    assert f'pid="{pid_partial}"' not in after
    assert _value(after, 'cpfleet_sandbox_isolation_layer{layer="cgroup"}') == 1
    assert _value(after, 'cpfleet_jobs_total{infra_error="false",verdict="OK"}') == 7
    # queue depth is read at scrape time, not cached
    assert _value(drained, 'cpfleet_queue_depth{queue="jobs"}') == 0


def test_queue_depth_collector_reports_a_missing_broker_instead_of_failing() -> None:
    collector = metrics.QueueDepthCollector(f"redis://127.0.0.1:{free_port()}/0", ["jobs"])
    families = {f.name: f for f in collector.collect()}
    assert "cpfleet_queue_depth" not in families
    assert families["cpfleet_broker_up"].samples[0].value == 0.0


def test_a_real_worker_exposes_job_counts_and_isolation_on_its_endpoint(tmp_path: Path) -> None:
    from cpfleet.demo import problems as dp
    from cpfleet.demo.command import build_batch, run_batch

    problems = dp.load_shipped()[:2]
    batch = [j for j in build_batch(problems, dp.demo_completions(), True) if j.kind != "slow"]
    with LocalFleet(flower_port=None, metrics_port=0, log_dir=str(tmp_path / "logs"), workers=2) as fleet:
        outcomes, _ = run_batch(str(fleet.redis_url), problems, batch, progress=False, timeout=300)
        assert fleet.metrics_url
        want = {str(o.result.verdict) for o in outcomes}
        deadline = time.monotonic() + 30
        while True:  # the reply is pushed before the counter moves: poll briefly
            status, body = http_get(fleet.metrics_url)
            text = body.decode()
            counted = sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith("cpfleet_jobs_total{"))
            if counted >= len(batch) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert status == 200
    assert counted == len(batch)
    for verdict in want:
        assert f'verdict="{verdict}"' in text
    assert "cpfleet_sandbox_isolation{" in text  # every pool process reported its level
    assert 'cpfleet_language_ok{language="python3"' in text  # and its languages' self-tests
    assert 'cpfleet_queue_depth{queue="' in text
    assert _value(text, "cpfleet_broker_up") == 1
    # one structured log line per job, findable by the job id the trainer holds; the counter
    # moves just before the line is written, so the log is awaited (complete lines only)
    def logged() -> dict[str, dict[str, Any]]:
        lines = complete_lines(tmp_path / "logs" / "worker.log")
        records = [json.loads(line[line.index("{") :]) for line in lines if '"event":"job_done"' in line]
        return {r["job_id"].rsplit("/", 1)[0]: r for r in records}  # logged under the wire id <job_id>/<uuid>

    deadline = time.monotonic() + 30
    while not {o.result.job_id for o in outcomes} <= set(by_id := logged()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for o in outcomes:
        assert by_id[o.result.job_id]["verdict"] == str(o.result.verdict)
        assert by_id[o.result.job_id]["problem_id"] == o.job.problem_id


def test_problem_cache_lookups_are_counted_by_outcome_apart_from_the_result_cache() -> None:
    labels = ("hit", "miss", "refresh", "unknown")
    before = {o: _sample("cpfleet_problem_cache_lookups_total", {"outcome": o}) for o in labels}
    result_hits = _sample("cpfleet_result_cache_hits_total")
    for outcome in ("miss", "hit", "hit", "refresh", "unknown"):
        metrics.record_problem_lookup(outcome)
    after = {o: _sample("cpfleet_problem_cache_lookups_total", {"outcome": o}) - before[o] for o in labels}
    assert after == {"hit": 2, "miss": 1, "refresh": 1, "unknown": 1}
    assert _sample("cpfleet_result_cache_hits_total") == result_hits


@pytest.mark.parametrize("addr", ["0.0.0.0:9808", "999.1.1.1", "http://127.0.0.1", "my host"])
def test_a_malformed_metrics_address_stops_the_worker_at_start_in_one_line(addr: str) -> None:
    """Unchecked, it passed start and was found only by the endpoint's bind inside Celery's
    init, a logged line the operator may never see (the port given in the address most of all)."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    env |= {"CPFLEET_METRICS_PORT": "9808", "CPFLEET_METRICS_ADDR": addr}
    out = subprocess.run([sys.executable, "-m", "cpfleet", "worker", "--dry-run"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert out.returncode == 2, out
    assert out.stderr.startswith(f"cpfleet worker: CPFLEET_METRICS_ADDR={addr!r} is not valid ("), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_a_metrics_address_in_use_is_one_line_naming_it_and_the_worker_judges_on(tmp_path: Path, redis_url: str) -> None:
    import socket

    from fleet_helpers import FleetWorker

    from cpfleet import FleetClient

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    port_file = tmp_path / "metrics.port"
    env = {"CPFLEET_METRICS_PORT": str(port), "CPFLEET_METRICS_ADDR": "127.0.0.1", "CPFLEET_METRICS_PORT_FILE": str(port_file)}
    try:
        with FleetWorker(redis_url, tmp_path, concurrency=1, env=env) as worker:
            with FleetClient(redis_url, timeout=120) as fleet:
                r = fleet.run("print(6 * 7)")
            log_text = worker.log_text()
    finally:
        taken.close()
    assert r.runs[0].stdout == "42\n"  # the worker judges on, without /metrics
    line = next(ln for ln in log_text.splitlines() if "metrics endpoint not started" in ln)
    assert f"on 127.0.0.1 port {port} (CPFLEET_METRICS_ADDR, CPFLEET_METRICS_PORT)" in line
    assert "in use" in line
    assert "Traceback" not in log_text
    assert port_file.read_text().startswith(metrics.PORT_FILE_ERROR)  # `cpfleet up` learns why at once
