"""``await fleet.evaluate(...)`` publishes on its event loop's own Redis connection
(``producer.aiopush``): chunks leave in order while a burst is being made, a full Redis is
``BrokerFull`` and a silent or dropped one ``BrokerUnavailable`` for exactly the calls whose
push it failed (never a lost call, never a reward), and connections of ended loops are closed.

Real redis-servers (conftest and one per test where the test changes its configuration), a
real TCP server that never answers, and where jobs must run a real prefork worker node."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fleet_helpers import FleetWorker, store_problems, wait_until

from cpfleet.core.errors import BrokerFull, BrokerUnavailable, ClientClosed
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.producer.aiopush import AsyncPusher, lpush_command
from cpfleet.producer.client import FleetClient

ECHO = {"id": "t/echo", "public_tests": [{"input": "1\n", "output": "1\n"}], "hidden_tests": [{"input": "5\n", "output": "5\n"}]}


def echo(i: int) -> str:
    return f"```python\n# call {i}\nprint(input())\n```"  # distinct programs: nothing is deduped


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("evalpub"), concurrency=2) as worker:
        yield worker


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def push(pusher: AsyncPusher, values: list[bytes]) -> asyncio.Future[BaseException | None]:
    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    pusher.push(values, lambda err: done.done() or done.set_result(err))
    return done


def test_a_burst_is_published_in_chunks_on_the_loops_connection_and_every_call_is_judged(node: FleetWorker) -> None:
    with FleetClient(node.redis_url, timeout=120) as fleet:
        fleet.register_problems([ECHO])

        async def main() -> tuple[list[Any], Any]:
            ev = fleet.evaluator()
            ev.chunk = 16
            await fleet.evaluate("t/echo", echo(-1))  # opens the loop's connection
            results = await asyncio.gather(*(fleet.evaluate("t/echo", echo(i), job_id=f"j{i}") for i in range(100)))
            return results, ev

        results, ev = asyncio.run(main())
    assert [r.job_id for r in results] == [f"j{i}" for i in range(100)]
    assert all(r.reward == 1.0 and r.verdict == Verdict.OK and not r.infra_error for r in results)
    assert ev.stats.published == 101 and ev.stats.largest_batch == 16
    assert ev._pusher is not None and ev._pusher.pushes >= 100 // 16  # chunks, on the loop's own connection


def test_pushes_land_in_order_in_the_urls_database_after_auth(own_redis: RedisServer) -> None:
    r = redis.Redis.from_url(own_redis.url)
    r.config_set("requirepass", "s3cret")
    url = f"redis://:s3cret@127.0.0.1:{own_redis.port}/3"

    async def main() -> list[BaseException | None]:
        pusher = AsyncPusher(url, "q")
        assert pusher.ensure(asyncio.get_running_loop())
        outcomes = await asyncio.gather(push(pusher, [b"a", b"b"]), push(pusher, [b"c"]), push(pusher, [b"d" * 100_000]))
        pusher.close()
        return outcomes

    assert asyncio.run(main()) == [None, None, None]
    db3 = redis.Redis.from_url(url)
    assert [db3.rpop("q") for _ in range(3)] == [b"a", b"b", b"c"]  # consumers pop from the right
    assert db3.llen("q") == 1 and redis.Redis(port=own_redis.port, password="s3cret", db=0).llen("q") == 0


def test_a_wrong_password_is_broker_unavailable_at_connect_and_not_retried_at_once(own_redis: RedisServer) -> None:
    redis.Redis.from_url(own_redis.url).config_set("requirepass", "s3cret")

    async def main() -> tuple[bool, bool, BaseException | None]:
        pusher = AsyncPusher(f"redis://:wrong@127.0.0.1:{own_redis.port}/0", "q", retry_after=60)
        loop = asyncio.get_running_loop()
        return pusher.ensure(loop), pusher.ensure(loop), pusher.last_error

    first, again, error = asyncio.run(main())
    assert not first and not again
    assert isinstance(error, BrokerUnavailable) and "refused" in str(error)


def test_a_full_redis_fails_only_the_refused_push_as_broker_full(own_redis: RedisServer) -> None:
    r = redis.Redis.from_url(own_redis.url)

    async def main() -> tuple[Any, Any, Any]:
        pusher = AsyncPusher(own_redis.url, "q")
        assert pusher.ensure(asyncio.get_running_loop())
        first = await push(pusher, [b"small"])
        r.config_set("maxmemory", str(int(r.info("memory")["used_memory"]) + 256 * 1024))
        refused = await push(pusher, [b"x" * (1 << 20)])
        r.config_set("maxmemory", "0")
        after = await push(pusher, [b"again"])  # the connection stays usable
        pusher.close()
        return first, refused, after

    first, refused, after = asyncio.run(main())
    assert first is None and after is None
    assert isinstance(refused, BrokerFull) and not isinstance(refused, BrokerUnavailable)
    assert r.lrange("q", 0, -1) == [b"again", b"small"]


def test_a_redis_that_never_answers_fails_every_waiting_push_after_the_reply_timeout() -> None:
    async def main() -> list[BaseException | None]:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(-1)  # reads everything, answers nothing

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pusher = AsyncPusher(f"redis://127.0.0.1:{port}/0", "q", reply_timeout=0.3)
        assert pusher.ensure(asyncio.get_running_loop())  # the kernel completes the connect (listen backlog)
        outcomes = await asyncio.wait_for(asyncio.gather(push(pusher, [b"a"]), push(pusher, [b"b"])), 10)
        assert not pusher.connected
        server.close()
        return outcomes

    outcomes = asyncio.run(main())
    assert all(isinstance(o, BrokerUnavailable) and "no reply" in str(o) for o in outcomes)


def test_evaluate_calls_get_broker_unavailable_when_redis_goes_away_and_work_again_after(own_redis: RedisServer) -> None:
    store_problems(own_redis.url, "t/echo")
    with FleetClient(own_redis.url, queue="nobody-listens-aio", timeout=600) as fleet:

        async def main() -> tuple[Any, int]:
            ev = fleet.evaluator()
            first = asyncio.ensure_future(fleet.evaluate("t/echo", echo(0)))
            assert await asyncio.to_thread(  # published: its job waits in the queue (no worker)
                wait_until, lambda: redis.Redis.from_url(own_redis.url).llen("nobody-listens-aio") == 1, 60
            )
            assert not first.done() and fleet.in_flight == 1
            own_redis.stop()
            outcome = await asyncio.gather(fleet.evaluate("t/echo", echo(1)), return_exceptions=True)
            own_redis.start()
            later = asyncio.ensure_future(fleet.evaluate("t/echo", echo(2)))
            # the restarted Redis lost the queue: when the reply reader finds its claim gone it
            # publishes the pending jobs again (``stats.republished``), before or after this push
            assert await asyncio.to_thread(
                wait_until,
                lambda: redis.Redis.from_url(own_redis.url).llen("nobody-listens-aio") == 1 + fleet.stats.republished,
                30,
            )
            assert ev._pusher is not None
            pushes = ev._pusher.pushes
            await asyncio.sleep(1.1)  # past retry_after: the next publish reopens the loop's connection ...
            again = [asyncio.ensure_future(fleet.evaluate("t/echo", echo(3)))]  # ... off the loop
            for _ in range(300):  # until the reopened connection is handed to the loop
                if ev._pusher.connected:
                    break
                await asyncio.sleep(0.05)
            again.append(asyncio.ensure_future(fleet.evaluate("t/echo", echo(4))))
            for _ in range(1200):  # until the last call has pushed
                if ev._pusher.pushes != pushes:
                    break
                await asyncio.sleep(0.05)
            assert ev._pusher.connected and ev._pusher.pushes == pushes + 1  # the last went on it
            for task in (first, later, *again):
                task.cancel()
            return outcome[0], ev.stats.published

        err, published = asyncio.run(main())
    assert isinstance(err, BrokerUnavailable)  # an error for the caller, never a reward
    assert published >= 2


def test_connections_of_ended_loops_are_closed(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    with FleetClient(redis_url, queue="nobody-listens-loops", timeout=600) as fleet:

        async def one_step() -> None:
            task = asyncio.ensure_future(fleet.evaluate("t/echo", echo(0), dedupe=False))
            await asyncio.sleep(0.05)
            task.cancel()

        asyncio.run(one_step())
        before = int(r.info("clients")["connected_clients"])
        for _ in range(5):
            asyncio.run(one_step())  # a new loop each time, as ``asyncio.run`` per training step does
        assert wait_until(lambda: int(r.info("clients")["connected_clients"]) <= before, 60)
        assert len(fleet._evaluators) == 1


def test_lpush_command_is_resp_for_any_bytes() -> None:
    values = [b"", b"\r\n", b"\x00\xff" * 3, json.dumps({"a": 1}).encode()]
    cmd = lpush_command(b"q", values)
    assert cmd.startswith(b"*6\r\n$5\r\nLPUSH\r\n$1\r\nq\r\n$0\r\n\r\n$2\r\n\r\n\r\n$6\r\n")


def test_pushes_go_over_a_unix_socket_url(tmp_path: Any) -> None:
    path = tmp_path / "redis.sock"
    with RedisServer(launch=lambda argv: [*argv, "--unixsocket", str(path), "--unixsocketperm", "700"]) as server:
        url = f"unix://{path}?db=2"

        async def main() -> BaseException | None:
            pusher = AsyncPusher(url, "q")
            assert pusher.ensure(asyncio.get_running_loop())
            outcome = await push(pusher, [b"over-unix"])
            pusher.close()
            return outcome

        assert asyncio.run(main()) is None
        assert redis.Redis(port=server.port, db=2).rpop("q") == b"over-unix"


def test_closing_fails_the_waiting_pushes_as_client_closed_not_as_an_unreachable_redis() -> None:
    async def main() -> BaseException | None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(-1)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        pusher = AsyncPusher(f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}/0", "q")
        assert pusher.ensure(asyncio.get_running_loop())
        waiting = push(pusher, [b"a"])
        await asyncio.sleep(0.05)
        pusher.close()
        server.close()
        return await waiting

    outcome = asyncio.run(main())
    assert isinstance(outcome, ClientClosed) and not isinstance(outcome, BrokerUnavailable)
