"""Piston's v2 API on the gateway, driven as open-r1's ``PistonClient`` and ``cf_scoring.py``
drive it (their payloads, their retry on every non-200 answer, their pass rule), against a real
fleet: redis-server, a Celery prefork worker, real compilers, HTTP over a loopback socket."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fleet_helpers import FleetWorker
from gateway_helpers import FLOAT_CHECKER, http, serving

from cpfleet.fleet.redis_server import RedisServer
from cpfleet.gateway import ServeConfig
from cpfleet.gateway.registry import protocols

CPP_ADD = "#include <cstdio>\nint main(){long long a,b;scanf(\"%lld %lld\",&a,&b);printf(\"%lld\\n\",a+b);}\n"
CPP_WRONG = "#include <cstdio>\nint main(){long long a,b;scanf(\"%lld %lld\",&a,&b);printf(\"%lld\\n\",a-b);}\n"
PY_THIRD = "n = int(input())\nprint(1 / n)\n"


def cf_problem(checker: str | None = None, time_limit: float = 2.0, memory_limit: float = 256.0) -> dict[str, Any]:
    """The open-r1/codeforces row fields cf_scoring reads."""
    return {"generated_checker": checker, "time_limit": time_limit, "memory_limit": memory_limit,
            "input_mode": "stdio"}


def cf_request(problem_data: dict[str, Any], test_input: str, test_output: str, submission: str,
               submission_language: str = "cpp") -> tuple[dict[str, Any], str]:
    """What ``score_single_test_case`` hands ``send_execute``: the data and the language."""
    data = {
        "files": [
            {"name": f"main.{submission_language}", "content": submission},
            *([{"name": "checker.py", "content": problem_data["generated_checker"]}]
              if problem_data["generated_checker"] else []),
            {"name": "input.txt", "content": test_input},
            {"name": "correct_output.txt", "content": test_output},
            {
                "name": "grader_config",
                "content": "\n".join(
                    f"{key}={value}"
                    for key, value in {
                        "TIME_LIMIT": problem_data["time_limit"],
                        "MEMORY_LIMIT": problem_data["memory_limit"],
                        "INPUT_MODE": problem_data["input_mode"],
                    }.items()
                ),
            },
        ],
        "run_timeout": (problem_data["time_limit"] + 3) * 1000,
    }
    return data, ("cf_python3" if submission_language == "python" else "c++17")


def send_execute(base: str, data: dict[str, Any], language: str, max_retries: int = 5,
                 seen: list[int] | None = None) -> dict[str, Any] | None:
    """open-r1's ``PistonClient.send_execute``: version "*", every non-200 (and a connection
    error) retried, "Resource temporarily unavailable" on run.stderr retried; None when the
    retries are spent (cf_scoring then fails the test)."""
    body = json.dumps(data | {"language": language, "version": "*"}).encode()
    for attempt in range(max_retries + 1):
        req = urllib.request.Request(f"{base}/api/v2/execute", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, res = resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            status, res = e.code, None
        except OSError:
            status, res = 0, None
        if seen is not None:
            seen.append(status)
        if status == 200 and res is not None and "Resource temporarily unavailable" not in res["run"].get("stderr", ""):
            return res
        if attempt < max_retries:
            time.sleep(0.2)
    return None


def cf_passed(result: dict[str, Any] | None) -> bool:
    """cf_scoring's rule for one test."""
    return bool(result) and result["run"]["code"] == 0 and result["run"]["stdout"].strip() == "1"  # type: ignore[index]


def cf_compiled(result: dict[str, Any] | None) -> bool:
    return not (result and result["compile"]["code"] != 0)


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2) as worker:
        yield worker


@pytest.fixture(scope="module")
def base(node: FleetWorker) -> Iterator[str]:
    with serving(ServeConfig(redis_url=node.redis_url, timeout_s=120, coalesce_ms=2)) as url:
        yield url


