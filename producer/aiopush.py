"""Pushing encoded jobs onto the queue from an event loop, without blocking it and without delay.

``await fleet.evaluate(...)`` publishes a burst of calls in chunks while the burst is still being
made (see ``producer.batcher``). A chunk must reach Redis the moment it is complete: handing it
to a thread makes it wait for the GIL while the loop runs the rest of the burst, and awaiting a
coroutine client (redis.asyncio) defers the write to the next loop iteration, after every call
of the burst. So the push is a plain non-blocking ``send`` of one LPUSH command on a socket of
its own, made during the call that completed the chunk (the socket's send buffer is raised so
that a whole chunk fits; what does not is sent when the loop reports the socket writable).
Replies are read when the loop reports the socket readable and finish, in order, each push's
callback; a push that gets no reply within ``reply_timeout`` fails with every push after it.

The first connection is opened synchronously when a loop first publishes (a connect and, for a
URL with a password or a database, AUTH and SELECT: about one round trip, bounded by
``connect_timeout``, as constructing a ``FleetClient`` already costs), so that even the first
burst on a loop publishes as it is made. After an error the connection is opened again on a
short-lived thread (at most one attempt per ``retry_after`` seconds) while the batcher
publishes on the client's thread, so a Redis outage never stalls the loop.

This connection only ever sends AUTH, SELECT, LPUSH and (with Sentinel: wait until a replica
has the push, ``core.redis_url.ReplicaWait``) WAIT, so it reads only the three reply kinds those
have (``+OK``, ``:<n>``, ``-<error>``) and treats anything else as a broken connection.
It speaks plain TCP and Unix sockets, and finds the primary through Sentinel for
``sentinel://`` (asked again on every connection, so a failover costs one dropped connection);
for ``rediss://`` (TLS) the batcher uses the client's publishing thread instead.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.connection import UnixDomainSocketConnection, parse_url

from cpfleet.core.errors import BrokerFull, BrokerUnavailable, ClientClosed
from cpfleet.core.redis_url import REPLICA_WAIT_MS, ReplicaWait, parse_redis_url
from cpfleet.producer.connection import discover_primary

Done = Callable[[BaseException | None], None]
log = logging.getLogger("cpfleet.client")

_SNDBUF = 4 << 20  # bytes: a chunk of ordinary completions is well under this


def supported(redis_url: str) -> bool:
    """Whether this URL's scheme is one the pusher speaks (TCP or Unix socket, no TLS)."""
    return redis_url.split("://", 1)[0].lower() in ("redis", "unix", "sentinel")


# redis-py's own RESP encoder; the connection object is only used to pack commands, never opened.
_PACKER = redis.Connection()


def lpush_command(key: bytes, values: Sequence[bytes]) -> bytes:
    """One RESP-encoded ``LPUSH key v1 v2 ...`` (values pushed in order: consumers pop from the right)."""
    return _command(b"LPUSH", key, *values)


def _command(*args: bytes) -> bytes:
    return b"".join(_PACKER.pack_command(*args))


_WAIT = _command(b"WAIT", b"1", str(REPLICA_WAIT_MS).encode())


def _pair(done: Done, replica_wait: ReplicaWait) -> tuple[Done, Done, Callable[[int], None]]:
    """Callbacks for an LPUSH's reply and its WAIT's, and the taker of the WAIT's count:
    ``done`` runs once, with the LPUSH's error if it failed, else when the WAIT answers (a
    dropped connection fails both)."""
    state = {"called": False}

    def first(error: BaseException | None) -> None:
        if error is not None and not state["called"]:
            state["called"] = True
            done(error)

    def second(error: BaseException | None) -> None:
        if not state["called"]:
            state["called"] = True
            done(error)

    def count(acked: int) -> None:
        replica_wait.record(acked, time.monotonic())

    return first, second, count


def _error(reply: str) -> BaseException:
    if reply.startswith("OOM"):
        return BrokerFull(f"Redis is full (maxmemory reached, noeviction): {reply}")
    return BrokerUnavailable(f"Redis refused the push: {reply}")


def _finish(done: Done, error: BaseException | None) -> None:
    """Run a push's callback; one that raises must not stop the replies behind it."""
    try:
        done(error)
    except Exception:
        log.exception("a publish callback failed")


