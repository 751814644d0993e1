"""A client whose Redis stays unreachable fails its pending futures with BrokerUnavailable once
its ``unreachable_grace`` has passed, instead of letting each wait for its job's deadline
(900 s by default); a shorter outage fails nothing. A real redis-server, killed."""

from __future__ import annotations

import time

import pytest
from fleet_helpers import store_problems, wait_until

from cpfleet.core.errors import BrokerUnavailable
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.producer.client import FleetClient

JOB = {"problem_id": "t/none", "completion": "print(1)"}


def test_pending_futures_fail_with_broker_unavailable_after_the_grace() -> None:
    with RedisServer() as server:
        store_problems(server.url, "t/none")
        client = FleetClient(server.url, queue="nobody-listens", timeout=900, unreachable_grace=2)
        try:
            futures = client.submit_many([JOB] * 5)
            server.stop(kill=True)
            # far below the jobs' 900 s deadline: the grace, not the deadline, ends them
            assert wait_until(lambda: all(f.done() for f in futures), timeout=120)
            for f in futures:
                with pytest.raises(BrokerUnavailable, match="unreachable for 2s"):
                    f.result()
            assert client.stats.broker_lost == 5
            assert client.stats.deadline_misses == 0
        finally:
            client.close()


def test_an_outage_shorter_than_the_grace_fails_nothing() -> None:
    with RedisServer() as server:
        store_problems(server.url, "t/none")
        with FleetClient(server.url, queue="nobody-listens", timeout=900, unreachable_grace=60) as client:
            futures = client.submit_many([JOB] * 3)
            server.restart(down_s=1.0)
            time.sleep(3)  # the reader saw the outage and reconnected
            assert client.stats.reader_errors >= 1
            assert not any(f.done() for f in futures)
            assert client.stats.broker_lost == 0


def test_the_grace_must_be_positive_or_none() -> None:
    with pytest.raises(ValueError, match="unreachable_grace"):
        FleetClient("redis://127.0.0.1:1/0", unreachable_grace=0)


def test_serve_answers_503_with_retry_after_when_redis_is_gone() -> None:
    import json
    import urllib.error
    import urllib.request

    from test_serve import start_server

    from cpfleet.gateway.serve import ServeConfig

    with RedisServer() as server:
        srv, thread, port = start_server(ServeConfig(redis_url=server.url, timeout_s=60))
        try:
            server.stop(kill=True)
            payload = {"query": ["print(1)"], "prompts": [""], "labels": ["t/none"]}
            req = urllib.request.Request(f"http://127.0.0.1:{port}/get_reward", data=json.dumps(payload).encode(),
                                         method="POST", headers={"Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(req, timeout=120)
            assert info.value.code == 503 and info.value.headers["Retry-After"]
            assert "Redis" in json.loads(info.value.read())["error"]
        finally:
            srv.should_exit = True
            thread.join(timeout=30)


def test_a_claim_lost_with_a_restarted_redis_is_not_blamed_on_a_long_outage(caplog: pytest.LogCaptureFixture) -> None:
    """A Redis restarted without its data forgets the client's claim after a second's outage:
    the warning said the reader had been cut off for the claim's whole TTL (60 s), which an
    operator then looked for in vain."""
    with caplog.at_level("WARNING", logger="cpfleet.client"), RedisServer() as server:
        with FleetClient(server.url, queue="nobody-listens", timeout=900) as client:
            server.restart(down_s=0.5)

            def warned() -> list[str]:
                return [r.getMessage() for r in caplog.records if "was taken back" in r.getMessage()]

            assert wait_until(lambda: bool(warned()), timeout=60), [r.getMessage() for r in caplog.records]
            assert client.stats.broker_lost == 0
    (message,) = warned()
    assert "or Redis lost it: restarted without its data" in message, message
