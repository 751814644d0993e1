"""Pushing encoded jobs onto the queue from an event loop, without blocking it and without delay.

``await fleet.evaluate(...)`` publishes a burst of calls in chunks while the burst is still being
made (see ``producer.batcher``). A chunk must reach Redis the moment it is complete: handing it
to a thread makes it wait for the GIL while the loop runs the rest of the burst, and awaiting a
coroutine client (redis.asyncio) defers the write to the next loop iteration, after every call
of the burst. So the push is a plain, synchronous ``transport.write`` of one LPUSH command on an
asyncio connection of its own: the bytes go to the kernel (its send buffer is raised so that a
whole chunk fits) during the call that completed the chunk, and the loop never blocks on the
network. Replies come back in order through ``data_received``, each finishing its push's
callback; a push that gets no reply within ``reply_timeout`` fails with every push after it.

This connection only ever sends AUTH, SELECT and LPUSH, so it reads only the three reply kinds
those have (``+OK``, ``:<n>``, ``-<error>``) and treats anything else as a broken connection.
It speaks plain TCP and Unix sockets; for ``rediss://`` (TLS) the batcher uses the client's
publishing thread instead.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import socket
from collections.abc import Callable, Sequence
from typing import Any

from redis.connection import UnixDomainSocketConnection, parse_url

from cpfleet.core.errors import BrokerFull, BrokerUnavailable

Done = Callable[[BaseException | None], None]

_SNDBUF = 4 << 20  # bytes: a 256-job chunk of ordinary completions is well under this


def supported(redis_url: str) -> bool:
    """Whether this URL's scheme is one the pusher speaks (TCP or Unix socket, no TLS)."""
    return redis_url.split("://", 1)[0].lower() in ("redis", "unix")


def lpush_command(key: bytes, values: Sequence[bytes]) -> bytes:
    """One RESP-encoded ``LPUSH key v1 v2 ...`` (values pushed in order: consumers pop from the right)."""
    out = [b"*%d\r\n$5\r\nLPUSH\r\n$%d\r\n%s\r\n" % (len(values) + 2, len(key), key)]
    for v in values:
        out.append(b"$%d\r\n" % len(v))
        out.append(v)
        out.append(b"\r\n")
    return b"".join(out)


def _command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


class _Protocol(asyncio.Protocol):
    def __init__(self, pusher: AsyncPusher) -> None:
        self._pusher = pusher
        self._buf = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SNDBUF)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while True:
            end = self._buf.find(b"\r\n")
            if end < 0:
                return
            line = bytes(self._buf[:end])
            del self._buf[: end + 2]
            kind = line[:1]
            if kind in (b"+", b":"):
                self._pusher._reply(self, None)
            elif kind == b"-":
                self._pusher._reply(self, line[1:].decode("utf-8", "replace"))
            else:
                self._pusher._lost(self, f"unexpected reply from Redis: {line[:80]!r}")
                return

    def connection_lost(self, exc: Exception | None) -> None:
        self._pusher._lost(self, f"connection lost: {exc}" if exc else "connection closed by Redis")


