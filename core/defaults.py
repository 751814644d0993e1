"""Defaults every part of the fleet agrees on, in one place: where Redis is, which ports the
local fleet serves, and the environment variable that overrides the Redis URL."""

from __future__ import annotations

import os

from cpfleet.core.redis_url import RedisTarget, parse_redis_url

REDIS_URL_ENV = "CPFLEET_REDIS_URL"
DEFAULT_REDIS_PORT = 6379
DEFAULT_REDIS_URL = f"redis://127.0.0.1:{DEFAULT_REDIS_PORT}/0"
REDIS_URL_HELP = f"Redis URL (default: ${REDIS_URL_ENV}, else {DEFAULT_REDIS_URL})"
DEFAULT_FLOWER_PORT = 5555
DEFAULT_METRICS_PORT = 9808  # a worker's /metrics when `cpfleet up` or docker-compose starts it
# sandbox slots per host (sandbox/slots.py: a uid and cgroup each), one per pool process: the
# most pool processes one host can run
MAX_SLOTS = 1024


def redis_target(explicit: str | None = None) -> RedisTarget:
    """The Redis URL to use, checked (``core.redis_url``): the caller's, else
    ``$CPFLEET_REDIS_URL``, else the local default. A bad one raises RedisUrlError naming it."""
    if explicit is not None and explicit != "":
        return parse_redis_url(explicit)
    from_env = os.environ.get(REDIS_URL_ENV)
    if from_env:
        return parse_redis_url(from_env, source=f"${REDIS_URL_ENV}")
    return parse_redis_url(DEFAULT_REDIS_URL)


def redis_url(explicit: str | None = None) -> str:
    """``redis_target(explicit).url``: the checked URL as given."""
    return redis_target(explicit).url
