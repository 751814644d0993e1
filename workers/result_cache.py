"""Result cache: GRPO groups repeat completions, so a job whose extracted code was already judged
on the same problem version with the same options gets the stored result without running.

Keyed by ``protocol.result_cache_key(problem_version, code_hash(program identity), shape, mode,
runner=kind)``: results of one sandbox runner kind are never served to a worker of another, nor
results of one toolchain to a worker with another (the identity carries the language's
``languages.fingerprint``: compiler or interpreter version, flags, default multiplier); the
version is a hash of the tests, limits and checker, so a changed problem never serves a
stale result. Infrastructure failures are never stored (the next run may well succeed), nor are
results whose verdict depended on machine load (``JobResult.deterministic`` False: a wall-clock
backstop, a memory limit judged near the limit, the job's time budget): a quieter machine could
judge the same code otherwise, and a cached copy would hand that to every duplicate.
"""

from __future__ import annotations

import logging
from typing import Any

import msgpack
import redis

from cpfleet.core import protocol
from cpfleet.core.results import JobResult

log = logging.getLogger("cpfleet.result_cache")

# Fields that belong to one execution, not to the (problem, code, options) outcome.
_PER_JOB_FIELDS = ("job_id", "worker", "cache_hit")


class ResultCache:
    def __init__(self, client: redis.Redis, ttl_s: int = 86400, runner: str = "forkserver") -> None:
        self._redis = client
        self.ttl_s = ttl_s
        self.runner = runner  # the worker's sandbox runner kind (CPFLEET_RUNNER): part of every key

    def key(self, problem_version: str, code: str | None, reward_shape: str, mode: str) -> str:
        return protocol.result_cache_key(
            problem_version, protocol.code_hash(code), reward_shape, mode, runner=self.runner
        )

    def get(self, key: str, job_id: str) -> JobResult | None:
        """The cached result re-addressed to ``job_id`` (cache_hit set), or None.

        A Redis error or a damaged entry is a miss, logged: the job then simply runs.
        """
        try:
            blob = self._redis.get(key)
        except redis.RedisError as exc:
            log.warning("result cache read failed (%s): running the job", exc)
            return None
        return self.decode(key, blob, job_id)

    def decode(self, key: str, blob: bytes | str | None, job_id: str) -> JobResult | None:
        """An entry read elsewhere (the admission's round trip, ``workers.withdrawal``) as
        ``get`` returns it: None for no entry or a damaged one."""
        if blob is None:
            return None
        try:
            d: dict[str, Any] = msgpack.unpackb(blob, raw=False)
            d["job_id"], d["cache_hit"] = job_id, True
            result = JobResult.from_dict(d)
        except Exception as exc:  # a damaged entry must never fail the job
            log.warning("dropping damaged result cache entry %s: %s", key, exc)
            return None
        return result

    def put(self, key: str, result: JobResult) -> bool:
        """Store a finished result; infrastructure failures and load-dependent verdicts are
        refused. Returns whether stored."""
        if result.infra_error or result.verdict.is_infra or not result.deterministic:
            return False
        d = result.to_dict()
        for name in _PER_JOB_FIELDS:
            d.pop(name, None)
        d["timings"]["queued_ms"] = 0.0  # this job's queue wait: a hit gets its own (JobStamp.cached)
        try:
            self._redis.set(key, msgpack.packb(d, use_bin_type=True), ex=self.ttl_s)
        except redis.RedisError as exc:
            log.warning("result cache write failed (%s)", exc)
            return False
        return True
