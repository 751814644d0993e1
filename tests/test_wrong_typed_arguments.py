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
