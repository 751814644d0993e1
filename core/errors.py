"""Every exception cpfleet raises, under one base class.

A trainer catches ``CpfleetError`` to handle anything of ours, or one of the names below for a
specific failure; each also derives from the builtin it refines (``ValueError`` for bad input,
``ConnectionError`` for the broker, ...), so code written against those keeps working. Verdicts
are never exceptions: a program's failure is a ``JobResult``, not a raise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class CpfleetError(Exception):
    """Base of every error raised by cpfleet."""


# -- configuration ------------------------------------------------------------------------------


class ConfigError(CpfleetError, ValueError):
    """An environment variable (``CPFLEET_*``) with a value cpfleet cannot use: the message is
    one line per bad variable naming it, its value and the accepted values (core/envvars.py)."""

    def __init__(self, variable: str, value: str, message: str) -> None:
        super().__init__(message)
        self.variable = variable
        self.value = value


# -- data ---------------------------------------------------------------------------------------


class ProblemFormatError(CpfleetError, ValueError):
    """A problem record that cannot be judged (missing id, malformed tests, bad limits)."""


class ProblemNotJudgeable(ProblemFormatError):
    """A well-formed problem that the judging rule refuses (``cpfleet.core.problem.validate_for_judging``):
    judging it would pay a reward that no hidden test backs."""


class NoHiddenTestsError(ProblemNotJudgeable):
    """The problem has no hidden tests: full mode has nothing to reward from (its public tests
    are shown to the model, so rewarding them would pay for copying expected outputs)."""


class NoPublicTestsError(ProblemNotJudgeable):
    """The problem has no public tests: public mode has nothing to reward from."""


class CheckerSpecError(ProblemFormatError):
    """A problem's ``checker`` field names an unknown checker or carries bad parameters."""


class ProtocolError(CpfleetError, ValueError):
    """A wire message that does not follow the protocol's schema."""


class JobFormatError(CpfleetError, ValueError):
    """A job the caller built that no worker could take: not ``(problem_id, completion)`` nor a
    mapping with ``problem_id`` or ``tests``, a completion over the size bound, a language the
    problem does not allow. The client raises it before anything of the call is published (the
    message names the job's position); a worker answers it as the job's infrastructure error."""


class JobTypeError(JobFormatError, TypeError):
    """A job field of the wrong type (a completion or stdin that is not text or bytes): a
    ``TypeError`` as Python's own calls raise for it, and a ``JobFormatError`` like the rest."""


class OptionError(CpfleetError, ValueError):
    """A judging option or a setting passed to a constructor that cpfleet does not accept (an
    unknown reward shape or mode, a timeout or bound out of range, a client id another open
    client holds), raised by the call that was given it, before it does anything."""


class RegistrationError(CpfleetError, ValueError):
    """An extension registered wrongly: a name already taken without ``replace=True``, a
    built-in replaced or removed, a malformed name or role (languages, toolchains, checkers,
    checker protocols, dataset formats, gateway protocols)."""


class ProblemStoreError(CpfleetError):
    """The problem store holds something this code cannot use (corrupt or foreign data)."""


class InputFileError(CpfleetError, ValueError):
    """A PROBLEMS or JOBS file that cannot be used, naming the line that says why."""


