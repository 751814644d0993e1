"""The gateway under test (uvicorn on a loopback port, in this process or as ``cpfleet serve``)
and the trainers' HTTP clients as they behave: verl's sandbox_fusion ``call_sandbox_api`` (its
payload, its request timeout, retries on 504 only) and code-judge's ``judge_client`` shapes."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import uvicorn

from cpfleet.fleet.redis_server import free_port
from cpfleet.gateway import ServeConfig, create_app

# open-r1 generated_checker style: argv = input, correct output, solution output; prints 1 or 0
FLOAT_CHECKER = (
    "import sys\n"
    "inp, correct, sol = (open(p).read() for p in sys.argv[1:4])\n"
    "try:\n"
    "    ok = abs(float(correct.split()[0]) - float(sol.split()[0])) <= 1e-6\n"
    "except (ValueError, IndexError):\n"
    "    ok = False\n"
    "print(1 if ok else 0)\n"
)


def start_server(config: ServeConfig) -> tuple[uvicorn.Server, threading.Thread, int]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > end or not thread.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.05)
    return server, thread, port


@contextlib.contextmanager
def serving(config: ServeConfig) -> Iterator[str]:
    """The gateway's base URL while it serves ``config`` on a loopback port; stopped after."""
    server, thread, port = start_server(config)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def http(url: str, payload: Any = None, *, method: str = "POST", token: str | None = None,
         timeout: float = 120) -> tuple[int, Any, dict[str, str]]:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), dict(e.headers)


def verl_payload(code: str, stdin: str | None, timeout: int = 10, language: str = "python") -> dict[str, Any]:
    """Exactly what verl's ``call_sandbox_api`` posts for one test case."""
    return {
        "compile_timeout": timeout,
        "run_timeout": timeout,
        "code": code,
        "stdin": stdin,
        "memory_limit_MB": 1024,
        "language": language,
        "files": {},
        "fetch_files": [],
    }


def verl_call(url: str, payload: dict[str, Any], *, sleep: bool = True) -> tuple[dict[str, Any] | None, str | None]:
    """verl's ``call_sandbox_api`` loop: 3 attempts, a 504 retried after 1 s then 2 s, any other
    HTTP error or a connection error ends it (verl then scores the test -1, a failure); the
    request times out at compile_timeout + run_timeout + 10 s."""
    data = json.dumps(payload).encode()
    request_timeout = payload["compile_timeout"] + payload["run_timeout"] + 10
    last_error = None
    for attempt in range(3):
        req = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=request_timeout) as resp:
                return json.loads(resp.read()), None
        except urllib.error.HTTPError as e:
            if e.code == 504:
                last_error = f"504 on attempt {attempt + 1}"
                if attempt < 2 and sleep:
                    time.sleep(attempt + 1)
                continue
            return None, f"HTTP {e.code}: {e.read()[:200]!r}"
        except (OSError, ValueError) as e:  # connection refused/reset, read timeout: no retry
            return None, f"request error: {e}"
    return None, last_error


def codejudge_submission(solution: str, stdin: str | None = None, expected: str | None = None,
                         type_: str = "python") -> dict[str, Any]:
    """``dataclasses.asdict`` of judge_client.Submission (no sub_id)."""
    return {"type": type_, "solution": solution, "input": stdin, "expected_output": expected}


def codejudge_batch(submissions: list[dict[str, Any]]) -> dict[str, Any]:
    """``dataclasses.asdict`` of judge_client.BatchSubmission."""
    return {"type": "batch", "submissions": submissions}
