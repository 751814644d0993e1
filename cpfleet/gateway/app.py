"""The gateway's core: one Starlette app over one FleetClient, with what every protocol shares.

``cpfleet serve`` runs no untrusted code: every endpoint turns its request into fleet jobs
(judging jobs, or run jobs for the endpoints that return a program's output) and waits for
their results, so the HTTP process holds only requests and futures, and any number of
replicas can front one Redis (each is its own FleetClient with its own reply list).

Overload is never a wrong reward. A request's jobs wait in the fleet's queue, not in a buffer of
this process; while this replica holds ``max_backlog`` unanswered jobs a request waits for room,
and it is refused only when its own deadline (its client's, see each protocol module) passes.
A refusal takes the form that request's client retries (a 504 for verl's sandbox_fusion, a 503
with Retry-After for the reward clients, ``reason: queue_timeout`` for code-judge's), and the
jobs of a request that timed out stay queued: the client's retry, being the same job, joins
them (the client's in-flight dedupe for judge jobs, ``runs.RunCoalescer`` for runs) instead of
queueing the work again. A permanent error
(an unknown problem id, inline tests that make no problem) is a 4xx with the reason: retrying
cannot help, and it is never a score.

With ``token`` set every endpoint but ``/healthz`` wants ``Authorization: Bearer <token>``.
Bodies over ``max_body_bytes`` get 413, a body that stalls for ``body_idle_s`` 408; a malformed
payload 400 or 422 saying what is wrong.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette import responses
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from cpfleet.core.errors import (
    BrokerFull,
    ClientClosed,
    CpfleetError,
    FleetBusy,
    InlineProblemError,
    UnknownProblemError,
)
from cpfleet.core.protocol import REWARD_ONLY_MODE
from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_MB = 64.0
DEFAULT_MAX_BACKLOG = 100_000
DEFAULT_WAIT_S = 600.0
DEFAULT_JOB_TIMEOUT_S = 900.0
DEFAULT_COALESCE_MS = 5.0
# The longest a request body may go without a byte once it has begun: a stalled or hostile
# client (one that promises a Content-Length and stops) holds a connection and its buffered body
# only this long, then gets 408. Far above any pause of a live client, even over a slow link.
DEFAULT_BODY_IDLE_S = 60.0

Handler = Callable[[Request], Awaitable[Response]]


class HTTPError(CpfleetError):
    """A request this gateway answers with ``status`` and ``{"error": message}`` (control flow
    inside the gateway: it never leaves it as an exception)."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


