"""``cpfleet up``: a whole fleet on one machine -- Redis, one worker node, Flower -- in one
command. The CLI makes itself a child subreaper, so orphans that escaped the fleet's own
cleanup come back to it and are killed and reaped before it exits; SIGTERM and SIGHUP unwind
like Ctrl-C.

What it keeps: by default Redis runs with its append-only file in a data folder
(``--data-dir``, default ``$CPFLEET_DATA_DIR``, ``$XDG_DATA_HOME/cpfleet`` or ``~/.local/share/cpfleet``), so the queue and
the problem store survive a stop or a crash and the next ``cpfleet up`` on that folder carries
on; ``--ephemeral`` keeps everything in memory. One ``up`` at a time owns a data folder (a lock
file), since two Redis servers on one AOF would corrupt it.

What it prints: a short status block, then at most one progress line per second while
something changes (jobs/s, queue depth, verdict counts from the worker's metrics); the worker's
and Flower's own output (one JSON line per job, Celery's banner and warnings) goes to files in
the logs folder it names. On stop it says how many jobs were still queued and whether they
were kept. A logs folder it made for itself (``--ephemeral`` without ``--logs``) is removed
when it stops as asked (Ctrl-C, SIGTERM), and kept and named when it failed.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cpfleet.argtypes import folder, positive_int
from cpfleet.core.defaults import DEFAULT_FLOWER_PORT, DEFAULT_METRICS_PORT, DEFAULT_REDIS_PORT
from cpfleet.core.errors import FleetError
from cpfleet.fleet.local import LocalFleet
from cpfleet.fleet.processes import (
    Stopped,
    become_subreaper,
    http_get,
    kill_strays,
    port_arg,
    port_free,
    reap_orphans,
    stop_on_signals,
)

DATA_DIR_ENV = "CPFLEET_DATA_DIR"


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``up`` and ``demo``."""
    parser.add_argument("--redis", metavar="URL", help="use this Redis instead of starting one (default: start one on loopback)")
    parser.add_argument(
        "--workers", "-c", type=positive_int, metavar="N", help="pool processes of the worker (default: CPU count)"
    )
    parser.add_argument(
        "--flower-port", type=port_arg(-1), metavar="P",
        help=f"Flower's port (default {DEFAULT_FLOWER_PORT}, or a free one if taken; -1: no Flower)",
    )  # fmt: skip
    parser.add_argument(
        "--metrics-port", type=port_arg(-1), metavar="P",
        help=f"worker /metrics port (default {DEFAULT_METRICS_PORT}, or a free one if taken; -1: off)",
    )  # fmt: skip


def resolve_port(asked: int | None, default: int) -> int | None:
    """CLI port rule: -1 off, 0 any free port, unset the default (or a free one if it is taken)."""
    if asked is None:
        return default if port_free(default) else 0
    if asked < 0:
        return None
    if asked and not port_free(asked):
        raise FleetError(f"port {asked} is already in use: pick another, or leave the option out for a free one")
    return asked


def fleet_from_args(args: argparse.Namespace, log_dir: str | None, redis_dir: str | None = None) -> LocalFleet:
    return LocalFleet(
        args.redis,
        workers=args.workers,
        flower_port=resolve_port(args.flower_port, DEFAULT_FLOWER_PORT),
        metrics_port=resolve_port(args.metrics_port, DEFAULT_METRICS_PORT),
        log_dir=log_dir,
        redis_dir=redis_dir,
        redis_port=redis_port_from_args(args),
    )


def redis_port_from_args(args: argparse.Namespace) -> int | None:
    """``up`` serves Redis on 6379 when free (the default URL everywhere); ``demo`` on any port."""
    if args.redis or not hasattr(args, "redis_port"):
        return None
    return resolve_port(args.redis_port, DEFAULT_REDIS_PORT) or None


