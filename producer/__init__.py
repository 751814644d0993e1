"""The trainer's client. Depends on ``cpfleet.core`` only, so a trainer process never imports
the execution machinery or celery's worker.

What the folder holds: the facade, ``FleetClient`` (client.py), and ``ShardedFleetClient`` over
several Redis instances (sharded.py); the one path from a job to the queue (submitter.py), the
registry of jobs in flight (pending.py), the publishers (publisher.py; aiopush.py and batcher.py
for ``await fleet.evaluate``), the reply reader thread (replies.py), the Redis connection
(connection.py), whether any worker serves the queue (presence.py); inline problems (inline.py,
inline_registry.py, known_problems.py) and the orphan sweep (orphans.py). records.py and testshapes.py are ``cpfleet.core.records`` and
``cpfleet.core.testshapes`` themselves under a second import path.
"""
