"""The Celery app: ``celery -A cpfleet.workers.app worker`` (or ``cpfleet worker``) starts a fleet node.

Configured from environment variables (``cpfleet.workers.config``). Pool processes build their sandbox
resources after the fork and close them at exit; the main process answers the jobs that a pool
process could not answer itself (it died once too often, or hit the hard time limit).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import warnings
from typing import Any

from celery import Celery, signals
from celery.exceptions import CPendingDeprecationWarning, SecurityWarning, TimeLimitExceeded, WorkerLostError

from cpfleet.core import protocol
from cpfleet.core.errors import IsolationRequirementError
from cpfleet.core.results import JobResult, JobStamp, RunJobResult
from cpfleet.workers import joblog
from cpfleet.workers.config import Settings
from cpfleet.workers.resources import (
    ISOLATION_EXIT_CODE,
    SETTING_EXIT_CODE,
    ProcessResources,
    compile_cache_refusal,
    isolation_refusal,
    redis_client,
)

log = logging.getLogger("cpfleet.worker")

# Celery warns ("absolutely not recommended!") at every start as root. The sandbox needs root to
# make its namespaces and cgroups, and each test program runs under an unprivileged per-slot
# uid; the warning's concern, unpickling broker messages as root, does not apply to a node that
# accepts msgpack only (celery_config). Celery still refuses to start as root with pickle.
warnings.filterwarnings("ignore", category=SecurityWarning)

def _guard_kombu_closed_channel() -> None:
    """kombu 5.7: when a broker connection is lost, Celery closes it, and closing the channel
    restores its unacked messages through a new client, built from ``channel.connection.client``.
    After a Sentinel failover that is already None, so the close raised AttributeError, which
    Celery does not expect there: the consumer stopped for good ("Error on stopping Hub") and the
    node took no more jobs. Raising the transport's own connection error instead lets the close
    finish and the consumer reconnect (to the new primary); the messages it could not restore
    stay unacked and come back through the liveness sweep (``cpfleet.workers.liveness``)."""
    import redis as redis_lib
    from kombu.transport import redis as kombu_redis

    original = kombu_redis.Channel._connparams
    if getattr(original, "_cpfleet_guard", False):
        return

    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        if self.connection.client is None:
            raise redis_lib.ConnectionError("the broker connection is closed")
        return original(self, asynchronous)

    _connparams._cpfleet_guard = True  # type: ignore[attr-defined]
    setattr(kombu_redis.Channel, "_connparams", _connparams)  # noqa: B010 - a method, replaced on purpose


_guard_kombu_closed_channel()
joblog.configure()  # before the pool forks: every pool process writes bare JSON job lines
try:
    settings = Settings.from_env()
except ValueError as exc:  # a bad setting (a Redis URL without a scheme...): one line, for celery -A and Flower too
    raise SystemExit(f"cpfleet worker: {exc}") from None
app = Celery("cpfleet", set_as_current=True)
app.conf.update(settings.celery_config())
resources = ProcessResources(settings)


@signals.worker_init.connect(weak=False)
def _require_isolation(**_: Any) -> None:
    """A node whose sandbox cannot give the isolation the operator requires
    (CPFLEET_REQUIRE_ISOLATION) exits with ISOLATION_EXIT_CODE here, in the main process before
    the pool forks and before the consumer connects: it takes no job, and the queue keeps every
    job for a node that can judge it. (Celery logs and swallows an Exception from a signal
    handler; SystemExit goes through.) So does a node whose compile cache folder is refused
    (SETTING_EXIT_CODE): every compiled job and checker would be an infrastructure error."""
    refusal, code = isolation_refusal(settings), ISOLATION_EXIT_CODE
    if refusal is None:
        refusal, code = compile_cache_refusal(), SETTING_EXIT_CODE
    if refusal is None:
        return
    if log.hasHandlers():  # Celery's logging: stderr or the log file; printing too said it twice
        log.critical("cpfleet worker refuses to start: %s", refusal)
    else:
        print(f"cpfleet worker refuses to start: {refusal}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def stop_node_for_isolation(exc: IsolationRequirementError) -> None:
    """A pool process found its runner below the requirement after the node's start-up check
    passed (the host changed under it): the whole node stops taking jobs (warm shutdown of the
    main process; under a supervisor it restarts and meets the start-up check)."""
    log.critical("stopping this node: %s", exc)
    os.kill(os.getppid(), signal.SIGTERM)


@signals.worker_process_init.connect(weak=False)
def _pool_process_init(**_: Any) -> None:
    """Start this pool process's sandbox runner now, so the first job does not pay for it."""
    try:
        resources.runner  # noqa: B018 - built for its side effect
    except IsolationRequirementError as exc:
        stop_node_for_isolation(exc)
        return
    except Exception:
        # Not fatal here: the first job retries and, failing again, answers INTERNAL.
        log.exception("could not start the sandbox runner in this pool process")
        return
    resources.prepare_next()
    _publish_self_tests()


