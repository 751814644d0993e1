"""Worker settings from environment variables, with documented defaults (docs/configuration.md).

One frozen ``Settings`` object is read at import of ``cpfleet.workers.app``; ``celery_config()`` turns it
into the Celery configuration, so every reliability knob lives in one place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cpfleet.core import defaults, envvars, protocol
from cpfleet.core.errors import ConfigError
from cpfleet.core.redis_url import parse_redis_url

# What a job may spend after its tests' deadline, at worst: the end report of the test that ran
# into it (REPLY_GRACE_S, 10 s) and the checker on a capped output (20 s).
JOB_TAIL_S = 30.0
# What the default budget leaves of the soft limit besides the tests: JOB_TAIL_S, and 60 s to
# load the program (the problem lookup, the checker's and the program's compiles: seconds as a
# rule). A load that takes longer (compiles running to their wall limits on a loaded host)
# does not carry the job past the soft limit: its tests also end by ``job_end_s`` after the
# task's start, with TIME_LIMIT, never the soft limit's INTERNAL.
JOB_OVERHEAD_S = 90.0


def job_time_budget(soft_time_limit_s: float, configured: str = "") -> float:
    """The wall-clock budget for a job's tests, so that a program's own slowness ends as
    TIME_LIMIT before the task's soft time limit could turn it into INTERNAL.

    Worst-case job cost = JOB_OVERHEAD_S + budget (no test starts past the budget, and each
    test's wall backstop is cut to what is left of it), which must stay under the soft limit.
    A soft limit under 2 x JOB_OVERHEAD_S (test setups) cannot give that guarantee; the
    budget is then 90% of it, so jobs that fit the soft limit keep fitting.
    """
    if configured:
        budget = float(configured)
        if not 0 < budget <= soft_time_limit_s - JOB_OVERHEAD_S:
            raise ValueError(
                f"CPFLEET_JOB_TIME_BUDGET ({budget:g}) must be > 0 and leave {JOB_OVERHEAD_S:g}s of the soft "
                f"time limit ({soft_time_limit_s:g}s) for the rest of the job"
            )
        return budget
    if soft_time_limit_s >= 2 * JOB_OVERHEAD_S:
        return soft_time_limit_s - JOB_OVERHEAD_S
    return 0.9 * soft_time_limit_s


def job_end_s(soft_time_limit_s: float) -> float:
    """Seconds after a task's start by which its tests must end (``JobBudget``'s ``ends_by``),
    whatever its budget: the soft limit less JOB_TAIL_S, or 90% of a soft limit too short to
    keep that (tests' settings), as ``job_time_budget`` does."""
    if soft_time_limit_s >= 2 * JOB_TAIL_S:
        return soft_time_limit_s - JOB_TAIL_S
    return 0.9 * soft_time_limit_s


# CPFLEET_REQUIRE_ISOLATION: the least isolation level (IsolationReport.level) each accepts.
# `any` lets a node with no working layer judge: only for code one trusts.
ISOLATION_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "full": ("full",),
    "partial": ("full", "partial"),
    "any": ("full", "partial", "none"),
}


def isolation_meets(level: str, required: str) -> bool:
    """Whether a runner's isolation ``level`` (full, partial, none) satisfies ``required``."""
    return level in ISOLATION_REQUIREMENTS[required]


