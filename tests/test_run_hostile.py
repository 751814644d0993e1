"""Hostile and careless callers of run jobs and of the gateway, through a real fleet (redis-server,
a Celery prefork worker, uvicorn on a loopback port): a file layout the sandbox cannot place is
the caller's 422, never the fleet's INTERNAL; an input the job's own time budget cut short is
NOT_RUN (the fleet's doing, run again), never the program's TIME_LIMIT; malformed bodies are
4xx, never a 500; and coalesced callers each get their own input's answer."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from fleet_helpers import FleetWorker
from gateway_helpers import http, start_server, verl_payload

from cpfleet.core import protocol
from cpfleet.gateway import ServeConfig
from cpfleet.redis_server import RedisServer

# a job's wall-clock budget of 4 s, so an input that starts late in a job is cut by it
ENV = {"CPFLEET_SOFT_TIME_LIMIT": "100", "CPFLEET_HARD_TIME_LIMIT": "110", "CPFLEET_VISIBILITY_TIMEOUT": "130",
       "CPFLEET_JOB_TIME_BUDGET": "4"}
SLEEPER = "import time\ntime.sleep(float(input()))\nprint('slept')\n"


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2, env=ENV) as worker:
        yield worker


@pytest.fixture(scope="module")
def url(node: FleetWorker) -> Iterator[str]:
    srv, thread, port = start_server(ServeConfig(redis_url=node.redis_url, timeout_s=120, coalesce_ms=2))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=30)


def raw_post(url: str, body: bytes) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("files", [
    {"a": "1", "a/b": "2"},  # "a" cannot be a file and a directory
    {"x" * 256: "1"},  # a name part longer than the file system's NAME_MAX
    {"/".join(["d" * 200] * 25): "1"},  # a path longer than PATH_MAX
])
def test_files_the_sandbox_cannot_place_are_the_callers_422_not_a_fleet_failure(url: str, files: dict[str, str]) -> None:
    body = {**verl_payload("print(1)", ""), "files": {k: b64(v) for k, v in files.items()}}
    status, answer, _ = http(url + "/run_code", body)
    assert status == 422, answer
    with pytest.raises(ValueError):
        protocol.RunMessage.from_wire(protocol.RunMessage(
            job_id="j", reply_to="r", code="print(1)", language="python3",
            files={k: v.encode() for k, v in files.items()}).to_wire())
