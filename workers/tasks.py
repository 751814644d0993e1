"""The evaluate and run tasks: one job in, exactly one reply out (at-least-once; the client dedupes).

Except a withdrawn job (cancelled by its client, or its client closed or died): it is dropped
before anything of it runs, and nobody waits for its reply (see ``workers.withdrawal``).

Every path ends in a reply: a malformed message that still names its reply list gets an INTERNAL
result, an unknown problem gets UNKNOWN_PROBLEM, a stored problem that the judging rule refuses
for the job's mode (``validate_for_judging``) gets INTERNAL naming the reason (never a verdict),
an exception or a soft time limit gets INTERNAL with the reason. Paths the task cannot reach itself (its pool process died for good, the hard
time limit) are answered by the main process, see ``cpfleet.workers.app``.

The run task (``protocol.RUN_TASK_NAME``) takes the same path for a run job (a program and its
stdins, nothing judged: ``cpfleet.sandbox.runs``): the same admission, reply and metrics, no
result cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from celery.exceptions import Reject, SoftTimeLimitExceeded

from cpfleet.core import protocol
from cpfleet.core.errors import IsolationRequirementError
from cpfleet.core.problem import Problem, judging_refusal
from cpfleet.core.protocol import JobMessage, ProtocolError, RunMessage
from cpfleet.core.results import JobResult, JobStamp, RunJobResult
from cpfleet.core.verdict import Verdict
from cpfleet.workers import joblog
from cpfleet.workers.app import app, resources, settings, stop_node_for_isolation
from cpfleet.workers.config import job_end_s
from cpfleet.workers.failorder import failed_test, order_from_counts
from cpfleet.workers.replies import push_reply
from cpfleet.workers.withdrawal import Admission, admit, admit_run

log = logging.getLogger("cpfleet.worker")

R = TypeVar("R", JobResult, RunJobResult)


def _text(completion: str | bytes) -> str:
    if isinstance(completion, bytes):
        return completion.decode("utf-8", errors="replace")
    return completion


def run_job(msg: JobMessage, hostname: str, admission: Admission | None = None, ends_by: float | None = None) -> JobResult:
    """Look the problem up, serve from the result cache or run the sandbox; never raises.
    ``admission``: the withdrawal check's answer, which may carry the problem's version;
    ``ends_by``: the ``time.monotonic()`` by which the tests must end (``task_ends_by``)."""
    started = time.time()
    queued_ms = max(0.0, (started - msg.submitted_at) * 1000.0) if msg.submitted_at else 0.0
    # every answer of this job, judged or not, is built from it (the worker's fields included)
    stamp = JobStamp(msg.job_id, msg.problem_id, msg.mode, msg.reward_shape, worker=hostname, queued_ms=queued_ms)

    def judge() -> JobResult:
        if msg.deadline is not None and started > msg.deadline:
            # The caller has already given up on this job (and answered it INTERNAL itself).
            return stamp.infra("deadline passed before a worker picked the job up")
        return _judge_job(msg, stamp, admission or Admission(None), ends_by)

    return _guarded(judge, stamp.infra, "job", msg.job_id)


def _guarded(body: Callable[[], R], infra: Callable[[str], R], kind: str, job_id: str) -> R:
    """``body()``, or ``infra(why)`` when it raised: the soft time limit, or a bug in the worker
    (logged). The runner may be mid-test either way, so it is never reused. A sandbox below the
    node's isolation requirement propagates: not this job's failure, the task puts it back."""
    try:
        return body()
    except IsolationRequirementError:
        raise
    except SoftTimeLimitExceeded:
        resources.reset_runner()  # interrupted mid-test: never reuse that runner
        return infra(f"job exceeded the soft time limit ({settings.soft_time_limit_s:g}s)")
    except Exception as exc:
        log.exception("%s %s failed inside the worker", kind, job_id)
        resources.reset_runner()
        return infra(f"worker error: {type(exc).__name__}: {exc}")


def task_ends_by() -> float:
    """The ``time.monotonic()`` by which a task starting now must end its tests: the soft time
    limit counts from the task's start, and loading the program (compiles) comes out of it
    before the tests' own budget starts (``config.job_end_s``)."""
    return time.monotonic() + job_end_s(settings.soft_time_limit_s)