@dataclass(frozen=True, slots=True)
class Setting:
    """One environment variable: its name, default and meaning (docs/configuration.md's table)."""

    env: str
    default: str
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting(defaults.REDIS_URL_ENV, defaults.DEFAULT_REDIS_URL, "broker, problem store, reply lists and result cache"),
    Setting("CPFLEET_QUEUES", protocol.DEFAULT_QUEUE, "comma-separated queues this worker consumes"),
    Setting("CPFLEET_CONCURRENCY", "auto", "pool processes; `auto` = CPUs allowed by affinity and cgroup CPU quota"),
    Setting("CPFLEET_RUNNER", "forkserver", "sandbox runner per pool process: `forkserver` or `subprocess`"),
    Setting("CPFLEET_SOFT_TIME_LIMIT", "600", "seconds; the task gets an INTERNAL reply and its runner is rebuilt"),
    Setting("CPFLEET_HARD_TIME_LIMIT", "630", "seconds; the pool process is killed, the main process replies INTERNAL"),
    Setting(
        "CPFLEET_JOB_TIME_BUDGET",
        "",
        "seconds of wall clock a job may spend running tests (then TIME_LIMIT); "
        "default soft limit - 90 (90% of a soft limit under 180); and by soft limit - 30 after the task's start",
    ),
    Setting("CPFLEET_VISIBILITY_TIMEOUT", "", "seconds before a job in kombu's unacked hash is redelivered (stock kombu, or liveness off; "
        "the in-flight lists are given back by the liveness sweep instead); default hard limit + 60"),
    Setting("CPFLEET_UNACKED_RESTORE_INTERVAL", "10", "seconds between kombu's sweeps for jobs past the visibility timeout"),
    Setting(
        "CPFLEET_NODE_TTL",
        "10",
        "seconds without a heartbeat after which a node is lost and its jobs are requeued "
        "(beat every TTL/5; 0 = off, on every node alike; docs/reliability.md)",
    ),
    Setting("CPFLEET_MAX_RETRIES", "2", "re-runs of a job whose pool process died, then an INTERNAL reply"),
    Setting("CPFLEET_RESULT_CACHE", "1", "cache results by (problem version, extracted code, options)"),
    Setting("CPFLEET_RESULT_CACHE_TTL", "86400", "seconds a cached result lives"),
    Setting("CPFLEET_BROKER_LEAN", "1", "the reliable pop: each job moved into its node's in-flight list (BLMOVE) and acked with one LREM, "
        "so a node lost at any instant leaves its jobs in a key (workers/broker.py; docs/reliability.md, "
        "docs/scaling.md); 0: stock kombu"),
    Setting("CPFLEET_FAIL_FAST", "1", "run hidden tests most-often-failed first in all-or-nothing jobs (same rewards)"),
    Setting("CPFLEET_PROBLEM_CACHE_MB", "256", "per-process LRU of problems, bounded in bytes"),
    Setting("CPFLEET_TASK_EVENTS", "1", "send task events (Flower); costs a little on tiny jobs"),
    Setting("CPFLEET_REDIS_SOCKET_TIMEOUT", "15", "seconds; a silent broker connection is dropped and reconnected"),
    Setting("CPFLEET_HEALTH_CHECK_INTERVAL", "10", "seconds between broker connection health checks"),
    Setting("CPFLEET_REPLY_RETRY_S", "30", "how long a finished job retries pushing its reply while Redis is down"),
    Setting(
        "CPFLEET_REQUIRE_ISOLATION",
        "full",
        "`full`, `partial` or `any`: the sandbox isolation this node needs; a node whose self-test gets less "
        "exits (code 3) before it consumes a job",
    ),
)


