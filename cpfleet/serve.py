"""``cpfleet serve``: the fleet over HTTP, in the shapes trainers and code-execution clients send.

An ASGI app (Starlette, served by uvicorn) over one FleetClient and its asyncio micro-batcher:

- ``POST /get_reward``: OpenRLHF's remote reward (``--reward.remote_url``). In:
  ``{"query": [str], "prompts": [str], "labels": [str]}``; the completion is ``query[i]`` minus
  its ``prompts[i]`` prefix, ``labels[i]`` a problem id or inline tests as JSON. Out:
  ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``.
- ``POST /slime``: slime's remote RM (``--rm-type remote_rm --rm-url``): ``{"prompt",
  "response", "label"}`` in, the reward as a bare number out.
- ``POST /run_code``, ``POST /submit``: SandboxFusion's API, so verl's ``sandbox_fusion`` reward
  path and the ``sandbox-fusion`` SDK only change their URL. ``/run_code`` runs one Python
  program on one stdin in this server process, through the same sandbox runner the workers use
  (fork server, namespaces, seccomp, rlimits, cgroup as the machine allows; ``/healthz`` says
  which), because its caller compares stdout itself and a fleet job returns verdicts, not
  output. ``/submit`` judges a completion on the fleet (``id`` = problem id, or
  ``config.provided_data`` with CommonOJ tests).
- ``POST /v1/judge``: the native batch, ``{"jobs": [{problem_id | tests, completion, ...}]}``;
  results stream back as NDJSON lines (``JobResult.to_dict()`` plus ``index``) as they finish.
- ``GET /healthz`` (Redis reachable, in-flight jobs, sandbox isolation level), ``GET /metrics``.

Infrastructure errors are never a silent 0: the reward endpoints, which have no way to say
"drop this sample", answer 503 with ``Retry-After`` (the trainers' clients retry, then give up
loudly); ``/v1/judge`` reports them per job (``infra_error``). With ``--token`` every endpoint
but ``/healthz`` wants ``Authorization: Bearer <token>``; binding to a non-loopback address
without a token is refused. Bodies over ``--max-body-mb`` get 413; when more than
``--max-in-flight`` jobs are pending (or every /run_code sandbox is busy with a full queue), a
request gets 429 with ``Retry-After``; a malformed payload gets 400 or 422 saying what is wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import queue
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from cpfleet.core.errors import InlineProblemError
from cpfleet.core.results import JobResult
from cpfleet.rewards import problem_ref

log = logging.getLogger("cpfleet.serve")

DEFAULT_MAX_BODY_MB = 64
DEFAULT_MAX_IN_FLIGHT = 50_000
RUN_CODE_LANGUAGES = ("python", "python3")
RUN_CODE_MAX_TIMEOUT_S = 60.0
RUN_CODE_DEFAULT_MEMORY_MB = 1024


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


@dataclass(frozen=True, slots=True)
class ServeConfig:
    redis_url: str = "redis://127.0.0.1:6379/0"
    token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_MB * 1024 * 1024
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    timeout_s: float = 900.0
    reward_shape: str = "all_or_nothing"
    run_code_sandboxes: int = 2
    run_code_queue: int = 64  # /run_code requests that may wait for a sandbox before 429
    queue: str | None = None


class _Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "cpfleet_http_requests_total", "HTTP requests", ["endpoint", "status"], registry=self.registry
        )
        self.jobs = Counter(
            "cpfleet_http_jobs_total", "jobs judged for HTTP callers", ["verdict", "infra_error"], registry=self.registry
        )
        self.in_flight = Gauge("cpfleet_http_jobs_in_flight", "jobs submitted and not answered", registry=self.registry)
        self.rejected = Counter(
            "cpfleet_http_backpressure_total", "requests refused with 429", ["endpoint"], registry=self.registry
        )


class _Sandboxes:
    """A few sandbox runners for /run_code, each used by one request at a time (made lazily)."""

    def __init__(self, size: int, max_waiting: int) -> None:
        self.size = size
        self.max_waiting = max_waiting
        self._free: queue.Queue[Any] = queue.Queue()
        self._made = 0
        self._waiting = 0
        self._lock = threading.Lock()
        self.isolation = "not started"

    def acquire(self) -> Any:
        """A runner (blocking); called in a worker thread."""
        with self._lock:
            if self._free.empty() and self._made < self.size:
                self._made += 1
                make = True
            else:
                make = False
        if make:
            from cpfleet.sandbox.runners import make_runner

            try:
                runner = make_runner("forkserver")
            except Exception:
                with self._lock:
                    self._made -= 1
                raise
            self.isolation = runner.isolation.summary()
            return runner
        return self._free.get()

    def release(self, runner: Any, broken: bool = False) -> None:
        if broken:
            with contextlib.suppress(Exception):
                runner.close()
            with self._lock:
                self._made -= 1
            return
        self._free.put(runner)

    def enter(self) -> None:
        with self._lock:
            if self._waiting >= self.size + self.max_waiting:
                raise _HTTPError(429, "every /run_code sandbox is busy; retry later", {"Retry-After": "1"})
            self._waiting += 1

    def leave(self) -> None:
        with self._lock:
            self._waiting -= 1

    def close(self) -> None:
        while not self._free.empty():
            with contextlib.suppress(Exception):
                self._free.get_nowait().close()


def create_app(config: ServeConfig) -> Starlette:
    """The ASGI app; the FleetClient is opened at startup and closed at shutdown."""
    from cpfleet.producer.client import FleetClient

    metrics = _Metrics()
    sandboxes = _Sandboxes(config.run_code_sandboxes, config.run_code_queue)
    run_pool = ThreadPoolExecutor(max_workers=config.run_code_sandboxes, thread_name_prefix="cpfleet-run-code")
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from cpfleet.sandbox.extract import programs_key

        options: dict[str, Any] = {
            "timeout": config.timeout_s,
            "max_in_flight": max(1, config.max_in_flight),
            # in-flight dedupe on the programs (every fenced block, any language), not the prose
            "code_key": programs_key,
        }
        if config.queue:
            options["queue"] = config.queue
        fleet = await asyncio.to_thread(FleetClient, config.redis_url, **options)
        state["fleet"] = fleet
        try:
            yield
        finally:
            await asyncio.to_thread(fleet.close)
            await asyncio.to_thread(run_pool.shutdown, True)
            await asyncio.to_thread(sandboxes.close)

    def fleet() -> Any:
        return state["fleet"]

    def authorized(request: Request) -> bool:
        if not config.token:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), config.token.encode())

    async def body_json(request: Request) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > config.max_body_bytes:
            raise _HTTPError(413, f"request body over {config.max_body_bytes} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > config.max_body_bytes:
                raise _HTTPError(413, f"request body over {config.max_body_bytes} bytes")
            chunks.append(chunk)
        try:
            return json.loads(b"".join(chunks))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _HTTPError(400, f"body is not JSON: {e}") from None

    def room(endpoint: str, jobs: int) -> None:
        if fleet().in_flight + jobs > config.max_in_flight:
            metrics.rejected.labels(endpoint).inc()
            raise _HTTPError(429, f"{fleet().in_flight} jobs in flight (limit {config.max_in_flight})", {"Retry-After": "1"})

    async def judge(problem: Any, completion: str, *, reward_shape: str | None = None, mode: str | None = None) -> JobResult:
        metrics.in_flight.inc()
        try:
            result: JobResult = await fleet().evaluate(problem, completion, reward_shape=reward_shape, mode=mode)
        finally:
            metrics.in_flight.dec()
        metrics.jobs.labels(str(result.verdict), str(result.infra_error).lower()).inc()
        return result

    def endpoint(name: str, *, auth: bool = True) -> Callable[[Callable[[Request], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]]:
        def wrap(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
            async def handler(request: Request) -> Response:
                try:
                    if auth and not authorized(request):
                        raise _HTTPError(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
                    response = await fn(request)
                except _HTTPError as e:
                    response = JSONResponse({"error": e.message}, status_code=e.status, headers=e.headers)
                except InlineProblemError as e:  # tests in a shape that makes no problem
                    response = JSONResponse({"error": str(e)}, status_code=422)
                metrics.requests.labels(name, str(response.status_code)).inc()
                return response

            return handler

        return wrap

    # --- OpenRLHF ---------------------------------------------------------------------------

    @endpoint("get_reward")
    async def get_reward(request: Request) -> Response:
        body = _object(await body_json(request))
        queries = _str_list(body, "query")
        prompts = _str_list(body, "prompts", len(queries), required=False)
        labels = _list(body, "labels", len(queries))
        room("get_reward", len(queries))
        completions = [_strip_prompt(q, p) for q, p in zip(queries, prompts or [""] * len(queries), strict=True)]
        results = await asyncio.gather(*(judge(_label(lb), c) for lb, c in zip(labels, completions, strict=True)))
        _raise_on_infra(results)
        rewards = [float(r.reward or 0.0) for r in results]
        return JSONResponse(
            {
                "rewards": rewards,
                "scores": rewards,
                "extra_logs": {
                    "pass_rate": [_pass_rate(r) for r in results],
                    "compiled": [0.0 if str(r.verdict) in ("NO_CODE", "COMPILE_ERROR") else 1.0 for r in results],
                },
            }
        )

    # --- slime ------------------------------------------------------------------------------

    @endpoint("slime")
    async def slime(request: Request) -> Response:
        body = _object(await body_json(request))
        response = body.get("response")
        if not isinstance(response, str):
            raise _HTTPError(422, "'response' must be a string")
        if "label" not in body:
            raise _HTTPError(422, "'label' (problem id or inline tests) is required")
        room("slime", 1)
        result = await judge(_label(body["label"]), response)
        _raise_on_infra([result])
        return JSONResponse(float(result.reward or 0.0))

    # --- SandboxFusion ----------------------------------------------------------------------

    @endpoint("run_code")
    async def run_code(request: Request) -> Response:
        body = _object(await body_json(request))
        code = body.get("code")
        if not isinstance(code, str):
            raise _HTTPError(422, "'code' must be a string")
        language = body.get("language", "python")
        if language not in RUN_CODE_LANGUAGES:
            raise _HTTPError(400, f"language {language!r} is not supported here (supported: {', '.join(RUN_CODE_LANGUAGES)})")
        if body.get("files") or body.get("fetch_files"):
            raise _HTTPError(400, "'files' and 'fetch_files' are not supported")
        stdin = body.get("stdin") or ""
        if not isinstance(stdin, str):
            raise _HTTPError(422, "'stdin' must be a string or null")
        try:
            run_timeout = min(float(body.get("run_timeout", 10)), RUN_CODE_MAX_TIMEOUT_S)
            memory = int(body.get("memory_limit_MB", -1))
        except (TypeError, ValueError):
            raise _HTTPError(422, "'run_timeout' and 'memory_limit_MB' must be numbers") from None
        if run_timeout <= 0:
            raise _HTTPError(422, "'run_timeout' must be > 0")
        memory = RUN_CODE_DEFAULT_MEMORY_MB if memory <= 0 else max(16, min(memory, 65536))
        sandboxes.enter()
        try:
            # its own threads, one per sandbox: waiting requests queue there, not in the default
            # executor the fleet client's publishes use
            reply = await asyncio.get_running_loop().run_in_executor(
                run_pool, _run_one, sandboxes, code, stdin, run_timeout, memory
            )
        finally:
            sandboxes.leave()
        return JSONResponse(reply)

    @endpoint("submit")
    async def submit(request: Request) -> Response:
        body = _object(await body_json(request))
        completion = body.get("completion")
        if not isinstance(completion, str):
            raise _HTTPError(422, "'completion' must be a string")
        config_ = body.get("config") or {}
        if not isinstance(config_, dict):
            raise _HTTPError(422, "'config' must be an object")
        provided = config_.get("provided_data")
        if provided:
            problem: Any = _common_oj_tests(provided)
        elif body.get("id") not in (None, ""):
            problem = str(body["id"])
        else:
            raise _HTTPError(422, "'id' (a problem id) or config.provided_data (tests) is required")
        room("submit", 1)
        try:
            result = await judge(problem, completion, reward_shape="all_or_nothing")
        except ValueError as e:
            raise _HTTPError(422, str(e)) from None
        _raise_on_infra([result])
        from cpfleet.sandbox.extract import extract_code

        return JSONResponse(
            {
                "id": body.get("id", ""),
                "accepted": result.reward == 1.0 and result.verdict == "OK",
                "extracted_code": extract_code(completion) or "",
                "extracted_type": "fenced" if extract_code(completion) else "empty",
                "tests": _submit_tests(result),
                "extra": {"verdict": str(result.verdict), "reward": result.reward},
            }
        )

    # --- native -----------------------------------------------------------------------------

    @endpoint("judge")
    async def judge_batch(request: Request) -> Response:
        body = _object(await body_json(request))
        jobs = body.get("jobs")
        if not isinstance(jobs, list) or not jobs:
            raise _HTTPError(422, "'jobs' must be a non-empty list")
        parsed = [_native_job(i, j, body) for i, j in enumerate(jobs)]
        room("judge", len(parsed))

        async def one(i: int, job: dict[str, Any]) -> dict[str, Any]:
            try:
                result = await judge(job["problem"], job["completion"], reward_shape=job["reward_shape"], mode=job["mode"])
            except ValueError as e:  # unusable inline tests: this job only
                return {"index": i, "job_id": job["job_id"], "error": str(e)}
            d = result.to_dict()
            d["job_id"] = job["job_id"] if job["job_id"] is not None else d["job_id"]
            d["index"] = i
            return d

        tasks = [asyncio.ensure_future(one(i, j)) for i, j in enumerate(parsed)]

        async def stream() -> AsyncIterator[bytes]:
            try:
                for next_done in asyncio.as_completed(tasks):
                    yield (json.dumps(await next_done) + "\n").encode()
            finally:
                for t in tasks:
                    t.cancel()

        return StreamingResponse(stream(), media_type="application/x-ndjson")

    @endpoint("healthz", auth=False)
    async def healthz(request: Request) -> Response:
        try:
            ok = bool(await asyncio.to_thread(fleet()._redis.ping))
        except Exception:
            ok = False
        return JSONResponse(
            {"ok": ok, "redis": ok, "in_flight": fleet().in_flight, "run_code_sandbox": sandboxes.isolation},
            status_code=200 if ok else 503,
        )

    @endpoint("metrics")
    async def metrics_endpoint(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    routes = [
        Route("/get_reward", get_reward, methods=["POST"]),
        Route("/slime", slime, methods=["POST"]),
        Route("/run_code", run_code, methods=["POST"]),
        Route("/submit", submit, methods=["POST"]),
        Route("/v1/judge", judge_batch, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


# --- payload helpers ---------------------------------------------------------------------------


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise _HTTPError(422, f"body must be a JSON object, got {type(body).__name__}")
    return body


def _list(body: Mapping[str, Any], key: str, n: int | None = None, *, required: bool = True) -> list[Any]:
    value = body.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise _HTTPError(422, f"{key!r} must be a list")
    if n is not None and len(value) != n:
        raise _HTTPError(422, f"{key!r} has {len(value)} items, 'query' has {n}")
    return value


def _str_list(body: Mapping[str, Any], key: str, n: int | None = None, *, required: bool = True) -> list[str]:
    value = _list(body, key, n, required=required)
    if not all(isinstance(v, str) for v in value):
        raise _HTTPError(422, f"{key!r} must be a list of strings")
    return value


def _label(label: Any) -> Any:
    ref = problem_ref(label)
    if isinstance(ref, str) and not ref:
        raise _HTTPError(422, "a label is empty: it must be a problem id or inline tests")
    if not isinstance(ref, str | dict | list):
        raise _HTTPError(422, f"a label must be a problem id or inline tests, got {type(label).__name__}")
    return ref


# End-of-turn / end-of-sequence tokens that OpenRLHF leaves in ``query`` (it decodes with
# skip_special_tokens=False): ChatML/Qwen/Llama-3 ``<|...|>``, Llama-2/Mistral ``</s>``, Gemma.
_TRAILING_SPECIAL = re.compile(r"(?:\s|<\|[A-Za-z0-9_]+\|>|</s>|<eos>|<end_of_turn>|<pad>)+\Z")


def _strip_prompt(query: str, prompt: str) -> str:
    """OpenRLHF sends prompt + response decoded together: the response is what follows the prompt,
    without the special tokens that close the turn (a fence followed by ``<|im_end|>`` on the same
    line would not close a code block)."""
    response = query
    if prompt and query.startswith(prompt):
        response = query[len(prompt) :]
    elif prompt:
        at = query.rfind(prompt)
        if at >= 0:
            response = query[at + len(prompt) :]
    return _TRAILING_SPECIAL.sub("\n", response)


def _raise_on_infra(results: Sequence[JobResult]) -> None:
    bad = [r for r in results if r.infra_error]
    if bad:
        raise _HTTPError(
            503,
            f"{len(bad)} of {len(results)} could not be judged (infrastructure): {bad[0].verdict}: {bad[0].infra_message}",
            {"Retry-After": "1"},
        )


def _pass_rate(r: JobResult) -> float:
    s = r.hidden if r.hidden.total and r.mode == "full" else r.public
    return s.passed / s.total if s.total else 0.0


def _native_job(i: int, job: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(job, dict):
        raise _HTTPError(422, f"jobs[{i}] must be an object")
    completion = job.get("completion")
    if not isinstance(completion, str):
        raise _HTTPError(422, f"jobs[{i}].completion must be a string")
    if job.get("problem_id"):
        if not isinstance(job["problem_id"], str):
            raise _HTTPError(422, f"jobs[{i}].problem_id must be a string")
        problem: Any = job["problem_id"]
    elif "tests" in job:
        problem = problem_ref(job["tests"])
    else:
        raise _HTTPError(422, f"jobs[{i}] needs 'problem_id' or 'tests'")
    reward_shape = job.get("reward_shape") or defaults.get("reward_shape")
    mode = job.get("mode") or defaults.get("mode")
    from cpfleet.core.protocol import check_options

    try:
        check_options(reward_shape or "all_or_nothing", mode or "full")
    except ValueError as e:
        raise _HTTPError(422, f"jobs[{i}]: {e}") from None
    job_id = job.get("job_id")
    return {"problem": problem, "completion": completion, "reward_shape": reward_shape, "mode": mode,
            "job_id": None if job_id is None else str(job_id)}


def _common_oj_tests(provided: Any) -> dict[str, list[str]]:
    """SandboxFusion CommonOJ ``provided_data``: ``test`` is [{input: {stdin}, output: {stdout}}]
    (or its JSON text); returned as ``{"inputs", "outputs"}`` inline tests."""
    if not isinstance(provided, dict):
        raise _HTTPError(422, "config.provided_data must be an object with 'test'")
    tests = provided.get("test")
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError:
            raise _HTTPError(422, "config.provided_data.test is not JSON") from None
    if not isinstance(tests, list) or not tests:
        raise _HTTPError(422, "config.provided_data.test must be a non-empty list")
    inputs, outputs = [], []
    for i, t in enumerate(tests):
        try:
            stdin, stdout = t["input"]["stdin"], t["output"]["stdout"]
        except (KeyError, TypeError):
            raise _HTTPError(422, f"provided_data.test[{i}] must be {{input: {{stdin}}, output: {{stdout}}}}") from None
        if not isinstance(stdin, str) or not isinstance(stdout, str):
            raise _HTTPError(422, f"provided_data.test[{i}]: stdin and stdout must be strings")
        inputs.append(stdin)
        outputs.append(stdout)
    return {"inputs": inputs, "outputs": outputs}


def _submit_tests(result: JobResult) -> list[dict[str, Any]]:
    """SandboxFusion's per-test list, for the tests that decide acceptance: the hidden tests in
    run order (judged all-or-nothing: those before the first failure passed, then the failure,
    then the tests not run), or the public tests when the problem has no hidden ones."""

    def entry(passed: bool, verdict: str, ran: bool = True) -> dict[str, Any]:
        return {
            "passed": passed,
            "exec_info": {
                "status": "Success" if passed else "Failed",
                "message": verdict if ran else "not run: an earlier test failed",
                "compile_result": None,
                "run_result": None,
                "executor_pod_name": None,
                "files": {},
            },
            "test_info": {"verdict": verdict if ran else None},
        }

    h = result.hidden
    if result.mode != "full" or not h.total:
        return [entry(str(t.verdict) == "OK", str(t.verdict)) for t in result.public.tests]
    out = []
    for i in range(h.total):
        if i < h.passed:
            out.append(entry(True, "OK"))
        elif i == h.passed and h.run > h.passed:
            out.append(entry(False, str(h.first_failure or "WRONG_ANSWER")))
        else:
            out.append(entry(False, "NOT_RUN", ran=False))
    return out


def _run_one(sandboxes: _Sandboxes, code: str, stdin: str, run_timeout: float, memory_mb: int) -> dict[str, Any]:
    """One program on one stdin, in a sandbox of this process: SandboxFusion's response shape."""
    from cpfleet.core.verdict import Verdict
    from cpfleet.sandbox.runner import Limits

    try:
        runner = sandboxes.acquire()
    except Exception as e:
        return _sf_reply("SandboxError", f"no sandbox: {type(e).__name__}: {e}", None)
    broken = False
    try:
        started = time.perf_counter()
        try:
            syntax_error = runner.load(code)
        except Exception as e:
            broken = True
            return _sf_reply("SandboxError", f"sandbox failed to load the program: {e}", None)
        if syntax_error is not None:
            # Python has no separate compile step in SandboxFusion: a syntax error is a run that
            # exits 1 with the traceback on stderr, as ``python3 file.py`` would.
            run = {"status": "Finished", "execution_time": time.perf_counter() - started, "return_code": 1,
                   "stdout": "", "stderr": syntax_error}
            return _sf_reply("Failed", "", run)
        limits = Limits(time_s=run_timeout, memory_mb=memory_mb, wall_factor=1.0, wall_slack_s=1.0)
        try:
            rr = runner.run(stdin.encode("utf-8"), limits)
        except Exception as e:
            broken = True
            return _sf_reply("SandboxError", f"sandbox failed: {type(e).__name__}: {e}", None)
        if rr.status == Verdict.INTERNAL:
            broken = True
            return _sf_reply("SandboxError", rr.error or "sandbox internal error", None)
        stdout = rr.stdout.decode("utf-8", "replace")
        stderr = rr.stderr.decode("utf-8", "replace")
        if rr.status == Verdict.TIME_LIMIT:
            run = {"status": "TimeLimitExceeded", "execution_time": rr.wall_s, "return_code": None,
                   "stdout": stdout, "stderr": stderr}
            return _sf_reply("Failed", "time limit exceeded", run)
        code_ = rr.exit_code
        if code_ is None or (rr.status != Verdict.OK and code_ == 0):
            code_ = -rr.signal if rr.signal else 1  # killed or stopped by a limit: never a clean exit
        run = {"status": "Finished", "execution_time": rr.wall_s, "return_code": code_, "stdout": stdout,
               "stderr": stderr}
        if rr.stdout_truncated and code_ == 0:
            code_ = 1  # its output was cut: the caller must not compare a prefix and pass it
        ok = rr.status == Verdict.OK and code_ == 0
        detail = rr.error or ("output truncated" if rr.stdout_truncated else "")
        message = "" if ok else f"{rr.status}: {detail}".rstrip(": ")
        return _sf_reply("Success" if ok else "Failed", message, run)
    finally:
        sandboxes.release(runner, broken)


