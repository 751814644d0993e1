"""``cpfleet load PROBLEMS --redis URL``: upload a problem file to the Redis problem store.

Idempotent: problems whose content version is already stored are not sent again, so running
it twice on the same file writes nothing the second time. Prints one line of counts
(written / unchanged / updated / skipped) and exits 2 on an unreadable file or when nothing
was loaded (every record skipped; ``--strict``: any skipped record), 1 when Redis cannot be
reached.
"""

from __future__ import annotations

import argparse
import sys
import time

from cpfleet.core import defaults
from cpfleet.core.errors import InputFileError, StoreFull
from cpfleet.datasets.loading import DuplicateProblemError, LoadResult, ProblemFileError, load_problems
from cpfleet.jobs.files import json_document_hint, looks_like


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("problems", metavar="PROBLEMS", help="problem file: JSONL, JSONL.gz, parquet or Arrow")
    parser.add_argument("--redis", metavar="URL", help=defaults.REDIS_URL_HELP)
    add_loading_arguments(parser)


STRICT_HELP = "any malformed or unjudgeable record is an error (default: skip it with a warning and count it)"
JOBS_STRICT_HELP = (
    "any malformed or unjudgeable problem record, or bad job line, is an error "
    "(default: skip it with a warning and count it)"
)


def add_loading_arguments(parser: argparse.ArgumentParser, strict_help: str = STRICT_HELP) -> None:
    """The loader's caps, duplicate rule and --strict, shared by ``judge``, ``load`` and ``validate``."""
    parser.add_argument("--max-problems", type=int, default=None, help="load at most N problems (0: none; default: no cap)")
    parser.add_argument("--max-public-tests", type=int, default=None, help="keep at most N public tests each (default: all)")
    parser.add_argument("--max-hidden-tests", type=int, default=None, help="keep at most N hidden tests each (default: all)")
    parser.add_argument(
        "--on-duplicate",
        choices=("error", "first", "last"),
        default="error",
        help="a repeated id: fail (default), keep the first, or keep the last record",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help=strict_help,
    )


LOAD_ERRORS = (ProblemFileError, DuplicateProblemError, InputFileError, ValueError)


def load_from_args(args: argparse.Namespace) -> LoadResult:
    """Load ``args.problems`` with the options of ``add_loading_arguments`` (raises LOAD_ERRORS);
    the warnings are collected in the stats, not logged (``load_for_command`` prints them)."""
    return load_problems(
        args.problems,
        max_problems=args.max_problems,
        max_public_tests=args.max_public_tests,
        max_hidden_tests=args.max_hidden_tests,
        on_duplicate=args.on_duplicate,
        strict=args.strict,
        log_warnings=False,
        mode=getattr(args, "mode", "full"),  # judge --mode public needs public tests; storing needs hidden
    )


def load_for_command(args: argparse.Namespace, command: str) -> LoadResult | None:
    """Load for a CLI command: None (after one line on stderr) when the file is unusable, a
    --strict record is bad, or nothing at all was loaded (a command that judges or stores
    nothing must not exit 0); otherwise the result, its summary printed on stderr."""
    try:
        loaded = load_from_args(args)
    except LOAD_ERRORS as e:
        print(f"cpfleet {command}: {e}", file=sys.stderr)
        return None
    for warning in loaded.stats.warnings:
        print(f"cpfleet {command}: warning: {warning}", file=sys.stderr)
    if loaded.stats.warnings_suppressed:
        print(f"cpfleet {command}: {loaded.stats.warnings_suppressed} more skipped records not shown", file=sys.stderr)
    if not loaded.problems and args.max_problems != 0:
        print(f"cpfleet {command}: no problem loaded from {args.problems}: {loaded.stats.summary()}", file=sys.stderr)
        if looks_like(args.problems) == "job":
            print(f"cpfleet {command}: {args.problems} holds jobs ({{problem_id, completion}}), not problems"
                  + (": the problem file comes first, cpfleet judge PROBLEMS JOBS" if command == "judge" else ""),
                  file=sys.stderr)
        elif (hint := json_document_hint(args.problems)) is not None:
            print(f"cpfleet {command}: {hint}", file=sys.stderr)
        elif loaded.stats.records and loaded.stats.malformed == loaded.stats.records:
            print(f"cpfleet {command}: a problem record needs at least id and hidden_tests (docs/problems.md); "
                  "a dataset in its own schema (code_contests, TACO, APPS, ...) is converted by cpfleet prepare",
                  file=sys.stderr)
        return None
    return loaded


def run(args: argparse.Namespace) -> int:
    import redis

    from cpfleet.core.redis_url import connection_hint, parse_redis_url
    from cpfleet.core.store import register_problems
    from cpfleet.producer.connection import connect, unreachable

    t0 = time.perf_counter()
    loaded = load_for_command(args, "load")
    if loaded is None:
        return 2
    # Large problems take a while on a slow link: wait for Redis longer than redis-py's 5 s default.
    args.redis = defaults.redis_url(args.redis)
    target = parse_redis_url(args.redis)
    reason = unreachable(target)  # a wrong port: named in seconds, not after the writes' long timeout
    if reason is not None:
        print(f"cpfleet load: {reason}", file=sys.stderr)
        return 3
    client = connect(target, socket_timeout=120, socket_connect_timeout=10)
    try:
        stats = register_problems(client, loaded.problems)
    except StoreFull as e:
        print(store_full_lines("cpfleet load", target.safe, e), file=sys.stderr)
        return 3
    except redis.RedisError as e:
        # the exit status of every command that cannot reach Redis (cpfleet.cli); never the password
        print(f"cpfleet load: cannot write to Redis at {target.safe}: {connection_hint(e, target)}", file=sys.stderr)
        return 3
    finally:
        client.close()
    s = loaded.stats
    print(
        f"written {stats.written}, unchanged {stats.unchanged}, updated {stats.updated}, "
        f"skipped {s.skipped} ({_skip_detail(s.malformed, s.no_public, s.no_hidden, s.duplicates)}); "
        f"{stats.bytes_written / 1e6:.1f} MB sent in {time.perf_counter() - t0:.2f} s"
    )
    return 0


SHOWN_NOT_STORED = 20  # ids named on the terminal; a rerun names what is still missing


def store_full_lines(command: str, where: str, exc: StoreFull) -> str:
    """What a load that met a full Redis stored and did not, and what to do (a ``StoreFull``)."""
    st, missing = exc.stats, exc.not_stored
    shown = ", ".join(missing[:SHOWN_NOT_STORED]) + (f", ... ({len(missing) - SHOWN_NOT_STORED} more)"
                                                    if len(missing) > SHOWN_NOT_STORED else "")
    return (
        f"{command}: Redis at {where} is full: it refused writes (OOM command not allowed: maxmemory reached "
        f"under the noeviction policy)\n"
        f"{command}: stored {st.total} problem(s) (written {st.written}, updated {st.updated}, unchanged "
        f"{st.unchanged}); NOT stored {len(missing)}: {shown}\n"
        f"{command}: each problem is stored whole or not at all (an update that was refused keeps the previous "
        f"version). Make room, then run the same command again (stored problems are skipped as unchanged): raise "
        f"Redis's maxmemory (CONFIG SET maxmemory ..., or its config file), or free memory (unconsumed jobs, "
        f"unread replies); keep noeviction: an evicting policy would silently drop queued jobs and stored problems"
    )


def _skip_detail(malformed: int, no_public: int, no_hidden: int, duplicates: int) -> str:
    return f"malformed {malformed}, no public tests {no_public}, no hidden tests {no_hidden}, duplicate {duplicates}"