def _publish_self_tests() -> None:
    """This pool process's inherited language self-tests, as the ``cpfleet_language_ok`` gauge."""
    try:
        from cpfleet.sandbox import selftest
        from cpfleet.workers import metrics

        metrics.record_languages({name: r.ok for name, r in selftest.results().items()})
    except Exception:  # metrics must never stop a pool process
        log.exception("could not publish the language self-tests")


@signals.worker_init.connect(weak=False)
def _report_languages(**_: Any) -> None:
    """Say at start which solution languages this host can judge, and self-test each one
    (compile and run a tiny program, sandbox/selftest.py) before the pool processes fork, so
    they inherit the results: a job in a missing or failed language is answered INTERNAL naming
    why, never COMPILE_ERROR. Each pool process publishes them (``cpfleet_language_ok``)."""
    try:
        from cpfleet.sandbox import selftest
        from cpfleet.sandbox.languages import availability_line

        line = availability_line()
        found = selftest.run_all()
    except Exception:  # reporting must never stop a worker from starting
        log.exception("could not check the language toolchains")
        return
    log.warning("cpfleet worker %s", line)
    log.warning("cpfleet worker %s", selftest.summary_line(found))


@signals.worker_init.connect(weak=False)
def _report_memory(**_: Any) -> None:
    """Say at start the most memory a test may have here (sandbox/capacity.py): a problem
    stating more is answered INTERNAL naming both numbers, never run."""
    from cpfleet.sandbox.capacity import memory_capacity, slots_memory

    slots = slots_memory()
    together = "unbounded (nothing here tells the host's memory)" if slots is None else f"{slots[0]} MB ({slots[1]})"
    log.warning("cpfleet worker memory: at most %s; all slots together %s", memory_capacity().describe(), together)


_liveness: Any = None
_node: str | None = None


@signals.worker_init.connect(weak=False)
def _name_node(sender: Any = None, **_: Any) -> None:
    """Name this node before its consumer starts: its broker channel pops each job into the
    node's in-flight list (``cpfleet.workers.broker``), which the node's heartbeats cover. With
    liveness off nothing would ever give that list back, so the channel then keeps BRPOP."""
    global _node
    if settings.node_ttl_s <= 0:
        return
    from cpfleet.workers.broker import consume_as
    from cpfleet.workers.liveness import node_name

    _node = node_name(str(getattr(sender, "hostname", "") or "cpfleet"))
    consume_as(_node, settings.node_ttl_s)


@signals.worker_ready.connect(weak=False)
def _quiet_the_connection_loss_deprecation(**_: Any) -> None:
    """Celery warns, in seven lines at every lost broker connection, that
    worker_cancel_long_running_tasks_on_connection_loss will default to True in Celery 6. The
    fleet sets it to False on purpose (Settings.celery_config): a job running through a Redis
    restart finishes and publishes its result. An operator read the block as a fault to act on;
    the loss itself stays logged in one line. Set here, once the worker's logging is set up:
    that setup puts Celery's own 'always' filter for its deprecation warnings first."""
    warnings.filterwarnings("ignore", message=r"\s*In Celery 5\.1 we introduced an optional breaking change",
                            category=CPendingDeprecationWarning)


