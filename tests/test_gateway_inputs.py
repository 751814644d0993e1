"""What the gateway does with unusual but valid JSON, against a real fleet (redis-server + a
Celery prefork worker): strings holding a lone UTF-16 surrogate (JSON's ``"\\ud800"`` escape)
are echoed back as the client sent them or refused with a 4xx naming their field, never a 500;
and SandboxFusion's ``/submit`` honours ``config.extra.run_all_cases``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from fleet_helpers import FleetWorker
from gateway_helpers import serving

from cpfleet.fleet.redis_server import RedisServer
from cpfleet.gateway import ServeConfig
from cpfleet.producer.client import FleetClient

ADD = {
    "id": "s/add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": f"{i} {i}\n", "output": f"{2 * i}\n"} for i in range(3)],
}
ADD_CODE = "a, b = map(int, input().split())\nprint(a + b)\n"
GOOD = f"```python\n{ADD_CODE}```"
LONE = "\ud800"  # what json.loads makes of the escape "\ud800": no UTF-8 encodes it


@pytest.fixture(scope="module")
def url(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2):
        with FleetClient(redis_server.url) as c:
            c.register_problems([ADD])
        with serving(ServeConfig(redis_url=redis_server.url, timeout_s=120)) as base:
            yield base


def post(url: str, payload: Any) -> tuple[int, Any]:
    """POST ``payload`` as JSON with ASCII escapes (as json.dumps writes a lone surrogate: the
    same bytes any client sends for one), the answer parsed back."""
    req = urllib.request.Request(url, data=json.dumps(payload).encode("ascii"), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


COMMON_OJ = {"provided_data": {"test": [{"input": {"stdin": "1 2\n"}, "output": {"stdout": "3\n"}}]}}


# (path, payload, how the answer carries the string back: a function of the parsed body)
ECHOED = [
    ("/submit", {"id": f"x{LONE}", "completion": GOOD, "config": COMMON_OJ}, lambda b: b["id"]),
    ("/submit", {"id": 1, "completion": f"```python\nprint('{LONE}')\n```", "config": COMMON_OJ},
     lambda b: b["extracted_code"]),
    ("/run", {"sub_id": f"a{LONE}", "type": "python", "solution": "print(1)"}, lambda b: b["sub_id"]),
    ("/judge", {"sub_id": f"a{LONE}", "type": "python", "solution": "print(1)"}, lambda b: b["sub_id"]),
    ("/run/batch", {"type": "batch", "sub_id": f"b{LONE}",
                    "submissions": [{"type": "python", "solution": "print(1)"}]}, lambda b: b["sub_id"]),
    ("/judge/long-batch", {"type": "batch", "submissions": [{"sub_id": f"c{LONE}", "type": "python",
                                                            "solution": "print(1)"}]},
     lambda b: b["results"][0]["sub_id"]),
    # cpfleet's own NDJSON batch (one job: one line, itself a JSON object)
    ("/v1/judge", {"jobs": [{"problem_id": "s/add", "completion": GOOD, "job_id": f"j{LONE}"}]}, lambda b: b["job_id"]),
]


@pytest.mark.parametrize(("path", "payload", "echo"), ECHOED, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(ECHOED)])
def test_a_lone_surrogate_the_gateway_echoes_comes_back_as_sent(url: str, path: str, payload: Any, echo: Any) -> None:
    status, body = post(url + path, payload)
    assert status == 200, body
    assert LONE in echo(body)  # the same \ud800 escape, parsed back into the string the client sent


REFUSED = [
    ("/submit", {"id": f"s/add{LONE}", "completion": GOOD, "config": {}}, "'id'"),
    ("/slime", {"prompt": "", "response": GOOD, "label": f"s/add{LONE}"}, "'label'"),
    ("/get_reward", {"query": [GOOD], "prompts": [""], "labels": ["s/add", f"s/{LONE}"]}, "'labels[1]'"),
]


@pytest.mark.parametrize(("path", "payload", "field"), REFUSED, ids=[p for p, _, _ in REFUSED])
def test_a_lone_surrogate_in_a_problem_id_is_a_422_naming_the_field(url: str, path: str, payload: Any,
                                                                     field: str) -> None:
    if path == "/get_reward":
        payload = {**payload, "query": payload["query"] * 2, "prompts": [""] * 2}
    status, body = post(url + path, payload)
    assert status == 422, body
    assert field in body["error"] and "surrogate" in body["error"]


@pytest.mark.parametrize("path", ["/run_code", "/run"])
def test_a_lone_surrogate_in_a_programs_stdin_or_code_reaches_the_program_as_bytes(url: str, path: str) -> None:
    code = f"import sys\nprint(sys.stdin.buffer.read().hex(), {LONE!r}.encode('utf-8', 'surrogatepass').hex())\n"
    if path == "/run_code":
        status, body = post(url + path, {"code": code, "stdin": LONE, "language": "python"})
        stdout = body["run_result"]["stdout"] if status == 200 else None
    else:
        status, body = post(url + path, {"type": "python", "solution": "print(input().encode('utf-8','surrogateescape').hex())",
                                         "input": LONE})
        stdout = body.get("stdout")
    assert status == 200, body
    # the fleet sends a lone surrogate on as its UTF-8-style bytes (ED A0 80), as it does a
    # completion's: the program reads what the client encoded, nothing is dropped
    assert stdout is not None and "eda080" in stdout, body


# --- SandboxFusion /submit: config.extra.run_all_cases -----------------------------------------


def _common_oj(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    return {"test": [{"input": {"stdin": i}, "output": {"stdout": o}} for i, o in pairs]}


# the second test expects a wrong sum: only it fails
PAIRS = [("1 2\n", "3\n"), ("2 2\n", "5\n"), ("3 4\n", "7\n")]


def test_submit_stops_at_the_first_failed_test_by_default(url: str) -> None:
    sdk = pytest.importorskip("sandbox_fusion", reason="pip install sandbox-fusion did not work here")
    cfg = sdk.TestConfig(dataset_type="CommonOJDataset", language="python", provided_data=_common_oj(PAIRS))
    res = sdk.submit(sdk.SubmitRequest(dataset="mine", id=1, completion=GOOD, config=cfg), endpoint=url)
    assert not res.accepted
    assert [t.passed for t in res.tests] == [True, False, False]
    assert res.tests[2].test_info == {"verdict": None}  # the third was not run


def test_submit_with_run_all_cases_runs_and_lists_every_test(url: str) -> None:
    sdk = pytest.importorskip("sandbox_fusion", reason="pip install sandbox-fusion did not work here")
    cfg = sdk.TestConfig(dataset_type="CommonOJDataset", language="python", provided_data=_common_oj(PAIRS),
                         extra={"run_all_cases": True})
    res = sdk.submit(sdk.SubmitRequest(dataset="mine", id=1, completion=GOOD, config=cfg), endpoint=url)
    assert not res.accepted
    assert [t.passed for t in res.tests] == [True, False, True]  # the third ran after the failure
    assert [t.test_info["verdict"] for t in res.tests if t.test_info] == ["OK", "WRONG_ANSWER", "OK"]
    all_pass = sdk.TestConfig(dataset_type="CommonOJDataset", language="python",
                              provided_data=_common_oj([PAIRS[0], PAIRS[2]]), extra={"run_all_cases": True})
    ok = sdk.submit(sdk.SubmitRequest(dataset="mine", id=2, completion=GOOD, config=all_pass), endpoint=url)
    assert ok.accepted and [t.passed for t in ok.tests] == [True, True]


# burns one second of CPU time (measured by the program itself, so the same on a loaded machine),
# then answers right: within the project's 2 s default, past a caller's 0.5 s
BURN_ONE_CPU_SECOND = ("```python\nimport time\nwhile time.process_time() < 1.0:\n    pass\n"
                       "a, b = map(int, input().split())\nprint(a + b)\n```")


def test_submit_judges_provided_tests_under_the_configs_run_timeout(url: str) -> None:
    # TestConfig.run_timeout is the caller's per-test time limit for the dataset's tests: judged
    # under the project's default instead, a program slower than the caller allows was accepted
    sdk = pytest.importorskip("sandbox_fusion", reason="pip install sandbox-fusion did not work here")
    tight = sdk.TestConfig(dataset_type="CommonOJDataset", language="python", run_timeout=0.5,
                           provided_data=_common_oj([PAIRS[0]]))
    res = sdk.submit(sdk.SubmitRequest(dataset="mine", id=1, completion=BURN_ONE_CPU_SECOND, config=tight), endpoint=url)
    assert not res.accepted and res.extra == {"verdict": "TIME_LIMIT", "reward": 0.0}, res
    # the first test is the one that ran and failed, not "not run: an earlier test failed"
    assert res.tests[0].test_info == {"verdict": "TIME_LIMIT"} and not res.tests[0].passed, res
    roomy = sdk.TestConfig(dataset_type="CommonOJDataset", language="python", run_timeout=5,
                           provided_data=_common_oj([PAIRS[0]]))
    res = sdk.submit(sdk.SubmitRequest(dataset="mine", id=1, completion=BURN_ONE_CPU_SECOND, config=roomy), endpoint=url)
    assert res.accepted, res
    for bad in ("fast", 0, -1, True, float("inf")):
        status, body = post(url + "/submit", {"id": 1, "completion": GOOD,
                                              "config": {"provided_data": _common_oj(PAIRS), "run_timeout": bad}})
        assert status == 422 and "run_timeout" in body["error"], (bad, body)
    # a stored problem is judged under its own limit: the caller's is refused, never ignored
    status, body = post(url + "/submit", {"id": "s/add", "completion": GOOD, "config": {"run_timeout": 0.5}})
    assert status == 422 and "run_timeout" in body["error"], body


def test_submit_judges_the_completion_in_the_configs_language(url: str) -> None:
    # TestConfig.language is the language the caller asks the completion in: SandboxFusion
    # extracts and runs that language's code. Ignored, a right Python answer was accepted where
    # the caller asked for C++ (a C++ coder rewarded for answering in Python)
    sdk = pytest.importorskip("sandbox_fusion", reason="pip install sandbox-fusion did not work here")
    for language, accepted in (("cpp", False), ("python", True)):
        cfg = sdk.TestConfig(dataset_type="CommonOJDataset", language=language, provided_data=_common_oj([PAIRS[0]]))
        res = sdk.submit(sdk.SubmitRequest(dataset="mine", id=1, completion=GOOD, config=cfg), endpoint=url)
        assert res.accepted is accepted, (language, res)
    cpp = "```cpp\n#include <cstdio>\nint main(){int a,b;scanf(\"%d %d\",&a,&b);printf(\"%d\\n\",a+b);}\n```"
    cfg = sdk.TestConfig(dataset_type="CommonOJDataset", language="cpp", provided_data=_common_oj([PAIRS[0]]))
    assert sdk.submit(sdk.SubmitRequest(dataset="mine", id=1, completion=cpp, config=cfg), endpoint=url).accepted
    status, body = post(url + "/submit", {"id": "s/add", "completion": GOOD, "config": {"language": "cpp"}})
    assert status == 200 and body["accepted"] is False, body  # a stored problem too
    status, body = post(url + "/submit", {"id": 1, "completion": GOOD,
                                          "config": {"provided_data": _common_oj(PAIRS), "language": "rust"}})
    assert status == 422 and "rust" in body["error"], body


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"extra": {"run_all_cases": True}}, "run_all_cases"),  # a stored problem: counts only
        ({"provided_data": _common_oj(PAIRS), "extra": {"run_all_cases": "yes"}}, "true or false"),
        ({"provided_data": _common_oj(PAIRS), "extra": [1]}, "'config.extra'"),
        # caller Python that picks the code: not run here, so judging our own pick would be other code
        ({"provided_data": _common_oj(PAIRS), "custom_extract_logic": "submit_code_blocks(cbs[-1:])"},
         "custom_extract_logic"),
    ],
)
def test_submit_refuses_a_run_all_cases_it_cannot_honour_with_a_422(url: str, config: dict[str, Any],
                                                                    needle: str) -> None:
    status, body = post(url + "/submit", {"id": "s/add", "completion": GOOD, "config": config})
    assert status == 422 and needle in body["error"], body


# --- SandboxFusion /submit: CommonOJ tests compared as SandboxFusion compares them --------------

# (expected stdout, what the program prints, SandboxFusion's verdict: check_stdio_test_case
# with lower_cmp, the CommonOJ default)
COMMON_OJ_COMPARISONS = [
    ("YES\n", "yes", True),                  # lines compared case-insensitively
    ("0.3333333\n", "0.333333", True),       # a line that is one number: relative 1e-5
    ("1000000.0\n", "1000001", True),
    ("1000000\n", "1000001", False),         # two integers exactly (SandboxFusion pays this one)
    ("0.5\n", "0.6", False),
    ("1\n2\n", "1 2", False),                # the line structure counts
    ("1 2\n", "1  2", False),                # and the spacing inside a line
    ("a b\n", "  A b  \n\n", True),          # only the ends are free
    ("1 2\n", "1.0 2", False),               # a line of two numbers is text, not numbers
]


@pytest.mark.parametrize(("expected", "printed", "passed"), COMMON_OJ_COMPARISONS)
def test_submit_compares_provided_tests_as_sandboxfusion_does(url: str, expected: str, printed: str,
                                                              passed: bool) -> None:
    completion = f"```python\nimport sys\nsys.stdout.write({printed!r})\n```"
    config = {"provided_data": _common_oj([("", expected)])}
    status, body = post(url + "/submit", {"id": 7, "completion": completion, "config": config})
    assert status == 200, body
    assert body["accepted"] is passed and [t["passed"] for t in body["tests"]] == [passed], body


@pytest.mark.parametrize("path", ["/v1/judge", "/get_reward", "/slime"])
def test_inline_tests_the_store_lost_are_stored_again_not_an_unknown_problem(url: str, redis_server: RedisServer,
                                                                             path: str) -> None:
    # Redis restarted without its data (or flushed) after the gateway stored a test set: the
    # caller sent the tests inline, so the answer is a judgement, never a permanent 422
    # telling it to `cpfleet load` or send the tests inline
    import redis

    from cpfleet.core.store import remove_problems
    from cpfleet.producer.inline_registry import problem_record

    tests = {"inputs": [f"{len(path)} 5\n"], "outputs": [f"{len(path) + 5}\n"]}  # a test set of this test alone
    bodies = {
        "/v1/judge": {"jobs": [{"tests": tests, "completion": GOOD}]},
        "/get_reward": {"query": [GOOD], "prompts": [""], "labels": [json.dumps(tests)]},
        "/slime": {"prompt": "", "response": GOOD, "label": json.dumps(tests)},
    }
    reward = {"/v1/judge": lambda b: b["reward"], "/get_reward": lambda b: b["rewards"][0], "/slime": lambda b: b}
    status, body = post(url + path, bodies[path])
    assert status == 200 and reward[path](body) == 1.0, body
    client = redis.Redis.from_url(redis_server.url)
    assert remove_problems(client, [problem_record(tests)["id"]]) == 1
    status, body = post(url + path, bodies[path])
    assert status == 200 and reward[path](body) == 1.0, body


SLOW_ADD = ("```python\nimport time\nt = time.process_time()\nwhile time.process_time() - t < 0.6:\n    pass\n"
            f"{ADD_CODE}```")


@pytest.mark.parametrize("path", ["/v1/judge", "/get_reward", "/slime"])
def test_inline_tests_that_state_their_limits_are_judged_under_them_on_every_route(url: str, path: str) -> None:
    # the tests a trainer sends are all the gateway gets of a problem: the limits they state
    # (here 0.25 s, under the 0.6 s this right program spends) are the problem's
    tests = {"inputs": ["4 4\n"], "outputs": ["8\n"]}
    rewards = []
    for sent in (tests, {"tests": tests, "time_limit_s": 0.25}):
        bodies = {
            "/v1/judge": {"jobs": [{"tests": sent, "completion": SLOW_ADD}]},
            "/get_reward": {"query": [SLOW_ADD], "prompts": [""], "labels": [json.dumps(sent)]},
            "/slime": {"prompt": "", "response": SLOW_ADD, "label": json.dumps(sent)},
        }
        status, body = post(url + path, bodies[path])
        assert status == 200, body
        rewards.append({"/v1/judge": lambda b: b["reward"], "/get_reward": lambda b: b["rewards"][0],
                        "/slime": lambda b: b}[path](body))
        if path == "/v1/judge":
            assert body["verdict"] == ("OK" if sent is tests else "TIME_LIMIT"), body
    assert rewards == [1.0, 0.0]
