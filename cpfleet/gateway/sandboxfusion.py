"""SandboxFusion's API, so verl's ``sandbox_fusion`` reward path and the ``sandbox-fusion`` SDK
only change their URL.

- ``POST /run_code``: ``{code, language, stdin?, compile_timeout?, run_timeout?,
  memory_limit_MB?, files?: {path: base64}, fetch_files?: [path]}`` -> ``{status, message,
  compile_result, run_result, executor_pod_name, files}``. The program runs as a fleet run job
  (``cpfleet.gateway.runs``: calls for the same program are coalesced into one job). Files are
  placed read-only in the run's directory; at most ``protocol.MAX_FETCH_FILES`` files of
  ``protocol.FETCH_FILE_BYTES`` each come back (a longer one is left out and named in
  ``message``: a prefix would be a wrong file).
- ``POST /submit``: a completion judged on the fleet: ``id`` a problem id, or
  ``config.provided_data.test`` CommonOJ tests (``[{input: {stdin}, output: {stdout}}]``).
  The tests stop at the first failure unless ``config.extra.run_all_cases`` is true: then every
  provided test runs and is listed with its own result (a stored problem's hidden tests report
  only a count, so with an ``id`` that is a 422). Provided tests are compared as SandboxFusion
  compares them (checker ``sandboxfusion``: stripped lines, each equal case-insensitively or as
  one number within relative 1e-5) under ``config.run_timeout`` (seconds; absent: the project's
  default); ``config.language``, when given, is the only language the completion is judged in; a stored problem by its own checker and limits (a ``run_timeout`` with an ``id`` is
  a 422, never ignored). ``config.custom_extract_logic`` (caller Python that picks the code) is a
  422: it is not run here, and judging other code than the caller chose is never done in silence.

Refusals: verl's ``call_sandbox_api`` retries only HTTP 504 (3 attempts, 1 s then 2 s apart)
and gives up at ``compile_timeout + run_timeout + 10`` seconds, so ``/run_code`` answers a 504
before that deadline when the fleet has not run the program yet; the run stays queued and the
retry joins it. Any other failure (a connection error, a 5xx, a ``SandboxError``) verl scores as
a failed test, so the fleet's own failures are 504s too. The SDK retries every failure, 5
attempts, then raises.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cpfleet.core import protocol as wire
from cpfleet.core.results import JobResult, RunStatus
from cpfleet.core.verdict import Verdict
from cpfleet.gateway.app import Gateway, HTTPError, JSONResponse, raise_on_failure
from cpfleet.gateway.payloads import json_object, number, utf8_text
from cpfleet.gateway.registry import protocol
from cpfleet.gateway.runs import RunAnswer, RunSpec, stdout_not_comparable

# SandboxFusion language names -> cpfleet's (the languages the fleet runs)
LANGUAGES = {"python": "python3", "python3": "python3", "pypy3": "pypy3", "cpp": "cpp", "c": "c", "java": "java"}
MAX_RUN_TIMEOUT_S = 60.0
# verl's requests time out at compile_timeout + run_timeout + API_TIMEOUT (10 s): answer before
CLIENT_SLACK_S = 10.0
ANSWER_MARGIN_S = 3.0
MIN_WAIT_S = 5.0


def gateway_timeout(message: str) -> Response:
    """The refusal verl retries: 504, with a SandboxFusion-shaped body for whoever reads it."""
    return JSONResponse(sf_reply("SandboxError", message, None), status_code=504)


def sf_reply(status: str, message: str, run: dict[str, Any] | None, compile_: dict[str, Any] | None = None,
             files: dict[str, str] | None = None, worker: str | None = None) -> dict[str, Any]:
    """SandboxFusion's response; ``executor_pod_name`` names the fleet worker that ran it."""
    return {"status": status, "message": message, "compile_result": compile_, "run_result": run,
            "executor_pod_name": worker or None, "files": files or {}}


