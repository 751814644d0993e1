"""A trainer catches ``CpfleetError`` for anything cpfleet raises: bad options, bad jobs and bad
registrations through the public API are cpfleet errors, each also the builtin it refines
(``ValueError``, ``TypeError``), so ``except ValueError`` written against older code still works.
Every error class is importable from the one surface, ``cpfleet``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cpfleet
import cpfleet.core.errors as errors_module
from cpfleet import (
    CpfleetError,
    FleetClient,
    JobFormatError,
    JobTypeError,
    OptionError,
    RegistrationError,
    UnknownLanguage,
)
from cpfleet.core import protocol
from cpfleet.core.checkers import register_checker
from cpfleet.core.records import languages_for
from cpfleet.producer.sharded import ShardedFleetClient
from cpfleet.producer.submitter import RunRequest, run_message_fields

ERRORS = Path(errors_module.__file__)
NO_REDIS = "redis://127.0.0.1:1/0"  # settings are refused before any connection is tried


def test_every_error_class_is_exported_from_cpfleet() -> None:
    names = [n.name for n in ast.parse(ERRORS.read_text()).body if isinstance(n, ast.ClassDef)]
    assert names, "core/errors.py defines the hierarchy"
    for name in names:
        assert name in cpfleet.__all__, f"{name} is not in cpfleet.__all__"
        cls = getattr(cpfleet, name)
        assert issubclass(cls, CpfleetError), name


@pytest.mark.parametrize("options", [
    {"timeout": 0}, {"timeout": -1.0}, {"max_in_flight": 0}, {"unreachable_grace": 0},
    {"reward_shape": "partial"}, {"mode": "secret"},
])
def test_a_client_setting_out_of_range_is_an_option_error(options: dict[str, object]) -> None:
    with pytest.raises(OptionError) as info:
        FleetClient(redis_url=NO_REDIS, **options)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    assert next(iter(options)) in str(info.value) or repr(next(iter(options.values()))) in str(info.value)


@pytest.mark.parametrize("options", [
    {"timeout": "x"}, {"timeout": None}, {"timeout": [900]}, {"max_in_flight": "many"}, {"max_in_flight": 2.5},
    {"unreachable_grace": "soon"},
])
def test_a_client_setting_of_the_wrong_type_is_an_option_error_naming_it(options: dict[str, object]) -> None:
    """A setting that is no number failed its range check with a bare TypeError ("'>' not
    supported between instances of 'str' and 'int'") that named no setting."""
    with pytest.raises(OptionError) as info:
        FleetClient(redis_url=NO_REDIS, **options)  # type: ignore[arg-type]
    assert next(iter(options)) in str(info.value), info.value


def test_judging_options_are_checked_by_one_rule_raising_option_error() -> None:
    with pytest.raises(OptionError, match="unknown reward shape 'partial'"):
        protocol.check_options("partial", "full")
    with pytest.raises(OptionError, match="unknown mode 'secret'"):
        protocol.check_options("all_or_nothing", "secret")


def test_a_sharded_client_without_distinct_urls_is_an_option_error() -> None:
    with pytest.raises(OptionError, match="at least one Redis URL"):
        ShardedFleetClient([])
    with pytest.raises(OptionError, match="listed twice"):
        ShardedFleetClient([NO_REDIS, NO_REDIS])


def test_a_run_request_of_the_wrong_type_is_a_job_type_error_and_a_type_error() -> None:
    with pytest.raises(JobTypeError) as info:
        run_message_fields(RunRequest(code=123))  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError) and isinstance(info.value, JobFormatError)
    with pytest.raises(JobTypeError, match="stdin"):
        run_message_fields(RunRequest(code="print(1)", stdin=[b"1", 2]))  # type: ignore[list-item]
    with pytest.raises(JobFormatError, match="exactly one of code"):
        run_message_fields(RunRequest(code="print(1)", completion="```python\nprint(1)\n```"))


