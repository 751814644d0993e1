"""``cpfleet serve``: the command that runs the HTTP gateway (``cpfleet.gateway``) under uvicorn.

The gateway holds no sandbox and no state of its own: start as many replicas as you like
against one Redis. Stopping one (SIGTERM, Ctrl-C) stops accepting, answers the requests it
holds, then closes its fleet client; a replacement started first with the same ``--port``
(``SO_REUSEPORT``) takes new connections meanwhile, so a restart loses no answer.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import socket
import sys

from cpfleet.gateway.app import (
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
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="the fleet's Redis URL (default: %(default)s)")
    p.add_argument("--host", default="127.0.0.1", help="bind address; a non-loopback one needs --token (default: %(default)s)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port (default: %(default)s)")
    p.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN' on every endpoint but /healthz")
    p.add_argument("--queue", default=None, help="the fleet queue to submit to (default: cpfleet)")
    p.add_argument("--max-body-mb", type=float, default=DEFAULT_MAX_BODY_MB,
                   help="largest request body, 413 above (default: %(default)s)")
    p.add_argument("--max-backlog", type=int, default=DEFAULT_MAX_BACKLOG,
                   help="unanswered jobs this replica holds before it refuses requests (default: %(default)s)")
    p.add_argument("--wait", type=float, default=DEFAULT_WAIT_S,
                   help="seconds a request waits for its answer when its client states no deadline (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=DEFAULT_JOB_TIMEOUT_S,
                   help="seconds before a fleet job is an infrastructure error (default: %(default)s)")
    p.add_argument("--coalesce-ms", type=float, default=DEFAULT_COALESCE_MS,
                   help="window in which /run_code calls for one program share a run job (default: %(default)s)")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    if not args.token and not is_loopback(args.host):
        raise SystemExit(f"cpfleet serve: refusing to listen on {args.host} without --token (anyone could submit code)")
    if args.max_body_mb <= 0 or args.max_backlog < 1 or args.timeout <= 0 or args.wait <= 0 or args.coalesce_ms < 0:
        raise SystemExit("cpfleet serve: --max-body-mb, --max-backlog, --timeout, --wait must be positive, --coalesce-ms >= 0")
    return ServeConfig(
        redis_url=args.redis,
        token=args.token,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_backlog=args.max_backlog,
        wait_s=args.wait,
        timeout_s=args.timeout,
        queue=args.queue,
        coalesce_ms=args.coalesce_ms,
    )


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, with SO_REUSEPORT so a new replica can bind the port before the old
    one stops (a rolling restart with no moment where connections are refused)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise SystemExit(f"cpfleet serve: cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run(args: argparse.Namespace) -> int:
    import uvicorn

    config = config_from_args(args)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    sock = listen(args.host, args.port)
    print(f"cpfleet serve: http://{args.host}:{args.port} -> {config.redis_url}", file=sys.stderr)
    server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning", backlog=2048))
    server.run(sockets=[sock])
    return 0
