"""Prometheus metrics for the worker fleet, plus one structured log line per finished job.

Why it looks like this: the worker is a Celery *prefork* pool, so jobs finish in child
processes while the HTTP endpoint lives in the parent. prometheus_client's multiprocess mode
solves that: every process writes its samples to mmap files in ``PROMETHEUS_MULTIPROC_DIR`` and
the parent's ``/metrics`` aggregates them at scrape time. The value class is picked by
prometheus_client when a metric is *constructed*, so nothing here builds a metric at import:
:func:`enable_multiprocess` runs in the parent (Celery's ``worker_init`` signal, before the pool
forks) and the metrics are built lazily, in each child, on the first :func:`record_job`.

Configuration (environment):

* ``CPFLEET_METRICS_PORT`` -- port of the parent's ``/metrics`` endpoint. Unset, empty or ``0``:
  no endpoint (the default for a bare ``celery worker``; ``cpfleet up`` and docker-compose set
  9808). ``any``: a free port, bound at once (port 0) and read back from the socket, so no other
  process can take it between a pick and the bind.
* ``CPFLEET_METRICS_PORT_FILE`` -- where the bound port is written once the endpoint listens
  (``cpfleet up`` reads an ``any`` port there).
* ``CPFLEET_METRICS_ADDR`` -- bind address (an IP address or host name), default ``0.0.0.0``;
  a malformed one (a port or URL in it) stops the worker at start like any bad setting.
* ``PROMETHEUS_MULTIPROC_DIR`` -- where the per-process files go. Unset: a fresh temporary
  directory is made. A given directory is emptied at worker start (stale files from a previous
  run would otherwise be summed in).

Queue depth is not pushed by anyone: a collector runs ``LLEN`` on the broker's queue lists when
Prometheus scrapes, so the number is never stale (this is the series KEDA-style autoscaling
reads).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpfleet.core import envvars
from cpfleet.core.results import JobResult, RunJobResult
from cpfleet.sandbox import interactive
from cpfleet.sandbox.runner import IsolationReport
from cpfleet.workers.joblog import JOB_LOGGER

if TYPE_CHECKING:  # pragma: no cover
    from prometheus_client import CollectorRegistry

log = logging.getLogger(JOB_LOGGER)

ENV_PORT = "CPFLEET_METRICS_PORT"
ENV_ADDR = "CPFLEET_METRICS_ADDR"
ENV_PORT_FILE = "CPFLEET_METRICS_PORT_FILE"
ENV_MULTIPROC = "PROMETHEUS_MULTIPROC_DIR"
DEFAULT_PORT = 9808  # what `cpfleet up` and docker-compose use; a bare worker has none unless set

# kombu's redis transport keeps priorities 3/6/9 in sibling lists named queue + SEP + step.
_PRIORITY_SEP = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)

TEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
JOB_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
QUEUE_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
REWARD_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def metrics_port_from_env() -> int | None:
    """The configured endpoint port (0: any free one), or None when metrics exposition is off."""
    port: int | None = envvars.read(ENV_PORT)
    return port


def metrics_addr_from_env() -> str:
    """The endpoint's bind address (``0.0.0.0`` unless set)."""
    addr: str = envvars.read(ENV_ADDR, "0.0.0.0")
    return addr


PORT_FILE_ERROR = "error: "  # a port file holding this and a reason: the endpoint did not start


