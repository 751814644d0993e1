"""verl's custom reward function: ``compute_score`` (one sample), ``compute_score_async`` and
``compute_score_batch``.

**verl** (``custom_reward_function.path=cpfleet/rewards/verl.py name=compute_score``):
``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)`` returns a
dict with always the same keys (verl crashes or drops columns when keys vary):

- ``score``: the reward (``reward_shape``: all_or_nothing or fraction). verl has no way to
  drop a sample, so on an infrastructure error ``score`` is ``infra_score`` (default 0.0)
  after ``retries`` more attempts (default 2); ``infra_error`` says which samples those were
  (an unknown problem id raises ``UnknownProblemError`` instead: the package docstring,
  :mod:`cpfleet.rewards`, lists every case).
- ``acc``: 1.0 when every rewarded test passed and the verdict is OK (no limit, on any test,
  stopped the job), else 0.0.
- ``verdict``: an integer code (``VERDICT_CODES``; verl averages every key, so no strings).
- ``infra_error``: 1 or 0. ``pass_rate``: rewarded tests passed / total; under all_or_nothing
  the judging stops at the first failing test, which runs early once the fleet has learnt which
  tests fail most (docs/failfast.md), so there it is a lower bound: ask ``reward_shape="fraction"``
  for every test's outcome. ``num_tests``: total.

``ground_truth`` is a problem id or inline tests (a dict/list, or its JSON text). Settings come
from ``custom_reward_function.reward_kwargs`` (``redis_url``, ``reward_shape``, ``mode``,
``timeout_s``, ``retries``, ``infra_score``, ``max_infra_calls``, and ``time_limit_s`` /
``memory_limit_mb``: the limits of inline tests, whose ``ground_truth`` cannot say how long the
dataset's grader lets a program run; a problem id is then a JobFormatError, judged under its
stored limits) or the ``CPFLEET_REDIS_URL`` environment variable. ``mode`` defaults to ``hidden``: verl reads the score and these keys, never
the feedback text, so the hidden tests run first and a wrong completion runs none of the public
tests (which make that text); the reward and every key are full mode's, but for ``pass_rate``
where a limit on a public test alone stopped the job (reward 0 in both modes: full mode stopped
before any hidden test, 0; hidden mode after them, their share). ``mode="full"`` runs them
first, as before.
``compute_score_async`` is the same for verl's reward loop (awaited directly) and
``compute_score_batch`` takes the lists verl's ``batch`` reward manager passes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from cpfleet.core import defaults, protocol
from cpfleet.core.errors import InlineProblemError
from cpfleet.core.protocol import REWARD_ONLY_MODE
from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict
from cpfleet.rewards.common import (
    CALLER_ERRORS,
    DEFAULT_MAX_INFRA_CALLS,
    DEFAULT_TIMEOUT_S,
    Connection,
    InfraStreak,
    limit_options,
    log,
    log_fleet_failure,
    problem_ref,
    raise_for_unknown_problems,
    with_limits,
)

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



_VERL_CONNECTIONS: dict[tuple[str | None, str | None], Connection] = {}
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
            conn = Connection(redis_url, {"queue": queue} if queue else None)
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
    rewarded = result.rewarded
    total = rewarded.total
    passed = rewarded.passed
    return {
        "score": float(result.reward or 0.0),
        # OK: every rewarded test passed and no limit stopped the job (hidden mode runs the public
        # tests after the hidden ones, for their limits: a stop there leaves every hidden test passed)
        "acc": 1.0 if total and passed == total and result.verdict == Verdict.OK else 0.0,
        "verdict": VERDICT_CODES.get(str(result.verdict), OTHER_VERDICT_CODE),
        "infra_error": 0,
        "pass_rate": passed / total if total else 0.0,
        "num_tests": int(total),
    }


def _verl_options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    # a bad URL is the caller's mistake: RedisUrlError now, never an infra score per sample
    defaults.redis_target(kwargs.get("redis_url"))
    protocol.check_options(kwargs.get("reward_shape", "all_or_nothing"), kwargs.get("mode", REWARD_ONLY_MODE))
    return {
        "redis_url": kwargs.get("redis_url"),
        "queue": kwargs.get("queue"),
        "reward_shape": kwargs.get("reward_shape", "all_or_nothing"),
        "mode": kwargs.get("mode", REWARD_ONLY_MODE),
        "timeout_s": float(kwargs.get("timeout_s", DEFAULT_TIMEOUT_S)),
        "retries": int(kwargs.get("retries", 2)),
        "infra_score": float(kwargs.get("infra_score", 0.0)),
        "max_infra_calls": kwargs.get("max_infra_calls", DEFAULT_MAX_INFRA_CALLS),
        "limits": limit_options(kwargs.get("time_limit_s"), kwargs.get("memory_limit_mb")),
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
                target = with_limits(problem_ref(ground_truths[i]), opts["limits"], f"compute_score: ground_truth of sample {i}")
                try:
                    pid = target if isinstance(target, str) else fleet.inline_registry.problem_id(target)
                except InlineProblemError as e:  # broken data, not the model: the caller's to fix
                    raise InlineProblemError(f"compute_score: unusable inline tests in ground_truth of sample {i}: {e}") from e
                job = {"problem_id": pid, "completion": solution_strs[i]}
                if not isinstance(target, str):  # the client stores them again if the store loses them
                    job["tests"] = target
                jobs.append(job)
                index.append(i)
            futures = fleet.submit_many(jobs, reward_shape=opts["reward_shape"], mode=opts["mode"], timeout=opts["timeout_s"])
            for i, fut in zip(index, futures, strict=True):
                try:
                    results[i] = fut.result(timeout=opts["timeout_s"] + 30)
                except Exception as e:
                    log.error("compute_score: no result for sample %d: %s", i, e)
        except CALLER_ERRORS:
            raise  # the call's own mistake (a completion that is not text, an empty id): never an infra score
        except Exception as e:
            log_fleet_failure(log, "compute_score: the fleet could not judge this batch", e)
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
    target = with_limits(problem_ref(ground_truth), opts["limits"], "compute_score_async: ground_truth")
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
        except CALLER_ERRORS:
            raise  # refused at submit: the caller's to fix, never a masked sample
        except Exception as e:
            log_fleet_failure(log, "compute_score_async: the fleet could not judge this sample", e)
            last_error = f"{type(e).__name__}: {e}"
            result = None
        if not _worth_retrying(result):
            break
    raise_for_unknown_problems([result], "compute_score_async")
    streak.record([result], "compute_score_async", last_error)
    return score_dict(result, infra_score=opts["infra_score"])
