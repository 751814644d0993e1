"""``cpfleet worker --redis URL [-c N] [--queues Q,...]``: exec a real prefork Celery worker.

Equivalent to ``celery -A cpfleet.workers.app worker -P prefork --without-gossip --without-mingle -E``
with the settings passed through the environment (``cpfleet.workers.config``), so both ways of starting
a node behave the same. The process is replaced (exec): signals go straight to Celery.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from cpfleet.core import defaults
from cpfleet.workers.config import Settings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis", metavar="URL", help=defaults.REDIS_URL_HELP)
    parser.add_argument("-c", "--concurrency", help="pool processes (default: auto = CPUs, respecting a CPU quota)")
    parser.add_argument("--queues", "-Q", help="comma-separated queues to consume (default: cpfleet)")
    parser.add_argument("--runner", choices=("forkserver", "subprocess"), help="sandbox runner (default: forkserver)")
    parser.add_argument(
        "--require-isolation", choices=("full", "partial", "any"),
        help="the sandbox isolation this node needs, else it exits (code 3) before taking a job "
        "(default: full; env CPFLEET_REQUIRE_ISOLATION)",
    )
    parser.add_argument("-n", "--hostname", help="node name (default: cpfleet@<host>.<pid>)")
    parser.add_argument("-l", "--loglevel", default="INFO", help="log level (default: INFO)")
    parser.add_argument("--no-events", action="store_true", help="do not send task events (Flower sees no tasks)")
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")


def build_command(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The celery argv and environment for ``args`` (validated through Settings)."""
    env = dict(os.environ)
    if args.redis:
        env[defaults.REDIS_URL_ENV] = args.redis
    if args.concurrency:
        env["CPFLEET_CONCURRENCY"] = args.concurrency
    if args.queues:
        env["CPFLEET_QUEUES"] = args.queues
    if args.runner:
        env["CPFLEET_RUNNER"] = args.runner
    if args.require_isolation:
        env["CPFLEET_REQUIRE_ISOLATION"] = args.require_isolation
    if args.no_events:
        env["CPFLEET_TASK_EVENTS"] = "0"
    settings = Settings.from_env(env)  # raises ValueError with the reason on a bad value
    hostname = args.hostname or f"cpfleet@{socket.gethostname()}.{os.getpid()}"
    argv = [
        sys.executable, "-m", "celery", "-A", "cpfleet.workers.app", "worker",
        "-P", "prefork",
        "-c", settings.concurrency,
        "-Q", ",".join(settings.queues),
        "-n", hostname,
        "-l", args.loglevel,
        "--without-gossip", "--without-mingle",
        "--prefetch-multiplier", "1",
        "--disable-prefetch",
    ]
    if settings.task_events:
        argv.append("-E")
    return argv, env


def run(args: argparse.Namespace) -> int:
    try:
        argv, env = build_command(args)
    except ValueError as exc:
        print(f"cpfleet worker: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(" ".join(argv))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(argv[0], argv, env)
    return 0  # not reached
