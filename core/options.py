"""The one rule for a number a caller passes to a public call or constructor (a timeout, a wait,
a bound): a value of the wrong type or out of range is an ``OptionError`` naming the argument,
raised by the call that was given it before it does anything.

Compared with a number as given, a string or a list raised a bare TypeError from deep inside
(``concurrent.futures.wait``, ``time.monotonic() + x``) that named no argument. numpy's numbers
count as numbers; a bool does not (``timeout=True`` is a mistake, not one second).
"""

from __future__ import annotations

import math
import numbers

from cpfleet.core.errors import OptionError


def is_number(value: object, *, integral: bool = False) -> bool:
    """Whether ``value`` is a real number (an integer with ``integral``), numpy's included, not a bool."""
    if isinstance(value, bool):
        return False
    return isinstance(value, numbers.Integral if integral else numbers.Real)


def seconds(name: str, value: object, *, none_ok: bool = True, zero_ok: bool = False) -> float | None:
    """``value`` as seconds for the argument ``name``: a finite number > 0 (>= 0 with ``zero_ok``),
    or None where ``none_ok`` (no limit); anything else is an OptionError naming ``name``."""
    if value is None and none_ok:
        return None
    if is_number(value):
        t = float(value)  # type: ignore[arg-type]  # a numbers.Real
        if math.isfinite(t) and (t >= 0 if zero_ok else t > 0):
            return t
    bound = ">= 0" if zero_ok else "> 0"
    raise OptionError(f"{name} must be a number of seconds {bound}{' or None' if none_ok else ''}, "
                      f"got {type(value).__name__} {value!r}")


def whole(name: str, value: object, *, minimum: int) -> int:
    """``value`` as an integer >= ``minimum`` for the argument ``name``, else an OptionError naming it."""
    if is_number(value, integral=True) and int(value) >= minimum:  # type: ignore[call-overload]
        return int(value)  # type: ignore[call-overload]
    raise OptionError(f"{name} must be an integer >= {minimum}, got {type(value).__name__} {value!r}")