class AsyncPusher:
    """One socket that LPUSHes chunks onto one queue, in order; used from one event loop's thread."""

    def __init__(
        self,
        redis_url: str,
        queue: str,
        *,
        reply_timeout: float = 10.0,
        connect_timeout: float = 2.0,
        retry_after: float = 1.0,
    ) -> None:
        self.redis_url = redis_url
        self._replica_wait = ReplicaWait(parse_redis_url(redis_url).is_sentinel)
        self._queue = queue.encode()
        self._reply_timeout = reply_timeout
        self._connect_timeout = connect_timeout
        self._retry_after = retry_after
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sock: socket.socket | None = None
        self._inbuf = bytearray()
        self._outbuf = bytearray()  # bytes the kernel did not take yet
        # (sent at, callback, taker of an integer reply's value or None)
        self._waiting: collections.deque[tuple[float, Done, Callable[[int], None] | None]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._failed_at = -float("inf")
        self._ever_connected = False
        self._reconnecting = False
        self._closed = False
        self.pushes = 0
        self.buffered = 0  # pushes whose bytes did not all fit the kernel's send buffer at once
        self.last_error: BaseException | None = None

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def ensure(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Connected? False: publish another way for now.

        The first connection is opened here and now (see the module docstring); a later one,
        after an error, is opened on a short-lived thread and handed to the loop when ready, at
        most one attempt per ``retry_after`` seconds, so an outage never stalls the loop.
        """
        if self._sock is not None:
            return True
        if self._closed or self._reconnecting or time.monotonic() - self._failed_at < self._retry_after:
            return False
        if not self._ever_connected:
            self._ever_connected = True
            try:
                sock = self._connect_blocking()
            except BrokerUnavailable as exc:
                self._failed(exc)
                return False
            self._adopt(loop, sock)
            return True
        self._reconnecting = True
        threading.Thread(target=self._reconnect, args=(loop,), name="cpfleet-aiopush-connect", daemon=True).start()
        return False

    def _reconnect(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            sock = self._connect_blocking()
        except BrokerUnavailable as exc:
            self._failed(exc)
            self._reconnecting = False
            return

        def adopt() -> None:
            self._reconnecting = False
            if self._closed or self._sock is not None:
                sock.close()
            else:
                self._adopt(loop, sock)

        try:
            loop.call_soon_threadsafe(adopt)
        except RuntimeError:  # the loop closed meanwhile
            sock.close()
            self._reconnecting = False

    def _failed(self, exc: BrokerUnavailable) -> None:
        self._failed_at = time.monotonic()
        self.last_error = exc

    def _connect_blocking(self) -> socket.socket:
        """A connected socket, authenticated and on the URL's database (blocking, bounded)."""
        target = parse_redis_url(self.redis_url)
        params: dict[str, Any]
        if target.is_sentinel:
            # the Sentinels' current primary, asked afresh on every (re)connection: after a
            # failover the old one answers READONLY or not at all, and the socket is dropped
            try:
                host, port = discover_primary(target, self._connect_timeout)
            except redis.RedisError as exc:
                raise BrokerUnavailable(f"cannot find the Redis primary through Sentinel: {exc}") from exc
            params = {"host": host, "port": port, "db": target.db, "password": target.password,
                      "username": target.username}
        else:
            params = parse_url(self.redis_url)
        try:
            if params.get("connection_class") is UnixDomainSocketConnection:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(self._connect_timeout)
                    sock.connect(params["path"])
                except BaseException:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection(
                    (params.get("host", "localhost"), params.get("port", 6379)), timeout=self._connect_timeout
                )
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            raise BrokerUnavailable(f"cannot reach Redis for publishing: {exc}") from exc
        try:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SNDBUF)
            self._hello(sock, params)
        except BaseException:
            sock.close()
            raise
        return sock

    def _adopt(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        sock.setblocking(False)
        loop.add_reader(sock, self._readable)
        self._loop, self._sock = loop, sock
        self._inbuf.clear()
        self._outbuf.clear()

    def _hello(self, sock: socket.socket, params: dict[str, Any]) -> None:
        """AUTH and SELECT as the URL asks, answered before the socket is handed to the loop."""
        commands: list[bytes] = []
        if params.get("password"):
            user = params.get("username")
            commands.append(_command(b"AUTH", *([user.encode()] if user else []), params["password"].encode()))
        if params.get("db"):
            commands.append(_command(b"SELECT", str(params["db"]).encode()))
        if not commands:
            return
        try:
            sock.sendall(b"".join(commands))
            got = b""
            while got.count(b"\r\n") < len(commands):
                chunk = sock.recv(4096)
                if not chunk:
                    raise OSError("connection closed by Redis")
                got += chunk
        except OSError as exc:
            raise BrokerUnavailable(f"cannot reach Redis for publishing: {exc}") from exc
        for line in got.split(b"\r\n")[: len(commands)]:
            if not line.startswith(b"+"):
                raise BrokerUnavailable(
                    f"Redis refused the publishing connection: {line[1:].decode('utf-8', 'replace')}"
                )

    def push(self, values: Sequence[bytes], done: Done) -> None:
        """Send one LPUSH of ``values`` now; ``done(None)`` once Redis has them, else
        ``done(BrokerFull | BrokerUnavailable)`` (on the loop, later). Must be connected."""
        if self._sock is None or self._loop is None:
            done(BrokerUnavailable("not connected to Redis"))
            return
        self.pushes += 1
        data = lpush_command(self._queue, values)
        if self._replica_wait.due(time.monotonic()):
            # LPUSH then WAIT for a replica (core.redis_url.ReplicaWait): two replies, and
            # the push is done at the second unless the first was an error
            first, second, count = _pair(done, self._replica_wait)
            self._waiting.append((self._loop.time(), first, None))
            self._waiting.append((self._loop.time(), second, count))
            data += _WAIT
        else:
            self._waiting.append((self._loop.time(), done, None))
        if self._timer is None:
            self._timer = self._loop.call_later(self._reply_timeout, self._check_timeout)
        if self._outbuf:
            self._outbuf += data
            self.buffered += 1
            return
        try:
            sent = self._sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._drop(f"cannot send: {exc}")
            return
        if sent < len(data):
            self.buffered += 1
            self._outbuf += memoryview(data)[sent:]
            self._loop.add_writer(self._sock, self._writable)

    def _writable(self) -> None:
        if self._sock is None or self._loop is None:
            return
        try:
            sent = self._sock.send(self._outbuf)
        except BlockingIOError:
            return
        except OSError as exc:
            self._drop(f"cannot send: {exc}")
            return
        del self._outbuf[:sent]
        if not self._outbuf:
            self._loop.remove_writer(self._sock)

    def _readable(self) -> None:
        if self._sock is None:
            return
        try:
            data = self._sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._drop(f"connection lost: {exc}")
            return
        if not data:
            self._drop("connection closed by Redis")
            return
        self._inbuf += data
        while self._sock is not None:
            end = self._inbuf.find(b"\r\n")
            if end < 0:
                return
            line = bytes(self._inbuf[:end])
            del self._inbuf[: end + 2]
            kind = line[:1]
            if kind not in (b"+", b":", b"-"):
                self._drop(f"unexpected reply from Redis: {line[:80]!r}")
                return
            if not self._waiting:
                self._drop("a reply from Redis that nothing waited for")
                return
            _, done, count = self._waiting.popleft()
            if count is not None and kind == b":":
                count(int(line[1:]))
            _finish(done, None if kind != b"-" else _error(line[1:].decode("utf-8", "replace")))
            if line.startswith(b"-READONLY"):
                # a primary demoted by a failover: find the new one on the next connection
                self._drop("Redis is a read-only replica now (a failover)")
                return

    def _check_timeout(self) -> None:
        self._timer = None
        if not self._waiting or self._loop is None:
            return
        age = self._loop.time() - self._waiting[0][0]
        if age >= self._reply_timeout:
            self._drop(f"no reply from Redis within {self._reply_timeout:g}s")
        else:
            self._timer = self._loop.call_later(self._reply_timeout - age, self._check_timeout)

    def _drop(self, why: str, closing: bool = False) -> None:
        """Fail every push still waiting (whether Redis has them is unknown) and close the socket;
        the next ``ensure`` connects again. ``closing``: the client closed, which is what the
        waiting calls are told."""
        sock, self._sock = self._sock, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if sock is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(sock)
            self._loop.remove_writer(sock)
        if sock is not None:
            sock.close()
        self._outbuf.clear()
        self._inbuf.clear()
        waiting, self._waiting = self._waiting, collections.deque()
        error: BaseException = (
            ClientClosed("FleetClient closed while submitting") if closing else BrokerUnavailable(f"cannot publish to Redis: {why}")
        )
        self.last_error = error
        for _, done, _count in waiting:
            _finish(done, error)

    def close(self) -> None:
        """Fail what still waits and close for good; on the loop's thread, or after the loop closed."""
        self._closed = True
        if self._loop is not None and self._loop.is_closed():
            self._timer = None  # its loop is gone: nothing to cancel there
            sock, self._sock = self._sock, None
            if sock is not None:
                sock.close()
            return
        self._drop("the client closed", closing=True)
