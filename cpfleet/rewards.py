"""Reward functions in the shapes trainers call, over one FleetClient: TRL and verl.

What every adapter does, by case (docs/trainers.md has the same as a table):

- judged (any verdict from OK to NO_CODE): the reward, a number; a failing program is an
  ordinary reward, never an exception.
- an infrastructure error (INTERNAL: sandbox, worker, Redis, deadline): TRL gets ``None`` (the
  sample is masked), verl gets ``infra_score`` with ``infra_error=1`` after ``retries`` more
  attempts. Never a silent 0 in TRL, and always flagged in verl.
- the same, for ``max_infra_calls`` consecutive calls (default 5) in which not one sample was
  judged: the call raises ``FleetUnusable``, so a run with a wrong URL or no worker stops
  instead of training on no signal. One judged sample resets the count.
- an unknown problem id (UNKNOWN_PROBLEM): raises ``UnknownProblemError`` naming the ids; it is
  the caller's mistake (a typo, ``cpfleet load`` not run), permanent, never retried or scored.
- unusable inline tests: raises ``InlineProblemError`` with the reason, before anything is sent.
- a missing dataset column (TRL): raises ``KeyError`` naming the columns it got.

**TRL** (``GRPOTrainer(reward_funcs=[TRLReward(...)])``): TRL calls a reward function with
``prompts=``, ``completions=``, ``completion_ids=`` and every dataset column as keyword lists,
and wants one ``float | None`` per completion. ``None`` means "not applicable": TRL turns it
into NaN and (since v1.6) drops the row from the group's mean and std, the only way a trainer
can mask a sample, so an infrastructure error is ``None``, never 0.
``TRLReward`` is picklable (AsyncGRPOTrainer pickles reward functions into its rollout
process) and connects to Redis on first use, in the process that uses it. ``AsyncTRLReward``
is the asyncio twin: TRL detects it with ``inspect.iscoroutinefunction`` and runs it on its
own event loop; it binds to whichever loop runs it first.

**verl** (``custom_reward_function.path=<this file> name=compute_score``):
``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)`` returns a
dict with always the same keys (verl crashes or drops columns when keys vary):

- ``score``: the reward (``reward_shape``: all_or_nothing or fraction). verl has no way to
  drop a sample, so on an infrastructure error ``score`` is ``infra_score`` (default 0.0)
  after ``retries`` more attempts (default 2); ``infra_error`` says which samples those were
  (an unknown problem id raises instead, see above).
- ``acc``: 1.0 when every rewarded test passed, else 0.0.
- ``verdict``: an integer code (``VERDICT_CODES``; verl averages every key, so no strings).
- ``infra_error``: 1 or 0. ``pass_rate``: rewarded tests passed / total; under all_or_nothing
  the judging stops at the first failing test, which runs early once the fleet has learnt which
  tests fail most (docs/failfast.md), so there it is a lower bound: ask ``reward_shape="fraction"``
  for every test's outcome. ``num_tests``: total.

``ground_truth`` is a problem id or inline tests (a dict/list, or its JSON text). Settings come
from ``custom_reward_function.reward_kwargs`` (``redis_url``, ``reward_shape``, ``mode``,
``timeout_s``, ``retries``, ``infra_score``, ``max_infra_calls``) or the ``CPFLEET_REDIS_URL``
environment variable.
``compute_score_async`` is the same for verl's reward loop (awaited directly) and
``compute_score_batch`` takes the lists verl's ``batch`` reward manager passes.

Over 500 lines because each adapter's behaviour per case is documented beside its code, and
the TRL and verl adapters share one FleetClient and one infra-error policy.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cpfleet.core import defaults
from cpfleet.core.errors import (
    FleetUnusable,
    InlineProblemError,
    JobFormatError,
    OptionError,
    UnknownProblemError,
)
from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict

log = logging.getLogger("cpfleet.rewards")

DEFAULT_TIMEOUT_S = 900.0
DEFAULT_MAX_INFRA_CALLS = 5  # consecutive calls with nothing judged before FleetUnusable

# Stable integer codes for verl (which averages every returned key); never renumber.
VERDICT_CODES: dict[str, int] = {
    "OK": 0,
    "WRONG_ANSWER": 1,
    "TIME_LIMIT": 2,
    "MEMORY_LIMIT": 3,
    "RUNTIME_ERROR": 4,
    "OUTPUT_LIMIT": 5,
    "COMPILE_ERROR": 6,
    "NO_CODE": 7,
    "UNKNOWN_PROBLEM": 8,
    "INTERNAL": 9,
}
OTHER_VERDICT_CODE = 99  # a verdict this table does not know yet

VERL_KEYS = ("score", "acc", "verdict", "infra_error", "pass_rate", "num_tests")


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


def column_target(value: Any) -> str | Any:
    """A ``tests_column`` value: inline tests or a problem id (:func:`problem_ref`); a verl
    ``reward_model`` cell (``{"ground_truth": ..., "style": "rule"}``) is read as its
    ``ground_truth``, what verl's own ``compute_score`` gets, so a verl parquet trains under TRL
    with ``tests_column="reward_model"``."""
    if isinstance(value, Mapping) and "ground_truth" in value and set(value) <= {"ground_truth", "style"}:
        value = value["ground_truth"]
    return problem_ref(value) if isinstance(value, str) else value


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
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise OptionError(f"max_infra_calls must be an int >= 1, got {limit!r}")
        self.limit = limit
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


class _Connection:
    """A FleetClient made on first use in this process; never pickled (a new process makes its own)."""

    def __init__(self, redis_url: str | None, client_options: Mapping[str, Any] | None = None) -> None:
        defaults.redis_target(redis_url)  # a bad URL raises RedisUrlError now, not a None reward per sample later
        self.redis_url = redis_url
        self.client_options = dict(client_options or {})
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


class _TRLCore:
    """What TRLReward and AsyncTRLReward share: settings, the lazy connection, the row logic."""

    def __init__(
        self,
        redis_url: str | None,
        *,
        problem_id_column: str,
        tests_column: str | None,
        reward_shape: str,
        mode: str,
        timeout_s: float,
        name: str,
        queue: str | None,
        max_infra_calls: int = DEFAULT_MAX_INFRA_CALLS,
    ) -> None:
        from cpfleet.core.protocol import check_options

        check_options(reward_shape, mode)
        if timeout_s <= 0:
            raise OptionError(f"timeout_s must be > 0, got {timeout_s}")
        self.problem_id_column = problem_id_column
        self.tests_column = tests_column
        self.reward_shape = reward_shape
        self.mode = mode
        self.timeout_s = timeout_s
        self.name = name
        self.conn = _Connection(redis_url, {"queue": queue} if queue else None)
        self.streak = InfraStreak(max_infra_calls)
        self.last_error = ""  # the last infrastructure failure of a whole call, for FleetUnusable

    def targets(self, n: int, kwargs: Mapping[str, Any]) -> list[Any]:
        """Per completion: its problem id or inline tests, from the configured dataset column."""
        column = self.tests_column or self.problem_id_column
        if column not in kwargs:
            shown = ", ".join(sorted(k for k in kwargs if k not in _TRL_NON_COLUMNS)) or "none"
            raise KeyError(f"{self.name}: dataset column {column!r} not passed by the trainer (columns: {shown})")
        values = list(kwargs[column])
        if len(values) != n:
            raise JobFormatError(f"{self.name}: column {column!r} has {len(values)} values for {n} completions")
        if self.tests_column:
            return [column_target(v) for v in values]
        return [str(v) for v in values]

    def rewards(
        self,
        results: Sequence[JobResult | None],
        log_metric: Callable[[str, float], Any] | None,
        log_extra: Callable[[str, list[Any]], Any] | None = None,
    ) -> list[float | None]:
        raise_for_unknown_problems(results, self.name)
        out = [None if r is None or r.infra_error else r.reward for r in results]
        if log_extra is not None and results:
            try:  # one verdict per completion, beside it in TRL's completions table
                log_extra(f"{self.name}_verdict", ["INFRA" if r is None else str(r.verdict) for r in results])
            except Exception:
                log.exception("%s: log_extra failed", self.name)
        if log_metric is not None and results:
            counts = Counter("INFRA" if r is None else str(r.verdict) for r in results)
            try:
                for verdict, count in sorted(counts.items()):
                    log_metric(f"{self.name}/verdict/{verdict}", count / len(results))
                masked = sum(1 for v in out if v is None)
                log_metric(f"{self.name}/masked", masked / len(results))
            except Exception:  # a logging hook must never stop a training step
                log.exception("%s: log_metric failed", self.name)
        self.streak.record(results, self.name, self.last_error)
        self.last_error = ""
        return out


_TRL_NON_COLUMNS = frozenset({"trainer_state", "log_extra", "log_metric", "environments", "prompts", "completion_ids"})


class TRLReward:
    """A TRL reward function backed by the fleet (see the module docstring).

    ``problem_id_column``: the dataset column holding problem ids registered in the fleet's store;
    ``tests_column``: or a column holding inline tests (any shape cpfleet.producer.inline_registry takes);
    ``reward_shape``: ``all_or_nothing`` or ``fraction``; ``mode``: ``full`` or ``public``;
    ``timeout_s``: after that a job is an infrastructure error (``None``);
    ``max_infra_calls``: calls in a row with nothing judged before it raises ``FleetUnusable``.
    What it returns or raises in each case: the module docstring.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        problem_id_column: str = "problem_id",
        tests_column: str | None = None,
        reward_shape: str = "all_or_nothing",
        mode: str = "full",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        name: str = "cpfleet",
        queue: str | None = None,
        max_infra_calls: int = DEFAULT_MAX_INFRA_CALLS,
    ) -> None:
        self._core = _TRLCore(
            redis_url,
            problem_id_column=problem_id_column,
            tests_column=tests_column,
            reward_shape=reward_shape,
            mode=mode,
            timeout_s=timeout_s,
            name=name,
            queue=queue,
            max_infra_calls=max_infra_calls,
        )
        self.__name__ = name  # TRL logs rewards under reward_func.__name__

    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        completion_ids: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        core = self._core
        completions = list(completions or [])
        targets = core.targets(len(completions), kwargs)
        results: list[JobResult | None] = [None] * len(completions)
        try:
            fleet = core.conn.fleet()
            jobs, index = [], []
            for i, (target, completion) in enumerate(zip(targets, completions, strict=True)):
                job = _job(fleet, target, completion_text(completion), core)
                if job is not None:
                    jobs.append(job)
                    index.append(i)
            futures = fleet.submit_many(jobs, reward_shape=core.reward_shape, mode=core.mode, timeout=core.timeout_s)
            for i, fut in zip(index, futures, strict=True):
                try:
                    results[i] = fut.result(timeout=core.timeout_s + 30)
                except Exception as e:  # the client's own deadline should have answered first
                    log.error("%s: no result for completion %d: %s", core.name, i, e)
        except (InlineProblemError, UnknownProblemError):
            raise  # broken data in the dataset column: the caller's to fix, never a masked sample
        except Exception as e:  # Redis unreachable, client closed: infrastructure, masked
            log.exception("%s: the fleet could not judge this batch; its rewards are None", core.name)
            core.last_error = f"{type(e).__name__}: {e}"
        return core.rewards(results, kwargs.get("log_metric"), kwargs.get("log_extra"))

    def close(self) -> None:
        self._core.conn.close()


