"""``cpfleet serve`` over real HTTP (uvicorn on a loopback port) and a real fleet: the payloads
OpenRLHF, slime, verl's sandbox_fusion path and the SandboxFusion SDK send, the NDJSON batch,
auth, size limits, backpressure and bad payloads."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from fleet_helpers import FleetWorker
from gateway_helpers import start_server

from cpfleet.cli import main as cli_main
from cpfleet.core.store import remove_problems
from cpfleet.fleet.redis_server import RedisServer, free_port
from cpfleet.gateway import ServeConfig
from cpfleet.producer.client import FleetClient

TOKEN = "s3cret-token"
ADD = {
    "id": "t/add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": f"{i} {i * 7}\n", "output": f"{i * 8}\n"} for i in range(4)],
}
ADD_CODE = "a, b = map(int, input().split())\nprint(a + b)\n"
GOOD = f"```python\n{ADD_CODE}```"
WRONG = "```python\na, b = map(int, input().split())\nprint(a - b)  # judged by test_serve only\n```"
# (a text of its own: a result another module cached for the same program would carry the
# pass_rate of the order its tests ran in then)
ADD_TESTS = {"inputs": [f"{i} {i * 7}\n" for i in range(4)], "outputs": [f"{i * 8}\n" for i in range(4)]}


@dataclass
class Server:
    url: str
    port: int


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2) as worker:
        # stored afresh: the fail-fast counts other modules' jobs left on it would change which
        # test an all-or-nothing job fails first, and so its pass_rate
        r = redis.Redis.from_url(redis_server.url)
        remove_problems(r, [ADD["id"]])
        r.close()
        with FleetClient(redis_server.url) as c:
            c.register_problems([ADD])
        yield worker


@pytest.fixture(scope="module")
def server(node: FleetWorker) -> Iterator[Server]:
    config = ServeConfig(redis_url=node.redis_url, token=TOKEN, max_body_bytes=256 * 1024, max_backlog=8, timeout_s=60)
    srv, thread, port = start_server(config)
    try:
        yield Server(f"http://127.0.0.1:{port}", port)
    finally:
        srv.should_exit = True
        thread.join(timeout=30)


def post(server: Server, path: str, payload: Any, *, token: str | None = TOKEN, raw: bytes | None = None) -> tuple[int, Any, dict[str, str]]:
    data = raw if raw is not None else json.dumps(payload).encode()
    req = urllib.request.Request(server.url + path, data=data, method="POST", headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), dict(e.headers)


# --- OpenRLHF -----------------------------------------------------------------------------------


def test_openrlhf_remote_reward_payload_gets_rewards_for_the_response_after_the_prompt(server: Server) -> None:
    # OpenRLHF's agent executor posts {"query", "prompts", "labels"}; query = prompt + response
    # decoded with the chat template's special tokens still in it
    prompt = "<|im_start|>user\nAdd two numbers.<|im_end|>\n<|im_start|>assistant\n"
    payload = {
        "query": [prompt + GOOD + "<|im_end|>", prompt + WRONG + "<|im_end|>", prompt + GOOD],
        "prompts": [prompt, prompt, prompt],
        "labels": ["t/add", "t/add", json.dumps(ADD_TESTS)],
    }
    status, body, _ = post(server, "/get_reward", payload)
    assert status == 200, body
    assert body["rewards"] == [1.0, 0.0, 1.0]
    assert body["scores"] == body["rewards"]
    assert body["extra_logs"]["pass_rate"] == [1.0, 0.25, 1.0]


@pytest.mark.parametrize(("response", "code_part"), [
    (GOOD + " " * 1_000_000 + "done.<|im_end|>\n", GOOD + " " * 1_000_000 + "done.\n"),
    (GOOD + "\n" + "<|im_end|> \n" * 100_000, GOOD + "\n"),
    (GOOD + "<|" + "a" * 1_000_000, GOOD + "<|" + "a" * 1_000_000),
], ids=["blanks-inside", "tokens-at-the-end", "unclosed-token"])
def test_openrlhf_end_of_turn_tokens_are_cut_reading_the_response_once(response: str, code_part: str) -> None:
    # the run of blanks and end-of-turn tokens that ends the response is cut; searched for from
    # every position, a degenerate generation's long run of blanks before its last words cost the
    # gateway's event loop time quadratic in it (20k spaces: 6 s, 1M: hours), every caller waiting
    from cpfleet.gateway.openrlhf import strip_prompt

    prompt = "<|im_start|>user\nAdd two numbers.<|im_end|>\n<|im_start|>assistant\n"
    assert strip_prompt(prompt + response, prompt) == code_part


@pytest.mark.parametrize(("query", "prompt", "response"), [
    ("x" * 4_000_000, "xy" + "x" * 2_000_000, "x" * 4_000_000),
    ("x" * 4_000_000 + "y" + "x" * 2_000_000 + "y" + GOOD, "y" + "x" * 2_000_000 + "y", GOOD),
], ids=["prompt-absent", "prompt-late"])
def test_openrlhf_prompt_is_found_in_the_query_reading_it_once(query: str, prompt: str, response: str) -> None:
    # a query that does not start with its prompt is cut after the prompt's last occurrence; that
    # search compared the prompt at every alignment, time len(query) x len(prompt) in the gateway's
    # event loop (these bodies: tens of minutes), every caller waiting
    from cpfleet.gateway.openrlhf import strip_prompt

    assert strip_prompt(query, prompt) == response


def test_an_unknown_problem_is_a_422_naming_it_never_retried_never_a_zero(server: Server) -> None:
    for path, payload in [
        ("/get_reward", {"query": [GOOD], "prompts": [""], "labels": ["t/missing"]}),
        ("/slime", {"prompt": "", "response": GOOD, "label": "t/missing"}),
        ("/submit", {"dataset": "x", "id": "t/missing", "completion": GOOD, "config": {}}),
    ]:
        status, body, headers = post(server, path, payload)
        assert status == 422 and "retry-after" not in headers, (path, status, body)
        assert "unknown problem 't/missing'" in body["error"] and "cpfleet load" in body["error"]


# --- slime --------------------------------------------------------------------------------------


def test_slime_remote_rm_gets_a_bare_number(server: Server) -> None:
    ok = post(server, "/slime", {"prompt": "add", "response": GOOD, "label": "t/add"})
    bad = post(server, "/slime", {"prompt": "add", "response": WRONG, "label": ADD_TESTS})
    assert ok[:2] == (200, 1.0)
    assert bad[:2] == (200, 0.0)


# --- SandboxFusion ------------------------------------------------------------------------------


def verl_run_code_payload(code: str, stdin: str, timeout: int = 10) -> dict[str, Any]:
    """Exactly what verl's sandbox_fusion ``call_sandbox_api`` posts for one test case."""
    return {
        "compile_timeout": timeout,
        "run_timeout": timeout,
        "code": code,
        "stdin": stdin,
        "memory_limit_MB": 1024,
        "language": "python",
        "files": {},
        "fetch_files": [],
    }


