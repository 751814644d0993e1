"""Fast redelivery of the jobs a lost worker node held: heartbeats plus a sweep inside Redis.

Why: kombu's Redis transport keeps each message a worker took, and has not acked yet, in its
``unacked`` hash, and gives it back to the queue only when it has been there longer than the
visibility timeout. That timeout must exceed the hard time limit (or a slow job would run twice
at once), so a job held by a node that died (container killed, host gone, network partitioned)
came back only after 630 + 60 s: one lost node stalled a whole training step for 11.5 minutes.

How: every node's main process runs one thread that, every ``beat`` seconds, writes the node's
heartbeat into the hash ``protocol.nodes_key()``: the time it is alive until (Redis's own clock
plus ``ttl``) followed by the delivery tags of the messages it holds (from Celery's
``worker.state.requests``: reserved and running, until they are acked). The same thread then
tries the sweep (one node per interval does it, under a lock key), a Lua script that runs
atomically inside Redis and:

* takes the nodes whose heartbeat expired (the node stopped beating for ``ttl`` seconds: dead,
  frozen or cut off) for lost and requeues at once the messages they held: every message of the
  node's in-flight list (``workers.broker``: the lean transport pops into it) and the unacked
  messages its heartbeat listed (kombu's own transport). A lost node stays in the hash for
  ``retention`` seconds, so a move Redis made for a pop it left pending is given back too;
* requeues any other unacked message that no live node has listed for ``grace`` seconds (a
  node killed between taking a message and its next beat never listed it);
* never touches a message a live node lists: a slow job is never redelivered while its node
  beats, whatever its age.

A message is requeued as kombu's own restore would (RPUSH of the same message on its queue, so it
is taken next; removed from ``unacked`` and ``unacked_index`` in the same script, so kombu's
restore finds nothing more to give back), with one difference: it gets a fresh delivery tag. A
frozen node that wakes up later then acks its old tag, which no longer exists, instead of the
tag of the node now running the job. Its late reply reaches the client, which keeps the first
reply per job (delivery is at least once): a job may be judged twice, never answered twice.
Only cpfleet's own tasks (``protocol.TASK_NAME_PREFIX``) on the default exchange at priority 0
are swept; anything else stays with kombu's visibility timeout.

Each node also checks its own in-flight list every beat (``check_own``): a message in it that
the node has not held for ``grace`` seconds (an ack lost with a connection, a pop whose reply
never arrived) goes back to its queue. At a warm shutdown the node gives back what is left
(``release``) and drops its heartbeat.

Every node of a fleet must run this (``CPFLEET_NODE_TTL`` > 0, the default): a node that does
not beat has its jobs requeued by the others after ``grace``, and they run twice.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from cpfleet.core import protocol
from cpfleet.core.errors import OptionError

log = logging.getLogger("cpfleet.worker")

# KEYS[1] nodes hash. ARGV[1] node, ARGV[2] ttl seconds, ARGV[3] space-separated held tags.
_BEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.3f', now + tonumber(ARGV[2])) .. ARGV[3])
return 1
"""

