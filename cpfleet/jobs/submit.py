"""``cpfleet submit JOBS [--redis URL]``: ``cpfleet judge``'s JSONL in and out, through the fleet.

JOBS is JSONL of ``{"problem_id", "completion", "job_id"?}`` (``-`` for stdin; job_id defaults to
the job's 0-based index, as in ``cpfleet judge``). One JSON object per job goes to stdout in
input order, with the fields ``cpfleet judge`` prints (``JobResult.to_dict()``); progress on
stderr. ``--problems FILE`` uploads a problem file to the store first. Exit status: 0 when every
job got a result (infrastructure errors included: they are in the output), 2 for unusable input,
3 when Redis cannot be reached or no job got a reward (every one an infrastructure error or a
problem the store does not hold).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import sys
from typing import Any

from cpfleet.argtypes import positive_float, positive_int, queue_name
from cpfleet.core import defaults, protocol
from cpfleet.jobs.files import (  # shared with `cpfleet judge`
    InputFileError,
    Tally,
    print_no_jobs,
    print_skipped,
    read_jobs,
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("jobs", metavar="JOBS", help="jobs JSONL {problem_id, completion, job_id?}; - for stdin")
    parser.add_argument("--redis", metavar="URL", help="the fleet's " + defaults.REDIS_URL_HELP)
    parser.add_argument("--reward-shape", "--reward", dest="reward_shape", choices=protocol.REWARD_SHAPES, default="all_or_nothing", help="all_or_nothing: 1.0 only if every rewarded test passes; fraction: the share that pass")
    parser.add_argument("--mode", choices=protocol.MODES, default="full", help="full: public tests for the feedback, hidden tests give the reward; hidden: the "
                        "hidden tests first, the same reward, no feedback; public: public tests only (default: full)")
    parser.add_argument("--problems", metavar="FILE", help="upload this problem file (JSONL/.gz/parquet) to the store first (default: upload nothing)")
    parser.add_argument("--queue", type=queue_name, default=protocol.DEFAULT_QUEUE, help="queue to publish to (default: cpfleet)")
    parser.add_argument("--timeout", type=positive_float, default=900.0, help="seconds per job before an INTERNAL result (default 900)")
    parser.add_argument("--max-in-flight", type=positive_int, default=20_000, help="jobs pending at once (default 20000)")
    parser.add_argument("--no-cache", action="store_true", help="bypass the fleet's result cache")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument(
        "--strict", action="store_true",
        help="a bad job line, or a bad record of --problems, is an error (default: skip it with a warning and count it)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from cpfleet.core.redis_url import parse_redis_url
    from cpfleet.producer.client import BrokerFull, BrokerUnavailable, FleetClient
    from cpfleet.producer.connection import connect, unreachable
    from cpfleet.producer.presence import ever_consumed, live_workers

    try:
        read = read_jobs(args.jobs, strict=args.strict)
    except InputFileError as exc:
        print(f"cpfleet submit: {exc}", file=sys.stderr)
        return 2
    print_skipped(read, "submit")
    jobs = read.jobs
    if not jobs:
        print_no_jobs(read, args.jobs, "submit", "upload them with cpfleet load")
        return 2
    url = defaults.redis_url(args.redis)
    reason = unreachable(parse_redis_url(url))  # a silent port: named after the probe's bound, not the client's
    if reason is not None:
        print(f"cpfleet submit: {reason}", file=sys.stderr)
        return 3
    try:
        client = FleetClient(
            url,
            queue=args.queue,
            timeout=args.timeout,
            reward_shape=args.reward_shape,
            mode=args.mode,
            max_in_flight=args.max_in_flight,
            use_cache=not args.no_cache,
            warn_unserved=False,  # said below in this command's words
        )
    except BrokerFull as exc:
        return _full(exc)
    except BrokerUnavailable as exc:
        print(f"cpfleet submit: {exc}", file=sys.stderr)
        return 3
    probe = connect(parse_redis_url(url), socket_timeout=5, socket_connect_timeout=5)
    try:
        alive = live_workers(probe, protocol.nodes_key())
        consumed = ever_consumed(probe, protocol.kombu_binding_key(args.queue))
    finally:
        probe.close()
    if alive == 0:  # else a silent progress bar at 0 until the deadline
        print(f"cpfleet submit: warning: no worker has sent a heartbeat to this Redis: the jobs wait in queue "
              f"{args.queue!r} until one starts (cpfleet worker --redis URL, or cpfleet up), or for "
              f"{args.timeout:g} s, then end INTERNAL", file=sys.stderr)
    elif consumed is False:  # a typo'd --queue: the same silent wait
        print(f"cpfleet submit: warning: no worker has ever consumed queue {args.queue!r} on this Redis: the jobs "
              f"wait there until one does (cpfleet worker --queues {args.queue}), or for {args.timeout:g} s, then "
              f"end INTERNAL (workers record their queues when they start: a Redis that lost its data since "
              f"shows this too)", file=sys.stderr)
    with client:
        skipped_ids: dict[str, str] = {}
        if args.problems:
            rc = _register(client, args.problems, args.strict, skipped_ids)
            if rc:
                return rc
        try:
            return _submit(client, jobs, progress=not args.no_progress, skipped_ids=skipped_ids)
        except BrokerFull as exc:  # the batches sent before it are withdrawn as the client closes
            return _full(exc)
        except BrokerUnavailable as exc:
            print(f"cpfleet submit: {exc}", file=sys.stderr)
            return 3


def _full(exc: Exception) -> int:
    """A full Redis (maxmemory under noeviction) met opening the client or submitting: what it
    means for the jobs and what to do, exit 3."""
    print(f"cpfleet submit: {exc}", file=sys.stderr)
    print("cpfleet submit: no job was judged (any sent before the refusal are withdrawn); make room (raise Redis's "
          "maxmemory, or let workers drain the queue and readers their replies; keep noeviction), then run the same "
          "command again", file=sys.stderr)
    return 3


def _register(client: Any, path: str, strict: bool, skipped_ids: dict[str, str]) -> int:
    from cpfleet.core.errors import StoreFull
    from cpfleet.datasets.loading import ProblemFileError, load_problems

    try:
        loaded = load_problems(path, strict=strict, log_warnings=False)
    except (ProblemFileError, ValueError) as exc:
        print(f"cpfleet submit: {exc}", file=sys.stderr)
        return 2
    for warning in loaded.stats.warnings:
        print(f"cpfleet submit: warning: {warning}", file=sys.stderr)
    skipped_ids.update(loaded.stats.skipped_ids)
    try:
        stats = client.register_problems(loaded.problems)
    except StoreFull as exc:  # no job is sent: each would meet the same full Redis, or a missing problem
        from cpfleet.core.redis_url import mask_password
        from cpfleet.datasets.load import store_full_lines

        print(store_full_lines("cpfleet submit", mask_password(client.redis_url), exc), file=sys.stderr)
        return 3
    print(
        f"problems: {stats.written} written, {stats.updated} updated, {stats.unchanged} unchanged", file=sys.stderr
    )
    return 0


def _submit(client: Any, jobs: list[dict[str, Any]], progress: bool, skipped_ids: dict[str, str]) -> int:
    from tqdm import tqdm

    from cpfleet.core.errors import BrokerUnavailable, UnknownProblemError
    from cpfleet.core.results import JobResult
    from cpfleet.core.verdict import Verdict

    # The result carries the job_id given at submit (ids need not be unique: one future per job).
    user_ids = [str(j["job_id"]) for j in jobs]
    # The client refuses a batch naming problems the store does not have (UnknownProblemError,
    # nothing sent); each such job still gets its explicit UNKNOWN_PROBLEM line, the others run.
    unknown: set[str] = set()
    while True:
        try:
            sent = client.submit_many(
                [{"problem_id": j["problem_id"], "completion": j["completion"], "job_id": u, "language": j.get("language")}
                 for j, u in zip(jobs, user_ids, strict=True) if j["problem_id"] not in unknown]
            )
            break
        except UnknownProblemError as exc:  # names at least one id not yet set aside: this ends
            unknown.update(exc.problem_ids)
        except (ValueError, TypeError) as exc:  # a job the fleet cannot take: nothing was submitted
            print(f"cpfleet submit: {exc}", file=sys.stderr)
            return 2
    published = iter(sent)
    futures: list[cf.Future[Any]] = []
    for j, u in zip(jobs, user_ids, strict=True):
        if j["problem_id"] in unknown:
            refused: cf.Future[Any] = cf.Future()
            refused.set_result(JobResult.infra(u, j["problem_id"], f"unknown problem id {j['problem_id']!r}",
                                               verdict=Verdict.UNKNOWN_PROBLEM))
            futures.append(refused)
        else:
            futures.append(next(published))
    tally = Tally()
    position = {f: i for i, f in enumerate(futures)}
    done: dict[int, Any] = {}
    next_out = 0

    def write(r: Any) -> None:
        if r.verdict == Verdict.UNKNOWN_PROBLEM and r.problem_id in skipped_ids:
            r.infra_message = skipped_ids[r.problem_id]  # why it is not in the store
        sys.stdout.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")

    try:
        with tqdm(total=len(futures), disable=not progress, file=sys.stderr, unit="job", dynamic_ncols=True) as bar:
            for future in cf.as_completed(futures):
                bar.update(1)
                r = future.result()
                # counted when received, before it is printed: an interrupt in the middle of a
                # write never leaves a printed result out of the summary
                tally.add(r)
                done[position[future]] = r
                while next_out in done:  # stream out in input order as soon as possible
                    write(done.pop(next_out))
                    next_out += 1
                sys.stdout.flush()  # results stream out as they come, as judge's do
    except BrokerUnavailable:
        # Redis gone past the client's grace fails the pending jobs; the results that came back
        # before were judged: each is written (in its job's order, held ones too), never dropped
        # with the run, and the one line on Redis follows the count (exit 3)
        for i, future in enumerate(futures):
            if i >= next_out and i not in done and future.done() and not future.cancelled() and future.exception() is None:
                tally.add(future.result())
                done[i] = future.result()
        for i in sorted(done):
            write(done.pop(i))
        sys.stdout.flush()
        print(f"cpfleet submit: stopped: {tally.done} of {len(jobs)} judged ({tally.summary()})", file=sys.stderr)
        raise
    except KeyboardInterrupt:
        # results that came back ahead of an earlier job still running were held for input
        # order; they are judged and counted in the summary, so they are written now, in the
        # order of their jobs (each line carries its job_id), never dropped
        for i in sorted(done):
            write(done.pop(i))
        sys.stdout.flush()
        client.cancel_many(futures)  # the fleet drops what it has not started
        print(f"\ncpfleet submit: interrupted: {tally.done} of {len(jobs)} judged ({tally.summary()}); "
              "the rest were withdrawn", file=sys.stderr)
        return 130
    sys.stdout.flush()
    print(f"submitted {len(jobs)} jobs: {tally.summary()}", file=sys.stderr)
    for line in tally.infra_lines("submit"):
        print(line, file=sys.stderr)
    never_loaded = sorted(unknown - set(skipped_ids))  # a skipped problem's jobs already say why
    if never_loaded:  # the first-run mistake: jobs submitted to a store nobody loaded their problems into
        shown = ", ".join(map(repr, never_loaded[:3])) + (f" and {len(never_loaded) - 3} more" if len(never_loaded) > 3 else "")
        print(f"cpfleet submit: this Redis's problem store holds no problem {shown}: upload the problem file "
              "first (cpfleet load PROBLEMS --redis URL), or pass it here as --problems PROBLEMS", file=sys.stderr)
    return 3 if tally.judged_none else 0
