"""The core: the data model every layer shares (problems, results, verdicts, checker specs),
the wire protocol, the Redis keys and the problem store's encoding, and the one error hierarchy.

What the folder holds: problem.py, results.py, verdict.py (the data model); checkers/ (the
registry of checker kinds, one module per kind); languages.py (the language registry); protocol.py
(the job envelope and Redis keys); store.py (the problem store's encoding); records.py and
testshapes.py (the dataset record schema and test shapes); rowlimits.py (the limits a
dataset row states); fncall.py (function-call values); errors.py; envvars.py and defaults.py
(settings); redis_url.py; lru.py; options.py (a caller's timeouts and bounds).

It imports nothing else of the project and no client library, so the sandbox, the workers and
the trainer's client can all depend on it without depending on each other.
"""
