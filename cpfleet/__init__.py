"""cpfleet: an execution fleet that turns LLM completions for competitive-programming problems
into RL rewards.

This is the one import surface: ``from cpfleet import FleetClient, JobResult, Verdict``. The
module paths behind these names (``cpfleet.core``, ``cpfleet.sandbox``, ``cpfleet.workers``,
``cpfleet.producer`` and the application modules) may change; these names will not.

Names are resolved on first use (PEP 562), so ``import cpfleet`` costs nothing and importing
one layer (say the core data model in a sandbox process) never drags in the trainer client's
redis and kombu.

What the folder holds, the application grouped by purpose: the ``cpfleet`` command (cli.py,
__main__.py, and argtypes.py for its number arguments), problem data in (datasets/: ``prepare``,
``load``, ``validate``, the one loader), jobs in and results out (jobs/: ``judge``, ``submit``,
``run``), a fleet on one machine (fleet/: ``up``, ``LocalFleet``), the demo (demo/), the HTTP
gateway (gateway/: ``serve``) and the in-process reward functions (rewards/). The layers below
(core, sandbox, workers, producer) are their own top-level folders, mapped under this package
by pyproject.toml.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # the trainer's client
    "FleetClient": "cpfleet.producer.client",
    "FleetStats": "cpfleet.producer.client",
    "ShardedFleetClient": "cpfleet.producer.sharded",
    "RunRequest": "cpfleet.producer.client",
    # a whole fleet on this machine (Redis, workers, Flower), as ``cpfleet up`` starts it
    "LocalFleet": "cpfleet.fleet.local",
    # run jobs: execute a program on the fleet, no judging
    "RunJobResult": "cpfleet.core.results",
    "RunOutput": "cpfleet.core.results",
    "CompileOutput": "cpfleet.core.results",
    "RunStatus": "cpfleet.core.results",
    # the data model
    "JobResult": "cpfleet.core.results",
    "TestReport": "cpfleet.core.results",
    "TestSetSummary": "cpfleet.core.results",
    "Timings": "cpfleet.core.results",
    "Verdict": "cpfleet.core.verdict",
    "Problem": "cpfleet.core.problem",
    "TestCase": "cpfleet.core.problem",
    "REWARD_SHAPES": "cpfleet.core.protocol",
    "MODES": "cpfleet.core.protocol",
    # judging without a fleet, in this process (``evaluate``: a second name for it)
    "judge_locally": "cpfleet.sandbox.env",
    "evaluate": "cpfleet.sandbox.env",
    # inline tests (any dataset shape) -> a problem record with a content-hash id
    "problem_from_tests": "cpfleet.producer.inline",
    # trainer adapters
    "TRLReward": "cpfleet.rewards",
    "AsyncTRLReward": "cpfleet.rewards",
    "compute_score": "cpfleet.rewards",
    "compute_score_async": "cpfleet.rewards",
    "compute_score_batch": "cpfleet.rewards",
    # errors
    "CpfleetError": "cpfleet.core.errors",
    "ProblemFormatError": "cpfleet.core.errors",
    "JobFormatError": "cpfleet.core.errors",
    "JobTypeError": "cpfleet.core.errors",
    "OptionError": "cpfleet.core.errors",
    "RegistrationError": "cpfleet.core.errors",
    "CheckerSpecError": "cpfleet.core.errors",
    "ProblemNotJudgeable": "cpfleet.core.errors",
    "NoHiddenTestsError": "cpfleet.core.errors",
    "NoPublicTestsError": "cpfleet.core.errors",
    "SlotDirError": "cpfleet.core.errors",
    "ProtocolError": "cpfleet.core.errors",
    "ProblemStoreError": "cpfleet.core.errors",
    "InputFileError": "cpfleet.core.errors",
    "ProblemFileError": "cpfleet.core.errors",
    "ProblemFileNotFoundError": "cpfleet.core.errors",
    "DuplicateProblemError": "cpfleet.core.errors",
    "PrepareError": "cpfleet.core.errors",
    "DatasetUnavailableError": "cpfleet.core.errors",
    "SandboxFailure": "cpfleet.core.errors",
    "TestShapeError": "cpfleet.core.errors",
    "InlineProblemError": "cpfleet.core.errors",
    "SandboxBroken": "cpfleet.core.errors",
    "IsolationRequirementError": "cpfleet.core.errors",
    "BrokenProblem": "cpfleet.core.errors",
    "UnknownLanguage": "cpfleet.core.errors",
    "ProgramError": "cpfleet.core.errors",
    "LANGUAGES": "cpfleet.core.languages",
    "BrokerUnavailable": "cpfleet.core.errors",
    "RedisUrlError": "cpfleet.core.errors",
    "ConfigError": "cpfleet.core.errors",
    "BrokerFull": "cpfleet.core.errors",
    "StoreFull": "cpfleet.core.errors",
    "MessageEncodeError": "cpfleet.core.errors",
    "PublisherClosed": "cpfleet.core.errors",
    "FleetBusy": "cpfleet.core.errors",
    "ClientClosed": "cpfleet.core.errors",
    "FleetError": "cpfleet.core.errors",
    "UnknownProblemError": "cpfleet.core.errors",
    "FleetUnusable": "cpfleet.core.errors",
    "CheckerBroken": "cpfleet.core.errors",
    "NotAScoringScript": "cpfleet.core.errors",
}

__all__ = [
    "__version__",
    "FleetClient",
    "LocalFleet",
    "FleetStats",
    "RunRequest",
    "RunJobResult",
    "RunOutput",
    "CompileOutput",
    "RunStatus",
    "ShardedFleetClient",
    "JobResult",
    "TestReport",
    "TestSetSummary",
    "Timings",
    "Verdict",
    "Problem",
    "TestCase",
    "REWARD_SHAPES",
    "MODES",
    "judge_locally",
    "evaluate",
    "problem_from_tests",
    "TRLReward",
    "AsyncTRLReward",
    "compute_score",
    "compute_score_async",
    "compute_score_batch",
    "CpfleetError",
    "ProblemFormatError",
    "JobFormatError",
    "JobTypeError",
    "OptionError",
    "RegistrationError",
    "CheckerSpecError",
    "ProblemNotJudgeable",
    "NoHiddenTestsError",
    "NoPublicTestsError",
    "SlotDirError",
    "ProtocolError",
    "ProblemStoreError",
    "InputFileError",
    "ProblemFileError",
    "ProblemFileNotFoundError",
    "DuplicateProblemError",
    "PrepareError",
    "DatasetUnavailableError",
    "SandboxFailure",
    "TestShapeError",
    "InlineProblemError",
    "SandboxBroken",
    "IsolationRequirementError",
    "BrokenProblem",
    "UnknownLanguage",
    "ProgramError",
    "LANGUAGES",
    "BrokerUnavailable",
    "RedisUrlError",
    "ConfigError",
    "BrokerFull",
    "StoreFull",
    "MessageEncodeError",
    "PublisherClosed",
    "FleetBusy",
    "ClientClosed",
    "FleetError",
    "UnknownProblemError",
    "FleetUnusable",
    "CheckerBroken",
    "NotAScoringScript",
]

if TYPE_CHECKING:
    from cpfleet.core.errors import (
        BrokenProblem,
        BrokerFull,
        BrokerUnavailable,
        CheckerBroken,
        CheckerSpecError,
        ClientClosed,
        ConfigError,
        CpfleetError,
        DatasetUnavailableError,
        DuplicateProblemError,
        FleetBusy,
        FleetError,
        FleetUnusable,
        InlineProblemError,
        InputFileError,
        IsolationRequirementError,
        JobFormatError,
        JobTypeError,
        MessageEncodeError,
        NoHiddenTestsError,
        NoPublicTestsError,
        NotAScoringScript,
        OptionError,
        PrepareError,
        ProblemFileError,
        ProblemFileNotFoundError,
        ProblemFormatError,
        ProblemNotJudgeable,
        ProblemStoreError,
        ProgramError,
        ProtocolError,
        PublisherClosed,
        RedisUrlError,
        RegistrationError,
        SandboxBroken,
        SandboxFailure,
        SlotDirError,
        StoreFull,
        TestShapeError,
        UnknownLanguage,
        UnknownProblemError,
    )
    from cpfleet.core.problem import Problem, TestCase
    from cpfleet.core.protocol import MODES, REWARD_SHAPES
    from cpfleet.core.results import (
        CompileOutput,
        JobResult,
        RunJobResult,
        RunOutput,
        RunStatus,
        TestReport,
        TestSetSummary,
        Timings,
    )
    from cpfleet.core.verdict import Verdict
    from cpfleet.fleet.local import LocalFleet
    from cpfleet.producer.client import FleetClient, FleetStats, RunRequest
    from cpfleet.producer.inline import problem_from_tests
    from cpfleet.producer.sharded import ShardedFleetClient
    from cpfleet.sandbox.env import evaluate, judge_locally


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cpfleet' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
