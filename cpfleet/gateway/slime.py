"""slime's remote reward model (``--rm-type remote_rm --rm-url``): ``POST /slime``.

In: ``{"prompt", "response", "label"}``, ``label`` a problem id or inline tests; out: the reward
as a bare number, judged in the gateway's ``reward_mode`` (``hidden`` unless ``cpfleet serve
--reward-mode full``: the hidden tests first, so a wrong completion runs no public test for a
number that carries no feedback).

The protocol cannot say "drop this sample", so an infrastructure error or a refusal is a 503
with Retry-After (slime retries 10 times with backoff, then fails loudly) and an unknown problem
or unusable inline tests a 422 naming it: never a 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cpfleet.gateway.app import Gateway, HTTPError, JSONResponse, raise_on_failure
from cpfleet.gateway.payloads import json_object, label
from cpfleet.gateway.registry import protocol

# slime's client gives up after 120 s: answer (a refusal it retries) before that, so a wait never
# becomes a client-side timeout
SLIME_WAIT_S = 110.0


@protocol("slime")
def routes(gw: Gateway) -> Sequence[Route]:
    async def slime(request: Request) -> Response:
        body = json_object(await gw.body_json(request))
        response = body.get("response")
        if not isinstance(response, str):
            raise HTTPError(422, "'response' must be a string")
        if "label" not in body:
            raise HTTPError(422, "'label' (problem id or inline tests) is required")
        result = await gw.judge(label(body["label"]), response, mode=gw.config.reward_mode, wait_s=SLIME_WAIT_S)
        raise_on_failure([result])
        return JSONResponse(float(result.reward or 0.0))

    return [Route("/slime", gw.endpoint("slime", slime), methods=["POST"])]
