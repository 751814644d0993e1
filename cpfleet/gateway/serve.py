"""``cpfleet serve``: the command that runs the HTTP gateway (``cpfleet.gateway``) under uvicorn.

The gateway holds no sandbox and no state of its own: start as many replicas as you like
against one Redis. Stopping one (SIGTERM, Ctrl-C) stops accepting, answers the requests it
holds, then closes its fleet client; a replacement started first with the same ``--port``
(``SO_REUSEPORT``) takes new connections meanwhile, so a restart loses no answer.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import logging
import socket
import sys

from cpfleet.argtypes import nonnegative_float, positive_float, positive_int, queue_name
from cpfleet.core import defaults, protocol
from cpfleet.core.errors import RedisUrlError
from cpfleet.fleet.processes import port_arg
from cpfleet.gateway.app import (
    DEFAULT_BODY_IDLE_S,
    DEFAULT_COALESCE_MS,
    DEFAULT_JOB_TIMEOUT_S,
    DEFAULT_MAX_BACKLOG,
    DEFAULT_MAX_BODY_MB,
    DEFAULT_WAIT_S,
    ServeConfig,
    create_app,
)

DEFAULT_PORT = 8080


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--redis", metavar="URL", help="the fleet's " + defaults.REDIS_URL_HELP)
    p.add_argument("--host", default="127.0.0.1", help="bind address; a non-loopback one needs --token (default: %(default)s)")
    p.add_argument("--port", type=port_arg(), default=DEFAULT_PORT, help="TCP port (default: %(default)s)")
    p.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN' on every endpoint but /healthz (default: no token, loopback only)")
    p.add_argument("--queue", type=queue_name, default=None, help="the fleet queue to submit to (default: cpfleet)")
    p.add_argument("--reward-mode", choices=protocol.MODES, default=protocol.REWARD_ONLY_MODE,
                   help="mode of the routes that answer a reward only (/get_reward, /slime): hidden runs the "
                        "hidden tests first (a wrong completion runs no public test; their feedback is not returned); "
                        "full runs the public tests first; public rewards the public tests (default: %(default)s)")
    p.add_argument("--max-body-mb", type=positive_float, default=DEFAULT_MAX_BODY_MB,
                   help="largest request body, 413 above (default: %(default)s)")
    p.add_argument("--body-idle-s", type=positive_float, default=DEFAULT_BODY_IDLE_S,
                   help="seconds a request body may stall (no byte arriving) before its 408 (default: %(default)s)")
    p.add_argument("--max-backlog", type=positive_int, default=DEFAULT_MAX_BACKLOG,
                   help="unanswered jobs this replica holds; a request beyond them waits for room, refused only at its deadline (default: %(default)s)")
    p.add_argument("--wait", type=positive_float, default=DEFAULT_WAIT_S,
                   help="seconds a request waits for its answer when its client states no deadline (default: %(default)s)")
    p.add_argument("--timeout", type=positive_float, default=DEFAULT_JOB_TIMEOUT_S,
                   help="seconds before a fleet job is an infrastructure error (default: %(default)s)")
    p.add_argument("--coalesce-ms", type=nonnegative_float, default=DEFAULT_COALESCE_MS,
                   help="window in which /run_code calls for one program share a run job (default: %(default)s)")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    if args.token is not None and args.token != args.token.strip():
        # the gateway strips the token a client sends, so this one could never match: every
        # request would be a 401 (a token read from a file or variable with its newline)
        raise SystemExit("cpfleet serve: --token has blanks at its ends (a trailing newline?), which no "
                         "client's 'Authorization: Bearer' header carries: remove them")
    if not args.token and not is_loopback(args.host):
        raise SystemExit(f"cpfleet serve: refusing to listen on {args.host} without --token (anyone could submit code)")
    try:
        redis_url = defaults.redis_url(args.redis)
    except RedisUrlError as exc:
        raise SystemExit(f"cpfleet serve: {exc}") from None
    return ServeConfig(
        redis_url=redis_url,
        token=args.token,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        body_idle_s=args.body_idle_s,
        max_backlog=args.max_backlog,
        wait_s=args.wait,
        timeout_s=args.timeout,
        queue=args.queue,
        reward_mode=args.reward_mode,
        coalesce_ms=args.coalesce_ms,
    )


def redis_unreachable(redis_url: str) -> str | None:
    """Why the fleet's Redis cannot be used right now (None: it answers a PING)."""
    from cpfleet.core.redis_url import parse_redis_url
    from cpfleet.producer.connection import unreachable

    return unreachable(parse_redis_url(redis_url))


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, with SO_REUSEPORT so a new replica can bind the port before the old
    one stops (a rolling restart with no moment where connections are refused)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    shared = _port_listened_on(family, host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        print(f"cpfleet serve: cannot listen on {host}:{port}: {e.strerror}; {_bind_advice(e)}", file=sys.stderr)
        raise SystemExit(2) from None
    if shared:  # a rolling restart's replacement, or a second server started by mistake: say which port
        print(f"cpfleet serve: warning: another server already listens on {host}:{port}; the two share its new "
              "connections (SO_REUSEPORT, as in a rolling restart): stop the other one, or pick another --port "
              "if that was not meant", file=sys.stderr)
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _port_listened_on(family: socket.AddressFamily, host: str, port: int) -> bool:
    """Whether a socket already listens on host:port: a bind without SO_REUSEPORT fails there
    (SO_REUSEADDR lets it past a closed connection's TIME_WAIT, never past a listener), while the
    gateway's own bind with SO_REUSEPORT joins a listener of the same user without a word."""
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


def _bind_advice(error: OSError) -> str:
    """What to change after a failed bind: only a port in use is fixed by another --port; a host
    that does not resolve or is no address of this machine is fixed by another --host."""
    if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
        return "check --host (an address of this machine, or a name that resolves to one)"
    if error.errno == errno.EACCES:
        return "ports below 1024 need root: pick a --port above 1023"
    return "pick another --port"


# SO_ATTACH_REUSEPORT_CBPF (linux/socket.h) and one classic-BPF instruction, ``ret #1``: every new
# connection of the port's SO_REUSEPORT group goes to the group's socket 1
_SO_ATTACH_REUSEPORT_CBPF = 51
_BPF_RET_K = 0x06
DRAIN_S = 0.5


def steer_to_successor(sock: socket.socket) -> bool:
    """Send the port's new connections to the replica that bound it after this one.

    Closing a listening socket resets the connections still in its accept queue, which a client
    that does not retry connection errors (verl's sandbox_fusion) would score as failed tests.
    The group's sockets are numbered in the order they joined, so for the usual restart (the
    old replica 0, its replacement 1) this program moves every new connection to the
    replacement while the old one empties its queue. With no second socket the kernel ignores
    the answer and keeps hashing. False when the kernel refuses the program.
    """
    import ctypes

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter))]

    program = (SockFilter * 1)(SockFilter(_BPF_RET_K, 0, 0, 1))
    fprog = SockFprog(1, ctypes.cast(program, ctypes.POINTER(SockFilter)))
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_REUSEPORT_CBPF, bytes(fprog))
    except OSError:
        return False
    return True


def run(args: argparse.Namespace) -> int:
    import asyncio

    import uvicorn

    config = config_from_args(args)
    reason = redis_unreachable(config.redis_url)
    if reason is not None:  # a wrong port or host: one line now, not a startup traceback from uvicorn
        print(f"cpfleet serve: {reason}", file=sys.stderr)
        return 3
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    sock = listen(args.host, args.port)
    print(f"cpfleet serve: http://{args.host}:{args.port} -> {config.redis_url}", file=sys.stderr)

    class GatewayServer(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # hand new connections to a successor on the same port, empty the accept queue,
            # then stop accepting; the requests held are answered before the fleet client closes
            if steer_to_successor(sock):
                await asyncio.sleep(DRAIN_S)
            await super().shutdown(sockets)

    server = GatewayServer(uvicorn.Config(create_app(config), log_level="warning", backlog=2048))
    server.run(sockets=[sock])
    return 0
