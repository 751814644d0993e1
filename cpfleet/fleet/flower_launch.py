"""``python -m cpfleet.fleet.flower_launch -A cpfleet.workers.app flower [FLOWER OPTIONS]``: Flower for the
fleet, with its worker list kept current.

Flower fills the worker list of ``/api/workers`` (and its Workers page) by a remote-control
``inspect`` broadcast that it sends once, when it starts, and again only when a client asks for
``?refresh=1``. A worker that comes up after Flower (always the case under ``cpfleet up`` and
docker-compose, where both start together, and for every node added later) is therefore missing
from ``/api/workers`` until someone refreshes by hand. This launcher runs Flower's own command
with one change: its application also repeats that inspect every ``CPFLEET_FLOWER_REFRESH_S``
seconds (default 10; one broadcast answered by each worker's main process, not by its pool).

It also shows each task's Result on the Tasks page (``--tasks_columns`` default below, unless
given): the evaluate task returns a small summary (verdict, reward, tests passed), which
Flower gets from the task-succeeded event, so verdicts and rewards are visible without any
result backend. Args and kwargs stay hidden: they hold the completions.
"""

from __future__ import annotations

import sys
from typing import Any

from celery.bin.celery import main as celery_main
from flower import command as flower_command
from flower.app import Flower
from tornado.ioloop import PeriodicCallback

from cpfleet.core import envvars

REFRESH_ENV = "CPFLEET_FLOWER_REFRESH_S"
DEFAULT_REFRESH_S = 10.0
TASKS_COLUMNS = "name,uuid,state,result,received,runtime,worker"


def refresh_interval_s(environ: dict[str, str] | None = None) -> float:
    """Seconds between two worker inspections (``$CPFLEET_FLOWER_REFRESH_S``; > 0)."""
    value: float = envvars.read(REFRESH_ENV, DEFAULT_REFRESH_S, environ)
    return value


class RefreshingFlower(Flower):
    """Flower whose worker list is re-inspected periodically, not only at start."""

    def start(self) -> None:
        self._cpfleet_refresh = PeriodicCallback(self._refresh_workers, refresh_interval_s() * 1000.0)
        self._cpfleet_refresh.start()  # runs on the IOLoop that super().start() then runs
        super().start()

    def _refresh_workers(self) -> Any:
        return self.update_workers()  # deduplicated by Flower while one inspection is running


def main(argv: list[str] | None = None) -> None:
    refresh_interval_s()  # a bad setting fails here, before Flower starts
    flower_command.Flower = RefreshingFlower  # the name flower's click command instantiates
    args = list(sys.argv[1:] if argv is None else argv)
    if "flower" in args and not any(a.startswith("--tasks_columns") for a in args):  # an option of flower's
        args.append(f"--tasks_columns={TASKS_COLUMNS}")
    sys.argv = [__file__, *args]  # click names the command after it: python -m cpfleet.fleet.flower_launch
    celery_main()


if __name__ == "__main__":
    main()