def _job(fleet: Any, target: Any, text: str, core: _TRLCore) -> dict[str, Any] | None:
    """A submit_many job; unusable inline tests raise InlineProblemError (the dataset's fault)."""
    if isinstance(target, str):
        return {"problem_id": target, "completion": text}
    try:
        return {"problem_id": fleet.inline_registry.problem_id(target), "completion": text}
    except InlineProblemError as e:
        raise InlineProblemError(f"{core.name}: unusable inline tests in column {core.tests_column!r}: {e}") from e


async def _trl_reward_async(
    core: _TRLCore,
    prompts: Sequence[Any] | None = None,
    completions: Sequence[Any] | None = None,
    completion_ids: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[float | None]:
    completions = list(completions or [])
    targets = core.targets(len(completions), kwargs)

    async def one(target: Any, completion: Any) -> JobResult | None:
        try:
            fleet = core.conn.fleet()
            return await fleet.evaluate(
                target,
                completion_text(completion),
                reward_shape=core.reward_shape,
                mode=core.mode,
                timeout=core.timeout_s,
            )
        except (InlineProblemError, UnknownProblemError):
            raise  # broken data in the dataset column: the caller's to fix
        except Exception as e:  # Redis unreachable, client closed: masked
            log.error("%s: could not judge a completion (reward None): %s", core.name, e)
            core.last_error = f"{type(e).__name__}: {e}"
            return None

    results = await asyncio.gather(*(one(t, c) for t, c in zip(targets, completions, strict=True)))
    return core.rewards(results, kwargs.get("log_metric"), kwargs.get("log_extra"))


class AsyncTRLReward(functools.partial[Any]):
    """The asyncio twin of TRLReward (same arguments).

    It is a ``functools.partial`` of a module-level ``async def``, so
    ``inspect.iscoroutinefunction`` sees through it on every Python version TRL supports, and it
    pickles (module-level function plus a settings object whose connection is not pickled).
    """

    def __new__(cls, redis_url: str | None = None, **options: Any) -> AsyncTRLReward:
        name = options.setdefault("name", "cpfleet")
        options.setdefault("problem_id_column", "problem_id")
        options.setdefault("tests_column", None)
        options.setdefault("reward_shape", "all_or_nothing")
        options.setdefault("mode", "full")
        options.setdefault("timeout_s", DEFAULT_TIMEOUT_S)
        options.setdefault("queue", None)
        options.setdefault("max_infra_calls", DEFAULT_MAX_INFRA_CALLS)
        self = super().__new__(cls, _trl_reward_async, _TRLCore(redis_url, **options))
        self.__dict__["__name__"] = name  # TRL logs rewards under reward_func.__name__
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_async, (self.args[0], self.__dict__["__name__"]))

    def close(self) -> None:
        self.args[0].conn.close()


