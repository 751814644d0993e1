"""``cpfleet up``: a whole fleet on one machine -- Redis, one worker node, Flower -- in one command.

``LocalFleet`` is the reusable part (``cpfleet demo`` and the tests use it). Why it is careful
about processes: the worker forks pool processes, which start sandbox fork servers, which fork
test programs in their own sessions. Killing one pid leaves the rest running. So each child is
started in its own session (a terminal's Ctrl-C reaches only us, and we stop things in order:
worker first, while the broker is still up, then Flower, then Redis), with
``PR_SET_PDEATHSIG`` so that it gets SIGTERM if we die without cleaning up (both set by a tiny
launcher that then execs the real command); on stop we snapshot
every descendant, signal the process groups, and finally SIGKILL any descendant that outlived
its group. The CLI also makes itself a child subreaper, so orphans that escaped the snapshot
come back to it and are killed and reaped before it exits.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any

from cpfleet.core.errors import FleetError
from cpfleet.redis_server import RedisServer, free_port

DEFAULT_REDIS_PORT = 6379  # so the CLIs' default CPFLEET_REDIS_URL finds it
DEFAULT_FLOWER_PORT = 5555
DEFAULT_METRICS_PORT = 9808  # cpfleet.workers.metrics.DEFAULT_PORT (not imported: it pulls in the sandbox)
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

try:
    _libc: Any = ctypes.CDLL(None, use_errno=True)
    _prctl: Any = _libc.prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _prctl = None


# Runs first in every child, then execs the real command: PR_SET_PDEATHSIG survives execve,
# so the child gets SIGTERM if the thread that started it dies (e.g. `cpfleet up` SIGKILLed).
# A launcher rather than a preexec_fn: preexec_fn can deadlock a process that has threads.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "os.setsid()\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('cpfleet: parent gone before start')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def die_with_parent(argv: list[str]) -> list[str]:
    """``argv`` wrapped to run in its own session (so a process group, which ``stop`` signals)
    and to get SIGTERM when its parent dies (Linux)."""
    if _prctl is None:  # pragma: no cover - not Linux
        return argv
    exe = argv[0] if os.path.isabs(argv[0]) else (shutil.which(argv[0]) or argv[0])
    return [sys.executable, "-c", _LAUNCHER, str(os.getpid()), exe, *argv[1:]]


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the child's process group; just the child if it has not made its group yet."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
    except PermissionError:
        pass


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process instead of init (Linux >= 3.4)."""
    if _prctl is None:
        return False
    return bool(_prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, start time in clock ticks) for every process we can see."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may contain spaces and parentheses: split after the last ')'
        fields = stat[stat.rfind(b")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), int(fields[19]))
    return table


def descendants(root: int, table: dict[int, tuple[int, int]] | None = None) -> dict[int, int]:
    """Every live descendant of ``root``: pid -> start time (to tell a reused pid apart)."""
    table = _proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found[child] = table[child][1]
                stack.append(child)
    return found


def alive(procs: Mapping[int, int]) -> dict[int, int]:
    """The subset of ``procs`` (pid -> start time) still running (zombies count as gone)."""
    table = _proc_table()
    out = {}
    for pid, start in procs.items():
        if pid in table and table[pid][1] == start and not _is_zombie(pid):
            out[pid] = start
    return out


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"Z", b"X")
    except OSError:
        return True


def reap_children() -> int:
    """Collect exited children that nobody waits for (orphans given to us as subreaper)."""
    n = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return n
        if pid == 0:
            return n
        n += 1


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def http_get(url: str, timeout: float = 2.0, auth: tuple[str, str] | None = None) -> tuple[int, bytes]:
    """GET ``url``; (status, body). Basic auth when given. Raises OSError when nobody answers."""
    req = urllib.request.Request(url)
    if auth:
        import base64

        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read()


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

    Ports: ``None`` turns Flower / the metrics endpoint off; ``0`` picks a free port. ``log_dir``:
    children write ``worker.log`` / ``flower.log`` there; ``None`` lets them write to our
    terminal. ``worker_env`` / ``flower_env`` add environment variables (e.g. CPFLEET_RUNNER,
    FLOWER_BASIC_AUTH=user:password).
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
        self.metrics_port = free_port() if metrics_port == 0 else metrics_port
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
        self.node_name = f"cpfleet-local.{os.getpid()}.{int(time.time() * 1000) % 100000}@{socket.gethostname()}"

    # --- what it exposes -----------------------------------------------------------------

    @property
    def flower_url(self) -> str | None:
        return None if self.flower_port is None else f"http://127.0.0.1:{self.flower_port}"

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics_port is None else f"http://127.0.0.1:{self.metrics_port}/metrics"

    def pids(self) -> dict[int, int]:
        """Every process this fleet started, with their descendants: pid -> start time."""
        table = _proc_table()
        found: dict[int, int] = {}
        for child in self._children():
            pid = child.proc.pid
            if pid in table:
                found[pid] = table[pid][1]
            found.update(descendants(pid, table))
        if self.redis is not None and self.redis.proc is not None and self.redis.proc.pid in table:
            found[self.redis.proc.pid] = table[self.redis.proc.pid][1]
        return found

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
                ).start()
                self.redis_url = self.redis.url
            else:
                self._check_redis(self.redis_url)
            self.worker = self._spawn("worker", self._worker_argv(), self._env(worker=True))
            if self.flower_port is not None:
                self.flower = self._spawn("flower", self._flower_argv(), self._env(worker=False))
            self._wait_worker(deadline)
            if self.flower is not None:
                self._wait_http("flower", f"{self.flower_url}/healthcheck", self.flower, deadline)
            if self.metrics_port is not None:
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
            if self.metrics_port is not None:
                env["CPFLEET_METRICS_PORT"] = str(self.metrics_port)
                env.setdefault("CPFLEET_METRICS_ADDR", "127.0.0.1")
            else:
                env.pop("CPFLEET_METRICS_PORT", None)
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
            sys.executable, "-m", "celery", "-A", "cpfleet.workers.app", "flower",
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
        proc = subprocess.Popen(
            die_with_parent(argv),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT if log_file is not None else None,
        )
        return _Child(name, proc, log_path, log_file)

    def _check_redis(self, url: str) -> None:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
        try:
            client.ping()
        except redis.RedisError as e:
            raise FleetError(f"cannot reach Redis at {url}: {e}") from e
        finally:
            client.close()

    def _fail(self, child: _Child, what: str) -> FleetError:
        tail = child.log_tail()
        where = f" (log: {child.log_path})" if child.log_path else ""
        return FleetError(f"{child.name} {what}{where}" + (f"\n{tail}" if tail else ""))

    def _wait_worker(self, deadline: float) -> None:
        """Until the node answers a control ping (its consumer is up; pool processes may still warm up)."""
        from celery import Celery

        from cpfleet.workers.config import Settings

        assert self.worker is not None
        app = Celery("cpfleet-up", set_as_current=False)
        app.conf.update(Settings.from_env({"CPFLEET_REDIS_URL": str(self.redis_url)}).celery_config())
        try:
            while True:
                if self.worker.proc.poll() is not None:
                    raise self._fail(self.worker, f"exited with status {self.worker.proc.returncode}")
                if time.monotonic() > deadline:
                    raise self._fail(self.worker, "did not answer a ping in time")
                with contextlib.suppress(Exception):
                    replies = app.control.ping(destination=[self.node_name], timeout=1.0)
                    if replies:
                        self.concurrency = self._pool_size(app)
                        return
                time.sleep(0.2)
        finally:
            app.close()

    def _pool_size(self, app: Any) -> int | None:
        """The node's actual pool size (``-c auto`` resolves it from CPUs and the CPU quota)."""
        with contextlib.suppress(Exception):
            stats = app.control.inspect(destination=[self.node_name], timeout=2.0).stats() or {}
            return int(stats[self.node_name]["pool"]["max-concurrency"])
        return None

    def _wait_http(self, what: str, url: str, child: _Child, deadline: float) -> None:
        while True:
            if child.proc.poll() is not None:
                raise self._fail(child, f"exited with status {child.proc.returncode}")
            if time.monotonic() > deadline:
                raise self._fail(child, f"{what} did not answer on {url} in time")
            with contextlib.suppress(OSError):
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
        if self.redis is not None:
            self.redis = None
            self.redis_url = None

    @staticmethod
    def _stop_child(child: _Child, sig: int, timeout: float) -> None:
        proc = child.proc
        if proc.poll() is None:
            _signal_group(proc, sig)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        # the group may hold more than the leader (pool processes): kill what is left of it
        _signal_group(proc, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)

    def __enter__(self) -> LocalFleet:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# --- the command ----------------------------------------------------------------------------


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``up`` and ``demo``."""
    parser.add_argument("--redis", metavar="URL", help="use this Redis instead of starting one")
    parser.add_argument(
        "--workers", "-c", type=int, metavar="N", help="pool processes of the worker (default: CPU count)"
    )
    parser.add_argument(
        "--flower-port", type=int, metavar="P",
        help=f"Flower's port (default {DEFAULT_FLOWER_PORT}, or a free one if taken; -1: no Flower)",
    )  # fmt: skip
    parser.add_argument(
        "--metrics-port", type=int, metavar="P",
        help=f"worker /metrics port (default {DEFAULT_METRICS_PORT}, or a free one if taken; -1: off)",
    )  # fmt: skip


def resolve_port(asked: int | None, default: int) -> int | None:
    """CLI port rule: -1 off, 0 any free port, unset the default (or a free one if it is taken)."""
    if asked is None:
        return default if port_free(default) else 0
    if asked < 0:
        return None
    if asked and not port_free(asked):
        raise FleetError(f"port {asked} is already in use")
    return asked


def configure(parser: argparse.ArgumentParser) -> None:
    add_fleet_arguments(parser)
    parser.add_argument(
        "--redis-port", type=int, metavar="P",
        help=f"port of the Redis started here (default {DEFAULT_REDIS_PORT}, or a free one if taken)",
    )  # fmt: skip
    parser.add_argument("--redis-dir", metavar="DIR", help="keep Redis data (AOF) in DIR (default: nothing on disk)")
    parser.add_argument("--logs", metavar="DIR", help="write worker.log and flower.log to DIR instead of the terminal")


class Stopped(Exception):
    """Raised from the SIGTERM/SIGHUP handler to unwind into LocalFleet.stop()."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind like Ctrl-C does, so the ``with LocalFleet`` block cleans up."""
    old = {s: signal.signal(s, _raise_stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def kill_strays() -> int:
    """As subreaper: SIGKILL and reap every remaining child process. Returns how many."""
    mine = alive(descendants(os.getpid()))  # zombies are only reaped, not counted
    for pid in mine:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.05 if mine else 0)
    reap_children()
    return len(mine)


def fleet_from_args(args: argparse.Namespace, log_dir: str | None) -> LocalFleet:
    return LocalFleet(
        args.redis,
        workers=args.workers,
        flower_port=resolve_port(args.flower_port, DEFAULT_FLOWER_PORT),
        metrics_port=resolve_port(args.metrics_port, DEFAULT_METRICS_PORT),
        log_dir=log_dir,
        redis_dir=getattr(args, "redis_dir", None),
        redis_port=redis_port_from_args(args),
    )


def redis_port_from_args(args: argparse.Namespace) -> int | None:
    """``up`` serves Redis on 6379 when free (the default URL everywhere); ``demo`` on any port."""
    if args.redis or not hasattr(args, "redis_port"):
        return None
    return resolve_port(args.redis_port, DEFAULT_REDIS_PORT) or None


def run(args: argparse.Namespace) -> int:
    become_subreaper()
    log_dir = args.logs
    try:
        fleet = fleet_from_args(args, log_dir)
    except FleetError as e:
        print(f"cpfleet up: {e}", file=sys.stderr)
        return 2
    status = 0
    with stop_on_signals():
        try:
            with fleet:
                print_urls(fleet)
                while fleet.worker is not None and fleet.worker.proc.poll() is None:
                    time.sleep(0.5)
                if fleet.worker is not None:
                    print(f"cpfleet up: the worker exited ({fleet.worker.proc.returncode}); stopping", file=sys.stderr)
                    status = 1
        except (KeyboardInterrupt, Stopped) as e:
            print(f"\ncpfleet up: stopping ({str(e) or 'SIGINT'})", file=sys.stderr)
        except FleetError as e:
            print(f"cpfleet up: {e}", file=sys.stderr)
            status = 1
    strays = kill_strays()
    if strays:
        print(f"cpfleet up: killed {strays} stray process(es)", file=sys.stderr)
    print("cpfleet up: stopped, nothing left running", file=sys.stderr)
    return status


def print_urls(fleet: LocalFleet, out: IO[str] | None = None) -> None:
    out = out or sys.stdout
    print("cpfleet fleet is up", file=out)
    print(f"  redis     {fleet.redis_url}" + ("  (started here, in memory)" if fleet.redis else ""), file=out)
    print(f"  worker    {fleet.node_name}  concurrency={fleet.concurrency or fleet.workers or '?'}", file=out)
    if fleet.flower_url:
        print(f"  flower    {fleet.flower_url}", file=out)
    if fleet.metrics_url:
        print(f"  metrics   {fleet.metrics_url}", file=out)
    print(f"  try       cpfleet load PROBLEMS.jsonl --redis {fleet.redis_url}", file=out)
    print(f"            cpfleet submit JOBS.jsonl --redis {fleet.redis_url}", file=out)
    print("  stop      Ctrl-C (or SIGTERM)", file=out, flush=True)


def default_log_dir() -> str:
    return tempfile.mkdtemp(prefix="cpfleet-logs-")
