"""Whether anything will take a client's jobs: live worker heartbeats and a queue's consumers.

A job published where no worker runs, or to a queue no worker consumes (a typo'd name), waits
silently until its deadline and then ends INTERNAL. The client and ``cpfleet submit`` ask these
two questions up front and say so in one warning instead. Both read what the workers already
write (``protocol.nodes_key``, kombu's binding set): they cost one round trip each and no state.
"""

from __future__ import annotations

import redis


def live_workers(client: redis.Redis, nodes_key: str) -> int | None:
    """How many worker nodes have a live heartbeat in ``nodes_key`` (``protocol.nodes_key``) by
    Redis's own clock; None when Redis cannot tell. A fleet with heartbeats off
    (CPFLEET_NODE_TTL=0) shows none."""
    try:
        pipe = client.pipeline(transaction=False)
        pipe.hvals(nodes_key)
        pipe.time()
        beats, (now, _) = pipe.execute()
    except redis.RedisError:
        return None
    alive = 0
    for value in beats:
        until = value.split(b" ", 1)[0]
        try:
            alive += float(until) > now
        except ValueError:
            continue
    return alive


def ever_consumed(client: redis.Redis, binding_key: str) -> bool | None:
    """Whether a worker ever declared the queue whose kombu binding set is ``binding_key``
    (``protocol.kombu_binding_key``: kombu writes it at a consumer's start and never removes
    it); None when Redis cannot tell."""
    try:
        return bool(client.exists(binding_key))
    except redis.RedisError:
        return None


def unserved_reason(client: redis.Redis, nodes_key: str, binding_key: str, queue: str) -> str | None:
    """Why jobs sent to ``queue`` now would only wait (no live worker; no worker ever consumed
    the queue), or None when a worker is live and the queue has had a consumer, or Redis cannot
    tell."""
    if live_workers(client, nodes_key) == 0:
        return "no worker has sent a heartbeat to this Redis"
    if ever_consumed(client, binding_key) is False:
        # kombu writes the binding when a worker starts: after Redis lost its data, live
        # workers show no binding until they restart
        return (f"no worker has ever consumed queue {queue!r} on this Redis (or Redis lost its data since "
                f"the workers started)")
    return None