def run_spec(body: dict[str, Any], output_cap: int) -> tuple[RunSpec, bytes, float]:
    """The run a /run_code body asks for, its stdin and how long its client waits."""
    code = body.get("code")
    if not isinstance(code, str):
        raise HTTPError(422, "'code' must be a string")
    language = body.get("language", "python")
    if not isinstance(language, str) or language not in LANGUAGES:
        raise HTTPError(400, f"language {language!r} is not supported here (supported: {', '.join(LANGUAGES)})")
    stdin = body.get("stdin")
    if stdin is None:
        stdin = ""
    if not isinstance(stdin, str):
        raise HTTPError(422, "'stdin' must be a string or null")
    run_timeout = number(body, "run_timeout", 10.0)
    compile_timeout = number(body, "compile_timeout", 10.0)
    memory = int(number(body, "memory_limit_MB", -1))
    if run_timeout <= 0 or compile_timeout < 0:
        raise HTTPError(422, "'run_timeout' must be > 0 and 'compile_timeout' >= 0")
    files = body.get("files") or {}
    if not isinstance(files, dict):
        raise HTTPError(422, "'files' must be an object {path: base64 content}")
    placed: list[tuple[str, bytes]] = []
    for name, content in sorted(files.items()):
        try:
            wire.check_run_file_name(name)
            data = base64.b64decode(content, validate=True) if isinstance(content, str) else None
        except (ValueError, binascii.Error) as e:
            raise HTTPError(422, f"files[{name!r}]: {e}") from None
        if data is None:
            raise HTTPError(422, f"files[{name!r}] must be base64 text")
        placed.append((name, data))
    if len(placed) > wire.MAX_RUN_FILES:
        raise HTTPError(422, f"at most {wire.MAX_RUN_FILES} files")
    try:
        wire.check_run_file_layout(name for name, _ in placed)
    except ValueError as e:
        raise HTTPError(422, f"files: {e}") from None
    fetch = body.get("fetch_files") or []
    if not isinstance(fetch, list) or not all(isinstance(f, str) for f in fetch):
        raise HTTPError(422, "'fetch_files' must be a list of paths")
    if len(fetch) > wire.MAX_FETCH_FILES:
        raise HTTPError(422, f"at most {wire.MAX_FETCH_FILES} fetch_files (each read back up to {wire.FETCH_FILE_BYTES} bytes)")
    for name in fetch:
        try:
            wire.check_run_file_name(name)
        except ValueError as e:
            raise HTTPError(422, f"fetch_files: {e}") from None
    spec = RunSpec(
        code=code,
        language=LANGUAGES[language],
        time_limit_s=min(run_timeout, MAX_RUN_TIMEOUT_S),
        memory_limit_mb=None if memory <= 0 else max(wire.MIN_RUN_MEMORY_MB, min(memory, wire.MAX_RUN_MEMORY_MB)),
        output_cap=output_cap,
        files=tuple(placed),
        fetch_files=tuple(fetch),
    )
    wait_s = max(MIN_WAIT_S, compile_timeout + run_timeout + CLIENT_SLACK_S - ANSWER_MARGIN_S)
    return spec, stdin.encode("utf-8", "surrogatepass"), wait_s


def _seconds(ms: float) -> float:
    return round(ms / 1000.0, 6)


