"""What the in-process reward adapters share (:mod:`cpfleet.rewards.trl`, :mod:`cpfleet.rewards.verl`):
the completion's text, the problem reference (an id or inline tests), the refusal of unknown
problems, the infrastructure-error streak that ends in ``FleetUnusable``, and the lazily made,
never pickled connection to the fleet."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from cpfleet.core import defaults, options, protocol
from cpfleet.core.errors import (
    CpfleetError,
    FleetUnusable,
    InlineProblemError,
    JobFormatError,
    OptionError,
    UnknownProblemError,
)
from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict

log = logging.getLogger("cpfleet.rewards")


def log_fleet_failure(logger: logging.Logger, what: str, exc: BaseException) -> None:
    """One line for the fleet's ordinary failures (Redis unreachable, restarting or full, a
    closed client): an adapter logs them at every call while Redis restarts, and a traceback
    there reads as a bug in cpfleet. Anything else is one, and keeps its traceback."""
    import redis

    if isinstance(exc, CpfleetError | redis.RedisError | ConnectionError | TimeoutError):
        logger.error("%s: %s: %s", what, type(exc).__name__, exc)
    else:
        logger.error("%s", what, exc_info=exc)

# The call's own mistakes (unusable inline tests, an unknown problem id, a malformed job, a bad
# option): every adapter raises them, in each of its forms, never masks one as an infrastructure
# error (TRL's None, verl's infra_score): retrying cannot fix them, and a masked one trains on no
# signal in silence until FleetUnusable names the wrong cause.
CALLER_ERRORS: tuple[type[Exception], ...] = (InlineProblemError, UnknownProblemError, JobFormatError, OptionError)

DEFAULT_TIMEOUT_S = 900.0
DEFAULT_MAX_INFRA_CALLS = 5  # consecutive calls with nothing judged before FleetUnusable

def limit_options(time_limit_s: float | None, memory_limit_mb: int | None) -> dict[str, Any]:
    """An adapter's ``time_limit_s`` / ``memory_limit_mb`` for its inline tests, checked when it is
    configured (OptionError: a setting's mistake, never a failure per sample); only those given."""
    from cpfleet.core.problem import MAX_MEMORY_LIMIT_MB, MAX_TIME_LIMIT_S, MIN_MEMORY_LIMIT_MB

    limits: dict[str, Any] = {}
    if time_limit_s is not None:
        if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, int | float) or not (
                0 < time_limit_s <= MAX_TIME_LIMIT_S):
            raise OptionError(f"time_limit_s must be seconds in (0, {MAX_TIME_LIMIT_S:g}], got {time_limit_s!r}")
        limits["time_limit_s"] = float(time_limit_s)
    if memory_limit_mb is not None:
        if isinstance(memory_limit_mb, bool) or not isinstance(memory_limit_mb, int) or not (
                MIN_MEMORY_LIMIT_MB <= memory_limit_mb <= MAX_MEMORY_LIMIT_MB):
            raise OptionError(f"memory_limit_mb must be whole MB in [{MIN_MEMORY_LIMIT_MB}, {MAX_MEMORY_LIMIT_MB}], "
                              f"got {memory_limit_mb!r}")
        limits["memory_limit_mb"] = memory_limit_mb
    return limits


def with_limits(target: Any, limits: Mapping[str, Any], where: str) -> Any:
    """``target`` (a problem id or inline tests, as :func:`problem_ref` gives it) judged under the
    adapter's ``limits``: inline tests get them stated beside them (the wrapper form of
    producer.inline.stated_limits); a stored problem id is a JobFormatError, since it is judged
    under its own stored limits and the adapter's would be ignored in silence."""
    if not limits:
        return target
    if isinstance(target, str):
        raise JobFormatError(f"{where}: {', '.join(limits)} apply to inline tests, but it holds the problem id "
                             f"{target[:80]!r}, judged under its stored limits (set them in its record)")
    return {"tests": target, **limits}


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or the last message of a conversation
    (``[{"role": "assistant", "content": ...}]``; content may be a list of text parts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, bytes):
        return completion.decode("utf-8", "replace")
    if isinstance(completion, Mapping):
        return _content(completion.get("content"))
    if isinstance(completion, Sequence) and completion:
        return completion_text(completion[-1])
    return ""


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(p.get("text", "") if isinstance(p, Mapping) else str(p) for p in content)
    return "" if content is None else str(content)


