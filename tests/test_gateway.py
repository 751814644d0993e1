"""The gateway as the trainers' clients use it, against a real fleet (redis-server + a Celery
prefork worker): verl's per-test ``/run_code`` calls coalesced into one run job that the worker
runs, code-judge's API with its clients' payloads, refusals in the form each client retries,
and a rolling restart of ``cpfleet serve`` in the middle of a burst."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import FleetWorker
from gateway_helpers import codejudge_batch, codejudge_submission, http, start_server, verl_call, verl_payload

from cpfleet.fleet.redis_server import RedisServer, free_port
from cpfleet.gateway import ServeConfig
from cpfleet.gateway.app import Gateway
from cpfleet.gateway.registry import protocols
from cpfleet.producer.client import FleetClient

REPO = Path(__file__).resolve().parents[1]
ADD = {
    "id": "g/add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": f"{i} {i * 7}\n", "output": f"{i * 8}\n"} for i in range(4)],
}
ADD_CODE = "a, b = map(int, input().split())\nprint(a + b)\n"
CPP_ADD = "#include <cstdio>\nint main(){long long a,b;scanf(\"%lld %lld\",&a,&b);printf(\"%lld\\n\",a+b);}\n"


@dataclass
class Served:
    url: str
    gateway: Gateway


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    # code-judge's 10 s CPU limit must fit a job's time budget however slowly a loaded machine
    # runs it: the tests' short default timers (a 20 s soft limit) would cut such a run short
    timers = {"CPFLEET_SOFT_TIME_LIMIT": "120", "CPFLEET_HARD_TIME_LIMIT": "130", "CPFLEET_VISIBILITY_TIMEOUT": "140"}
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2, env=timers) as worker:
        with FleetClient(redis_server.url) as c:
            c.register_problems([ADD])
        yield worker


def serve(config: ServeConfig) -> Iterator[Served]:
    srv, thread, port = start_server(config)
    try:
        yield Served(f"http://127.0.0.1:{port}", srv.config.app.state.gateway)
    finally:
        srv.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def gw(node: FleetWorker) -> Iterator[Served]:
    # a group of 6 inputs launches when the 6th arrives (the window is long): the coalescing
    # test below does not depend on how fast its threads start
    yield from serve(ServeConfig(redis_url=node.redis_url, timeout_s=120, coalesce_ms=30_000, coalesce_max_inputs=6))


@pytest.fixture(scope="module")
def gw_fast(node: FleetWorker) -> Iterator[Served]:
    yield from serve(ServeConfig(redis_url=node.redis_url, timeout_s=120, coalesce_ms=2))


def test_every_protocol_family_registers_its_routes() -> None:
    assert set(protocols()) >= {"openrlhf", "slime", "sandboxfusion", "codejudge", "native"}


# --- SandboxFusion /run_code on the fleet ------------------------------------------------------


def test_verls_per_test_calls_for_one_completion_run_as_one_job_on_the_worker(gw: Served, node: FleetWorker) -> None:
    tests = [(f"{i} {i * 3}\n", f"{i * 4}\n") for i in range(6)]
    runs_before = gw.gateway.runs.jobs
    with ThreadPoolExecutor(len(tests)) as pool:
        replies = list(pool.map(lambda t: verl_call(gw.url + "/run_code", verl_payload(ADD_CODE, t[0])), tests))
    for (body, err), (_, expected) in zip(replies, tests, strict=True):
        assert err is None and body is not None, err
        assert body["status"] == "Success" and body["run_result"]["stdout"] == expected
        assert body["executor_pod_name"] == node.hostname  # the worker ran it, not this process
    assert gw.gateway.runs.jobs - runs_before == 1


def test_a_group_slow_on_every_input_spreads_what_its_start_window_left_over_other_jobs(
    gw: Served, node: FleetWorker
) -> None:
    # 6 calls of a program that takes 2 s (asleep) per input: one after another on one slot they
    # take 12 s, about verl's whole wait at timeout=3 (13 s). The group's job starts inputs for
    # a third of that wait; the rest come back NOT_RUN and run each in its own job
    code = "import time\ntime.sleep(2)\nprint(int(input()) * 2)\n"
    jobs_before = gw.gateway.runs.jobs
    with ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(lambda i: verl_call(gw.url + "/run_code", verl_payload(code, f"{i}\n", timeout=3)),
                                range(6)))
    for i, (body, err) in enumerate(replies):
        assert err is None and body is not None, err
        assert body["status"] == "Success" and body["run_result"]["stdout"] == f"{2 * i}\n", body
    assert gw.gateway.runs.jobs - jobs_before >= 2


def test_a_group_whose_callers_wait_for_days_still_makes_a_valid_run_job(gw: Served) -> None:
    # a compile_timeout of months: a third of the wait is past the wire's bound on a start
    # window, which must be capped, never a run job the client refuses to publish
    payloads = [{**verl_payload(ADD_CODE, f"{i} {i}\n"), "compile_timeout": 10**7} for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(lambda p: verl_call(gw.url + "/run_code", p), payloads))
    assert [(body or {}).get("run_result", {}).get("stdout") for body, _ in replies] == [f"{2 * i}\n" for i in range(6)]


SERVE_AND_LIST_MODULES = """
import json, sys, threading, time, urllib.request
import uvicorn
from cpfleet.gateway import ServeConfig, create_app
from cpfleet.fleet.redis_server import free_port
port = free_port()
server = uvicorn.Server(uvicorn.Config(create_app(ServeConfig(redis_url=sys.argv[1])), host="127.0.0.1", port=port,
                                      log_level="warning"))