def execute(base: str, body: Any, content_type: str = "application/json") -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}/api/v2/execute", data=data, method="POST",
                                 headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_piston_is_a_registered_protocol() -> None:
    assert "piston" in protocols()


def test_a_codeforces_package_test_without_checker_py_is_judged_by_tokens() -> None:
    # the package's tests are no TACO/APPS row: TACO's real_tokens must not come with them
    from cpfleet.core.checkers import get_checker
    from cpfleet.gateway.piston import PackageTest, package_problem

    rec = package_problem(PackageTest("print(0.5)", None, "1\n", "0.5\n", 1.0, 256, "python3"))
    assert "checker" not in rec and rec["id"].startswith("inline/piston-cf/")
    assert not get_checker(rec.get("checker")).check("0.5\n", "0.5000\n").ok


def test_runtimes_list_the_fleets_languages_and_the_codeforces_package(base: str) -> None:
    status, body, _ = http(f"{base}/api/v2/runtimes", method="GET")
    assert status == 200
    by_language = {rt["language"]: rt for rt in body}
    assert {"python", "pypy3", "c++", "c", "java", "cf_python3", "c++17"} <= set(by_language)
    assert "python3" in by_language["python"]["aliases"] and "cpp" in by_language["c++"]["aliases"]
    assert by_language["cf_python3"]["runtime"] == "codeforces" == by_language["c++17"]["runtime"]
    assert all(isinstance(rt["version"], str) and isinstance(rt["aliases"], list) for rt in body)


# --- plain execution ---------------------------------------------------------------------------


def test_python_runs_with_stdin_and_gets_pistons_trailing_newline(base: str) -> None:
    code = "import sys\ndata = sys.stdin.read()\nprint(repr(data))\nprint('err', file=sys.stderr)\n"
    status, body = execute(base, {"language": "python", "version": "*", "files": [{"content": code}],
                                  "stdin": "3 4"})
    assert status == 200, body
    run = body["run"]
    assert run["stdout"] == "'3 4\\n'\n" and run["stderr"] == "err\n"
    assert run["output"] == run["stdout"] + run["stderr"]
    assert run["code"] == 0 and run["status"] is None and run["signal"] is None
    assert "compile" not in body and body["language"] == "python"


def test_a_non_zero_exit_is_RE_and_a_crash_by_signal_is_SG(base: str) -> None:
    status, body = execute(base, {"language": "python3", "version": "3.10.0",
                                  "files": [{"name": "main.py", "content": "import sys\nsys.exit(3)\n"}]})
    assert status == 200
    assert body["run"]["status"] == "RE" and body["run"]["code"] == 3
    segv = "#include <csignal>\nint main(){ std::raise(SIGSEGV); }\n"
    status, body = execute(base, {"language": "cpp", "version": "*", "files": [{"content": segv}]})
    assert status == 200, body
    assert body["compile"]["code"] == 0
    assert body["run"]["status"] == "SG" and body["run"]["signal"] == "SIGSEGV" and body["run"]["code"] is None


def test_cpp_compiles_and_runs_and_a_compile_error_is_the_compile_stage(base: str) -> None:
    status, body = execute(base, {"language": "c++", "version": "*", "files": [{"name": "a.cpp", "content": CPP_ADD}],
                                  "stdin": "2 40\n"})
    assert status == 200, body
    assert body["compile"]["code"] == 0 and body["run"]["stdout"] == "42\n" and body["run"]["code"] == 0
    status, body = execute(base, {"language": "c++", "version": "*", "files": [{"content": "int main( {"}]})
    assert status == 200, body
    assert body["compile"]["code"] != 0 and body["compile"]["stderr"]
    assert body["run"] == body["compile"]


def test_a_run_past_run_timeout_is_TO(base: str) -> None:
    status, body = execute(base, {"language": "python", "version": "*", "files": [{"content": "while True:\n    pass\n"}],
                                  "run_timeout": 1000})
    assert status == 200, body
    assert body["run"]["status"] == "TO" and body["run"]["signal"] == "SIGKILL"


