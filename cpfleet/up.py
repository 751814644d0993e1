"""``cpfleet up``: a whole fleet on one machine -- Redis, one worker node, Flower -- in one
command. The CLI makes itself a child subreaper, so orphans that escaped the fleet's own
cleanup come back to it and are killed and reaped before it exits; SIGTERM and SIGHUP unwind
like Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from typing import IO

from cpfleet.core.defaults import DEFAULT_FLOWER_PORT, DEFAULT_METRICS_PORT, DEFAULT_REDIS_PORT
from cpfleet.core.errors import FleetError
from cpfleet.local_fleet import LocalFleet
from cpfleet.processes import Stopped, become_subreaper, kill_strays, port_free, stop_on_signals


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``up`` and ``demo``."""
    parser.add_argument("--redis", metavar="URL", help="use this Redis instead of starting one (default: start one on loopback)")
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
    from cpfleet.sandbox.languages import availability_line

    print(f"  {availability_line()}", file=out)
    print(f"  try       cpfleet load PROBLEMS.jsonl --redis {fleet.redis_url}", file=out)
    print(f"            cpfleet submit JOBS.jsonl --redis {fleet.redis_url}", file=out)
    print("  stop      Ctrl-C (or SIGTERM)", file=out, flush=True)


def default_log_dir() -> str:
    return tempfile.mkdtemp(prefix="cpfleet-logs-")

