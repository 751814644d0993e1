"""open-r1's E2B and Morph routers' ``POST /execute_batch`` on the gateway: ``code_reward``'s
scripts judged on a real fleet (redis-server, a Celery prefork worker, HTTP over a loopback
socket), scored as open-r1's two router clients score the answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fleet_helpers import FleetWorker
from gateway_helpers import http, serving

from cpfleet.core.errors import NotAScoringScript
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.gateway import ServeConfig
from cpfleet.gateway.e2b import parse_script
from cpfleet.gateway.registry import protocols

# The shape of open-r1's code_reward script (written here, not copied): indented as it sits in
# their source, a scorer that runs `python3 -c code` per test and returns the share passed,
# then the code and tests as literals (json.dumps of the code, json.dumps twice of the tests).
TEMPLATE = """
    import subprocess
    import json

    def evaluate_code(code, test_cases):
        passed = 0
        total = len(test_cases)
        for case in test_cases:
            proc = subprocess.run(["python3", "-c", code], input=case["input"], text=True,
                                  capture_output=True, timeout=5)
            if proc.returncode == 0 and proc.stdout.strip() == case["output"].strip():
                passed += 1
        return passed / total

    code_snippet = {code}
    test_cases = json.loads({test_cases})

    evaluate_code(code_snippet, test_cases)
    """

TESTS = [{"type": "stdin_stdout", "input": f"{a} {b}\n", "output": f"{a + b}\n"} for a, b in
         [(1, 2), (5, 5), (10, 20), (7, 0)]]
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
HALF_RIGHT = "a, b = map(int, input().split())\nprint(a + b if a < 6 else a * b)\n"  # right on 2 of 4


def script(code: str, tests: list[dict[str, Any]] = TESTS) -> str:
    return TEMPLATE.format(code=json.dumps(code), test_cases=json.dumps(json.dumps(tests)))


def e2b_rewards(answer: list[dict[str, Any]]) -> list[float | None]:
    """open-r1's E2BProvider with a router: float(execution.text), None when that fails."""
    rewards: list[float | None] = []
    for item in answer:
        execution = item["execution"]
        text = None
        if execution is not None:
            text = next((r.get("text") for r in execution["results"] if r.get("is_main_result")), None)
        try:
            rewards.append(float(text))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            rewards.append(None)
    return rewards


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2) as worker:
        yield worker


@pytest.fixture(scope="module")
def base(node: FleetWorker) -> Iterator[str]:
    with serving(ServeConfig(redis_url=node.redis_url, timeout_s=120)) as url:
        yield url


def execute_batch(base: str, scripts: list[str], **extra: Any) -> tuple[int, Any]:
    # RoutedSandbox.run_code's payload (the E2B provider passes timeout=30, request_timeout=28)
    payload = {"scripts": scripts, "languages": ["python"] * len(scripts), "timeout": 30, "request_timeout": 28}
    status, body, _ = http(f"{base}/execute_batch", payload | extra)
    return status, body


def test_the_routers_are_a_registered_protocol() -> None:
    assert "e2b_router" in protocols()


def test_code_reward_scripts_are_judged_and_scored_as_both_clients_read_them(base: str) -> None:
    status, body = execute_batch(base, [script(ADD), script(HALF_RIGHT), script("print(3)\n")])
    assert status == 200, body
    assert e2b_rewards(body) == [1.0, 0.5, 0.25]
    assert [float(item["text"]) for item in body] == [1.0, 0.5, 0.25]  # the Morph client's read
    assert body[0]["exception_str"] is None and body[0]["execution"]["error"] is None
    assert body[1]["cpfleet"]["verdict"] == "WRONG_ANSWER"


def test_output_cut_short_earns_nothing_where_the_templates_zip_would_pass_it(base: str) -> None:
    tests = [{"input": "2\n", "output": "1\n2\n"}, {"input": "3\n", "output": "1\n2\n3\n"}]
    first_line_only = "input()\nprint(1)\n"
    status, body = execute_batch(base, [script(first_line_only, tests), script("n = int(input())\nfor i in range(n):\n"
                                                                             "    print(i + 1)\n", tests)])
    assert status == 200, body
    assert e2b_rewards(body) == [0.0, 1.0]


def test_lines_compare_as_the_templates_stripped_lines_not_as_tokens(base: str) -> None:
    # the template compares each stripped line as text: "1 2" on one line is not the answer's
    # two lines, and "1  2" is not "1 2"; only the ends of a line and of the output are free
    tests = [{"input": "2\n", "output": "1\n2\n"}, {"input": "x\n", "output": "1 2\n"}]
    one_line = "s = input()\nprint('1 2')\n"
    wide = "s = input()\nprint('1\\n2' if s == '2' else '1  2')\n"
    loose_ends = "s = input()\nprint('\\n  1\\n2  \\n' if s == '2' else ' 1 2\\t')\n"
    status, body = execute_batch(base, [script(one_line, tests), script(wide, tests), script(loose_ends, tests)])
    assert status == 200, body
    assert e2b_rewards(body) == [0.5, 0.5, 1.0]


def test_the_templates_per_run_timeout_is_the_time_limit(base: str) -> None:
    # 2.5 s of CPU: over cpfleet's default 2 s for inline tests, within the template's 5 s
    slow = "import time\nt = time.process_time()\nwhile time.process_time() - t < 2.5:\n    pass\nprint(3)\n"
    tests = [{"input": "1 2\n", "output": "3\n"}]
    status, body = execute_batch(base, [script(slow, tests), script(slow, tests).replace("timeout=5", "timeout=1")])
    assert status == 200, body
    assert e2b_rewards(body) == [1.0, 0.0], body
    assert body[1]["cpfleet"]["verdict"] == "TIME_LIMIT"