def problem_ref(value: Any) -> str | Any:
    """A problem id (a plain string) or inline tests (a mapping, a list, or their JSON text).

    Text that opens as JSON (``{`` or ``[``) but does not parse is broken inline tests, an
    ``InlineProblemError`` saying where it breaks: taken as a problem id it came back as
    "unknown problem '{\"inputs\": ...'", sending the user to look for a problem never meant."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                return json.loads(text)
            except json.JSONDecodeError as e:
                raise InlineProblemError(
                    f"inline tests are not valid JSON ({e.msg} at character {e.pos} of {len(text)}: "
                    f"{text[max(0, e.pos - 20):e.pos + 20]!r})"
                ) from None
            except (ValueError, RecursionError) as e:
                # valid JSON that CPython does not read: an integer of more than 4300 digits
                # (ValueError), nesting deeper than the parser's stack (RecursionError)
                raise InlineProblemError(f"inline tests are JSON this judge does not read: {type(e).__name__}: "
                                         f"{str(e)[:200]}") from None
        return value
    return value


def raise_for_unknown_problems(results: Sequence[JobResult | None], who: str) -> None:
    """UnknownProblemError when any result is UNKNOWN_PROBLEM: a permanent client error, so
    the whole call fails rather than scoring (or masking) those samples."""
    unknown = [r.problem_id for r in results if r is not None and r.verdict == Verdict.UNKNOWN_PROBLEM]
    if not unknown:
        return
    ids = sorted(set(unknown))
    shown = ", ".join(repr(i) for i in ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    raise UnknownProblemError(
        f"{who}: {len(unknown)} sample(s) name problems the fleet does not have: {shown} "
        "(a typo in the dataset column, or the problems were never loaded: cpfleet load PROBLEMS --redis URL)",
        ids,
    )


class InfraStreak:
    """Consecutive calls of one adapter in which nothing was judged (every sample an
    infrastructure error). At ``limit`` such calls in a row the adapter raises FleetUnusable,
    and keeps raising until a call judges something again. Plain ints, no lock: it pickles with
    the TRL reward function, and a lost increment under a race only delays the exception."""

    def __init__(self, limit: int) -> None:
        self.limit = options.whole("max_infra_calls", limit, minimum=1)
        self.count = 0

    def record(self, results: Sequence[JobResult | None], who: str, last_error: str = "") -> None:
        if not results:
            return
        if any(r is not None and not r.infra_error for r in results):
            self.count = 0
            return
        self.count += 1
        if self.count >= self.limit:
            reason = last_error or next((r.infra_message for r in results if r is not None and r.infra_message), "")
            raise FleetUnusable(
                f"{who}: {self.count} calls in a row judged nothing, every sample an infrastructure error"
                + (f" (last: {reason})" if reason else "")
                + "; is Redis reachable at the configured URL and is a worker consuming the queue?"
            )


class Connection:
    """A FleetClient made on first use in this process; never pickled (a new process makes its own)."""

    def __init__(self, redis_url: str | None, client_options: Mapping[str, Any] | None = None) -> None:
        defaults.redis_target(redis_url)  # a bad URL raises RedisUrlError now, not a None reward per sample later
        self.redis_url = redis_url
        self.client_options = dict(client_options or {})
        if "queue" in self.client_options:  # likewise a queue no worker could consume (OptionError)
            protocol.check_queue(self.client_options["queue"])
        self._lock = threading.Lock()
        self._fleet: Any = None
        self._pid = 0

    def fleet(self) -> Any:
        from cpfleet.producer.client import FleetClient
        from cpfleet.sandbox.extract import programs_key

        with self._lock:
            if self._fleet is None or self._pid != os.getpid():  # a forked child needs its own
                url = defaults.redis_url(self.redis_url)
                # dedupe in-flight jobs on the programs the worker could run (every fenced block,
                # any language), not the prose around them
                self._fleet = FleetClient(url, code_key=programs_key, **self.client_options)
                self._pid = os.getpid()
            return self._fleet

    def close(self) -> None:
        with self._lock:
            if self._fleet is not None and self._pid == os.getpid():
                self._fleet.close()
            self._fleet = None

    def __getstate__(self) -> dict[str, Any]:
        return {"redis_url": self.redis_url, "client_options": self.client_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["redis_url"], state["client_options"])  # type: ignore[misc]
