"""Hostile bodies and a failing Redis against every protocol of ``cpfleet serve``, through real
HTTP on a loopback port with a real redis-server (and a real Celery prefork worker where a
program must run): a body the gateway cannot read is the caller's 4xx on every endpoint, never
a 500 (which verl scores as a failed test without retrying), and cpfleet's own NDJSON batch
answers every job with its own line when Redis refuses the work, never a stream cut short."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import redis
from gateway_helpers import serving, start_server

from cpfleet.fleet.redis_server import RedisServer
from cpfleet.gateway import ServeConfig
from cpfleet.producer.client import FleetClient

GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"

# every POST endpoint the gateway serves, with a body of its own protocol
ENDPOINTS = {
    "/run_code": b'{"code": "print(1)", "language": "python", "run_timeout": %s}',
    "/submit": b'{"id": "p", "completion": "x", "config": {"extra": {"n": %s}}}',
    "/run": b'{"type": "python", "solution": "print(1)", "sub_id": %s}',
    "/judge/batch": b'{"type": "batch", "submissions": [{"type": "python", "solution": "print(1)", "x": %s}]}',
    "/get_reward": b'{"query": ["x"], "prompts": [""], "labels": [%s]}',
    "/slime": b'{"prompt": "", "response": "x", "label": %s}',
    "/v1/judge": b'{"jobs": [{"problem_id": "p", "completion": "x", "job_id": %s}]}',
}


@pytest.fixture(scope="module")
def idle_url(redis_server: RedisServer) -> Iterator[str]:
    """A gateway over the session's Redis with no worker: for bodies refused before any job."""
    server, thread, port = start_server(ServeConfig(redis_url=redis_server.url, timeout_s=30, wait_s=5))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def raw_post(url: str, body: bytes, timeout: float = 120) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.mark.parametrize("path", sorted(ENDPOINTS))
def test_an_integer_past_pythons_digit_limit_is_a_400_on_every_endpoint(idle_url: str, path: str) -> None:
    # valid JSON (RFC 8259 sets no bound on a number's digits) that CPython's int() refuses past
    # 4300 digits with a ValueError that is not a JSONDecodeError
    status, answer = raw_post(idle_url + path, ENDPOINTS[path] % (b"1" + b"0" * 5000))
    assert status == 400, (status, answer[:300])
    assert "digits" in json.loads(answer)["error"]


def test_a_full_redis_answers_every_native_job_with_its_own_line() -> None:
    # Redis at maxmemory (noeviction) refuses the jobs: each job's line says so (retryable),
    # and the stream ends whole; a cut stream loses every line not yet sent
    with RedisServer() as server:
        with FleetClient(server.url) as c:
            c.register_problems([{"id": "p", "public_tests": [{"input": "1 2\n", "output": "3\n"}],
                                  "hidden_tests": [{"input": "2 2\n", "output": "4\n"}]}])
        srv, thread, port = start_server(ServeConfig(redis_url=server.url, timeout_s=30, wait_s=5))
        try:
            r = redis.Redis.from_url(server.url)
            r.config_set("maxmemory-policy", "noeviction")
            r.config_set("maxmemory", str(r.info("memory")["used_memory"]))
            jobs = [{"problem_id": "p", "completion": f"{GOOD}\n# {i}", "job_id": str(i)} for i in range(3)]
            status, body = raw_post(f"http://127.0.0.1:{port}/v1/judge", json.dumps({"jobs": jobs}).encode())
            r.config_set("maxmemory", "0")
            r.close()
        finally:
            srv.should_exit = True
            thread.join(timeout=30)
    assert status == 200
    lines = [json.loads(line) for line in body.splitlines()]
    assert sorted(line["job_id"] for line in lines) == ["0", "1", "2"], lines
    for line in lines:
        assert line["permanent"] is False and "full" in line["error"], line


