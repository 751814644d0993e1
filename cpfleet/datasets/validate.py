"""``cpfleet validate PROBLEMS``: judge every reference solution to find broken or weak problems.

Real datasets contain both kinds of damage: accepted solutions that fail (broken tests,
multi-answer statements judged by token comparison, limits too tight for Python) and
incorrect solutions that pass (weak tests). Each problem's ``correct_solutions`` and
``incorrect_solutions`` are judged through ``cpfleet.jobs.pool.judge_iter``, the same judging
code the fleet's workers run, in parallel across CPUs, all-or-nothing over the hidden tests
after all public tests. Findings come out as a table on stdout and, with ``--json OUT``, as
a JSON report; infrastructure errors are listed apart (they say nothing about the problem).

Exit status: 0 when the run completed (findings or not), 2 for an unreadable problem file, a
file that loaded no problem, or bad arguments. ``--strict`` is strict about everything: any
malformed or unjudgeable record exits 2 before judging, and any finding exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cpfleet.argtypes import nonnegative_int, output_file, slot_count
from cpfleet.core.errors import CheckerBroken
from cpfleet.core.languages import fence
from cpfleet.core.problem import Problem
from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict
from cpfleet.datasets.load import STRICT_HELP, add_loading_arguments, load_for_command

KINDS = ("correct", "incorrect")
ACCEPTED_FAILS = "accepted solution fails"
WEAK_TESTS = "incorrect solution passes"
CHECKER_ERROR = "checker error"  # the problem's checker/interactor program cannot judge


@dataclass(slots=True)
class SolutionOutcome:
    """How one reference solution fared."""

    problem_id: str
    kind: str  # "correct" or "incorrect"
    index: int  # position in the problem's list of that kind
    verdict: str
    reward: float | None
    failed_at: str | None  # "compile", "public #i", "hidden #i" (1-based), or None when accepted
    public: str  # "passed/total"
    hidden: str
    infra_message: str = ""
    ms: float = 0.0

    @property
    def accepted(self) -> bool:
        # the verdict describes the rewarded (hidden) tests only: a failed public test is a
        # failure of the problem's data as well
        return self.verdict == Verdict.OK and self.failed_at is None

    @property
    def infra(self) -> bool:
        return self.reward is None


@dataclass(slots=True)
class Finding:
    problem_id: str
    finding: str  # ACCEPTED_FAILS or WEAK_TESTS
    solution: str  # e.g. "correct#0"
    verdict: str
    failed_at: str | None
    detail: str = ""


@dataclass(slots=True)
class ValidationReport:
    problems: int = 0
    without_solutions: int = 0
    solutions: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> {judged, accepted, infra}
    findings: list[Finding] = field(default_factory=list)
    infra: list[SolutionOutcome] = field(default_factory=list)
    outcomes: list[SolutionOutcome] = field(default_factory=list)

    def problems_with(self, finding: str) -> list[str]:
        return sorted({f.problem_id for f in self.findings if f.finding == finding})

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": {
                "problems": self.problems,
                "problems_without_solutions": self.without_solutions,
                "solutions": self.solutions,
                "problems_with_failing_accepted_solution": len(self.problems_with(ACCEPTED_FAILS)),
                "problems_with_weak_tests": len(self.problems_with(WEAK_TESTS)),
                "problems_with_checker_errors": len(self.problems_with(CHECKER_ERROR)),
                "infrastructure_errors": len(self.infra),
            },
            "findings": [asdict(f) for f in self.findings],
            "infrastructure_errors": [asdict(o) for o in self.infra],
            "solutions": [asdict(o) for o in self.outcomes],
        }


def solution_jobs(problems: Iterable[Problem], kinds: Iterable[str] = KINDS,
                  max_solutions: int | None = None) -> Iterator[dict[str, Any]]:
    """One judge job per reference solution; the job id names problem, kind and index."""
    for p in problems:
        for kind in kinds:
            sols = p.correct_solutions if kind == "correct" else p.incorrect_solutions
            for i, code in enumerate(sols[:max_solutions] if max_solutions is not None else sols):
                yield {"problem_id": p.id, "completion": fence(code), "job_id": f"{p.id}\x00{kind}\x00{i}"}


def outcome_of(result: JobResult) -> SolutionOutcome:
    pid, kind, index = result.job_id.split("\x00")
    return SolutionOutcome(
        problem_id=pid,
        kind=kind,
        index=int(index),
        verdict=str(result.verdict),
        reward=result.reward,
        failed_at=_failed_at(result),
        public=f"{result.public.passed}/{result.public.total}",
        hidden=f"{result.hidden.passed}/{result.hidden.total}",
        infra_message=result.infra_message,
        ms=round(result.timings.executed_ms, 1),
    )


def _failed_at(result: JobResult) -> str | None:
    """Where the first failure happened: the compile step, or the first failing public/hidden test."""
    if result.infra_error or (result.verdict == Verdict.OK and result.public.first_failure is None):
        return None
    if result.verdict in (Verdict.COMPILE_ERROR, Verdict.NO_CODE):
        return "compile"
    if result.public.first_failure is not None:
        for i, t in enumerate(result.public.tests):
            if t.verdict != Verdict.OK:
                return f"public #{i + 1}"
        return "public"
    if result.hidden.first_failure is not None:
        # all-or-nothing stops at the first hidden failure: the last test run is the one
        return f"hidden #{result.hidden.run}" if result.hidden.run else "hidden"
    return "hidden"


def validate(
    problems: Mapping[str, Problem],
    *,
    workers: int | None = None,
    runner_kind: str = "forkserver",
    kinds: Iterable[str] = KINDS,
    max_solutions: int | None = None,
    progress: bool = False,
) -> ValidationReport:
    """Judge every reference solution of ``problems`` and collect the findings."""
    from cpfleet.jobs.pool import judge_iter

    kinds = tuple(kinds)
    report = ValidationReport(problems=len(problems))
    report.without_solutions = sum(
        1 for p in problems.values()
        if not any(p.correct_solutions if k == "correct" else p.incorrect_solutions for k in kinds)
    )
    report.solutions = {k: {"judged": 0, "accepted": 0, "infra": 0} for k in kinds}
    jobs = list(solution_jobs(problems.values(), kinds, max_solutions))
    if not jobs:
        return report
    results = judge_iter(
        problems,
        jobs,
        workers=workers,
        reward_shape="all_or_nothing",
        mode="full",
        runner_kind=runner_kind,
        progress=progress,
    )
    for result in results:
        o = outcome_of(result)
        report.outcomes.append(o)
        counts = report.solutions[o.kind]
        counts["judged"] += 1
        if o.infra:
            counts["infra"] += 1
            if CheckerBroken.PREFIX in o.infra_message:
                # broken problem data: a finding about the problem, not an infrastructure failure
                report.findings.append(Finding(o.problem_id, CHECKER_ERROR, f"{o.kind}#{o.index}", o.verdict, None,
                                               o.infra_message[:300]))
            else:
                report.infra.append(o)
            continue
        if o.accepted:
            counts["accepted"] += 1
        if o.kind == "correct" and not o.accepted:
            report.findings.append(Finding(o.problem_id, ACCEPTED_FAILS, f"correct#{o.index}", o.verdict, o.failed_at,
                                           f"public {o.public}, hidden {o.hidden}, reward {o.reward:g}"))
        elif o.kind == "incorrect" and o.accepted:
            report.findings.append(Finding(o.problem_id, WEAK_TESTS, f"incorrect#{o.index}", o.verdict, None,
                                           f"passed public {o.public}, hidden {o.hidden}"))
    return report


def format_table(report: ValidationReport) -> str:
    """The findings as an aligned text table, then a summary block."""
    header = ("PROBLEM", "FINDING", "SOLUTION", "VERDICT", "FAILED AT", "DETAIL")
    rows = [(f.problem_id, f.finding, f.solution, f.verdict, f.failed_at or "-", f.detail) for f in report.findings]
    rows += [(o.problem_id, "infrastructure error", f"{o.kind}#{o.index}", o.verdict, "-", o.infra_message[:80])
             for o in report.infra]
    lines = []
    if rows:
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
        for r in [header, *rows]:
            lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + str(r[-1]))
    else:
        lines.append("no findings")
    lines.append("")
    lines.append(f"problems: {report.problems} ({report.without_solutions} without reference solutions)")
    for kind, c in report.solutions.items():
        lines.append(f"{kind} solutions: {c['judged']} judged, {c['accepted']} accepted, {c['infra']} infrastructure errors")
    lines.append(f"problems whose accepted solution fails: {len(report.problems_with(ACCEPTED_FAILS))}")
    lines.append(f"problems with weak tests (an incorrect solution passes): {len(report.problems_with(WEAK_TESTS))}")
    lines.append(f"problems whose checker cannot judge: {len(report.problems_with(CHECKER_ERROR))}")
    return "\n".join(lines)


def configure(parser: argparse.ArgumentParser) -> None:
    from cpfleet.jobs.pool import RUNNER_KINDS, default_workers

    parser.add_argument("problems", metavar="PROBLEMS", help="problem file with correct_/incorrect_solutions")
    parser.add_argument("--workers", type=slot_count, default=default_workers(), help="judging processes (default: CPUs)")
    parser.add_argument("--json", dest="json_out", metavar="OUT", default=None, type=output_file, help="also write the report as JSON to OUT (default: no JSON file)")
    parser.add_argument("--runner", choices=RUNNER_KINDS, default="forkserver", help="execution backend")
    parser.add_argument("--kinds", default="correct,incorrect", help="which solutions to judge (comma list)")
    parser.add_argument("--max-solutions", type=nonnegative_int, default=None, help="judge at most N solutions of each kind (default: all)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_loading_arguments(parser, STRICT_HELP + "; also exit 1 when anything is found")


def run(args: argparse.Namespace) -> int:
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        print(f"cpfleet validate: --kinds takes {', '.join(KINDS)}; got {args.kinds!r}", file=sys.stderr)
        return 2
    loaded = load_for_command(args, "validate")
    if loaded is None:
        return 2
    print(f"validate: {loaded.stats.summary()}", file=sys.stderr)
    report = validate(
        loaded.by_id(),
        workers=args.workers,
        runner_kind=args.runner,
        kinds=kinds,
        max_solutions=args.max_solutions,
        progress=not args.no_progress,
    )
    print(format_table(report))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")
    return 1 if args.strict and report.findings else 0