def _judge_job(msg: JobMessage, stamp: JobStamp, admission: Admission, ends_by: float | None) -> JobResult:
    found = resources.problems.lookup(msg.problem_id, known_version=admission.version,
                                      version_known=admission.version_read)
    _record_problem_lookup("unknown" if found is None else found.outcome)
    if found is None:
        return stamp.infra(f"unknown problem id {msg.problem_id!r}", Verdict.UNKNOWN_PROBLEM)
    problem, version = found.problem, found.version
    refusal = judging_refusal(problem, msg.mode)
    if refusal is not None:
        # a public-mode job on a problem without public tests, or a problem stored by code that
        # did not apply the rule: broken problem data, answered explicitly and never judged
        return stamp.infra(f"problem refused, not judged: {refusal}")
    cache_key = None
    if settings.result_cache and msg.use_cache:
        # no program (NO_CODE, a refused language): judged without running anything, so nothing
        # to save, and its feedback names what the text held, which one key for all would mix up
        cache_key = _cache_key(msg, problem, version)
    if cache_key is not None:
        t0 = time.perf_counter()
        if admission.cache_key == cache_key:  # read in the admission's round trip: same version
            cached = resources.results.decode(cache_key, admission.cache_blob, msg.job_id)
        else:
            cached = resources.results.get(cache_key, msg.job_id)
        if cached is not None:
            return replace(stamp, problem_version=version).cached(cached, (time.perf_counter() - t0) * 1000.0)
    from cpfleet.sandbox.env import judge_locally

    result = judge_locally(
        problem,
        msg.completion,
        resources.runner,
        reward_shape=msg.reward_shape,
        mode=msg.mode,
        job_id=msg.job_id,
        problem_version=version,  # the store's version: no re-hashing every test per job
        language=msg.language,
        time_budget_s=settings.job_time_budget_s,  # ends before the soft limit: see config.job_time_budget
        ends_by=ends_by,
        hidden_order=order_from_counts(admission.fail_counts, len(problem.hidden_tests),
                                       [len(t.input) + len(t.output) for t in problem.hidden_tests]),
        worker=stamp.worker,
        queued_ms=stamp.queued_ms,
    )
    if result.infra_error:
        # The sandbox failed (or was interrupted, e.g. by the soft time limit, mid-test): do not
        # trust this runner with the next job.
        resources.reset_runner()
    if cache_key is not None:
        resources.results.put(cache_key, result)
    return result


def _cache_key(msg: JobMessage, problem: Problem, version: str) -> str | None:
    """The job's result cache key; None when it has no program to key (nothing is cached)."""
    from cpfleet.sandbox.env import program_identity

    identity = program_identity(problem, _text(msg.completion), msg.language)
    return None if identity is None else resources.results.key(version, identity, msg.reward_shape, msg.mode)


def _admission_reads(msg: JobMessage, fail_fast: bool) -> tuple[int, str | None]:
    """What the admission's round trip reads beyond the claim and the version, from this
    process's copy of the problem (none held: nothing more): the fail counts of its hidden tests
    when the job runs in the learnt order, and the result cache key computed from the copy (the
    probe; None when the cache is off for the job). Never raises: both are optimisations, and
    the job's own lookup follows."""
    held = resources.problems.peek(msg.problem_id)
    if held is None:
        return 0, None
    probe = None
    if settings.result_cache and msg.use_cache:
        try:
            probe = _cache_key(msg, held[0], held[1])
        except Exception:
            log.exception("job %s: computing its result cache probe failed", msg.job_id)
    return (len(held[0].hidden_tests) if fail_fast else 0), probe


def _record_problem_lookup(outcome: str) -> None:
    try:
        from cpfleet.workers import metrics

        metrics.record_problem_lookup(outcome)
    except Exception:  # metrics must never cost a reply
        log.exception("recording a problem-cache lookup failed")


def _record(result: JobResult | RunJobResult) -> None:
    """The job's metrics and, for a judge job, its structured log line; never raises."""
    try:
        from cpfleet.workers import metrics

        if isinstance(result, RunJobResult):
            metrics.record_run(result)
        else:
            metrics.record_job(result)  # also writes the job's structured log line
    except Exception:  # metrics must never cost a reply
        log.exception("recording metrics for %s %s failed", "run job" if isinstance(result, RunJobResult) else "job",
                      result.job_id)


