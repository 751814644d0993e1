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
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fleet_helpers import FleetWorker, wait_until
from gateway_helpers import http, start_server, verl_payload

from cpfleet import RunStatus
from cpfleet.core import protocol
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.gateway import ServeConfig
from cpfleet.producer.client import FleetClient

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
    # 64 files 500 directories deep: more inodes than the test directory holds (ENOSPC)
    {f"d{i}/" + "a/" * 500 + "f": "1" for i in range(64)},
])
def test_files_the_sandbox_cannot_place_are_the_callers_422_not_a_fleet_failure(url: str, files: dict[str, str]) -> None:
    body = {**verl_payload("print(1)", ""), "files": {k: b64(v) for k, v in files.items()}}
    status, answer, _ = http(url + "/run_code", body)
    assert status == 422, answer
    with pytest.raises(ValueError):
        protocol.RunMessage.from_wire(protocol.RunMessage(
            job_id="j", reply_to="r", code="print(1)", language="python3",
            files={k: v.encode() for k, v in files.items()}).to_wire())


def test_an_input_cut_by_its_jobs_time_budget_is_not_run_never_the_programs_time_limit(node: FleetWorker) -> None:
    # alone, each input finishes (a 2.5 s sleep is far within the 10 s limit); in one job the
    # second one starts with at most 1.5 s of the job's 4 s budget left
    with FleetClient(node.redis_url, timeout=120) as fleet:
        r = fleet.run(SLEEPER, ["2.5", "2.5"])
    first, second = r.runs
    assert (first.status, first.stdout) == (RunStatus.FINISHED, "slept\n")
    assert second.status == RunStatus.NOT_RUN, second
    assert "time budget" in second.detail


def test_coalesced_calls_each_get_their_own_answer_on_the_gateway(url: str) -> None:
    code = "import sys\nprint(sys.stdin.read().strip()[::-1])\n"
    stdins = [f"in{i}" for i in range(24)] * 2  # every stdin twice: shared inputs
    with ThreadPoolExecutor(len(stdins)) as pool:
        answers = list(pool.map(lambda s: http(url + "/run_code", verl_payload(code, s)), stdins))
    for stdin, (status, body, _) in zip(stdins, answers, strict=True):
        assert status == 200 and body["status"] == "Success", body
        assert body["run_result"]["stdout"] == stdin[::-1] + "\n"


def test_calls_with_different_limits_never_share_a_run(url: str) -> None:
    # the same program and stdin at once under three time limits: each call runs under its own
    # (the CPU rlimit the program sees follows the limit), none takes another's output
    code = "import resource, sys\nprint(resource.getrlimit(resource.RLIMIT_CPU)[0], sys.stdin.read())\n"
    limits = [1, 2, 3] * 4
    with ThreadPoolExecutor(len(limits)) as pool:
        answers = list(pool.map(lambda t: http(url + "/run_code", verl_payload(code, "x", timeout=t)), limits))
    seen: dict[int, set[str]] = {}
    for t, (status, body, _) in zip(limits, answers, strict=True):
        assert status == 200 and body["status"] == "Success", body
        seen.setdefault(t, set()).add(body["run_result"]["stdout"])
    assert all(len(v) == 1 for v in seen.values()) and len({next(iter(v)) for v in seen.values()}) == 3, seen


def test_a_budget_cut_run_on_the_gateway_is_run_again_not_scored_as_a_timeout(url: str) -> None:
    # two callers' inputs share one job; the later one is cut by the job's budget and must be
    # run again, not answered TimeLimitExceeded (verl's -3)
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda s: http(url + "/run_code", verl_payload(SLEEPER, s)), ["2.5", "2.5\n"]))
    for status, body, _ in answers:
        assert status == 200 and body["status"] == "Success", body
        assert body["run_result"]["stdout"] == "slept\n"


