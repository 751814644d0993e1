"""``LocalFleet``: Redis, one worker node and Flower on this machine, started and stopped as
one unit (``cpfleet up``, ``cpfleet demo`` and the tests use it).

Children are stopped in order (the worker first, while the broker is still up for its warm
shutdown, then Flower, then Redis); on stop every descendant is snapshotted, each process group
signalled, and any descendant that outlived its group killed (see ``cpfleet.fleet.processes``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from cpfleet.core.errors import FleetError
from cpfleet.fleet.processes import (
    alive,
    descendants,
    die_with_parent,
    http_get,
    popen_lasting,
    proc_table,
    stop_process_group,
)
from cpfleet.fleet.redis_server import PORT_TRIES, RedisServer, free_port, port_taken


@dataclass
class _Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: str | None
    log_file: IO[bytes] | None

    def log_tail(self, n: int = 40) -> str:
        if not self.log_path:
            return ""
        try:
            lines = Path(self.log_path).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])


class LocalFleet:
    """Redis (unless ``redis_url`` is given) + one prefork worker node + Flower, as a context manager.

    Ports: ``None`` turns Flower / the metrics endpoint off; ``0`` picks a free port (the
    worker binds its metrics port itself, see ``_wait_metrics_port``). ``log_dir``:
    children write ``worker.log`` / ``flower.log`` there; ``None`` lets them write to our
    terminal. ``worker_env`` / ``flower_env`` add environment variables (e.g. CPFLEET_RUNNER,
    FLOWER_BASIC_AUTH=user:password).

    ``hold``: a context manager factory each start-up step that imports or polls runs under.
    ``cpfleet up`` and ``demo`` set it to their StopSignals' ``held``: those steps import Celery,
    kombu and redis lazily, and a stop signal raised inside an import's class body reaches the
    caller as a RuntimeError (a traceback instead of a clean stop); held, it is raised when the
    step ends, a second or so later at most.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        workers: int | None = None,
        flower_port: int | None = 0,
        metrics_port: int | None = 0,
        log_dir: str | None = None,
        worker_env: Mapping[str, str] | None = None,
        flower_env: Mapping[str, str] | None = None,
        redis_dir: str | None = None,
        redis_port: int | None = None,
        stop_timeout: float = 20.0,
        loglevel: str = "INFO",
    ) -> None:
        self.redis_url = redis_url
        self.workers = workers
        self.flower_port = free_port() if flower_port == 0 else flower_port
        self._flower_port_picked = flower_port == 0  # may move if taken before Flower binds it
        self.metrics_port = metrics_port  # 0: any free one, known once the worker has bound it
        self._metrics_port_dir: str | None = None  # where the worker writes the port it bound
        self.log_dir = log_dir
        self.worker_env = dict(worker_env or {})
        self.flower_env = dict(flower_env or {})
        self.redis_dir = redis_dir
        self.redis_port = redis_port
        self.stop_timeout = stop_timeout
        self.loglevel = loglevel
        self.redis: RedisServer | None = None
        self.worker: _Child | None = None
        self.flower: _Child | None = None
        self.concurrency: int | None = None  # known once the worker answers
        # jobs still in the broker queue(s) when stop() had stopped the worker (None: unknown)
        self.left_in_queue: int | None = None
        self.hold: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
        self.node_name = f"cpfleet-local.{os.getpid()}.{int(time.time() * 1000) % 100000}@{socket.gethostname()}"

    # --- what it exposes -----------------------------------------------------------------

    @property
    def flower_url(self) -> str | None:
        return None if self.flower_port is None else f"http://127.0.0.1:{self.flower_port}"

    @property
    def metrics_url(self) -> str | None:
        return f"http://127.0.0.1:{self.metrics_port}/metrics" if self.metrics_port else None

    def pids(self) -> dict[int, int]:
        """Every process this fleet started, with their descendants: pid -> start time."""
        table = proc_table()
        found: dict[int, int] = {}
        for child in self._children():
            pid = child.proc.pid
            if pid in table:
                found[pid] = table[pid][1]
            found.update(descendants(pid, table))
        if self.redis is not None and self.redis.proc is not None and self.redis.proc.pid in table:
            found[self.redis.proc.pid] = table[self.redis.proc.pid][1]
        return found

    def child_pids(self) -> set[int]:
        """The pids of the processes this fleet started itself (not their descendants)."""
        pids = {child.proc.pid for child in self._children()}
        if self.redis is not None and self.redis.proc is not None:
            pids.add(self.redis.proc.pid)
        return pids

    def _children(self) -> list[_Child]:
        return [c for c in (self.worker, self.flower) if c is not None]

    # --- starting ------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> LocalFleet:
        deadline = time.monotonic() + timeout
        try:
            if self.redis_url is None:
                self.redis = RedisServer(
                    port=self.redis_port,
                    data_dir=self.redis_dir,
                    appendonly=self.redis_dir is not None,
                    launch=die_with_parent,
                    popen=popen_lasting,
                )
                with self.hold():
                    self.redis.start()
                self.redis_url = self.redis.url
            else:
                self._check_redis(self.redis_url)
            if self.metrics_port is not None:
                self._metrics_port_dir = tempfile.mkdtemp(prefix="cpfleet-metrics-port-")
            self.worker = self._spawn("worker", self._worker_argv(), self._env(worker=True))
            if self.flower_port is not None:
                self.flower = self._spawn("flower", self._flower_argv(), self._env(worker=False))
            self._wait_worker(deadline)
            if self.flower is not None:
                self._wait_flower(deadline)
            if self.metrics_port is not None:
                self.metrics_port = self._wait_metrics_port(deadline)
                self._wait_http("metrics", str(self.metrics_url), self.worker, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _env(self, *, worker: bool) -> dict[str, str]:
        env = dict(os.environ)
        env["CPFLEET_REDIS_URL"] = str(self.redis_url)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if worker:
            env.update(self.worker_env)
            if self.metrics_port is not None and self._metrics_port_dir is not None:
                env["CPFLEET_METRICS_PORT"] = str(self.metrics_port or "any")
                env["CPFLEET_METRICS_PORT_FILE"] = self._metrics_port_file()
                env.setdefault("CPFLEET_METRICS_ADDR", "127.0.0.1")
            else:
                env.pop("CPFLEET_METRICS_PORT", None)
                env.pop("CPFLEET_METRICS_PORT_FILE", None)
        else:
            # Flower on loopback only, so its API may go without a password here; the
            # compose file sets FLOWER_BASIC_AUTH instead.
            env.update(self.flower_env)
            if "FLOWER_BASIC_AUTH" not in env:
                env.setdefault("FLOWER_UNAUTHENTICATED_API", "true")
        return env

    def _worker_argv(self) -> list[str]:
        argv = [sys.executable, "-m", "cpfleet", "worker", "--redis", str(self.redis_url), "-n", self.node_name]
        argv += ["-l", self.loglevel]
        if self.workers:
            argv += ["-c", str(self.workers)]
        return argv

    def _flower_argv(self) -> list[str]:
        return [
            sys.executable, "-m", "cpfleet.fleet.flower_launch", "-A", "cpfleet.workers.app", "flower",
            f"--port={self.flower_port}", "--address=127.0.0.1", "--max_tasks=20000",
            "--logging=warning",
        ]  # fmt: skip

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> _Child:
        log_path: str | None = None
        log_file: IO[bytes] | None = None
        if self.log_dir is not None:
            os.makedirs(self.log_dir, exist_ok=True)
            log_path = os.path.join(self.log_dir, f"{name}.log")
            log_file = open(log_path, "ab")  # closed in stop()
        proc = popen_lasting(
            die_with_parent(argv),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT if log_file is not None else None,
        )
        return _Child(name, proc, log_path, log_file)

    def _check_redis(self, url: str) -> None:
        with self.hold():
            from cpfleet.core.redis_url import parse_redis_url
            from cpfleet.producer.connection import unreachable

            target = parse_redis_url(url)
        reason = unreachable(target)  # the rule and bound every command's first look at Redis uses
        if reason is not None:
            raise FleetError(reason)

    def _fail(self, child: _Child, what: str) -> FleetError:
        tail = child.log_tail()
        where = f" (log: {child.log_path})" if child.log_path else ""
        return FleetError(f"{child.name} {what}{where}" + (f"\n{tail}" if tail else ""))

    def _wait_worker(self, deadline: float) -> None:
        """Until the node answers a control ping (its consumer is up; pool processes may still warm up)."""
        assert self.worker is not None
        with self.hold():
            from celery import Celery

            from cpfleet.workers.config import Settings

            app = Celery("cpfleet-up", set_as_current=False)
            app.conf.update(Settings.from_env({"CPFLEET_REDIS_URL": str(self.redis_url)}).celery_config())
        try:
            while True:
                if self.worker.proc.poll() is not None:
                    raise self._fail(self.worker, f"exited with status {self.worker.proc.returncode}")
                if time.monotonic() > deadline:
                    raise self._fail(self.worker, "did not answer a ping in time")
                with self.hold(), contextlib.suppress(Exception):
                    replies = app.control.ping(destination=[self.node_name], timeout=1.0)
                    if replies:
                        self.concurrency = self._pool_size(app)
                        return
                time.sleep(0.2)
        finally:
            with self.hold():
                app.close()

    def _pool_size(self, app: Any) -> int | None:
        """The node's actual pool size (``-c auto`` resolves it from CPUs and the CPU quota)."""
        with contextlib.suppress(Exception):
            stats = app.control.inspect(destination=[self.node_name], timeout=2.0).stats() or {}
            return int(stats[self.node_name]["pool"]["max-concurrency"])
        return None

    def _wait_flower(self, deadline: float) -> None:
        """Until Flower answers. A port picked here was free when picked, not when Flower binds
        it (another process's connection may take it meanwhile): Flower then exits, and is
        started again on another port. A port the caller named never moves."""
        for attempt in range(PORT_TRIES):
            assert self.flower is not None and self.flower_port is not None
            try:
                self._wait_http("flower", f"{self.flower_url}/healthcheck", self.flower, deadline)
                return
            except FleetError:
                moved = (self._flower_port_picked and attempt < PORT_TRIES - 1
                         and self.flower.proc.poll() is not None and port_taken(self.flower_port))
                if not moved:
                    raise
            self._stop_child(self.flower, signal.SIGTERM, 5.0)
            if self.flower.log_file is not None:
                self.flower.log_file.close()
            self.flower_port = free_port()
            self.flower = self._spawn("flower", self._flower_argv(), self._env(worker=False))

    def _metrics_port_file(self) -> str:
        assert self._metrics_port_dir is not None
        return os.path.join(self._metrics_port_dir, "port")

    def _wait_metrics_port(self, deadline: float) -> int:
        """The port the worker's /metrics listens on, as the worker wrote it once bound. A port
        picked here and bound later could be taken in between (and another server answering
        there be scraped in the worker's place), so for "any free port" the worker binds port 0
        and reads the number back; for a named port the file says the worker got it."""
        with self.hold():
            from cpfleet.workers.metrics import PORT_FILE_ERROR

        assert self.worker is not None
        while True:
            text = ""
            with contextlib.suppress(OSError):
                with open(self._metrics_port_file()) as f:
                    text = f.read().strip()
            if text.startswith(PORT_FILE_ERROR):
                raise self._fail(self.worker, f"could not serve its metrics on port {self.metrics_port} "
                                              f"({text.removeprefix(PORT_FILE_ERROR)}): name another port, or 0 "
                                              "for any free one")
            if text.isdigit():
                return int(text)
            if self.worker.proc.poll() is not None:
                raise self._fail(self.worker, f"exited with status {self.worker.proc.returncode}")
            if time.monotonic() > deadline:
                raise self._fail(self.worker, "did not start its metrics endpoint in time")
            time.sleep(0.2)

    def _wait_http(self, what: str, url: str, child: _Child, deadline: float) -> None:
        while True:
            if child.proc.poll() is not None:
                raise self._fail(child, f"exited with status {child.proc.returncode}")
            if time.monotonic() > deadline:
                raise self._fail(child, f"{what} did not answer on {url} in time")
            with self.hold(), contextlib.suppress(OSError):
                status, _ = http_get(url, timeout=1.0)
                if status == 200:
                    return
            time.sleep(0.2)

    # --- stopping ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop everything this fleet started: worker (warm shutdown), Flower, Redis; then strays."""
        snapshot = self.pids()
        if self.worker is not None:
            self._stop_child(self.worker, signal.SIGTERM, self.stop_timeout)
        if self.flower is not None:
            self._stop_child(self.flower, signal.SIGTERM, 5.0)
        if self.redis_url is not None:
            self.left_in_queue = queued_jobs(self.redis_url)  # after the worker gave its jobs back
        if self.redis is not None:
            self.redis.close()
        # anything that outlived its process group (e.g. a sandbox child in its own session)
        for _ in range(50):
            left = alive(snapshot)
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        for child in self._children():
            if child.log_file is not None:
                child.log_file.close()
        self.worker = self.flower = None
        if self._metrics_port_dir is not None:
            shutil.rmtree(self._metrics_port_dir, ignore_errors=True)
            self._metrics_port_dir = None
        if self.redis is not None:
            self.redis = None
            self.redis_url = None

    def queued(self) -> int | None:
        """Jobs waiting in the broker queue(s) now (None when Redis does not answer)."""
        return None if self.redis_url is None else queued_jobs(self.redis_url)

    @staticmethod
    def _stop_child(child: _Child, sig: int, timeout: float) -> None:
        stop_process_group(child.proc, sig, timeout)

    def __enter__(self) -> LocalFleet:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()



def queued_jobs(redis_url: str, timeout: float = 2.0) -> int | None:
    """Jobs waiting in the fleet's queues (``$CPFLEET_QUEUES``, plain and priority lists);
    None when Redis does not answer."""
    import redis

    from cpfleet.workers.config import Settings
    from cpfleet.workers.metrics import queue_lists

    queues = Settings.from_env({**os.environ, "CPFLEET_REDIS_URL": redis_url}).queues
    from cpfleet.core.redis_url import parse_redis_url
    from cpfleet.producer.connection import connect

    client = connect(parse_redis_url(redis_url), socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        pipe = client.pipeline(transaction=False)
        for queue in queues:
            for name in queue_lists(queue):
                pipe.llen(name)
        return int(sum(pipe.execute()))
    except redis.RedisError:
        return None
    finally:
        client.close()
