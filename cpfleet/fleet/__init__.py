"""A fleet on one machine: :class:`~cpfleet.fleet.local.LocalFleet` (Redis, a worker node and
Flower started and stopped as one unit), ``cpfleet up``, the throwaway redis-server, process-tree
utilities, and Flower's launcher with its worker list kept current."""
