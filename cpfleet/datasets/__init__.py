"""Problem data in: converting RL datasets to the project's problem JSONL (``cpfleet prepare``,
one module per dataset format in :mod:`cpfleet.datasets.formats`; :mod:`cpfleet.datasets.hub`
finds a Hub that cannot be reached before a dataset is opened from it), reading problem files
(:mod:`cpfleet.datasets.loading`, the one loader), uploading them to the Redis problem store
(``cpfleet load``) and checking them with their reference solutions (``cpfleet validate``)."""
