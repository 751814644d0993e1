"""kombu's Redis transport with a reliable pop: a message is never in no key at all.

Stock kombu takes a message with BRPOP and only then records it as unacked (``unacked`` hash,
``unacked_index`` sorted set). Between the two, and for as long as the BRPOP reply sits unread
in the socket of a node that was SIGKILLed or cut off, the message is in no key: neither
kombu's visibility-timeout restore nor the liveness sweep can see it, and the job stays
unanswered until the client's deadline turns it INTERNAL.

Here, on a node that runs the liveness heartbeat (``cpfleet.workers.liveness``), the pop is
``BLMOVE queue -> cpfleet:inflight:<node>`` (``protocol.inflight_key``): Redis moves the message,
byte for byte, into a list owned by the node in the same step that takes it off the queue, so
at every instant each job is either queued or listed in-flight under a node that heartbeats.

* ack / reject: ``LREM`` of those bytes from the node's list (1 command). Nothing is written at
  reserve: the move was the reservation. kombu's unacked hash and index are not used, which
  takes 3 commands off each job (reserve ZADD + HSET, and one of the ack's two).
* reject with requeue, and the restore of unacked messages when a channel closes (warm
  shutdown, a lost connection): a Lua script that pushes the message back to its queue only
  if it removed it from the list (``REQUEUE``), so a message is never requeued twice.
* redelivery (replaces the visibility timeout): the liveness sweep moves every message in a lost
  node's list back to its queue; a live node gives back a message of its own list that it has
  not held (Celery's worker state) for ``grace`` seconds. A message is never redelivered while
  its node beats and holds it, however long it runs.

Limits, and where stock behaviour stays:

* priorities: the lean channel consumes each queue's base key only (``priority_steps = [0]``):
  every message, of any priority, is published to and taken from that key in FIFO order.
  cpfleet's producers publish priority 0 only.
* one queue: one BLMOVE blocks on it. Several queues (``CPFLEET_QUEUES=a,b``): a Lua script
  moves the first message found on any of them (``MOVE_FIRST``), and when all are empty the
  channel blocks on one queue for at most ``MULTI_QUEUE_BLOCK_S``, the next one in turn after
  that, so a job on another queue waits that long at most on an idle node.
* no node id (liveness off, ``CPFLEET_NODE_TTL=0``; a process that only publishes) or a Redis
  older than 6.2 (no BLMOVE): BRPOP and kombu's unacked hash as before, with its reserve and
  ack each sent as one plain pipeline (ZADD then HSET; HDEL then ZREM) instead of
  MULTI/EXEC. That path keeps the window this module closes.
* ``CPFLEET_BROKER_LEAN=0``, a key prefix or a Sentinel/TLS URL select stock kombu
  (``workers.config``), window included.
"""

from __future__ import annotations

import logging
from time import monotonic, time
from typing import Any

import redis
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps, loads

from cpfleet.core import protocol

log = logging.getLogger("cpfleet.worker")

# Redis full (maxmemory, noeviction) refuses the pop's move into the in-flight list (a write):
# the node then waits this long on a pop that writes nothing before it tries again
FULL_PAUSE_S = 1

# KEYS[1] in-flight list, KEYS[2] queue. ARGV[1] the message's bytes, ARGV[2] 'front' (taken
# next: RPUSH, consumers pop from the right) or 'back' (LPUSH). Returns 1 if it was requeued,
# 0 if the list no longer held it (acked, or already given back).
REQUEUE = """
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
if ARGV[2] == 'front' then redis.call('RPUSH', KEYS[2], ARGV[1]) else redis.call('LPUSH', KEYS[2], ARGV[1]) end
return 1
"""

# KEYS[1..n-1] queues in the order to try, KEYS[n] in-flight list. Returns {queue, message} or nil.
MOVE_FIRST = """
local dest = KEYS[#KEYS]
for i = 1, #KEYS - 1 do
  local v = redis.call('LMOVE', KEYS[i], dest, 'RIGHT', 'LEFT')
  if v then return {KEYS[i], v} end
end
return false
"""

