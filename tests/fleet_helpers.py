"""Real fleet nodes for tests: ``celery -A cpfleet.workers.app worker -P prefork`` subprocesses against
the test's redis-server, started in their own process group and always stopped (the group is
killed if a graceful stop takes too long), so no test leaves a process behind."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

# Short timers so fault tests finish in seconds (production defaults are minutes).
TEST_ENV = {
    "CPFLEET_SOFT_TIME_LIMIT": "20",
    "CPFLEET_HARD_TIME_LIMIT": "25",
    "CPFLEET_VISIBILITY_TIMEOUT": "30",
    "CPFLEET_UNACKED_RESTORE_INTERVAL": "1",
    "CPFLEET_TASK_EVENTS": "0",
    "CPFLEET_REDIS_SOCKET_TIMEOUT": "5",
    "CPFLEET_HEALTH_CHECK_INTERVAL": "2",
}


def wrong_completions_module() -> ModuleType:
    """``bench/wrong_completions.py`` (LLM-style wrong programs made from correct ones), loaded
    from its file: the benchmarks and the tests judge the same mutants."""
    spec = importlib.util.spec_from_file_location("wrong_completions", REPO / "bench" / "wrong_completions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def port_held(port: int) -> Iterator[None]:
    """``port`` on 127.0.0.1 bound and listening here: taken, as by another process's socket in the
    moment between a server's port being picked and the server binding it."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        yield


def _tree_cpu_ticks(pid: int) -> int:
    """CPU ticks (user + system) of ``pid``'s descendants, the pid itself left out; gone ones count 0."""
    total = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                stack += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
            if p != pid:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            continue
    return total


class FleetWorker:
    """One worker node (main process + prefork pool) with its log in a file."""

    def __init__(
        self,
        redis_url: str,
        log_dir: Path,
        concurrency: int = 2,
        env: dict[str, str] | None = None,
        argv_prefix: list[str] | None = None,
        faults: bool = False,
    ) -> None:
        """``argv_prefix``: a command the node runs under (e.g. setpriv dropping a capability).
        ``faults``: the node loads tests/fault_jobs.py (jobs that fail the worker on purpose)."""
        self.redis_url = redis_url
        self.argv_prefix = list(argv_prefix or [])
        self.concurrency = concurrency
        self.hostname = f"test-{uuid.uuid4().hex[:8]}@localhost"
        self.log_path = log_dir / f"worker-{self.hostname.split('@')[0]}.log"
        self.env = {**os.environ, **TEST_ENV, "CPFLEET_REDIS_URL": redis_url, **(env or {})}
        self.env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), self.env.get("PYTHONPATH", "")])
        self.faults = faults
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True, timeout: float = 90.0) -> FleetWorker:
        argv = [
            *self.argv_prefix, sys.executable, "-m", "celery", "-A", "cpfleet.workers.app", "worker",
            "-P", "prefork", "-c", str(self.concurrency), "-n", self.hostname, "-l", "INFO",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            *(["--include", "fault_jobs"] if self.faults else []),
        ]
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            argv, cwd=REPO, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        if wait:
            self.wait_ready(timeout)
        return self

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_lines(self) -> list[str]:
        return complete_lines(self.log_path)

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Until the node logs 'ready.' and every pool process is up."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"worker exited at start:\n{self.log_text()[-4000:]}")
            if f"{self.hostname} ready." in self.log_text() and len(self.pool_pids()) >= self.concurrency:
                return
            time.sleep(0.1)
        raise TimeoutError(f"worker not ready after {timeout}s:\n{self.log_text()[-4000:]}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def pool_pids(self) -> list[int]:
        """The prefork pool processes (children of the main process)."""
        if self.proc is None:
            return []
        try:
            text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill_pool_process(self, pid: int | None = None) -> int:
        pid = pid if pid is not None else self.pool_pids()[0]
        os.kill(pid, signal.SIGKILL)
        return pid

    def busy_pool_pid(self, window: float = 0.1) -> int | None:
        """A pool process whose sandbox tree burned CPU in the last ``window`` seconds, i.e. one
        running a job's test right now (an idle one waits on the broker, its tree asleep)."""
        before = {pid: _tree_cpu_ticks(pid) for pid in self.pool_pids()}
        time.sleep(window)
        grown = [(_tree_cpu_ticks(pid) - t, pid) for pid, t in before.items()]
        busy = [pid for d, pid in sorted(grown, reverse=True) if d > 0]
        return busy[0] if busy else None

    def kill(self) -> None:
        """SIGKILL the whole node (main process, pool, sandboxes): a crashed machine."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        self._close_log()

    def stop(self, timeout: float = 30.0) -> None:
        """Warm shutdown (SIGTERM), then SIGKILL of the group if it lingers."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers of the group, if any
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=30)
        self._close_log()

    def __enter__(self) -> FleetWorker:
        """``with FleetWorker(...) as node:`` starts it and stops it however the block ends."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _close_log(self) -> None:
        log = getattr(self, "_log", None)
        if log is not None and not log.closed:
            log.close()


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., FleetWorker]]:
    """A factory: ``start_worker(redis_url, concurrency=2, env={...}, faults=False)``; all are stopped at the end."""
    started: list[FleetWorker] = []

    def start(
        redis_url: str, concurrency: int = 2, env: dict[str, str] | None = None, wait: bool = True, faults: bool = False
    ) -> FleetWorker:
        w = FleetWorker(redis_url, tmp_path, concurrency, env, faults=faults)
        started.append(w)
        return w.start(wait=wait)

    yield start
    for w in started:
        w.stop(timeout=15)


def complete_lines(path: Path) -> list[str]:
    """A log file's complete lines: its writer may be writing the last one while a test reads,
    and half a JSON record would fail to parse."""
    try:
        return path.read_text(errors="replace").split("\n")[:-1]
    except FileNotFoundError:
        return []


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def store_problems(redis_url: str, *problem_ids: str) -> None:
    """Store a small valid problem (a + b) under each id: a FleetClient refuses at submit a job
    naming a problem the store does not have, so tests about the queue, deadlines or Redis
    itself store the problems their jobs name first."""
    import redis

    from cpfleet.core.store import register_problems

    client = redis.Redis.from_url(redis_url)
    try:
        register_problems(client, [
            {"id": pid, "public_tests": [{"input": "1 2\n", "output": "3\n"}],
             "hidden_tests": [{"input": "2 5\n", "output": "7\n"}]}
            for pid in problem_ids
        ])
    finally:
        client.close()


def taken_unacked(client: Any) -> int:
    """Messages workers have taken off the queues and not acked: the lean transport's in-flight
    lists (``cpfleet:inflight:<node>``) plus kombu's ``unacked`` hash (stock transport, and the
    lean one with liveness off)."""
    from cpfleet.core import protocol

    lists = client.scan_iter(match=protocol.inflight_key("*"), count=1000)
    return int(client.hlen(protocol.KOMBU_UNACKED_KEY)) + sum(int(client.llen(k)) for k in lists)
