"""The worker's job log: one JSON object per line, nothing else on the line.

Celery formats every record of the root logger with its own prefix (``[time: LEVEL/process]``),
which makes a JSON message unparseable as a line. The ``cpfleet.joblog`` logger therefore has its
own handler that writes the bare message to the worker's original stderr and does not propagate
to Celery's handlers: ``grep '^{' worker.log | jq`` (or any line-wise JSON reader) works.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

JOB_LOGGER = "cpfleet.joblog"

_handler: logging.Handler | None = None


def configure(stream: TextIO | None = None) -> logging.Logger:
    """Give ``cpfleet.joblog`` its bare-message handler (once per process; idempotent)."""
    global _handler
    logger = logging.getLogger(JOB_LOGGER)
    if _handler is None:
        _handler = logging.StreamHandler(stream or sys.__stderr__)
        _handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(_handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def log_event(event: str, **fields: Any) -> None:
    """One JSON line ``{"event": event, ...fields}`` on the job log."""
    logger = logging.getLogger(JOB_LOGGER)
    if logger.isEnabledFor(logging.INFO):
        logger.info(json.dumps({"event": event, **fields}, separators=(",", ":"), default=str))
