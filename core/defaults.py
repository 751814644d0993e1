"""Defaults every part of the fleet agrees on, in one place: where Redis is, which ports the
local fleet serves, and the environment variable that overrides the Redis URL."""

from __future__ import annotations

import os

REDIS_URL_ENV = "CPFLEET_REDIS_URL"
DEFAULT_REDIS_PORT = 6379
DEFAULT_REDIS_URL = f"redis://127.0.0.1:{DEFAULT_REDIS_PORT}/0"
REDIS_URL_HELP = f"Redis URL (default: ${REDIS_URL_ENV}, else {DEFAULT_REDIS_URL})"
DEFAULT_FLOWER_PORT = 5555
DEFAULT_METRICS_PORT = 9808  # a worker's /metrics when `cpfleet up` or docker-compose starts it


def redis_url(explicit: str | None = None) -> str:
    """The Redis URL to use: the caller's, else ``$CPFLEET_REDIS_URL``, else the local default."""
    return explicit or os.environ.get(REDIS_URL_ENV) or DEFAULT_REDIS_URL