def write_port_file(path: str, port: int | str) -> None:
    """``port`` into ``path`` (or PORT_FILE_ERROR and the reason the endpoint did not start),
    whole or not at all: a reader never sees half a line."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


@dataclass
class _Metrics:
    jobs: Any
    tests_run: Any
    test_seconds: Any
    job_seconds: Any
    job_cpu_seconds: Any
    queue_wait_seconds: Any
    reward: Any
    result_cache_lookups: Any
    result_cache_hits: Any
    problem_cache: Any
    isolation_level: Any
    isolation_layer: Any
    language_ok: Any
    run_jobs: Any
    runs: Any
    interactor_unvouched: Any


_lock = threading.Lock()
_metrics: _Metrics | None = None
_metrics_pid: int | None = None


def _build() -> _Metrics:
    from prometheus_client import Counter, Gauge, Histogram

    return _Metrics(
        jobs=Counter("cpfleet_jobs", "Finished jobs by verdict", ["verdict", "infra_error"]),
        tests_run=Counter("cpfleet_tests_run", "Test executions", ["set"]),
        test_seconds=Histogram(
            "cpfleet_test_duration_seconds", "Wall time of one public test run", buckets=TEST_BUCKETS
        ),
        job_seconds=Histogram(
            "cpfleet_job_duration_seconds", "Wall time of one job's evaluation", buckets=JOB_BUCKETS
        ),
        job_cpu_seconds=Counter("cpfleet_job_cpu_seconds", "CPU time of test programs, summed"),
        queue_wait_seconds=Histogram(
            "cpfleet_job_queue_wait_seconds", "From submit to a worker picking the job up", buckets=QUEUE_BUCKETS
        ),
        reward=Histogram("cpfleet_reward", "Rewards handed back (infra errors excluded)", buckets=REWARD_BUCKETS),
        result_cache_lookups=Counter("cpfleet_result_cache_lookups", "Jobs that could be answered from the result cache"),
        result_cache_hits=Counter("cpfleet_result_cache_hits", "Jobs answered from the result cache, not run"),
        problem_cache=Counter(
            "cpfleet_problem_cache_lookups",
            "Problem lookups by outcome: hit (served from the pool process's memory), miss (first "
            "fetch), refresh (the stored version changed), unknown (not in the store)",
            ["outcome"],
        ),
        run_jobs=Counter("cpfleet_run_jobs", "Finished run jobs by status", ["status", "infra_error"]),
        runs=Counter("cpfleet_runs", "Program runs of run jobs by status", ["status"]),
        # sandbox/interactive.py; nonzero: a broken interactor there would cost correct programs
        interactor_unvouched=Counter(
            "cpfleet_interactor_unvouched_failures",
            "Interactor failures on a program's dialogue with no reference solution to vouch for the "
            "interactor, charged to the program (WRONG_ANSWER)",
        ),
        # Per process (the pid label is added in multiprocess mode): what each pool child got.
        isolation_level=Gauge(
            "cpfleet_sandbox_isolation",
            "1 for the isolation level this worker process got (full, partial, none)",
            ["level"],
            multiprocess_mode="liveall",
        ),
        # 1 if the language's self-test at worker start passed (sandbox/selftest.py)
        language_ok=Gauge(
            "cpfleet_language_ok",
            "1 if the language's toolchain passed its self-test at worker start (min over live processes)",
            ["language"],
            multiprocess_mode="livemin",
        ),
        # Fleet-wide: 1 only if every live process has the layer (min over processes).
        isolation_layer=Gauge(
            "cpfleet_sandbox_isolation_layer",
            "1 if the sandbox layer is active (min over live worker processes)",
            ["layer"],
            multiprocess_mode="livemin",
        ),
    )


def _get() -> _Metrics:
    """The metrics of this process, built on first use (after any fork: see the module doc)."""
    global _metrics, _metrics_pid
    with _lock:
        if _metrics is None:
            _metrics = _build()
            _metrics_pid = os.getpid()
        return _metrics


def record_job(result: JobResult) -> None:
    """Count one finished job and log it as one JSON line (``cpfleet.joblog`` logger)."""
    m = _get()
    m.jobs.labels(verdict=str(result.verdict), infra_error=str(result.infra_error).lower()).inc()
    if result.public.run:
        m.tests_run.labels(set="public").inc(result.public.run)
    if result.hidden.run:
        m.tests_run.labels(set="hidden").inc(result.hidden.run)
    for t in result.public.tests:
        m.test_seconds.observe(t.ms / 1000.0)
    if not result.infra_error:
        m.job_seconds.observe(result.timings.executed_ms / 1000.0)
    if result.timings.cpu_ms:
        m.job_cpu_seconds.inc(result.timings.cpu_ms / 1000.0)
    if result.timings.queued_ms:
        m.queue_wait_seconds.observe(result.timings.queued_ms / 1000.0)
    if result.reward is not None:
        m.reward.observe(result.reward)
    if result.verdict not in ("NO_CODE", "UNKNOWN_PROBLEM"):
        m.result_cache_lookups.inc()
        if result.cache_hit:
            m.result_cache_hits.inc()
    _count_unvouched(m)
    if log.isEnabledFor(logging.INFO):
        log.info(job_log_line(result))


_unvouched_seen = 0  # interactive.ALONE.unvouched already counted by this process


def _count_unvouched(m: _Metrics) -> None:
    """Add the interactor failures charged without a reference (counted by the sandbox) since the last job."""
    global _unvouched_seen
    with _lock:
        now = interactive.ALONE.unvouched
        if now > _unvouched_seen:
            m.interactor_unvouched.inc(now - _unvouched_seen)
        _unvouched_seen = now


def record_run(result: RunJobResult) -> None:
    """Count one finished run job and its runs, and log it as one JSON line."""
    m = _get()
    m.run_jobs.labels(status=str(result.status), infra_error=str(result.infra_error).lower()).inc()
    cpu_ms = 0.0
    for r in result.runs:
        m.runs.labels(status=str(r.status)).inc()
        cpu_ms += r.cpu_ms
    if cpu_ms:
        m.job_cpu_seconds.inc(cpu_ms / 1000.0)
    if result.queued_ms:
        m.queue_wait_seconds.observe(result.queued_ms / 1000.0)
    if log.isEnabledFor(logging.INFO):
        rec: dict[str, Any] = {
            "event": "run_done", "job_id": result.job_id, "status": str(result.status),
            "language": result.language, "runs": len(result.runs),
            "statuses": sorted({str(r.status) for r in result.runs}),
            "queued_ms": round(result.queued_ms, 1), "executed_ms": round(result.executed_ms, 1),
            "cpu_ms": round(cpu_ms, 1), "worker": result.worker, "pid": os.getpid(),
        }
        if result.infra_error:
            rec["infra_message"] = result.infra_message
        log.info(json.dumps(rec, separators=(",", ":")))


def record_problem_lookup(outcome: str) -> None:
    """Count one problem lookup of the worker's problem cache (``hit``, ``miss``, ``refresh``,
    ``unknown``): the problem cache's own hit rate, apart from the result cache's."""
    _get().problem_cache.labels(outcome=outcome).inc()


def job_log_line(result: JobResult) -> str:
    """The structured log record of one job: greppable by job id, parseable as JSON."""
    rec: dict[str, Any] = {
        "event": "job_done",
        "job_id": result.job_id,
        "problem_id": result.problem_id,
        "mode": result.mode,  # hidden: no public test was run, by design
        "verdict": str(result.verdict),
        "reward": result.reward,
        "public": f"{result.public.passed}/{result.public.total}",
        "hidden": f"{result.hidden.passed}/{result.hidden.total}",
        "tests_run": result.public.run + result.hidden.run,
        "queued_ms": round(result.timings.queued_ms, 1),
        "executed_ms": round(result.timings.executed_ms, 1),
        "cpu_ms": round(result.timings.cpu_ms, 1),
        "cache_hit": result.cache_hit,
        "worker": result.worker,
        "pid": os.getpid(),
    }
    if not result.deterministic:
        rec["deterministic"] = False  # the verdict depended on machine load: not cached
    if result.stopped:
        rec["stopped"] = result.stopped
    if result.infra_error:
        rec["infra_message"] = result.infra_message
    return json.dumps(rec, separators=(",", ":"))


def record_languages(ok: Mapping[str, bool]) -> None:
    """Publish which languages passed their self-test (call in each pool process)."""
    m = _get()
    for language, passed in ok.items():
        m.language_ok.labels(language=language).set(1.0 if passed else 0.0)


def record_isolation(report: IsolationReport) -> None:
    """Publish the isolation this process's runner got (call once per runner, in the child)."""
    m = _get()
    for level in ("full", "partial", "none"):
        m.isolation_level.labels(level=level).set(1.0 if report.level == level else 0.0)
    for layer, ok in report.layers.items():
        m.isolation_layer.labels(layer=layer).set(1.0 if ok else 0.0)


