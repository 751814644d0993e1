"""Process-tree utilities for running a fleet on one machine: start children that die with
us, snapshot and signal whole process trees, reap orphans as a subreaper, and a tiny HTTP probe.

Why this care: the worker forks pool processes, which start sandbox fork servers, which fork
test programs in their own sessions; killing one pid leaves the rest running. So each child is
started in its own session with ``PR_SET_PDEATHSIG`` (set by a tiny launcher that then execs
the real command), by a thread that lasts as long as this process (``popen_lasting``: the
signal fires when the *thread* that forked the child exits), stopping signals whole process
groups, and a subreaper collects whatever escaped its group.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future
from types import FrameType
from typing import Any, cast

PR_SET_PDEATHSIG = 1


PR_SET_CHILD_SUBREAPER = 36


try:
    _libc: Any = ctypes.CDLL(None, use_errno=True)
    _prctl: Any = _libc.prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _prctl = None


# Runs first in every child, then execs the real command: PR_SET_PDEATHSIG survives execve,
# so the child gets SIGTERM if the thread that started it dies (e.g. `cpfleet up` SIGKILLed);
# popen_lasting makes that thread one that dies with this process only.
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


_Spawn = tuple["Future[subprocess.Popen[bytes]]", list[str], dict[str, Any]]
_spawner: queue.SimpleQueue[_Spawn] | None = None  # the spawner thread's queue, once it runs
_spawner_lock = threading.Lock()


def _forget_spawner() -> None:
    """In a forked child: the spawner thread did not follow (nor may a lock held then be)."""
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_spawner)


def popen_lasting(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **kwargs)``, forked by a thread that lasts as long as this
    process, for a child armed with PR_SET_PDEATHSIG (``die_with_parent``). That signal fires
    when the *thread* that forked the child exits: a LocalFleet started by a thread that then
    ends (a notebook's, a test harness's) lost Redis and its worker at once. Its child's
    lifetime is then this process's, a kill -9 included. Not a pidfd the child waits on, as the
    local pool's processes do: redis-server, Celery and Flower run code that is not ours, and
    a launcher left waiting between us and each of them would stand in the way of their signals
    and exit statuses."""
    spawn: Future[subprocess.Popen[bytes]] = Future()
    _spawner_queue().put((spawn, argv, kwargs))
    try:
        return spawn.result()
    except BaseException:
        if spawn.done() and spawn.exception() is not None:
            raise  # Popen's own error
        # interrupted (a stop signal) while the child starts: it is not left running unknown
        with contextlib.suppress(Exception):
            proc = spawn.result()
            proc.kill()
            proc.wait()
        raise


def _spawner_queue() -> queue.SimpleQueue[_Spawn]:
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = queue.SimpleQueue()
            threading.Thread(target=_spawn_forever, args=(_spawner,), name="cpfleet-spawner", daemon=True).start()
        return _spawner


def _spawn_forever(spawns: queue.SimpleQueue[_Spawn]) -> None:
    # a thread inherits its creator's signal mask, and a child this thread's: whichever thread
    # asked first (one holding SIGINT or SIGTERM blocked), the children start with none blocked
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    while True:
        spawn, argv, kwargs = spawns.get()
        try:
            spawn.set_result(cast("subprocess.Popen[bytes]", subprocess.Popen(argv, **kwargs)))
        except BaseException as e:  # handed to the caller, whose error it is
            spawn.set_exception(e)


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the child's process group; just the child if it has not made its group yet."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
    except PermissionError:
        pass


def stop_process_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    """Stop a child started in its own session: ``sig`` to its group, up to ``timeout`` seconds
    for the leader to exit, then SIGKILL to whatever is left of the group (pool processes and
    other members outlive a leader that exits first), and reap the leader."""
    if proc.poll() is None:
        signal_group(proc, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    signal_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process instead of init (Linux >= 3.4)."""
    if _prctl is None:
        return False
    return bool(_prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def proc_table() -> dict[int, tuple[int, int]]:
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
    table = proc_table() if table is None else table
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
    table = proc_table()
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


def reap_orphans(keep: Collection[int]) -> int:
    """Collect the exited processes re-parented to us as subreaper, leaving our own children
    (``keep``: their Popen objects wait for them and read their exit status) alone."""
    me, n = os.getpid(), 0
    for pid, (ppid, _) in proc_table().items():
        if ppid == me and pid not in keep and _is_zombie(pid):
            with contextlib.suppress(ChildProcessError):
                n += os.waitpid(pid, os.WNOHANG)[0] == pid
    return n


def port_arg(lowest: int = 1) -> Callable[[str], int]:
    """An argparse type for a TCP port: 1-65535, and from ``lowest`` up where the command gives
    0 or -1 a meaning (any free port, off). A port out of range is a usage error naming the
    option, never an OverflowError from bind()."""

    def parse(text: str) -> int:
        try:
            port = int(text)
        except ValueError:
            port = lowest - 1
        if not lowest <= port <= 65535:
            extra = {-1: ", 0 (any free port) or -1 (off)", 0: " or 0 (any free port)"}.get(lowest, "")
            raise argparse.ArgumentTypeError(f"{text!r} is not a port: want 1-65535{extra}")
        return port

    return parse


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


class Stopped(BaseException):
    """Raised from the SIGTERM/SIGHUP handler to unwind into LocalFleet.stop().

    A BaseException, as KeyboardInterrupt is: the signal lands wherever the main thread is,
    and a generic ``except Exception`` there (a ping retried until the worker answers, a library
    probing a callable) would otherwise swallow the stop or turn it into an unrelated error."""


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP unwind the main thread so ``with LocalFleet`` cleans up.

    A signal raises where the main thread happens to be; inside an import or a class body
    Python 3.11 wraps the exception in a RuntimeError, which no ``except KeyboardInterrupt``
    catches. Code that polls (a Redis read, an HTTP scrape, a lazy import) runs under
    ``held()``: a signal arriving there is kept and raised when the block ends."""

    def __init__(self) -> None:
        self.holding = 0
        self.pending: int | None = None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.holding:
            self.pending = self.pending or signum
            return
        self.raise_for(signum)

    @staticmethod
    def raise_for(signum: int) -> None:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Stopped(signal.Signals(signum).name)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1
        if not self.holding and self.pending is not None:
            signum, self.pending = self.pending, None
            self.raise_for(signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopSignals]:
    """SIGINT, SIGTERM and SIGHUP unwind the main thread (see StopSignals)."""
    stop = StopSignals()
    old = {s: signal.signal(s, stop.handle) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield stop
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

