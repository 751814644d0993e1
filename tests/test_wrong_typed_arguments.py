"""A wrong-typed or out-of-range argument to a public call of the client or an adapter (a
timeout as text, a wait as a list) is an ``OptionError`` naming the argument, raised by the call
before it does anything; compared with a number as given, it was a bare TypeError from deep
inside the standard library that named nothing (core/options.py is the one rule)."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
from typing import Any

import pytest

from cpfleet.core.errors import CpfleetError, OptionError


@pytest.mark.parametrize("bad", ["5", [5], True, float("nan"), -1])
def test_a_wrong_timeout_to_a_waiting_call_is_an_option_error_naming_timeout(bad: Any) -> None:
    from cpfleet import FleetClient

    done: cf.Future[Any] = cf.Future()
    done.set_result(None)
    calls = [
        lambda: FleetClient.gather([done], timeout=bad),
        lambda: FleetClient.as_completed([done], timeout=bad),
        lambda: FleetClient.results_as_completed([done], timeout=bad),
    ]
    for call in calls:
        with pytest.raises(OptionError, match=r"^timeout must be a number of seconds"):
            call()

    async def agather() -> None:
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        await FleetClient.agather([fut], timeout=bad)

    with pytest.raises(OptionError, match=r"^timeout must be"):
        asyncio.run(agather())


def test_a_wrong_typed_argument_to_a_client_call_is_refused_before_anything_is_sent(redis_url: str) -> None:
    from cpfleet import FleetClient

    with FleetClient(redis_url, timeout=30, warn_unserved=False) as fleet:
        tests = [{"input": "1\n", "output": "1\n"}]
        with pytest.raises(OptionError, match="^wait_for_room must be"):
            fleet.submit_many([(tests, "print(input())")], wait_for_room="5")  # type: ignore[arg-type]
        with pytest.raises(OptionError, match="^timeout must be"):
            fleet.submit_many([(tests, "print(input())")], timeout="soon")  # type: ignore[arg-type]
        with pytest.raises(OptionError, match="^wait_for_room must be"):
            fleet.submit_run("print(1)", wait_for_room=[1])  # type: ignore[arg-type]
        with pytest.raises(OptionError, match="^timeout must be"):
            fleet.map([tests], ["print(input())"], timeout="5")  # type: ignore[arg-type]
        assert fleet.in_flight == 0
        assert fleet.queue_depth() == 0
    for setting in ("publish_batch", "pop_batch", "reply_ttl", "max_in_flight"):
        with pytest.raises(OptionError, match=f"^{setting} must be an integer"):
            FleetClient(redis_url, **{setting: "10"})


def test_a_wrong_typed_adapter_setting_is_an_option_error_naming_it(redis_url: str) -> None:
    from cpfleet import TRLReward

    with pytest.raises(OptionError, match="^timeout_s must be"):
        TRLReward(redis_url, timeout_s="60")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="^max_infra_calls must be an integer"):
        TRLReward(redis_url, max_infra_calls="3")  # type: ignore[arg-type]
    assert issubclass(OptionError, CpfleetError)


def test_a_wrong_typed_list_or_setting_to_the_other_client_calls_is_the_projects_error(redis_url: str) -> None:
    """A number where a list of jobs, requests or futures goes, a string for a bound set later:
    each a TypeError of Python's naming nothing ("'int' object is not iterable"), or, for the
    max_in_flight setter, taken as it was and failing later in every submitter."""
    from cpfleet import FleetClient
    from cpfleet.core.errors import JobTypeError

    with FleetClient(redis_url, timeout=30, warn_unserved=False) as fleet:
        for call, words in ((lambda: fleet.submit_many(5), "^submit_many takes a list of jobs"),  # type: ignore[arg-type]
                            (lambda: fleet.run_many(5), "^run_many takes a list of run requests"),  # type: ignore[arg-type]
                            (lambda: fleet.run_many([{"code": "print(1)"}, 5]), "^request #1: a RunRequest"),  # type: ignore[list-item]
                            (lambda: fleet.cancel_many(5), "^cancel_many takes the list of futures"),  # type: ignore[arg-type]
                            (lambda: fleet.as_completed(5), "^as_completed takes the list of futures")):  # type: ignore[arg-type]
            with pytest.raises(JobTypeError, match=words):
                call()
        with pytest.raises(OptionError, match="^max_in_flight must be an integer >= 1"):
            fleet.max_in_flight = "5"  # type: ignore[assignment]
        assert fleet.max_in_flight == 100_000
        with pytest.raises(OptionError, match="^budget_s must be"):
            fleet.purge_orphans(budget_s="10")  # type: ignore[arg-type]
        assert fleet.in_flight == 0 and fleet.queue_depth() == 0


def test_a_wrong_typed_job_list_to_the_sharded_client_is_the_projects_error_as_to_one_client(redis_url: str) -> None:
    """The sharded client read ``list(jobs)`` first: a number was Python's "'int' object is not
    iterable", and a string was split into one-letter jobs (a JobFormatError naming a job, not
    the list)."""
    from cpfleet.core.errors import JobFormatError, JobTypeError
    from cpfleet.producer.sharded import ShardedFleetClient

    with ShardedFleetClient([redis_url], timeout=30, warn_unserved=False) as fleet:
        with pytest.raises(JobTypeError, match="^submit_many takes a list of jobs, got one int"):
            fleet.submit_many(5)  # type: ignore[arg-type]
        for one in ("print(1)", {"problem_id": "p", "completion": "print(1)"}):
            with pytest.raises(JobFormatError, match=f"^submit_many takes a list of jobs, got one {type(one).__name__}"):
                fleet.submit_many(one)  # type: ignore[arg-type]
        assert fleet.in_flight == 0


@pytest.mark.parametrize("bad", ["5", [5], True, -1])
def test_a_wrong_timeout_to_aas_completed_is_refused_at_the_call_as_to_results_as_completed(bad: Any) -> None:
    """It was checked only at the first step of the async iteration, unlike every other waiting
    call (results_as_completed, also a generator, checks at the call)."""
    from cpfleet import FleetClient

    with pytest.raises(OptionError, match=r"^timeout must be a number of seconds"):
        FleetClient.aas_completed([], timeout=bad)