# ---------------------------------------------------------------------------------------------
# The parent process: multiprocess setup, queue depth, the HTTP endpoint.


def enable_multiprocess(directory: str | None = None) -> str:
    """Switch this process (and children forked later) to multiprocess metrics; return the dir.

    Must run before the pool forks. Empties the directory: stale files would be summed in.
    """
    from prometheus_client import values

    path = directory or os.environ.get(ENV_MULTIPROC) or tempfile.mkdtemp(prefix="cpfleet-metrics-")
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        if name.endswith(".db"):
            os.unlink(os.path.join(path, name))
    os.environ[ENV_MULTIPROC] = path
    # prometheus_client read the variable when it was first imported: re-read it for metrics
    # constructed from now on (ours are all built lazily, so they all are).
    values.ValueClass = values.get_value_class()
    return path


def mark_process_dead(pid: int | None = None) -> None:
    """Drop a finished process's live gauges (call on pool-child shutdown)."""
    if not os.environ.get(ENV_MULTIPROC):
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid if pid is not None else os.getpid())


def queue_lists(queue: str) -> list[str]:
    """The Redis lists that hold one kombu queue (plain + priority siblings)."""
    return [queue] + [f"{queue}{_PRIORITY_SEP}{step}" for step in _PRIORITY_STEPS]


