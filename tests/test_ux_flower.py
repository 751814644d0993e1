"""Flower shows each job's verdict, reward and tests passed: the evaluate task returns a small
summary, Celery puts it in the task-succeeded event, and Flower shows it as the task's Result
(no result backend). Real worker, real Flower, real HTTP; the screenshot in a real headless
Chromium when one is installed (scripts/flower_screenshot.py, which made docs/flower-tasks.png)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpfleet.core import protocol
from cpfleet.demo import problems as dp
from cpfleet.demo.command import build_batch, run_batch
from cpfleet.fleet.local import LocalFleet

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from flower_screenshot import flower_results  # noqa: E402


@pytest.mark.slow
def test_flower_shows_every_jobs_verdict_reward_and_tests(tmp_path: Path) -> None:
    problems = dp.load_shipped()[:2]
    batch = [j for j in build_batch(problems, dp.demo_completions(), True) if j.kind in ("correct", "wrong", "runtime_error")]
    with LocalFleet(flower_port=0, metrics_port=None, workers=2, log_dir=str(tmp_path)) as fleet:
        assert fleet.flower_url is not None
        outcomes, _ = run_batch(str(fleet.redis_url), problems, batch, progress=False, timeout=300)
        from cpfleet.producer.client import FleetClient

        with FleetClient(str(fleet.redis_url), timeout=120) as client:  # a run job shows its status too
            ran = client.run("print(int(input()) * 2)", ["21", "x"])
        assert [r.stdout for r in ran.runs][:1] == ["42\n"]
        deadline = time.monotonic() + 90  # Flower learns of task events asynchronously
        tasks = flower_results(fleet.flower_url, fleet.node_name)
        runs = flower_results(fleet.flower_url, fleet.node_name, protocol.RUN_TASK_NAME)
        while (len(tasks) < len(outcomes) or not runs) and time.monotonic() < deadline:
            time.sleep(0.5)
            tasks = flower_results(fleet.flower_url, fleet.node_name)
            runs = flower_results(fleet.flower_url, fleet.node_name, protocol.RUN_TASK_NAME)
        # an operator finds the failures by typing `result:WRONG_ANSWER` in Flower's search box
        wrong = flower_results(fleet.flower_url, fleet.node_name, search="result:WRONG_ANSWER")
    expected_wrong = {o.result.job_id for o in outcomes if str(o.result.verdict) == "WRONG_ANSWER"}
    assert expected_wrong and {ast.literal_eval(t["result"])["job"].rsplit("/", 1)[0] for t in wrong} == expected_wrong
    (run,) = runs
    assert ast.literal_eval(run["result"])["runs"] == f"{ran.runs[0].status}, {ran.runs[1].status}"
    assert ast.literal_eval(run["result"])["status"] == str(ran.status)
    shown = {}
    for task in tasks:
        summary = ast.literal_eval(task["result"])  # the repr of the task's return value
        shown[summary["job"].rsplit("/", 1)[0]] = summary  # the wire id: the caller's id + "/" + a nonce
        assert task["state"] == "SUCCESS"
    expected = {o.result.job_id: o.result for o in outcomes}
    assert set(shown) == set(expected)
    for job_id, result in expected.items():
        summary = shown[job_id]
        assert summary["verdict"] == str(result.verdict)
        assert summary["reward"] == result.reward
        assert summary["tests"] == (f"hidden {result.hidden.passed}/{result.hidden.total}, "
                                    f"public {result.public.passed}/{result.public.total}")
        assert len(task["result"]) < 400  # small: one event per job
    assert {s["verdict"] for s in shown.values()} >= {"OK", "WRONG_ANSWER", "RUNTIME_ERROR"}


@pytest.mark.slow
@pytest.mark.skipif(
    not (shutil.which("chromium") or shutil.which("chromium-browser")), reason="no chromium (apt-get install chromium)"
)
def test_the_flower_screenshot_script_renders_the_tasks_page_with_results(tmp_path: Path) -> None:
    out = tmp_path / "flower.png"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "flower_screenshot.py"), str(out)],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'verdict': 'OK'" in proc.stdout and "'verdict': 'WRONG_ANSWER'" in proc.stdout
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000  # a rendered page, not a blank one