def _rebuild_async(core: _TRLCore, name: str) -> AsyncTRLReward:
    self = functools.partial.__new__(AsyncTRLReward, _trl_reward_async, core)
    self.__dict__["__name__"] = name
    return self


# --- verl ----------------------------------------------------------------------------------------

_VERL_CONNECTIONS: dict[tuple[str | None, str | None], _Connection] = {}
_VERL_STREAKS: dict[tuple[str | None, str | None], InfraStreak] = {}
_VERL_LOCK = threading.Lock()


def _verl_streak(opts: Mapping[str, Any]) -> InfraStreak:
    """One streak per fleet (URL, queue) in this process: verl calls compute_score per sample."""
    with _VERL_LOCK:
        streak = _VERL_STREAKS.get((opts["redis_url"], opts["queue"]))
        if streak is None or streak.limit != opts["max_infra_calls"]:
            streak = _VERL_STREAKS[(opts["redis_url"], opts["queue"])] = InfraStreak(opts["max_infra_calls"])
        return streak


def _verl_fleet(redis_url: str | None, queue: str | None) -> Any:
    with _VERL_LOCK:
        conn = _VERL_CONNECTIONS.get((redis_url, queue))
        if conn is None:
            conn = _Connection(redis_url, {"queue": queue} if queue else None)
            _VERL_CONNECTIONS[(redis_url, queue)] = conn
    return conn.fleet()


