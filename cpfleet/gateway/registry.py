"""The registry of HTTP protocol families: each module of ``cpfleet.gateway`` that speaks one
client's protocol (OpenRLHF's and slime's reward models, SandboxFusion, code-judge, Piston,
open-r1's E2B and Morph routers, the native batch) registers a function that builds its routes over the gateway, so the app knows no endpoint by
name and a new protocol is one module plus one line in ``BUILTIN``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from starlette.routing import Route

from cpfleet.core.errors import RegistrationError

if TYPE_CHECKING:
    from cpfleet.gateway.app import Gateway

RouteFactory = Callable[["Gateway"], Sequence[Route]]

# the protocol modules `cpfleet serve` mounts, imported (and so registered) on first use
BUILTIN = (
    "cpfleet.gateway.openrlhf",
    "cpfleet.gateway.slime",
    "cpfleet.gateway.sandboxfusion",
    "cpfleet.gateway.codejudge",
    "cpfleet.gateway.native",
    "cpfleet.gateway.piston",
    "cpfleet.gateway.e2b",
)

_PROTOCOLS: dict[str, RouteFactory] = {}


def protocol(name: str) -> Callable[[RouteFactory], RouteFactory]:
    """Register ``routes(gateway) -> [Route, ...]`` as protocol ``name`` (a second registration
    of one name is a bug: two modules would answer the same clients)."""

    def register(factory: RouteFactory) -> RouteFactory:
        if name in _PROTOCOLS and _PROTOCOLS[name] is not factory:
            raise RegistrationError(f"gateway protocol {name!r} is registered twice")
        _PROTOCOLS[name] = factory
        return factory

    return register


def protocols() -> dict[str, RouteFactory]:
    """Every registered protocol, the built-in ones imported first."""
    for module in BUILTIN:
        importlib.import_module(module)
    return dict(_PROTOCOLS)