def test_a_test_set_lost_from_the_store_is_stored_again(base: str, node: FleetWorker) -> None:
    import redis

    from cpfleet.core.store import remove_problems, stored_ids

    tests = [{"input": "40 2\n", "output": "42\n"}]
    r = redis.Redis.from_url(node.redis_url)
    try:
        before = stored_ids(r)
        assert e2b_rewards(execute_batch(base, [script(ADD, tests)])[1]) == [1.0]
        new = stored_ids(r) - before
        assert len(new) == 1
        remove_problems(r, new)
        assert e2b_rewards(execute_batch(base, [script(ADD, tests)])[1]) == [1.0]
        assert new <= stored_ids(r)
    finally:
        r.close()


def test_a_completion_without_code_scores_zero(base: str) -> None:
    status, body = execute_batch(base, [script("")])  # open-r1's extract_code found no block
    assert status == 200 and e2b_rewards(body) == [0.0], body


def test_other_scripts_and_languages_are_not_executed_and_never_scored(base: str) -> None:
    weighted = script(ADD).replace("return passed / total", "return passed / (total * 2)")
    scripts = ["print('hello')", "import os\nos.system('true')\n1.0", weighted, script(ADD)]
    status, body = execute_batch(base, scripts, languages=["python", "python", "python", "javascript"])
    assert status == 200, body
    assert e2b_rewards(body) == [None, None, None, None]
    assert all(item["execution"] is None and item["text"] is None for item in body)
    assert "not open-r1's code_reward script" in body[0]["exception_str"]
    assert "passed / total" in body[2]["exception_str"]
    assert "javascript" in body[3]["exception_str"]


def test_tests_that_make_no_problem_are_that_scripts_failure_only(base: str) -> None:
    # function_call cases: the template would pipe the argument list to stdin and crash
    calls = [{"type": "function_call", "fn_name": "add", "input": [1, 2], "output": 3}]
    status, body = execute_batch(base, [script(ADD, []), script(ADD), script("def add(a, b):\n    return a + b\n", calls)])
    assert status == 200, body
    assert e2b_rewards(body) == [None, 1.0, None]
    assert "make no problem" in body[0]["exception_str"] and "make no problem" in body[2]["exception_str"]


def test_the_old_routers_single_language_field_is_read(base: str) -> None:
    status, body, _ = http(f"{base}/execute_batch", {"scripts": [script(ADD)], "language": "python", "timeout": 30,
                                                     "request_timeout": 30})
    assert status == 200 and e2b_rewards(body) == [1.0], body


@pytest.mark.parametrize("payload, why", [
    ({"scripts": "x"}, "'scripts' must be a list"),
    ({"scripts": [1]}, "list of strings"),
    ({"scripts": ["x"], "languages": ["python", "python"]}, "'languages' has 2 items"),
    ({"scripts": ["x"], "request_timeout": -1}, "request_timeout"),
    ([1, 2], "JSON object"),
])
def test_a_malformed_batch_is_a_422_naming_what(base: str, payload: Any, why: str) -> None:
    status, body, _ = http(f"{base}/execute_batch", payload)
    assert status == 422 and why in body["error"], body


def test_the_template_is_recognised_by_its_shape_only() -> None:
    asked = parse_script(script(ADD))
    assert asked.code == ADD and asked.tests == TESTS and asked.timeout_s == 5.0
    assert parse_script(script(ADD).replace("timeout=5", "timeout=t").replace("passed = 0", "passed = 0\n        t = 7"))\
        .timeout_s == 7.0
    for broken in (script(ADD) + "\nimport os\n",  # ends with something else
                   script(ADD).replace('["python3", "-c", code]', '["python3", "-c", "print(1)"]'),
                   script(ADD).replace("code_snippet = ", "code_snippet = str() + "),
                   "def evaluate_code(code, test_cases):\n" + "  (" * 200 + "1" + ")" * 200):
        with pytest.raises(NotAScoringScript):
            parse_script(broken)


def test_the_answer_builds_e2bs_own_execution_objects(base: str) -> None:
    models = pytest.importorskip("e2b_code_interpreter.models", reason="the e2b-code-interpreter package is not "
                                 "installed (pip install e2b-code-interpreter to run this check)")
    status, body = execute_batch(base, [script(ADD), "print(1)"])
    assert status == 200
    executions = []
    for result in body:  # open-r1's RoutedSandbox.run_code, verbatim in effect
        if result["execution"] is None:
            executions.append(models.Execution())
        else:
            ex = result["execution"]
            executions.append(models.Execution(
                results=[models.Result(**r) for r in ex["results"]], logs=ex["logs"],
                error=models.ExecutionError(**ex["error"]) if ex["error"] else None,
                execution_count=ex["execution_count"]))
    assert float(executions[0].text) == 1.0 and executions[1].text is None


def test_scripts_whose_tests_cannot_be_stored_while_redis_is_away_are_not_executed_never_a_500() -> None:
    # the gateway stores each script's tests first: Redis away there was a 500 for the whole
    # batch, which open-r1's router client cannot read (it raises out of code_reward and ends
    # the trainer's step); each script is that script's execution: null (a dropped sample)
    redis_server = RedisServer()
    redis_server.__enter__()
    stopped = False
    try:
        with serving(ServeConfig(redis_url=redis_server.url, timeout_s=30, wait_s=10)) as url:
            redis_server.__exit__(None, None, None)
            stopped = True
            status, body = execute_batch(url, [script(ADD), script(ADD)])
            assert status == 200, body
            assert e2b_rewards(body) == [None, None]
            assert all(item["execution"] is None and "did not judge" in item["exception_str"] for item in body), body
    finally:
        if not stopped:
            redis_server.__exit__(None, None, None)
