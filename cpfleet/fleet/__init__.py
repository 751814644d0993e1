"""A fleet on one machine: :class:`~cpfleet.fleet.local.LocalFleet` (local.py: Redis, a worker
node and Flower started and stopped as one unit), ``cpfleet up`` (up.py), the throwaway
redis-server (redis_server.py), process-tree utilities (processes.py), and Flower's launcher with
its worker list kept current (flower_launch.py)."""
