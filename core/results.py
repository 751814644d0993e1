"""Typed results: one test, one test set, one job. The same fields go over the wire and out of
``cpfleet judge``, so ``to_dict``/``from_dict`` only use msgpack/JSON-friendly types."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from cpfleet.core.verdict import Verdict


@dataclass(slots=True)
class TestReport:
    """Outcome of one test as shown to the trainer (no outputs: those stay in the observation)."""

    verdict: Verdict
    ms: float  # wall-clock milliseconds
    cpu_ms: float = 0.0
    deterministic: bool = True  # False: the verdict depended on machine load (see RunResult)


@dataclass(slots=True)
class TestSetSummary:
    passed: int = 0
    total: int = 0  # tests in the set (for all-or-nothing, also those not run after a failure)
    run: int = 0  # tests actually executed
    first_failure: Verdict | None = None
    tests: list[TestReport] = field(default_factory=list)  # public tests only, those run, in order


@dataclass(slots=True)
class Timings:
    queued_ms: float = 0.0  # from submit to the worker picking the job up (fleet only)
    executed_ms: float = 0.0  # wall time of the evaluation itself
    cpu_ms: float = 0.0  # CPU time of all test programs together
    compile_ms: float = 0.0  # wall time of compiling the solution (0: Python, or a compile cache hit)


@dataclass(slots=True)
class JobResult:
    job_id: str
    problem_id: str
    reward: float | None  # None exactly when infra_error: never a silent 0
    verdict: Verdict
    infra_error: bool = False
    infra_message: str = ""
    observation: str = ""
    public: TestSetSummary = field(default_factory=TestSetSummary)
    hidden: TestSetSummary = field(default_factory=TestSetSummary)
    timings: Timings = field(default_factory=Timings)
    worker: str = ""
    cache_hit: bool = False
    problem_version: str = ""
    mode: str = "full"
    reward_shape: str = "all_or_nothing"
    language: str = ""  # the language the program was judged in ("" when none was found)
    # False when any test's verdict depended on machine load (wall-clock backstop, memory judged
    # near the limit): a quieter machine could decide otherwise, so the result cache skips it
    deterministic: bool = True
    # set when the job's budget stopped it: the limit verdict and where it fired; the tests
    # after it were not run (counted as failed)
    stopped: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = str(self.verdict)
        for part in ("public", "hidden"):
            s = d[part]
            s["first_failure"] = None if s["first_failure"] is None else str(s["first_failure"])
            for t in s["tests"]:
                t["verdict"] = str(t["verdict"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobResult:
        def summary(s: dict[str, Any] | None) -> TestSetSummary:
            s = s or {}
            ff = s.get("first_failure")
            return TestSetSummary(
                passed=int(s.get("passed", 0)),
                total=int(s.get("total", 0)),
                run=int(s.get("run", 0)),
                first_failure=None if ff is None else Verdict(ff),
                tests=[
                    TestReport(
                        Verdict(t["verdict"]),
                        float(t["ms"]),
                        float(t.get("cpu_ms", 0.0)),
                        bool(t.get("deterministic", True)),
                    )
                    for t in s.get("tests", [])
                ],
            )

        t = d.get("timings") or {}
        reward = d.get("reward")
        return cls(
            job_id=str(d["job_id"]),
            problem_id=str(d["problem_id"]),
            reward=None if reward is None else float(reward),
            verdict=Verdict(d["verdict"]),
            infra_error=bool(d.get("infra_error", False)),
            infra_message=str(d.get("infra_message", "")),
            observation=str(d.get("observation", "")),
            public=summary(d.get("public")),
            hidden=summary(d.get("hidden")),
            timings=Timings(
                queued_ms=float(t.get("queued_ms", 0.0)),
                executed_ms=float(t.get("executed_ms", 0.0)),
                cpu_ms=float(t.get("cpu_ms", 0.0)),
                compile_ms=float(t.get("compile_ms", 0.0)),
            ),
            worker=str(d.get("worker", "")),
            cache_hit=bool(d.get("cache_hit", False)),
            problem_version=str(d.get("problem_version", "")),
            mode=str(d.get("mode", "full")),
            reward_shape=str(d.get("reward_shape", "all_or_nothing")),
            language=str(d.get("language", "")),
            deterministic=bool(d.get("deterministic", True)),
            stopped=str(d.get("stopped", "")),
        )

    @classmethod
    def infra(cls, job_id: str, problem_id: str, message: str, verdict: Verdict = Verdict.INTERNAL) -> JobResult:
        """An explicit infrastructure failure: the trainer masks it instead of learning from it."""
        return cls(
            job_id=job_id,
            problem_id=problem_id,
            reward=None,
            verdict=verdict,
            infra_error=True,
            infra_message=message,
            observation=f"[infrastructure error: {message}]",
        )
