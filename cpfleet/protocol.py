"""The wire protocol, in one place: task name, message fields, Redis key names, versions.

Imported by both the producer (trainer side) and the workers. Imports neither celery nor
the sandbox's execution machinery.
"""

from __future__ import annotations

PROTOCOL_VERSION = 1
KEY_PREFIX = "cpfleet"

# Problem store: one hash per problem with fields "version" and "data" (zlib(msgpack(problem))).
PROBLEM_FIELD_VERSION = "version"
PROBLEM_FIELD_DATA = "data"


def problem_key(problem_id: str) -> str:
    return f"{KEY_PREFIX}:problem:{problem_id}"


def problem_index_key() -> str:
    """A set of every problem id in the store."""
    return f"{KEY_PREFIX}:problems"