def test_run_code_answers_verls_sandbox_fusion_payload_with_stdout(server: Server) -> None:
    status, body, _ = post(server, "/run_code", verl_run_code_payload(ADD_CODE, "2 40\n"))
    assert status == 200
    assert body["status"] == "Success"
    run = body["run_result"]
    assert run["status"] == "Finished" and run["return_code"] == 0 and run["stdout"] == "42\n"
    assert set(body) >= {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}
    assert set(run) == {"status", "execution_time", "return_code", "stdout", "stderr"}


def test_run_code_reports_crashes_timeouts_memory_and_syntax_errors_as_failed_runs(server: Server) -> None:
    crash = post(server, "/run_code", verl_run_code_payload("raise SystemExit(3)\n", ""))[1]
    assert crash["status"] == "Failed" and crash["run_result"]["return_code"] == 3
    slow = post(server, "/run_code", verl_run_code_payload("while True:\n    pass\n", "", timeout=1))[1]
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded"
    hog = {**verl_run_code_payload("x = bytearray(1024 * 1024 * 1024)\nprint('allocated')\n", ""), "memory_limit_MB": 128}
    hogged = post(server, "/run_code", hog)[1]
    assert hogged["status"] == "Failed" and hogged["run_result"]["return_code"] != 0
    assert "allocated" not in hogged["run_result"]["stdout"]
    syntax = post(server, "/run_code", verl_run_code_payload("def f(:\n", ""))[1]
    assert syntax["status"] == "Failed" and syntax["run_result"]["return_code"] == 1
    assert "SyntaxError" in syntax["run_result"]["stderr"] or "invalid syntax" in syntax["run_result"]["stderr"]


