"""The function-call harness: what a confined test child runs for a problem with ``fn_name``.

Runs INSIDE the test child, after every isolation layer is in place, in both runners: imported
by the zygote (fork server: ``run_call``) and passed as ``python3 -c`` text to a fresh
interpreter (subprocess runner: ``EXEC_SOURCE``). It therefore imports nothing from the project
and nothing heavy at module level (the zygote's every import makes every fork slower).

Protocol with the runner (sandbox/fncall.py is the parent's side):

- fd 0 holds the test's ``input``: the JSON list of positional arguments. It is read and
  decoded here, inside the child, after confinement; fd 0 is then /dev/null, so a program that
  reads stdin sees an empty one. The expected value never reaches the child.
- The program runs as a module named ``solution`` (not ``__main__``: an ``if __name__ ==
  "__main__":`` block does not run, as in LiveCodeBench's and TACO's harnesses), with the names
  of LiveCodeBench's import header already defined (``List``, ``Counter``, ``heapq`` ...) as
  globals, never as prepended source (line numbers in tracebacks stay the program's own).
- The callee is ``Solution().<fn_name>`` when the program defines a class ``Solution`` with that
  attribute (LeetCode, LiveCodeBench), else the module-level ``<fn_name>`` (TACO, APPS,
  PrimeIntellect, HumanEval style).
- The return value is encoded as JSON (tuples become lists, generators are drained into lists,
  dict keys become strings as ``json.dumps`` writes them) and written to the test's stdout
  pipe, which the runner drains; the program's own prints go to stderr instead (fd 1 is
  pointed there before the program runs), so what it prints never mixes with what it returns.
- Exit status: 0 after the value was written; 1 and a traceback on stderr for an exception
  (also ``SystemExit``: leaving the process is not returning); NO_FUNCTION when there is no
  such function; UNREPRESENTABLE when the value has no JSON form (a set, an object).

A program can write to the result pipe itself (it is an ordinary fd); whatever it writes there
is judged as its return value, which earns nothing it could not earn by returning it.
"""

from __future__ import annotations

import os
import sys
from os import _exit as _exit_now  # bound at import, before any program: it may replace os._exit

TYPE_CHECKING = False  # typing is not imported at run time (see sandbox/zygote.py)
if TYPE_CHECKING:
    from types import CodeType, TracebackType
    from typing import Any, NoReturn

SCRIPT_NAME = "solution.py"
MODULE_NAME = "solution"
NO_FUNCTION = 122
UNREPRESENTABLE = 123

# LiveCodeBench's import header (lcb_runner/evaluation/testing_util.py ``import_string``): the
# names every call-based program there may use without importing them; a superset of TACO's.
HEADER = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\nfrom functools import *\n"
    "from operator import *\nfrom io import *\nfrom sys import *\nfrom json import *\n"
    "from builtins import *\nfrom typing import *\n"
    "import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics\n"
    "import itertools, functools, operator, io, sys, json\n"
)
RECURSION_LIMIT = 50_000  # LiveCodeBench's header sets the same


def base_globals() -> dict[str, Any]:
    """The header's names, imported once (per job in the fork server, per test in exec mode)."""
    ns: dict[str, Any] = {}
    exec(compile(HEADER, "<cpfleet-header>", "exec"), ns)
    return ns


