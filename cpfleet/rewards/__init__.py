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

The adapters themselves: :mod:`cpfleet.rewards.trl` (``TRLReward``, ``AsyncTRLReward``) and
:mod:`cpfleet.rewards.verl` (``compute_score`` and its async and batch forms; verl loads
``cpfleet/rewards/verl.py`` by path); :mod:`cpfleet.rewards.common` holds the policy they share.
"""

from cpfleet.rewards.common import (
    DEFAULT_MAX_INFRA_CALLS,
    DEFAULT_TIMEOUT_S,
    InfraStreak,
    completion_text,
    problem_ref,
    raise_for_unknown_problems,
)
from cpfleet.rewards.trl import AsyncTRLReward, TRLReward, column_target
from cpfleet.rewards.verl import (
    OTHER_VERDICT_CODE,
    VERDICT_CODES,
    VERL_KEYS,
    close_verl_connections,
    compute_score,
    compute_score_async,
    compute_score_batch,
    score_dict,
)

__all__ = [
    "DEFAULT_MAX_INFRA_CALLS", "DEFAULT_TIMEOUT_S", "InfraStreak", "completion_text", "problem_ref",
    "raise_for_unknown_problems", "AsyncTRLReward", "TRLReward", "column_target", "OTHER_VERDICT_CODE",
    "VERDICT_CODES", "VERL_KEYS", "close_verl_connections", "compute_score", "compute_score_async",
    "compute_score_batch", "score_dict",
]
