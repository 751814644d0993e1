"""TRL's reward functions: ``TRLReward`` and its asyncio twin ``AsyncTRLReward``.

**TRL** (``GRPOTrainer(reward_funcs=[TRLReward(...)])``): TRL calls a reward function with
``prompts=``, ``completions=``, ``completion_ids=`` and every dataset column as keyword lists,
and wants one ``float | None`` per completion. ``None`` means "not applicable": TRL turns it
into NaN and (since v1.6) drops the row from the group's mean and std, the only way a trainer
can mask a sample, so an infrastructure error is ``None``, never 0.
``TRLReward`` is picklable (AsyncGRPOTrainer pickles reward functions into its rollout
process) and connects to Redis on first use, in the process that uses it. ``AsyncTRLReward``
is the asyncio twin: TRL detects it with ``inspect.iscoroutinefunction`` and runs it on its
own event loop; it binds to whichever loop runs it first.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cpfleet.core import options
from cpfleet.core.errors import InlineProblemError, JobFormatError, OptionError
from cpfleet.core.protocol import REWARD_ONLY_MODE
from cpfleet.core.results import JobResult
from cpfleet.rewards.common import (
    CALLER_ERRORS,
    DEFAULT_MAX_INFRA_CALLS,
    DEFAULT_TIMEOUT_S,
    Connection,
    InfraStreak,
    completion_text,
    limit_options,
    log,
    log_fleet_failure,
    problem_ref,
    raise_for_unknown_problems,
    with_limits,
)


def column_target(value: Any) -> str | Any:
    """A ``tests_column`` value: inline tests or a problem id (:func:`problem_ref`); a verl
    ``reward_model`` cell (``{"ground_truth": ..., "style": "rule"}``) is read as its
    ``ground_truth``, what verl's own ``compute_score`` gets, so a verl parquet trains under TRL
    with ``tests_column="reward_model"``."""
    if isinstance(value, Mapping) and "ground_truth" in value and set(value) <= {"ground_truth", "style"}:
        value = value["ground_truth"]
    return problem_ref(value) if isinstance(value, str) else value


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
        time_limit_s: float | None = None,
        memory_limit_mb: int | None = None,
    ) -> None:
        from cpfleet.core.protocol import check_options

        check_options(reward_shape, mode)
        options.seconds("timeout_s", timeout_s, none_ok=False)
        self.limits = limit_options(time_limit_s, memory_limit_mb)
        if self.limits and not tests_column:
            raise OptionError(f"{', '.join(self.limits)} apply to inline tests (tests_column); the problems of "
                              f"{problem_id_column!r} are judged under their stored limits")
        self.problem_id_column = problem_id_column
        self.tests_column = tests_column
        self.reward_shape = reward_shape
        self.mode = mode
        self.timeout_s = timeout_s
        self.name = name
        self.conn = Connection(redis_url, {"queue": queue} if queue else None)
        self.streak = InfraStreak(max_infra_calls)
        self.last_error = ""  # the last infrastructure failure of a whole call, for FleetUnusable

    def entries(self, values: Any, what: str) -> list[Any]:
        """``values`` as a list, one entry per completion. One string (or mapping) is refused: as
        a sequence it is its characters (keys), whose count then passes for the batch size."""
        if values is None:
            return []
        if isinstance(values, str | bytes | Mapping):
            raise JobFormatError(f"{self.name}: {what} must be a list with one entry per completion, "
                                 f"got one {type(values).__name__}: pass [value]")
        return list(values)

    def targets(self, n: int, kwargs: Mapping[str, Any]) -> list[Any]:
        """Per completion: its problem id or inline tests, from the configured dataset column."""
        column = self.tests_column or self.problem_id_column
        if column not in kwargs:
            shown = ", ".join(sorted(k for k in kwargs if k not in _TRL_NON_COLUMNS)) or "none"
            raise KeyError(f"{self.name}: dataset column {column!r} not passed by the trainer (columns: {shown})")
        values = self.entries(kwargs[column], f"column {column!r}")
        if len(values) != n:
            raise JobFormatError(f"{self.name}: column {column!r} has {len(values)} values for {n} completions")
        if self.tests_column:
            where = f"{self.name}: column {column!r}"
            return [with_limits(column_target(v), self.limits, where) for v in values]
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
    ``reward_shape``: ``all_or_nothing`` or ``fraction``; ``mode``: ``hidden`` (the default: TRL
    reads the rewards only, so the hidden tests run first and a wrong completion runs none of
    the public tests, which make the feedback text; the reward is full mode's), ``full`` or ``public``;
    ``timeout_s``: after that a job is an infrastructure error (``None``);
    ``max_infra_calls``: calls in a row with nothing judged before it raises ``FleetUnusable``;
    ``time_limit_s`` / ``memory_limit_mb``: the limits of the inline tests of ``tests_column``
    (default: what the tests state, else the project's 2 s / 512 MB), e.g. 6 s for
    LiveCodeBench and DeepCoder rows as their graders give; a problem id in that column is then a
    JobFormatError (a stored problem is judged under its own limits).
    What it returns or raises in each case: the module docstring.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        problem_id_column: str = "problem_id",
        tests_column: str | None = None,
        reward_shape: str = "all_or_nothing",
        mode: str = REWARD_ONLY_MODE,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        name: str = "cpfleet",
        queue: str | None = None,
        max_infra_calls: int = DEFAULT_MAX_INFRA_CALLS,
        time_limit_s: float | None = None,
        memory_limit_mb: int | None = None,
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
            time_limit_s=time_limit_s,
            memory_limit_mb=memory_limit_mb,
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
        completions = core.entries(completions, "completions")
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
        except CALLER_ERRORS:
            raise  # broken data in the dataset column or a malformed call: the caller's to fix, never masked
        except Exception as e:  # Redis unreachable, client closed: infrastructure, masked
            log_fleet_failure(log, f"{core.name}: the fleet could not judge this batch; its rewards are None", e)
            core.last_error = f"{type(e).__name__}: {e}"
        return core.rewards(results, kwargs.get("log_metric"), kwargs.get("log_extra"))

    def close(self) -> None:
        self._core.conn.close()


def _job(fleet: Any, target: Any, text: str, core: _TRLCore) -> dict[str, Any] | None:
    """A submit_many job; unusable inline tests raise InlineProblemError (the dataset's fault)."""
    if isinstance(target, str):
        return {"problem_id": target, "completion": text}
    try:
        # the tests travel with the job: the client stores them again if the store loses them
        return {"problem_id": fleet.inline_registry.problem_id(target), "tests": target, "completion": text}
    except InlineProblemError as e:
        raise InlineProblemError(f"{core.name}: unusable inline tests in column {core.tests_column!r}: {e}") from e


async def _trl_reward_async(
    core: _TRLCore,
    prompts: Sequence[Any] | None = None,
    completions: Sequence[Any] | None = None,
    completion_ids: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[float | None]:
    completions = core.entries(completions, "completions")
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
        except CALLER_ERRORS:
            raise  # broken data in the dataset column or a malformed call: the caller's to fix, never masked
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
        options.setdefault("mode", REWARD_ONLY_MODE)
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