def _read_fd0() -> bytes:
    chunks: list[bytes] = []
    while True:
        b = os.read(0, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def _take_stdio() -> int:
    """Read nothing more from fd 0 (now /dev/null); return the result fd (the stdout pipe) and
    point fd 1 at stderr, where the program's prints go."""
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    result_fd = os.dup(1)  # not inheritable: the program's own subprocesses do not get it
    os.dup2(2, 1)
    return result_fd


def _callee(ns: dict[str, Any], fn_name: str) -> Any:
    sol = ns.get("Solution")
    if isinstance(sol, type) and hasattr(sol, fn_name):
        return getattr(sol(), fn_name)
    fn = ns.get(fn_name)
    return fn if callable(fn) else None


def _drain(value: Any) -> Any:
    """json.dumps's hook for values it cannot encode: generators become lists."""
    import types

    if isinstance(value, types.GeneratorType):
        return list(value)
    raise TypeError(f"a {type(value).__name__} has no JSON form")


def _report(exc: BaseException, source: bytes | None) -> None:
    """The traceback from the program's first frame on (the harness's frames are not its)."""
    try:
        import linecache
        import traceback

        if source is not None:
            text = source.decode("utf-8", errors="replace")
            linecache.cache[SCRIPT_NAME] = (len(text), None, text.splitlines(True), SCRIPT_NAME)
        tb: TracebackType | None = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != SCRIPT_NAME:
            tb = tb.tb_next
        if isinstance(exc, SystemExit):
            msg = f"SystemExit({exc.code!r}): the program exited instead of returning a value\n"
            text_out = "".join(traceback.format_tb(tb)) if tb is not None else ""
            sys.stderr.write(("Traceback (most recent call last):\n" + text_out if text_out else "") + msg)
        else:
            sys.stderr.write("".join(traceback.format_exception(type(exc), exc, tb)))
        sys.stderr.flush()
    except BaseException:
        os.write(2, f"{type(exc).__name__} (traceback unavailable)\n".encode())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def invoke(code: CodeType, fn_name: str, ns: dict[str, Any], args_text: bytes, result_fd: int,
           source: bytes | None) -> int:
    """Run the module, call the function, write its JSON; the exit status (see the docstring)."""
    import json

    try:
        args = json.loads(args_text)
        exec(code, ns)
        callee = _callee(ns, fn_name)
        if callee is None:
            sys.stderr.write(f"no function {fn_name!r}: define it at module level or as a method of class Solution\n")
            sys.stderr.flush()
            return NO_FUNCTION
        value = callee(*args)
    except BaseException as e:
        _report(e, source)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    try:
        text = json.dumps(value, default=_drain, allow_nan=True)
    except (TypeError, ValueError) as e:
        # a set, an object, a circular list, or a generator that yields one: no JSON form
        sys.stderr.write(f"the return value cannot be compared: {e}\n")
        sys.stderr.flush()
        return UNREPRESENTABLE
    except BaseException as e:  # draining a generator ran the program's code, which raised
        _report(e, source)
        return 1
    try:
        _write_all(result_fd, text.encode("utf-8", errors="surrogatepass"))
        os.close(result_fd)
    except (OSError, UnicodeEncodeError) as e:
        sys.stderr.write(f"the return value could not be written: {e}\n")
        sys.stderr.flush()
        return 1
    return 0


def _module_globals(base: dict[str, Any]) -> dict[str, Any]:
    """The namespace of a real module registered as ``solution`` (dataclasses, pickle and
    typing look a class's module up in sys.modules), pre-filled with the header's names."""
    import types

    module = types.ModuleType(MODULE_NAME)
    sys.modules[MODULE_NAME] = module
    ns = module.__dict__
    ns.update(base)
    ns.update({"__name__": MODULE_NAME, "__doc__": None, "__package__": None, "__spec__": None,
               "__loader__": None, "__file__": SCRIPT_NAME, "__builtins__": __builtins__,
               "__cached__": None, "stdin": sys.stdin, "stdout": sys.stdout, "stderr": sys.stderr})
    return ns


def run_call(code: CodeType, fn_name: str, base: dict[str, Any]) -> NoReturn:
    """Fork-server mode: the confined child's whole life for one function-call test."""
    from cpfleet.sandbox import child  # already imported by the zygote

    args_text = _read_fd0()
    result_fd = _take_stdio()
    threading = sys.modules.get("threading")
    if threading is not None:  # see child.preload_threading
        os.register_at_fork(after_in_child=threading._after_fork)
    child._fresh_stdio()
    child._reseed()
    sys.argv = [SCRIPT_NAME]
    sys.path.insert(0, os.getcwd())
    sys.set_int_max_str_digits(0)
    sys.setrecursionlimit(RECURSION_LIMIT)
    ns = _module_globals(base)
    status = invoke(code, fn_name, ns, args_text, result_fd, child.SOURCE)
    del ns
    _exit_now(child._finalize(status))


def _exec_main() -> None:
    """Subprocess mode (``python3 -c EXEC_SOURCE fn_name`` in the test directory)."""
    fn_name = sys.argv[1]
    args_text = _read_fd0()
    result_fd = _take_stdio()
    with open(SCRIPT_NAME, "rb") as f:
        source = f.read()
    code = compile(source, SCRIPT_NAME, "exec", dont_inherit=True)
    sys.argv = [SCRIPT_NAME]
    sys.path.insert(0, os.getcwd())
    sys.set_int_max_str_digits(0)
    sys.setrecursionlimit(RECURSION_LIMIT)
    ns = _module_globals(base_globals())
    raise SystemExit(invoke(code, fn_name, ns, args_text, result_fd, source))


def _exec_source() -> str:
    """This module's own text, read once at import (the zygote imports it before its root is
    pivoted to the minimal one, where this file is not). Run as ``python3 -c`` it is
    ``__main__`` and calls ``_exec_main``."""
    try:
        with open(__file__, encoding="utf-8") as f:
            return f.read()
    except OSError:  # pragma: no cover - the package is always readable where it is imported
        return "raise SystemExit('cpfleet: the function-call harness source is unavailable')\n"


EXEC_SOURCE = ""
if __name__ == "__main__":
    _exec_main()
else:
    EXEC_SOURCE = _exec_source()
