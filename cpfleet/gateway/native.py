"""``POST /v1/judge``: cpfleet's own batch, ``{"jobs": [{problem_id | tests, completion,
job_id?, reward_shape?, mode?, language?}], "reward_shape"?, "mode"?, "language"?}``; results
stream back as NDJSON lines (``JobResult.to_dict()`` plus ``index``) as they finish.
``language`` (python3, pypy3, c, cpp, java) fixes the solution's language, as ``FleetClient.submit``'s
does; without it the problem's languages and the completion's fence tag decide.

Each line stands for one job: an infrastructure failure is its line with ``infra_error`` and
``reward: null``; a job that is the caller's mistake (an unknown problem id, inline tests that
make no problem) is a line ``{"index", "job_id", "error", "permanent": true}``, never a score.
A batch that cannot be admitted at all is a 503 with Retry-After before any line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from cpfleet.core.errors import BrokerFull, ClientClosed, FleetBusy, InlineProblemError
from cpfleet.core.protocol import check_options
from cpfleet.gateway.app import Gateway, HTTPError, Refused, permanent_error
from cpfleet.gateway.payloads import json_object
from cpfleet.gateway.registry import protocol
from cpfleet.rewards import problem_ref

JOB_KEYS = ("problem_id", "tests", "completion", "job_id", "reward_shape", "mode", "language")
BATCH_KEYS = ("jobs", "reward_shape", "mode", "language")


def unknown_keys(where: str, obj: Mapping[str, Any], known: Sequence[str]) -> None:
    """Refuse a key this endpoint does not read: a misspelt option (``reward`` for
    ``reward_shape``, a ``timeout`` it has none of) would otherwise be judged under the default,
    silently, and the caller would train on rewards of a shape it did not ask for."""
    extra = sorted(set(obj) - set(known))
    if extra:
        raise HTTPError(422, f"{where}: unknown key(s) {', '.join(map(repr, extra))}; accepted: {', '.join(known)}")


def native_job(i: int, job: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(job, dict):
        raise HTTPError(422, f"jobs[{i}] must be an object")
    unknown_keys(f"jobs[{i}]", job, JOB_KEYS)
    completion = job.get("completion")
    if not isinstance(completion, str):
        raise HTTPError(422, f"jobs[{i}].completion must be a string")
    if job.get("problem_id"):
        if not isinstance(job["problem_id"], str):
            raise HTTPError(422, f"jobs[{i}].problem_id must be a string")
        problem: Any = job["problem_id"]
    elif "tests" in job:
        try:
            problem = problem_ref(job["tests"])
        except InlineProblemError as e:
            raise HTTPError(422, f"jobs[{i}].tests: {e}") from None
        if isinstance(problem, str):  # not JSON text: a problem id belongs in problem_id
            raise HTTPError(422, f"jobs[{i}].tests must be tests (an object, or its JSON text), got the string "
                                 f"{problem[:60]!r}; a problem id goes in problem_id")
    else:
        raise HTTPError(422, f"jobs[{i}] needs 'problem_id' or 'tests'")
    reward_shape = job.get("reward_shape") or defaults.get("reward_shape")
    mode = job.get("mode") or defaults.get("mode")
    try:
        check_options(reward_shape or "all_or_nothing", mode or "full")
    except ValueError as e:
        raise HTTPError(422, f"jobs[{i}]: {e}") from None
    language = job.get("language") or defaults.get("language")
    if language is not None and not isinstance(language, str):
        raise HTTPError(422, f"jobs[{i}].language must be a string, got {type(language).__name__}")
    job_id = job.get("job_id")
    return {"problem": problem, "completion": completion, "reward_shape": reward_shape, "mode": mode,
            "language": language, "job_id": None if job_id is None else str(job_id)}


@protocol("native")
def routes(gw: Gateway) -> Sequence[Route]:
    async def judge_batch(request: Request) -> Response:
        body = json_object(await gw.body_json(request))
        unknown_keys("body", body, BATCH_KEYS)
        jobs = body.get("jobs")
        if not isinstance(jobs, list) or not jobs:
            raise HTTPError(422, "'jobs' must be a non-empty list")
        parsed = [native_job(i, j, body) for i, j in enumerate(jobs)]

        async def one(i: int, job: dict[str, Any]) -> dict[str, Any]:
            head = {"index": i, "job_id": job["job_id"]}
            try:
                result = await gw.judge(job["problem"], job["completion"], reward_shape=job["reward_shape"],
                                        mode=job["mode"], language=job["language"])
            except ValueError as e:  # unusable inline tests, an unknown language: this job only
                return {**head, "error": str(e), "permanent": True}
            except (Refused, ConnectionError, BrokerFull, FleetBusy, ClientClosed) as e:
                # past its deadline (a retry joins it), or Redis away or full: this job's line,
                # retryable; raised here it would cut the stream and lose every line not yet sent
                return {**head, "error": str(e) or type(e).__name__, "permanent": False}
            reason = permanent_error(result)
            if reason:
                return {**head, "error": reason, "permanent": True}
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

    return [Route("/v1/judge", gw.endpoint("v1_judge", judge_batch), methods=["POST"])]
