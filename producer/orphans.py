"""Removing orphaned jobs from a queue: jobs whose client is gone (closed, or crashed and its
claim expired), or that their client cancelled, and that no worker has taken yet.

Workers already drop such jobs unjudged (``cpfleet.workers.withdrawal``), but only as fast as
Celery hands them out, one message at a time (about a hundred per second per node): a trainer
that crashed with 100k jobs queued would still hold the next run's jobs back for many minutes.
The sweep here removes them inside Redis instead. Every job message carries its client's id and
claim token as two plain headers (``publisher.task_message``); a Lua script walks the queue list
in chunks, and a message whose client no longer holds that token is overwritten with a
tombstone, the tombstones then removed with one LREM. Each call is atomic and bounded (a
number of messages and of bytes scanned), so Redis is never blocked for long; between calls
other producers and workers change the list, so the sweep is best effort: anything it misses
is still dropped by the worker's check.
"""

from __future__ import annotations

import re
import time
import uuid

import redis

from cpfleet.core import protocol

CLIENT_HEADER = "cpfleet_client"
TOKEN_HEADER = "cpfleet_token"
# Client ids the headers carry as they are (default ids are uuid hex): the script matches them
# with a Lua pattern, so no character that JSON would escape.
CLIENT_ID_SAFE = re.compile(r"[A-Za-z0-9._:@-]{1,200}")

_CHUNK = 1000
_CHUNK_BYTES = 8 * 1024 * 1024

# KEYS[1] the queue list; ARGV: start index, max messages, max bytes, tombstone, claim key prefix,
# cancel key prefix (``protocol.cancelled_job_key``: prefix, client id, ':', wire id).
# Returns {messages scanned, messages removed, messages in the LRANGE}.
_SWEEP = """
local start = tonumber(ARGV[1])
local items = redis.call('LRANGE', KEYS[1], start, start + tonumber(ARGV[2]) - 1)
local budget = tonumber(ARGV[3])
local owners = {}
local scanned, removed = 0, 0
for i, m in ipairs(items) do
  scanned = i
  budget = budget - #m
  local h = string.find(m, '"headers": {', 1, true)
  if h then
    local cid = string.match(m, '"cpfleet_client": "([%w%._:@%-]+)"', h)
    local tok = string.match(m, '"cpfleet_token": "(%x+)"', h)
    if cid and tok then
      local owner = owners[cid]
      if owner == nil then
        owner = redis.call('GET', ARGV[5] .. cid) or false
        owners[cid] = owner
      end
      local gone = owner ~= tok
      if not gone then
        -- a live client's job it cancelled: the cancel key of its wire id (the task id) exists
        local id = string.match(m, '"id": "([^"\\]+)"', h)
        gone = id ~= nil and redis.call('EXISTS', ARGV[6] .. cid .. ':' .. id) == 1
      end
      if gone then
        redis.call('LSET', KEYS[1], start + i - 1, ARGV[4])
        removed = removed + 1
      end
    end
  end
  if budget <= 0 then break end
end
if removed > 0 then redis.call('LREM', KEYS[1], 0, ARGV[4]) end
return {scanned, removed, #items}
"""

def purge_orphans(client: redis.Redis, queue: str, budget_s: float = 30.0) -> int:
    """Remove from ``queue`` every job whose client no longer holds the claim it was sent under,
    or that its client cancelled; returns how many were removed. Stops after ``budget_s`` seconds (the rest is left to the
    workers' own check)."""
    script = client.register_script(_SWEEP)
    tombstone = f"cpfleet-tombstone:{uuid.uuid4().hex}"
    prefix, cancelled_prefix = protocol.client_claim_key(""), protocol.cancelled_job_key("", "").removesuffix(":")
    end = time.monotonic() + budget_s
    start = removed_total = 0
    while time.monotonic() < end:
        scanned, removed, got = script(keys=[queue], args=[start, _CHUNK, _CHUNK_BYTES, tombstone, prefix, cancelled_prefix])
        removed_total += int(removed)
        if int(got) == 0 or (int(scanned) == int(got) and int(got) < _CHUNK):
            break  # past the end of the list
        start += int(scanned) - int(removed)
    return removed_total