@signals.worker_ready.connect(weak=False)
def _start_liveness(sender: Any = None, **_: Any) -> None:
    """Heartbeats of this node, and the sweep that requeues a lost node's jobs within seconds
    (``cpfleet.workers.liveness``). Main process only: it holds the unacked messages."""
    global _liveness, _node
    if settings.node_ttl_s <= 0 or _liveness is not None:
        return
    from cpfleet.workers.liveness import Liveness, node_name

    if _node is None:
        _node = node_name(str(getattr(sender, "hostname", "") or "cpfleet"))
    _liveness = Liveness(lambda: redis_client(settings), _node, ttl=settings.node_ttl_s).start()


@signals.worker_shutdown.connect(weak=False)
def _release_node(**_: Any) -> None:
    """After the pool stopped: give back what is left in this node's in-flight list (a pop the
    closing consumer never read) now, rather than after ``ttl`` through the sweep."""
    if _liveness is not None:
        _liveness.release()


@signals.worker_process_shutdown.connect(weak=False)
def _pool_process_shutdown(**_: Any) -> None:
    resources.close()


_main_redis: Any = None


@signals.task_failure.connect(weak=False)
def _answer_lost_job(
    sender: Any = None, task_id: str = "", exception: BaseException | None = None, args: Any = None, **_: Any
) -> None:
    """Reply INTERNAL for a job the task itself could not answer.

    Runs in the main process after a WorkerLostError that used up the retries (a job that kills
    its pool process every time) and after a hard time limit (celery 5.7 fires it there, #10226).
    Elsewhere (an exception escaping the task in a pool process) it replies too: the client keeps
    the first reply per job, so an extra one is harmless and a missing one is not.
    """
    global _main_redis
    if getattr(sender, "name", None) not in (protocol.TASK_NAME, protocol.RUN_TASK_NAME):
        return
    job = args[0] if args else None
    if not isinstance(job, dict):
        return
    reply_to, job_id = job.get("reply_to"), job.get("job_id")
    if not (isinstance(reply_to, str) and isinstance(job_id, str)):
        return
    request = getattr(sender, "request", None)
    if isinstance(exception, WorkerLostError):
        attempts = int(getattr(request, "retries", 0) or 0) + 1
        why = (
            f"the worker process died running this job ({attempts} attempts, "
            f"{settings.max_retries} retries allowed): {exception}"
        )
    elif isinstance(exception, TimeLimitExceeded):
        why = f"job exceeded the hard time limit ({settings.hard_time_limit_s:g}s)"
    else:
        why = f"worker error: {type(exception).__name__}: {exception}"
    worker = str(getattr(request, "hostname", "") or "")
    result: JobResult | RunJobResult
    if job.get("kind") == protocol.RUN_KIND:
        result = dataclasses.replace(RunJobResult.infra(job_id, why), worker=worker)
    else:
        problem_id = job.get("problem_id")
        stamp = JobStamp(job_id, problem_id if isinstance(problem_id, str) else "", str(job.get("mode", "full")),
                         str(job.get("reward_shape", "all_or_nothing")), worker=worker)
        result = stamp.infra(why)
    log.error("job %s answered INTERNAL: %s", job_id, why)
    from cpfleet.workers.replies import push_reply

    try:
        if _main_redis is None:
            _main_redis = redis_client(settings)
        ttl, stream = job.get("reply_ttl"), job.get("reply_stream")
        push_reply(
            _main_redis,
            reply_to,
            result,
            ttl if isinstance(ttl, int) and ttl > 0 else protocol.DEFAULT_REPLY_TTL_S,
            retry_for_s=5.0,
            stream=stream if isinstance(stream, str) and stream else None,
        )
    except Exception:
        log.exception("could not send the INTERNAL reply for job %s", job_id)


def _connect_metrics() -> None:
    try:
        from cpfleet.workers import metrics
    except ImportError:  # pragma: no cover
        return
    metrics.connect_celery_signals()


_connect_metrics()

from cpfleet.workers import tasks as _tasks  # noqa: E402,F401  (registers the evaluate and run tasks)
