"""``cpfleet run``: run a program on given inputs in the fleet's sandbox, nothing judged.

One program::

    cpfleet run solution.cpp --stdin 1.in --stdin 2.in      # language from the extension
    echo 21 | cpfleet run double.py --stdin -               # stdin from this process's stdin

prints each run's stdout to stdout and its stderr to stderr (clipped to ``--output-cap``,
default 1 MiB), a status line per run on stderr, and exits with the program's exit code when
there is one run (else 0 when every run exited 0, 1 otherwise; 3 when the fleet or sandbox
failed: INTERNAL). ``--json`` prints the whole ``RunJobResult`` as one JSON object instead, and
then, as ``--batch``, exits 0 whatever the programs did (their statuses are in the JSON), 3 when
the fleet or sandbox failed for a job.

A batch, JSONL in and out::

    cpfleet run --batch runs.jsonl > results.jsonl

each line a ``RunRequest`` as a JSON object (``code`` or ``completion``, ``language``, ``stdin``
a string or a list of strings, ``files`` {name: text or {"b64": ...}}, ``fetch_files``,
``time_limit_s``, ``memory_limit_mb``, ``output_cap``, ``job_id``; the job id defaults to the
line's 0-based index); one ``RunJobResult`` JSON object per line goes out in input order.
Fetched file contents are base64 strings in JSON output.

Through the fleet (``--redis``, ``$CPFLEET_REDIS_URL``) by default; ``--local`` runs in a sandbox
of this process instead (no Redis, as ``cpfleet judge``), with the same code path a worker uses.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cpfleet.argtypes import positive_float, queue_name, run_memory_mb, run_output_cap, run_time_limit
from cpfleet.core import defaults, protocol
from cpfleet.core.errors import ProtocolError
from cpfleet.core.languages import LANGUAGES, by_extension
from cpfleet.core.results import RunJobResult, RunStatus

CLI_OUTPUT_CAP = 1024 * 1024  # a person at a terminal wants the output, not a 4 KiB preview


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="FILE", nargs="?", help="the program (or a completion with --completion)")
    parser.add_argument("--language", "-l", help=f"{', '.join(LANGUAGES)} (default: from FILE's extension)")
    parser.add_argument("--completion", action="store_true",
                        help="FILE is model output: run its first fenced code block, as judging would")
    parser.add_argument("--stdin", "-i", action="append", default=[], metavar="PATH",
                        help="an input file (- for this process's stdin); repeat for several runs (default: one empty input)")
    parser.add_argument("--file", action="append", default=[], metavar="NAME=PATH",
                        help="place PATH's content as NAME (read-only) in each run's working directory")
    parser.add_argument("--fetch", action="append", default=[], metavar="NAME",
                        help=f"read NAME back after each run (at most {protocol.MAX_FETCH_FILES}, "
                             f"{protocol.FETCH_FILE_BYTES // 1024} KiB each)")
    parser.add_argument("--time-limit", type=run_time_limit, metavar="S",
                        help=f"CPU seconds per run (default {protocol.DEFAULT_RUN_TIME_LIMIT_S:g})")
    parser.add_argument("--memory-mb", type=run_memory_mb, metavar="MB",
                        help=f"memory limit per run (default {protocol.DEFAULT_RUN_MEMORY_MB})")
    parser.add_argument("--output-cap", type=run_output_cap, metavar="BYTES",
                        help=f"bytes of stdout and of stderr shown per run (default {CLI_OUTPUT_CAP} here, "
                             f"{protocol.DEFAULT_RUN_OUTPUT_CAP} in --batch)")
    parser.add_argument("--batch", metavar="JSONL", help="run many requests: JSONL of RunRequest objects (- for stdin; default: run the one FILE)")
    parser.add_argument("--json", action="store_true", help="print the RunJobResult as JSON")
    parser.add_argument("--local", action="store_true", help="run in a sandbox of this process, without Redis")
    parser.add_argument("--redis", metavar="URL", help="the fleet's " + defaults.REDIS_URL_HELP)
    parser.add_argument("--queue", type=queue_name, default=protocol.DEFAULT_QUEUE, help="queue to publish to (default: cpfleet)")
    parser.add_argument("--timeout", type=positive_float, default=900.0, help="seconds per job before an INTERNAL result")


def run(args: argparse.Namespace) -> int:
    conflict = _batch_conflict(args)
    if conflict:  # else ignored in silence: the user thinks FILE (or the option) was run
        print(f"cpfleet run: {conflict}", file=sys.stderr)
        return 2
    try:
        requests = _batch(args) if args.batch else [_single(args)]
    except (OSError, ValueError) as exc:
        print(f"cpfleet run: {_file_error(exc)}", file=sys.stderr)
        return 2
    try:
        results = _run_local(requests) if args.local else _run_fleet(args, requests)
    except (ValueError, TypeError) as exc:  # a request the fleet cannot take: nothing was run
        print(f"cpfleet run: {exc}", file=sys.stderr)
        return 2
    if results is None:
        return 3
    if args.batch or args.json:
        for r in results:
            sys.stdout.write(json.dumps(jsonable(r.to_dict()), ensure_ascii=False) + "\n")
        sys.stdout.flush()
        return 3 if any(r.infra_error for r in results) else 0
    return _show(results[0])


# the options that shape the one FILE's run, by the destination argparse gives them: a --batch
# request states each of these in its own JSON object
_SINGLE_ONLY = {"source": "FILE", "completion": "--completion", "stdin": "--stdin", "file": "--file",
                "fetch": "--fetch", "language": "--language", "time_limit": "--time-limit", "memory_mb": "--memory-mb"}


def _given(value: object) -> bool:
    """Whether an option holds a value the user gave, argparse's defaults (None, False, []) aside:
    by identity, as ``0 in (None, False, [])`` is true and ``--time-limit 0`` is given."""
    return value is not None and value is not False and value != []


def _batch_conflict(args: argparse.Namespace) -> str | None:
    """Why ``--batch`` cannot go with what else was given (FILE, or an option of the one run), or None."""
    if not args.batch:
        return None
    given = [flag for dest, flag in _SINGLE_ONLY.items() if _given(getattr(args, dest, None))]
    if not given:
        return None
    return (f"{' and '.join(given)} cannot go with --batch, which runs the requests of {args.batch} and "
            "nothing else: give either the program FILE (with its options) or --batch JSONL, each request "
            "stating its own code, stdin, language and limits")


def _file_error(exc: BaseException) -> str:
    """An unreadable FILE, --file or --batch path as "PATH: what is wrong", the way the other
    commands name a bad file, not Python's "[Errno 2] No such file or directory: 'PATH'"."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        reason = {FileNotFoundError: "no such file", IsADirectoryError: "is a directory, expected a file",
                  PermissionError: "not readable (permission denied)"}.get(type(exc), exc.strerror)
        return f"{exc.filename}: {reason}"
    return str(exc)


