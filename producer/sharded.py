"""One client over several Redis instances, each with its own workers: the way past one broker.

One Redis carries a fleet up to a few thousand jobs/s (docs/scaling.md measures what a job
costs it). Past that, the fleet is split into shards: each shard is a Redis with the workers
that consume it, exactly the single-Redis fleet, and the trainer's ``ShardedFleetClient``
sends each job to one shard. The shard is chosen by problem id (CRC32 modulo the shard count),
so everything that is per problem stays in one place: the problem is stored on its shard only,
its result cache and fail-fast counts (``workers.failorder``) fill there, and its workers' LRU
holds it. An inline test set is routed by the digest of its tests, as its id is derived from
them.

Each shard is a plain ``FleetClient`` (own reply list, reader thread, claim, backpressure,
deadlines); a shard whose Redis is down fails its jobs as that client does (BrokerUnavailable at
submit, INTERNAL after the deadline), the others keep going. Adding a shard moves problems to
other shards: register them again and their caches refill there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import zlib
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from cpfleet.core import options
from cpfleet.core.errors import (
    BrokerFull,
    BrokerUnavailable,
    ClientClosed,
    FleetBusy,
    JobFormatError,
    OptionError,
)
from cpfleet.core.results import JobResult
from cpfleet.producer.client import FleetClient, Job, require_job_list
from cpfleet.producer.inline_registry import tests_digest


def shard_of(key: str, shards: int) -> int:
    """The shard of a problem id (or an inline test set's digest): stable across processes and
    Python versions (CRC32, not ``hash``)."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % shards


def _routing_key(job: Job) -> str:
    if isinstance(job, Mapping):
        pid = job.get("problem_id")
        if pid:
            return str(pid)
        if "tests" in job:
            return tests_digest(job["tests"])
        raise JobFormatError("a job needs a problem_id or inline tests")
    problem = job[0]
    return problem if isinstance(problem, str) else tests_digest(problem)


class ShardedFleetClient:
    """``FleetClient``'s submitting and waiting API over one client per Redis URL."""

    def __init__(self, redis_urls: Sequence[str], **client_options: Any) -> None:
        if not redis_urls:
            raise OptionError("ShardedFleetClient needs at least one Redis URL")
        if len(set(redis_urls)) != len(redis_urls):
            raise OptionError("each shard needs its own Redis: a URL is listed twice")
        self.shards: list[FleetClient] = []
        try:
            for url in redis_urls:
                self.shards.append(FleetClient(url, **client_options))
        except BaseException:
            self.close()
            raise

    def shard_for(self, problem_id: str) -> FleetClient:
        return self.shards[shard_of(problem_id, len(self.shards))]

    def register_problems(self, problems: Iterable[Any]) -> list[Any]:
        """Store each problem on its shard; returns each shard's registration stats."""
        from cpfleet.core.store import require_problem_iterable

        require_problem_iterable(problems)
        parts: list[list[Any]] = [[] for _ in self.shards]
        for p in problems:
            pid = p["id"] if isinstance(p, Mapping) else p.id
            parts[shard_of(str(pid), len(self.shards))].append(p)
        return [client.register_problems(part) for client, part in zip(self.shards, parts, strict=True)]

    def submit(self, problem_id: str, completion: str | bytes, **kwargs: Any) -> cf.Future[JobResult]:
        return self.shard_for(problem_id).submit(problem_id, completion, **kwargs)

    def submit_many(
        self,
        jobs: Iterable[Job],
        *,
        reward_shape: str | None = None,
        mode: str | None = None,
        timeout: float | None = None,
        wait_for_room: float | None = None,
    ) -> list[cf.Future[JobResult]]:
        """``FleetClient.submit_many`` over the shards: jobs split by shard, futures in input
        order, and the same promises. Every shard's part is validated (and its problems found
        in its store) before any part is published, so an invalid job or an unknown problem
        raises with nothing sent, its error naming its place in ``jobs``. A failure while
        publishing (BrokerUnavailable, BrokerFull, FleetBusy, ClientClosed) carries in
        ``submitted`` the futures of every job published before it, the other shards' included,
        in input order: they resolve as usual and someone can wait for them."""
        require_job_list(jobs)  # as one client's submit_many: a string is no list of jobs
        jobs = list(jobs)
        options.seconds("wait_for_room", wait_for_room, zero_ok=True)
        parts: list[list[int]] = [[] for _ in self.shards]
        for i, job in enumerate(jobs):
            try:
                key = _routing_key(job)
            except JobFormatError as exc:
                raise JobFormatError(f"job #{i}: {exc}") from None
            parts[shard_of(key, len(self.shards))].append(i)
        checked = [client.checked_specs([jobs[i] for i in idx], reward_shape, mode, timeout, idx) if idx else []
                   for client, idx in zip(self.shards, parts, strict=True)]
        out: list[cf.Future[JobResult] | None] = [None] * len(jobs)
        for client, idx, specs in zip(self.shards, parts, checked, strict=True):
            if not idx:
                continue
            try:
                futures = client.submitter.publish(specs, wait_for_room)
            except (BrokerUnavailable, BrokerFull, FleetBusy, ClientClosed) as exc:
                for i, fut in zip(idx, exc.submitted, strict=False):
                    out[i] = fut
                exc.submitted = [f for f in out if f is not None]
                raise
            for i, fut in zip(idx, futures, strict=True):
                out[i] = fut
        return [f for f in out if f is not None]

    gather = staticmethod(FleetClient.gather)

    def evaluate_many(self, jobs: Iterable[Job], **kwargs: Any) -> list[JobResult]:
        return self.gather(self.submit_many(jobs, **kwargs))

    async def evaluate(self, problem: str | Any, completion: str | bytes, **kwargs: Any) -> JobResult:
        """``FleetClient.evaluate`` (one await, micro-batched per loop) on the problem's shard."""
        key = problem if isinstance(problem, str) else tests_digest(problem)
        return await self.shards[shard_of(key, len(self.shards))].evaluate(problem, completion, **kwargs)

    async def agather(self, futures: Sequence[asyncio.Future[JobResult]], timeout: float | None = None) -> list[JobResult]:
        return await FleetClient.agather(futures, timeout)

    @property
    def in_flight(self) -> int:
        return sum(c.in_flight for c in self.shards)

    def close(self) -> None:
        for client in self.shards:
            client.close()

    def __enter__(self) -> ShardedFleetClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
