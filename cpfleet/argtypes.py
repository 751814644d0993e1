"""Argparse types for numbers that only make sense above zero (a deadline, a batch bound).

A zero or negative ``--timeout`` reached ``FleetClient`` and came out as a traceback; as an
argparse type it is a usage error naming the option and the value (exit 2), like every other
bad argument, before anything connects.
"""

from __future__ import annotations

import argparse
import math


def positive_float(text: str) -> float:
    """A number of seconds (or any measure) > 0; ``inf`` and ``nan`` are refused too."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A count >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value