# --- requests ------------------------------------------------------------------------------------


def _single(args: argparse.Namespace) -> dict[str, Any]:
    if not args.source:
        raise ValueError("give the program FILE (or --batch JSONL)")
    text = Path(args.source).read_bytes().decode("utf-8", errors="surrogateescape")
    req: dict[str, Any] = {"job_id": "0"}
    if args.completion:
        req["completion"] = text
        req["language"] = args.language
    else:
        language = args.language or by_extension(Path(args.source).suffix.lower())
        if language is None:
            raise ValueError(f"cannot tell the language of {args.source}: pass --language")
        req["code"], req["language"] = text, language
    req["stdin"] = [_read_input(p) for p in args.stdin] or [b""]
    files: dict[str, bytes] = {}
    for spec in args.file:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--file wants NAME=PATH, got {spec!r}")
        files[name] = Path(path).read_bytes()
    if files:
        req["files"] = files
    if args.fetch:
        req["fetch_files"] = list(args.fetch)
    req["time_limit_s"], req["memory_limit_mb"] = args.time_limit, args.memory_mb
    if args.output_cap is None:  # 1 MiB, less when many inputs would pass the bound on a reply
        room = protocol.MAX_RUN_REPLY_BYTES // len(req["stdin"]) - len(args.fetch) * protocol.FETCH_FILE_BYTES
        req["output_cap"] = max(0, min(CLI_OUTPUT_CAP, room // 2))
    else:
        req["output_cap"] = args.output_cap
    if args.timeout:
        req["timeout"] = args.timeout
    return req


def _read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:  # `--stdin "1 2"`: the input itself where a file was wanted
        raise FileNotFoundError(f"--stdin {path}: no such file (--stdin takes an input file, or - for this "
                                "process's stdin: echo '1 2' | cpfleet run FILE --stdin -)") from None


def _batch(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The requests of a --batch file, read as JOBS files are (cpfleet.jobs.files): an editor's
    byte-order mark and CRLF line ends are fine, a file that is no UTF-8 text or holds no request
    is refused naming it."""
    stream = sys.stdin if args.batch == "-" else open(args.batch, encoding="utf-8")
    with stream:
        try:
            out = _requests(args, _lines(stream))
        except UnicodeDecodeError as exc:  # a gzip or other binary file: named, as a bad line is
            raise ValueError(f"{args.batch}: not UTF-8 text ({exc})") from None
    if not out:  # as an empty JOBS file: running nothing and exiting 0 would pass for done
        raise ValueError(f"{args.batch}: no request in it")
    return out


def _requests(args: argparse.Namespace, lines: Iterator[str]) -> list[dict[str, Any]]:
    """Each line's request, checked by the wire rule; ValueError naming the first bad one."""
    out = []
    for n, line in enumerate(lines):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{args.batch}: request {n}: not JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{args.batch}: request {n}: not a JSON object")
        unknown = set(obj) - _REQUEST_FIELDS
        if unknown:
            raise ValueError(f"{args.batch}: request {n}: unknown fields {sorted(unknown)}")
        obj.setdefault("job_id", str(n))
        if args.output_cap is not None:
            obj.setdefault("output_cap", args.output_cap)
        if args.timeout:
            obj.setdefault("timeout", args.timeout)
        # checked here, by the wire rule, so that a refusal names its request: the same
        # refusal from run_many would name nothing in a batch of thousands
        try:
            files = obj.get("files")
            if isinstance(files, dict):
                obj["files"] = {k: _file_content(v) for k, v in files.items()}
            _message(obj)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{args.batch}: request {n}: {exc}") from None
        out.append(obj)
    return out


def _message(req: dict[str, Any]) -> Any:
    """The ``RunMessage`` of one request, validated as a worker validates it
    (``RunMessage.from_wire``); ValueError or TypeError when no worker could take it."""
    from cpfleet.core.protocol import RunMessage
    from cpfleet.producer.client import RunRequest, run_message_fields

    r = RunRequest(**{k: v for k, v in req.items() if k != "timeout"})
    try:
        return RunMessage.from_wire(run_message_fields(r))
    except ProtocolError as exc:
        raise ValueError(str(exc)) from None


_REQUEST_FIELDS = frozenset({"code", "completion", "language", "stdin", "files", "fetch_files", "time_limit_s",
                             "memory_limit_mb", "output_cap", "timeout", "job_id"})


def _lines(stream: Any) -> Iterator[str]:
    for n, line in enumerate(stream):
        if n == 0:
            line = line.removeprefix("\ufeff")  # an editor's byte-order mark
        if line.strip():
            yield line


def _file_content(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"b64"} and isinstance(v["b64"], str):
        return base64.b64decode(v["b64"], validate=True)
    return v


# --- running ------------------------------------------------------------------------------------


def _run_fleet(args: argparse.Namespace, requests: list[dict[str, Any]]) -> list[RunJobResult] | None:
    from cpfleet.core.redis_url import parse_redis_url
    from cpfleet.producer.client import BrokerFull, BrokerUnavailable, FleetClient
    from cpfleet.producer.connection import unreachable

    url = defaults.redis_url(args.redis)
    reason = unreachable(parse_redis_url(url))  # a silent port: named after the probe's bound, not the client's
    if reason is not None:
        print(f"cpfleet run: {reason}", file=sys.stderr)
        return None
    try:
        client = FleetClient(url, queue=args.queue, timeout=args.timeout)
    except (BrokerUnavailable, BrokerFull) as exc:
        print(f"cpfleet run: {exc}", file=sys.stderr)
        return None
    with client:
        try:
            futures = client.run_many(requests)
        except (BrokerUnavailable, BrokerFull) as exc:
            print(f"cpfleet run: {exc}", file=sys.stderr)
            return None
        return [f.result() for f in futures]


def _run_local(requests: list[dict[str, Any]]) -> list[RunJobResult]:
    """The worker's code path (``sandbox.runs.execute``) in a sandbox of this process; each
    request is validated by the same rule as on the wire (``RunMessage.from_wire``)."""
    from cpfleet.sandbox.env import DEFAULT_JOB_TIME_BUDGET_S
    from cpfleet.sandbox.runner import make_runner
    from cpfleet.sandbox.runs import execute

    messages = [_message(req) for req in requests]
    runner = make_runner("forkserver")
    try:
        return [execute(runner, m.code, m.stdins, language=m.language, extract=m.extract, files=m.files,
                        fetch_files=m.fetch_files, time_limit_s=m.time_limit_s, memory_limit_mb=m.memory_limit_mb,
                        output_cap=m.output_cap, job_id=m.job_id, time_budget_s=DEFAULT_JOB_TIME_BUDGET_S)
                for m in messages]
    finally:
        runner.close()


# --- showing ------------------------------------------------------------------------------------


def _show(result: RunJobResult) -> int:
    """One job for a person: outputs on the matching streams, a status line per run."""
    err = sys.stderr
    if result.compile is not None and not result.compile.ok:
        err.write(result.compile.stderr + ("" if result.compile.stderr.endswith("\n") else "\n"))
    if result.infra_error:
        print(f"cpfleet run: INTERNAL: {result.infra_message}", file=err)
        return 3
    if result.status != RunStatus.FINISHED:
        print(f"cpfleet run: {result.status}" + (f" ({result.language})" if result.language else ""), file=err)
        return 1
    for i, r in enumerate(result.runs):
        sys.stdout.write(r.stdout)
        sys.stdout.flush()
        err.write(r.stderr)
        clipped = " (stdout clipped)" if r.stdout_truncated else ""
        what = f"exit {r.exit_code}" if r.status == RunStatus.FINISHED else f"{r.status} {r.detail}".rstrip()
        print(f"[run {i}: {what}, {r.cpu_ms:.0f} ms CPU, {r.wall_ms:.0f} ms wall, "
              f"{r.stdout_bytes} bytes out{clipped}]", file=err)
        for name, data in r.files.items():
            print(f"[run {i}: file {name}: {len(data)} bytes]", file=err)
    if len(result.runs) == 1:
        only = result.runs[0]
        if only.status == RunStatus.FINISHED and only.exit_code is not None:
            return only.exit_code
        return 1
    return 0 if all(r.ok for r in result.runs) else 1


def jsonable(value: Any) -> Any:
    """``to_dict()`` output as JSON: bytes (fetched files) become base64 strings."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value