class QueueDepthCollector:
    """``cpfleet_queue_depth{queue}``: LLEN of the broker's lists, read at scrape time."""

    def __init__(self, redis_url: str, queues: Sequence[str]) -> None:
        self.redis_url = redis_url
        self.queues = list(dict.fromkeys(queues))
        self._client: Any = None

    def _redis(self) -> Any:
        if self._client is None:
            from cpfleet.workers.resources import connect

            self._client = connect(self.redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        return self._client

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        depth = GaugeMetricFamily("cpfleet_queue_depth", "Jobs waiting in the broker queue", labels=["queue"])
        up = GaugeMetricFamily("cpfleet_broker_up", "1 if the broker answered the last scrape")
        try:
            pipe = self._redis().pipeline(transaction=False)
            for q in self.queues:
                for key in queue_lists(q):
                    pipe.llen(key)
            counts = pipe.execute()
        except Exception:  # a scrape must not fail because the broker is briefly away
            up.add_metric([], 0.0)
            yield up
            return
        per = len(_PRIORITY_STEPS) + 1
        for i, q in enumerate(self.queues):
            depth.add_metric([q], float(sum(counts[i * per : (i + 1) * per])))
        up.add_metric([], 1.0)
        yield depth
        yield up

    def describe(self) -> Iterable[Any]:
        return []  # unchecked collector: the broker is not contacted at registration


def build_registry(redis_url: str | None = None, queues: Sequence[str] = ()) -> CollectorRegistry:
    """A registry for the parent's endpoint: all processes' samples plus queue depth."""
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    if os.environ.get(ENV_MULTIPROC):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    if redis_url and queues:
        registry.register(QueueDepthCollector(redis_url, queues))
    return registry


class MetricsServer:
    """The ``/metrics`` endpoint of one worker host, in a daemon thread of the parent."""

    def __init__(self, port: int, addr: str = "0.0.0.0", redis_url: str | None = None, queues: Sequence[str] = ()):
        self.port = port
        self.addr = addr
        self.redis_url = redis_url
        self.queues = list(queues)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> MetricsServer:
        from prometheus_client import start_http_server

        registry = build_registry(self.redis_url, self.queues)
        self._server, self._thread = start_http_server(self.port, addr=self.addr, registry=registry)
        self.port = int(self._server.server_port)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


_server: MetricsServer | None = None
_owned_dir: str | None = None


def start_worker_metrics(
    redis_url: str | None, queues: Sequence[str], port: int | None = None, addr: str | None = None
) -> MetricsServer | None:
    """Parent-side setup: multiprocess mode + endpoint. Returns None when metrics are off."""
    global _server, _owned_dir
    port = port if port is not None else metrics_port_from_env()
    if port is None:
        return None
    if _server is not None:
        return _server
    given = os.environ.get(ENV_MULTIPROC)
    path = enable_multiprocess(given)
    if not given:
        _owned_dir = path
    _server = MetricsServer(port, addr or metrics_addr_from_env(), redis_url, queues).start()
    port_file: str | None = envvars.read(ENV_PORT_FILE)
    if port_file:
        write_port_file(port_file, _server.port)
    logging.getLogger("cpfleet.metrics").info(
        "metrics on http://%s:%d/metrics (multiprocess dir %s)", _server.addr, _server.port, path
    )
    return _server


def stop_worker_metrics() -> None:
    global _server, _owned_dir
    if _server is not None:
        _server.stop()
        _server = None
    if _owned_dir is not None:
        shutil.rmtree(_owned_dir, ignore_errors=True)
        _owned_dir = None


def connect_celery_signals() -> None:
    """Wire the above into a Celery worker: call once from the app module.

    ``worker_init`` (parent, before the pool forks) starts the endpoint; ``worker_process_shutdown``
    (each child) drops its live gauges; ``worker_shutdown`` (parent) stops the endpoint.
    """
    from celery import signals

    def _on_init(sender: Any = None, **_: Any) -> None:
        app = getattr(sender, "app", None)
        redis_url: str | None = None
        queues: list[str] = []
        if app is not None:
            redis_url = str(app.conf.get("cpfleet_redis_url") or app.conf.broker_url or "") or None
            queues = [str(app.conf.task_default_queue or "celery")]
            queues += [str(q) for q in (app.amqp.queues or {}).keys()]
        if redis_url and not redis_url.startswith(("redis://", "rediss://", "unix://", "sentinel://")):
            redis_url = None
        try:
            start_worker_metrics(redis_url, queues)
        except OSError as e:  # e.g. the port is taken: the worker still runs, without /metrics
            logging.getLogger("cpfleet.metrics").error(
                "metrics endpoint not started on %s port %s (%s, %s): %s; this worker judges on without /metrics",
                metrics_addr_from_env(), os.environ.get(ENV_PORT), ENV_ADDR, ENV_PORT, e,
            )
            port_file: str | None = envvars.read(ENV_PORT_FILE)
            if port_file:  # whoever waits for the port learns why there is none, at once
                with contextlib.suppress(OSError):
                    write_port_file(port_file, f"{PORT_FILE_ERROR}{e}")

    def _on_child_exit(pid: int | None = None, **_: Any) -> None:
        mark_process_dead(pid)

    def _on_shutdown(**_: Any) -> None:
        stop_worker_metrics()

    handlers: list[tuple[Any, Callable[..., None]]] = [
        (signals.worker_init, _on_init),
        (signals.worker_process_shutdown, _on_child_exit),
        (signals.worker_shutdown, _on_shutdown),
    ]
    for sig, fn in handlers:
        sig.connect(fn, weak=False)