def _executed(execute: Callable[[], R]) -> R:
    """``execute()``; a sandbox below the node's isolation requirement puts the job back on the
    queue unjudged, for a node that can take it, and this node stops taking jobs."""
    try:
        return execute()
    except IsolationRequirementError as exc:
        stop_node_for_isolation(exc)
        raise Reject(str(exc), requeue=True) from exc


def _answer(msg: JobMessage | RunMessage, result: JobResult | RunJobResult,
            count_failure: tuple[str, str] | None = None) -> None:
    """Push the job's one reply, then record it and set up the next job's sandbox (after the
    reply: the client need not wait for metrics and the job log line; the sandbox is prepared
    while this process waits for its next job). The same tail for both tasks."""
    try:
        push_reply(resources.redis, msg.reply_to, result, msg.reply_ttl, settings.reply_retry_s, keep_until=msg.deadline,
                   count_failure=count_failure, stream=msg.reply_stream)
    finally:
        _record(result)
        resources.prepare_next()


# Both tasks alike: acked only after their reply (a job its node loses is delivered again, never
# dropped), run again at once up to max_retries times when their pool process dies (then an
# INTERNAL reply), and no result backend (the reply goes to the client's stream or list).
_TASK_OPTIONS: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "max_retries": settings.max_retries,
    "default_retry_delay": 0,
    "ignore_result": True,
}


