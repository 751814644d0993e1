"""Inline problems: jobs that carry their tests instead of a ``problem_id``.

Trainers keep the tests in a dataset column (code_contests, TACO/APPS ``input_output``,
LiveCodeBench, PrimeIntellect ``verification_info``, verl ``{"inputs", "outputs"}``), so a job
may be ``{"tests": ..., "completion": ...}``. Workers only ever read problems from the store, so
the client turns each distinct test set into a stored problem once and submits by id:

- the id is content-addressed, ``inline/<hash of the canonical JSON of the tests>``: a GRPO
  group (G completions of one prompt) shares one id, re-running a dataset finds its problems
  already stored, and two trainers sending the same tests share one stored problem;
- registration goes through the problem store's ``register_problems`` (which compares versions
  first), and this process remembers which hashes it registered, so the same tests cost one
  Redis round trip the first time and none after that;
- concurrent first uses of one test set (a GRPO group submitted from many coroutines or
  threads at once) wait for the single registration in flight instead of each sending it.

The conversion from a dataset's shape to the problem format is ``cpfleet.producer.inline
.problem_from_tests`` when that module is installed; a minimal converter for the stdio shapes
(code_contests, ``{"inputs","outputs"}``, a list of ``{"input","output"}``) stands in
otherwise and refuses function-call tests rather than judging them as stdio.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import redis

INLINE_PREFIX = "inline/"


class InlineTestsError(ValueError):
    """Inline tests in a shape that cannot be turned into a problem (a caller error, 4xx)."""


def tests_digest(tests: Any) -> str:
    """A stable hash of a test set: the canonical JSON (sorted keys) of whatever shape it has.

    A JSON string is parsed first, so the string and the object it encodes hash alike.
    """
    value = _parsed(tests)
    try:
        blob = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise InlineTestsError(f"inline tests must be JSON data: {e}") from None
    return hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def inline_problem_id(tests: Any) -> str:
    return INLINE_PREFIX + tests_digest(tests)


def _parsed(tests: Any) -> Any:
    if isinstance(tests, bytes):
        tests = tests.decode("utf-8", "replace")
    if isinstance(tests, str):
        try:
            return json.loads(tests)
        except json.JSONDecodeError as e:
            raise InlineTestsError(f"inline tests are a string but not JSON: {e}") from None
    return tests


def _converter() -> Callable[..., Any]:
    """The project's dataset converter when present, else the minimal stdio one below."""
    try:
        from cpfleet.producer.inline import problem_from_tests  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return minimal_problem_from_tests
    return problem_from_tests  # type: ignore[no-any-return,unused-ignore]


def problem_record(tests: Any, problem_id: str | None = None) -> dict[str, Any]:
    """The problem-format record for inline ``tests`` under ``problem_id`` (default: content id)."""
    pid = problem_id or inline_problem_id(tests)
    convert = _converter()
    try:
        record = convert(_parsed(tests), problem_id=pid)
    except InlineTestsError:
        raise
    except (ValueError, TypeError, KeyError) as e:
        raise InlineTestsError(f"cannot use these inline tests: {e}") from None
    if hasattr(record, "to_dict"):
        record = record.to_dict()
    if not isinstance(record, dict):
        raise InlineTestsError(f"converter returned {type(record).__name__}, not a problem record")
    record = dict(record)
    record["id"] = pid
    return record