def close_verl_connections() -> None:
    """Close the clients compute_score opened in this process (tests, clean shutdowns)."""
    with _VERL_LOCK:
        conns = list(_VERL_CONNECTIONS.values())
        _VERL_CONNECTIONS.clear()
        _VERL_STREAKS.clear()
    for c in conns:
        c.close()


def score_dict(result: JobResult | None, *, infra_score: float = 0.0) -> dict[str, Any]:
    """The fixed-key verl dict for one result (None: it could not be judged at all)."""
    if result is None or result.infra_error:
        verdict = Verdict.INTERNAL if result is None else result.verdict
        return {
            "score": float(infra_score),
            "acc": 0.0,
            "verdict": VERDICT_CODES.get(str(verdict), OTHER_VERDICT_CODE),
            "infra_error": 1,
            "pass_rate": 0.0,
            "num_tests": 0,
        }
    rewarded = result.hidden if result.hidden.total and result.mode == "full" else result.public
    total = rewarded.total
    passed = rewarded.passed
    return {
        "score": float(result.reward or 0.0),
        "acc": 1.0 if total and passed == total and result.verdict not in (Verdict.NO_CODE, Verdict.COMPILE_ERROR) else 0.0,
        "verdict": VERDICT_CODES.get(str(result.verdict), OTHER_VERDICT_CODE),
        "infra_error": 0,
        "pass_rate": passed / total if total else 0.0,
        "num_tests": int(total),
    }