def _sf_reply(status: str, message: str, run: dict[str, Any] | None) -> dict[str, Any]:
    return {"status": status, "message": message, "compile_result": None, "run_result": run,
            "executor_pod_name": None, "files": {}}


# --- the command -------------------------------------------------------------------------------


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="the fleet's Redis URL")
    p.add_argument("--host", default="127.0.0.1", help="bind address (non-loopback needs --token)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN' on every endpoint but /healthz")
    p.add_argument("--queue", default=None, help="the fleet queue to submit to (default: cpfleet)")
    p.add_argument("--max-body-mb", type=float, default=DEFAULT_MAX_BODY_MB, help="largest request body (413 above)")
    p.add_argument("--max-in-flight", type=int, default=DEFAULT_MAX_IN_FLIGHT, help="pending jobs before 429")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds before a job is an infrastructure error")
    p.add_argument("--run-code-sandboxes", type=int, default=2, help="sandboxes for /run_code in this process")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    if not args.token and not is_loopback(args.host):
        raise SystemExit(f"cpfleet serve: refusing to listen on {args.host} without --token (anyone could submit code)")
    if args.max_body_mb <= 0 or args.max_in_flight < 1 or args.run_code_sandboxes < 1 or args.timeout <= 0:
        raise SystemExit("cpfleet serve: --max-body-mb, --max-in-flight, --run-code-sandboxes, --timeout must be positive")
    return ServeConfig(
        redis_url=args.redis,
        token=args.token,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_in_flight=args.max_in_flight,
        timeout_s=args.timeout,
        run_code_sandboxes=args.run_code_sandboxes,
        queue=args.queue,
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    config = config_from_args(args)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    print(f"cpfleet serve: http://{args.host}:{args.port} -> {config.redis_url}", file=sys.stderr)
    uvicorn.run(create_app(config), host=args.host, port=args.port, log_level="warning")
    return 0
