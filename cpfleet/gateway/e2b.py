"""open-r1's code-execution routers (``scripts/e2b_router.py``, and the MorphCloud router its
``RoutedMorphSandbox`` calls), so ``code_reward(..., provider_type="e2b",
e2b_router_url="gateway:8000")`` (or ``"morph"`` with ``morph_router_url``) scores on the fleet.

``POST /execute_batch``: ``{scripts: [str], languages?: [str] | language?: str, timeout?,
request_timeout?}`` -> one item per script, in order: ``{execution: {results: [{text,
is_main_result}], logs: {stdout, stderr}, error, execution_count} | null, text, exception_str,
cpfleet: {verdict, reward, tests} | absent}``. The E2B client reads ``execution`` and scores
``float(execution.text)`` (an ``execution`` of null: None, a sample the trainer drops); the Morph
client reads ``text`` (a null ``text`` fails its whole batch to 0.0, its own rule).

A script is not run. open-r1 writes each as its ``code_reward`` template: a function
``evaluate_code(code, test_cases)`` that runs ``python3 -c code`` on each test's input and
returns the share of tests passed, then ``code_snippet = "<the completion's code>"``,
``test_cases = json.loads("<the tests>")`` and the call ``evaluate_code(code_snippet,
test_cases)``, whose value is the reward. The script is recognised by that shape (parsed, never
executed), and the code is judged on the fleet against the tests as inline tests with the
fraction reward (the share of tests passed) and cpfleet's verdicts: the template's per-run
timeout as the time limit (of CPU; the template's is wall-clock), the default memory limit, and
the template's comparison (``output.strip()`` and the expected output cut into lines, each line
stripped and equal as text: checker ``lines``) except that it pairs the lines with ``zip``, so a
program printing only the first line of a longer answer passes a test there; here it does not. Its reward is the
answer's ``text`` (``repr`` of a float, as the Jupyter kernel shows the value).

A script of another shape (a different scoring function, another language) is answered
``execution: null`` with ``exception_str`` saying why: arbitrary code would be a reward the
script computes, not one the fleet judges. A fleet failure for one script (INTERNAL, Redis away,
no answer within the caller's budget: ``request_timeout`` less 2 s, Morph's HTTP timeout; else
the gateway's ``--wait``) is that script's ``execution: null``, never a score.
"""

from __future__ import annotations

import ast
import asyncio
import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cpfleet.core.errors import BrokerFull, ClientClosed, FleetBusy, NotAScoringScript
from cpfleet.core.languages import fence
from cpfleet.core.results import JobResult
from cpfleet.gateway.app import Gateway, HTTPError, JSONResponse, Refused, permanent_error
from cpfleet.gateway.payloads import finite_float, json_object, str_list
from cpfleet.gateway.registry import protocol

PYTHON = ("python", "python3")
# the template's comparison (stripped lines, each equal as text) without its zip truncation
TEMPLATE_CHECKER = {"type": "lines"}
ANSWER_MARGIN_S = 2.0  # answered this long before the caller's request_timeout
MIN_WAIT_S = 5.0


@dataclass(frozen=True, slots=True)
class Scored:
    """What a ``code_reward`` script asks: the completion's code and the tests."""

    code: str
    tests: Any
    timeout_s: float | None = None  # the template's per-run timeout, when it is a number
    tests_text: str = ""  # the tests as the script holds them (JSON text)


def _number(node: ast.AST | None) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return finite_float(node.value)
    return None


def _run_timeout(fn: ast.FunctionDef) -> float | None:
    """The ``timeout=`` of the function's ``subprocess.run`` call: a number, or a name the
    function assigns a number to (``exec_timeout = 5``)."""
    numbers = {t.id: _number(node.value) for node in ast.walk(fn) if isinstance(node, ast.Assign)
               for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "timeout":
                    value = numbers.get(kw.value.id) if isinstance(kw.value, ast.Name) else _number(kw.value)
                    if value is not None and 0 < value < float("inf"):
                        return value
    return None


def _constant_str(node: ast.AST | None, what: str) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise NotAScoringScript(f"{what} is not a string literal")


def _runs_code_with_python(fn: ast.FunctionDef) -> bool:
    """The function runs ``[python3, -c, code]`` (its first argument) in a subprocess."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.List):
            parts = node.args[0].elts
            if (len(parts) == 3 and all(isinstance(p, ast.Constant) for p in parts[:2])
                    and [p.value for p in parts[:2] if isinstance(p, ast.Constant)] == ["python3", "-c"]
                    and isinstance(parts[2], ast.Name) and parts[2].id == fn.args.args[0].arg):
                return True
    return False


def _share_passed(fn: ast.FunctionDef) -> bool:
    """The function's value is ``passed / total`` (the share of tests passed), not a weighted sum."""
    return any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
               and isinstance(node.left, ast.Name) and node.left.id == "passed"
               and isinstance(node.right, ast.Name) and node.right.id == "total"
               for node in ast.walk(fn))


