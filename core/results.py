"""Typed results: one test, one test set, one job. The same fields go over the wire and out of
``cpfleet judge``, so ``to_dict``/``from_dict`` only use msgpack/JSON-friendly types."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any, ClassVar

from cpfleet.core.protocol import rewarded_tests
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
    # which test gave ``first_failure``: its 0-based index in the set as stored (hidden tests may
    # run in another order, see ``sandbox.env.judge_locally``'s ``hidden_order``); None: no failure
    first_failure_index: int | None = None
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

    @property
    def rewarded(self) -> TestSetSummary:
        """The tests this job's reward and verdict come from (``protocol.rewarded_tests``)."""
        return self.public if rewarded_tests(self.mode) == "public" else self.hidden

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
            ffi = s.get("first_failure_index")
            return TestSetSummary(
                passed=int(s.get("passed", 0)),
                total=int(s.get("total", 0)),
                run=int(s.get("run", 0)),
                first_failure=None if ff is None else Verdict(ff),
                first_failure_index=None if ffi is None else int(ffi),
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
        """An explicit infrastructure failure: the trainer masks it instead of learning from it
        (``JobStamp.infra`` with nothing but the two ids known)."""
        return JobStamp(job_id, problem_id).infra(message, verdict)


@dataclass(frozen=True, slots=True)
class JobStamp:
    """What a job's result carries besides its judging: whose job, under which options, judged
    against which problem version, on which worker, after how long a queue wait. The judge
    (``sandbox.env.Judge``), the worker's own answers (``workers.tasks``, ``workers.app``) and
    the client's (``producer.pending``) build every ``JobResult`` from one, so a result is made
    once with all its fields instead of being patched on its way out."""

    job_id: str
    problem_id: str
    mode: str = "full"
    reward_shape: str = "all_or_nothing"
    problem_version: str = ""
    worker: str = ""
    queued_ms: float = 0.0

    def result(
        self,
        reward: float | None,
        verdict: Verdict,
        *,
        observation: str = "",
        public: TestSetSummary | None = None,
        hidden: TestSetSummary | None = None,
        executed_ms: float = 0.0,
        cpu_ms: float = 0.0,
        compile_ms: float = 0.0,
        language: str = "",
        deterministic: bool = True,
        stopped: str = "",
        infra_error: bool = False,
        infra_message: str = "",
    ) -> JobResult:
        """The job's result (``infra`` for an infrastructure error)."""
        return JobResult(
            job_id=self.job_id,
            problem_id=self.problem_id,
            reward=reward,
            verdict=verdict,
            infra_error=infra_error,
            infra_message=infra_message,
            observation=observation,
            public=TestSetSummary() if public is None else public,
            hidden=TestSetSummary() if hidden is None else hidden,
            timings=Timings(queued_ms=self.queued_ms, executed_ms=executed_ms, cpu_ms=cpu_ms, compile_ms=compile_ms),
            worker=self.worker,
            problem_version=self.problem_version,
            mode=self.mode,
            reward_shape=self.reward_shape,
            language=language,
            deterministic=deterministic,
            stopped=stopped,
        )

    def infra(
        self,
        message: str,
        verdict: Verdict = Verdict.INTERNAL,
        *,
        executed_ms: float = 0.0,
        cpu_ms: float = 0.0,
        language: str = "",
        observation: str | None = None,
    ) -> JobResult:
        """An explicit infrastructure failure: the trainer masks it instead of learning from it.
        ``observation``: the feedback when it must not quote ``message`` (default: it does)."""
        if observation is None:
            observation = f"[infrastructure error: {message}]"
        return self.result(None, verdict, observation=observation, executed_ms=executed_ms,
                           cpu_ms=cpu_ms, language=language, infra_error=True, infra_message=message)

    def cached(self, cached: JobResult, executed_ms: float) -> JobResult:
        """A result-cache hit answering this job: the cached judging, this job's fields
        (``cache_hit`` set, no CPU spent; the compile time is the cached job's)."""
        return replace(
            cached,
            job_id=self.job_id,
            problem_id=self.problem_id,
            mode=self.mode,
            reward_shape=self.reward_shape,
            problem_version=self.problem_version,
            worker=self.worker,
            cache_hit=True,
            timings=Timings(queued_ms=self.queued_ms, executed_ms=executed_ms, cpu_ms=0.0,
                            compile_ms=cached.timings.compile_ms),
        )


# --- run jobs ----------------------------------------------------------------------------------


class RunStatus(StrEnum):
    """How one run of a program ended (``RunOutput.status``), or why a run job ran nothing
    (``RunJobResult.status``). Only INTERNAL is the infrastructure's; every other status is the
    program's own doing."""

    FINISHED = "FINISHED"  # exited on its own, within the limits (``exit_code`` says with what)
    TIME_LIMIT = "TIME_LIMIT"  # CPU time limit, or the wall-clock backstop (``limit`` says which)
    MEMORY_LIMIT = "MEMORY_LIMIT"
    OUTPUT_LIMIT = "OUTPUT_LIMIT"  # wrote more than the worker's output limit: stopped
    RUNTIME_ERROR = "RUNTIME_ERROR"  # killed by a signal of its own making (``signal``)
    COMPILE_ERROR = "COMPILE_ERROR"  # job: the program did not compile; nothing ran
    NO_CODE = "NO_CODE"  # job: a completion without a usable fenced block; nothing ran
    NOT_RUN = "NOT_RUN"  # not run to its end: the job's time budget ran out before it or cut it short
    INTERNAL = "INTERNAL"  # the sandbox or the fleet failed: says nothing about the program


@dataclass(frozen=True, slots=True)
class RunOutput:
    """One run of the program on one stdin.

    ``stdout``/``stderr`` are the first ``output_cap`` bytes the program wrote, decoded as UTF-8
    (invalid bytes replaced); ``stdout_bytes``/``stderr_bytes`` are how many it really wrote
    (for OUTPUT_LIMIT: at least the limit); ``stdout_truncated`` says the text is a prefix.
    ``stdout_utf8`` is False when a byte of that prefix was not UTF-8 and became U+FFFD: such
    output cannot equal an expected text, even one that holds U+FFFD itself.
    ``limit`` names the limit that stopped it: "cpu_time", "wall_time", "memory", "stdout",
    "stderr" or "". ``files``: the requested ``fetch_files`` that existed after the run (each
    at most protocol.FETCH_FILE_BYTES; ``files_truncated`` lists those that may be longer)."""

    status: RunStatus
    exit_code: int | None = None  # its exit status when it exited (None: killed by a signal)
    signal: int | None = None  # the signal that killed it (RUNTIME_ERROR; also limits' kills)
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_truncated: bool = False  # ``stdout`` is a prefix of what the program wrote
    stdout_utf8: bool = True  # no byte of the prefix was replaced (absent on the wire: True)
    stderr_truncated: bool = False
    cpu_ms: float = 0.0
    wall_ms: float = 0.0
    memory_kb: int = 0  # peak resident set size
    limit: str = ""
    detail: str = ""  # what fired, in words (the sandbox's message); why INTERNAL / NOT_RUN
    deterministic: bool = True  # False: the status depended on machine load (wall-clock backstop)
    files: dict[str, bytes] = field(default_factory=dict)
    files_truncated: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """FINISHED with exit code 0."""
        return self.status == RunStatus.FINISHED and self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        d["files_truncated"] = list(self.files_truncated)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunOutput:
        files = d.get("files") or {}
        return cls(
            status=RunStatus(d["status"]),
            exit_code=None if d.get("exit_code") is None else int(d["exit_code"]),
            signal=None if d.get("signal") is None else int(d["signal"]),
            stdout=str(d.get("stdout", "")),
            stderr=str(d.get("stderr", "")),
            stdout_bytes=int(d.get("stdout_bytes", 0)),
            stderr_bytes=int(d.get("stderr_bytes", 0)),
            stdout_truncated=bool(d.get("stdout_truncated", False)),
            stdout_utf8=bool(d.get("stdout_utf8", True)),
            stderr_truncated=bool(d.get("stderr_truncated", False)),
            cpu_ms=float(d.get("cpu_ms", 0.0)),
            wall_ms=float(d.get("wall_ms", 0.0)),
            memory_kb=int(d.get("memory_kb", 0)),
            limit=str(d.get("limit", "")),
            detail=str(d.get("detail", "")),
            deterministic=bool(d.get("deterministic", True)),
            files={str(k): bytes(v) for k, v in files.items()},
            files_truncated=tuple(str(x) for x in d.get("files_truncated", ())),
        )


@dataclass(frozen=True, slots=True)
class CompileOutput:
    """The compile step of a compiled language (C, C++, Java, PyPy's byte-compile), or a
    Python program's syntax check when it failed. ``status``: FINISHED (compiled) or
    COMPILE_ERROR (``stderr`` has the diagnostics, clipped to the job's output cap, with their
    true size in ``stderr_bytes``); ``cache_hit``: the artifact came from this host's compile
    cache (``wall_ms`` 0)."""

    status: RunStatus
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    wall_ms: float = 0.0
    cache_hit: bool = False

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.FINISHED

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CompileOutput:
        return cls(
            status=RunStatus(d["status"]),
            stdout=str(d.get("stdout", "")),
            stderr=str(d.get("stderr", "")),
            stdout_bytes=int(d.get("stdout_bytes", 0)),
            stderr_bytes=int(d.get("stderr_bytes", 0)),
            wall_ms=float(d.get("wall_ms", 0.0)),
            cache_hit=bool(d.get("cache_hit", False)),
        )


@dataclass(frozen=True, slots=True)
class RunJobResult:
    """What a run job did: one ``RunOutput`` per stdin, in order, plus the compile step.

    ``status`` is the job's: FINISHED when the program was run (each input then has its own
    status, which may be any of TIME_LIMIT .. NOT_RUN), COMPILE_ERROR or NO_CODE when nothing
    could run (``runs`` is empty), INTERNAL when the fleet failed (``infra_error`` set: the
    caller must not read anything about the program into it; ``runs`` may be empty or hold
    INTERNAL entries). ``compile`` is None for CPython unless its syntax check failed.
    ``time_limit_s``/``memory_limit_mb`` are the limits each run actually had."""

    job_id: str
    status: RunStatus
    runs: tuple[RunOutput, ...] = ()
    compile: CompileOutput | None = None
    language: str = ""  # the language the program ran in ("" when none was found)
    infra_error: bool = False
    infra_message: str = ""
    time_limit_s: float = 0.0
    memory_limit_mb: int = 0
    output_cap: int = 0
    worker: str = ""
    queued_ms: float = 0.0  # from publication to a worker picking the job up
    executed_ms: float = 0.0  # wall time of the job on the worker (compile + runs)

    kind: ClassVar[str] = "run"

    @property
    def ok(self) -> bool:
        """Every input ran, exited 0 and stayed within the limits."""
        return self.status == RunStatus.FINISHED and bool(self.runs) and all(r.ok for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "job_id": self.job_id,
            "status": str(self.status),
            "runs": [r.to_dict() for r in self.runs],
            "compile": None if self.compile is None else self.compile.to_dict(),
            "language": self.language,
            "infra_error": self.infra_error,
            "infra_message": self.infra_message,
            "time_limit_s": self.time_limit_s,
            "memory_limit_mb": self.memory_limit_mb,
            "output_cap": self.output_cap,
            "worker": self.worker,
            "queued_ms": self.queued_ms,
            "executed_ms": self.executed_ms,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunJobResult:
        comp = d.get("compile")
        return cls(
            job_id=str(d["job_id"]),
            status=RunStatus(d["status"]),
            runs=tuple(RunOutput.from_dict(r) for r in d.get("runs") or ()),
            compile=None if comp is None else CompileOutput.from_dict(comp),
            language=str(d.get("language", "")),
            infra_error=bool(d.get("infra_error", False)),
            infra_message=str(d.get("infra_message", "")),
            time_limit_s=float(d.get("time_limit_s", 0.0)),
            memory_limit_mb=int(d.get("memory_limit_mb", 0)),
            output_cap=int(d.get("output_cap", 0)),
            worker=str(d.get("worker", "")),
            queued_ms=float(d.get("queued_ms", 0.0)),
            executed_ms=float(d.get("executed_ms", 0.0)),
        )

    @classmethod
    def infra(cls, job_id: str, message: str) -> RunJobResult:
        """An infrastructure failure: nothing about the program may be read into it."""
        return cls(job_id=job_id, status=RunStatus.INTERNAL, infra_error=True, infra_message=message)


def result_from_dict(d: dict[str, Any]) -> JobResult | RunJobResult:
    """A reply's result: a run job's (``kind`` "run") or a judge job's."""
    if d.get("kind") == RunJobResult.kind:
        return RunJobResult.from_dict(d)
    return JobResult.from_dict(d)