threading.Thread(target=server.run, daemon=True).start()
while not server.started:
    time.sleep(0.05)
req = urllib.request.Request(f"http://127.0.0.1:{port}/run_code", method="POST",
                             data=json.dumps({"code": "print(6 * 7)", "language": "python"}).encode())
body = json.loads(urllib.request.urlopen(req, timeout=120).read())
server.should_exit = True
print(json.dumps({"stdout": body["run_result"]["stdout"], "modules": sorted(m for m in sys.modules if m.startswith("cpfleet.sandbox"))}))
"""


def test_the_serve_process_loads_no_sandbox_and_still_runs_programs(node: FleetWorker) -> None:
    out = subprocess.run([sys.executable, "-c", SERVE_AND_LIST_MODULES, node.redis_url], capture_output=True,
                         text=True, timeout=180, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["stdout"] == "42\n"
    # only the fenced-code extraction (pure text) is imported: no runner, fork server or zygote
    assert set(seen["modules"]) <= {"cpfleet.sandbox", "cpfleet.sandbox.extract"}, seen["modules"]


def test_a_group_never_grows_past_what_one_run_job_may_carry(node: FleetWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    from cpfleet.core import protocol

    # room for the code and two 10-byte stdins per job (the client checks the same bound)
    monkeypatch.setattr(protocol, "MAX_RUN_PAYLOAD_BYTES", len(ADD_CODE) + 25)
    config = ServeConfig(redis_url=node.redis_url, timeout_s=120, coalesce_ms=200, coalesce_max_inputs=6)
    with contextlib.contextmanager(serve)(config) as served:
        stdins = [f"{i:04d} {i:04d}\n" for i in range(6)]  # 10 bytes each
        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(lambda x: verl_call(served.url + "/run_code", verl_payload(ADD_CODE, x)), stdins))
        assert [(body or {}).get("run_result", {}).get("stdout") for body, _ in replies] == [f"{2 * i}\n" for i in range(6)]
        assert served.gateway.runs.jobs >= 3


def test_an_output_clipped_by_its_groups_reply_bound_is_run_again_alone(
    node: FleetWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cpfleet.core import protocol
    from cpfleet.gateway import runs

    # a reply bound that leaves a group of 6 inputs 100 bytes per stream (one input alone: 600)
    monkeypatch.setattr(protocol, "MAX_RUN_REPLY_BYTES", 1200)
    monkeypatch.setattr(runs, "MIN_GROUP_OUTPUT_CAP", 50)
    config = ServeConfig(redis_url=node.redis_url, timeout_s=120, coalesce_ms=30_000, coalesce_max_inputs=6)
    with contextlib.contextmanager(serve)(config) as served:
        sizes = [1, 2, 3, 4, 5, 500]
        code = "print('x' * int(input()))\n"
        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(lambda n: verl_call(served.url + "/run_code", verl_payload(code, f"{n}\n")), sizes))
        outs = [(body or {}).get("run_result", {}).get("stdout") for body, _ in replies]
        assert outs == ["x" * n + "\n" for n in sizes]  # the long one whole, never a clipped prefix
        assert served.gateway.runs.jobs == 2  # the group, then the clipped input alone


def test_a_group_is_held_while_the_fleets_queue_has_jobs_waiting(node: FleetWorker,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from cpfleet.gateway import runs

    # a hold as long as the test may take on a loaded machine: only the queue decides here
    monkeypatch.setattr(runs, "MAX_HOLD_MS", 600_000.0)
    config = ServeConfig(redis_url=node.redis_url, timeout_s=120, coalesce_ms=1)
    blocker = "import time\ntime.sleep(6)\n"
    with contextlib.contextmanager(serve)(config) as served, FleetClient(node.redis_url) as fleet, \
            ThreadPoolExecutor(3) as blockers, ThreadPoolExecutor(2) as callers:
        # both pool processes busy and a third job waiting in the queue
        blocked = [blockers.submit(fleet.run, blocker, "", language="python3", time_limit_s=10) for _ in range(3)]
        deadline = time.monotonic() + 60
        while fleet._redis.llen(fleet.queue) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        url = served.url + "/run_code"
        first = callers.submit(verl_call, url, verl_payload(ADD_CODE, "1 2\n"))
        while served.gateway.runs.held < 1:  # its window (1 ms) ran out and the queue held it
            assert time.monotonic() < deadline and not first.done()
            time.sleep(0.02)
        second = callers.submit(verl_call, url, verl_payload(ADD_CODE, "3 4\n"))
        answers = [first.result(), second.result()]
        assert [b["run_result"]["stdout"] for b, _ in answers] == ["3\n", "7\n"]  # type: ignore[index]
        assert served.gateway.runs.jobs == 1  # the held group took the later call in
        assert all(f.result().runs[0].status == "FINISHED" for f in blocked)


def test_an_idle_fleet_holds_no_group(gw_fast: Served, node: FleetWorker) -> None:
    with FleetClient(node.redis_url) as fleet:
        assert fleet._redis.llen(fleet.queue) == 0  # nothing waits for a worker
    held = gw_fast.gateway.runs.held
    body, err = verl_call(gw_fast.url + "/run_code", verl_payload(ADD_CODE, "5 6\n"))
    assert err is None and body is not None and body["run_result"]["stdout"] == "11\n"
    assert gw_fast.gateway.runs.held == held


def test_run_code_outcomes_keep_sandbox_fusions_meaning(gw_fast: Served) -> None:
    url = gw_fast.url + "/run_code"
    crash = verl_call(url, verl_payload("raise SystemExit(3)\n", ""))[0]
    assert crash is not None and crash["status"] == "Failed" and crash["run_result"]["return_code"] == 3
    slow = verl_call(url, verl_payload("while True:\n    pass\n", "", timeout=1))[0]
    assert slow is not None and slow["run_result"]["status"] == "TimeLimitExceeded"
    syntax = verl_call(url, verl_payload("def f(:\n", ""))[0]
    assert syntax is not None and syntax["status"] == "Failed" and syntax["run_result"]["return_code"] == 1
    assert "SyntaxError" in syntax["run_result"]["stderr"] or "invalid syntax" in syntax["run_result"]["stderr"]
    hog = {**verl_payload("x = bytearray(1024 * 1024 * 1024)\nprint('allocated')\n", ""), "memory_limit_MB": 128}
    hogged = verl_call(url, hog)[0]
    assert hogged is not None and hogged["status"] == "Failed" and hogged["run_result"]["return_code"] != 0
    assert "allocated" not in hogged["run_result"]["stdout"]


def test_run_code_output_that_is_not_utf8_is_never_a_pass_verl_reads(gw_fast: Served) -> None:
    # the program writes the byte 0xff, which comes back as U+FFFD; verl passes a test when the
    # status is Success and stdout (rstrip'd) equals the expected output, so an expected output
    # holding U+FFFD would pay it: it is Failed, while a program writing U+FFFD itself passes
    url = gw_fast.url + "/run_code"
    raw = verl_call(url, verl_payload("import sys\nsys.stdout.buffer.write(b'\\xff\\n')\n", ""))[0]
    real = verl_call(url, verl_payload("print('\\ufffd')\n", ""))[0]
    assert raw is not None and raw["run_result"]["stdout"] == "\ufffd\n"
    assert raw["status"] == "Failed" and raw["run_result"]["return_code"] != 0, raw
    assert "UTF-8" in raw["message"]
    assert real is not None and real["status"] == "Success" and real["run_result"]["stdout"] == "\ufffd\n", real


def test_run_code_compiles_cpp_once_and_reports_compile_errors_as_verl_reads_them(gw_fast: Served) -> None:
    url = gw_fast.url + "/run_code"
    ok = verl_call(url, verl_payload(CPP_ADD, "20 22\n", language="cpp"))[0]
    assert ok is not None and ok["status"] == "Success" and ok["run_result"]["stdout"] == "42\n"
    assert ok["compile_result"]["status"] == "Finished" and ok["compile_result"]["return_code"] == 0
    bad = verl_call(url, verl_payload("int main( {", "", language="cpp"))[0]
    # verl: status Failed + compile_result Finished with a non-zero return code -> -4 compile error
    assert bad is not None and bad["status"] == "Failed" and bad["run_result"] is None
    assert bad["compile_result"]["status"] == "Finished" and bad["compile_result"]["return_code"] != 0
    assert bad["compile_result"]["stderr"]


def test_run_code_places_files_and_fetches_what_the_program_wrote(gw_fast: Served) -> None:
    code = "data = open('in.txt').read()\nopen('out.txt', 'w').write(data.upper())\nprint(len(data))\n"
    payload = {**verl_payload(code, ""), "files": {"in.txt": base64.b64encode(b"hello").decode()},
               "fetch_files": ["out.txt"]}
    body = verl_call(gw_fast.url + "/run_code", payload)[0]
    assert body is not None and body["status"] == "Success", body
    assert body["run_result"]["stdout"] == "5\n"
    assert base64.b64decode(body["files"]["out.txt"]) == b"HELLO"
    status, err, _ = http(gw_fast.url + "/run_code", {**payload, "fetch_files": ["a", "b", "c", "d", "e"]})
    assert status == 422 and "fetch_files" in err["error"]


def test_the_sandbox_fusion_sdk_gets_the_answer_of_the_worker_that_ran_it(gw_fast: Served, node: FleetWorker) -> None:
    sdk = pytest.importorskip("sandbox_fusion", reason="pip install sandbox-fusion did not work here")
    resp = sdk.run_code(sdk.RunCodeRequest(code=ADD_CODE, stdin="1 2\n", language="python"), endpoint=gw_fast.url)
    assert resp.status == sdk.RunStatus.Success and resp.run_result.stdout == "3\n"
    assert resp.executor_pod_name == node.hostname


def test_two_replicas_front_one_redis(node: FleetWorker) -> None:
    config = ServeConfig(redis_url=node.redis_url, timeout_s=120, coalesce_ms=1)
    with contextlib.contextmanager(serve)(config) as a, contextlib.contextmanager(serve)(config) as b:
        assert a.gateway.fleet.client_id != b.gateway.fleet.client_id
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(
                lambda i: verl_call((a, b)[i % 2].url + "/run_code", verl_payload(ADD_CODE, f"{i} {i}\n")), range(8)))
        assert [(body or {}).get("run_result", {}).get("stdout") for body, _ in replies] == [f"{2 * i}\n" for i in range(8)]


# --- code-judge --------------------------------------------------------------------------------


def test_codejudge_single_endpoints_answer_in_its_shapes(gw_fast: Served) -> None:
    status, run, _ = http(gw_fast.url + "/run", codejudge_submission(ADD_CODE, "4 5\n"))
    assert status == 200 and run["run_success"] and run["success"] and run["stdout"] == "9\n" and run["reason"] == ""
    assert set(run) == {"sub_id", "success", "run_success", "cost", "stdout", "stderr", "reason"}
    status, judged, _ = http(gw_fast.url + "/judge", codejudge_submission(ADD_CODE, "4 5\n", "9"))
    assert status == 200 and judged["success"] is True and "stdout" not in judged
    wrong = http(gw_fast.url + "/judge", codejudge_submission(ADD_CODE, "4 5\n", "10"))[1]
    assert wrong["success"] is False and wrong["run_success"] is True and wrong["reason"] == ""
    # a time limit is worker_timeout; asked through the long batch, which waits as long as the
    # run takes: 10 s of CPU can take longer than /judge's 60 s on a loaded machine, and that
    # answer would rightly be queue_timeout
    slow_sub = {**codejudge_submission("while True: pass\n", ""), "sub_id": "s1"}
    slow = http(gw_fast.url + "/judge/long-batch", codejudge_batch([slow_sub]), timeout=3600)[1]["results"][0]
    assert slow["sub_id"] == "s1" and slow["success"] is False and slow["reason"] == "worker_timeout", slow


def test_codejudge_output_that_is_not_utf8_never_matches_a_replacement_character(gw_fast: Served) -> None:
    # the program writes the byte 0xff; shown as U+FFFD, it must still not equal an expected
    # output holding U+FFFD, while a program that writes U+FFFD itself (valid UTF-8) does
    raw = "import sys\nsys.stdout.buffer.write(b'\\xff\\n')\n"
    real = "print('\\ufffd')\n"
    batch = codejudge_batch([codejudge_submission(raw, "", "\ufffd"), codejudge_submission(real, "", "\ufffd")])
    status, body, _ = http(gw_fast.url + "/run/batch", batch)
    invalid, valid = body["results"]
    assert status == 200 and invalid["stdout"] == "\ufffd\n" and invalid["run_success"] is True
    assert invalid["success"] is False and invalid["reason"] == "", invalid
    assert valid["success"] is True, valid


def test_codejudge_run_without_expected_output_is_no_success_for_output_that_is_not_utf8(gw_fast: Served) -> None:
    # without expected_output, code-judge's success is the run's, and the client compares stdout
    # itself: U+FFFD read from the byte 0xff would equal an expected text holding U+FFFD, so
    # such a run is no success (it still exited 0: run_success), while real U+FFFD is one
    raw = "import sys\nsys.stdout.buffer.write(b'\\xff\\n')\n"
    real = "print('\\ufffd')\n"
    batch = codejudge_batch([codejudge_submission(raw, "", None), codejudge_submission(real, "", None)])
    status, body, _ = http(gw_fast.url + "/run/batch", batch)
    invalid, valid = body["results"]
    assert status == 200 and invalid["stdout"] == "\ufffd\n" and invalid["run_success"] is True, invalid
    assert invalid["success"] is False and invalid["reason"] == "", invalid
    assert valid["success"] is True and valid["stdout"] == "\ufffd\n", valid


@pytest.mark.parametrize("path", ["/judge/batch", "/judge/long-batch", "/run/batch", "/run/long-batch"])
def test_codejudge_batches_answer_in_order_with_reasons(gw_fast: Served, path: str) -> None:
    subs = [codejudge_submission(ADD_CODE, f"{i} {i}\n", f"{2 * i}") for i in range(5)]
    subs.append(codejudge_submission(CPP_ADD, "40 2\n", "42", type_="cpp"))
    subs.append(codejudge_submission("print(1)", None, None, type_="math"))
    subs.append(codejudge_submission("print(", "", "1"))
    status, body, _ = http(gw_fast.url + path, {**codejudge_batch(subs), "sub_id": "b1"})
    assert status == 200 and body["sub_id"] == "b1"
    results = body["results"]
    assert [r["success"] for r in results] == [True] * 6 + [False, False]
    assert results[6]["reason"] == "invalid_input"
    assert results[7]["reason"] == "" and results[7]["run_success"] is False  # its own syntax error
    assert ("stdout" in results[0]) == path.startswith("/run")


def test_x_coders_code_execution_manager_payloads_judge_on_the_worker(gw_fast: Served) -> None:
    # X-Coder's manager: keys only when set, stdin/stdout submissions and assert-style ones
    # (a LeetCode call appended to the solution, judged by the exit status)
    code = "class Solution:\n    def twice(self, x):\n        return 2 * x\n"
    subs = [
        {"type": "python", "solution": ADD_CODE, "expected_output": "7", "input": "3 4"},
        {"type": "python", "solution": ADD_CODE, "expected_output": "8", "input": "3 4"},
        {"type": "python", "solution": code + "solution = Solution()\nassert solution.twice(2) == 4"},
        {"type": "python", "solution": code + "solution = Solution()\nassert solution.twice(2) == 5"},
    ]
    status, body, _ = http(gw_fast.url + "/judge/long-batch", {"type": "batch", "submissions": subs})
    assert status == 200 and [r["success"] for r in body["results"]] == [True, False, True, False]
    assert all(r["reason"] == "" for r in body["results"])


def test_codejudge_success_compares_the_stripped_text_exactly_as_code_judge_does(gw_fast: Served) -> None:
    # code-judge's worker: success = exit 0 and stdout.strip() == expected_output.strip();
    # whitespace-token equality would pay the first three, which code-judge does not
    cases = [
        ("print(1, 2)", "1\n2\n", False),        # the line breaks inside count
        ("print('1  2')", "1 2", False),          # and the spacing inside
        ("print('a\\tb')", "a b", False),
        ("print('\\n  7  \\n')", "7", True),      # only the ends are stripped
        ("print(1)\nprint(2)", "1\n2", True),
        ("print('1 2 ')", "\n1 2\n\n", True),
    ]
    subs = [codejudge_submission(code, None, expected) for code, expected, _ in cases]
    status, body, _ = http(gw_fast.url + "/judge/batch", codejudge_batch(subs))
    assert status == 200
    assert [r["success"] for r in body["results"]] == [ok for _, _, ok in cases]
    assert all(r["reason"] == "" for r in body["results"])


def test_codejudge_status_counts_the_queue_and_the_workers(gw_fast: Served) -> None:
    status, body, _ = http(gw_fast.url + "/status", method="GET")
    assert status == 200 and isinstance(body["queue"], int) and body["num_workers"] >= 1


def test_a_malformed_codejudge_body_is_a_422(gw_fast: Served) -> None:
    assert http(gw_fast.url + "/judge", {"type": "python"})[0] == 422
    assert http(gw_fast.url + "/judge/batch", {"type": "batch", "submissions": []})[0] == 422


# --- overload: waiting, and refusals each client retries ----------------------------------------


def test_a_full_backlog_makes_calls_wait_for_their_turn_not_fail(node: FleetWorker) -> None:
    with contextlib.contextmanager(serve)(ServeConfig(redis_url=node.redis_url, timeout_s=120, max_backlog=2,
                                                      coalesce_ms=1)) as served:
        # eight distinct programs at once against a backlog of 2: six wait in the gateway for
        # room, none is refused, each gets its own output
        codes = [f"import time\ntime.sleep(0.3)\nprint({i})\n" for i in range(8)]
        url = served.url + "/run_code"
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda c: verl_call(url, verl_payload(c, "")), codes))
        assert [(body or {}).get("run_result", {}).get("stdout") for body, _ in replies] == [f"{i}\n" for i in range(8)]
        assert served.gateway.backlog == 0


def test_a_refusal_takes_the_form_each_client_retries(node: FleetWorker) -> None:
    config = ServeConfig(redis_url=node.redis_url, timeout_s=120, max_backlog=1, wait_s=0.5, coalesce_ms=1)
    with contextlib.contextmanager(serve)(config) as served:
        url = served.url
        hold_payload = verl_payload("import time\ntime.sleep(15)\n", "", timeout=40)
        hold = threading.Thread(target=http, args=(url + "/run_code", hold_payload))
        hold.start()  # takes the one place of the backlog for ~15 s (a sleep: no CPU time)
        deadline = time.monotonic() + 30
        while served.gateway.backlog < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # verl's sandbox_fusion retries 504 (and only 504)
        status, body, _ = http(url + "/run_code", verl_payload(ADD_CODE, "1 1\n"))
        assert status == 504 and body["status"] == "SandboxError" and body["run_result"] is None
        # code-judge: HTTP 200, reason queue_timeout, which its client resubmits
        status, body, _ = http(url + "/run/batch", codejudge_batch([codejudge_submission(ADD_CODE, "1 1\n")]))
        assert status == 200 and body["results"][0]["reason"] == "queue_timeout"
        assert body["results"][0]["success"] is False
        # OpenRLHF and slime: 503 with Retry-After, never a number
        many = {"query": ["```python\n" + ADD_CODE + "```"], "prompts": [""], "labels": ["g/add"]}
        status, body, headers = http(url + "/get_reward", many)
        assert status == 503 and headers.get("retry-after") == "1" and "rewards" not in body
        status, body, headers = http(url + "/slime", {"prompt": "", "response": many["query"][0], "label": "g/add"})
        assert status == 503 and headers.get("retry-after") == "1"
        hold.join()
        assert served.gateway.metrics.refused.labels("run_code")._value.get() >= 1


def test_inline_tests_while_redis_is_away_are_refused_as_each_client_retries_never_a_500() -> None:
    # storing inline tests is the first Redis call of a request that carries them: Redis away
    # there raised redis-py's own ConnectionError (no builtin ConnectionError), a 500 with a
    # traceback; /v1/judge's stream broke off, losing every line not yet sent
    tests = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
    answer = "```python\n" + ADD_CODE + "```"
    redis_server = RedisServer()
    redis_server.__enter__()
    stopped = False
    try:
        with contextlib.contextmanager(serve)(ServeConfig(redis_url=redis_server.url, timeout_s=30, wait_s=10)) as served:
            redis_server.__exit__(None, None, None)
            stopped = True
            status, body, headers = http(served.url + "/slime", {"prompt": "", "response": answer, "label": tests})
            assert status == 503 and headers.get("retry-after") == "1", (status, body)
            status, body, headers = http(served.url + "/get_reward", {"query": [answer], "prompts": [""],
                                                                      "labels": [json.dumps(tests)]})
            assert status == 503 and headers.get("retry-after") == "1", (status, body)
            common_oj = {"provided_data": {"test": [{"input": {"stdin": "1 2\n"}, "output": {"stdout": "3\n"}}]}}
            status, body, _ = http(served.url + "/submit", {"id": 1, "completion": answer, "config": common_oj})
            assert status == 503, (status, body)
            req = urllib.request.Request(served.url + "/v1/judge", method="POST",
                                         data=json.dumps({"jobs": [{"tests": tests, "completion": answer}]}).encode())
            with urllib.request.urlopen(req, timeout=60) as resp:
                lines = [json.loads(line) for line in resp.read().decode().splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0]["permanent"] is False and lines[0]["index"] == 0, lines
            files = [{"name": "main.python", "content": ADD_CODE}, {"name": "input.txt", "content": "1 2\n"},
                     {"name": "correct_output.txt", "content": "3\n"},
                     {"name": "grader_config", "content": "TIME_LIMIT=2\nMEMORY_LIMIT=256\nINPUT_MODE=stdio"}]
            status, body, _ = http(served.url + "/api/v2/execute", {"language": "cf_python3", "version": "*",
                                                                   "files": files, "run_timeout": 5000})
            assert status == 503 and "message" in body, (status, body)
    finally:
        if not stopped:
            redis_server.__exit__(None, None, None)


def test_codejudge_submissions_wait_for_redis_to_come_back_never_an_internal_error(tmp_path: Path) -> None:
    # Redis away (a restart) when a batch arrives: judge_client gives up on internal_error and
    # X-Coder's manager scores it 0, so the submission is sent again until Redis is back
    batch = codejudge_batch([codejudge_submission(ADD_CODE, "1 2\n", "3\n")])
    with RedisServer() as redis_server, FleetWorker(redis_server.url, tmp_path, concurrency=1), \
            contextlib.contextmanager(serve)(ServeConfig(redis_url=redis_server.url, timeout_s=120)) as served, \
            ThreadPoolExecutor(1) as pool:
        redis_server.stop()
        registry = served.gateway.metrics.registry
        answer = pool.submit(http, served.url + "/run/batch", batch)
        deadline = time.monotonic() + 60
        while not registry.get_sample_value("cpfleet_http_redis_waits_total"):  # its first attempt met Redis away
            assert time.monotonic() < deadline and not answer.done(), answer.result() if answer.done() else ""
            time.sleep(0.02)
        redis_server.start()
        status, body, _ = answer.result(timeout=120)
        result = body["results"][0]
        assert status == 200 and (result["success"], result["reason"], result["stdout"]) == (True, "", "3\n"), body


def test_a_retry_after_a_504_joins_the_run_still_in_flight(node: FleetWorker) -> None:
    config = ServeConfig(redis_url=node.redis_url, timeout_s=120, wait_s=1.0, coalesce_ms=1)
    with contextlib.contextmanager(serve)(config) as served:
        runs = served.gateway.runs
        jobs_before = runs.jobs
        payload = verl_payload("import time\ntime.sleep(2)\nprint('done')\n", "x", timeout=5)
        # verl's attempts at 0, 2 and 5 s, each answered 504 after 1 s until the run is done
        body, err = verl_call(served.url + "/run_code", payload)
        assert err is None and body is not None and body["run_result"]["stdout"] == "done\n"
        assert runs.jobs - jobs_before == 1 and runs.shared >= 1  # the retry did not queue it again


# --- a rolling restart mid-burst -----------------------------------------------------------------


def _serve_process(redis_url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [str(Path(sys.executable).parent / "cpfleet"), "serve", "--redis", redis_url, "--port", str(port)]
    return subprocess.Popen(cmd, cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < end, log.read_text(errors="replace")[-3000:]
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=30)


@pytest.mark.slow
def test_a_rolling_restart_mid_burst_loses_no_answer(node: FleetWorker, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/run_code"
    old = _serve_process(node.redis_url, port, tmp_path / "old.log")
    new: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(tmp_path / "old.log", "ready", old)
        programs = [f"import time\ntime.sleep(0.2)\nprint(int(input()) + {i})\n" for i in range(6)]
        calls = [(p, str(k)) for k in range(10) for p in programs]  # 60 calls, 6 programs x 10 tests

        def one(call: tuple[str, str]) -> tuple[dict[str, Any] | None, str | None]:
            return verl_call(url, verl_payload(call[0], call[1] + "\n"))

        with ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(one, c) for c in calls]
            time.sleep(0.5)  # the burst is under way on the old replica
            new = _serve_process(node.redis_url, port, tmp_path / "new.log")
            _wait_for(tmp_path / "new.log", "ready", new)
            os.killpg(old.pid, signal.SIGTERM)
            replies = [f.result() for f in futures]
        # uvicorn answers what it holds, shuts the app down, then exits by the signal it caught
        assert _stop(old) in (0, -signal.SIGTERM)
        assert "Traceback" not in (tmp_path / "old.log").read_text(errors="replace")
        for (program, k), (body, err) in zip(calls, replies, strict=True):
            assert err is None and body is not None, err
            offset = programs.index(program)
            assert body["status"] == "Success" and body["run_result"]["stdout"] == f"{int(k) + offset}\n"
        # the new replica answers on the same port after the old one left
        assert verl_call(url, verl_payload(ADD_CODE, "2 2\n"))[0]["run_result"]["stdout"] == "4\n"  # type: ignore[index]
    finally:
        _stop(old)
        if new is not None:
            _stop(new)


@pytest.mark.slow
def test_a_hard_killed_replica_costs_only_the_calls_it_held(node: FleetWorker, tmp_path: Path) -> None:
    # two replicas on one port (SO_REUSEPORT); one is SIGKILLed in the middle of verl-shaped
    # traffic. The calls it held (accepted or in its accept queue) are lost: verl retries no
    # connection error, so each is a failed test. Every call made after its socket closed goes
    # to the other replica and gets its answer: the kernel takes the dead socket out of the group.
    port = free_port()
    url = f"http://127.0.0.1:{port}/run_code"
    a = _serve_process(node.redis_url, port, tmp_path / "a.log")
    b: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(tmp_path / "a.log", "ready", a)
        b = _serve_process(node.redis_url, port, tmp_path / "b.log")
        _wait_for(tmp_path / "b.log", "ready", b)
        calls: list[tuple[float, int, dict[str, Any] | None, str | None]] = []
        stop = threading.Event()

        def client(k: int) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                started = time.monotonic()
                code = f"import time\ntime.sleep(0.1)\nprint(int(input()) + {k})\n"
                body, err = verl_call(url, verl_payload(code, f"{i}\n"), sleep=False)
                calls.append((started, i + k, body, err))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        while sum(1 for c in calls if c[3] is None) < 24:  # both replicas are answering
            assert all(t.is_alive() for t in threads)
            time.sleep(0.05)
        os.killpg(a.pid, signal.SIGKILL)
        a.wait(timeout=30)  # reaped: its listening socket is closed
        dead_at = time.monotonic()
        while sum(1 for c in calls if c[0] > dead_at) < 36:
            assert time.monotonic() < dead_at + 120 and all(t.is_alive() for t in threads)
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(timeout=120)
        after = [c for c in calls if c[0] > dead_at]
        assert after and all(err is None and body is not None for _, _, body, err in after), after[:3]
        assert all(body["run_result"]["stdout"] == f"{want}\n" for _, want, body, _ in after)  # type: ignore[index]
        lost = [c for c in calls if c[3] is not None]
        assert all(c[0] <= dead_at for c in lost)  # only calls made before the kill were lost
        print(f"hard kill of 1 of 2 replicas: {len(lost)} of {len(calls)} calls lost (all made before it), "
              f"{len(after)} made after it all answered")
    finally:
        _stop(a)
        if b is not None:
            _stop(b)


def test_serve_options_have_help_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from cpfleet.cli import main as cli_main

    with pytest.raises(SystemExit):
        cli_main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for option in ("--redis", "--port", "--max-backlog", "--wait", "--coalesce-ms"):
        assert option in out
    assert "default: 8080" in out
    # the same Redis default as every command: $CPFLEET_REDIS_URL, else the local one
    assert "default: $CPFLEET_REDIS_URL, else redis://127.0.0.1:6379/0" in out