def test_stdout_that_is_not_utf8_is_never_a_clean_exit_a_client_compares(base: str) -> None:
    # the program writes the byte 0xff and exits 0; it comes back as U+FFFD, and a Piston client
    # passes a run whose code is 0 and whose stdout equals the expected output, so an expected
    # output holding U+FFFD would pay it (as /run_code's verl would): the run is RE, code 1, while
    # a program that writes U+FFFD itself (valid UTF-8) is a clean exit
    raw = {"language": "python", "version": "*", "files": [{"content": "import sys\nsys.stdout.buffer.write(b'\\xff\\n')\n"}]}
    real = {"language": "python", "version": "*", "files": [{"content": "print('\\ufffd')\n"}]}
    status, body = execute(base, raw)
    assert status == 200 and body["run"]["stdout"] == "\ufffd\n", body
    assert body["run"]["code"] == 1 and body["run"]["status"] == "RE" and "UTF-8" in body["run"]["message"], body
    status, body = execute(base, real)
    assert status == 200 and body["run"]["stdout"] == "\ufffd\n", body
    assert body["run"]["code"] == 0 and body["run"]["status"] is None, body


def test_base64_and_hex_files_are_placed_beside_the_first_utf8_file(base: str) -> None:
    program = "print(open('data.bin', 'rb').read().hex(), open('sub/n.txt').read())\n"
    files = [
        {"name": "data.bin", "content": base64.b64encode(b"\x00\xffA").decode(), "encoding": "base64"},
        {"name": "main.py", "content": program},
        {"name": "sub/n.txt", "content": b"seven".hex(), "encoding": "hex"},
    ]
    status, body = execute(base, {"language": "python", "version": "*", "files": files})
    assert status == 200, body
    assert body["run"]["stdout"] == "00ff41 seven\n"


# --- open-r1's codeforces package -------------------------------------------------------------


def test_cf_cpp_without_checker_passes_a_right_answer_and_fails_a_wrong_one(base: str) -> None:
    problem = cf_problem()
    result = send_execute(base, *cf_request(problem, "2 3\n", "5\n", CPP_ADD))
    assert cf_compiled(result) and cf_passed(result), result
    result = send_execute(base, *cf_request(problem, "2 3\n", "5\n", CPP_WRONG))
    assert cf_compiled(result) and not cf_passed(result), result
    assert result is not None and result["run"]["stdout"].strip() == "0" and "WRONG_ANSWER" in result["run"]["stderr"]


def test_a_completions_tests_sent_at_once_are_each_judged_on_their_own(base: str) -> None:
    # cf_scoring gathers a batch of tests of one submission concurrently; the solution is right
    # on the tests whose expected sum is right and wrong on the others
    tests = [(f"{i} {i}\n", f"{2 * i if i % 2 else 2 * i + 1}\n") for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda t: send_execute(base, *cf_request(cf_problem(), t[0], t[1], CPP_ADD)), tests))
    assert [cf_passed(r) for r in results] == [i % 2 == 1 for i in range(8)]
    assert all(cf_compiled(r) for r in results)


def test_a_program_that_prints_1_does_not_pass_a_test_whose_answer_is_not_1(base: str) -> None:
    result = send_execute(base, *cf_request(cf_problem(), "2 3\n", "5\n", "print(1)\n", "python"))
    assert result is not None and not cf_passed(result)


def test_cf_python_with_checker_py_judges_by_the_checker(base: str) -> None:
    problem = cf_problem(FLOAT_CHECKER)
    # the exact text differs from correct_output.txt: only the checker can pass it
    result = send_execute(base, *cf_request(problem, "3\n", "0.333333333333\n", PY_THIRD, "python"))
    assert cf_compiled(result) and cf_passed(result), result
    result = send_execute(base, *cf_request(problem, "3\n", "0.5\n", PY_THIRD, "python"))
    assert cf_compiled(result) and not cf_passed(result), result


