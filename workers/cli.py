"""``cpfleet worker --redis URL [-c N] [--queues Q,...]``: exec a real prefork Celery worker.

Equivalent to ``celery -A cpfleet.workers.app worker -P prefork --without-gossip --without-mingle -E``
with the settings passed through the environment (``cpfleet.workers.config``), so both ways of starting
a node behave the same. The process is replaced (exec): signals go straight to Celery.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys

from cpfleet.core import defaults
from cpfleet.core.errors import ConfigError
from cpfleet.workers.config import Settings

# the variable each option sets (build_command), so a refused value names the option typed
OPTION_VARIABLES = {
    "concurrency": ("-c", "CPFLEET_CONCURRENCY"),
    "queues": ("--queues", "CPFLEET_QUEUES"),
    "runner": ("--runner", "CPFLEET_RUNNER"),
    "require_isolation": ("--require-isolation", "CPFLEET_REQUIRE_ISOLATION"),
}


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
    for attr, (_, variable) in OPTION_VARIABLES.items():
        if getattr(args, attr):
            env[variable] = getattr(args, attr)
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


def preflight(url: str, hostname: str) -> tuple[str | None, list[str]]:
    """One look at Redis before the node starts: ``(refusal, warnings)``.

    A password missing from the URL, or a wrong one, is refused here: Celery would retry it
    forever, one log line at a time, and a wrong URL never heals. Redis not answering yet is
    only a warning, since a node started beside its Redis (docker compose, a reboot) waits for
    it. A live node with the same name is a warning too: both judge correctly (each keeps its
    own in-flight list), but Flower and ``celery inspect`` show the two as one node."""
    import redis
    from celery.utils.nodenames import default_nodename, host_format

    from cpfleet.core import protocol
    from cpfleet.core.redis_url import NO_SUCH_DB, PLAIN_NOT_TLS, connection_hint, parse_redis_url
    from cpfleet.workers.resources import connect

    target = parse_redis_url(url)
    safe = target.safe
    warnings: list[str] = []
    try:
        client = connect(url, socket_timeout=5, socket_connect_timeout=5)
        try:
            beats = client.hgetall(protocol.nodes_key())
            now = float(client.time()[0])
        finally:
            client.close()
    except redis.AuthenticationError as exc:
        return f"cannot reach Redis at {safe}: {connection_hint(exc, target)}", warnings
    except redis.RedisError as exc:
        hint = connection_hint(exc, target)
        if hint.startswith(("this Redis requires a password", "Redis refused the user or password", NO_SUCH_DB)) or (
                PLAIN_NOT_TLS in hint):  # a scheme that does not match the server never heals by waiting
            return f"cannot reach Redis at {safe}: {hint}", warnings
        return None, [f"Redis at {safe} does not answer yet ({hint}); the worker waits for it (Ctrl-C stops)"]
    name = host_format(default_nodename(hostname))
    for field, value in beats.items():
        node, _, pid = field.decode(errors="replace").rpartition("/")
        alive_until = value.split(b" ", 1)[0]
        if node == name and pid != str(os.getpid()) and alive_until.replace(b".", b"").isdigit() and float(alive_until) > now:
            warnings.append(
                f"another live worker is named {name} (pid {pid}) on this Redis: both judge, but Flower and "
                "`celery inspect` show them as one node; give each its own -n"
            )
            break
    return None, warnings


def from_option(exc: ValueError, args: argparse.Namespace) -> str:
    """`` (from -c)`` when the refused variable's value came from an option on the command line:
    the message names the variable, which the user did not type."""
    if isinstance(exc, ConfigError):
        for attr, (option, variable) in OPTION_VARIABLES.items():
            if exc.variable == variable and getattr(args, attr):
                return f" (from {option})"
    return ""


def run(args: argparse.Namespace) -> int:
    try:
        argv, env = build_command(args)
    except ValueError as exc:
        print(f"cpfleet worker: {exc}{from_option(exc, args)}", file=sys.stderr)
        return 2
    if args.dry_run:  # as a shell runs it: the settings the options pass in the environment, then argv, quoted
        # only a setting's value is quoted: a shell takes a quoted 'NAME=value' for the command to run
        settings = [f"{name}={shlex.quote(value)}" for name, value in env.items() if os.environ.get(name) != value]
        print(" ".join([*settings, shlex.join(argv)]))
        return 0
    refusal, warnings = preflight(env.get(defaults.REDIS_URL_ENV) or defaults.DEFAULT_REDIS_URL, argv[argv.index("-n") + 1])
    for line in warnings:
        print(f"cpfleet worker: warning: {line}", file=sys.stderr)
    if refusal is not None:
        print(f"cpfleet worker: {refusal}", file=sys.stderr)
        return 3  # as every command that cannot reach Redis
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(argv[0], argv, env)
    return 0  # not reached
