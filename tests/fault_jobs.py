"""TEST ONLY: jobs that fail the worker on purpose, for the fault tests. Never shipped: a test
worker loads this module with Celery's ``--include fault_jobs`` (``FleetWorker(faults=True)``),
and only such a worker honours a fault; a production worker judges the same job normally.

The sandbox keeps a test program from hurting its worker, so a job that kills its pool process,
or hangs deaf to the soft time limit, cannot be written as a program. The fault travels in the
job id, after ``FAULT_MARK``: ``job_id("poison", "exit")`` is ``"poison#exit"``.

* ``exit``: the pool process exits (``os._exit``) when it starts the job: every attempt dies.
* ``sleep:S``: the job takes S seconds more (inside the job, so the soft time limit stops it).
* ``hang:S``: the job spins S seconds, swallowing the soft time limit: only the hard one stops it.

How: this module wraps the function each job path calls inside its error handling
(``workers.tasks._judge_job`` for judge jobs, ``sandbox.runs.execute`` for run jobs), in the
worker's main process before the pool forks, so every pool process has the wrapper.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

log = logging.getLogger("cpfleet.worker")

FAULT_MARK = "#"


def job_id(name: str, fault: str) -> str:
    """A job id that carries ``fault`` to a worker that loaded this module."""
    return f"{name}{FAULT_MARK}{fault}"


def fault_of(wire_id: str) -> str | None:
    """The fault a job's wire id (``<job id>/<attempt uuid>``) carries, if any."""
    user_id = wire_id.rsplit("/", 1)[0]
    if FAULT_MARK not in user_id:
        return None
    return user_id.rsplit(FAULT_MARK, 1)[1]


def act(wire_id: str) -> None:
    fault = fault_of(wire_id)
    if fault is None:
        return
    if fault == "exit":
        log.warning("fault job %s exits its pool process (pid %d)", wire_id, os.getpid())
        os._exit(70)
    if fault.startswith("sleep:"):
        time.sleep(float(fault.split(":", 1)[1]))
    elif fault.startswith("hang:"):
        end = time.monotonic() + float(fault.split(":", 1)[1])
        while time.monotonic() < end:  # deaf to the soft limit: only the hard limit stops it
            try:
                time.sleep(0.05)
            except SoftTimeLimitExceeded:
                pass


def _wrap(fn: Callable[..., Any], wire_id_of: Callable[..., str]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        act(wire_id_of(*args, **kwargs))
        return fn(*args, **kwargs)

    return wrapper


def _install() -> None:
    from cpfleet.sandbox import runs
    from cpfleet.workers import tasks

    tasks._judge_job = _wrap(tasks._judge_job, lambda msg, *a, **k: msg.job_id)  # type: ignore[method-assign]
    runs.execute = _wrap(runs.execute, lambda *a, **k: str(k.get("job_id", "")))  # type: ignore[method-assign]
    log.warning("fault_jobs loaded: TEST ONLY, jobs whose id carries %r fail on purpose", FAULT_MARK)


_install()