def test_cf_time_limit_is_a_failed_test_never_a_retry(base: str) -> None:
    seen: list[int] = []
    slow = "while True:\n    pass\n"
    result = send_execute(base, *cf_request(cf_problem(time_limit=1.0), "1\n", "1\n", slow, "python"), seen=seen)
    assert seen == [200] and cf_compiled(result) and not cf_passed(result), result
    assert result is not None and "TIME_LIMIT" in result["run"]["stderr"]


def test_cf_memory_limit_is_a_failed_test(base: str) -> None:
    hog = "x = bytearray(600 * 1024 * 1024)\nx[::4096] = b'1' * len(x[::4096])\nprint(1)\n"
    seen: list[int] = []
    result = send_execute(base, *cf_request(cf_problem(memory_limit=64.0), "1\n", "1\n", hog, "python"), seen=seen)
    assert seen == [200] and cf_compiled(result) and not cf_passed(result), result
    assert result is not None and result["run"]["stderr"].split("\n")[0] in ("MEMORY_LIMIT", "RUNTIME_ERROR")


def test_cf_compile_error_is_the_no_compile_answer(base: str) -> None:
    result = send_execute(base, *cf_request(cf_problem(), "1 2\n", "3\n", "int main( {"))
    assert result is not None and not cf_compiled(result) and not cf_passed(result)
    result = send_execute(base, *cf_request(cf_problem(), "1 2\n", "3\n", "def f(:\n", "python"))
    assert result is not None and not cf_compiled(result)


def test_cf_an_empty_cpp_solution_is_the_no_compile_answer_the_package_gives(base: str) -> None:
    # open-r1 extracts the last ```cpp block unstripped: a block of blanks is a submission, and
    # the package compiles it, which an empty C++ source fails (no main): no_compile_reward,
    # -0.1, below a wrong answer's 0. The judge finds no code in it (NO_CODE), which was answered
    # as a compiled, failed test: 0, more than the caller's own scheme gives it
    for blank in ("\n", "  \n\n"):
        result = send_execute(base, *cf_request(cf_problem(), "1 2\n", "3\n", blank))
        assert result is not None and not cf_compiled(result) and not cf_passed(result), result
    # an empty Python program runs (printing nothing) in the package: a failed test, compiled
    result = send_execute(base, *cf_request(cf_problem(), "1 2\n", "3\n", "\n", "python"))
    assert result is not None and cf_compiled(result) and not cf_passed(result), result


def test_no_answer_in_time_is_a_503_the_client_retries_never_a_score(tmp_path_factory: pytest.TempPathFactory) -> None:
    # a fleet with no worker: the judge job waits in the queue past the gateway's deadline
    with RedisServer() as lonely, serving(ServeConfig(redis_url=lonely.url, wait_s=1.0, timeout_s=60)) as url:
        seen: list[int] = []
        data, language = cf_request(cf_problem(), "2 3\n", "5\n", CPP_ADD)
        result = send_execute(url, data, language, max_retries=1, seen=seen)
        assert result is None and seen == [503, 503]
        status, body = execute(url, data | {"language": language, "version": "*"})
        assert status == 503 and "message" in body


def test_a_test_lost_from_the_store_is_a_503_and_the_retry_stores_it_again(base: str, node: FleetWorker) -> None:
    # the route remembers what it stored (the fleet client's inline registry, bounded); when the
    # fleet answers that the stored problem is gone, the answer is one the client retries, and
    # the retry stores it again: never a score
    import redis

    from cpfleet.core.store import remove_problems, stored_ids

    data, language = cf_request(cf_problem(time_limit=1.5), "4 5\n", "9\n", CPP_ADD)
    r = redis.Redis.from_url(node.redis_url)
    try:
        before = stored_ids(r)
        assert cf_passed(send_execute(base, data, language))
        new = {p for p in stored_ids(r) - before if p.startswith("inline/piston-cf/")}
        assert len(new) == 1
        remove_problems(r, new)
        seen: list[int] = []
        result = send_execute(base, data, language, seen=seen)
        assert seen == [503, 200] and cf_passed(result), (seen, result)
        assert new <= stored_ids(r)
    finally:
        r.close()