@pytest.mark.parametrize("path, body", [
    ("/slime", {"prompt": "", "response": GOOD, "label": {"inputs": ["1 2\n"], "outputs": ["3\ud800"]}}),
    ("/get_reward", {"query": [GOOD], "prompts": [""], "labels": [{"inputs": ["1 2\ud800"], "outputs": ["3"]}]}),
    ("/submit", {"completion": GOOD, "config": {"provided_data": {"test": [
        {"input": {"stdin": "\ud800"}, "output": {"stdout": "3"}}]}}}),
], ids=["slime", "get_reward", "submit"])
def test_inline_tests_holding_a_lone_surrogate_are_a_422_that_says_so(idle_url: str, path: str,
                                                                      body: dict[str, object]) -> None:
    status, answer = raw_post(idle_url + path, json.dumps(body).encode("ascii"))
    assert status == 422, answer
    error = json.loads(answer)["error"]
    assert "surrogate" in error and "limits" not in error, error


@pytest.mark.parametrize("depth", [1, *range(950, 990, 2)])
def test_submit_refuses_an_id_that_is_not_a_string_or_integer(idle_url: str, depth: int) -> None:
    # SandboxFusion's id is a string or an integer; /submit echoes it back, and an object nested
    # a little less deep than the parser's limit passed the parse and failed the answer's render
    problem_id = '{"a":' * depth + "1" + "}" * depth
    tests = '{"provided_data": {"test": [{"input": {"stdin": ""}, "output": {"stdout": ""}}]}}'
    body = ('{"id": ' + problem_id + ', "completion": "x", "config": ' + tests + "}").encode()
    status, answer = raw_post(idle_url + "/submit", body)
    assert status in (400, 422), (status, answer[:300])


# an integer JSON writes as plainly as 10, past a float's range (float() of it raises
# OverflowError, not ValueError): each limit it lands in is the caller's 4xx naming the field
PAST_FLOAT = "1" + "0" * 400
LIMITS = [
    ("/run_code", '{"code": "print(1)", "language": "python", "run_timeout": %s}', "run_timeout"),
    ("/run_code", '{"code": "print(1)", "language": "python", "compile_timeout": %s}', "compile_timeout"),
    ("/run_code", '{"code": "print(1)", "language": "python", "memory_limit_MB": %s}', "memory_limit_MB"),
    ("/api/v2/execute", '{"language": "python", "version": "*", "files": [{"content": "print(1)"}], "run_timeout": %s}',
     "run_timeout"),
    ("/api/v2/execute", '{"language": "python", "version": "*", "files": [{"content": "print(1)"}], '
                        '"compile_timeout": %s}', "compile_timeout"),
    ("/api/v2/execute", '{"language": "python", "version": "*", "files": [{"content": "print(1)"}], '
                        '"run_memory_limit": %s}', "run_memory_limit"),
    ("/execute_batch", '{"scripts": ["print(1)"], "request_timeout": %s}', "request_timeout"),
]


@pytest.mark.parametrize(("path", "body", "field"), LIMITS, ids=[f"{p}-{f}" for p, _, f in LIMITS])
def test_a_limit_past_a_floats_range_is_a_4xx_naming_it(idle_url: str, path: str, body: str, field: str) -> None:
    status, answer = raw_post(idle_url + path, (body % PAST_FLOAT).encode())
    assert status in (400, 422), (status, answer[:300])
    parsed = json.loads(answer)
    assert field in (parsed.get("error") or parsed.get("message")), parsed


def test_a_code_reward_script_whose_timeout_is_past_a_floats_range_is_still_read() -> None:
    # the script is the caller's text, parsed (never run) by the gateway: an integer literal past
    # a float's range as the template's timeout is no timeout, not an exception out of the parse
    from test_gateway_e2b_router import TESTS, script

    from cpfleet.gateway.e2b import parse_script

    scored = parse_script(script("print(1)").replace("timeout=5", f"timeout={PAST_FLOAT}"))
    assert scored.timeout_s is None and len(scored.tests) == len(TESTS)