# KEYS: nodes hash, unheld hash, kombu unacked hash, kombu unacked index, sweep lock.
# ARGV: grace s, lock ms, most messages requeued per sweep, task name prefix, retention s (how
# long a lost node stays listed, its in-flight list swept, before it is forgotten), in-flight
# list key prefix. Returns {requeued tags..., } or false when another node holds the sweep lock.
_SWEEP = """
if not redis.call('SET', KEYS[5], '1', 'NX', 'PX', ARGV[2]) then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local grace, most, prefix = tonumber(ARGV[1]), tonumber(ARGV[3]), ARGV[4]
local retention, inflight_prefix = tonumber(ARGV[5]), ARGV[6]

local function requeue(tag)
  local raw = redis.call('HGET', KEYS[3], tag)
  if not raw then  -- acked meanwhile, or an index entry without its message
    redis.call('ZREM', KEYS[4], tag)
    redis.call('HDEL', KEYS[2], tag)
    return false
  end
  local ok, entry = pcall(cjson.decode, raw)
  if not ok or type(entry) ~= 'table' then return false end
  local payload, exchange, queue = entry[1], entry[2], entry[3]
  if type(payload) ~= 'table' or exchange ~= '' or type(queue) ~= 'string' then return false end
  local props, headers = payload['properties'], payload['headers']
  if type(props) ~= 'table' or type(headers) ~= 'table' then return false end
  local priority = props['priority']
  if priority ~= nil and priority ~= 0 then return false end
  local task = headers['task']
  if type(task) ~= 'string' or string.sub(task, 1, #prefix) ~= prefix then return false end
  -- the message's own bytes: the entry is kombu's json.dumps([message, exchange, queue])
  local tail = ', ' .. cjson.encode(exchange) .. ', ' .. cjson.encode(queue) .. ']'
  if string.sub(raw, 1, 1) ~= '[' or string.sub(raw, -#tail) ~= tail then return false end
  local message = string.sub(raw, 2, #raw - #tail)
  local old = '"delivery_tag": ' .. cjson.encode(tag)
  local at = string.find(message, old, 1, true)
  if at then
    local fresh = '"delivery_tag": ' .. cjson.encode(tag .. '.r' .. t[1] .. t[2])
    message = string.sub(message, 1, at - 1) .. fresh .. string.sub(message, at + #old)
  end
  redis.call('ZREM', KEYS[4], tag)
  redis.call('HDEL', KEYS[3], tag)
  redis.call('HDEL', KEYS[2], tag)
  redis.call('RPUSH', queue, message)
  return true
end

local held, orphaned, lost = {}, {}, {}
local nodes = redis.call('HGETALL', KEYS[1])
for i = 1, #nodes, 2 do
  local first, dead, until_ = true, false, 0
  for word in string.gmatch(nodes[i + 1], '%S+') do
    if first then
      until_ = tonumber(word)
      dead = until_ == nil or until_ < now
      until_ = until_ or 0
      first = false
    elseif dead then
      orphaned[word] = true
    else
      held[word] = true
    end
  end
  if dead then table.insert(lost, {nodes[i], until_}) end
end

local requeued = {}
-- a lost node's in-flight list (workers.broker): every message goes back to its queue, byte for
-- byte. The node stays listed for the retention time, so a move Redis made for it after this
-- sweep (a blocking pop of a frozen or cut-off node still pending) is given back by the next.
for _, n in ipairs(lost) do
  local key = inflight_prefix .. n[1]
  for _, raw in ipairs(redis.call('LRANGE', key, 0, -1)) do
    if #requeued >= most then break end
    local ok, payload = pcall(cjson.decode, raw)
    local props = ok and type(payload) == 'table' and payload['properties']
    local info = type(props) == 'table' and props['delivery_info']
    local queue = type(info) == 'table' and info['routing_key']
    if type(queue) == 'string' and queue ~= '' then
      redis.call('LREM', key, 1, raw)
      redis.call('RPUSH', queue, raw)
      local tag = props['delivery_tag']
      table.insert(requeued, type(tag) == 'string' and tag or '?')
    end
  end
  if now - n[2] > retention and redis.call('LLEN', key) == 0 then redis.call('HDEL', KEYS[1], n[1]) end
end
local tags = redis.call('ZRANGE', KEYS[4], 0, -1)
for _, tag in ipairs(tags) do
  if held[tag] then
    redis.call('HDEL', KEYS[2], tag)
  else
    local due = orphaned[tag] or false
    if not due then
      local since = tonumber(redis.call('HGET', KEYS[2], tag))
      if since == nil then
        redis.call('HSET', KEYS[2], tag, string.format('%.3f', now))
      elseif now - since >= grace then
        due = true
      end
    end
    if due and #requeued < most and requeue(tag) then
      table.insert(requeued, tag)
    end
  end
end
for _, tag in ipairs(redis.call('HKEYS', KEYS[2])) do
  if not redis.call('ZSCORE', KEYS[4], tag) then redis.call('HDEL', KEYS[2], tag) end
end
return requeued
"""


def held_delivery_tags() -> list[str]:
    """The delivery tags of the messages this worker process holds (reserved or running, not yet
    acked), from Celery's worker state. Read from another thread: ``list()`` of a dict's values
    is one C call, so it never sees the dict mid-change."""
    from celery.worker import state

    tags = []
    for request in list(state.requests.values()):
        message = getattr(request, "message", None)
        tag = getattr(message, "delivery_tag", None)
        if isinstance(tag, str) and tag and not any(c.isspace() for c in tag):
            tags.append(tag)
    return tags


