"""OpenRLHF's remote reward model (``--reward.remote_url``): ``POST /get_reward``.

In: ``{"query": [str], "prompts": [str], "labels": [str]}``; the completion is ``query[i]``
minus its ``prompts[i]`` prefix (OpenRLHF decodes prompt and response together, special tokens
kept), ``labels[i]`` a problem id or inline tests as JSON. Out: ``{"rewards", "scores",
"extra_logs"}``. Judged in the gateway's ``reward_mode`` (``hidden`` unless ``cpfleet serve
--reward-mode full``): none of it is the feedback text, so the hidden tests run first and a wrong completion runs no
public test.

The protocol cannot say "drop this sample", so an infrastructure error or a refusal is a 503
with Retry-After (OpenRLHF retries 5 times, then fails loudly) and an unknown problem or
unusable inline tests a 422 naming it: never a 0.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cpfleet.core.results import JobResult
from cpfleet.gateway.app import Gateway, JSONResponse, raise_on_failure
from cpfleet.gateway.payloads import json_list, json_object, label, str_list
from cpfleet.gateway.registry import protocol

# OpenRLHF's aiohttp client gives up after 180 s: answer (a refusal it retries) before that, so
# a wait never becomes a client-side timeout
OPENRLHF_WAIT_S = 170.0

# End-of-turn / end-of-sequence tokens that OpenRLHF leaves in ``query`` (it decodes with
# skip_special_tokens=False): ChatML/Qwen/Llama-3 ``<|...|>``, Llama-2/Mistral ``</s>``, Gemma.
# Matched on the reversed text from its start (each one reversed: ``<|im_end|>`` is ``>|dne_mi|<``),
# so the run that ends the response is read once: searched for with ``(...)+\Z``, every position
# of a long run of blanks inside a completion (a degenerate generation's) read the rest of the run
# again, time quadratic in it, in the gateway's event loop (20k spaces: 6 s, 1 MB: hours).
_TRAILING_SPECIAL_REVERSED = re.compile(r"(?:\s|>\|[A-Za-z0-9_]+\|<|>s/<|>soe<|>nrut_fo_dne<|>dap<)+")


def strip_prompt(query: str, prompt: str) -> str:
    """OpenRLHF sends prompt + response decoded together: the response is what follows the prompt,
    without the special tokens that close the turn (a fence followed by ``<|im_end|>`` on the same
    line would not close a code block)."""
    response = query
    if prompt and query.startswith(prompt):
        response = query[len(prompt) :]
    elif prompt:
        # the prompt's last occurrence, found as the first one in the reversed texts: str.rfind
        # compares at every alignment (time len(query) x len(prompt): a 4 MB body, hours in the
        # event loop), the forward find keeps to linear time
        at = query[::-1].find(prompt[::-1])
        if at >= 0:
            response = query[len(query) - at :]
    run = _TRAILING_SPECIAL_REVERSED.match(response[::-1])
    return response if run is None else response[: len(response) - run.end()] + "\n"


def pass_rate(r: JobResult) -> float:
    """The fraction of tests passed that decided the reward (``JobResult.rewarded``: hidden in
    full and hidden mode, else public), logged beside the reward so a run's curves show partial
    progress under all-or-nothing."""
    s = r.rewarded
    return s.passed / s.total if s.total else 0.0


@protocol("openrlhf")
def routes(gw: Gateway) -> Sequence[Route]:
    async def get_reward(request: Request) -> Response:
        body = json_object(await gw.body_json(request))
        queries = str_list(body, "query")
        prompts = str_list(body, "prompts", len(queries), required=False)
        labels = [label(lb, f"labels[{i}]") for i, lb in enumerate(json_list(body, "labels", len(queries)))]
        completions = [strip_prompt(q, p) for q, p in zip(queries, prompts or [""] * len(queries), strict=True)]
        results = list(
            await asyncio.gather(
                *(gw.judge(lb, c, mode=gw.config.reward_mode, wait_s=OPENRLHF_WAIT_S)
                  for lb, c in zip(labels, completions, strict=True))
            )
        )
        raise_on_failure(results)
        rewards = [float(r.reward or 0.0) for r in results]
        return JSONResponse(
            {
                "rewards": rewards,
                "scores": rewards,
                "extra_logs": {
                    "pass_rate": [pass_rate(r) for r in results],
                    "compiled": [0.0 if str(r.verdict) in ("NO_CODE", "COMPILE_ERROR") else 1.0 for r in results],
                },
            }
        )

    return [Route("/get_reward", gw.endpoint("get_reward", get_reward), methods=["POST"])]
