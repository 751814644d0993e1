"""code-judge's API (0xWJ/code-judge), so verl reward managers written for it (X-Coder's
``code_execution`` manager, rStar2-style ones) switch by URL.

- ``POST /run``, ``POST /judge``: a Submission ``{sub_id?, type: "python"|"cpp", solution,
  input?, expected_output?, options?}`` -> a SubmissionResult ``{sub_id, success, run_success,
  cost, stdout, stderr, reason}`` (``/judge`` leaves out stdout and stderr).
- ``POST /run/batch``, ``/judge/batch``, ``/run/long-batch``, ``/judge/long-batch``: ``{type:
  "batch", sub_id?, submissions: [...]}`` -> ``{sub_id, results: [...]}`` in order.
- ``GET /status``: ``{queue, num_workers}``.

``run_success``: the program exited 0 within the limits. ``success``: that, with a stdout that
is UTF-8 text (``runs.stdout_not_comparable``), and, when ``expected_output`` is given, its stdout
equals it after both are stripped, exactly as
code-judge's worker compares (``stdout.strip() == expected_output.strip()``: the spacing and
line breaks inside count, so ``1 2`` on one line is not ``1``, ``2`` on two). Each submission
runs as an input of a fleet run job; submissions with the same solution (one completion's
tests) share one job.

``reason``: "" (it ran; success says how it went), "worker_timeout" (the program hit the time
limit), "queue_timeout" (no answer before the request's deadline: the fleet is busy, or its
Redis was away all that time, the submission sent again meanwhile; code-judge's client
resubmits exactly these), "internal_error" (the fleet took it and failed it, three times: no
statement about the program), "invalid_input" (a submission
the fleet cannot run, e.g. type "math"; permanent). The answer is always HTTP 200 for a
well-formed body, as code-judge's clients expect; a malformed body is a 422.

Limits are code-judge's defaults: 10 s and 256 MB per run.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cpfleet.core import protocol as wire
from cpfleet.core.errors import BrokerFull
from cpfleet.core.results import RunStatus
from cpfleet.gateway.app import FleetFailed, Gateway, HTTPError, JSONResponse, Refused
from cpfleet.gateway.payloads import json_object
from cpfleet.gateway.registry import protocol
from cpfleet.gateway.runs import RunAnswer, RunSpec, stdout_not_comparable

TYPES = {"python": "python3", "cpp": "cpp"}
TIME_LIMIT_S = 10.0
MEMORY_MB = 256
SHORT_WAIT_S = 60.0  # /run, /judge, the plain batches
LONG_WAIT_S = 3500.0  # the long batches (code-judge's client waits 3600 s)
STATUS_CACHE_S = 30.0
FLEET_FAILURE_RETRIES = 2
# while Redis is away a submission is sent again after these pauses (doubling), within its wait
REDIS_RETRY_FIRST_S = 0.5
REDIS_RETRY_MAX_S = 10.0


def _submission(i: int | None, sub: Any) -> dict[str, Any]:
    where = "body" if i is None else f"submissions[{i}]"
    if not isinstance(sub, dict):
        raise HTTPError(422, f"{where} must be an object")
    if not isinstance(sub.get("solution"), str):
        raise HTTPError(422, f"{where}.solution must be a string")
    if not isinstance(sub.get("type"), str):
        raise HTTPError(422, f"{where}.type must be a string ('python' or 'cpp')")
    for key in ("input", "expected_output"):
        if sub.get(key) is not None and not isinstance(sub[key], str):
            raise HTTPError(422, f"{where}.{key} must be a string or null")
    sub_id = sub.get("sub_id")
    return {**sub, "sub_id": str(sub_id) if sub_id not in (None, "") else str(uuid.uuid4())}


def _result(sub_id: str, *, success: bool, run_success: bool, cost: float, reason: str,
            stdout: str | None = None, stderr: str | None = None) -> dict[str, Any]:
    return {"sub_id": sub_id, "success": success, "run_success": run_success, "cost": round(cost, 6),
            "stdout": stdout, "stderr": stderr, "reason": reason}


def to_result(sub: dict[str, Any], answer: RunAnswer) -> dict[str, Any]:
    job, run = answer.job, answer.run
    if run is None:  # nothing ran: a compile error (the program's), or no code
        stderr = job.compile.stderr if job.compile is not None else str(job.status)
        return _result(sub["sub_id"], success=False, run_success=False, cost=0.0, reason="", stdout="", stderr=stderr)
    run_success = run.status == RunStatus.FINISHED and run.exit_code == 0 and not run.stdout_truncated
    # a stdout whose text must not be compared (not UTF-8: U+FFFD would equal an expected text
    # holding U+FFFD) is no success, whoever compares it: this judge with expected_output, or
    # the client itself without one
    success = run_success and not stdout_not_comparable(run)
    expected = sub.get("expected_output")
    if success and expected is not None:
        # code-judge's own comparison (its worker: stdout.strip() == expected_output.strip())
        success = run.stdout.strip() == expected.strip()
    reason = "worker_timeout" if run.status == RunStatus.TIME_LIMIT else ""
    return _result(sub["sub_id"], success=success, run_success=run_success, cost=run.wall_ms / 1000.0,
                   reason=reason, stdout=run.stdout, stderr=run.stderr)


@protocol("codejudge")
def routes(gw: Gateway) -> Sequence[Route]:
    workers_seen: dict[str, float] = {"at": 0.0, "count": 0.0}

    async def one(sub: dict[str, Any], wait_s: float) -> dict[str, Any]:
        started = time.monotonic()
        language = TYPES.get(sub["type"])
        if language is None:
            return _result(sub["sub_id"], success=False, run_success=False, cost=0.0, reason="invalid_input",
                           stderr=f"type {sub['type']!r} is not supported here (supported: {', '.join(TYPES)})")
        cap = min(gw.config.run_output_bytes, wire.MAX_RUN_OUTPUT_CAP)
        spec = RunSpec(code=sub["solution"], language=language, time_limit_s=TIME_LIMIT_S, memory_limit_mb=MEMORY_MB,
                       output_cap=cap)
        stdin = (sub.get("input") or "").encode("utf-8", "surrogatepass")
        failures, pause = 0, REDIS_RETRY_FIRST_S
        try:
            while True:
                try:
                    answer = await gw.runs.run(spec, stdin, max(0.0, wait_s - (time.monotonic() - started)))
                    break
                except FleetFailed as e:
                    # clients that read only ``success`` (X-Coder's manager) would score this:
                    # a fleet failure (a lost worker, a broken sandbox) is run again first
                    failures += 1
                    if failures > FLEET_FAILURE_RETRIES:
                        return _result(sub["sub_id"], success=False, run_success=False,
                                       cost=time.monotonic() - started, reason="internal_error", stderr=str(e))
                except (ConnectionError, BrokerFull) as e:
                    # Redis away (a restart, a failover) or full: the fleet's state, not the
                    # program's. judge_client gives up on internal_error, and X-Coder scores it 0,
                    # so the submission waits for Redis while its wait lasts, then is the
                    # queue_timeout that judge_client resubmits
                    if time.monotonic() + pause - started >= wait_s:
                        raise Refused(f"Redis did not come back within the wait ({wait_s:g}s): {e}") from e
                    gw.metrics.redis_waits.inc()
                    await asyncio.sleep(pause)
                    pause = min(2 * pause, REDIS_RETRY_MAX_S)
        except Refused as e:
            return _result(sub["sub_id"], success=False, run_success=False, cost=time.monotonic() - started,
                           reason="queue_timeout", stderr=str(e))
        except ValueError as e:
            return _result(sub["sub_id"], success=False, run_success=False, cost=0.0, reason="invalid_input",
                           stderr=str(e))
        return to_result(sub, answer)

    def shape(result: dict[str, Any], with_output: bool) -> dict[str, Any]:
        return result if with_output else {k: v for k, v in result.items() if k not in ("stdout", "stderr")}

    def single(with_output: bool) -> Any:
        async def handler(request: Request) -> Response:
            sub = _submission(None, json_object(await gw.body_json(request)))
            return JSONResponse(shape(await one(sub, SHORT_WAIT_S), with_output))

        return handler

    def batch(with_output: bool, wait_s: float) -> Any:
        async def handler(request: Request) -> Response:
            body = json_object(await gw.body_json(request))
            subs = body.get("submissions")
            if not isinstance(subs, list) or not subs:
                raise HTTPError(422, "'submissions' must be a non-empty list")
            parsed = [_submission(i, s) for i, s in enumerate(subs)]
            results = await asyncio.gather(*(one(s, wait_s) for s in parsed))
            sub_id = body.get("sub_id")
            return JSONResponse({
                "sub_id": str(sub_id) if sub_id not in (None, "") else str(uuid.uuid4()),
                "results": [shape(r, with_output) for r in results],
            })

        return handler

    async def status(request: Request) -> Response:
        fleet = gw.fleet
        queue = await asyncio.to_thread(fleet.queue_depth)
        now = time.monotonic()
        if now - workers_seen["at"] > STATUS_CACHE_S:
            workers_seen["count"] = float(await asyncio.to_thread(count_workers, fleet.redis_url))
            workers_seen["at"] = now
        return JSONResponse({"queue": queue, "num_workers": int(workers_seen["count"])})

    def route(path: str, handler: Any, method: str = "POST") -> Route:
        return Route(path, gw.endpoint(path.strip("/").replace("/", "_"), handler), methods=[method])

    return [
        route("/run", single(True)),
        route("/judge", single(False)),
        route("/run/batch", batch(True, SHORT_WAIT_S)),
        route("/judge/batch", batch(False, SHORT_WAIT_S)),
        route("/run/long-batch", batch(True, LONG_WAIT_S)),
        route("/judge/long-batch", batch(False, LONG_WAIT_S)),
        route("/status", status, "GET"),
    ]


def count_workers(redis_url: str) -> int:
    """Fleet nodes answering a Celery ping within 2 s (0 when none does)."""
    from celery import Celery

    from cpfleet.core.redis_url import parse_redis_url

    target = parse_redis_url(redis_url)  # kombu spells a Sentinel URL its own way
    app = Celery("cpfleet-gateway-status", broker=target.broker_url(), set_as_current=False)
    # the workers accept msgpack only (cpfleet.workers.config), control messages included
    app.conf.update(task_serializer="msgpack", result_serializer="msgpack", accept_content=["msgpack"],
                    result_accept_content=["msgpack"], broker_transport_options=target.broker_transport_options())
    try:
        return len(app.control.ping(timeout=2.0) or [])
    except Exception:
        return 0
    finally:
        app.close()