def sf_answer(answer: RunAnswer, fetch_files: Sequence[str]) -> dict[str, Any]:
    """SandboxFusion's response for one run (verl reads status, compile_result, run_result)."""
    job, run = answer.job, answer.run
    comp = job.compile
    compile_result = None
    python = job.language in ("python3", "pypy3") or not job.language
    if comp is not None and not (python and not comp.ok):
        compile_result = {"status": "Finished", "execution_time": _seconds(comp.wall_ms),
                          "return_code": 0 if comp.ok else 1, "stdout": comp.stdout, "stderr": comp.stderr}
    if run is None:
        if job.status == RunStatus.COMPILE_ERROR and comp is not None and python:
            # SandboxFusion has no compile step for Python: a syntax error is a run that exits 1
            # with the traceback on stderr, as ``python3 file.py`` would
            syntax = {"status": "Finished", "execution_time": _seconds(comp.wall_ms), "return_code": 1,
                      "stdout": "", "stderr": comp.stderr}
            return sf_reply("Failed", "", syntax, worker=job.worker)
        if job.status == RunStatus.COMPILE_ERROR:
            if compile_result is None:
                compile_result = {"status": "Finished", "execution_time": 0.0, "return_code": 1, "stdout": "", "stderr": ""}
            return sf_reply("Failed", "compile error", None, compile_result, worker=job.worker)
        return sf_reply("Failed", f"{job.status}: nothing ran", None, compile_result, worker=job.worker)
    message = ""
    if run.status == RunStatus.TIME_LIMIT:
        run_result: dict[str, Any] = {"status": "TimeLimitExceeded", "execution_time": _seconds(run.wall_ms),
                                      "return_code": None, "stdout": run.stdout, "stderr": run.stderr}
        return sf_reply("Failed", "time limit exceeded", run_result, compile_result, worker=job.worker)
    code = run.exit_code
    if run.status != RunStatus.FINISHED or code is None:
        code = code if code not in (None, 0) else (-run.signal if run.signal else 1)  # never a clean exit
        message = f"{run.status}: {run.detail}".rstrip(": ")
    elif code == 0 and (why := stdout_not_comparable(run)):
        # verl compares this text with the expected output: a prefix, or U+FFFD read from bytes
        # that were not UTF-8, must never pass, so the clean exit is a failed run
        code = 1
        message = why
    run_result = {"status": "Finished", "execution_time": _seconds(run.wall_ms), "return_code": code,
                  "stdout": run.stdout, "stderr": run.stderr}
    files: dict[str, str] = {}
    left_out = []
    for name in fetch_files:
        if name in run.files and name not in run.files_truncated:
            files[name] = base64.b64encode(run.files[name]).decode()
        elif name in run.files_truncated:
            left_out.append(name)
    if left_out:
        note = f"fetch_files over {wire.FETCH_FILE_BYTES} bytes left out: {', '.join(left_out)}"
        message = f"{message}; {note}" if message else note
    ok = run.status == RunStatus.FINISHED and code == 0
    return sf_reply("Success" if ok else "Failed", message, run_result, compile_result, files, job.worker)


def common_oj_tests(provided: Any) -> dict[str, list[str]]:
    """SandboxFusion CommonOJ ``provided_data``: ``test`` is [{input: {stdin}, output: {stdout}}]
    (or its JSON text); returned as ``{"inputs", "outputs"}`` inline tests."""
    if not isinstance(provided, dict):
        raise HTTPError(422, "config.provided_data must be an object with 'test'")
    tests = provided.get("test")
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except (ValueError, RecursionError) as e:  # not JSON, or past CPython's digits or nesting
            raise HTTPError(422, f"config.provided_data.test is not JSON this gateway reads: "
                                 f"{type(e).__name__}: {str(e)[:200]}") from None
    if not isinstance(tests, list) or not tests:
        raise HTTPError(422, "config.provided_data.test must be a non-empty list")
    inputs, outputs = [], []
    for i, t in enumerate(tests):
        try:
            stdin, stdout = t["input"]["stdin"], t["output"]["stdout"]
        except (KeyError, TypeError):
            raise HTTPError(422, f"provided_data.test[{i}] must be {{input: {{stdin}}, output: {{stdout}}}}") from None
        if not isinstance(stdin, str) or not isinstance(stdout, str):
            raise HTTPError(422, f"provided_data.test[{i}]: stdin and stdout must be strings")
        inputs.append(stdin)
        outputs.append(stdout)
    return {"inputs": inputs, "outputs": outputs}