def test_run_code_runs_confined_no_network_and_no_project_files(server: Server) -> None:
    code = (
        "import socket, os\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {server.port}), timeout=2); print('net')\n"
        "except OSError:\n    print('no net')\n"
        f"print(os.path.exists({__file__!r}))\n"
    )
    body = post(server, "/run_code", verl_run_code_payload(code, ""))[1]
    assert body["status"] == "Success", body
    assert body["run_result"]["stdout"] == "no net\nFalse\n"


def test_sandbox_fusion_sdk_run_code_and_submit_work_against_cpfleet(node: FleetWorker) -> None:
    sdk = pytest.importorskip("sandbox_fusion", reason="pip install sandbox-fusion did not work here")
    # the SDK sends no auth header: a server without a token, as on a trainer's own loopback
    srv, thread, port = start_server(ServeConfig(redis_url=node.redis_url, timeout_s=60))
    try:
        url = f"http://127.0.0.1:{port}"
        resp = sdk.run_code(sdk.RunCodeRequest(code=ADD_CODE, stdin="1 2\n", language="python"), endpoint=url)
        assert resp.status == sdk.RunStatus.Success and resp.run_result.stdout == "3\n"
        tests = [{"input": {"stdin": f"{i} {i}\n"}, "output": {"stdout": f"{2 * i}\n"}} for i in range(3)]
        cfg = sdk.TestConfig(dataset_type="CommonOJDataset", language="python", provided_data={"test": tests})
        good = sdk.submit(sdk.SubmitRequest(dataset="mine", id=7, completion=GOOD, config=cfg), endpoint=url)
        bad = sdk.submit(sdk.SubmitRequest(dataset="mine", id=7, completion=WRONG, config=cfg), endpoint=url)
        by_id = sdk.submit(sdk.SubmitRequest(dataset="x", id="t/add", completion=GOOD, config=sdk.TestConfig()), endpoint=url)
    finally:
        srv.should_exit = True
        thread.join(timeout=30)
    assert good.accepted and all(t.passed for t in good.tests) and good.extracted_code == ADD_CODE
    assert not bad.accepted and [t.passed for t in bad.tests] == [True, False, False]  # 0 0 passes, 1 1 fails
    assert by_id.accepted and len(by_id.tests) == 4  # the hidden tests decide


# --- native batch -------------------------------------------------------------------------------


