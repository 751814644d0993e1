"""``cpfleet serve``: a stateless HTTP gateway in front of the fleet, in the shapes trainers and
code-execution clients send (see docs/gateway.md).

``app`` holds the Starlette app, its lifecycle, admission and errors; each protocol family is a
module that registers its routes (``registry``): ``rewards`` (OpenRLHF, slime),
``sandboxfusion`` (``/run_code``, ``/submit``), ``codejudge`` (code-judge's API), ``piston``
(Piston's v2 API, open-r1's codeforces package), ``native``
(``/v1/judge``); ``runs`` turns output-returning calls into coalesced fleet run jobs.
"""

from cpfleet.gateway.app import Gateway, ServeConfig, create_app

__all__ = ["Gateway", "ServeConfig", "create_app"]