def run_all_cases(config: dict[str, Any]) -> bool:
    """SandboxFusion's ``config.extra.run_all_cases`` (the SDK's TestConfig has no field of its
    own for it): False, its default, stops at the first failed test; True runs every test and
    lists each one's result, so a caller can score the share that passed."""
    extra = config.get("extra")
    if extra is None:
        return False
    if not isinstance(extra, dict):
        raise HTTPError(422, "'config.extra' must be an object")
    value = extra.get("run_all_cases", False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise HTTPError(422, "'config.extra.run_all_cases' must be true or false")
    return value


def config_run_timeout(config: dict[str, Any]) -> float | None:
    """SandboxFusion's ``config.run_timeout`` (the SDK's ``TestConfig.run_timeout``): the caller's
    per-test time limit in seconds, None when not given (the project's default applies). The
    fleet applies it as CPU time, as every cpfleet time limit; past the problem bound (600 s) the
    tests make no problem, a 422."""
    if config.get("run_timeout") is None:
        return None
    seconds = number(config, "run_timeout", 0.0)
    if not seconds > 0:
        raise HTTPError(422, f"'config.run_timeout' must be a positive number of seconds, got {config['run_timeout']!r}")
    return seconds


def config_language(config: dict[str, Any]) -> str | None:
    """The fleet language of SandboxFusion's ``config.language`` (the SDK's
    ``TestConfig.language``): the language the caller asks the completion in, whose code
    SandboxFusion extracts and runs, so a block in another language earns nothing. None when
    not given (the problem's languages and the completion's fence tag decide). A language the
    fleet does not run is a 422."""
    language = config.get("language")
    if language is None:
        return None
    if not isinstance(language, str) or language not in LANGUAGES:
        raise HTTPError(422, f"config.language {language!r} is not supported here (supported: {', '.join(LANGUAGES)})")
    return LANGUAGES[language]


def every_test(tests: dict[str, list[str]]) -> dict[str, Any]:
    """CommonOJ tests as a problem whose public tests are all of them: judged in public mode,
    every test runs and reports its own verdict (hidden tests report only a count)."""
    pairs = [{"input": i, "output": o} for i, o in zip(tests["inputs"], tests["outputs"], strict=True)]
    return {"public_tests": pairs, "hidden_tests": pairs}


# SandboxFusion's own comparison of a CommonOJ test's output (core/checkers/sandboxfusion.py)
COMMON_OJ_CHECKER = {"type": "sandboxfusion"}


def common_oj_record(tests: dict[str, Any], time_limit_s: float | None = None) -> dict[str, Any]:
    """The problem record of CommonOJ tests, judged by SandboxFusion's comparison under the
    caller's ``config.run_timeout`` (None: the project's default time limit)."""
    from cpfleet.producer.inline import problem_from_tests

    return problem_from_tests(tests, checker=COMMON_OJ_CHECKER, time_limit_s=time_limit_s)


def _entry(passed: bool, verdict: str, ran: bool = True) -> dict[str, Any]:
    return {
        "passed": passed,
        "exec_info": {
            "status": "Success" if passed else "Failed",
            "message": verdict if ran else "not run: the job stopped at an earlier test's limit",
            "compile_result": None,
            "run_result": None,
            "executor_pod_name": None,
            "files": {},
        },
        "test_info": {"verdict": verdict if ran else None},
    }


def submit_tests(result: JobResult, public_first: bool = False) -> list[dict[str, Any]]:
    """SandboxFusion's per-test list, for the tests that decide acceptance: the hidden tests in
    run order (judged all-or-nothing: those before the first failure passed, then the failure,
    then the tests not run), or the public tests when the problem has no hidden ones.
    ``public_first``: the problem's public test is its first hidden test (provided CommonOJ
    tests), so when the job stopped there, before any hidden test ran, that test is the one
    that failed, with its verdict, not one "not run"."""
    h = result.hidden
    if wire.rewarded_tests(result.mode) != "hidden" or not h.total:
        return all_tests(result)
    stopped_at_public = public_first and h.run == 0 and result.verdict != Verdict.OK
    out = []
    for i in range(h.total):
        if i < h.passed:
            out.append(_entry(True, "OK"))
        elif i == h.passed and h.run > h.passed:
            out.append(_entry(False, str(h.first_failure or "WRONG_ANSWER")))
        elif i == 0 and stopped_at_public:
            out.append(_entry(False, str(result.verdict)))
        else:
            entry = _entry(False, "NOT_RUN", ran=False)
            entry["exec_info"]["message"] = "not run: an earlier test failed"
            out.append(entry)
    return out


def all_tests(result: JobResult) -> list[dict[str, Any]]:
    """Every public test's own result, in order (``run_all_cases``); the tests after a stop the
    judge's per-job budget made (the first time, memory or output limit ends a job) are listed
    as not run, and failed."""
    p = result.public
    out = [_entry(str(t.verdict) == "OK", str(t.verdict)) for t in p.tests]
    out += [_entry(False, "NOT_RUN", ran=False) for _ in range(p.total - len(p.tests))]
    return out


@protocol("sandboxfusion")
def routes(gw: Gateway) -> Sequence[Route]:
    async def run_code(request: Request) -> Response:
        body = json_object(await gw.body_json(request))
        spec, stdin, wait_s = run_spec(body, min(gw.config.run_output_bytes, wire.MAX_RUN_OUTPUT_CAP))
        try:
            answer = await gw.runs.run(spec, stdin, wait_s)
        except ValueError as e:  # the fleet's client refused the run itself (a limit, a file name)
            raise HTTPError(422, str(e)) from None
        return JSONResponse(sf_answer(answer, spec.fetch_files))

    async def submit(request: Request) -> Response:
        from cpfleet.sandbox.extract import extract_code

        body = json_object(await gw.body_json(request))
        completion = body.get("completion")
        if not isinstance(completion, str):
            raise HTTPError(422, "'completion' must be a string")
        config_ = body.get("config") or {}
        if not isinstance(config_, dict):
            raise HTTPError(422, "'config' must be an object")
        if config_.get("custom_extract_logic") not in (None, ""):
            # SandboxFusion runs this caller's Python to pick the code out of the completion; judged
            # with cpfleet's own extraction instead, the reward would be for other code than asked
            raise HTTPError(422, "config.custom_extract_logic (Python the server runs to pick the code) is not "
                                 "run here: the code is extracted by cpfleet's rules (the first fenced block in a "
                                 "language the problem allows); extract it yourself and send it fenced in 'completion'")
        every = run_all_cases(config_)
        time_limit = config_run_timeout(config_)
        language = config_language(config_)
        raw_id = body.get("id")
        if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, str | int)):
            # SandboxFusion's id is a string or an integer; it is echoed back, and any other JSON
            # (an object nested nearly as deep as the parser allows) would fail the answer's render
            raise HTTPError(422, f"'id' must be a string or an integer, got {type(raw_id).__name__}")
        provided = config_.get("provided_data")
        record: dict[str, Any] | None = None
        problem = ""
        if provided:
            tests = common_oj_tests(provided)
            try:
                record = await asyncio.to_thread(common_oj_record, every_test(tests) if every else tests, time_limit)
            except ValueError as e:  # InlineProblemError: tests that make no problem
                raise HTTPError(422, str(e)) from None
        elif body.get("id") not in (None, ""):
            problem = utf8_text(str(body["id"]), "id")
            if every:
                raise HTTPError(422, "config.extra.run_all_cases lists each test's result, which a stored problem's "
                                     "hidden tests do not report (only how many passed): send the tests in "
                                     "config.provided_data, or leave run_all_cases false")
            if time_limit is not None:
                # judged under the stored problem's own limit, a program slower than the caller
                # allows would be accepted: refused, never ignored in silence
                raise HTTPError(422, "config.run_timeout cannot apply to a stored problem, which is judged under "
                                     "its own time limit: send the tests in config.provided_data, or leave "
                                     "run_timeout out")
        else:
            raise HTTPError(422, "'id' (a problem id) or config.provided_data (tests) is required")
        shape: dict[str, Any] = {"reward_shape": "fraction", "mode": "public"} if every else {"reward_shape": "all_or_nothing"}
        shape["language"] = language
        try:
            if record is not None:
                result = await gw.judge_record(record, completion, **shape)
            else:
                result = await gw.judge(problem, completion, **shape)
        except ValueError as e:
            raise HTTPError(422, str(e)) from None
        raise_on_failure([result])
        code = extract_code(completion)
        return JSONResponse(
            {
                "id": body.get("id", ""),
                "accepted": result.reward == 1.0 and result.verdict == "OK",
                "extracted_code": code or "",
                "extracted_type": "fenced" if code else "empty",
                "tests": all_tests(result) if every else submit_tests(result, public_first=record is not None),
                "extra": {"verdict": str(result.verdict), "reward": result.reward},
            }
        )

    return [
        Route("/run_code", gw.endpoint("run_code", run_code, refuse=gateway_timeout), methods=["POST"]),
        Route("/submit", gw.endpoint("submit", submit), methods=["POST"]),
    ]
