"""Reading request bodies: the checks every protocol shares, each failing with a 422 that says
what is wrong."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cpfleet.core.errors import InlineProblemError
from cpfleet.gateway.app import HTTPError
from cpfleet.rewards import problem_ref


def json_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise HTTPError(422, f"body must be a JSON object, got {type(body).__name__}")
    return body


def json_list(body: Mapping[str, Any], key: str, n: int | None = None, *, required: bool = True,
              against: str = "query") -> list[Any]:
    """``body[key]`` as a list; with ``n``, one that has as many items as the list ``against``
    (which the error names, so the caller learns which two fields disagree)."""
    value = body.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise HTTPError(422, f"{key!r} must be a list")
    if n is not None and len(value) != n:
        raise HTTPError(422, f"{key!r} has {len(value)} items, {against!r} has {n}")
    return value


def str_list(body: Mapping[str, Any], key: str, n: int | None = None, *, required: bool = True,
             against: str = "query") -> list[str]:
    value = json_list(body, key, n, required=required, against=against)
    if not all(isinstance(v, str) for v in value):
        raise HTTPError(422, f"{key!r} must be a list of strings")
    return value


def utf8_text(value: str, field: str) -> str:
    """``value``, or a 422 naming ``field`` when UTF-8 cannot carry it: JSON's ``"\\ud800"``
    escape parses into a lone UTF-16 surrogate, which names no problem the store can hold (its
    keys are UTF-8) and which Redis cannot be sent."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise HTTPError(422, f"{field!r} is not Unicode text: it holds a lone UTF-16 surrogate "
                             f"({value[e.start:e.end]!r} at {e.start})") from None
    return value


def label(value: Any, field: str = "label") -> Any:
    """A reward label: a problem id, or inline tests (as an object or its JSON text)."""
    try:
        ref = problem_ref(value)
    except InlineProblemError as e:
        raise HTTPError(422, f"{field}: {e}") from None
    if isinstance(ref, str) and not ref:
        raise HTTPError(422, "a label is empty: it must be a problem id or inline tests")
    if isinstance(ref, str):
        utf8_text(ref, field)
    if not isinstance(ref, str | dict | list):
        raise HTTPError(422, f"a label must be a problem id or inline tests, got {type(value).__name__}")
    return ref


def finite_float(value: int | float) -> float | None:
    """``value`` as a float, or None when no float is it: NaN, an infinity (JSON's ``1e999``), or
    an integer past a float's range. JSON writes an integer of hundreds of digits as plainly as
    ``10``, and ``float()`` (or ``math.isfinite``) of one raises OverflowError, which is not a
    ValueError: unchecked, a caller's limit became a 500."""
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def number(body: Mapping[str, Any], key: str, default: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise HTTPError(422, f"{key!r} must be a number")
    try:
        number = finite_float(float(value) if isinstance(value, str) else value)
    except ValueError:
        raise HTTPError(422, f"{key!r} must be a number") from None
    if number is None:  # no limit, no timeout is one
        raise HTTPError(422, f"{key!r} must be a finite number")
    return number
