#!/usr/bin/env python3
"""Screenshot Flower's Tasks page after a small mixed batch, in headless Chromium.

    python scripts/flower_screenshot.py docs/flower-tasks.png

Starts a throwaway fleet (in-memory Redis, one worker, Flower; nothing on disk but its logs),
judges a few demo jobs with different verdicts, waits until Flower has every task's result
(verdict, reward, tests passed: the evaluate task's return value, from the task-succeeded
event), then runs Chromium (``apt-get install chromium``; ``$CHROMIUM`` to choose the binary)
on the Tasks page. Prints the Flower API's results as JSON lines, then the PNG's path.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import Any

from cpfleet.core import protocol
from cpfleet.demo import problems as dp
from cpfleet.demo.command import build_batch, run_batch
from cpfleet.fleet.local import LocalFleet
from cpfleet.fleet.processes import http_get

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--window-size=1920,760", "--virtual-time-budget=15000",
]  # fmt: skip


def chromium() -> str | None:
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def flower_results(flower_url: str, node: str, taskname: str = protocol.TASK_NAME,
                   search: str | None = None) -> list[dict[str, Any]]:
    """The tasks of ``taskname`` that ``node`` ran and Flower has a Result for; ``search``: a
    query in Flower's task-filter syntax (``result:WRONG_ANSWER``), as typed in its search box."""
    query = f"taskname={taskname}&limit=1000" + (f"&search={urllib.parse.quote(search)}" if search else "")
    status, body = http_get(f"{flower_url}/api/tasks?{query}", timeout=10.0)
    if status != 200:
        return []
    tasks = json.loads(body)
    return [t for t in tasks.values() if t.get("worker") == node and t.get("result")]


def screenshot(url: str, out: str) -> None:
    binary = chromium()
    if binary is None:
        raise SystemExit("no chromium found: apt-get install chromium (or set $CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="cpfleet-chromium-") as profile:
        cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={os.path.abspath(out)}", url]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0 or not os.path.exists(out):
        raise SystemExit(f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the PNG to write")
    args = parser.parse_args(argv)
    problems = dp.load_shipped()[:3]
    kinds = ("correct", "wrong", "runtime_error", "no_code", "syntax_error")
    batch = [j for j in build_batch(problems, dp.demo_completions(), True) if j.kind in kinds]
    with tempfile.TemporaryDirectory(prefix="cpfleet-flower-shot-") as logs, LocalFleet(
        flower_port=0, metrics_port=None, workers=2, log_dir=logs
    ) as fleet:
        assert fleet.flower_url is not None
        outcomes, _ = run_batch(str(fleet.redis_url), problems, batch, progress=False, timeout=300)
        deadline = time.monotonic() + 90  # Flower learns of task events asynchronously
        results = flower_results(fleet.flower_url, fleet.node_name)
        while len(results) < len(outcomes) and time.monotonic() < deadline:
            time.sleep(0.5)
            results = flower_results(fleet.flower_url, fleet.node_name)
        for task in sorted(results, key=lambda t: t.get("received") or 0):
            print(json.dumps({"state": task.get("state"), "result": task.get("result")}))
        screenshot(f"{fleet.flower_url}/tasks", args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