@dataclass(frozen=True, slots=True)
class Settings:
    redis_url: str
    queues: tuple[str, ...]
    concurrency: str
    runner: str
    soft_time_limit_s: float
    hard_time_limit_s: float
    visibility_timeout_s: int
    unacked_restore_interval_s: int
    max_retries: int
    result_cache: bool
    result_cache_ttl_s: int
    problem_cache_bytes: int
    task_events: bool
    socket_timeout_s: float
    health_check_interval_s: int
    reply_retry_s: float
    job_time_budget_s: float = 480.0
    fail_fast: bool = True
    broker_lean: bool = True
    require_isolation: str = "full"
    node_ttl_s: float = 10.0  # 0: no heartbeats, no liveness sweep (workers.liveness)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read and check every setting; a bad value is a clear error at start, not a surprise later."""
        env = os.environ if env is None else env
        # Each value by its own rule (core/envvars.py), every variable of the node, the sandbox's
        # too: a bad one stops the node here, in a line naming it, not later in a pool process.
        # Below: only the rules that relate two settings.
        envvars.check_environment(env)

        def get(name: str) -> Any:
            default = next(s.default for s in SETTINGS if s.env == name)
            return envvars.read(name, envvars.BY_NAME[name].parse(default) if default else None, env)

        soft: float = get("CPFLEET_SOFT_TIME_LIMIT")
        hard: float = get("CPFLEET_HARD_TIME_LIMIT")
        if not soft < hard:
            raise ConfigError(
                "CPFLEET_SOFT_TIME_LIMIT", str(soft),
                f"CPFLEET_SOFT_TIME_LIMIT ({soft:g}) must be below CPFLEET_HARD_TIME_LIMIT ({hard:g}) (see {envvars.DOCS})",
            )
        visibility: int = get("CPFLEET_VISIBILITY_TIMEOUT") or int(hard) + 60
        if visibility <= hard:
            # Redis redelivers a job reserved longer than this: below the hard limit a slow job
            # would run twice, concurrently (celery#7651).
            raise ConfigError(
                "CPFLEET_VISIBILITY_TIMEOUT", str(visibility),
                f"CPFLEET_VISIBILITY_TIMEOUT ({visibility}) must exceed CPFLEET_HARD_TIME_LIMIT ({hard:g}) (see {envvars.DOCS})",
            )
        budget = env.get("CPFLEET_JOB_TIME_BUDGET", "").strip()
        try:
            job_budget = job_time_budget(soft, budget)
        except ValueError as exc:
            raise ConfigError("CPFLEET_JOB_TIME_BUDGET", budget, f"{exc} (see {envvars.DOCS})") from None
        url_raw = env.get(defaults.REDIS_URL_ENV, "").strip()
        redis_url = parse_redis_url(url_raw, source=f"${defaults.REDIS_URL_ENV}").url if url_raw else defaults.DEFAULT_REDIS_URL
        return cls(
            redis_url=redis_url,
            queues=get("CPFLEET_QUEUES"),
            concurrency=get("CPFLEET_CONCURRENCY"),
            runner=get("CPFLEET_RUNNER"),
            soft_time_limit_s=soft,
            hard_time_limit_s=hard,
            visibility_timeout_s=visibility,
            unacked_restore_interval_s=get("CPFLEET_UNACKED_RESTORE_INTERVAL"),
            max_retries=get("CPFLEET_MAX_RETRIES"),
            result_cache=get("CPFLEET_RESULT_CACHE"),
            result_cache_ttl_s=get("CPFLEET_RESULT_CACHE_TTL"),
            problem_cache_bytes=int(get("CPFLEET_PROBLEM_CACHE_MB") * 1024 * 1024),
            task_events=get("CPFLEET_TASK_EVENTS"),
            socket_timeout_s=get("CPFLEET_REDIS_SOCKET_TIMEOUT"),
            health_check_interval_s=get("CPFLEET_HEALTH_CHECK_INTERVAL"),
            reply_retry_s=get("CPFLEET_REPLY_RETRY_S"),
            job_time_budget_s=job_budget,
            fail_fast=get("CPFLEET_FAIL_FAST"),
            broker_lean=get("CPFLEET_BROKER_LEAN"),
            require_isolation=get("CPFLEET_REQUIRE_ISOLATION"),
            node_ttl_s=get("CPFLEET_NODE_TTL"),
        )

    def transport_options(self) -> dict[str, Any]:
        """kombu redis transport options (broker and anything else that reads them)."""
        return {
            "visibility_timeout": self.visibility_timeout_s,
            # kombu 5.7: sweep for a dead worker's unacked jobs every interval (throttle 1 makes
            # the interval the only knob; the default would be interval x 10).
            "unacked_restore_interval": self.unacked_restore_interval_s,
            "unacked_restore_throttle": 1,
            "socket_timeout": self.socket_timeout_s,
            "socket_connect_timeout": 5,
            "socket_keepalive": True,
            "health_check_interval": self.health_check_interval_s,
            "retry_on_timeout": True,
        }

    def celery_config(self) -> dict[str, Any]:
        """The Celery configuration: msgpack only, at-least-once, prefetch off, bounded retries."""
        from kombu import Queue

        target = parse_redis_url(self.redis_url)
        transport = {**self.transport_options(), **target.broker_transport_options()}
        lean = self.broker_lean and target.scheme == "redis"
        return {
            "broker_url": target.broker_url(),  # kombu's spelling (differs for Sentinel)
            # plain redis:// only: Sentinel and TLS URLs keep kombu's own transport for their scheme
            **({"broker_transport": "cpfleet.workers.broker:Transport"} if lean else {}),
            "broker_transport_options": transport,
            "cpfleet_redis_url": self.redis_url,  # the URL as the operator wrote it (metrics read it)
            # No result backend: results go to reply lists. Celery still reads this mapping
            # for the visibility timeout in some code paths, so keep it equal.
            "result_backend": None,
            "result_backend_transport_options": dict(transport),
            "broker_connection_retry_on_startup": True,
            "broker_connection_max_retries": None,  # keep reconnecting after a Redis restart
            "broker_heartbeat": 0,
            "task_serializer": "msgpack",
            "result_serializer": "msgpack",
            "event_serializer": "msgpack",
            "accept_content": ["msgpack"],
            "result_accept_content": ["msgpack"],
            "task_ignore_result": True,
            "task_acks_late": True,
            "task_acks_on_failure_or_timeout": True,
            "task_reject_on_worker_lost": False,
            "task_retry_on_worker_lost": True,  # 5.7: bounded by the task's max_retries
            "task_soft_time_limit": self.soft_time_limit_s,
            "task_time_limit": self.hard_time_limit_s,
            "worker_prefetch_multiplier": 1,
            "worker_disable_prefetch": True,
            "worker_concurrency": self.concurrency,
            "worker_send_task_events": self.task_events,
            "task_send_sent_event": False,
            "worker_enable_remote_control": True,
            "worker_cancel_long_running_tasks_on_connection_loss": False,
            "task_queues": [Queue(q, routing_key=q) for q in self.queues],
            "task_default_queue": self.queues[0],
            "task_routes": {name: {"queue": self.queues[0]} for name in (protocol.TASK_NAME, protocol.RUN_TASK_NAME)},
            "broker_connection_timeout": 5,
            "worker_hijack_root_logger": True,
            "worker_redirect_stdouts": False,
            # creating the sandbox runner (a fresh zygote + isolation self-test) can take a few
            # seconds on a loaded machine: do not declare the pool process dead meanwhile.
            "worker_proc_alive_timeout": 60,
        }