class JSONResponse(responses.JSONResponse):
    """Starlette's JSONResponse, except that a string holding a lone UTF-16 surrogate (a client's
    ``"\\ud800"`` escape echoed back: an id, a submission's code, a program's output decoded with
    surrogateescape) renders as the same ``\\u`` escape instead of failing the answer with a 500.
    JSON allows that escape and the client's parser reads back exactly the string it sent; text
    that UTF-8 carries renders as before, unescaped. Every endpoint answers with this class."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


class Refused(CpfleetError):
    """The gateway cannot answer this request now (backlog full, deadline passed, Redis away):
    each endpoint answers it in the form its client retries."""


class FleetFailed(Refused):
    """The fleet took the work and failed it (INTERNAL, infra_error): nothing about the program
    may be read into it; as retryable as any refusal."""


@dataclass(frozen=True, slots=True)
class ServeConfig:
    redis_url: str = "redis://127.0.0.1:6379/0"
    token: str | None = None
    max_body_bytes: int = int(DEFAULT_MAX_BODY_MB * 1024 * 1024)
    body_idle_s: float = DEFAULT_BODY_IDLE_S  # a body that stalls this long: 408
    # unanswered jobs (or run inputs) this replica holds before it refuses new requests
    max_backlog: int = DEFAULT_MAX_BACKLOG
    # the longest a request waits for its answer when its client states no deadline of its own
    wait_s: float = DEFAULT_WAIT_S
    timeout_s: float = DEFAULT_JOB_TIMEOUT_S  # a fleet job's deadline (then INTERNAL, infra_error)
    reward_shape: str = "all_or_nothing"
    # the mode of the routes that answer the reward only (OpenRLHF's /get_reward, slime's
    # /slime): hidden (full mode's reward; a wrong completion runs no public test, for feedback
    # nobody reads)
    reward_mode: str = REWARD_ONLY_MODE
    queue: str | None = None
    # /run_code calls with the same program and limits that arrive within this window share one
    # multi-input run job (verl sends each test of one completion as its own call)
    coalesce_ms: float = DEFAULT_COALESCE_MS
    coalesce_max_inputs: int = 256
    run_output_bytes: int = 16 * 1024 * 1024  # stdout/stderr a run returns per input


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "cpfleet_http_requests_total", "HTTP requests", ["endpoint", "status"], registry=self.registry
        )
        self.jobs = Counter(
            "cpfleet_http_jobs_total", "jobs judged for HTTP callers", ["verdict", "infra_error"], registry=self.registry
        )
        self.runs = Counter(
            "cpfleet_http_run_jobs_total", "run jobs published for HTTP callers", registry=self.registry
        )
        self.run_inputs = Counter(
            "cpfleet_http_run_inputs_total", "inputs run for HTTP callers", registry=self.registry
        )
        self.run_held = Counter(
            "cpfleet_http_run_groups_held_total",
            "run-job groups held past their window while the fleet's queue had jobs waiting", registry=self.registry
        )
        self.redis_waits = Counter(
            "cpfleet_http_redis_waits_total",
            "submissions sent again after Redis was away or full (code-judge's routes)", registry=self.registry
        )
        self.in_flight = Gauge("cpfleet_http_backlog", "jobs and run inputs admitted and not answered", registry=self.registry)
        self.refused = Counter(
            "cpfleet_http_refused_total", "requests refused (backlog, deadline, Redis)", ["endpoint"], registry=self.registry
        )


class Gateway:
    """What the protocol modules build on: the fleet client, admission, waiting and errors."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        self._fleet: Any = None
        self.backlog = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        self._runs: Any = None  # the run coalescer, made at startup (gateway.runs)

    # --- lifecycle ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        from cpfleet.producer.client import FleetClient
        from cpfleet.sandbox.extract import programs_key

        options: dict[str, Any] = {
            "timeout": self.config.timeout_s,
            # the queue is the buffer; this bound only stops a runaway replica
            "max_in_flight": max(1, self.config.max_backlog),
            # in-flight dedupe on the programs (every fenced block, any language), not the prose
            "code_key": programs_key,
        }
        if self.config.queue:
            options["queue"] = self.config.queue
        self._fleet = await asyncio.to_thread(FleetClient, self.config.redis_url, **options)
        log.info("ready: connected to the fleet's Redis")
        try:
            yield
        finally:
            # uvicorn has drained the requests in flight by now (graceful shutdown): their
            # answers went out; only abandoned jobs are still pending
            await asyncio.to_thread(self._fleet.close)

    @property
    def fleet(self) -> Any:
        """The FleetClient (open between startup and shutdown)."""
        if self._fleet is None:
            raise Refused("the gateway is not connected to the fleet yet")
        return self._fleet

    # --- admission and waiting ------------------------------------------------------------

    async def admit(self, n: int, within_s: float) -> None:
        """Count ``n`` jobs against the backlog, waiting (first come, first served) up to
        ``within_s`` seconds while the backlog is full; Refused after that. Holding a request is
        cheap and a refusal costs the client a retry (three 504s are a failed test for verl),
        so a request waits here for its turn as long as its own deadline allows."""
        limit = self.config.max_backlog
        if n > limit:
            raise Refused(f"{n} jobs in one request is more than this gateway's backlog ({limit})")
        if not self._waiters and self.backlog + n <= limit:
            self._take(n)
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (n, turn)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(turn), max(0.0, within_s))
        except BaseException as exc:  # the deadline, or the request itself cancelled
            if turn.done():  # admitted in the same instant: give the room back
                self.release(n)
            else:
                turn.cancel()
                self._waiters.remove(entry)
                self._wake()
            if not isinstance(exc, TimeoutError):
                raise
            raise Refused(
                f"{self.backlog} jobs are waiting here (limit {limit}) and none finished within {within_s:.0f}s; retry"
            ) from None

    def _take(self, n: int) -> None:
        self.backlog += n
        self.metrics.in_flight.set(self.backlog)

    def release(self, n: int) -> None:
        self.backlog -= n
        self.metrics.in_flight.set(self.backlog)
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.backlog + self._waiters[0][0] <= self.config.max_backlog:
            n, turn = self._waiters.popleft()
            self._take(n)
            turn.set_result(None)

    async def wait(self, work: Awaitable[Any], wait_s: float | None, units: int = 1) -> Any:
        """Await ``work`` (admitted for ``units`` jobs) for at most ``wait_s`` seconds (capped by
        ``config.wait_s``), its wait for room included. On timeout the work goes on (a retry of
        the same request joins it) and Refused is raised."""
        limit = self.config.wait_s if wait_s is None else min(wait_s, self.config.wait_s)
        end = time.monotonic() + limit
        try:
            if units:
                await self.admit(units, limit)
        except Refused:
            if asyncio.iscoroutine(work):
                work.close()  # never started: no "never awaited" warning
            raise
        task = asyncio.ensure_future(work)
        task.add_done_callback(lambda t: self._settled(t, units))
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(0.0, end - time.monotonic()))
        except TimeoutError:
            raise Refused(f"no answer within {limit:.0f}s: the fleet is busy (the work stays queued)") from None

    def _settled(self, task: asyncio.Future[Any], units: int) -> None:
        if units:
            self.release(units)
        if not task.cancelled():
            task.exception()  # retrieved: an abandoned task's error is not "never retrieved"

    async def judge(
        self,
        problem: Any,
        completion: str,
        *,
        reward_shape: str | None = None,
        mode: str | None = None,
        wait_s: float | None = None,
        language: str | None = None,
    ) -> JobResult:
        """One judging job on the fleet (its result, infra errors included: the caller decides).
        ``language`` fixes the solution's language (an unknown one: UnknownLanguage, a ValueError)."""
        if not isinstance(problem, str):
            # inline tests are stored (once per test set) before admission, so tests that make
            # no problem are the caller's 422 even while the backlog is full; a test set the
            # store lost since (Redis restarted without its data, a flush) is stored again once:
            # the caller sent the tests, so "unknown problem" is never its answer
            from cpfleet.producer.inline_registry import tests_digest

            registry = self.fleet.inline_registry
            digest = tests_digest(problem)
            judged: JobResult | None = None
            for _ in range(2):
                pid = registry.known(digest) or await asyncio.to_thread(registry.problem_id, problem)
                judged = await self.judge(pid, completion, reward_shape=reward_shape, mode=mode, wait_s=wait_s,
                                          language=language)
                if not permanent_error(judged):
                    break
                registry.forget(digest)
            assert judged is not None
            return judged
        fleet = self.fleet
        try:
            result: JobResult = await self.wait(
                fleet.evaluate(problem, completion, reward_shape=reward_shape, mode=mode, language=language), wait_s
            )
        except UnknownProblemError as e:  # refused at submit: the same answer as the worker's verdict
            result = JobResult.infra("", problem, str(e), verdict=Verdict.UNKNOWN_PROBLEM)
        self.metrics.jobs.labels(str(result.verdict), str(result.infra_error).lower()).inc()
        return result

    async def judge_record(self, record: Mapping[str, Any], completion: str, **kwargs: Any) -> JobResult:
        """``judge`` of a problem record built by ``problem_from_tests`` (inline tests with the
        checker or limits their protocol implies), stored once per content by the fleet
        client's inline registry; a record the store lost is stored again once."""
        from cpfleet.producer.inline_registry import record_key

        registry = self.fleet.inline_registry
        key = record_key(record)
        result: JobResult | None = None
        for _ in range(2):
            pid = registry.known(key) or await asyncio.to_thread(registry.record_id, record)
            result = await self.judge(pid, completion, **kwargs)
            if not permanent_error(result):
                break
            registry.forget(key)
        assert result is not None
        return result

    @property
    def runs(self) -> Any:
        """The run-job coalescer (``cpfleet.gateway.runs.RunCoalescer``) over this gateway."""
        if self._runs is None:
            from cpfleet.gateway.runs import RunCoalescer

            self._runs = RunCoalescer(self)
        return self._runs

    # --- requests -------------------------------------------------------------------------

    def authorized(self, request: Request) -> bool:
        if not self.config.token:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.config.token.encode())

    async def body_json(self, request: Request) -> Any:
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        # ASCII digits only (``str.isdigit`` is true of ``²``, which int() refuses), and no int() of
        # thousands of them: the HTTP layer refuses both first, this holds behind any other one
        if declared is not None and declared.isascii() and declared.isdigit() and (len(declared) > 19 or int(declared) > limit):
            raise HTTPError(413, f"request body over {limit} bytes")
        chunks, size = [], 0
        stream = request.stream()
        idle_s = self.config.body_idle_s
        try:
            while True:
                try:
                    async with asyncio.timeout(idle_s):
                        chunk = await anext(stream)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise HTTPError(408, f"the request body stalled: no byte of it came for {idle_s:g}s",
                                    {"Connection": "close"}) from None
                size += len(chunk)
                if size > limit:
                    raise HTTPError(413, f"request body over {limit} bytes")
                chunks.append(chunk)
        except ClientDisconnect:
            # the caller hung up before its body ended: its mistake (nobody reads this answer),
            # not a traceback in the log that any caller could write at will
            raise HTTPError(400, "the client closed the connection before its body ended") from None
        try:
            return json.loads(b"".join(chunks))
        except ValueError as e:
            # JSONDecodeError, UnicodeDecodeError, and the ValueError of CPython's int() for a
            # number of more than 4300 digits (valid JSON, which sets no bound): the caller's 400
            raise HTTPError(400, f"body is not JSON this gateway reads: {e}") from None
        except RecursionError:  # nesting deeper than the parser's stack: no payload needs it
            raise HTTPError(400, "body is not JSON this gateway reads: nested too deeply") from None

    def endpoint(
        self, name: str, fn: Handler, *, refuse: Callable[[str], Response] | None = None, auth: bool = True
    ) -> Handler:
        """Wrap a handler: auth, error answers, metrics. ``refuse`` turns a Refused (or an
        unreachable or full Redis) into the answer this endpoint's client retries; by default a
        503 with Retry-After."""
        refusal = refuse or retry_later

        async def handler(request: Request) -> Response:
            try:
                if auth and not self.authorized(request):
                    raise HTTPError(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
                response = await fn(request)
            except HTTPError as e:
                response = JSONResponse({"error": e.message}, status_code=e.status, headers=e.headers)
            except InlineProblemError as e:  # tests in a shape that makes no problem: permanent
                response = JSONResponse({"error": str(e)}, status_code=422)
            except (Refused, ConnectionError, BrokerFull, FleetBusy, ClientClosed) as e:
                # BrokerUnavailable is a ConnectionError: Redis away is the fleet busy, not a verdict
                self.metrics.refused.labels(name).inc()
                log.warning("%s refused: %s", name, e)
                response = refusal(str(e) or type(e).__name__)
            self.metrics.requests.labels(name, str(response.status_code)).inc()
            return response

        return handler

    # --- the gateway's own endpoints ------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        ok = await asyncio.to_thread(self.fleet.broker_reachable)
        return JSONResponse(
            {"ok": ok, "redis": ok, "backlog": self.backlog, "in_flight": self._fleet.in_flight if self._fleet else 0,
             "sandbox": "none: every program runs on the fleet's workers"},
            status_code=200 if ok else 503,
        )

    async def metrics_endpoint(self, request: Request) -> Response:
        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def retry_later(message: str) -> Response:
    """The default refusal: 503 with Retry-After, which the reward clients retry."""
    return JSONResponse({"error": message}, status_code=503, headers={"Retry-After": "1"})


def permanent_error(result: JobResult) -> str | None:
    """Why a result is a client's mistake that no retry fixes (None: it is not)."""
    if result.verdict == Verdict.UNKNOWN_PROBLEM:
        return (
            f"unknown problem {result.problem_id!r}: the fleet has no such problem "
            f"(load it with `cpfleet load`, or send the tests inline)"
        )
    return None


def raise_on_failure(results: list[JobResult]) -> None:
    """For endpoints that answer with a number: a permanent error is a 422 naming it, an
    infrastructure error a Refused (the client retries), never a score."""
    for r in results:
        reason = permanent_error(r)
        if reason:
            raise HTTPError(422, reason)
    bad = [r for r in results if r.infra_error]
    if bad:
        raise Refused(
            f"{len(bad)} of {len(results)} could not be judged (infrastructure): {bad[0].verdict}: {bad[0].infra_message}"
        )


def create_app(config: ServeConfig) -> Starlette:
    """The ASGI app: every registered protocol's routes, ``/healthz`` and ``/metrics``; the
    FleetClient is opened at startup and closed at shutdown."""
    from cpfleet.gateway.registry import protocols

    gateway = Gateway(config)
    routes: list[Route] = []
    for build in protocols().values():
        routes.extend(build(gateway))
    routes += [
        Route("/healthz", gateway.endpoint("healthz", gateway.healthz, auth=False), methods=["GET"]),
        Route("/metrics", gateway.endpoint("metrics", gateway.metrics_endpoint), methods=["GET"]),
    ]
    served = sorted({f"{m} {r.path}" for r in routes for m in (r.methods or ()) if m != "HEAD"}, key=lambda s: s.split()[1])

    async def routing_error(request: Request, exc: Exception) -> Response:
        """A method or a path the router has no route for, in the JSON error shape of every other
        answer (Starlette's own are plain text), the 405's Allow header kept."""
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            message = f"method {request.method} is not allowed on {request.url.path}: it takes {headers.get('Allow', '')}"
        elif exc.status_code == 404:
            message = f"no endpoint {request.url.path} here; this gateway serves {', '.join(served)}"
        else:
            message = str(exc.detail)
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=headers)

    app = Starlette(routes=routes, lifespan=gateway.lifespan, exception_handlers={HTTPException: routing_error})
    app.state.gateway = gateway
    return app
