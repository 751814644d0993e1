"""A redis-py client for a checked Redis URL (``core.redis_url``), Sentinel included.

For ``sentinel://`` the client is bound to the Sentinels' current primary: each new connection
asks them where it is, and a connection that finds itself on a demoted primary (a READONLY
error) is dropped, so after a failover the next command lands on the new primary. The
publisher, the reply reader and the client's own connection all come from here.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.sentinel import Sentinel

from cpfleet.core.redis_url import RedisTarget, connection_hint


def connect(target: RedisTarget, **options: Any) -> redis.Redis:
    """A client for ``target`` with redis-py ``options`` (timeouts, retry, ...)."""
    if not target.is_sentinel:
        return redis.Redis.from_url(target.url, **options)
    sentinel_kwargs: dict[str, Any] = {
        k: options[k] for k in ("socket_timeout", "socket_connect_timeout", "socket_keepalive") if k in options
    }
    if target.sentinel_password is not None:
        sentinel_kwargs["password"] = target.sentinel_password
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)
    auth: dict[str, Any] = {}
    if target.password is not None:
        auth["password"] = target.password
    if target.username is not None:
        auth["username"] = target.username
    return sentinel.master_for(target.master, redis_class=redis.Redis, db=target.db, **auth, **options)


# How long a command's first look at Redis waits for an answer: a port where something else
# listens and stays silent (Flower's, a proxy's) is named after this, not after the longer
# timeout of the command's own work.
PROBE_TIMEOUT_S = 5.0


def unreachable(target: RedisTarget, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``target`` cannot be used right now, in one line naming it and what to do (None: it
    answers a PING). Every command that opens Redis probes with this short timeout before work
    that waits longer on Redis, so a port where something else listens and stays silent is
    named in seconds, in the same words by each."""
    try:
        client = connect(target, socket_timeout=timeout, socket_connect_timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
    except redis.RedisError as exc:
        return f"cannot reach Redis at {target.safe}: {connection_hint(exc, target)}"
    return None


def discover_primary(target: RedisTarget, timeout: float) -> tuple[str, int]:
    """Where the primary is now: asked of the Sentinels (raises redis's MasterNotFoundError
    when none of them knows), or the URL's own host and port."""
    if not target.is_sentinel:
        return target.host, target.port
    kwargs: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if target.sentinel_password is not None:
        kwargs["password"] = target.sentinel_password
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=kwargs)
    try:
        host, port = sentinel.discover_master(target.master)
    finally:
        for s in sentinel.sentinels:
            s.close()
    return str(host), int(port)