class Liveness:
    """The heartbeat-and-sweep thread of one node (see the module docstring).

    ``ttl``: a node that has not beaten for that long is lost (its jobs are requeued at once);
    ``grace``: how long an unacked message no live node lists waits before it is requeued
    (default ``ttl``); ``beat``: seconds between beats (default ``ttl / 5``).
    """

    def __init__(
        self,
        client_factory: Callable[[], redis.Redis],
        node: str,
        *,
        ttl: float,
        grace: float | None = None,
        beat: float | None = None,
        held: Callable[[], list[str]] = held_delivery_tags,
        max_requeue: int = 1000,
    ) -> None:
        if not ttl > 0:
            raise OptionError("ttl must be > 0")
        self.node = node
        self.ttl = ttl
        self.grace = ttl if grace is None else grace
        self.beat = max(0.2, ttl / 5) if beat is None else beat
        self.max_requeue = max_requeue
        self._client_factory = client_factory
        self._held = held
        self._client: redis.Redis | None = None
        self._scripts: tuple[Any, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.requeued = 0  # messages this node's sweeps requeued (tests and logs read it)
        self.given_back = 0  # messages of its own in-flight list this node gave back (``check_own``)
        self._unheld: dict[str, float] = {}  # tag in this node's in-flight list, not held -> since (monotonic)
        self._error_logged = False

    def start(self) -> Liveness:
        self._thread = threading.Thread(target=self._run, name="cpfleet-liveness", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.beat)

    def tick(self) -> list[str]:
        """One beat and one sweep attempt; returns the tags this sweep requeued. Never raises:
        a Redis outage only delays both (and after it, expired nodes are swept as usual)."""
        try:
            client = self._connection()
            assert self._scripts is not None
            beat, sweep = self._scripts
            held = self._held()
            tags = " ".join(held)
            beat(keys=[protocol.nodes_key()], args=[self.node, self.ttl, " " + tags if tags else ""])
            self.check_own(client, set(held))
            keys = [
                protocol.nodes_key(),
                protocol.unheld_key(),
                protocol.KOMBU_UNACKED_KEY,
                protocol.KOMBU_UNACKED_INDEX_KEY,
                protocol.sweep_lock_key(),
            ]
            lock_ms = max(100, int(self.beat * 1000) - 50)
            got = sweep(keys=keys, args=[self.grace, lock_ms, self.max_requeue, protocol.TASK_NAME_PREFIX,
                                         self.retention, protocol.inflight_key("")], client=client)
            if self._error_logged:
                log.warning("liveness: Redis answers again")
                self._error_logged = False
        except redis.RedisError as exc:
            self._reset()
            if not self._error_logged:
                log.warning("liveness: heartbeat failed (%s); retrying every %gs", exc, self.beat)
                self._error_logged = True
            return []
        requeued = [t.decode() if isinstance(t, bytes) else str(t) for t in (got or [])]
        if requeued:
            self.requeued += len(requeued)
            log.warning("liveness: requeued %d job(s) held by lost worker node(s): %s",
                        len(requeued), ", ".join(requeued[:10]))
        return requeued

    @property
    def retention(self) -> float:
        """Seconds a lost node stays listed (its in-flight list swept) after it stopped beating:
        far longer than the 1 s a blocking pop it left pending can still move a message."""
        return max(60.0, 6 * self.ttl)

    def check_own(self, client: redis.Redis, held: set[str]) -> list[str]:
        """Give back the messages of this node's in-flight list (``workers.broker``) that it has
        not held (Celery's worker state) for ``grace`` seconds: ones whose ack was lost with a
        broker connection, or whose pop reply never arrived. A message on its way from the pop
        to Celery's worker state is unheld for milliseconds, far below the grace."""
        from cpfleet.workers.broker import REQUEUE, message_queue, message_tag

        key = protocol.inflight_key(self.node)
        now = time.monotonic()
        unheld: dict[str, float] = {}
        given: list[str] = []
        for raw in client.lrange(key, 0, -1):
            tag = message_tag(raw)
            if tag is None or tag in held:
                continue
            since = self._unheld.get(tag, now)
            queue = message_queue(raw)
            if now - since >= self.grace and queue is not None:
                if client.eval(REQUEUE, 2, key, queue, raw, "front"):
                    given.append(tag)
                continue
            unheld[tag] = since
        self._unheld = unheld
        if given:
            self.given_back += len(given)
            log.warning("liveness: gave back %d job(s) this node took and no longer holds: %s",
                        len(given), ", ".join(given[:10]))
        return given

    def release(self) -> int:
        """At this node's shutdown, after its pool stopped: give back every message left in its
        in-flight list that it does not hold (a pop whose reply the closing consumer never
        read) and drop its heartbeat, so nothing waits ``ttl`` for the sweep. Returns how
        many it gave back; never raises (the sweep does the same later)."""
        from cpfleet.workers.broker import REQUEUE, message_queue, message_tag

        self.stop()
        given = 0
        try:
            client = self._connection()
            key = protocol.inflight_key(self.node)
            held = set(self._held())
            for raw in client.lrange(key, 0, -1):
                queue = message_queue(raw)
                if message_tag(raw) not in held and queue is not None:
                    given += int(client.eval(REQUEUE, 2, key, queue, raw, "front"))
            if not held and client.llen(key) == 0:
                client.hdel(protocol.nodes_key(), self.node)
        except redis.RedisError as exc:
            log.warning("liveness: could not give back this node's jobs at shutdown (%s); the sweep will", exc)
        finally:
            self._reset()
        if given:
            log.warning("liveness: gave back %d job(s) at shutdown", given)
        return given

    def _connection(self) -> redis.Redis:
        if self._client is None:
            self._client = self._client_factory()
            self._scripts = (self._client.register_script(_BEAT), self._client.register_script(_SWEEP))
        return self._client

    def _reset(self) -> None:
        client, self._client, self._scripts = self._client, None, None
        if client is not None:
            try:
                client.close()
            except Exception:  # already broken: nothing to release
                pass


def node_name(hostname: str) -> str:
    """The heartbeat's field: Celery's node name and this process's pid (two nodes started with
    one name must not overwrite each other's list)."""
    return f"{hostname}/{os.getpid()}"