# KEYS[1] nodes hash. ARGV[1] node, ARGV[2] ttl s. Lists the node (no held tags yet) unless it
# is listed and alive: a channel registers its node before its first pop into its in-flight
# list, so that list is swept even if the node dies before its liveness thread beats.
REGISTER = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local until_ = tonumber(string.match(cur, '^%S+'))
  if until_ and until_ >= now then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.3f', now + tonumber(ARGV[2])))
return 1
"""

# Seconds an idle multi-queue channel blocks on one queue before it looks at all of them again.
MULTI_QUEUE_BLOCK_S = 0.25

_node: str | None = None
_node_ttl: float = 10.0


def consume_as(node: str | None, ttl: float = 10.0) -> None:
    """Name the node whose in-flight list this process's channels pop into (the liveness
    heartbeat's own name, ``liveness.node_name``); None: the BRPOP path. Set by the worker's
    main process before its consumer starts."""
    global _node, _node_ttl
    _node, _node_ttl = node, ttl


def current_node() -> str | None:
    return _node


def message_tag(raw: bytes) -> str | None:
    """The kombu delivery tag of a queued message (its ``properties.delivery_tag``), or None when
    the bytes are not a kombu message."""
    try:
        payload = loads(raw)
        tag = payload["properties"]["delivery_tag"]
    except (ValueError, TypeError, KeyError):
        return None
    return tag if isinstance(tag, str) and tag else None


def message_queue(raw: bytes) -> str | None:
    """The queue a message taken off a lean channel goes back to: its
    ``properties.delivery_info.routing_key`` (cpfleet's queues are routed by their own name)."""
    try:
        queue = loads(raw)["properties"]["delivery_info"]["routing_key"]
    except (ValueError, TypeError, KeyError):
        return None
    return queue if isinstance(queue, str) and queue else None


class LeanQoS(kombu_redis.QoS):
    def append(self, message: Any, delivery_tag: Any) -> None:
        if delivery_tag not in self.channel._inflight:
            # the BRPOP path: kombu's unacked hash and index, as one plain pipeline
            delivery = message.delivery_info
            with self.channel.conn_or_acquire() as client:
                pipe = client.pipeline(transaction=False)
                pipe.zadd(self.unacked_index_key, {delivery_tag: time()})
                pipe.hset(self.unacked_key, delivery_tag,
                          dumps([message._raw, delivery["exchange"], delivery["routing_key"]]))
                pipe.execute()
        # the in-memory bookkeeping of kombu's virtual QoS (skipping the redis QoS's own append)
        kombu_redis.virtual.QoS.append(self, message, delivery_tag)

    def _forget(self, delivery_tag: Any) -> None:
        entry = self.channel._inflight.pop(delivery_tag, None)
        with self.channel.conn_or_acquire() as client:
            if entry is not None:
                client.lrem(self.channel.inflight_key, 1, entry[0])
                return
            pipe = client.pipeline(transaction=False)
            pipe.hdel(self.unacked_key, delivery_tag)
            pipe.zrem(self.unacked_index_key, delivery_tag)
            pipe.execute()

    def _requeue(self, delivery_tag: Any, front: bool, client: Any = None) -> None:
        entry = self.channel._inflight.pop(delivery_tag, None)
        if entry is None:
            self.restore_by_tag(delivery_tag, client=client, leftmost=not front)
            return
        raw, queue = entry
        with self.channel.conn_or_acquire(client) as c:
            c.eval(REQUEUE, 2, self.channel.inflight_key, queue, raw, "front" if front else "back")

    def ack(self, delivery_tag: Any) -> None:
        self._forget(delivery_tag)
        kombu_redis.virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        if requeue:
            self._requeue(delivery_tag, front=False)
        else:
            self._forget(delivery_tag)
        kombu_redis.virtual.QoS.ack(self, delivery_tag)

    def restore_unacked(self, client: Any = None) -> None:
        """A closing channel gives back what it holds, in-flight messages through ``REQUEUE``.
        If Redis cannot be reached they stay in the node's list, and the liveness sweep or
        the node's own check gives them back."""
        self._flush()
        with self.channel.conn_or_acquire(client) as c:
            for tag in list(self._delivered):
                self._requeue(tag, front=True, client=c)
        self._delivered.clear()


class Channel(kombu_redis.Channel):
    QoS = LeanQoS
    priority_steps = [0]  # kombu reads it per channel: the base key only (module docstring)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # delivery tag -> (the message's queued bytes, its queue) for messages popped into the
        # in-flight list and not yet acked: the ack removes exactly those bytes
        self._inflight: dict[str, tuple[bytes, str]] = {}
        self._lean_node: str | None = None
        self._lean_registered = False
        self._lean_blmove: bool | None = None  # Redis >= 6.2, checked at the first pop
        self._lean_mode = ""
        self._lean_key = ""  # the queue key the pending BLMOVE takes from
        self._lean_turn = 0
        self._lean_scan = True
        self._lean_full = False  # the last pop met a full Redis: wait before the next one
        self._lean_full_said = False  # that was logged (once per full spell)
        super().__init__(*args, **kwargs)

    @property
    def inflight_key(self) -> str:
        assert self._lean_node is not None
        return protocol.inflight_key(self._lean_node)

    def _lean_ready(self) -> bool:
        """Whether this channel pops into an in-flight list (a node id is set and Redis has
        BLMOVE); registers the node in the heartbeat hash before the first such pop."""
        node = current_node()
        if node is None:
            return False
        if self._lean_blmove is None:
            with self.conn_or_acquire() as client:
                version = str(client.info("server").get("redis_version", "0"))
            major_minor = tuple(int(p) for p in (version.split(".") + ["0"])[:2] if p.isdigit())
            self._lean_blmove = major_minor >= (6, 2)
            if not self._lean_blmove:
                log.warning("Redis %s has no BLMOVE (6.2+): jobs are taken with BRPOP, and one taken by a "
                            "node killed at that instant is answered only at its client's deadline", version)
        if not self._lean_blmove:
            return False
        if not self._lean_registered or self._lean_node != node:
            with self.conn_or_acquire() as client:
                client.eval(REGISTER, 1, protocol.nodes_key(), node, _node_ttl)
            self._lean_node, self._lean_registered = node, True
        return True

    def _brpop_start(self, timeout: Any = None) -> None:
        try:
            lean = self._lean_ready()
        except redis.exceptions.ResponseError as e:  # listing the node is a write too
            if not _full(e):
                raise
            self._note_full(e)
            lean = True  # the pause below; the node is listed at the next try
        if not lean:
            self._lean_mode = ""
            super()._brpop_start(timeout)
            return
        if timeout is None:
            timeout = self.brpop_timeout
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            return
        keys = [self._q_for_pri(queue, 0) for queue in queues]
        self._in_poll = self.client.connection
        self._brpop_sent_at = monotonic()  # type: ignore[assignment]  # kombu declares it None
        if self._lean_full:
            # a blocking pop of a list no one writes: a pause in the event loop, not a spin of
            # refused moves, and not a sleep that would stall the node's other work
            self._lean_mode = "PAUSE"
            self.client.connection.send_command("BLPOP", protocol.full_pause_key(), FULL_PAUSE_S)
        elif len(keys) == 1:
            self._lean_mode, self._lean_key = "BLMOVE", keys[0]
            self.client.connection.send_command("BLMOVE", keys[0], self.inflight_key, "RIGHT", "LEFT", timeout or 0)
        elif self._lean_scan:
            self._lean_mode = "EVAL"
            self.client.connection.send_command("EVAL", MOVE_FIRST, len(keys) + 1, *keys, self.inflight_key)
        else:
            self._lean_mode, self._lean_key = "BLMOVE", keys[self._lean_turn % len(keys)]
            self._lean_turn += 1
            block = min(float(timeout or MULTI_QUEUE_BLOCK_S), MULTI_QUEUE_BLOCK_S)
            self.client.connection.send_command("BLMOVE", self._lean_key, self.inflight_key, "RIGHT", "LEFT", block)

    def _brpop_read(self, **options: Any) -> Any:
        mode = self._lean_mode
        if not mode:
            return super()._brpop_read(**options)
        try:
            try:
                reply = self.client.parse_response(self.client.connection, "BLPOP" if mode == "PAUSE" else mode,
                                                   **options)
            except self.connection_errors:
                # a move Redis made and this socket lost stays in the in-flight list: the
                # node's own check gives it back after the grace period
                self.client.connection.disconnect()
                raise
            except redis.exceptions.ResponseError as e:
                if not _full(e):
                    raise
                self._note_full(e)  # nothing was moved
                raise kombu_redis.Empty() from None
            if mode == "PAUSE":
                self._lean_full = False  # try the pop again
                raise kombu_redis.Empty()
            self._lean_full_said = False
            if mode == "EVAL":
                self._lean_scan = not reply  # nothing anywhere: block on one queue next
                if not reply:
                    raise kombu_redis.Empty()
                key, raw = reply[0], reply[1]
            else:
                self._lean_scan = True
                if reply is None:
                    raise kombu_redis.Empty()
                key, raw = self._lean_key, reply
            queue = kombu_redis.bytes_to_str(key).rsplit(self.sep, 1)[0]
            raw_bytes = raw if isinstance(raw, bytes) else str(raw).encode()
            self._lean_deliver(raw_bytes, queue)
            return True
        finally:
            self._in_poll = None  # type: ignore[assignment]  # kombu declares it bool
            self._flush_brpop_reauth()

    def _note_full(self, error: BaseException) -> None:
        """Redis refused this node's pop (or its listing) because it is full: the next pop waits
        FULL_PAUSE_S first. Raised on, kombu's consumer would stop the node as an unrecoverable
        error, and a caller who fills Redis (queued jobs, through the gateway) would stop the fleet."""
        if not self._lean_full_said:
            self._lean_full_said = True
            log.warning("Redis is full (maxmemory): this node takes no job until it has room: %s", error)
        self._lean_full = True

    def _poll_error(self, type: Any, **options: Any) -> Any:
        """An error event on the pop's socket: read the pending reply under its own command's
        name (a message it carries stays in the in-flight list; the node's check gives it back)."""
        if type == "BRPOP" and self._lean_mode:
            try:
                return self.client.parse_response(self.client.connection,
                                                  "BLPOP" if self._lean_mode == "PAUSE" else self._lean_mode)
            except redis.exceptions.ResponseError as e:
                if not _full(e):
                    raise
                self._note_full(e)  # nothing was moved
                return None
        return super()._poll_error(type, **options)

    def _lean_deliver(self, raw: bytes, queue: str) -> None:
        tag = message_tag(raw)
        if tag is None:
            # not a kombu message: it cannot be run or acked; dropped from the in-flight list
            # (stock kombu drops it at the BRPOP the same way), loudly
            log.error("dropped a non-message from queue %s: %r", queue, raw[:200])
            with self.conn_or_acquire() as client:
                client.lrem(self.inflight_key, 1, raw)
            raise kombu_redis.Empty()
        self._inflight[tag] = (raw, queue)
        self._queue_cycle.rotate(queue)
        self.connection._deliver(loads(kombu_redis.bytes_to_str(raw)), queue)


class Transport(kombu_redis.Transport):
    Channel = Channel


def _full(error: BaseException) -> bool:
    """Whether Redis refused a command because it is at ``maxmemory`` (an OOM reply, also when a
    script's write met it)."""
    return isinstance(error, redis.exceptions.OutOfMemoryError) or "OOM command not allowed" in str(error)
