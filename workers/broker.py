"""kombu's Redis transport with its per-job bookkeeping sent as plain pipelines.

With ``acks_late`` kombu keeps every message it hands to a worker in two keys until the ack
(``unacked`` hash: the message; ``unacked_index`` sorted set: when it was taken), so a dead
worker's jobs come back after the visibility timeout. Stock kombu writes each pair inside
MULTI/EXEC: reserve = MULTI, ZADD, HSET, EXEC; ack = MULTI, ZREM, HDEL, EXEC, 8 Redis commands of
the ~22 a job cost end to end (bench/bench_broker.py). Here each pair goes as one
non-transactional pipeline (one round trip, 2 commands), in the order that leaves nothing
harmful if only the first command lands:

* reserve: ZADD then HSET. The message is already off the queue (BRPOP), so a worker that dies
  before the HSET loses it exactly as stock kombu does between BRPOP and EXEC; an index entry
  without its message is dropped by the restore sweep (``restore_by_tag`` finds no message).
* ack/reject: HDEL then ZREM. An index entry left alone is the same harmless case; the other
  order could leave a message in the hash that nothing would ever remove.

Restoring (``restore_by_tag``: WATCH/MULTI, rare) is kombu's own. Nothing else changes: the
keys, the visibility timeout, the restore sweeps and their mutex. ``CPFLEET_BROKER_LEAN=0``
selects stock kombu; a key prefix (``global_keyprefix``) or a Sentinel URL also keeps it
(``workers.config``).
"""

from __future__ import annotations

from time import time
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps


class LeanQoS(kombu_redis.QoS):
    def append(self, message: Any, delivery_tag: Any) -> None:
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
        with self.channel.conn_or_acquire() as client:
            pipe = client.pipeline(transaction=False)
            pipe.hdel(self.unacked_key, delivery_tag)
            pipe.zrem(self.unacked_index_key, delivery_tag)
            pipe.execute()

    def ack(self, delivery_tag: Any) -> None:
        self._forget(delivery_tag)
        kombu_redis.virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        if requeue:
            self.restore_by_tag(delivery_tag, leftmost=True)
        else:
            self._forget(delivery_tag)
        kombu_redis.virtual.QoS.ack(self, delivery_tag)


class Channel(kombu_redis.Channel):
    QoS = LeanQoS


class Transport(kombu_redis.Transport):
    Channel = Channel
