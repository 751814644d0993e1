"""The wire protocol, in one place: task name, message fields, Redis key names, versions.

Imported by both the producer (trainer side) and the workers. Imports neither celery nor
the sandbox's execution machinery: only msgpack and the standard library.

A job travels as the single positional argument of the Celery task ``TASK_NAME`` (Celery
message protocol v2, msgpack body). Its result comes back as one msgpack message appended by
the worker to the client's reply stream (``reply_stream_key(client_id)``), or LPUSHed with an
expiry to its reply list (``reply_key(client_id)``) where there is no stream: there is no
Celery result backend. A run job (``RunMessage``: a program and its stdins, nothing judged)
travels the same way as the argument of ``RUN_TASK_NAME`` and is answered on the same list.

Over 500 lines on purpose: it is the one home of every name both sides of the queue must agree
on (messages, keys, versions); split, the agreement would live in several places again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import msgpack

from cpfleet.core.errors import OptionError, ProtocolError

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


def fail_count_field(index: int) -> str:
    """The field of the problem's hash (``problem_key``) that counts how often its hidden test
    ``index`` (0-based, file order) was the failure that ended an all-or-nothing job. Workers
    run the most-failed tests first (``workers.failorder``) and read the counts with the
    version in one ``HMGET`` (``workers.withdrawal.admit``); the store drops them when it writes
    a changed problem, and they go with the hash when it is deleted."""
    return f"{PROBLEM_FAIL_FIELD_PREFIX}{index}"


PROBLEM_FAIL_FIELD_PREFIX = "fail:"
# Counts are kept and read for the first this many hidden tests (an HMGET names each field):
# a problem with more orders the rest by file order, never a reward change.
MAX_COUNTED_TESTS = 512


def fail_counts_key(problem_id: str) -> str:
    """The older key of a problem's fail counts (a hash per problem; they live in the problem's
    hash, ``fail_count_field``). Neither read nor written; the store deletes it with the
    problem, or when it writes a changed one, as older code may have left it."""
    return f"{KEY_PREFIX}:fails:{problem_id}"


# --- the evaluate task -------------------------------------------------------------------------

TASK_NAME = "cpfleet.evaluate"
DEFAULT_QUEUE = "cpfleet"  # a Redis list of that name (kombu's redis transport)
# full: public tests for the feedback, hidden tests for the reward; public: public tests only
# (they give the reward); hidden: the hidden tests only, full mode's reward without the feedback
# (for trainers that read the score alone: no public test is run for text nobody reads)
MODES = ("full", "public", "hidden")
# The default mode of the adapters whose caller reads the reward and never the feedback (TRL's
# reward function, verl's compute_score, OpenRLHF's /get_reward, slime's /slime): full mode's
# reward without the CPU of the public tests' feedback (a wrong completion runs none of them).
REWARD_ONLY_MODE = "hidden"
REWARD_SHAPES = ("all_or_nothing", "fraction")
DEFAULT_REPLY_TTL_S = 3600
# A completion larger than this is refused by the producer (and by the worker) instead of
# clogging Redis: a 10 MB completion still fits.
MAX_COMPLETION_BYTES = 32 * 1024 * 1024


def completion_size_error(job_id: object, size: int) -> str | None:
    """The one wording of the completion size limit, naming the job (every entry point refuses
    with it: the client, ``cpfleet judge``/``submit``'s JOBS reader, the worker), or None when
    ``size`` bytes fit."""
    if size <= MAX_COMPLETION_BYTES:
        return None
    return (f"job {job_id!r}: completion of {size} bytes exceeds the limit of {MAX_COMPLETION_BYTES} bytes"
            f" ({MAX_COMPLETION_BYTES // (1024 * 1024)} MiB)")


def encodes_as_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogates): msgpack can send only such a str,
    and no result naming it can be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def sendable_completion(completion: str) -> str | bytes:
    """A completion as a job message carries it: the text, or its bytes (``surrogatepass``) when
    UTF-8 cannot encode it (a lone UTF-16 surrogate, JSON's ``"\\ud800"`` escape), which msgpack
    cannot send as a str. The judge decodes bytes with errors replaced (``JobMessage``), so every
    path that sends a completion somewhere to be judged (the fleet's client, ``cpfleet judge``'s
    pool) judges the same program."""
    return completion if encodes_as_utf8(completion) else completion.encode("utf-8", "surrogatepass")


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
    language: str | None = None  # the solution's language (python3, pypy3, cpp, c, java); None: the problem's
    # The submitting client and the token of its claim on that id (``client_claim_key``): a
    # worker drops, unjudged, a job whose client no longer holds that claim (closed or dead) or
    # that the client cancelled. Absent (None) on messages of clients that predate them.
    client_id: str | None = None
    client_token: str | None = None
    # The client's reply stream (``reply_stream_key``): a worker that knows it appends the reply
    # there (``XADD ... NOMKSTREAM``), and to ``reply_to`` only when the stream is gone. Absent
    # (None) on messages of clients that predate it; workers that predate it use ``reply_to``.
    reply_stream: str | None = None
    v: int = PROTOCOL_VERSION

    task_name: ClassVar[str] = TASK_NAME

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
        if self.language is not None:
            d["language"] = self.language
        _put_client_fields(d, self.client_id, self.client_token, self.reply_stream)
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
        too_large = completion_size_error(d.get("job_id"), len(completion))
        if too_large is not None:
            raise ProtocolError(too_large)
        shape = d.get("reward_shape", "all_or_nothing")
        if shape not in REWARD_SHAPES:
            raise ProtocolError(f"unknown reward_shape {shape!r} (known: {', '.join(REWARD_SHAPES)})")
        mode = d.get("mode", "full")
        if mode not in MODES:
            raise ProtocolError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
        deadline, submitted_at, ttl = _timing(d, "job")
        language = d.get("language")
        if language is not None and (not isinstance(language, str) or not language):
            raise ProtocolError("job field 'language' must be a non-empty string or nil")
        client_id, client_token = _client_claim(d, "job")
        return cls(
            job_id=d["job_id"],
            problem_id=d["problem_id"],
            completion=completion,
            reply_to=d["reply_to"],
            reward_shape=shape,
            mode=mode,
            submitted_at=submitted_at,
            deadline=deadline,
            reply_ttl=ttl,
            use_cache=bool(d.get("use_cache", True)),
            language=language,
            client_id=client_id,
            client_token=client_token,
            reply_stream=_reply_stream(d, "job"),
        )


def _timing(d: Mapping[str, Any], kind: str) -> tuple[float | None, float, int]:
    """The ``deadline`` (epoch seconds, or None: no deadline), ``submitted_at`` (default 0) and
    ``reply_ttl`` (default ``DEFAULT_REPLY_TTL_S``) of a decoded ``kind`` ("job" or "run") message,
    checked: a worker does not run a job past its deadline, and its reply expires after ``reply_ttl``."""
    deadline = d.get("deadline")
    if deadline is not None and not isinstance(deadline, int | float):
        raise ProtocolError(f"{kind} field 'deadline' must be a number or nil")
    submitted_at = d.get("submitted_at", 0.0)
    if not isinstance(submitted_at, int | float):
        raise ProtocolError(f"{kind} field 'submitted_at' must be a number")
    ttl = d.get("reply_ttl", DEFAULT_REPLY_TTL_S)
    if not isinstance(ttl, int) or ttl <= 0:
        raise ProtocolError(f"{kind} field 'reply_ttl' must be a positive integer")
    return None if deadline is None else float(deadline), float(submitted_at), ttl


def _put_client_fields(d: dict[str, Any], client_id: str | None, client_token: str | None,
                       reply_stream: str | None) -> None:
    """Add a job's or run's client fields to its wire map ``d``: the claim only whole (a worker
    checks the token against the id's claim key), the reply stream where the client has one."""
    if client_id is not None and client_token is not None:
        d["client_id"] = client_id
        d["client_token"] = client_token
    if reply_stream is not None:
        d["reply_stream"] = reply_stream


def _client_claim(d: Mapping[str, Any], kind: str) -> tuple[str | None, str | None]:
    """The ``client_id`` and ``client_token`` of a decoded ``kind`` ("job" or "run") message:
    both or neither (a worker checks the token against the id's claim), each a non-empty string."""
    client_id, client_token = d.get("client_id"), d.get("client_token")
    if (client_id is None) != (client_token is None):
        raise ProtocolError(f"{kind} fields 'client_id' and 'client_token' come together or not at all")
    for name, value in (("client_id", client_id), ("client_token", client_token)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ProtocolError(f"{kind} field {name!r} must be a non-empty string")
    return client_id, client_token


def _reply_stream(d: Mapping[str, Any], kind: str) -> str | None:
    stream = d.get("reply_stream")
    if stream is not None and (not isinstance(stream, str) or not stream):
        raise ProtocolError(f"{kind} field 'reply_stream' must be a non-empty string or nil")
    return stream


def check_options(reward_shape: str, mode: str) -> None:
    """The one check of the judging options: every entry point (client, CLI, HTTP, the sandbox)
    calls it, so they accept and refuse exactly the same reward shapes and modes."""
    if reward_shape not in REWARD_SHAPES:
        raise OptionError(f"unknown reward shape {reward_shape!r} (known: {', '.join(REWARD_SHAPES)})")
    check_mode(mode)


def check_queue(queue: object) -> str:
    """``queue`` when a worker can consume it, else ``OptionError`` saying why. A worker names its
    queues as a comma-separated list of stripped names (``CPFLEET_QUEUES``, ``--queues``), so a
    name that is empty, holds a comma or begins or ends with blanks is one no worker ever takes:
    its jobs would wait in Redis until their deadline, with nothing said."""
    if not isinstance(queue, str) or not queue.strip():
        raise OptionError(f"a queue name must be non-empty text, got {queue!r} (the default is {DEFAULT_QUEUE!r})")
    if "," in queue:
        raise OptionError(f"queue name {queue!r} holds a comma: workers read their queues as a comma-separated "
                          f"list, so none could consume it; publish to one queue, named without commas")
    if queue != queue.strip():
        raise OptionError(f"queue name {queue!r} begins or ends with blanks: workers strip their queue names, "
                          f"so none would consume it; write {queue.strip()!r}")
    return queue


def check_mode(mode: str) -> None:
    """``OptionError`` naming every mode unless ``mode`` is one (``check_options``'s half that
    the problem loader and the judging rule need alone)."""
    if mode not in MODES:
        raise OptionError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")


def rewarded_tests(mode: str) -> Literal["hidden", "public"]:
    """The one rule of which tests decide a ``mode``'s reward and verdict: the public tests in
    public mode, the hidden tests in full and hidden mode (the public tests are shown to the
    model with their expected outputs, so rewarding them would pay for copying)."""
    return "public" if mode == "public" else "hidden"


def runs_public_tests(mode: str) -> bool:
    """Whether a ``mode``'s job runs the public tests first, for the feedback: every mode but
    hidden, whose caller reads the reward only (it runs them after the hidden tests, and only
    when those leave a reward, for full mode's limits: sandbox/env.py)."""
    return mode != "hidden"


def learns_fail_order(mode: str, reward_shape: str) -> bool:
    """Whether a job runs its hidden tests in the learnt fail-fast order and counts its first
    failure (``cpfleet.workers.failorder``): the hidden tests decide its reward and it stops at
    the first failure, so the order cannot change the reward."""
    return rewarded_tests(mode) == "hidden" and reward_shape == "all_or_nothing"


# --- the run task ------------------------------------------------------------------------------
# A run job: a program and one or many stdins -> what the program did on each (status, exit code,
# clipped stdout/stderr with their true sizes, CPU and wall time). No problem, no checker, no
# reward: the fleet executes, the caller judges (an agent's "run this code" tool, a
# SandboxFusion-/code-judge-style gateway). Same queue, same sandbox and limits as judging.

RUN_TASK_NAME = "cpfleet.run"
RUN_PROTOCOL_VERSION = 1
RUN_KIND = "run"  # the "kind" of a run message and of its reply's result
DEFAULT_RUN_OUTPUT_CAP = 4096  # bytes of stdout/stderr (each) sent back per input unless asked
MAX_RUN_OUTPUT_CAP = 8 * 1024 * 1024  # the most a caller may ask back per stream and input
MAX_RUN_INPUTS = 4096
MAX_RUN_PAYLOAD_BYTES = 64 * 1024 * 1024  # code + stdins + files of one run job
MAX_RUN_FILES = 64
# What one run job's reply may carry at most (stdout + stderr at the cap, fetched files, for
# every input): a bigger ask is refused, so no reply can flood Redis or the client.
MAX_RUN_REPLY_BYTES = 64 * 1024 * 1024
MAX_FETCH_FILES = 4  # the sandbox reads back at most 4 files per run ...
FETCH_FILE_BYTES = 12 * 1024  # ... of at most 12 KiB each (one 64 KiB control message)
# Limits of a run that sets none (SandboxFusion's and code-judge's run timeout is 10 s), and the
# most a run may ask for: more is refused, never silently lowered.
DEFAULT_RUN_TIME_LIMIT_S = 10.0
DEFAULT_RUN_MEMORY_MB = 1024
MAX_RUN_TIME_LIMIT_S = 60.0
MAX_START_WITHIN_S = 86400.0  # a run job's start window (RunMessage.start_within_s), at most a day
MAX_RUN_MEMORY_MB = 16384
MIN_RUN_MEMORY_MB = 16
# a placed or fetched file's name: bytes in all, and per part (Linux's NAME_MAX)
MAX_RUN_FILE_NAME_BYTES = 1024
# files and directories a run's placed files may make in all: a test directory is a tmpfs of 4096
# inodes (sandbox/isolation.py TestBox), which 64 names 500 directories deep would overflow
MAX_RUN_FILE_TREE = 1024
NAME_MAX = 255


def check_run_file_name(name: object) -> str:
    """A file name of a run job (``files`` / ``fetch_files``): a relative path inside the test's
    working directory: no absolute path, no empty, '.' or '..' part, no NUL, no trailing '/'.
    Raises ProtocolError (a ValueError) naming the problem; the same rule on both sides."""
    if not isinstance(name, str) or not name:
        raise ProtocolError(f"file name must be a non-empty string, got {name!r}")
    if name.startswith("/") or "\0" in name or name.endswith("/"):
        raise ProtocolError(f"file name {name!r} must be a relative path to a file (no leading or trailing '/', no NUL)")
    if any(p in ("", ".", "..") for p in name.split("/")):
        raise ProtocolError(f"file name {name!r} has an empty, '.' or '..' part")
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolError(f"file name {name!r} is not valid UTF-8") from None
    # what the file system refuses would fail the placing in the sandbox, the caller's mistake
    # answered as the fleet's INTERNAL: refused here instead
    if len(encoded) > MAX_RUN_FILE_NAME_BYTES or any(len(p.encode("utf-8")) > NAME_MAX for p in name.split("/")):
        raise ProtocolError(f"file name {name[:64]!r}... is too long (at most {MAX_RUN_FILE_NAME_BYTES} bytes, "
                            f"{NAME_MAX} per part)")
    return name


def check_run_file_layout(names: Iterable[str]) -> None:
    """Placed files must make one tree that the test directory can hold: a name that is also
    another's directory ("a" and "a/b") cannot be placed, nor more files and directories than
    ``MAX_RUN_FILE_TREE``, so either is refused as the caller's mistake, never a sandbox failure."""
    files = set(names)
    dirs: set[str] = set()
    for name in files:
        at = name.find("/")
        while at >= 0:  # each parent directory, sliced (not joined from parts: a gateway's event loop runs this)
            parent = name[:at]
            if parent in files:
                raise ProtocolError(f"file name {parent!r} is also the directory of {name!r}")
            dirs.add(parent)
            at = name.find("/", at + 1)
    if len(files) + len(dirs) > MAX_RUN_FILE_TREE:
        raise ProtocolError(f"the files and their directories number {len(files) + len(dirs)}, "
                            f"more than a test directory holds (at most {MAX_RUN_FILE_TREE})")


@dataclass(frozen=True, slots=True)
class RunMessage:
    """One run job on the wire (the argument of ``RUN_TASK_NAME``).

    ``code`` is the program itself in ``language`` when ``extract`` is False; when True it is a
    completion whose program is extracted as for judging (first fenced block; ``language``, if
    set, the only language accepted). ``stdins``: one run per entry, in order. ``files`` are
    placed (read-only) in each run's working directory; ``fetch_files`` are read back from it
    after each run. ``time_limit_s`` (CPU seconds) / ``memory_limit_mb``: None takes DEFAULT_RUN_*.
    ``output_cap``: bytes of stdout and of stderr sent back per run (the true sizes come too).
    ``start_within_s``: an input after the first that has not started this many seconds after
    the first did comes back NOT_RUN, for another job to run. The gateway sets it on a group of
    one program's calls, whose inputs run one after another on one slot: slow inputs then
    spread over the fleet instead of queueing past what their callers wait (None: no window).
    ``job_id`` is the publish attempt's wire id, as for JobMessage."""

    job_id: str
    reply_to: str
    code: str | bytes
    stdins: tuple[bytes, ...] = (b"",)
    language: str | None = None
    extract: bool = False
    files: Mapping[str, bytes] | None = None
    fetch_files: tuple[str, ...] = ()
    time_limit_s: float | None = None
    memory_limit_mb: int | None = None
    output_cap: int = DEFAULT_RUN_OUTPUT_CAP
    submitted_at: float = 0.0
    deadline: float | None = None
    reply_ttl: int = DEFAULT_REPLY_TTL_S
    client_id: str | None = None
    client_token: str | None = None
    reply_stream: str | None = None  # as JobMessage's
    start_within_s: float | None = None
    v: int = RUN_PROTOCOL_VERSION

    task_name: ClassVar[str] = RUN_TASK_NAME

    @property
    def problem_id(self) -> str:
        """Runs have no problem: "" where code shared with judge jobs reads one."""
        return ""

    def payload_bytes(self) -> int:
        """Bytes of code, stdins and files (what MAX_RUN_PAYLOAD_BYTES bounds)."""
        code = len(self.code) if isinstance(self.code, bytes) else len(self.code.encode("utf-8", "surrogatepass"))
        return code + sum(map(len, self.stdins)) + sum(len(v) for v in (self.files or {}).values())

    def to_wire(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "v": self.v,
            "kind": RUN_KIND,
            "job_id": self.job_id,
            "reply_to": self.reply_to,
            "code": self.code,
            "stdins": list(self.stdins),
            "extract": self.extract,
            "output_cap": self.output_cap,
            "submitted_at": self.submitted_at,
            "deadline": self.deadline,
            "reply_ttl": self.reply_ttl,
        }
        for name in ("language", "time_limit_s", "memory_limit_mb", "start_within_s"):
            value = getattr(self, name)
            if value is not None:
                d[name] = value
        if self.files:
            d["files"] = dict(self.files)
        if self.fetch_files:
            d["fetch_files"] = list(self.fetch_files)
        _put_client_fields(d, self.client_id, self.client_token, self.reply_stream)
        return d

    @classmethod
    def from_wire(cls, d: Any) -> RunMessage:
        """Validate a decoded run-task argument; raises ProtocolError naming the first problem."""
        if not isinstance(d, Mapping):
            raise ProtocolError(f"run job must be a map, got {type(d).__name__}")
        v = d.get("v")
        if v != RUN_PROTOCOL_VERSION or d.get("kind") != RUN_KIND:
            raise ProtocolError(f"unsupported run message (v={v!r}, kind={d.get('kind')!r}; "
                                f"this worker speaks v={RUN_PROTOCOL_VERSION} kind={RUN_KIND!r})")
        for name in ("job_id", "reply_to"):
            if not isinstance(d.get(name), str) or not d.get(name):
                raise ProtocolError(f"run field {name!r} must be a non-empty string")
        code = d.get("code")
        if not isinstance(code, str | bytes):
            raise ProtocolError("run field 'code' must be a string or bytes")
        stdins = d.get("stdins")
        if not isinstance(stdins, list | tuple) or not stdins:
            raise ProtocolError("run field 'stdins' must be a non-empty list")
        if len(stdins) > MAX_RUN_INPUTS:
            raise ProtocolError(f"run job has {len(stdins)} inputs, more than {MAX_RUN_INPUTS}")
        ins: list[bytes] = []
        for s in stdins:
            if isinstance(s, str):
                s = s.encode("utf-8", "surrogateescape")
            if not isinstance(s, bytes):
                raise ProtocolError("every stdin must be bytes or a string")
            ins.append(s)
        language = d.get("language")
        if language is not None and (not isinstance(language, str) or not language):
            raise ProtocolError("run field 'language' must be a non-empty string or nil")
        extract = d.get("extract", False)
        if not isinstance(extract, bool):
            raise ProtocolError("run field 'extract' must be a boolean")
        if not extract and language is None:
            raise ProtocolError("a run of raw code needs its 'language' (or 'extract': true for a fenced completion)")
        files = d.get("files") or {}
        if not isinstance(files, Mapping) or len(files) > MAX_RUN_FILES:
            raise ProtocolError(f"run field 'files' must be a map of at most {MAX_RUN_FILES} name -> bytes")
        placed: dict[str, bytes] = {}
        for name, data in files.items():
            check_run_file_name(name)
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogateescape")
            if not isinstance(data, bytes):
                raise ProtocolError(f"file {name!r}: content must be bytes or a string")
            placed[name] = data
        check_run_file_layout(placed)
        fetch = d.get("fetch_files") or []
        if not isinstance(fetch, list | tuple) or len(fetch) > MAX_FETCH_FILES:
            raise ProtocolError(f"run field 'fetch_files' must be a list of at most {MAX_FETCH_FILES} names")
        for name in fetch:
            check_run_file_name(name)
        time_limit = d.get("time_limit_s")
        if time_limit is not None and (not isinstance(time_limit, int | float) or isinstance(time_limit, bool)
                                       or not 0 < time_limit <= MAX_RUN_TIME_LIMIT_S):
            raise ProtocolError(f"run field 'time_limit_s' must be in (0, {MAX_RUN_TIME_LIMIT_S:g}] or nil")
        memory = d.get("memory_limit_mb")
        if memory is not None and (not isinstance(memory, int) or isinstance(memory, bool)
                                   or not MIN_RUN_MEMORY_MB <= memory <= MAX_RUN_MEMORY_MB):
            raise ProtocolError(f"run field 'memory_limit_mb' must be an integer in "
                                f"[{MIN_RUN_MEMORY_MB}, {MAX_RUN_MEMORY_MB}] or nil")
        window = d.get("start_within_s")
        if window is not None and (not isinstance(window, int | float) or isinstance(window, bool)
                                   or not 0 < window <= MAX_START_WITHIN_S):
            raise ProtocolError(f"run field 'start_within_s' must be in (0, {MAX_START_WITHIN_S:g}] or nil")
        cap = d.get("output_cap", DEFAULT_RUN_OUTPUT_CAP)
        if not isinstance(cap, int) or isinstance(cap, bool) or not 0 <= cap <= MAX_RUN_OUTPUT_CAP:
            raise ProtocolError(f"run field 'output_cap' must be an integer in [0, {MAX_RUN_OUTPUT_CAP}]")
        deadline, submitted_at, ttl = _timing(d, "run")
        client_id, client_token = _client_claim(d, "run")
        msg = cls(
            job_id=d["job_id"],
            reply_to=d["reply_to"],
            code=code,
            stdins=tuple(ins),
            language=language,
            extract=extract,
            files=placed or None,
            fetch_files=tuple(fetch),
            time_limit_s=None if time_limit is None else float(time_limit),
            memory_limit_mb=memory,
            output_cap=cap,
            submitted_at=submitted_at,
            deadline=deadline,
            reply_ttl=ttl,
            client_id=client_id,
            client_token=client_token,
            reply_stream=_reply_stream(d, "run"),
            start_within_s=None if window is None else float(window),
        )
        reply = len(msg.stdins) * (2 * msg.output_cap + len(msg.fetch_files) * FETCH_FILE_BYTES)
        if reply > MAX_RUN_REPLY_BYTES:
            raise ProtocolError(f"run job could answer {reply} bytes ({len(msg.stdins)} inputs x (2 x output_cap "
                                f"{msg.output_cap} + {len(msg.fetch_files)} fetched files x {FETCH_FILE_BYTES})), more "
                                f"than {MAX_RUN_REPLY_BYTES}: lower output_cap or split the inputs over several jobs")
        if msg.payload_bytes() > MAX_RUN_PAYLOAD_BYTES:
            raise ProtocolError(f"run job of {msg.payload_bytes()} bytes (code, stdins, files) exceeds {MAX_RUN_PAYLOAD_BYTES}")
        return msg


# --- worker liveness (workers.liveness) --------------------------------------------------------

# kombu's Redis transport keeps every message a consumer took and has not acked yet in the hash
# ``unacked`` (delivery tag -> [message, exchange, routing key]) and the sorted set
# ``unacked_index`` (delivery tag -> when it was taken): its default names, which cpfleet keeps.
KOMBU_UNACKED_KEY = "unacked"
KOMBU_UNACKED_INDEX_KEY = "unacked_index"
def kombu_binding_key(queue: str) -> str:
    """The set kombu's Redis transport writes when a consumer declares ``queue`` (a worker at
    start), and never removes: its absence means no worker ever consumed that queue here."""
    return f"_kombu.binding.{queue}"


# Task names whose messages the liveness sweep may requeue: cpfleet's own, never another app's.
TASK_NAME_PREFIX = f"{KEY_PREFIX}."


def nodes_key() -> str:
    """A hash: worker node -> ``"<alive-until epoch s> <delivery tag> ..."`` (its heartbeat). A
    lost node's field stays a while after its jobs were requeued (``workers.liveness``)."""
    return f"{KEY_PREFIX}:nodes"


def unheld_key() -> str:
    """A hash: delivery tag of an unacked message no live node lists -> since when (epoch s)."""
    return f"{KEY_PREFIX}:unheld"


def inflight_key(node: str) -> str:
    """A list: the messages worker ``node`` has taken off its queues and not yet acked, exactly as
    they were queued. The lean transport's pop moves a message here atomically (BLMOVE), so a
    node killed at any instant leaves each job it took in a key the liveness sweep reads."""
    return f"{KEY_PREFIX}:inflight:{node}"


def full_pause_key() -> str:
    """A list no one ever writes: a node waits on it (BLPOP with a timeout, which Redis serves
    while full) before it tries its pop again, when Redis at ``maxmemory`` refused that pop's
    move into its in-flight list."""
    return f"{KEY_PREFIX}:full-pause"


def sweep_lock_key() -> str:
    """Held for one sweep interval by the node that sweeps (one sweep per interval, fleet-wide)."""
    return f"{KEY_PREFIX}:sweep-lock"


# --- replies -----------------------------------------------------------------------------------


def reply_key(client_id: str) -> str:
    """The list a client reads results from when they do not come by its stream: replies of
    workers that predate the stream, of messages that name none, and of a stream that was gone.
    Each push gives it its expiry (``DEFAULT_REPLY_TTL_S`` or the job's)."""
    return f"{KEY_PREFIX}:reply:{client_id}"


def reply_stream_key(client_id: str) -> str:
    """The stream a client reads its results from (one entry per reply, field
    ``REPLY_STREAM_FIELD``). The client creates it, keeps its expiry while it lives and trims
    what it has delivered; workers append with ``XADD ... NOMKSTREAM``, which never creates it,
    so no worker leaves a key without an expiry behind a client that is gone, and no reply
    needs an EXPIRE of its own. A reply for a stream that is gone goes to ``reply_key``."""
    return f"{KEY_PREFIX}:replies:{client_id}"


REPLY_STREAM_FIELD = "r"


def reply_stream_ttl(reply_ttl: int) -> int:
    """The expiry a client keeps on its reply stream: ``reply_ttl``, but never below the claim's
    TTL, so that the claim's renewals (every quarter of it) always come before it lapses."""
    return max(reply_ttl, CLIENT_CLAIM_TTL_S)


def processing_key(client_id: str) -> str:
    """Where older clients' readers moved replies until they had delivered them. No client
    writes it (the reader reads and trims the reply list itself, ``producer.replies``); a
    closing client deletes it, as an older client of the same id may have left it."""
    return f"{KEY_PREFIX}:processing:{client_id}"


# A client holds its id exclusively while open (SET NX with this TTL, renewed by its reader), so
# two clients never pop, and steal, each other's replies from one list.
CLIENT_CLAIM_TTL_S = 60


def client_claim_key(client_id: str) -> str:
    """The key an open client holds (with an expiry) to own ``reply_key(client_id)``."""
    return f"{KEY_PREFIX}:client:{client_id}"


def cancelled_job_key(client_id: str, wire_id: str) -> str:
    """Exists (a string with an expiry) when this client cancelled the job of this wire id: a
    worker drops it unjudged. One key per cancelled job rather than one set per client, so
    that a worker reads the claim and the cancel in one ``MGET`` (``workers.withdrawal``).
    Wire ids end in 128 random bits, so no two clients' keys meet."""
    return f"{KEY_PREFIX}:withdrawn:{client_id}:{wire_id}"


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

# Bumped when the cached result's meaning or the key's layout changes, and when a judging rule
# changes the result a program gets (a result cached under the old rule, an unearned reward among
# them, would otherwise be served until it expires): 5 = Kattis tolerance flags read in order, an
# interactor's last reply to a program that left no longer lost; 6 = Kattis space_change_sensitive
# whitespace in the answer's places, an interactor's words kept out of a program's own failure;
# 7 = the fork servers' ``__builtins__`` (the module), a SystemExit from a program's excepthook
# (CPython) and PyPy's ``int()`` of a SystemExit code end a run as python3 and pypy3 do, and the
# PyPy fork server flushes every live file the program opened at exit; a failure's report runs no
# code of the program's (CPython: no module imported after it, no ``__traceback__`` property);
# CPython's test child flushes the C stdio streams at its end, as python3's exit() does.
RESULT_CACHE_FORMAT = 7


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
