"""``cpfleet load PROBLEMS --redis URL``: upload a problem file to the Redis problem store.

Idempotent: problems whose content version is already stored are not sent again, so running
it twice on the same file writes nothing the second time. Prints one line of counts
(written / unchanged / updated / skipped) and exits 2 on an unreadable file, 1 when Redis
cannot be reached.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from cpfleet.loading import DuplicateProblemError, LoadResult, ProblemFileError, load_problems

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("problems", metavar="PROBLEMS", help="problem file: JSONL, JSONL.gz, parquet or Arrow")
    parser.add_argument(
        "--redis",
        default=os.environ.get("CPFLEET_REDIS_URL", DEFAULT_REDIS_URL),
        help="Redis URL (default: $CPFLEET_REDIS_URL or %(default)s)",
    )
    add_loading_arguments(parser)


def add_loading_arguments(parser: argparse.ArgumentParser) -> None:
    """The loader's caps and duplicate rule, shared by ``load`` and ``validate``."""
    parser.add_argument("--max-problems", type=int, default=None, help="load at most N problems (0: none)")
    parser.add_argument("--max-public-tests", type=int, default=None, help="keep at most N public tests each")
    parser.add_argument("--max-hidden-tests", type=int, default=None, help="keep at most N hidden tests each")
    parser.add_argument(
        "--on-duplicate",
        choices=("error", "first", "last"),
        default="error",
        help="a repeated id: fail (default), keep the first, or keep the last record",
    )


LOAD_ERRORS = (ProblemFileError, DuplicateProblemError, ValueError)


def load_from_args(args: argparse.Namespace) -> LoadResult:
    """Load ``args.problems`` with the options of ``add_loading_arguments`` (raises LOAD_ERRORS)."""
    return load_problems(
        args.problems,
        max_problems=args.max_problems,
        max_public_tests=args.max_public_tests,
        max_hidden_tests=args.max_hidden_tests,
        on_duplicate=args.on_duplicate,
    )


def run(args: argparse.Namespace) -> int:
    import redis

    from cpfleet.core.store import register_problems

    t0 = time.perf_counter()
    try:
        loaded = load_from_args(args)
    except LOAD_ERRORS as e:
        print(f"cpfleet load: {e}", file=sys.stderr)
        return 2
    # Large problems take a while on a slow link: wait for Redis longer than redis-py's 5 s default.
    client = redis.Redis.from_url(args.redis, socket_timeout=120, socket_connect_timeout=10)
    try:
        stats = register_problems(client, loaded.problems)
    except redis.RedisError as e:
        print(f"cpfleet load: cannot write to Redis at {args.redis}: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
    s = loaded.stats
    print(
        f"written {stats.written}, unchanged {stats.unchanged}, updated {stats.updated}, "
        f"skipped {s.skipped} ({_skip_detail(s.malformed, s.no_public, s.no_hidden, s.duplicates)}); "
        f"{stats.bytes_written / 1e6:.1f} MB sent in {time.perf_counter() - t0:.2f} s"
    )
    return 0


def _skip_detail(malformed: int, no_public: int, no_hidden: int, duplicates: int) -> str:
    return f"malformed {malformed}, no public tests {no_public}, no hidden tests {no_hidden}, duplicate {duplicates}"