def parse_script(script: str) -> Scored:
    """The code and tests of an open-r1 ``code_reward`` script, or NotAScoringScript saying why not.
    The template is indented inside open-r1's source; the Jupyter kernel dedents it, so here too."""
    try:
        tree = ast.parse(textwrap.dedent(script))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise NotAScoringScript(f"the script does not parse as Python ({type(e).__name__})") from None
    fn: ast.FunctionDef | None = None
    code: str | None = None
    tests_text: str | None = None
    body = tree.body
    if not body or not isinstance(body[-1], ast.Expr):
        raise NotAScoringScript("the script does not end with the evaluate_code(...) call")
    for stmt in body[:-1]:
        if isinstance(stmt, ast.Import) and all(a.name in ("subprocess", "json") for a in stmt.names):
            continue
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "evaluate_code" and fn is None:
            fn = stmt
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            if name == "code_snippet" and code is None:
                code = _constant_str(stmt.value, "code_snippet")
                continue
            value = stmt.value
            if (name == "test_cases" and tests_text is None and isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Attribute) and value.func.attr == "loads"
                    and isinstance(value.func.value, ast.Name) and value.func.value.id == "json"
                    and len(value.args) == 1 and not value.keywords):
                tests_text = _constant_str(value.args[0], "test_cases' JSON")
                continue
        raise NotAScoringScript(f"line {getattr(stmt, 'lineno', '?')}: a statement the code_reward template does not have")
    call = body[-1].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "evaluate_code"
            and [a.id for a in call.args if isinstance(a, ast.Name)] == ["code_snippet", "test_cases"]
            and len(call.args) == 2 and not call.keywords):
        raise NotAScoringScript("the script does not end with evaluate_code(code_snippet, test_cases)")
    if fn is None or code is None or tests_text is None:
        raise NotAScoringScript("the script lacks evaluate_code, code_snippet or test_cases")
    if [a.arg for a in fn.args.args] != ["code", "test_cases"] or not _runs_code_with_python(fn):
        raise NotAScoringScript("evaluate_code does not run its code with python3 -c on each test")
    if not _share_passed(fn):
        raise NotAScoringScript("evaluate_code does not return the share of tests passed (passed / total)")
    try:
        tests = json.loads(tests_text)
    except (ValueError, RecursionError) as e:  # not JSON, or past CPython's digits or nesting
        raise NotAScoringScript(f"test_cases is not JSON this gateway reads ({type(e).__name__}: {str(e)[:200]})") from None
    return Scored(code=code, tests=tests, timeout_s=_run_timeout(fn), tests_text=tests_text)


def not_executed(why: str) -> dict[str, Any]:
    return {"execution": None, "text": None, "exception_str": why}


def scored(result: JobResult) -> dict[str, Any]:
    assert result.reward is not None
    text = repr(float(result.reward))
    summary = f"{result.verdict}: {result.hidden.passed}/{result.hidden.total} tests passed"
    return {
        "execution": {"results": [{"text": text, "is_main_result": True}],
                      "logs": {"stdout": [], "stderr": []}, "error": None, "execution_count": 1},
        "text": text,
        "exception_str": None,
        "cpfleet": {"verdict": str(result.verdict), "reward": result.reward, "tests": summary,
                    "observation": result.observation[-2000:]},
    }


def _languages(body: dict[str, Any], n: int) -> list[str]:
    if body.get("languages") is not None:
        return str_list(body, "languages", n, against="scripts")
    language = body.get("language", "python")
    if not isinstance(language, str):
        raise HTTPError(422, "'language' must be a string")
    return [language] * n


def _wait_s(body: dict[str, Any], default: float) -> float:
    budget = body.get("request_timeout")
    if budget is None:
        return default
    seconds = None if isinstance(budget, bool) or not isinstance(budget, int | float) else finite_float(budget)
    if seconds is None or not seconds > 0:
        raise HTTPError(422, "'request_timeout' must be a positive finite number of seconds")
    return min(default, max(MIN_WAIT_S, seconds - ANSWER_MARGIN_S))


@protocol("e2b_router")
def routes(gw: Gateway) -> Sequence[Route]:
    async def one(script: str, language: str, wait_s: float,
                  records: dict[tuple[str, float | None], asyncio.Task[dict[str, Any]]]) -> dict[str, Any]:
        from cpfleet.producer.inline import problem_from_tests

        if language.lower() not in PYTHON:
            return not_executed(f"cpfleet judges open-r1's Python code_reward scripts; this one is {language!r}")
        try:
            asked = await asyncio.to_thread(parse_script, script)
        except NotAScoringScript as e:
            return not_executed(f"not open-r1's code_reward script, so not judged: {e}")
        # the scripts of one GRPO group carry one test set: its record is built once per batch
        shared = (asked.tests_text, asked.timeout_s)
        if shared not in records:
            records[shared] = asyncio.ensure_future(
                asyncio.to_thread(problem_from_tests, asked.tests, time_limit_s=asked.timeout_s, checker=TEMPLATE_CHECKER))
        completion = fence(asked.code, "python")
        try:
            record = await asyncio.shield(records[shared])
            result = await gw.judge_record(record, completion, reward_shape="fraction", wait_s=wait_s)
        except ValueError as e:  # InlineProblemError: tests that make no problem
            return not_executed(f"the script's test_cases make no problem: {e}")
        except (Refused, ConnectionError, BrokerFull, FleetBusy, ClientClosed) as e:
            return not_executed(f"the fleet did not judge it: {e or type(e).__name__}")
        reason = permanent_error(result)
        if reason or result.infra_error or result.reward is None:
            return not_executed(f"the fleet could not judge it: {result.verdict}: {reason or result.infra_message}")
        return scored(result)

    async def execute_batch(request: Request) -> Response:
        body = json_object(await gw.body_json(request))
        scripts = str_list(body, "scripts")
        languages = _languages(body, len(scripts))
        wait_s = _wait_s(body, gw.config.wait_s)
        records: dict[tuple[str, float | None], asyncio.Task[dict[str, Any]]] = {}
        answers = await asyncio.gather(*(one(s, lang, wait_s, records)
                                         for s, lang in zip(scripts, languages, strict=True)))
        return JSONResponse(list(answers))

    return [
        Route("/execute_batch", gw.endpoint("execute_batch", execute_batch), methods=["POST"]),
    ]