@pytest.mark.parametrize("body", [
    b'{"code": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # nesting past the JSON parser's recursion
    b'{"code": "print(1)", "memory_limit_MB": 1e999}',  # infinity
    b'{"code": "print(1)", "language": ["python"]}',  # unhashable language
    b'{"code": "print(1)", "language": {"a": 1}}',
], ids=["deep", "infinite", "list-language", "object-language"])
def test_malformed_run_code_bodies_are_4xx_never_a_500(url: str, body: bytes) -> None:
    status, answer = raw_post(url + "/run_code", body)
    assert 400 <= status < 500, (status, answer)


def test_fetching_the_most_files_under_the_longest_names_fits_the_sandboxs_reply(node: FleetWorker) -> None:
    # four files of the fetch bound under names of the most bytes a name may have: the reply
    # that carries them back from the sandbox is one 64 KiB message, which they must fit
    name = lambda i: "/".join([str(i) * 255] * 4)[: protocol.MAX_RUN_FILE_NAME_BYTES]  # noqa: E731
    names = [name(i) for i in range(protocol.MAX_FETCH_FILES)]
    code = ("import os, sys\nfor n in sys.stdin.read().split():\n    os.makedirs(os.path.dirname(n), exist_ok=True)\n"
            f"    open(n, 'wb').write(b'\\x00' * {protocol.FETCH_FILE_BYTES - 1})\nprint('ok')\n")
    with FleetClient(node.redis_url, timeout=120) as fleet:
        r = fleet.run(code, " ".join(names), fetch_files=names)
        (run,) = r.runs
        assert (r.infra_error, run.status, run.stdout) == (False, RunStatus.FINISHED, "ok\n"), r
        assert run.files == {n: b"\x00" * (protocol.FETCH_FILE_BYTES - 1) for n in names}
        with pytest.raises(ValueError):
            fleet.run(code, "", fetch_files=["d/" * 600 + "x"])


def test_an_answer_kept_for_a_refused_callers_retry_holds_only_its_own_run(node: FleetWorker) -> None:
    # two callers' inputs in one job, both refused (504) before it answers: what is kept for
    # each retry is that caller's run, never the job's other runs (a job may carry up to the
    # reply bound, 64 MiB, and KEEP_MAX answers are kept)
    config = ServeConfig(redis_url=node.redis_url, timeout_s=120, wait_s=1.0, coalesce_ms=300)
    srv, thread, port = start_server(config)
    try:
        runs = srv.config.app.state.gateway.runs
        code = "import sys, time\ns = sys.stdin.read()\ntime.sleep(1.2)\nprint(s)\n"
        with ThreadPoolExecutor(2) as pool:
            first = list(pool.map(lambda s: http(f"http://127.0.0.1:{port}/run_code", verl_payload(code, s)), "ab"))
        assert [status for status, _, _ in first] == [504, 504]
        assert wait_until(lambda: len(runs._kept) == 2, timeout=60)
        assert all(answer.job.runs == () for answer, _ in runs._kept.values())
        for stdin in "ab":
            status, body, _ = http(f"http://127.0.0.1:{port}/run_code", verl_payload(code, stdin))
            assert status == 200 and body["run_result"]["stdout"] == stdin + "\n", body
    finally:
        srv.should_exit = True
        thread.join(timeout=30)


@pytest.mark.parametrize("plant", [
    "os.symlink('/etc/passwd', 'f')",  # a link to a file of the worker's host
    "os.symlink('/etc', 'd')",  # a link to a host directory, fetched through
    "os.mkfifo('f')",  # a fifo: reading it would wait for a writer forever
    "os.mkdir('f')",  # a directory under a file's name
], ids=["link", "linked-dir", "fifo", "dir"])
def test_fetch_files_never_follow_what_the_program_planted(url: str, plant: str) -> None:
    # the program's own run is fine: it answers Success, with nothing fetched and no wait
    code = f"import os\n{plant}\nprint('ok')\n"
    body = {**verl_payload(code, ""), "fetch_files": ["f", "d/passwd"]}
    status, answer, _ = http(url + "/run_code", body)
    assert status == 200 and answer["status"] == "Success", answer
    assert answer["run_result"]["stdout"] == "ok\n" and answer["files"] == {}, answer