def minimal_problem_from_tests(tests: Any, *, problem_id: str) -> dict[str, Any]:
    """Stdio test sets only: code_contests, ``{"inputs", "outputs"}``, ``[{"input", "output"}]``.

    All tests become hidden tests (the reward), the first one also public (the feedback), as
    the project's dataset preparation does for sets without a public split.
    """
    public: list[dict[str, str]] = []
    hidden: list[dict[str, str]] = []
    if isinstance(tests, Mapping) and any(k in tests for k in ("public_tests", "private_tests", "generated_tests")):
        public = _pairs(tests.get("public_tests"))
        hidden = _pairs(tests.get("private_tests")) + _pairs(tests.get("generated_tests"))
    elif isinstance(tests, Mapping) and "inputs" in tests and "outputs" in tests:
        if tests.get("fn_name"):
            raise InlineTestsError("function-call tests (fn_name) need cpfleet.producer.inline, which is not installed")
        hidden = _pairs({"input": tests["inputs"], "output": tests["outputs"]})
    elif isinstance(tests, list) and all(isinstance(t, Mapping) for t in tests):
        for t in tests:
            kind = t.get("testtype") or t.get("type") or "stdin"
            if kind not in ("stdin", "stdin_stdout"):
                raise InlineTestsError(f"test type {kind!r} needs cpfleet.producer.inline, which is not installed")
            hidden.extend(_pairs({"input": [t.get("input")], "output": [t.get("output")]}))
    else:
        raise InlineTestsError(
            "inline tests must be code_contests ({public_tests, private_tests, ...}), "
            "{inputs, outputs} or a list of {input, output}"
        )
    if not public and not hidden:
        raise InlineTestsError("inline tests hold no test case")
    if not public:
        public = hidden[:1]
    if not hidden:
        hidden = list(public)
    return {"id": problem_id, "public_tests": public, "hidden_tests": hidden}


def _pairs(block: Any) -> list[dict[str, str]]:
    if block is None:
        return []
    if not isinstance(block, Mapping):
        raise InlineTestsError("a test block must be {input: [...], output: [...]}")
    ins, outs = block.get("input"), block.get("output")
    if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
        raise InlineTestsError("a test block needs input and output lists of one length")
    pairs = []
    for i, o in zip(ins, outs, strict=True):
        if isinstance(o, list) and len(o) == 1:  # TACO wraps some expected outputs in a list
            o = o[0]
        if not isinstance(i, str) or not isinstance(o, str):
            raise InlineTestsError("stdio test input and output must be strings")
        pairs.append({"input": i, "output": o})
    return pairs


class InlineRegistry:
    """Register each distinct inline test set once per process; thread-safe.

    ``max_remembered`` bounds the memory of registered hashes (an LRU): forgetting one only
    costs a version check (one round trip, nothing written) the next time it is used.
    """

    def __init__(self, client: redis.Redis, *, max_remembered: int = 100_000) -> None:
        self._redis = client
        self._max = max_remembered
        self._lock = threading.Lock()
        self._known: OrderedDict[str, None] = OrderedDict()
        self._inflight: dict[str, threading.Event] = {}
        self.registered = 0  # test sets this process sent to the store (new or re-checked)

    def problem_id(self, tests: Any) -> str:
        """The stored problem id for ``tests``, registering them first if this process has not."""
        pid = inline_problem_id(tests)
        while True:
            with self._lock:
                if pid in self._known:
                    self._known.move_to_end(pid)
                    return pid
                waiter = self._inflight.get(pid)
                if waiter is None:
                    done = threading.Event()
                    self._inflight[pid] = done
                    break
            waiter.wait()  # another caller is registering the same set; then look again
        try:
            record = problem_record(tests, pid)
            from cpfleet.core.store import register_problems
            from cpfleet.core.problem import ProblemFormatError

            try:
                register_problems(self._redis, [record])
            except ProblemFormatError as e:
                raise InlineTestsError(f"inline tests do not make a valid problem: {e}") from None
            with self._lock:
                self._known[pid] = None
                self.registered += 1
                while len(self._known) > self._max:
                    self._known.popitem(last=False)
            return pid
        finally:
            with self._lock:
                self._inflight.pop(pid, None)
            done.set()

    def resolve_job(self, job: Mapping[str, Any]) -> Mapping[str, Any]:
        """A job with ``tests`` and no ``problem_id`` becomes the same job with the stored id."""
        if job.get("problem_id") or "tests" not in job:
            return job
        out = {k: v for k, v in job.items() if k != "tests"}
        out["problem_id"] = self.problem_id(job["tests"])
        return out