def test_a_client_that_hangs_up_mid_body_is_counted_as_its_400_not_an_app_exception(idle_url: str) -> None:
    # the body is cut short (Content-Length promises more) and the socket closed: the gateway's
    # answer is the caller's 400, counted like any other, never an exception out of the app
    host, port = idle_url.removeprefix("http://").split(":")
    metric = 'cpfleet_http_requests_total{endpoint="run_code",status="400"}'

    def counted() -> float:
        with urllib.request.urlopen(idle_url + "/metrics", timeout=30) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith(metric):
                    return float(line.split()[-1])
        return 0.0

    before = counted()
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"POST /run_code HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"code\": ")
    for _ in range(300):  # the server sees the hang-up on its own schedule: look until it has
        if counted() > before:
            break
        time.sleep(0.1)
    assert counted() == before + 1


# inline tests sent as JSON text (a string the gateway parses itself): valid JSON that CPython
# does not read, nested past the parser's stack or with an integer of more than 4300 digits
UNREADABLE_TEXT = {"nested": "[" * 5000 + "]" * 5000, "digits": '{"inputs": ["1"], "outputs": [' + "1" * 5000 + "]}"}


def _text_body(path: str, text: str) -> dict[str, object]:
    if path == "/slime":
        return {"prompt": "", "response": GOOD, "label": text}
    if path == "/get_reward":
        return {"query": [GOOD], "prompts": [""], "labels": [text]}
    if path == "/v1/judge":
        return {"jobs": [{"tests": text, "completion": GOOD}]}
    if path == "/submit":
        return {"completion": GOOD, "config": {"provided_data": {"test": text}}}
    from test_gateway_e2b_router import TEMPLATE  # open-r1's code_reward script, its tests this text

    return {"scripts": [TEMPLATE.format(code=json.dumps("print(1)"), test_cases=json.dumps(text))]}


@pytest.mark.parametrize("kind", sorted(UNREADABLE_TEXT))
@pytest.mark.parametrize("path", ["/slime", "/get_reward", "/v1/judge", "/submit", "/execute_batch"])
def test_inline_tests_as_json_text_the_parser_cannot_read_are_the_callers_error(idle_url: str, path: str,
                                                                              kind: str) -> None:
    status, answer = raw_post(idle_url + path, json.dumps(_text_body(path, UNREADABLE_TEXT[kind])).encode())
    if path == "/execute_batch":  # not judged, never scored
        assert status == 200, answer[:300]
        assert json.loads(answer)[0]["execution"] is None and "not JSON" in json.loads(answer)[0]["exception_str"]
    else:
        assert status == 422, (status, answer[:300])
        assert "JSON" in json.loads(answer)["error"]


# A Content-Length the gateway must never turn into a number: more digits than CPython's int()
# reads, a Unicode digit (``str.isdigit`` is true of ``²``), a sign, past 64 bits. The HTTP layer
# answers 400 before the app, and the gateway goes on answering.
@pytest.mark.parametrize("declared", [b"1" * 5000, "²".encode("latin-1"), b"9" * 23, b"-5", b"+5", b"5, 5"],
                         ids=["5000-digits", "superscript-two", "past-64-bits", "negative", "plus-sign", "list"])
def test_a_content_length_that_is_no_plain_number_is_a_400(idle_url: str, declared: bytes) -> None:
    host, port = idle_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"POST /run_code HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: "
                  + declared + b"\r\n\r\n{}")
        assert s.recv(200).split(b"\r\n")[0] == b"HTTP/1.1 400 Bad Request"
    with urllib.request.urlopen(idle_url + "/metrics", timeout=30) as resp:
        assert resp.status == 200


