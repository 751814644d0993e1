"""Argparse types for numbers that only make sense above zero (a deadline, a batch bound).

A zero or negative ``--timeout`` reached ``FleetClient`` and came out as a traceback; as an
argparse type it is a usage error naming the option and the value (exit 2), like every other
bad argument, before anything connects.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from cpfleet.core.problem import MAX_MEMORY_LIMIT_MB, MAX_TIME_LIMIT_S, MIN_MEMORY_LIMIT_MB


def positive_float(text: str) -> float:
    """A number of seconds (or any measure) > 0; ``inf`` and ``nan`` are refused too."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    """A number >= 0 (a window that may be zero); ``inf`` and ``nan`` are refused: ``nan`` passes
    every ``< 0`` check and ``inf`` overflows where the value becomes a whole number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def time_limit_seconds(text: str) -> float:
    """A problem's time limit: seconds in (0, MAX_TIME_LIMIT_S], the range a problem record takes."""
    value = positive_float(text)
    if value > MAX_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, {MAX_TIME_LIMIT_S:g}], got {text!r}")
    return value


def memory_limit_mb(text: str) -> int:
    """A problem's memory limit: whole MB in [MIN_MEMORY_LIMIT_MB, MAX_MEMORY_LIMIT_MB]."""
    value = _int_at_least(text, MIN_MEMORY_LIMIT_MB)
    if value > MAX_MEMORY_LIMIT_MB:
        raise argparse.ArgumentTypeError(f"expected whole MB in [{MIN_MEMORY_LIMIT_MB}, {MAX_MEMORY_LIMIT_MB}], "
                                         f"got {text!r}")
    return value


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A count >= 1."""
    return _int_at_least(text, 1)


def slot_count(text: str) -> int:
    """A number of judging processes, 1 to the sandbox slots one host has (each process holds
    one): past them every further process fails to start its sandbox, and all its jobs with it."""
    from cpfleet.core.defaults import MAX_SLOTS

    wanted = f"expected a whole number from 1 to {MAX_SLOTS} (the sandbox slots one host has), got {text!r}"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(wanted) from None
    if not 1 <= value <= MAX_SLOTS:
        raise argparse.ArgumentTypeError(wanted)
    return value


def output_file(text: str) -> str:
    """A file this command will write ('-': stdout): its folder must exist and be writable and
    the path must not be a folder. Checked when the arguments are read, so a typo in the folder
    is one line before any work, not a FileNotFoundError traceback after all of it (prepare's
    conversion, validate's judging)."""
    if text == "-":
        return text
    path = Path(text).expanduser()
    folder = path.parent
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, expected a file name to write")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: folder {folder} does not exist (create it first)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: folder {folder} is not writable")
    return text


def folder(text: str) -> str:
    """A folder this command writes into, made when missing: a path that is a file, or lies under
    one, is refused when the arguments are read (``--logs /etc/passwd`` was a FileExistsError
    traceback after the demo had started Redis)."""
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a file, expected a folder (made when missing)")
    above = path
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {above} is a file, so no folder can be made under it")
    return text


def nonnegative_int(text: str) -> int:
    """A count >= 0 (a negative one would slice from the end, silently)."""
    return _int_at_least(text, 0)


def queue_name(text: str) -> str:
    """A queue a worker can consume (``protocol.check_queue``): an empty one, or one with a comma
    or blanks at its ends, would hold the jobs until their deadline with nothing said."""
    from cpfleet.core import protocol
    from cpfleet.core.errors import OptionError

    try:
        return protocol.check_queue(text)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_time_limit(text: str) -> float:
    """A run job's CPU seconds per run, in (0, protocol.MAX_RUN_TIME_LIMIT_S]: refused as the
    option's usage error, not later by the wire check naming its field."""
    from cpfleet.core import protocol

    value = positive_float(text)
    if value > protocol.MAX_RUN_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, {protocol.MAX_RUN_TIME_LIMIT_S:g}], got {text!r}")
    return value


def run_memory_mb(text: str) -> int:
    """A run job's memory limit: whole MB in [protocol.MIN_RUN_MEMORY_MB, protocol.MAX_RUN_MEMORY_MB]."""
    from cpfleet.core import protocol

    value = _int_at_least(text, protocol.MIN_RUN_MEMORY_MB)
    if value > protocol.MAX_RUN_MEMORY_MB:
        raise argparse.ArgumentTypeError(f"expected whole MB in [{protocol.MIN_RUN_MEMORY_MB}, "
                                         f"{protocol.MAX_RUN_MEMORY_MB}], got {text!r}")
    return value


def run_output_cap(text: str) -> int:
    """Bytes of a run's stdout and of its stderr sent back, in [0, protocol.MAX_RUN_OUTPUT_CAP]."""
    from cpfleet.core import protocol

    value = _int_at_least(text, 0)
    if value > protocol.MAX_RUN_OUTPUT_CAP:
        raise argparse.ArgumentTypeError(f"expected bytes in [0, {protocol.MAX_RUN_OUTPUT_CAP}], got {text!r}")
    return value