def default_data_dir() -> Path:
    """``$CPFLEET_DATA_DIR``, else ``$XDG_DATA_HOME/cpfleet``, else ``~/.local/share/cpfleet``."""
    explicit = os.environ.get(DATA_DIR_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "cpfleet"


def configure(parser: argparse.ArgumentParser) -> None:
    add_fleet_arguments(parser)
    parser.add_argument(
        "--redis-port", type=port_arg(0), metavar="P",
        help=f"port of the Redis started here (default {DEFAULT_REDIS_PORT}, or a free one if taken)",
    )  # fmt: skip
    parser.add_argument(
        "--data-dir", metavar="DIR", type=folder,
        help=f"keep Redis's append-only file (the queue and the problem store) in DIR/redis and the logs in "
        f"DIR/logs (default: ${DATA_DIR_ENV}, else $XDG_DATA_HOME/cpfleet, else ~/.local/share/cpfleet)",
    )  # fmt: skip
    parser.add_argument(
        "--ephemeral", action="store_true",
        help="keep Redis in memory only: the queue and the problems are gone when up stops "
        "(default: kept in the data folder)",
    )  # fmt: skip
    parser.add_argument(
        "--logs", metavar="DIR", type=folder,
        help="write worker.log (one JSON line per job) and flower.log to DIR "
        "(default: DATA_DIR/logs; with --ephemeral a new temporary folder, removed when up stops "
        "unless it failed)",
    )  # fmt: skip


@dataclass(frozen=True)
class Places:
    """Where this ``up`` keeps things: Redis's AOF folder (None: in memory) and the logs.
    ``temporary_logs``: ``log_dir`` was made by this ``up`` (``--ephemeral`` without ``--logs``)
    and is removed when it stops as asked; a folder the user named or the data folder's is kept."""

    redis_dir: str | None
    log_dir: str
    temporary_logs: bool = False


def places_from_args(args: argparse.Namespace) -> Places:
    data = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    keep_redis = not args.ephemeral and not args.redis  # an external Redis keeps its own data
    redis_dir = str(data / "redis") if keep_redis else None
    if args.logs:
        return Places(redis_dir, args.logs)
    if args.ephemeral:
        return Places(redis_dir, default_log_dir(), temporary_logs=True)
    return Places(redis_dir, str(data / "logs"))


@contextlib.contextmanager
def data_dir_lock(redis_dir: str | None) -> Iterator[None]:
    """Hold the data folder for this ``up`` (a second one on the same AOF would corrupt it)."""
    if redis_dir is None:
        yield
        return
    os.makedirs(redis_dir, exist_ok=True)
    fd = os.open(os.path.join(redis_dir, "cpfleet-up.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FleetError(
                f"another cpfleet up is using {redis_dir}; stop it, or pass --data-dir DIR or --ephemeral"
            ) from None
        yield
    finally:
        os.close(fd)


def run(args: argparse.Namespace) -> int:
    if args.redis:  # another's Redis: looked at first, as by every command that opens one (exit 3)
        from cpfleet.core.redis_url import parse_redis_url
        from cpfleet.producer.connection import unreachable

        reason = unreachable(parse_redis_url(args.redis))
        if reason is not None:
            print(f"cpfleet up: {reason}", file=sys.stderr)
            return 3
    become_subreaper()
    places = places_from_args(args)
    status = 0
    try:
        try:
            with data_dir_lock(places.redis_dir):
                fleet = fleet_from_args(args, places.log_dir, places.redis_dir)
                status = _run_fleet(fleet, places)
        except FleetError as e:
            print(f"cpfleet up: {e}", file=sys.stderr)
            status = status or 2
        except OSError as e:  # a data or logs folder that cannot be made or written: the user's to fix
            print(f"cpfleet up: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
            status = 2
        except KeyboardInterrupt:  # a Ctrl-C before the fleet's signal handling is in place: asked
            raise
        except BaseException:  # a bug: up failed, and its logs are what tells why
            status = status or 1
            raise
    finally:  # a Ctrl-C before the fleet's signal handling is in place unwinds through here too
        strays = kill_strays()
        if strays:
            print(f"cpfleet up: killed {strays} stray process(es)", file=sys.stderr)
        drop_temporary_logs(places, status)
        print("cpfleet up: stopped, nothing left running", file=sys.stderr)
    return status


def drop_temporary_logs(places: Places, status: int) -> None:
    """Remove the logs folder this ``up`` made for itself once nothing writes to it, when it
    stopped as asked (status 0: Ctrl-C and SIGTERM included); after a failure it is kept, since
    the error line points into it, and named."""
    if not places.temporary_logs:
        return
    if status == 0:
        shutil.rmtree(places.log_dir, ignore_errors=True)
    else:
        print(f"cpfleet up: logs kept in {places.log_dir}", file=sys.stderr)


def _run_fleet(fleet: LocalFleet, places: Places) -> int:
    status = 0
    with stop_on_signals() as stop:
        fleet.hold = stop.held  # start-up's lazy imports and polls: see LocalFleet
        try:
            with fleet:
                print_urls(fleet, places=places)
                progress = Progress(fleet)
                while fleet.worker is not None and fleet.worker.proc.poll() is None:
                    time.sleep(1.0)
                    # as subreaper, up inherits every orphan of the worker's tree (a replaced
                    # runner's processes, start-up self-tests): collected here, not left as
                    # zombies for as long as the fleet runs
                    reap_orphans(fleet.child_pids())
                    with stop.held():
                        line = progress.line()
                    if line:
                        print(line, flush=True)
                if fleet.worker is not None:
                    print(
                        f"cpfleet up: the worker exited ({fleet.worker.proc.returncode}); stopping "
                        f"(log: {fleet.worker.log_path})", file=sys.stderr,
                    )  # fmt: skip
                    status = 1
        except (KeyboardInterrupt, Stopped) as e:
            print(f"\ncpfleet up: stopping ({str(e) or 'SIGINT'})", file=sys.stderr)
        except FleetError as e:
            print(f"cpfleet up: {e}", file=sys.stderr)
            return 1
    print(f"cpfleet up: {left_in_queue_line(fleet.left_in_queue, places, fleet)}", file=sys.stderr)
    return status


def left_in_queue_line(left: int | None, places: Places, fleet: LocalFleet) -> str:
    """What became of the jobs still queued when the worker had stopped."""
    if left is None:
        return "could not count the jobs still queued (Redis did not answer)"
    if left == 0:
        return "no job was still queued"
    if fleet.redis_url is not None:  # an external Redis: left there, for whoever consumes it next
        return f"{left} jobs still queued in {fleet.redis_url}"
    if places.redis_dir is not None:
        return (f"{left} jobs still queued, kept with the problem store in {places.redis_dir}: "
                "they run when cpfleet up starts again on this data folder")
    return f"{left} jobs still queued, dropped with the in-memory Redis (--ephemeral)"


class Progress:
    """One line of progress when something changed since the last one: jobs/s, the queue
    depth, and verdict counts from the worker's Prometheus endpoint (when it is on)."""

    def __init__(self, fleet: LocalFleet) -> None:
        self.fleet = fleet
        self.last: tuple[int | None, int | None] = (None, None)
        self.last_done: int | None = None
        self.last_t = time.monotonic()

    def verdicts(self) -> dict[str, int] | None:
        if not self.fleet.metrics_url:
            return None
        try:
            status, body = http_get(self.fleet.metrics_url, timeout=1.0)
        except OSError:
            return None
        if status != 200:
            return None
        return verdict_counts(body.decode("utf-8", "replace"))

    def line(self) -> str | None:
        queue = self.fleet.queued()
        counts = self.verdicts()
        done = sum(counts.values()) if counts is not None else None
        now = time.monotonic()
        if (done, queue) == self.last:
            self.last_t = now
            return None
        rate = ""
        if done is not None and self.last_done is not None and now > self.last_t:
            rate = f"{(done - self.last_done) / (now - self.last_t):7.1f} jobs/s  "
        self.last, self.last_done, self.last_t = (done, queue), done, now
        parts = [time.strftime("%H:%M:%S"), rate + f"queue {queue if queue is not None else '?'}"]
        if counts is not None:
            parts.append(f"done {done}")
            parts.append(" ".join(f"{v} {n}" for v, n in sorted(counts.items(), key=lambda kv: -kv[1])) or "no verdicts yet")
        return "  ".join(parts)


def verdict_counts(metrics_text: str) -> dict[str, int]:
    """Finished jobs by verdict from the worker's ``cpfleet_jobs_total`` counter."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name != "cpfleet_jobs":
            continue
        for sample in family.samples:
            if sample.name == "cpfleet_jobs_total":
                verdict = sample.labels.get("verdict", "?")
                counts[verdict] = counts.get(verdict, 0) + int(sample.value)
    return {v: n for v, n in counts.items() if n}


def print_urls(fleet: LocalFleet, out: IO[str] | None = None, places: Places | None = None) -> None:
    out = out or sys.stdout
    print("cpfleet fleet is up", file=out)
    where = ""
    if fleet.redis:
        where = (f"  (started here, queue and problems kept in {places.redis_dir})"
                 if places is not None and places.redis_dir else "  (started here, in memory)")
    print(f"  redis     {fleet.redis_url}" + where, file=out)
    print(f"  worker    {fleet.node_name}  concurrency={fleet.concurrency or fleet.workers or '?'}", file=out)
    if fleet.flower_url:
        print(f"  flower    {fleet.flower_url}", file=out)
    if fleet.metrics_url:
        print(f"  metrics   {fleet.metrics_url}", file=out)
    if fleet.log_dir:
        removed = "; removed when up stops" if places is not None and places.temporary_logs else ""
        print(f"  logs      {fleet.log_dir}  (worker.log: one JSON line per job; flower.log{removed})", file=out)
    from cpfleet.sandbox.languages import availability_line

    print(f"  {availability_line()}", file=out)
    print(f"  try       cpfleet load PROBLEMS.jsonl --redis {fleet.redis_url}", file=out)
    print(f"            cpfleet submit JOBS.jsonl --redis {fleet.redis_url}", file=out)
    print("  stop      Ctrl-C (or SIGTERM)", file=out, flush=True)


def default_log_dir() -> str:
    """A new temporary logs folder (``up --ephemeral``, ``demo``), its owner to remove it."""
    return tempfile.mkdtemp(prefix="cpfleet-logs-")
