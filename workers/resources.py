"""What one pool process holds: its sandbox runner, a Redis client, the problem LRU and the
result cache. Built after the fork (``worker_process_init``, or lazily by the first job) and
closed at ``worker_process_shutdown``: the runner spawns its own fresh zygote, so nothing of
the parent's memory (or another process's expected outputs) ever reaches a test program."""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

import redis
from redis.sentinel import Sentinel

from cpfleet.core.errors import IsolationRequirementError
from cpfleet.core.redis_url import parse_redis_url
from cpfleet.workers.config import Settings, isolation_meets

if TYPE_CHECKING:  # pragma: no cover
    from cpfleet.sandbox.runner import CodeRunner
    from cpfleet.workers.problem_cache import ProblemCache
    from cpfleet.workers.result_cache import ResultCache

log = logging.getLogger("cpfleet.worker")

# The exit status of a node refused by its isolation self-test (CPFLEET_REQUIRE_ISOLATION).
ISOLATION_EXIT_CODE = 3
# The exit status of a node refused by a setting it cannot work with (the compile cache's folder):
# a usage error, as every command's bad setting is
SETTING_EXIT_CODE = 2


def isolation_refusal(settings: Settings) -> str | None:
    """Start a sandbox runner as a pool process would, read its self-test and close it: None
    when its isolation meets ``settings.require_isolation``, else the reason this node must not
    judge. A runner that does not start at all is always a refusal (every job would fail)."""
    from cpfleet.sandbox.runner import make_runner

    try:
        runner = make_runner(settings.runner)
    except Exception as exc:
        return f"the sandbox runner ({settings.runner}) does not start: {type(exc).__name__}: {exc}"
    try:
        report = runner.isolation
    finally:
        runner.close()
    if isolation_meets(report.level, settings.require_isolation):
        return None
    return _shortfall(report, settings.require_isolation)


def compile_cache_refusal() -> str | None:
    """None when the compile cache's folder (``CPFLEET_COMPILE_CACHE_DIR``, else the default) is
    usable by its ownership rule (``programs.own_cache_dir``), else why the node must not start:
    a folder refused there makes every compiled job and checker of the node an infrastructure
    error, which the operator would otherwise learn one job at a time."""
    from cpfleet.core.errors import SlotDirError
    from cpfleet.sandbox import programs

    try:
        programs.own_cache_dir()
    except (OSError, SlotDirError) as exc:
        named = " (CPFLEET_COMPILE_CACHE_DIR)" if os.environ.get("CPFLEET_COMPILE_CACHE_DIR") else ""
        return f"the compile cache folder{named} cannot be used: {exc}"
    return None


def _shortfall(report: Any, required: str) -> str:
    return (
        f"sandbox {report.summary()} but CPFLEET_REQUIRE_ISOLATION={required}"
        + (f" ({'; '.join(report.notes)})" if report.notes else "")
        + ": run the worker as root or in a container with the capabilities docker-compose.yml grants "
        "(docs/deployment.md), or, for code you trust, lower the requirement (--require-isolation partial "
        "or any, CPFLEET_REQUIRE_ISOLATION)"
    )


def connect(url: str, **options: Any) -> redis.Redis:
    """A redis-py client for a Redis URL (``core.redis_url``'s forms): for ``sentinel://``, bound
    to the Sentinels' current primary (each new connection asks them; one that finds itself on a
    demoted primary is dropped, so after a failover the next command reaches the new one)."""
    target = parse_redis_url(url)
    if not target.is_sentinel:
        return redis.Redis.from_url(target.url, **options)
    sentinel_kwargs: dict[str, Any] = {k: options[k] for k in ("socket_timeout", "socket_connect_timeout") if k in options}
    if target.sentinel_password is not None:
        sentinel_kwargs["password"] = target.sentinel_password
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)
    auth = {k: v for k, v in (("password", target.password), ("username", target.username)) if v is not None}
    return sentinel.master_for(target.master, redis_class=redis.Redis, db=target.db, **auth, **options)


def redis_client(settings: Settings) -> redis.Redis:
    """A bytes client with timeouts, so a dead Redis is an error, not a hang."""
    return connect(
        settings.redis_url,
        socket_timeout=settings.socket_timeout_s,
        socket_connect_timeout=5,
        socket_keepalive=True,
        health_check_interval=settings.health_check_interval_s,
        retry_on_timeout=True,
    )


class ProcessResources:
    """Lazily built, per-process; ``reset_runner`` after anything that may have left it unusable."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._runner: CodeRunner | None = None
        self._redis: redis.Redis | None = None
        self._problems: ProblemCache | None = None
        self._results: ResultCache | None = None

    def _check_pid(self) -> None:
        # Objects made in another process (the parent, before the fork) are never reused.
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._runner = None
            self._redis = None
            self._problems = None
            self._results = None

    @property
    def redis(self) -> redis.Redis:
        self._check_pid()
        if self._redis is None:
            self._redis = redis_client(self.settings)
        return self._redis

    @property
    def problems(self) -> ProblemCache:
        self._check_pid()
        if self._problems is None:
            from cpfleet.workers.problem_cache import ProblemCache

            self._problems = ProblemCache(self.redis, max_bytes=self.settings.problem_cache_bytes)
        return self._problems

    @property
    def results(self) -> ResultCache:
        self._check_pid()
        if self._results is None:
            from cpfleet.workers.result_cache import ResultCache

            self._results = ResultCache(
                self.redis, ttl_s=self.settings.result_cache_ttl_s, runner=self.settings.runner
            )
        return self._results

    @property
    def runner(self) -> CodeRunner:
        self._check_pid()
        with self._lock:
            if self._runner is None:
                from cpfleet.sandbox.capacity import memory_capacity
                from cpfleet.sandbox.runner import make_runner

                runner = make_runner(self.settings.runner)
                report = runner.isolation
                log.info("sandbox runner %s in pid %d: %s; memory at most %s", self.settings.runner, os.getpid(),
                         report.summary(), memory_capacity().describe())
                if report.level != "full":
                    log.warning("sandbox isolation is %s: %s", report.level, "; ".join(report.notes) or report.summary())
                _record_isolation(report)
                if not isolation_meets(report.level, self.settings.require_isolation):
                    # the node's start-up check passed, this process's runner did not: judge nothing
                    runner.close()
                    raise IsolationRequirementError(_shortfall(report, self.settings.require_isolation))
                self._runner = runner
            return self._runner

    def prepare_next(self) -> None:
        """Idle until the next job: let the runner, if there is one, set up that job's sandbox
        now (never builds a runner; a failure here is logged and the next job starts as usual)."""
        runner = self._runner
        if runner is None or os.getpid() != self._pid:
            return
        try:
            runner.prepare_next()
        except Exception:
            log.exception("preparing the next sandbox job failed")

    def reset_runner(self) -> None:
        """Close the runner (after a soft time limit or an internal error); the next job makes a new one."""
        with self._lock:
            runner, self._runner = self._runner, None
        if runner is not None:
            try:
                runner.close()
            except Exception:
                log.exception("closing the sandbox runner failed")

    def close(self) -> None:
        self.reset_runner()
        if self._redis is not None:
            try:
                self._redis.close()
            except Exception:  # closing at shutdown must never raise
                pass
            self._redis = None


def _record_isolation(report: Any) -> None:
    try:
        from cpfleet.workers import metrics
    except ImportError:  # pragma: no cover - metrics ship with the project
        return
    metrics.record_isolation(report)
