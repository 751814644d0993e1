"""The Celery side of the fleet. Depends on ``cpfleet.core`` and ``cpfleet.sandbox``.

What the folder holds: the app (app.py) and its settings (config.py), ``cpfleet worker``
(cli.py), the evaluate and run tasks (tasks.py) with what a pool process holds (resources.py),
the admission check for withdrawn jobs (withdrawal.py), the problem LRU (problem_cache.py), the
result cache (result_cache.py), the fail-fast test order (failorder.py), replies (replies.py),
the reliable pop (broker.py), lost-node redelivery (liveness.py), metrics (metrics.py) and the
JSON job log (joblog.py).
"""
