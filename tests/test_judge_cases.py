"""The data-driven judge suite (tests/judge_cases/, see its README): every submission of every
case judged on both runners and through a real fleet, each with the verdict and reward its
case's manifest names. A case is a folder; adding one needs no change here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import start_worker  # noqa: F401  (fixture)

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.producer.client import FleetClient
from cpfleet.sandbox import languages
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner

CASES = Path(__file__).resolve().parent / "judge_cases"
LANGUAGE_OF = {".py": "python3", ".pypy": "pypy3", ".cpp": "cpp", ".c": "c", ".java": "java"}
FENCE_TAG = {"python3": "python", "pypy3": "pypy", "cpp": "cpp", "c": "c", "java": "java"}


@dataclass(frozen=True)
class Submission:
    case: str
    file: str
    language: str
    source: str
    verdict: Verdict
    reward: float

    @property
    def id(self) -> str:
        return f"{self.case}/{self.file}"

    def completion(self) -> str:
        return f"```{FENCE_TAG[self.language]}\n{self.source}```\n"


def load_problem(case: str) -> Problem:
    """The case's problem; a checker's ``files_from`` folder becomes its ``files``."""
    folder = CASES / case
    record: dict[str, Any] = json.loads((folder / "problem.json").read_text())
    checker = record.get("checker")
    if isinstance(checker, dict) and "files_from" in checker:
        base = folder / checker.pop("files_from")
        checker["files"] = {p.relative_to(folder).as_posix(): p.read_text()
                            for p in sorted(base.rglob("*")) if p.is_file()}
    return Problem.from_dict(record)


def load_submissions() -> list[Submission]:
    subs = []
    for folder in sorted(p for p in CASES.iterdir() if (p / "problem.json").is_file()):
        expected = json.loads((folder / "expected.json").read_text())
        files = sorted(p.name for p in (folder / "submissions").iterdir())
        assert sorted(expected) == files, f"{folder.name}: expected.json and submissions/ disagree"
        for name in files:
            want = expected[name]
            subs.append(Submission(folder.name, name, LANGUAGE_OF[Path(name).suffix],
                                   (folder / "submissions" / name).read_text(), Verdict(want["verdict"]),
                                   float(want["reward"])))
    return subs


SUBMISSIONS = load_submissions()


def _available(sub: Submission) -> bool:
    return not languages.missing_tools(sub.language)


@pytest.mark.parametrize("sub", SUBMISSIONS, ids=lambda s: s.id)
def test_judge_case(runner: CodeRunner, sub: Submission) -> None:
    if not _available(sub):
        pytest.skip(f"{sub.language} toolchain not installed here")
    result = evaluate(load_problem(sub.case), sub.completion(), runner, job_id=sub.id)
    assert (result.verdict, result.reward, result.language) == (sub.verdict, sub.reward, sub.language), \
        result.infra_message or result.observation


@pytest.mark.timeout(900)
def test_judge_cases_through_the_fleet(redis_url: str, start_worker, tmp_path: Path) -> None:  # noqa: F811
    start_worker(redis_url, concurrency=2, env={"CPFLEET_COMPILE_CACHE_DIR": str(tmp_path / "cc")})
    subs = [s for s in SUBMISSIONS if _available(s)]
    problems = {case: load_problem(case) for case in sorted({s.case for s in subs})}
    jobs = [{"problem_id": problems[s.case].id, "completion": s.completion(), "job_id": s.id} for s in subs]
    with FleetClient(redis_url, timeout=600, use_cache=False) as fleet:
        fleet.register_problems(list(problems.values()))
        results = fleet.gather(fleet.submit_many(jobs), timeout=800)
    got = {r.job_id: (r.verdict, r.reward) for r in results}
    want = {s.id: (s.verdict, s.reward) for s in subs}
    assert got == want, {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
