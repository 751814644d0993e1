"""``cpfleet serve``: a stateless HTTP gateway in front of the fleet, in the shapes trainers and
code-execution clients send (see docs/gateway.md).

``serve`` is the command (options, uvicorn, graceful stop); ``app`` holds the Starlette app, its
lifecycle, admission and errors; each protocol family is a module that registers its routes
(``registry``): ``openrlhf`` (``/get_reward``), ``slime`` (``/slime``), ``sandboxfusion`` (``/run_code``, ``/submit``),
``codejudge`` (code-judge's API), ``piston`` (Piston's v2 API, open-r1's codeforces package),
``e2b`` (open-r1's E2B and Morph routers), ``native`` (``/v1/judge``); ``payloads`` holds the
body checks they share and ``runs`` turns output-returning calls into coalesced fleet run jobs.
"""

from cpfleet.gateway.app import Gateway, ServeConfig, create_app

__all__ = ["Gateway", "ServeConfig", "create_app"]