class AsyncPusher:
    """One asyncio connection that LPUSHes chunks onto one queue, in order; belongs to one loop."""

    def __init__(self, redis_url: str, queue: str, *, reply_timeout: float = 10.0) -> None:
        self.redis_url = redis_url
        self._queue = queue.encode()
        self._reply_timeout = reply_timeout
        self._transport: asyncio.Transport | None = None
        self._protocol: _Protocol | None = None  # the current connection's (a dropped one's replies are ignored)
        self._sock: socket.socket | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._waiting: collections.deque[tuple[float, Done]] = collections.deque()  # (sent at, callback)
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.pushes = 0
        self.buffered = 0  # pushes whose bytes did not all fit the kernel's send buffer at once

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    async def connect(self) -> None:
        """Open the connection (once, however many callers wait) and authenticate; idempotent."""
        if self.connected:
            return
        if self._closed:
            raise BrokerUnavailable("the client is closed")
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.get_running_loop().create_task(self._open())
        await asyncio.shield(self._connecting)

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        params: dict[str, Any] = parse_url(self.redis_url)
        unix = params.get("connection_class") is UnixDomainSocketConnection
        try:
            if unix:
                targets: list[tuple[int, Any]] = [(socket.AF_UNIX, params["path"])]
            else:
                infos = await loop.getaddrinfo(
                    params.get("host", "localhost"), params.get("port", 6379), type=socket.SOCK_STREAM
                )
                targets = [(family, addr) for family, _, _, _, addr in infos]
            sock = await asyncio.wait_for(_connect_first(loop, targets), 5.0)
        except (TimeoutError, OSError) as exc:
            raise BrokerUnavailable(f"cannot reach Redis for publishing: {exc}") from exc
        # The socket is this object's own (not only the transport's), so that it can be closed
        # even after its loop is: a loop that ended without closing it would otherwise leak it.
        self._sock = sock
        factory = functools.partial(_Protocol, self)
        try:
            if unix:
                transport, protocol = await loop.create_unix_connection(factory, sock=sock)
            else:
                transport, protocol = await loop.create_connection(factory, sock=sock)
        except BaseException:
            self._sock = None
            sock.close()
            raise
        assert isinstance(transport, asyncio.Transport)
        if self._closed:
            transport.abort()
            raise BrokerUnavailable("the client is closed")
        self._transport, self._protocol = transport, protocol
        hello: list[bytes] = []
        if params.get("password"):
            user = params.get("username")
            hello.append(_command(b"AUTH", *([user.encode()] if user else []), params["password"].encode()))
        if params.get("db"):
            hello.append(_command(b"SELECT", str(params["db"]).encode()))
        for cmd in hello:
            answered: asyncio.Future[BaseException | None] = loop.create_future()

            def answer(err: BaseException | None, f: asyncio.Future[BaseException | None] = answered) -> None:
                if not f.done():
                    f.set_result(err)

            self._send(cmd, answer)
            err = await answered
            if err is not None:
                self._drop(f"Redis refused the publishing connection: {err}")
                raise BrokerUnavailable(f"Redis refused the publishing connection: {err}")

    def push(self, values: Sequence[bytes], done: Done) -> None:
        """Write one LPUSH of ``values`` now; ``done(None)`` once Redis has them, else
        ``done(BrokerFull | BrokerUnavailable)``. The connection must be open (``connected``)."""
        if not self.connected:
            done(BrokerUnavailable("not connected to Redis"))
            return
        self.pushes += 1
        self._send(lpush_command(self._queue, values), done)
        assert self._transport is not None
        if self._transport.get_write_buffer_size():
            self.buffered += 1

    def _send(self, data: bytes, done: Done) -> None:
        assert self._transport is not None
        loop = asyncio.get_running_loop()
        self._waiting.append((loop.time(), done))
        self._transport.write(data)
        if self._timer is None:
            self._timer = loop.call_later(self._reply_timeout, self._check_timeout)

    def _reply(self, protocol: _Protocol, error: str | None) -> None:
        if protocol is not self._protocol:
            return
        if not self._waiting:
            self._drop("a reply from Redis that nothing waited for")
            return
        _, done = self._waiting.popleft()
        if error is None:
            done(None)
        elif error.startswith("OOM"):
            done(BrokerFull(f"Redis is full (maxmemory reached, noeviction): {error}"))
        else:
            done(BrokerUnavailable(f"Redis refused the push: {error}"))

    def _check_timeout(self) -> None:
        self._timer = None
        if not self._waiting:
            return
        loop = asyncio.get_running_loop()
        age = loop.time() - self._waiting[0][0]
        if age >= self._reply_timeout:
            self._drop(f"no reply from Redis within {self._reply_timeout:g}s")
        else:
            self._timer = loop.call_later(self._reply_timeout - age, self._check_timeout)

    def _lost(self, protocol: _Protocol, why: str) -> None:
        if protocol is self._protocol:
            self._drop(why)

    def _drop(self, why: str) -> None:
        """Fail every push still waiting (whether Redis has them is unknown) and forget the connection."""
        transport, self._transport, self._protocol = self._transport, None, None
        self._sock = None  # the transport closes it
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiting, self._waiting = self._waiting, collections.deque()
        for _, done in waiting:
            done(BrokerUnavailable(f"cannot publish to Redis: {why}"))
        if transport is not None:
            transport.abort()

    def close(self) -> None:
        """Fail what still waits and close; the pusher cannot be used again. On its loop's thread."""
        self._closed = True
        self._drop("the client closed")

    def dispose(self) -> None:
        """Close the socket of a pusher whose loop is closed (its transport can no longer do it)."""
        self._closed = True
        self._transport, self._protocol = None, None
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


async def _connect_first(loop: asyncio.AbstractEventLoop, targets: list[tuple[int, Any]]) -> socket.socket:
    """A connected non-blocking stream socket to the first of ``targets`` that accepts."""
    error: OSError = OSError("no address to connect to")
    for family, addr in targets:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, addr)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()
            raise
    raise error
