"""The wire protocol, in one place: task name, message fields, Redis key names, versions.

Imported by both the producer (trainer side) and the workers. Imports neither celery nor
the sandbox's execution machinery: only msgpack and the standard library.

A job travels as the single positional argument of the Celery task ``TASK_NAME`` (Celery
message protocol v2, msgpack body). Its result comes back as one msgpack message LPUSHed by
the worker to the job's reply list (``reply_key(client_id)``) with an expiry: there is no
Celery result backend.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgpack

from cpfleet.core.errors import ProtocolError

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


# --- the evaluate task -------------------------------------------------------------------------

TASK_NAME = "cpfleet.evaluate"
DEFAULT_QUEUE = "cpfleet"  # a Redis list of that name (kombu's redis transport)
MODES = ("full", "public")
REWARD_SHAPES = ("all_or_nothing", "fraction")
DEFAULT_REPLY_TTL_S = 3600
# A completion larger than this is refused by the producer (and by the worker) instead of
# clogging Redis: a 10 MB completion still fits.
MAX_COMPLETION_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class JobMessage:
    """One job on the wire. ``completion`` is ``bytes`` when the caller gave bytes or a str that
    is not encodable as UTF-8 (lone surrogates); the worker decodes bytes with errors replaced.
    ``job_id`` is unique per publish attempt: replies are matched on it."""

    job_id: str
    problem_id: str
    completion: str | bytes
    reply_to: str
    reward_shape: str = "all_or_nothing"
    mode: str = "full"
    submitted_at: float = 0.0  # epoch seconds at submit (for queued_ms)
    deadline: float | None = None  # epoch seconds after which the caller no longer waits
    reply_ttl: int = DEFAULT_REPLY_TTL_S
    use_cache: bool = True
    debug: str | None = None  # test-only hook, honoured only by workers started with CPFLEET_DEBUG_HOOKS=1
    language: str | None = None  # the solution's language (python3, pypy3, cpp, c, java); None: the problem's
    # The submitting client and the token of its claim on that id (``client_claim_key``): a
    # worker drops, unjudged, a job whose client no longer holds that claim (closed or dead) or
    # that the client cancelled. Absent (None) on messages of clients that predate them.
    client_id: str | None = None
    client_token: str | None = None
    v: int = PROTOCOL_VERSION

    def to_wire(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "v": self.v,
            "job_id": self.job_id,
            "problem_id": self.problem_id,
            "completion": self.completion,
            "reply_to": self.reply_to,
            "reward_shape": self.reward_shape,
            "mode": self.mode,
            "submitted_at": self.submitted_at,
            "deadline": self.deadline,
            "reply_ttl": self.reply_ttl,
            "use_cache": self.use_cache,
        }
        if self.debug is not None:
            d["debug"] = self.debug
        if self.language is not None:
            d["language"] = self.language
        if self.client_id is not None and self.client_token is not None:
            d["client_id"] = self.client_id
            d["client_token"] = self.client_token
        return d

    @classmethod
    def from_wire(cls, d: Any) -> JobMessage:
        """Validate a decoded task argument; raises ProtocolError naming the first problem."""
        if not isinstance(d, Mapping):
            raise ProtocolError(f"job must be a map, got {type(d).__name__}")
        v = d.get("v")
        if v != PROTOCOL_VERSION:
            raise ProtocolError(f"unsupported job message version {v!r} (this worker speaks {PROTOCOL_VERSION})")
        for name in ("job_id", "problem_id", "reply_to"):
            if not isinstance(d.get(name), str) or not d.get(name):
                raise ProtocolError(f"job field {name!r} must be a non-empty string")
        completion = d.get("completion")
        if not isinstance(completion, str | bytes):
            raise ProtocolError("job field 'completion' must be a string or bytes")
        if len(completion) > MAX_COMPLETION_BYTES:
            raise ProtocolError(f"completion larger than {MAX_COMPLETION_BYTES} bytes")
        shape = d.get("reward_shape", "all_or_nothing")
        if shape not in REWARD_SHAPES:
            raise ProtocolError(f"unknown reward_shape {shape!r} (known: {', '.join(REWARD_SHAPES)})")
        mode = d.get("mode", "full")
        if mode not in MODES:
            raise ProtocolError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
        deadline = d.get("deadline")
        if deadline is not None and not isinstance(deadline, int | float):
            raise ProtocolError("job field 'deadline' must be a number or nil")
        submitted_at = d.get("submitted_at", 0.0)
        if not isinstance(submitted_at, int | float):
            raise ProtocolError("job field 'submitted_at' must be a number")
        ttl = d.get("reply_ttl", DEFAULT_REPLY_TTL_S)
        if not isinstance(ttl, int) or ttl <= 0:
            raise ProtocolError("job field 'reply_ttl' must be a positive integer")
        debug = d.get("debug")
        language = d.get("language")
        if language is not None and (not isinstance(language, str) or not language):
            raise ProtocolError("job field 'language' must be a non-empty string or nil")
        client_id, client_token = d.get("client_id"), d.get("client_token")
        if (client_id is None) != (client_token is None):
            raise ProtocolError("job fields 'client_id' and 'client_token' come together or not at all")
        for name, value in (("client_id", client_id), ("client_token", client_token)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ProtocolError(f"job field {name!r} must be a non-empty string")
        return cls(
            job_id=d["job_id"],
            problem_id=d["problem_id"],
            completion=completion,
            reply_to=d["reply_to"],
            reward_shape=shape,
            mode=mode,
            submitted_at=float(submitted_at),
            deadline=None if deadline is None else float(deadline),
            reply_ttl=ttl,
            use_cache=bool(d.get("use_cache", True)),
            debug=None if debug is None else str(debug),
            language=language,
            client_id=client_id,
            client_token=client_token,
        )


def check_options(reward_shape: str, mode: str) -> None:
    """The one check of the judging options: every entry point (client, CLI, HTTP, the sandbox)
    calls it, so they accept and refuse exactly the same reward shapes and modes."""
    if reward_shape not in REWARD_SHAPES:
        raise ValueError(f"unknown reward shape {reward_shape!r} (known: {', '.join(REWARD_SHAPES)})")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")


# --- replies -----------------------------------------------------------------------------------


def reply_key(client_id: str) -> str:
    """The list a client pops its results from (one per client, with an expiry)."""
    return f"{KEY_PREFIX}:reply:{client_id}"


def processing_key(client_id: str) -> str:
    """Where a client's reader moves replies until it has delivered them (a reply is never only
    in flight on a socket: a connection that dies mid-pop leaves it here)."""
    return f"{KEY_PREFIX}:processing:{client_id}"


# A client holds its id exclusively while open (SET NX with this TTL, renewed by its reader), so
# two clients never pop, and steal, each other's replies from one list.
CLIENT_CLAIM_TTL_S = 60


def client_claim_key(client_id: str) -> str:
    """The key an open client holds (with an expiry) to own ``reply_key(client_id)``."""
    return f"{KEY_PREFIX}:client:{client_id}"


def cancelled_key(client_id: str) -> str:
    """A set of the wire ids this client cancelled: a worker drops them unjudged."""
    return f"{KEY_PREFIX}:cancelled:{client_id}"


def encode_reply(result: Mapping[str, Any]) -> bytes:
    """A result dict (``JobResult.to_dict()``) as a reply message."""
    return msgpack.packb({"v": PROTOCOL_VERSION, "result": dict(result)}, use_bin_type=True)


def decode_reply(data: bytes) -> dict[str, Any]:
    """The result dict of a reply message; raises ProtocolError on anything else."""
    try:
        msg = msgpack.unpackb(data, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ProtocolError(f"undecodable reply: {exc}") from exc
    if not isinstance(msg, dict) or msg.get("v") != PROTOCOL_VERSION or not isinstance(msg.get("result"), dict):
        raise ProtocolError(f"reply is not a version-{PROTOCOL_VERSION} result message")
    result: dict[str, Any] = msg["result"]
    if not isinstance(result.get("job_id"), str):
        raise ProtocolError("reply result has no job_id")
    return result


# --- result cache ------------------------------------------------------------------------------

RESULT_CACHE_FORMAT = 3  # bump when the cached result's meaning (or the key's layout) changes


def code_hash(code: str | None) -> str:
    """Hash of the EXTRACTED code (None: the completion had no usable block)."""
    if code is None:
        return "nocode"
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()


def result_cache_key(
    problem_version: str, code_digest: str, reward_shape: str, mode: str, *, runner: str = "forkserver"
) -> str:
    """One cached result per (sandbox runner kind, problem content version, extracted code, options):
    runner kinds may judge a program differently (timing, limits), so they never share results."""
    return f"{KEY_PREFIX}:rcache:{RESULT_CACHE_FORMAT}:{runner}:{problem_version}:{code_digest}:{reward_shape}:{mode}"


def now() -> float:
    """Epoch seconds: the clock that ``submitted_at`` and ``deadline`` use on both sides."""
    return time.time()