@app.task(name=protocol.TASK_NAME, **_TASK_OPTIONS)
def evaluate_task(self: Any, job: Any = None, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The Celery entry point: validate the message, evaluate, push the one reply.

    The return value is a small summary of the job (``flower_summary``): with no result backend
    it is stored nowhere, but Celery puts its repr in the task-succeeded event, which is what
    Flower shows as the task's Result, so an operator sees verdicts and rewards there."""
    hostname = str(self.request.hostname or "")
    ends_by = task_ends_by()
    try:
        msg = JobMessage.from_wire(job)
    except ProtocolError as exc:
        _reject(self.request.id, job, str(exc), hostname)
        return {"verdict": "REJECTED", "reason": str(exc)[:200]}
    fail_fast = settings.fail_fast and protocol.learns_fail_order(msg.mode, msg.reward_shape)
    count_tests, probe = _admission_reads(msg, fail_fast)
    admission = admit(resources.redis, msg, count_tests=count_tests, cache_probe=probe)
    if admission.withdrawn is not None:
        joblog.log_event("job_withdrawn", job_id=msg.job_id, problem_id=msg.problem_id, reason=admission.withdrawn,
                         worker=hostname)
        return {"verdict": "WITHDRAWN", "job_id": msg.job_id, "reason": admission.withdrawn}
    result = _executed(lambda: run_job(msg, hostname, admission, ends_by))
    failed = failed_test(result) if fail_fast else None
    count = None  # the fail count this job adds: its first failing hidden test, among the counted ones
    if failed is not None and failed < protocol.MAX_COUNTED_TESTS:
        count = (protocol.problem_key(msg.problem_id), protocol.fail_count_field(failed))
    _answer(msg, result, count)
    return flower_summary(result)


def flower_summary(result: JobResult) -> dict[str, Any]:
    """What Flower shows as a task's Result: verdict first (a WRONG_ANSWER job is a task that
    succeeded, so the verdict is where a failure shows), the reward (None: infrastructure
    error, never a score), and the rewarded tests passed. A few dozen bytes per event."""
    summary: dict[str, Any] = {"verdict": str(result.verdict), "reward": result.reward}
    summary["tests"] = f"hidden {result.hidden.passed}/{result.hidden.total}, public {result.public.passed}/{result.public.total}"
    summary["problem"] = result.problem_id
    summary["job"] = result.job_id
    if result.infra_error and result.infra_message:
        summary["error"] = result.infra_message[:160]
    return summary


# --- run jobs ------------------------------------------------------------------------------------


def run_run_job(msg: RunMessage, hostname: str, ends_by: float | None = None) -> RunJobResult:
    """Execute a run job in this pool process's sandbox runner; never raises. No result cache:
    a run's output is the caller's to read and may differ between runs (time, randomness).
    ``ends_by`` as for ``run_job``."""
    started = time.time()
    queued_ms = max(0.0, (started - msg.submitted_at) * 1000.0) if msg.submitted_at else 0.0

    def infra(why: str) -> RunJobResult:
        return replace(RunJobResult.infra(msg.job_id, why), worker=hostname, queued_ms=queued_ms)

    def run() -> RunJobResult:
        if msg.deadline is not None and started > msg.deadline:
            return infra("deadline passed before a worker picked the job up")
        from cpfleet.sandbox.runs import execute

        result = execute(
            resources.runner,
            msg.code,
            msg.stdins,
            language=msg.language,
            extract=msg.extract,
            files=msg.files,
            fetch_files=msg.fetch_files,
            time_limit_s=msg.time_limit_s,
            memory_limit_mb=msg.memory_limit_mb,
            output_cap=msg.output_cap,
            job_id=msg.job_id,
            time_budget_s=settings.job_time_budget_s,
            ends_by=ends_by,
            start_within_s=msg.start_within_s,
        )
        if result.infra_error:
            resources.reset_runner()  # the sandbox failed: do not trust it with the next job
        return replace(result, worker=hostname, queued_ms=queued_ms)

    return _guarded(run, infra, "run job", msg.job_id)


@app.task(name=protocol.RUN_TASK_NAME, **_TASK_OPTIONS)
def run_task(self: Any, job: Any = None, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The Celery entry point of run jobs: validate, withdraw-check, execute, push the one reply
    (the same reply list, dedupe and withdrawal as evaluate jobs). Returns a small summary for
    Flower's Result column, as evaluate_task does (``flower_run_summary``)."""
    hostname = str(self.request.hostname or "")
    ends_by = task_ends_by()
    try:
        msg = RunMessage.from_wire(job)
    except ProtocolError as exc:
        _reject(self.request.id, job, str(exc), hostname)
        return {"status": "REJECTED", "reason": str(exc)[:200]}
    admission = admit_run(resources.redis, msg)
    if admission.withdrawn is not None:
        joblog.log_event("job_withdrawn", job_id=msg.job_id, problem_id="", reason=admission.withdrawn,
                         worker=hostname)
        return {"status": "WITHDRAWN", "job": msg.job_id, "reason": admission.withdrawn}
    result = _executed(lambda: run_run_job(msg, hostname, ends_by))
    _answer(msg, result)
    return flower_run_summary(result)


def flower_run_summary(result: RunJobResult) -> dict[str, Any]:
    """What Flower shows for a run job: its status and each run's status (no output: it can be
    megabytes, and Flower keeps every event in memory)."""
    summary: dict[str, Any] = {"status": str(result.status), "language": result.language}
    summary["runs"] = ", ".join(str(r.status) for r in result.runs[:8]) + (" ..." if len(result.runs) > 8 else "")
    summary["job"] = result.job_id
    if result.infra_error and result.infra_message:
        summary["error"] = result.infra_message[:160]
    return summary


def _reject(task_id: str, job: Any, reason: str, hostname: str) -> None:
    """A malformed message: logged, and answered when it says where to answer."""
    log.error("rejected malformed job message (task %s): %s", task_id, reason)
    if not isinstance(job, dict):
        return
    reply_to, job_id = job.get("reply_to"), job.get("job_id")
    if not (isinstance(reply_to, str) and reply_to and isinstance(job_id, str) and job_id):
        return
    result: JobResult | RunJobResult
    if job.get("kind") == protocol.RUN_KIND:
        result = replace(RunJobResult.infra(job_id, f"malformed run job: {reason}"), worker=hostname)
    else:
        problem_id = job.get("problem_id")
        stamp = JobStamp(job_id, problem_id if isinstance(problem_id, str) else "", worker=hostname)
        result = stamp.infra(f"malformed job: {reason}")
    try:
        stream = job.get("reply_stream")
        push_reply(resources.redis, reply_to, result, protocol.DEFAULT_REPLY_TTL_S, settings.reply_retry_s,
                   stream=stream if isinstance(stream, str) and stream else None)
    except Exception:
        log.exception("could not answer malformed job %s", job_id)