# --- malformed bodies: Piston's 400 {message} ---------------------------------------------------


@pytest.mark.parametrize(("body", "says"), [
    ([1, 2], "JSON object"),
    ({"version": "*", "files": []}, "language is required"),
    ({"language": "python", "files": []}, "version is required"),
    ({"language": "python", "version": "*"}, "files is required"),
    ({"language": "python", "version": "*", "files": [{"name": "a.py"}]}, "files[0].content"),
    ({"language": "cobol", "version": "1.0", "files": [{"content": "x"}]}, "cobol-1.0 runtime is unknown"),
    ({"language": "python", "version": "*", "files": [{"content": "eA==", "encoding": "base64"}]},
     "at least one utf8"),
    ({"language": "python", "version": "*", "files": [{"content": "x"}, {"content": "%%", "encoding": "base64"}]},
     "not base64"),
    ({"language": "python", "version": "*", "files": [{"content": "x"}], "run_timeout": "1s"}, "must be a number"),
    ({"language": "python", "version": "*", "files": [{"content": "x"}], "run_timeout": 600000}, "configured limit"),
    ({"language": "python", "version": "*", "files": [{"content": "x"}], "args": ["-v"]}, "args"),
    ({"language": "python", "version": "*", "files": [{"content": "x"}, {"name": "../up", "content": "y"}]}, "files"),
    # more files than a run holds are refused for their number before any name is looked at
    # (checking thousands of deep names held the gateway's event loop for seconds)
    ({"language": "python", "version": "*", "files": [{"content": "x"}, {"name": "a", "content": "y"},
                                                      *({"name": f"a/{i}", "content": "y"} for i in range(64))]},
     "at most 64 files"),
])
def test_malformed_bodies_are_400_with_pistons_message(base: str, body: Any, says: str) -> None:
    status, answer = execute(base, body)
    assert status == 400 and says in answer["message"], answer


def test_bad_grader_configs_are_400_never_a_score(base: str) -> None:
    data, language = cf_request(cf_problem(), "1\n", "1\n", "print(1)\n", "python")
    for content in ("TIME_LIMIT=x\nMEMORY_LIMIT=256\nINPUT_MODE=stdio", "TIME_LIMIT=2\nMEMORY_LIMIT=256\nINPUT_MODE=file"):
        files = [f if f["name"] != "grader_config" else {"name": "grader_config", "content": content}
                 for f in data["files"]]
        status, answer = execute(base, {"files": files, "language": language, "version": "*"})
        assert status == 400 and "grader_config" in answer["message"], answer


def test_not_json_is_400_and_another_content_type_415(base: str) -> None:
    status, answer = execute(base, b"{not json")
    assert status == 400 and "message" in answer
    status, answer = execute(base, {"language": "python", "version": "*", "files": [{"content": "x"}]},
                             content_type="text/plain")
    assert status == 415 and "application/json" in answer["message"]


def test_a_programs_own_resource_temporarily_unavailable_is_no_overload_retry(base: str) -> None:
    # the compiler quotes the failing line, so the phrase reaches the answer's stderr
    program = "int main( { // Resource temporarily unavailable\n"
    seen: list[int] = []
    result = send_execute(base, *cf_request(cf_problem(), "1\n", "1\n", program), seen=seen)
    assert seen == [200] and result is not None and not cf_compiled(result)
    assert "esource temporarily unavailable" in result["run"]["stderr"]
    assert "Resource temporarily unavailable" not in result["run"]["stderr"]
