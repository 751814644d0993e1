"""The core: the data model every layer shares (problems, results, verdicts, checker specs),
the wire protocol, the Redis keys and the problem store's encoding, and the one error hierarchy.

It imports nothing else of the project and no client library, so the sandbox, the workers and
the trainer's client can all depend on it without depending on each other.
"""
