"""Regression guard: the human solutions of codecontests-300 still pass as recorded in docs/.

Re-runs every problem's human solution through the all-or-nothing path with its code_contests
checker (the same code as bench/codecontests_human_solutions.py) and compares with
docs/codecontests-human-solutions.json: a problem that passed before and now fails for any
reason but a time limit is a regression in the runner, the checker or the environment. A few
time-limit flips are tolerated (solutions that sit near the 2 s CPU limit).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from cpfleet.core.verdict import Verdict
from cpfleet.jobs.judge import read_problems

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "docs" / "codecontests-human-solutions.json"
TIME_LIMIT_MARGIN = 3


def _bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cc_human", REPO / "bench" / "codecontests_human_solutions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_previously_passing_human_solutions_still_pass(codecontests_path: Path) -> None:
    record = json.loads(RECORD.read_text())
    problems = read_problems(codecontests_path)
    assert len(problems) == record["total"]

    results = list(_bench_module().judge_all(problems, workers=2, runner="forkserver", progress=False))

    assert [r.problem_id for r in results] == list(problems)
    assert not [r.problem_id for r in results if r.infra_error], "infrastructure errors while judging"
    now_passing = {r.problem_id for r in results if r.reward == 1.0}
    by_id = {r.problem_id: r for r in results}
    lost = sorted(set(record["passing"]) - now_passing)
    regressions = {pid: str(by_id[pid].verdict) for pid in lost if by_id[pid].verdict != Verdict.TIME_LIMIT}
    assert not regressions, f"previously passing human solutions now fail: {regressions}"
    assert len(lost) <= TIME_LIMIT_MARGIN, f"too many new time limits: {lost}"
    assert len(now_passing) >= record["passed"] - TIME_LIMIT_MARGIN