def _verl_options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    # a bad URL is the caller's mistake: RedisUrlError now, never an infra score per sample
    defaults.redis_target(kwargs.get("redis_url"))
    return {
        "redis_url": kwargs.get("redis_url"),
        "queue": kwargs.get("queue"),
        "reward_shape": kwargs.get("reward_shape", "all_or_nothing"),
        "mode": kwargs.get("mode", "full"),
        "timeout_s": float(kwargs.get("timeout_s", DEFAULT_TIMEOUT_S)),
        "retries": int(kwargs.get("retries", 2)),
        "infra_score": float(kwargs.get("infra_score", 0.0)),
        "max_infra_calls": kwargs.get("max_infra_calls", DEFAULT_MAX_INFRA_CALLS),
    }


def _worth_retrying(result: JobResult | None) -> bool:
    return result is None or (result.infra_error and result.verdict != Verdict.UNKNOWN_PROBLEM)


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's ``batch`` reward manager form: lists in, one fixed-key dict per sample out."""
    opts = _verl_options(kwargs)
    streak = _verl_streak(opts)
    n = len(solution_strs)
    results: list[JobResult | None] = [None] * n
    todo = list(range(n))
    last_error = ""
    for _attempt in range(1 + max(0, opts["retries"])):
        try:
            fleet = _verl_fleet(opts["redis_url"], opts["queue"])
            jobs, index = [], []
            for i in todo:
                target = problem_ref(ground_truths[i])
                try:
                    pid = target if isinstance(target, str) else fleet.inline_registry.problem_id(target)
                except InlineProblemError as e:  # broken data, not the model: the caller's to fix
                    raise InlineProblemError(f"compute_score: unusable inline tests in ground_truth of sample {i}: {e}") from e
                jobs.append({"problem_id": pid, "completion": solution_strs[i]})
                index.append(i)
            futures = fleet.submit_many(jobs, reward_shape=opts["reward_shape"], mode=opts["mode"], timeout=opts["timeout_s"])
            for i, fut in zip(index, futures, strict=True):
                try:
                    results[i] = fut.result(timeout=opts["timeout_s"] + 30)
                except Exception as e:
                    log.error("compute_score: no result for sample %d: %s", i, e)
        except (InlineProblemError, UnknownProblemError):
            raise
        except Exception as e:
            log.exception("compute_score: the fleet could not judge this batch")
            last_error = f"{type(e).__name__}: {e}"
        todo = [i for i in todo if _worth_retrying(results[i])]
        if not todo:
            break
    raise_for_unknown_problems(results, "compute_score")
    streak.record(results, "compute_score", last_error)
    return [score_dict(r, infra_score=opts["infra_score"]) for r in results]


def compute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """verl's custom reward function (one sample; see the module docstring for the keys)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]


async def compute_score_async(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """The same as compute_score for verl's reward loop, which awaits it: many samples scored
    concurrently share Redis round trips through the client's micro-batcher."""
    opts = _verl_options(kwargs)
    streak = _verl_streak(opts)
    target = problem_ref(ground_truth)
    result: JobResult | None = None
    last_error = ""
    for _attempt in range(1 + max(0, opts["retries"])):
        try:
            fleet = _verl_fleet(opts["redis_url"], opts["queue"])
            result = await fleet.evaluate(
                target, solution_str, reward_shape=opts["reward_shape"], mode=opts["mode"], timeout=opts["timeout_s"]
            )
        except InlineProblemError as e:  # broken data, not the model: the caller's to fix
            raise InlineProblemError(f"compute_score_async: unusable inline tests in ground_truth: {e}") from e
        except UnknownProblemError:
            raise  # refused at submit: the caller's to fix, never a masked sample
        except Exception as e:
            log.exception("compute_score_async: the fleet could not judge this sample")
            last_error = f"{type(e).__name__}: {e}"
            result = None
        if not _worth_retrying(result):
            break
    raise_for_unknown_problems([result], "compute_score_async")
    streak.record([result], "compute_score_async", last_error)
    return score_dict(result, infra_score=opts["infra_score"])
