"""Run jobs: a program and one or many stdins -> what the program did on each, nothing judged.

The same path as judging, minus the checker: the program is found (``extract_program`` for a
fenced completion) and loaded or compiled once by ``compiled.prepare`` (same compile cache, same
confined compile), then each stdin is one ``runner.run`` under the same ``Limits`` semantics
(CPU time limit with the wall-clock backstop, memory cgroup, the worker's output limit), and a
``JobBudget`` bounds the whole job's wall clock below the worker's task time limit. A run's
``files`` and ``fetch_files`` go through the fork server's per-test files and collection (the
same that places a checker's input and reads a validator's feedback): both shipped runners
have them; a runner without them makes such a job INTERNAL (the worker's setup).

What a run did is its ``RunStatus``, never INTERNAL: a non-zero exit is FINISHED with that exit
code (the caller judges), a signal of its own making is RUNTIME_ERROR, a limit is that limit.
Only the sandbox failing (``SandboxFailure``, a runner answering INTERNAL, a toolchain missing
on this worker) makes the job INTERNAL.

Nothing is cached: a run's output may depend on time, randomness or the machine, and the caller
reads that output itself, so serving one run's output for another would be a wrong answer.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from cpfleet.core import protocol
from cpfleet.core.errors import ProgramError, SandboxFailure
from cpfleet.core.languages import LANGUAGES
from cpfleet.core.results import CompileOutput, RunJobResult, RunOutput, RunStatus
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import compiled, languages
from cpfleet.sandbox.extract import Extracted, extract_program
from cpfleet.sandbox.judging import JobBudget
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult

NO_CODE_MESSAGE = "no fenced code block found in the completion: nothing was run"
# how the runner says a run was killed at what was left of the job's time budget
BUDGET_CUT = "the job's time budget ran out"


def run_limits(language: str, time_limit_s: float | None, memory_limit_mb: int | None) -> Limits:
    """The per-run limits of a run job: the caller's (or the defaults), the time limit scaled by
    the worker's multiplier for ``language`` exactly as a problem's is when judging."""
    from cpfleet.sandbox.languages import time_multiplier

    time_s = protocol.DEFAULT_RUN_TIME_LIMIT_S if time_limit_s is None else time_limit_s
    memory = protocol.DEFAULT_RUN_MEMORY_MB if memory_limit_mb is None else memory_limit_mb
    return Limits(time_s=time_s * time_multiplier(language, None), memory_mb=memory, stated=True)


def execute(
    runner: CodeRunner,
    code: str | bytes,
    stdins: Sequence[bytes],
    *,
    language: str | None,
    extract: bool = False,
    files: Mapping[str, bytes] | None = None,
    fetch_files: Sequence[str] = (),
    time_limit_s: float | None = None,
    memory_limit_mb: int | None = None,
    output_cap: int = protocol.DEFAULT_RUN_OUTPUT_CAP,
    job_id: str = "",
    time_budget_s: float | None = None,
    ends_by: float | None = None,
    start_within_s: float | None = None,
) -> RunJobResult:
    """Run ``code`` once per stdin. Never raises for anything the program or the sandbox does.

    ``extract``: ``code`` is a completion; its first fenced block (in ``language`` if set) is
    the program. Else ``code`` is the program in ``language``. ``time_budget_s`` bounds the
    job's wall clock from the program's load, ``ends_by`` (a ``time.monotonic()`` value) the
    moment its runs must end by (``JobBudget``): inputs not started within them are NOT_RUN, as
    are the inputs after the first not started ``start_within_s`` after it (left for another
    job: ``RunMessage.start_within_s``)."""
    started = time.perf_counter()
    text = code.decode("utf-8", errors="replace") if isinstance(code, bytes) else code

    def done(result: RunJobResult) -> RunJobResult:
        return replace(result, job_id=job_id, output_cap=output_cap,
                       executed_ms=(time.perf_counter() - started) * 1000.0)

    if language is not None and language not in LANGUAGES:
        return done(RunJobResult.infra(job_id, f"unknown language {language!r}; known: {', '.join(LANGUAGES)}"))
    if extract:
        found = extract_program(text, allowed=None if language is None else (language,),
                                default=language or "python3")
        if found is None:
            return done(RunJobResult(job_id, RunStatus.NO_CODE, infra_message="", language=language or ""))
    else:
        assert language is not None  # RunMessage.from_wire requires it for raw code
        found = Extracted(language, text if text.endswith("\n") else text + "\n")
    limits = run_limits(found.language, time_limit_s, memory_limit_mb)
    # keep as much stderr as the caller wants back (the runner keeps 64 KiB by default)
    limits = replace(limits, stderr_keep_bytes=max(limits.stderr_keep_bytes, output_cap))
    base = RunJobResult(job_id, RunStatus.FINISHED, language=found.language, time_limit_s=limits.time_s,
                        memory_limit_mb=limits.memory_mb)

    prepared = compiled.prepare(runner, found)
    if prepared.infra_message:
        return done(replace(base, status=RunStatus.INTERNAL, infra_error=True, infra_message=prepared.infra_message))
    if prepared.compile_error is not None:
        raw = prepared.compile_error.encode("utf-8", "surrogateescape")
        comp = CompileOutput(RunStatus.COMPILE_ERROR, stderr=_clip(raw, output_cap)[0], stderr_bytes=len(raw),
                             wall_ms=prepared.compile_ms, cache_hit=prepared.cache_hit)
        return done(replace(base, status=RunStatus.COMPILE_ERROR, compile=comp))
    comp_ok = None if languages.get(found.language).in_process else CompileOutput(
        RunStatus.FINISHED, wall_ms=prepared.compile_ms, cache_hit=prepared.cache_hit)
    base = replace(base, compile=comp_ok)

    runner.expect_runs(len(stdins))
    budget = JobBudget(time_budget_s, ends_by)
    start_by = None if start_within_s is None else time.monotonic() + start_within_s
    runs: list[RunOutput] = []
    for stdin in stdins:
        if budget.exhausted:
            runs.append(RunOutput(RunStatus.NOT_RUN, detail=f"not run: {budget.where}"))
            continue
        if runs and start_by is not None and time.monotonic() > start_by:
            runs.append(RunOutput(RunStatus.NOT_RUN, detail=f"not run: the job's start window ({start_within_s:g}s) "
                                                            "passed; left for another job"))
            continue
        capped = budget.limits_for(limits)
        try:
            rr = _run_one(runner, stdin, capped, files, fetch_files)
        except SandboxFailure as e:
            runs.append(RunOutput(RunStatus.INTERNAL, detail=str(e)))
            return done(replace(base, status=RunStatus.INTERNAL, runs=tuple(runs), infra_error=True,
                                infra_message=str(e)))
        if capped.wall_cap_s is not None and rr.status == Verdict.TIME_LIMIT and rr.error.startswith(BUDGET_CUT):
            # cut below its own limits because earlier inputs of this job used the budget: that
            # is where the job put it, not what the program did (alone it may well finish)
            runs.append(RunOutput(RunStatus.NOT_RUN, detail=f"not run to its end: {rr.error}",
                                  cpu_ms=rr.cpu_s * 1000.0, wall_ms=rr.wall_s * 1000.0, deterministic=False))
            continue
        runs.append(_output(rr, output_cap, fetch_files))
    return done(replace(base, runs=tuple(runs)))


def _run_one(runner: CodeRunner, stdin: bytes, limits: Limits, files: Mapping[str, bytes] | None,
             fetch_files: Sequence[str]) -> RunResult:
    """One run; raises SandboxFailure when the sandbox (not the program) failed."""
    if files or fetch_files:
        from cpfleet.sandbox.programs import loaded_session

        try:
            session = loaded_session(runner)
        except ProgramError as e:  # a runner without per-run files: the worker's setup
            raise SandboxFailure(f"runner {runner.name} cannot place or fetch files: {e}") from e
        rr = session.run(stdin, limits, files=files, collect=fetch_files)
    else:
        rr = runner.run(stdin, limits)
    if rr.status == Verdict.INTERNAL:
        raise SandboxFailure(f"runner {runner.name}: {rr.error or 'internal error'}")
    return rr


def _clip(data: bytes, cap: int) -> tuple[str, bool]:
    """The first ``cap`` bytes as text, and whether they were UTF-8: invalid bytes replaced, a
    character cut at the cap left out (so the text never ends in a replacement character the
    program did not write, and a cut character does not count as invalid)."""
    final = len(data) <= cap
    head = data if final else data[:cap]
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(head, final=final), True
    except UnicodeDecodeError:
        return codecs.getincrementaldecoder("utf-8")("replace").decode(head, final=final), False


def _limit_hit(rr: RunResult) -> str:
    if rr.status == Verdict.TIME_LIMIT:
        # the runner names what fired first: "CPU time limit ..." / "CPU rlimit ..." (CPU time),
        # else the wall-clock backstop or the job's time budget
        return "cpu_time" if rr.error.startswith(("CPU time limit", "CPU rlimit")) else "wall_time"
    if rr.status == Verdict.MEMORY_LIMIT:
        return "memory"
    if rr.status == Verdict.OUTPUT_LIMIT:
        return "stdout" if rr.stdout_truncated else "stderr"
    return ""


_STATUS = {
    Verdict.TIME_LIMIT: RunStatus.TIME_LIMIT,
    Verdict.MEMORY_LIMIT: RunStatus.MEMORY_LIMIT,
    Verdict.OUTPUT_LIMIT: RunStatus.OUTPUT_LIMIT,
}


def _output(rr: RunResult, cap: int, fetch_files: Sequence[str]) -> RunOutput:
    """The caller's view of one run: its status, and its outputs clipped to ``cap`` bytes."""
    status = _STATUS.get(rr.status)
    if status is None:  # OK or RUNTIME_ERROR: it ended on its own, or a signal of its own killed it
        status = RunStatus.RUNTIME_ERROR if rr.signal is not None else RunStatus.FINISHED
    stdout_bytes = max(rr.stdout_total, len(rr.stdout))
    stderr_bytes = max(rr.stderr_total, len(rr.stderr))
    fetched = {name: rr.files[name] for name in fetch_files if name in rr.files}
    stdout, stdout_utf8 = _clip(rr.stdout, cap)
    return RunOutput(
        status=status,
        exit_code=rr.exit_code,
        signal=rr.signal,
        stdout=stdout,
        stderr=_clip(rr.stderr, cap)[0],
        stdout_bytes=stdout_bytes,
        stderr_bytes=stderr_bytes,
        stdout_truncated=stdout_bytes > min(cap, len(rr.stdout)) or rr.stdout_truncated,
        stdout_utf8=stdout_utf8,
        stderr_truncated=stderr_bytes > min(cap, len(rr.stderr)) or rr.stderr_truncated,
        cpu_ms=rr.cpu_s * 1000.0,
        wall_ms=rr.wall_s * 1000.0,
        memory_kb=rr.max_rss_kb,
        limit=_limit_hit(rr),
        detail="" if status == RunStatus.FINISHED else rr.error,
        deterministic=rr.deterministic,
        files=fetched,
        files_truncated=tuple(n for n, data in fetched.items() if len(data) >= protocol.FETCH_FILE_BYTES),
    )