def test_a_languages_list_of_another_length_names_scripts_not_query(idle_url: str) -> None:
    # /execute_batch has no 'query' field: the 422 must name the two fields that disagree
    status, answer = raw_post(idle_url + "/execute_batch", b'{"scripts": ["print(1)"], "languages": ["python", "python"]}')
    assert status == 422, answer
    assert json.loads(answer)["error"] == "'languages' has 2 items, 'scripts' has 1"


def test_v1_judge_and_code_judges_judge_count_under_their_own_metric_label(idle_url: str) -> None:
    # both bodies are refused before any job; each refusal counts under its own endpoint, so an
    # operator reading /metrics can tell cpfleet's batch from code-judge's /judge
    def count(endpoint: str) -> float:
        with urllib.request.urlopen(idle_url + "/metrics", timeout=30) as resp:
            metrics = resp.read().decode()
        prefix = f'cpfleet_http_requests_total{{endpoint="{endpoint}",status="422"}} '
        return sum(float(line[len(prefix):]) for line in metrics.splitlines() if line.startswith(prefix))

    before = count("v1_judge"), count("judge")
    assert raw_post(idle_url + "/v1/judge", b'{"jobs": []}')[0] == 422
    assert count("v1_judge") == before[0] + 1 and count("judge") == before[1]
    assert raw_post(idle_url + "/judge", b'{"type": "python"}')[0] == 422
    assert count("v1_judge") == before[0] + 1 and count("judge") == before[1] + 1


def test_a_body_that_stalls_gets_a_408_and_its_connection_closed(redis_server: RedisServer) -> None:
    """A client that promises a Content-Length and stops sending holds a connection and its
    buffered body: after ``body_idle_s`` without a byte it gets 408, and the gateway goes on."""
    with serving(ServeConfig(redis_url=redis_server.url, timeout_s=30, wait_s=5, body_idle_s=1.0)) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=60) as s:
            s.sendall(b"POST /run_code HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"code\": ")
            answer = b""
            while chunk := s.recv(4096):  # the gateway closes the connection after its answer
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split(b"\r\n")[0] == b"HTTP/1.1 408 Request Timeout", answer[:300]
        assert "stalled" in json.loads(body)["error"]
        with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
            assert resp.status == 200


def test_serve_takes_the_body_idle_limit_from_its_option() -> None:
    import argparse

    from cpfleet.gateway.serve import config_from_args, configure

    parser = argparse.ArgumentParser()
    configure(parser)
    assert config_from_args(parser.parse_args([])).body_idle_s == 60.0
    assert config_from_args(parser.parse_args(["--body-idle-s", "2.5"])).body_idle_s == 2.5


@pytest.mark.parametrize(("method", "path", "allow"), [("GET", "/run_code", "POST"), ("POST", "/healthz", "GET"),
                                                       ("DELETE", "/v1/judge", "POST")])
def test_a_method_an_endpoint_does_not_take_is_a_json_405_with_an_allow_header(
        idle_url: str, method: str, path: str, allow: str) -> None:
    """Starlette's 405 was the plain text "Method Not Allowed", where every other error of the
    gateway is a JSON object with "error": a client parsing errors as JSON failed on it."""
    req = urllib.request.Request(idle_url + path, method=method, data=None if method == "GET" else b"{}")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req, timeout=60)
    e = caught.value
    assert e.code == 405
    assert e.headers["Content-Type"] == "application/json"
    assert allow in e.headers["Allow"]
    assert json.loads(e.read()) == {"error": f"method {method} is not allowed on {path}: it takes {e.headers['Allow']}"}


def test_a_path_the_gateway_does_not_serve_is_a_json_404_naming_what_it_serves(idle_url: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(idle_url + "/v1/judgee", timeout=60)
    e = caught.value
    assert e.code == 404 and e.headers["Content-Type"] == "application/json"
    error = json.loads(e.read())["error"]
    assert error.startswith("no endpoint /v1/judgee here; this gateway serves ") and "POST /v1/judge" in error
