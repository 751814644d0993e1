"""Function-call, checker-program and interactive problems through every path: a real fleet
(redis-server, prefork worker, FleetClient) and the ``cpfleet judge`` CLI give the same rewards
as judging in-process, and a broken checker comes back as an infrastructure error on both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from fleet_helpers import REPO, start_worker  # noqa: F401  (fixture)
from test_checker_programs import GUESS_INTERACTOR, SUM_VALIDATOR, kattis

from cpfleet.core.problem import Problem
from cpfleet.jobs.pool import judge_iter
from cpfleet.producer.client import FleetClient

GUESS = kattis(GUESS_INTERACTOR)
GUESS["type"] = "interactive"

PROBLEMS: list[dict[str, Any]] = [
    {"id": "paths/two-sum", "fn_name": "twoSum",
     "public_tests": [{"input": "[[2, 7, 11, 15], 9]", "output": "[0, 1]"}],
     "hidden_tests": [{"input": "[[3, 2, 4], 6]", "output": "[1, 2]"}, {"input": "[[3, 3], 6]", "output": "[0, 1]"}]},
    {"id": "paths/sum", "checker": kattis(SUM_VALIDATOR),
     "public_tests": [{"input": "10\n", "output": "5 5\n"}], "hidden_tests": [{"input": "3\n", "output": "1 2\n"}]},
    {"id": "paths/guess", "checker": GUESS,
     "public_tests": [{"input": "37\n", "output": ""}], "hidden_tests": [{"input": "1000\n", "output": ""}]},
    {"id": "paths/broken", "checker": kattis("#include <cstdlib>\nint main() { abort(); }\n"),
     "public_tests": [{"input": "10\n", "output": "5 5\n"}], "hidden_tests": [{"input": "3\n", "output": "1 2\n"}]},
]

TWO_SUM = """
class Solution:
    def twoSum(self, nums, target):
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], i]
            seen[x] = i
"""
GUESS_OK = """
lo, hi = 1, 1000
while True:
    mid = (lo + hi) // 2
    print(mid, flush=True)
    r = input()
    if r == "correct":
        break
    if r == "higher":
        lo = mid + 1
    else:
        hi = mid - 1
"""
JOBS = [
    ("paths/two-sum", TWO_SUM, 1.0),
    ("paths/two-sum", TWO_SUM.replace("[seen[target - x], i]", "[i, seen[target - x]]"), 0.0),
    ("paths/sum", "n = int(input())\nprint(n, 0)", 1.0),
    ("paths/sum", "print(0, 0)", 0.0),
    ("paths/guess", GUESS_OK, 1.0),
    ("paths/guess", "print(1, flush=True)\ninput()", 0.0),
    ("paths/broken", "n = int(input())\nprint(n, 0)", None),
]


def _jobs() -> list[dict[str, Any]]:
    return [{"problem_id": pid, "completion": f"```python\n{code.strip()}\n```\n", "job_id": f"j{i}"}
            for i, (pid, code, _) in enumerate(JOBS)]


def test_fleet_judges_every_problem_kind_as_the_local_judge_does(redis_url: str, start_worker) -> None:  # noqa: F811
    problems = {p["id"]: Problem.from_dict(p) for p in PROBLEMS}
    jobs = _jobs()
    local = [r.reward for r in judge_iter(problems, jobs, workers=1)]
    assert local == [want for _, _, want in JOBS]
    start_worker(redis_url, concurrency=2)
    with FleetClient(redis_url, timeout=240, use_cache=False) as fleet:
        fleet.register_problems(problems.values())
        results = fleet.gather(fleet.submit_many(jobs), timeout=300)
    assert [r.reward for r in results] == local
    broken = results[-1]
    assert broken.infra_error and "checker error" in broken.infra_message


def test_judge_cli_judges_every_problem_kind(tmp_path: Path) -> None:
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps(j) + "\n" for j in _jobs()))
    proc = subprocess.run([sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", "2",
                           "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    rewards = [json.loads(line)["reward"] for line in proc.stdout.splitlines()]
    assert rewards == [want for _, _, want in JOBS]