def test_native_batch_streams_one_ndjson_line_per_job(server: Server, node: FleetWorker) -> None:
    jobs = [
        {"problem_id": "t/add", "completion": GOOD, "job_id": "a"},
        {"tests": ADD_TESTS, "completion": WRONG, "job_id": "b", "reward_shape": "fraction"},
        {"problem_id": "t/missing", "completion": GOOD, "job_id": "c"},
    ]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    conn.request("POST", "/v1/judge", json.dumps({"jobs": jobs}), {"Authorization": f"Bearer {TOKEN}"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("content-type", "").startswith("application/x-ndjson")
    lines = [json.loads(line) for line in resp.read().decode().splitlines() if line.strip()]
    conn.close()
    by_id = {d["job_id"]: d for d in lines}
    assert sorted(d["index"] for d in lines) == [0, 1, 2]
    assert by_id["a"]["reward"] == 1.0 and by_id["a"]["worker"].startswith(node.hostname)  # judged on the worker
    assert by_id["b"]["reward"] == 0.25 and by_id["b"]["verdict"] == "WRONG_ANSWER"
    assert by_id["c"]["permanent"] is True and "unknown problem 't/missing'" in by_id["c"]["error"]
    assert "reward" not in by_id["c"]


def test_native_batch_takes_each_jobs_language_as_the_python_client_does(server: Server, node: FleetWorker) -> None:
    """``language`` per job or for the batch: the same program judged as two languages is two
    jobs (never one result shared), and an unknown language is that job's permanent error."""
    from cpfleet.sandbox import languages

    other = "python3" if languages.missing_tools("pypy3") else "pypy3"
    jobs = [
        {"problem_id": "t/add", "completion": GOOD, "job_id": "default"},
        {"problem_id": "t/add", "completion": GOOD, "job_id": "other", "language": other},
        {"problem_id": "t/add", "completion": GOOD, "job_id": "typo", "language": "pyhton3"},
    ]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=240)
    conn.request("POST", "/v1/judge", json.dumps({"jobs": jobs, "language": "python3"}),
                 {"Authorization": f"Bearer {TOKEN}"})
    resp = conn.getresponse()
    assert resp.status == 200
    by_id = {d["job_id"]: d for d in (json.loads(line) for line in resp.read().decode().splitlines() if line.strip())}
    conn.close()
    assert (by_id["default"]["language"], by_id["default"]["reward"]) == ("python3", 1.0), by_id["default"]
    assert (by_id["other"]["language"], by_id["other"]["reward"]) == (other, 1.0), by_id["other"]
    assert by_id["typo"]["permanent"] is True and "unknown language 'pyhton3'" in by_id["typo"]["error"]
    status, body, _ = post(server, "/v1/judge", {"jobs": [{"problem_id": "t/add", "completion": GOOD, "language": 3}]})
    assert status == 422 and "jobs[0].language must be a string" in body["error"]


# --- auth, limits, backpressure, bad payloads, health ------------------------------------------


def test_without_the_bearer_token_only_healthz_answers(server: Server) -> None:
    assert post(server, "/slime", {"response": GOOD, "label": "t/add"}, token=None)[0] == 401
    assert post(server, "/slime", {"response": GOOD, "label": "t/add"}, token="wrong")[0] == 401
    with urllib.request.urlopen(server.url + "/healthz", timeout=30) as resp:
        health = json.loads(resp.read())
    assert health["ok"] is True and health["redis"] is True


def test_metrics_count_requests_and_jobs(server: Server) -> None:
    post(server, "/slime", {"response": GOOD, "label": "t/add"})
    req = urllib.request.Request(server.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read().decode()
    assert 'cpfleet_http_requests_total{endpoint="slime",status="200"}' in text
    assert 'cpfleet_http_jobs_total{infra_error="false",verdict="OK"}' in text


def test_an_oversized_body_is_413_and_a_full_backlog_makes_jobs_wait_their_turn(server: Server) -> None:
    big = {"query": ["x" * (300 * 1024)], "prompts": [""], "labels": ["t/add"]}
    assert post(server, "/get_reward", big)[0] == 413
    # max_backlog is 8: the ninth job waits for room instead of failing (refusals: test_gateway.py)
    many = {"query": [GOOD] * 9, "prompts": [""] * 9, "labels": ["t/add"] * 9}
    status, body, _ = post(server, "/get_reward", many)
    assert status == 200 and body["rewards"] == [1.0] * 9, body


@pytest.mark.parametrize(
    ("path", "payload", "status", "needle"),
    [
        ("/get_reward", {"query": "not a list", "labels": []}, 422, "'query' must be a list"),
        ("/get_reward", {"query": [GOOD], "labels": ["a", "b"]}, 422, "'labels' has 2 items"),
        ("/get_reward", {"query": [GOOD], "labels": [{"inputs": ["1\n"], "outputs": []}]}, 422, "lengths differ"),
        ("/slime", {"response": GOOD}, 422, "'label'"),
        ("/run_code", {"code": "print(1)", "language": "cobol"}, 400, "not supported"),
        ("/run_code", {"language": "python"}, 422, "'code'"),
        ("/v1/judge", {"jobs": [{"completion": GOOD}]}, 422, "needs 'problem_id' or 'tests'"),
        ("/v1/judge", {"jobs": [{"problem_id": "t/add", "completion": GOOD, "mode": "fast"}]}, 422, "mode"),
        ("/submit", {"completion": GOOD, "config": {}}, 422, "'id'"),
        ("/slime", [1, 2], 422, "JSON object"),
    ],
)
def test_bad_payloads_get_a_clear_4xx(server: Server, path: str, payload: Any, status: int, needle: str) -> None:
    got, body, _ = post(server, path, payload)
    assert got == status and needle in body["error"], body


def test_a_body_that_is_not_json_is_400(server: Server) -> None:
    assert post(server, "/slime", None, raw=b"{nope")[0] == 400


def test_serve_refuses_a_public_address_without_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["serve", "--host", "0.0.0.0", "--port", str(free_port())]) == 2  # a usage error
    assert "without --token" in capsys.readouterr().err