class ProblemFileError(CpfleetError):
    """The problem file cannot be read at all (missing, a directory, unreadable, not the format)."""

    def __init__(self, path: str | Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = str(path)


class ProblemFileNotFoundError(ProblemFileError, FileNotFoundError):
    """The problem file does not exist."""

    def __init__(self, path: str | Path) -> None:
        ProblemFileError.__init__(self, path, "problem file not found")


class DuplicateProblemError(CpfleetError, ValueError):
    """Two records share an id and the caller asked for ``on_duplicate="error"``."""

    def __init__(self, path: str | Path, problem_id: str, first_line: int, line: int) -> None:
        super().__init__(
            f"{path}: duplicate problem id {problem_id!r} on record {line} (first on record {first_line}); "
            "pass on_duplicate='first' or 'last' (CLI: --on-duplicate) to choose one"
        )
        self.path = str(path)
        self.problem_id = problem_id
        self.first_line = first_line
        self.line = line


class TestShapeError(CpfleetError, ValueError):
    """Inline or dataset tests in a shape that cannot be normalised; the message is a short,
    countable reason (``cpfleet prepare`` counts skipped problems by it)."""

    __test__ = False  # not a pytest test class despite its name


class InlineProblemError(CpfleetError, ValueError):
    """Inline tests that cannot become a problem (unknown shape, no tests, bad limits)."""


class NotAScoringScript(CpfleetError, ValueError):
    """A script sent to the E2B/Morph router endpoint that is not open-r1's ``code_reward``
    template, so not judged (the message says how it differs)."""


class PrepareError(CpfleetError):
    """The dataset cannot be prepared at all (unknown schema, no files, bad arguments)."""


class DatasetUnavailableError(PrepareError):
    """``datasets.load_dataset`` failed: hub unreachable, unknown name or split, unreadable files."""


# -- execution ----------------------------------------------------------------------------------


class SandboxFailure(CpfleetError, RuntimeError):
    """The sandbox itself failed (its process died, a test could not be set up): an
    infrastructure failure, never a verdict about the program. The environment turns exactly
    this exception (and a RunResult with status INTERNAL) into ``infra_error``; any other
    exception out of a runner is a bug in the harness and propagates."""


class SandboxBroken(SandboxFailure):
    """The zygote or a job init stopped answering: an infrastructure failure, not a verdict."""


class IsolationRequirementError(CpfleetError, RuntimeError):
    """The sandbox's isolation self-test gave less than the node requires
    (``CPFLEET_REQUIRE_ISOLATION``), or no runner started at all: the node must not judge
    anything, since a completion outside the sandbox could reach the expected outputs."""


class UnknownLanguage(CpfleetError, ValueError):
    """A language name outside cpfleet.core.languages.LANGUAGES (named in the message)."""


class ProgramError(CpfleetError, RuntimeError):
    """A source set that cannot be compiled as asked (bad file names, no such entry point, a
    language that is not compiled): the caller's data is wrong, not the program."""


class SlotDirError(CpfleetError, RuntimeError):
    """A folder the worker keeps in the shared temp directory (the slot locks or a lock file in
    it, the compile cache, the precompiled headers) is not ours alone: refused, never followed."""


class BrokenProblem(CpfleetError):
    """The problem's own data cannot judge a test (e.g. a checker program that crashes or does
    not compile): an infrastructure error for the job, like a checker spec that cannot be built."""


# -- broker and client --------------------------------------------------------------------------


class RedisUrlError(CpfleetError, ValueError):
    """A Redis URL that cannot be used (no scheme, unknown scheme, bad port or database, a
    Sentinel URL without its master's name): the message is one line naming the URL and the fix."""


class BrokerUnavailable(CpfleetError, ConnectionError):
    """Redis (the broker) cannot be reached: nothing after the failing batch was published.

    Raised by ``FleetClient.submit_many``, ``submitted`` holds the futures of the batches that
    were published before the failure (they resolve normally); otherwise it is empty.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.submitted: list[Any] = []


class BrokerFull(CpfleetError, RuntimeError):
    """Redis refused a write because it is at ``maxmemory`` with the ``noeviction`` policy (an
    "OOM command not allowed" error): it is reachable, but full, usually of unconsumed jobs or
    unread replies. Not a BrokerUnavailable: retrying helps only once workers or readers have
    drained it, or after raising ``maxmemory``. Nothing after the failing batch was published;
    ``submitted`` as for BrokerUnavailable."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.submitted: list[Any] = []


class StoreFull(BrokerFull):
    """``register_problems`` met a full Redis (a ``BrokerFull``): each problem is stored whole or
    not at all, never half. ``stats``: the ``RegisterStats`` of the problems that are stored (or
    were already, unchanged); ``not_stored``: the ids that are not, in input order (an id whose
    update was refused keeps its previous version in the store)."""

    def __init__(self, message: str, stats: Any, not_stored: list[str]) -> None:
        super().__init__(message)
        self.stats = stats
        self.not_stored = not_stored


class MessageEncodeError(CpfleetError, ValueError):
    """A job could not be serialized (a caller error, never a broker failure): nothing of the
    call was published."""


class PublisherClosed(CpfleetError, RuntimeError):
    """``publish`` after ``close``: a closed publisher never reconnects."""


class FleetBusy(CpfleetError, TimeoutError):
    """The in-flight bound stayed full for longer than the caller agreed to wait.

    ``submitted``: futures of the batches of the same ``submit_many`` published before it.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.submitted: list[Any] = []


class ClientClosed(CpfleetError, RuntimeError):
    """The client was closed (before or during the submit).

    ``submitted``: futures of the batches of the same ``submit_many`` published before it (they
    resolve, INTERNAL "client closed" when the close came first).
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.submitted: list[Any] = []


class UnknownProblemError(CpfleetError, LookupError):
    """A job names a problem the fleet's store does not have (a typo, or ``cpfleet load`` not
    run): the caller's mistake, permanent, so the trainer adapters raise it instead of returning
    a reward (no score, no retry). ``problem_ids``: the ids that were not found."""

    def __init__(self, message: str, problem_ids: list[str] | None = None) -> None:
        super().__init__(message)
        self.problem_ids = list(problem_ids or [])


class FleetUnusable(CpfleetError, RuntimeError):
    """A trainer adapter got nothing but infrastructure errors for many calls in a row (Redis
    unreachable, a wrong URL, no worker consuming the queue): it raises this instead of handing
    the trainer ``None`` / ``infra_score`` for every sample forever."""


class FleetError(CpfleetError, RuntimeError):
    """A part of the local fleet did not start (the message says which, and where its log is)."""


class CheckerBroken(BrokenProblem):
    """A problem's checker or interactor program cannot judge (does not compile, crashed, timed
    out, exited with its failure code): broken problem data, an INTERNAL result, never a 0.
    The message starts with ``PREFIX`` so that reports (``cpfleet validate``) can tell checker
    errors from other infrastructure errors."""

    PREFIX = "checker error: "

    def __init__(self, message: str) -> None:
        super().__init__(message if message.startswith(self.PREFIX) else self.PREFIX + message)
