"""The Celery side of the fleet: the app and its settings, the evaluate task, the problem LRU,
the result cache, replies and metrics. Depends on ``cpfleet.core`` and ``cpfleet.sandbox``."""