def test_bad_jobs_on_a_real_client_are_job_format_errors_and_nothing_is_published(redis_url: str) -> None:
    with FleetClient(redis_url=redis_url) as client:
        with pytest.raises(JobTypeError, match="completion must be str or bytes"):
            client.submit_many([("some-problem", 42)])  # type: ignore[list-item]
        too_big = "x" * (protocol.MAX_COMPLETION_BYTES + 1)
        with pytest.raises(JobFormatError):
            client.submit_many([("some-problem", too_big)])
        assert client.stats.submitted == 0


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"stdin": 5}, "stdin must be str or bytes (or a list of them), got int"),
        ({"stdin": {"1 2": "x"}}, "stdin must be str or bytes (or a list of them), got dict"),
        ({"fetch_files": "out.txt"}, "fetch_files must be a list of names, not one string"),
    ],
)
def test_a_run_call_with_a_field_of_the_wrong_shape_is_a_job_type_error_naming_it(
        kwargs: dict, words: str, redis_url: str) -> None:
    """``stdin=5`` was a bare ``'int' object is not iterable``, and ``fetch_files="out.txt"``
    went out as a request for the files o, u, t, ... (the string check came after a tuple())."""
    with FleetClient(redis_url=redis_url) as client:
        with pytest.raises(JobTypeError) as info:
            client.submit_run("print(1)", **kwargs)
        assert str(info.value) == words
        assert client.in_flight == 0


@pytest.mark.parametrize("timeout", ["x", [1], float("nan")])
def test_a_job_timeout_that_is_no_number_of_seconds_is_a_job_format_error_naming_it(timeout: object, redis_url: str) -> None:
    """``"x"`` was a bare ``could not convert string to float``; NaN passed the ``<= 0`` check
    and gave the job a deadline that never comes."""
    with FleetClient(redis_url=redis_url) as client:
        with pytest.raises(JobFormatError, match="timeout must be"):
            client.submit_many([{"problem_id": "p", "completion": "x", "timeout": timeout}])
        assert client.stats.submitted == 0


def test_a_client_id_in_use_is_an_option_error(redis_url: str) -> None:
    with FleetClient(redis_url=redis_url, client_id="held-id"):
        with pytest.raises(OptionError, match="in use by another open FleetClient"):
            FleetClient(redis_url=redis_url, client_id="held-id")


def test_registering_a_taken_or_built_in_name_is_a_registration_error() -> None:
    with pytest.raises(RegistrationError) as info:
        register_checker("tokens", lambda params: None)  # type: ignore[arg-type,return-value]
    assert isinstance(info.value, ValueError)
    with pytest.raises(RegistrationError):
        register_checker("", lambda params: None)  # type: ignore[arg-type,return-value]


def test_a_dataset_language_cpfleet_does_not_judge_is_unknown_language() -> None:
    with pytest.raises(UnknownLanguage, match="not judged by cpfleet"):
        languages_for("COBOL")
    assert languages_for("PYTHON3") is not None


def test_a_misspelt_job_option_is_refused_not_judged_under_the_default(redis_url: str) -> None:
    with FleetClient(redis_url=redis_url) as client:
        with pytest.raises(JobFormatError, match=r"job #0: unknown job key\(s\) 'reward'; accepted: .*reward_shape"):
            client.submit_many([{"problem_id": "some-problem", "completion": "x", "reward": "fraction"}])
        assert client.stats.submitted == 0


def test_a_job_in_a_language_cpfleet_does_not_know_is_refused_at_submit_not_answered_internal(redis_url: str) -> None:
    """The CLI refuses such a job line as the caller's mistake; the client published it and the
    worker answered INTERNAL with infra_error, which a trainer masks as the fleet's fault."""
    with FleetClient(redis_url=redis_url) as client:
        with pytest.raises(UnknownLanguage, match=r"unknown language 'cobol'; known: python3") as info:
            client.submit("some-problem", "x", language="cobol")
        assert isinstance(info.value, ValueError)
        with pytest.raises(UnknownLanguage, match=r"job #0: unknown language 'Python3'"):
            client.submit_many([{"problem_id": "some-problem", "completion": "x", "language": "Python3"}])
        assert client.stats.submitted == 0


def test_a_job_with_a_bad_problem_id_and_gather_of_non_futures_are_named_as_such(redis_url: str) -> None:
    """``submit(None, ...)`` said the job mapping lacked 'problem_id' while listing that key, and
    ``gather`` of anything but futures was an AttributeError from concurrent.futures."""
    with FleetClient(redis_url=redis_url) as client:
        with pytest.raises(JobFormatError, match="problem_id must be a non-empty UTF-8 string, got None"):
            client.submit(None, "x")  # type: ignore[arg-type]
        with pytest.raises(JobTypeError, match="gather takes the list of futures submit_many returned") as info:
            client.gather([1, 2])  # type: ignore[list-item]
        assert isinstance(info.value, TypeError)
        with pytest.raises(JobTypeError, match="got JobFuture"):
            client.register_problems([{"id": "one", "hidden_tests": [{"input": "", "output": "1\n"}]}])
            client.gather(client.submit("one", "print(1)"))  # type: ignore[arg-type]
        assert client.gather([]) == []
