"""A reply list never outlives its client forever, yet replies are pushed without an EXPIRE each.

A client lists itself in ``protocol.clients_key()``; its messages say so (``reply_registered``),
and workers of a fleet that sweeps push their replies with ``LPUSH`` alone. The liveness sweep
gives the reply list of a listed client whose claim is gone (closed, crashed) an expiry, and
forgets the client later. Messages of clients that do not list themselves (older ones, hand-made
ones: ``tests/test_fleet_jobs.py`` checks their lists' expiry), and nodes that do not sweep
(``CPFLEET_NODE_TTL=0``: ``tests/test_broker_lean.py``), keep the EXPIRE per reply.
All against a real redis-server; the end-to-end case with a real prefork worker and a real
client process that dies while its job runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

import redis
from fleet_helpers import REPO, start_worker, wait_until  # noqa: F401  (fixture)

from cpfleet.core import protocol
from cpfleet.core.store import register_problems
from cpfleet.producer.client import FleetClient
from cpfleet.workers.liveness import Liveness

ECHO = {"id": "t/echo", "public_tests": [{"input": "1\n", "output": "1\n"}], "hidden_tests": [{"input": "5\n", "output": "5\n"}]}
ECHO_OK = "```python\nprint(input())\n```"


def test_a_client_lists_itself_and_its_messages_say_so(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    register_problems(r, [ECHO])
    with FleetClient(redis_url, queue="nobody-listens-expiry", timeout=60, reply_ttl=120) as client:
        assert r.hget(protocol.clients_key(), client.client_id) == b"120"
        client.submit("t/echo", ECHO_OK)
        (entry,) = client._jobs.pending.values()
        assert entry.msg.reply_registered
        assert protocol.JobMessage.from_wire(entry.msg.to_wire()).reply_registered
    # a message that does not say it (an older client's) reads as not listed
    old = protocol.JobMessage(job_id="j", problem_id="p", completion="c", reply_to="r").to_wire()
    assert "reply_registered" not in old and not protocol.JobMessage.from_wire(old).reply_registered


def test_the_window_in_which_a_push_may_leave_the_expiry_to_the_sweep() -> None:
    now = time.time()
    assert protocol.reply_expiry_swept_until(True, now, swept=True) == now + protocol.REPLY_EXPIRE_WINDOW_S
    assert protocol.reply_expiry_swept_until(False, now, swept=True) is None  # client not listed
    assert protocol.reply_expiry_swept_until(True, None, swept=True) is None  # claim not read
    assert protocol.reply_expiry_swept_until(True, now, swept=False) is None  # no sweep on this node
    # a pushed list is looked after by the sweep for longer than the window
    assert protocol.CLIENT_RETENTION_S > protocol.REPLY_EXPIRE_WINDOW_S + protocol.CLIENT_SWEEP_INTERVAL_S


def test_the_sweep_expires_a_gone_clients_list_leaves_a_live_ones_and_forgets_the_gone_later(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    clients = protocol.clients_key()
    r.hset(clients, mapping={"gone": "120", "live": "3600"})
    r.set(protocol.client_claim_key("live"), "token", ex=60)
    r.lpush(protocol.reply_key("gone"), b"a reply nobody will read")
    r.lpush(protocol.reply_key("live"), b"a reply its client will read")
    node = Liveness(lambda: redis.Redis.from_url(redis_url), "expiry-test/1", ttl=10)
    node.tick()
    assert 0 < r.ttl(protocol.reply_key("gone")) <= 120
    assert r.ttl(protocol.reply_key("live")) == -1  # its client is alive and reads it
    ttl, since = r.hget(clients, "gone").split()  # type: ignore[union-attr]
    assert ttl == b"120" and abs(int(since) - time.time()) < 60
    assert r.hget(clients, "live") == b"3600"
    # one sweep per interval, fleet-wide: a second tick right away does nothing
    r.persist(protocol.reply_key("gone"))
    node.tick()
    assert r.ttl(protocol.reply_key("gone")) == -1
    # past the retention the gone client is forgotten, its list given its expiry on the way out
    r.hset(clients, "gone", f"120 {int(time.time()) - protocol.CLIENT_RETENTION_S - 5}")
    r.delete(protocol.clients_sweep_lock_key())
    node.tick()
    assert not r.hexists(clients, "gone") and 0 < r.ttl(protocol.reply_key("gone")) <= 120
    # a gone client that claims its id again is alive again
    r.hset(clients, "back", "60 1")
    r.set(protocol.client_claim_key("back"), "token", ex=60)
    r.delete(protocol.clients_sweep_lock_key())
    node.tick()
    assert r.hget(clients, "back") == b"60"


def _crash_while_judged(redis_url: str, queue: str, client_id: str) -> str:
    """A client process whose one job sleeps 3 s on the worker; the process dies (no close())
    once the worker has taken it, and its claim (2 s TTL here) lapses while the job runs."""
    script = (
        "import json, os, time\n"
        "import redis\n"
        "from cpfleet.core import protocol\n"
        "protocol.CLIENT_CLAIM_TTL_S = 2\n"
        "from cpfleet.producer.client import FleetClient\n"
        f"c = FleetClient({redis_url!r}, queue={queue!r}, client_id={client_id!r}, timeout=300)\n"
        f"c.submit_many([{{'problem_id': 't/echo', 'completion': {ECHO_OK!r}, 'job_id': 'slow#sleep:3'}}])\n"
        f"r = redis.Redis.from_url({redis_url!r})\n"
        "end = time.monotonic() + 60\n"
        f"while r.llen({queue!r}) and time.monotonic() < end: time.sleep(0.02)\n"
        "time.sleep(0.5)  # admitted by now: the worker checks the claim as it starts the job\n"
        "print(json.dumps(sorted(c._jobs.pending)), flush=True)\n"
        "os._exit(0)  # a crash: no close(), the claim is left to expire\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    (wire_id,) = json.loads(out.stdout)
    return str(wire_id)


def test_a_crashed_clients_late_reply_list_gets_an_expiry(redis_url: str, start_worker: Any) -> None:  # noqa: F811
    """The worker answers a job whose client died meanwhile; the reply is pushed without an
    EXPIRE (the client was listed and held its claim when the job was admitted), and the
    sweep gives the list its expiry once it finds the claim gone."""
    r = redis.Redis.from_url(redis_url)
    register_problems(r, [ECHO])
    queue = f"expiry-{uuid.uuid4().hex[:6]}"
    worker = start_worker(redis_url, concurrency=1, env={"CPFLEET_QUEUES": queue}, faults=True)
    wire_id = _crash_while_judged(redis_url, queue, "crashy-replies")
    reply = protocol.reply_key("crashy-replies")
    assert wait_until(lambda: r.llen(reply) == 1, 60), worker.log_text()[-3000:]  # answered, after the crash
    (data,) = r.lrange(reply, 0, -1)
    assert protocol.decode_reply(data)["job_id"] == wire_id
    assert wait_until(lambda: r.ttl(reply) > 0, 60)  # by the sweep (within its interval)
    assert r.ttl(reply) <= protocol.DEFAULT_REPLY_TTL_S
    assert len(r.hget(protocol.clients_key(), "crashy-replies").split()) == 2  # type: ignore[union-attr]  # gone since
