"""Piston's API (engineer-man/piston v2), so Piston clients, open-r1's ``PistonClient`` among
them, only change their endpoint (``PISTON_ENDPOINTS=http://gateway:8000/api/v2``).

- ``GET /api/v2/runtimes``: ``[{language, version, aliases, runtime?}]``, the languages the fleet
  runs, plus the two languages of open-r1's "codeforces" package (``cf_python3``, ``c++17``,
  ``runtime: "codeforces"``).
- ``POST /api/v2/execute``: ``{language, version, files: [{name?, content, encoding?}], stdin?,
  args?, compile_timeout?, run_timeout?, compile_cpu_time?, run_cpu_time?,
  compile_memory_limit?, run_memory_limit?}`` (milliseconds and bytes; absent, 0 or -1: the
  default) -> ``{language, version, run: {stdout, stderr, output, code, signal, message, status,
  cpu_time, wall_time, memory}, compile?: {...}}``.

Plain execution, as Piston's job does it: the first ``utf8`` file is the program (Piston runs
``code_files[0]``), every other file is placed beside it (``base64``/``hex`` decoded), ``stdin``
gets a trailing newline when it has none. ``status`` is Piston's: ``null`` (exited 0), ``RE``
(exited non-zero), ``SG`` (killed by a signal; a memory limit is the kernel's SIGKILL there),
``TO`` (time limit), ``OL``/``EL`` (stdout/stderr over the output cap); a clean exit whose
stdout is not UTF-8 is ``RE`` with code 1 (``runs.stdout_not_comparable``). A compiled language has
a ``compile`` stage; when it fails ``run`` repeats it (Piston's own backward-compatible answer).
Python has no compile stage in Piston: a syntax error is a run that exits 1 with the traceback.
The program runs as a fleet run job (``cpfleet.gateway.runs``: identical calls share it).

open-r1's codeforces package (``cf_scoring.py``): a body whose files are ``main.<ext>`` (the
solution), ``checker.py`` (optional), ``input.txt``, ``correct_output.txt`` and
``grader_config`` (``TIME_LIMIT`` s, ``MEMORY_LIMIT`` MB, ``INPUT_MODE``) is *judged* on the
fleet, not run: the test becomes a one-test problem (the checker as an open-r1 ``python``
checker, else cpfleet's default token comparison; the grader_config's limits) stored once per
distinct content, and the solution is judged against it by the fleet's judge. The answer is the
package's: ``compile.code`` 0, or 1 when the solution does not compile, an empty C++ one included (open-r1
gives ``no_compile_reward``); ``run.code`` 0 and ``run.stdout`` ``"1"`` exactly when the verdict is
OK, ``"0"`` for any other verdict of the program's making (wrong answer, time, memory, crash),
with the verdict on ``run.stderr``. Never a "1" the program did not earn.

Refusals: open-r1's client retries (5 times, backing off up to 10 s) every answer that is not
HTTP 200 and every connection error or read timeout (its session reads with ``sock_read=30``
s), and scores a test failed only after that. So a fleet failure (INTERNAL, a lost worker, Redis
away, no answer in time) is a 503 ``{message}``, answered before the client's 30 s read timeout;
the work stays in flight and the retry joins it. A malformed body is a 400 ``{message}`` (Piston's
shape), a body that is not ``application/json`` a 415.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import math
import re
import signal as signals
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cpfleet import __version__
from cpfleet.core import protocol as wire
from cpfleet.core.errors import InlineProblemError
from cpfleet.core.languages import fence
from cpfleet.core.results import RunOutput, RunStatus
from cpfleet.core.verdict import Verdict
from cpfleet.gateway.app import FleetFailed, Gateway, HTTPError, JSONResponse, Refused, permanent_error
from cpfleet.gateway.payloads import finite_float
from cpfleet.gateway.registry import protocol
from cpfleet.gateway.runs import RunAnswer, RunSpec, stdout_not_comparable


@dataclass(frozen=True, slots=True)
class Runtime:
    """One entry of ``/runtimes``: Piston's name and aliases, the fleet's language, and whether a
    compile stage shows in the answer (Piston's ``compiled`` runtimes)."""

    language: str
    aliases: tuple[str, ...]
    fleet: str
    compiled: bool
    package: bool = False  # open-r1's codeforces package: judged, not run


RUNTIMES = (
    Runtime("python", ("py", "py3", "python3"), "python3", False),
    Runtime("pypy3", ("pypy",), "pypy3", False),
    Runtime("c++", ("cpp", "g++"), "cpp", True),
    Runtime("c", ("gcc",), "c", True),
    Runtime("java", (), "java", True),
    Runtime("cf_python3", (), "python3", True, package=True),
    Runtime("c++17", (), "cpp", True, package=True),
)
# the fleet's release names every runtime's version: the compilers are the workers' own, and a
# requested version is not matched against it (Piston clients ask "*" or what /runtimes listed)
VERSION = __version__
DEFAULT_RUN_TIMEOUT_MS = 3000  # Piston's defaults (config.js)
DEFAULT_COMPILE_TIMEOUT_MS = 10000
MAX_RUN_TIMEOUT_MS = int(wire.MAX_RUN_TIME_LIMIT_S * 1000)
# open-r1 reads with sock_read=30 s: answer (or refuse, retryable) before that
WAIT_S = 25.0
FLEET_FAILURE_RETRIES = 2
ENCODINGS = ("utf8", "base64", "hex")
PACKAGE_FILES = ("input.txt", "correct_output.txt", "grader_config")


def _runtime(language: str) -> Runtime | None:
    for rt in RUNTIMES:
        if language == rt.language or language in rt.aliases:
            return rt
    return None


def bad(message: str, status: int = 400) -> HTTPError:
    return HTTPError(status, message)


def _decode(i: int, file: dict[str, Any]) -> tuple[str, bytes, str]:
    """(name, bytes, encoding) of ``files[i]`` as Piston's job places it."""
    name = file.get("name")
    if name is None or name == "":
        name = f"file{i}.code"
    if not isinstance(name, str):
        raise bad(f"files[{i}].name must be a string")
    encoding = file.get("encoding")
    encoding = encoding if encoding in ENCODINGS else "utf8"  # Piston reads any other as utf8
    content = file["content"]
    try:
        if encoding == "base64":
            data = base64.b64decode(content, validate=True)
        elif encoding == "hex":
            data = bytes.fromhex(content)
        else:
            data = content.encode("utf-8", "surrogatepass")
    except (ValueError, binascii.Error) as e:
        raise bad(f"files[{i}].content is not {encoding}: {e}") from None
    return name, data, encoding


def _limit_ms(body: dict[str, Any], key: str, default: float, cap: float | None) -> float:
    """A Piston constraint: absent, null, 0 or -1 is the default; anything else a number
    within [0, cap] (Piston answers 400 past its configured limit)."""
    value = body.get(key)
    if value is None or value == 0 or value == -1:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or finite_float(value) is None:
        raise bad(f"If specified, {key} must be a number")
    if value < 0:
        raise bad(f"{key} must be non-negative")
    if cap is not None and value > cap:
        raise bad(f"{key} cannot exceed the configured limit of {int(cap)}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Execution:
    runtime: Runtime
    language: str
    files: tuple[tuple[str, bytes, str], ...]
    stdin: str
    time_limit_s: float
    memory_limit_mb: int | None
    wait_s: float


def parse(body: Any) -> Execution:
    """A /execute body, checked as Piston's ``get_job`` checks it (400 ``{message}``)."""
    if not isinstance(body, dict):
        raise bad("body must be a JSON object")
    language, version, files = body.get("language"), body.get("version"), body.get("files")
    if not language or not isinstance(language, str):
        raise bad("language is required as a string")
    if not version or not isinstance(version, str):
        raise bad("version is required as a string")
    if not isinstance(files, list):
        raise bad("files is required as an array")
    for i, f in enumerate(files):
        if not isinstance(f, dict) or not isinstance(f.get("content"), str):
            raise bad(f"files[{i}].content is required as a string")
    rt = _runtime(language)
    if rt is None:
        raise bad(f"{language}-{version} runtime is unknown")
    decoded = tuple(_decode(i, f) for i, f in enumerate(files))
    if not any(enc == "utf8" for _, _, enc in decoded):
        raise bad("files must include at least one utf8 encoded file")
    args = body.get("args")
    if args not in (None, []):
        raise bad("args are not supported by this gateway: the fleet runs the program without arguments")
    stdin = body.get("stdin")
    if stdin is None:
        stdin = ""
    if not isinstance(stdin, str):
        raise bad("stdin must be a string")
    if not stdin.endswith("\n"):
        stdin += "\n"  # Piston's job adds it
    run_timeout = _limit_ms(body, "run_timeout", DEFAULT_RUN_TIMEOUT_MS, MAX_RUN_TIMEOUT_MS)
    run_cpu = _limit_ms(body, "run_cpu_time", DEFAULT_RUN_TIMEOUT_MS, MAX_RUN_TIMEOUT_MS)
    compile_timeout = _limit_ms(body, "compile_timeout", DEFAULT_COMPILE_TIMEOUT_MS, None)
    _limit_ms(body, "compile_cpu_time", DEFAULT_COMPILE_TIMEOUT_MS, None)  # checked; the fleet's own compile limits
    _limit_ms(body, "compile_memory_limit", 0, None)
    memory = _limit_ms(body, "run_memory_limit", 0, wire.MAX_RUN_MEMORY_MB * 1024 * 1024)
    memory_mb = None if memory <= 0 else max(wire.MIN_RUN_MEMORY_MB, math.ceil(memory / (1024 * 1024)))
    # Piston stops a run at the first of its wall and CPU limits; the fleet's time limit is one
    time_limit = min(run_timeout, run_cpu) / 1000.0
    wait_s = max(WAIT_S, (compile_timeout + run_timeout) / 1000.0 + 5.0)
    return Execution(rt, language, decoded, stdin, time_limit, memory_mb, wait_s)


# --- open-r1's codeforces package ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PackageTest:
    solution: str
    checker: str | None
    input: str
    output: str
    time_limit_s: float
    memory_limit_mb: int
    language: str


def _text(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise bad(f"{name} is not UTF-8 text") from None


def package_test(req: Execution) -> PackageTest | None:
    """The codeforces package's test when the files have its layout (``main.*``, the test files,
    ``grader_config``), else None (a plain run)."""
    by_name = {name: data for name, data, _ in req.files}
    if "grader_config" not in by_name:
        return None
    missing = [n for n in PACKAGE_FILES if n not in by_name]
    mains = [name for name, _, _ in req.files if re.fullmatch(r"main\.[A-Za-z0-9+]+", name)]
    if missing or len(mains) != 1:
        raise bad("a codeforces-package request needs one main.<ext>, input.txt, correct_output.txt and "
                  f"grader_config (missing: {', '.join(missing) or 'main.<ext>'})")
    config: dict[str, str] = {}
    for line in _text("grader_config", by_name["grader_config"]).splitlines():
        key, sep, value = line.partition("=")
        if sep:
            config[key.strip()] = value.strip()
    try:
        time_limit = float(config.get("TIME_LIMIT", ""))
        memory = float(config.get("MEMORY_LIMIT", ""))
    except ValueError:
        raise bad("grader_config needs numeric TIME_LIMIT (seconds) and MEMORY_LIMIT (MB)") from None
    if not (math.isfinite(time_limit) and 0 < time_limit <= wire.MAX_RUN_TIME_LIMIT_S):
        raise bad(f"grader_config TIME_LIMIT must be in (0, {wire.MAX_RUN_TIME_LIMIT_S:g}] seconds")
    if not (math.isfinite(memory) and wire.MIN_RUN_MEMORY_MB <= memory <= wire.MAX_RUN_MEMORY_MB):
        raise bad(f"grader_config MEMORY_LIMIT must be in [{wire.MIN_RUN_MEMORY_MB}, {wire.MAX_RUN_MEMORY_MB}] MB")
    mode = config.get("INPUT_MODE", "stdio") or "stdio"
    if mode != "stdio":
        # the solution would read input.txt and write output.txt: not judged here, never guessed
        raise bad(f"grader_config INPUT_MODE {mode!r} is not supported here (only stdio)")
    checker = by_name.get("checker.py")
    return PackageTest(
        solution=_text(mains[0], by_name[mains[0]]),
        checker=None if checker is None else _text("checker.py", checker),
        input=_text("input.txt", by_name["input.txt"]),
        output=_text("correct_output.txt", by_name["correct_output.txt"]),
        time_limit_s=time_limit,
        memory_limit_mb=math.ceil(memory),
        language=req.runtime.fleet,
    )


def package_problem(test: PackageTest) -> dict[str, Any]:
    """The one-test problem record of a codeforces-package request (InlineProblemError: 400)."""
    from cpfleet.producer.inline import problem_from_tests

    checker = None if test.checker is None else {"type": "python", "source": test.checker}
    # the project's own shape: no dataset's comparison is implied, so without checker.py the
    # default ``tokens`` judges (TACO's ``{"inputs", "outputs"}`` would bring ``real_tokens``)
    return problem_from_tests(
        {"hidden_tests": [{"input": test.input, "output": test.output}]},
        time_limit_s=test.time_limit_s, memory_limit_mb=test.memory_limit_mb, checker=checker,
        languages=[test.language], num_public=0, id_prefix="inline/piston-cf/",
    )


def _stage(*, stdout: str = "", stderr: str = "", code: int | None = 0, signal: str | None = None,
           message: str | None = None, status: str | None = None, cpu_ms: float | None = None,
           wall_ms: float | None = None, memory: int | None = None) -> dict[str, Any]:
    return {"stdout": stdout, "stderr": stderr, "output": stdout + stderr, "code": code, "signal": signal,
            "message": message, "status": status, "cpu_time": None if cpu_ms is None else round(cpu_ms),
            "wall_time": None if wall_ms is None else round(wall_ms), "memory": memory}


def _signal_name(number: int | None) -> str | None:
    if not number:
        return None
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def run_stage(run: RunOutput) -> dict[str, Any]:
    """A fleet run as Piston's ``run`` stage (isolate's status letters)."""
    measures = {"cpu_ms": run.cpu_ms, "wall_ms": run.wall_ms, "memory": run.memory_kb * 1024}
    out = {"stdout": run.stdout, "stderr": run.stderr}
    if run.status == RunStatus.TIME_LIMIT:
        return _stage(**out, code=None, signal="SIGKILL", message="Time limit exceeded", status="TO", **measures)
    if run.status == RunStatus.OUTPUT_LIMIT or run.stdout_truncated or run.stderr_truncated:
        stream = "stderr" if run.limit == "stderr" or (run.stderr_truncated and not run.stdout_truncated) else "stdout"
        return _stage(**out, code=None, signal="SIGKILL", message=f"{stream} length exceeded",
                      status="EL" if stream == "stderr" else "OL", **measures)
    if run.status == RunStatus.MEMORY_LIMIT:
        return _stage(**out, code=None, signal="SIGKILL", message="Memory limit exceeded (killed by signal 9)",
                      status="SG", **measures)
    if run.status == RunStatus.FINISHED and run.exit_code is not None:
        if run.exit_code == 0 and not run.stdout_utf8:
            # a client compares this text with the expected output: U+FFFD read from bytes that
            # were not UTF-8 must never pass, so the clean exit is a failed run (as /run_code's)
            return _stage(**out, code=1, message=stdout_not_comparable(run), status="RE", **measures)
        if run.exit_code == 0:
            return _stage(**out, code=0, **measures)
        return _stage(**out, code=run.exit_code, message=f"Exited with error status {run.exit_code}", status="RE",
                      **measures)
    # killed by a signal of its own making (or exited in a way the sandbox names in ``detail``)
    name = _signal_name(run.signal)
    message = f"Caught fatal signal {run.signal}" if run.signal else (run.detail or str(run.status))
    return _stage(**out, code=None, signal=name, message=message, status="SG" if name else "RE", **measures)


def execute_answer(rt: Runtime, answer: RunAnswer) -> dict[str, Any]:
    job, run = answer.job, answer.run
    comp = job.compile
    reply: dict[str, Any] = {"language": rt.language, "version": VERSION}
    if not rt.compiled:
        if run is None:  # Python's syntax check failed: Piston runs it and it exits 1
            stderr = comp.stderr if comp is not None else str(job.status)
            reply["run"] = _stage(stderr=stderr, code=1, message="Exited with error status 1", status="RE",
                                  wall_ms=comp.wall_ms if comp is not None else 0.0)
        else:
            reply["run"] = run_stage(run)
        return reply
    if (comp is not None and not comp.ok) or run is None:
        stderr = comp.stderr if comp is not None else f"{job.status}: nothing ran"
        failed = _stage(stdout=comp.stdout if comp is not None else "", stderr=stderr, code=1,
                        message="Exited with error status 1", status="RE",
                        wall_ms=comp.wall_ms if comp is not None else 0.0)
        reply["compile"] = failed
        reply["run"] = failed  # Piston: "backward compatibility when the run stage is not started"
        return reply
    reply["compile"] = _stage(stdout=comp.stdout if comp else "", stderr=comp.stderr if comp else "",
                              wall_ms=comp.wall_ms if comp else 0.0)
    reply["run"] = run_stage(run)
    return reply


def _not_overload(text: str) -> str:
    """open-r1 retries an answer whose run.stderr holds "Resource temporarily unavailable" as an
    overloaded Piston; in a judged answer that text is the program's own (a fork it was refused),
    a verdict already given, so it is written so that the client does not retry it."""
    return text.replace("Resource temporarily unavailable", "resource temporarily unavailable")


def refused(message: str) -> Response:
    """What Piston clients retry: open-r1's retries every status but 200."""
    return JSONResponse({"message": message}, status_code=503, headers={"Retry-After": "1"})


@protocol("piston")
def routes(gw: Gateway) -> Sequence[Route]:
    async def plain(req: Execution) -> dict[str, Any]:
        started = time.monotonic()
        entry = next(i for i, (_, _, enc) in enumerate(req.files) if enc == "utf8")
        code = req.files[entry][1].decode("utf-8", "surrogatepass")
        beside = tuple((name, data) for i, (name, data, _) in enumerate(req.files) if i != entry)
        if len(beside) > wire.MAX_RUN_FILES:  # first: the names' checks cost time per name, in the event loop
            raise bad(f"at most {wire.MAX_RUN_FILES} files besides the program")
        try:
            for name, _ in beside:
                wire.check_run_file_name(name)
            wire.check_run_file_layout(name for name, _ in beside)
        except ValueError as e:
            raise bad(f"files: {e}") from None
        cap = min(gw.config.run_output_bytes, wire.MAX_RUN_OUTPUT_CAP)
        spec = RunSpec(code=code, language=req.runtime.fleet, time_limit_s=req.time_limit_s,
                       memory_limit_mb=req.memory_limit_mb, output_cap=cap, files=beside)
        stdin = req.stdin.encode("utf-8", "surrogatepass")
        for attempt in range(FLEET_FAILURE_RETRIES + 1):
            try:
                answer = await gw.runs.run(spec, stdin, max(0.0, req.wait_s - (time.monotonic() - started)))
                break
            except FleetFailed:
                if attempt == FLEET_FAILURE_RETRIES:
                    raise  # a 503 the client retries: never an output
            except ValueError as e:  # the fleet's client refused the run itself (a limit, a name)
                raise bad(str(e)) from None
        return execute_answer(req.runtime, answer)

    async def judged(req: Execution, test: PackageTest) -> dict[str, Any]:
        from cpfleet.producer.inline_registry import record_key

        record = package_problem(test)
        # stored once per distinct test by the fleet client's registry, which remembers (bounded)
        # what it stored: a completion's later tests and other completions cost no round trip
        registry = gw.fleet.inline_registry
        key = record_key(record)
        pid = registry.known(key) or await asyncio.to_thread(registry.record_id, record)
        python = test.language in ("python3", "pypy3")
        completion = fence(test.solution, "python" if python else test.language)
        result = await gw.judge(pid, completion, reward_shape="all_or_nothing",
                                wait_s=WAIT_S)
        reason = permanent_error(result)
        if reason or result.infra_error:
            registry.forget(key)  # an unknown problem: store it again on the retry
            raise Refused(f"the fleet could not judge this test: {result.verdict}: {reason or result.infra_message}")
        reply: dict[str, Any] = {"language": req.runtime.language, "version": VERSION}
        # a solution of blanks (open-r1 sends its last block unstripped) is no code to the judge;
        # the package compiles it, and an empty C/C++/Java source fails to build, its
        # no_compile_reward, while an empty Python program runs and prints nothing: a failed test
        if result.verdict == Verdict.COMPILE_ERROR or (result.verdict == Verdict.NO_CODE and not python):
            failed = _stage(stderr=_not_overload(result.observation), code=1, message="Exited with error status 1", status="RE")
            reply["compile"] = failed
            reply["run"] = failed
            return reply
        reply["compile"] = _stage()
        passed = result.verdict == Verdict.OK and result.reward == 1.0
        reply["run"] = _stage(stdout="1\n" if passed else "0\n",
                              stderr=_not_overload(f"{result.verdict}\n{result.observation}".strip()),
                              cpu_ms=result.timings.cpu_ms, wall_ms=result.timings.executed_ms)
        return reply

    async def execute(request: Request) -> Response:
        if not request.headers.get("content-type", "").startswith("application/json"):
            raise bad("requests must be of type application/json", 415)
        req = parse(await gw.body_json(request))
        test = package_test(req)  # None: not the package's layout, a plain run
        try:
            reply = await (judged(req, test) if test is not None else plain(req))
        except InlineProblemError as e:
            raise bad(f"the test makes no problem: {e}") from None
        return JSONResponse(reply)

    async def runtimes(request: Request) -> Response:
        listed = []
        for rt in RUNTIMES:
            entry: dict[str, Any] = {"language": rt.language, "version": VERSION, "aliases": list(rt.aliases)}
            if rt.package:
                entry["runtime"] = "codeforces"
            listed.append(entry)
        return JSONResponse(listed)

    def piston_errors(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """Piston's error shape ``{message}`` for the answers the gateway gives as ``{error}``."""

        async def handler(request: Request) -> Response:
            try:
                return await fn(request)
            except HTTPError as e:
                return JSONResponse({"message": e.message}, status_code=e.status, headers=e.headers)

        return handler

    return [
        Route("/api/v2/runtimes", gw.endpoint("piston_runtimes", piston_errors(runtimes)), methods=["GET"]),
        Route("/api/v2/execute", gw.endpoint("piston_execute", piston_errors(execute), refuse=refused),
              methods=["POST"]),
    ]
