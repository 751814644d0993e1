"""The function-call harness: what a confined test child runs for a problem with ``fn_name``.

Runs INSIDE the test child, after every isolation layer is in place, in both runners: imported
by the zygote (fork server: ``run_call``) and passed as ``python3 -c`` text to a fresh
interpreter (subprocess runner: ``EXEC_SOURCE``). It therefore imports nothing from the project
and nothing heavy at module level (the zygote's every import makes every fork slower).

Protocol with the runner (sandbox/fncall.py is the parent's side):

- fd 0 holds the test's ``input``: the JSON list of positional arguments. It is read and
  decoded here, inside the child, after confinement; fd 0 is then /dev/null, so a program that
  reads stdin sees an empty one. The expected value never reaches the child.
- The harness is given a *call spec*, ``<fn_name>`` or ``<fn_name>:<semantics>`` (core/fncall.py
  ``SEMANTICS``; none: ``python``): which function, and which reference harness's rules call it.
- The program runs as a module named ``solution`` (not ``__main__``: an ``if __name__ ==
  "__main__":`` block does not run, as in every reference harness), with the names of the
  reference's import header already defined as globals (``HEADERS``: LiveCodeBench's for
  ``python`` and ``lcb``, APPS/TACO's for ``apps``, PrimeIntellect's typing names for
  ``primeintellect``), never as prepended source (line numbers in tracebacks stay the program's own).
- The callee (``_callee``): ``python``: ``Solution().<fn_name>`` when the program defines a class
  ``Solution`` with that attribute, else the module-level ``<fn_name>``; ``lcb`` and ``apps``:
  ``Solution().<fn_name>`` when the source holds the text ``class Solution``, else the module's;
  ``primeintellect``: the first top-level class of the source's syntax tree with a ``def
  <fn_name>``, else a top-level ``def <fn_name>``. ``apps`` also undoes JSON's string keys in a
  first argument that is a dict, as APPS/TACO do (``_apps_args``). Those four references prepend
  their header as source, so a ``from __future__`` import fails there: under them it raises the
  same SyntaxError here (``_refuse_future_imports``). ``lcb`` applies LiveCodeBench's
  ``reliability_guard`` before the program runs (``_lcb_reliability_guard``).
- The return value is written to the test's stdout pipe as typed JSON (``_encode``: JSON, with
  tuples, sets and dicts whose keys are not all strings written as the tag objects core/fncall.py
  reads back, so ``{1: 2}`` does not come back as ``{"1": 2}``; a Fraction, Decimal or complex
  comes tagged too, as ``==`` compares them with numbers; a generator, a ``range`` or any other
  object has no form, and no reference harness finds one equal to an expected value). The
  program's own prints go to stderr instead (fd 1 is pointed there before the program runs), so
  what it prints never mixes with what it returns. Under ``primeintellect`` the reference prints
  the value after the program's own output and compares the text: there fd 1 stays the result
  pipe and the harness ends with ``print(value)``.
- Exit status: 0 after the value was written; 1 and a traceback on stderr for an exception
  (also ``SystemExit``: leaving the process is not returning, except under ``primeintellect``,
  whose reference compares whatever was printed when the process ended); NO_FUNCTION when there
  is no such function; UNREPRESENTABLE when the value has no typed JSON form.

A program can write to the result pipe itself (it is an ordinary fd); whatever it writes there
is judged as its return value, which earns nothing it could not earn by returning it.

Over 500 lines, and one file on purpose: the subprocess runner sends this file's own text as
``python3 -c`` source (``EXEC_SOURCE``) to an interpreter that can import nothing of the project,
so everything the child needs must be in it.
"""

from __future__ import annotations

import gc  # built in: bound here, before any program could put None in sys.modules['gc']
import os
import sys
from itertools import chain, repeat  # built in: nothing to load
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
# names every call-based program there may use without importing them.
LCB_HEADER = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\nfrom functools import *\n"
    "from operator import *\nfrom io import *\nfrom sys import *\nfrom json import *\n"
    "from builtins import *\nfrom typing import *\n"
    "import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics\n"
    "import itertools, functools, operator, io, sys, json\n"
)
# APPS's and TACO's call-based header (eval/testing_util.py, metrics/testing_util.py), but for its
# ``import numpy as np``: numpy is not part of the judged Python (docs/formats.md)
APPS_HEADER = (
    "import sys\nimport time\nimport itertools\nfrom itertools import accumulate, product, permutations, "
    "combinations\nimport collections\nfrom collections import Counter, OrderedDict, deque, defaultdict, "
    "ChainMap\nfrom functools import lru_cache\nimport math\nfrom math import sqrt, sin, cos, tan, ceil, fabs, "
    "floor, gcd, exp, log, log2\nimport fractions\nfrom typing import List, Tuple\nimport random\n"
    "import heapq\nfrom heapq import *\n"
)
# PrimeIntellect genesys's injection before the program
PRIMEINTELLECT_HEADER = "from typing import List, Dict, Set, Tuple, Union, Optional\n"
HEADERS = {"python": LCB_HEADER, "lcb": LCB_HEADER, "apps": APPS_HEADER, "primeintellect": PRIMEINTELLECT_HEADER}
HEADER = LCB_HEADER
RECURSION_LIMIT = 50_000  # LiveCodeBench's header sets it; APPS, TACO and PrimeIntellect keep Python's
DEEP_RECURSION = frozenset({"python", "lcb"})

# core/fncall.py ``TAGS``, spelled again: this module imports nothing from the project
TAG_TUPLE, TAG_SET, TAG_FROZENSET, TAG_DICT = "\u0000t", "\u0000s", "\u0000f", "\u0000d"
TAG_FRACTION, TAG_DECIMAL, TAG_COMPLEX = "\u0000q", "\u0000D", "\u0000c"


def parse_spec(spec: str) -> tuple[str, str]:
    """A call spec -> (fn_name, semantics)."""
    fn_name, _, semantics = spec.partition(":")
    return fn_name, semantics or "python"


def base_globals(semantics: str = "python") -> dict[str, Any]:
    """The header's names, imported once (per job in the fork server, per test in exec mode),
    and the modules every test of these rules loads whatever the header holds: ``json`` (read
    the arguments, write the value; with it ``re``), and under ``lcb`` the ``shutil`` and
    ``subprocess`` that LiveCodeBench's guard nulls functions of. Loaded here, a test finds them
    in sys.modules instead of importing them (~3 ms and ~10 ms a test); its namespace holds only
    the header's names, as before."""
    import json  # noqa: F401

    if semantics == "lcb":
        import shutil  # noqa: F401
        import subprocess  # noqa: F401
    ns: dict[str, Any] = {}
    exec(compile(HEADERS.get(semantics, LCB_HEADER), "<cpfleet-header>", "exec"), ns)
    return ns


def job_globals(spec: str, source: bytes) -> dict[str, Any]:
    """The fork server's once-per-job preparation of a function-call job (the job init, before
    its tests fork): ``base_globals``, and the source's syntax facts where the rules read them,
    so no test parses the program again."""
    semantics = parse_spec(spec)[1]
    if semantics == "primeintellect" or (semantics != "python" and b"__future__" in source):
        try:
            _syntax_facts(source)
        except Exception:  # (a tree too deep to build) each test's own parse fails, as the program's error
            pass
    return base_globals(semantics)


def _read_fd0() -> bytes:
    chunks: list[bytes] = []
    while True:
        b = os.read(0, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def _take_stdio(prints_are_output: bool = False) -> int:
    """Read nothing more from fd 0 (now /dev/null); return the result fd (the stdout pipe) and
    point fd 1 at stderr, where the program's prints go (``prints_are_output``: fd 1 stays the
    result pipe, for a reference that compares everything printed)."""
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if prints_are_output:
        return 1
    result_fd = os.dup(1)  # not inheritable: the program's own subprocesses do not get it
    os.dup2(2, 1)
    return result_fd


class _NoFunction(Exception):
    """The callee the rules name does not exist; the message says why."""


def _callee(ns: dict[str, Any], fn_name: str, semantics: str, source: bytes | None) -> Any:
    if semantics == "primeintellect":
        return _callee_by_syntax(ns, fn_name, source)
    sol = ns.get("Solution")
    if semantics != "python":
        # LiveCodeBench, APPS and TACO: ``"class Solution" in code`` decides, as text
        if source is not None and b"class Solution" in source:
            if sol is None:
                raise _NoFunction("the program holds the text 'class Solution' but defines no class Solution")
            obj = sol()
            if not hasattr(obj, fn_name):
                raise _NoFunction(f"class Solution has no method {fn_name!r}")
            return getattr(obj, fn_name)
    elif isinstance(sol, type) and hasattr(sol, fn_name):
        return getattr(sol(), fn_name)
    fn = ns.get(fn_name)
    if fn is None:
        raise _NoFunction(f"no function {fn_name!r}: define it at module level or as a method of class Solution")
    return fn


# What the rules read from a program's syntax tree (``_syntax_facts``): whether a top-level
# statement imports from __future__, the top-level classes in order with the names of the
# functions each defines, and the names of the top-level functions
SyntaxFacts = tuple[bool, tuple[tuple[str, frozenset[str]], ...], frozenset[str]]
_facts: tuple[bytes, SyntaxFacts] | None = None  # the last source parsed, inherited by a job's tests


def _syntax_facts(source: bytes) -> SyntaxFacts:
    """The program's ``SyntaxFacts``, parsed once per source (``job_globals`` parses it in the job
    init, before the tests fork)."""
    global _facts
    if _facts is not None and (_facts[0] is source or _facts[0] == source):
        return _facts[1]
    import ast

    body = ast.parse(source).body
    future = any(isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in body)
    classes = tuple((node.name, frozenset(sub.name for sub in node.body if isinstance(sub, ast.FunctionDef)))
                    for node in body if isinstance(node, ast.ClassDef))
    functions = frozenset(node.name for node in body if isinstance(node, ast.FunctionDef))
    _facts = (source, (future, classes, functions))
    return _facts[1]


def _callee_by_syntax(ns: dict[str, Any], fn_name: str, source: bytes | None) -> Any:
    """PrimeIntellect genesys ``detect_callable_name``: the first top-level class with a ``def
    fn_name`` (instantiated without arguments), else a top-level ``def fn_name``."""
    _, classes, functions = _syntax_facts(source or b"")
    for name, methods in classes:
        if fn_name in methods:
            return getattr(ns[name](), fn_name)
    if fn_name in functions:
        return ns[fn_name]
    raise _NoFunction(f"no top-level def {fn_name} nor a top-level class with a def {fn_name}")


def _parse_ahead(source: bytes) -> None:
    """Parse the source before the program runs, as PrimeIntellect's ``detect_callable_name``
    does (the fork server's job init has already; exec mode parses here): after it, the program
    may have put None in ``sys.modules['ast']``. A parse that fails here fails again where the
    callee is looked up, as the program's error."""
    try:
        _syntax_facts(source)
    except Exception:
        pass


def _refuse_future_imports(source: bytes) -> None:
    """LiveCodeBench, APPS, TACO and PrimeIntellect prepend their import header to the program's
    source, so a ``from __future__ import`` there is no longer at the beginning of the file: a
    SyntaxError before anything runs. The header is not prepended here (line numbers stay the
    program's), so the error is raised as the reference's compile raises it."""
    if _syntax_facts(source)[0]:
        raise SyntaxError("from __future__ imports must occur at the beginning of the file "
                          "(the reference harness prepends its import header to the program)")


# What LiveCodeBench's ``reliability_guard`` (run by ``run_test`` before the program is even
# compiled) sets to None: a program that uses one of them fails there, so it fails here.
_LCB_NULLED_OS = (
    "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
    "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
    "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir",
)
_LCB_NULLED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


def _lcb_reliability_guard() -> None:
    """LiveCodeBench's ``reliability_guard`` as it changes what a program can call (its memory
    limit and faulthandler are the sandbox's business here): ``quit`` and ``help``, the listed
    ``os`` functions, ``shutil.rmtree``/``move``/``chown`` and ``subprocess.Popen`` become None, and
    ``resource``, ``psutil``, ``joblib``, ``ipdb`` and ``tkinter`` cannot be imported."""
    import builtins
    import shutil
    import subprocess

    builtins.quit = None  # type: ignore[assignment]
    builtins.help = None  # type: ignore[assignment]
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in _LCB_NULLED_OS:
        if hasattr(os, name):
            setattr(os, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None  # type: ignore[assignment]
    subprocess.Popen = None  # type: ignore[assignment,misc]
    for module in _LCB_NULLED_MODULES:
        sys.modules[module] = None  # type: ignore[assignment]


def _pasted_args(args: Any) -> None:
    """PrimeIntellect's harness pastes ``str(args)`` into its source (``args = {args}``): a NaN or
    an infinity there is the name ``nan`` or ``inf``, a NameError before the call."""
    todo = [args]
    while todo:
        v = todo.pop()
        if isinstance(v, float) and v != v:
            raise NameError("name 'nan' is not defined (the reference pastes the arguments as Python source)")
        if isinstance(v, float) and v in (float("inf"), float("-inf")):
            raise NameError("name 'inf' is not defined (the reference pastes the arguments as Python source)")
        if isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())


def _apps_args(args: Any) -> Any:
    """APPS/TACO's "JSON forces dictionaries to have string keys; this undoes this (assuming a
    singleton list)": a first argument that is a dict whose keys all ``int()``-convert replaces
    the whole argument list by that dict with int keys."""
    try:
        if isinstance(args[0], dict):
            args = [{int(k): v for k, v in args[0].items()}]
    except Exception:  # the reference's bare except: the arguments stay
        pass
    return args


_EXACT_SCALARS = frozenset({str, int, float, bool, type(None)})
_PLAIN_TYPES = _EXACT_SCALARS | {list, dict}
_PLAIN_LEVELS = 1000  # deeper (or a cycle): the typed path, which tells them apart


def _plain(value: Any) -> bool:
    """Whether plain ``json.dumps`` writes ``value`` faithfully: exact lists, dicts with exact
    string keys (none starting with NUL) and exact scalars. Walked a level at a time at C speed:
    ``gc.get_referents`` of exact lists and dicts is their items, keys and values (scalars have
    none), and a level's types are one ``set(map(type, ...))``."""
    level = [value]
    for _ in range(_PLAIN_LEVELS):
        types = set(map(type, level))
        if not types <= _PLAIN_TYPES:
            return False
        if dict in types:
            keys = list(chain.from_iterable(level if types == {dict} else [d for d in level if type(d) is dict]))
            if not set(map(type, keys)) <= {str} or any(map(str.startswith, keys, repeat("\0"))):
                return False
        elif list not in types:
            return True
        level = gc.get_referents(*level)
    return False


def _typed(value: Any, path: set[int]) -> Any:
    """``value`` rebuilt from its own data (the base type's storage: a subclass's overridden
    ``__iter__``, ``items`` or ``__eq__`` is not what the reference's ``==`` reads either) as
    something plain ``json.dumps`` writes faithfully, tuples, sets and non-string dict keys as
    tag objects. Scalars of subclasses are left to json.dumps, which writes their base value.
    ``path``: the mutable containers being rebuilt (a cycle passes through one of them: a
    tuple or frozenset cannot hold itself but through one)."""
    if type(value) is tuple:  # the common case first (a list of pairs)
        return {TAG_TUPLE: _typed_items(list(value), path)}
    if isinstance(value, str | int | float) or value is None:  # bool is an int
        return value
    if isinstance(value, tuple):
        return {TAG_TUPLE: _typed_items(list(tuple.__iter__(value)), path)}
    if isinstance(value, frozenset):
        return {TAG_FROZENSET: _typed_items(list(frozenset.__iter__(value)), path)}
    if not isinstance(value, list | dict | set):
        return _typed_number(value)
    if id(value) in path:
        raise ValueError("the value contains itself")
    path.add(id(value))
    try:
        if isinstance(value, list):
            return _typed_items(list(list.__iter__(value)), path)
        if isinstance(value, set):
            return {TAG_SET: _typed_items(list(set.__iter__(value)), path)}
        pairs = list(dict.items(value))
        if all(isinstance(k, str) and k[:1] != "\0" for k, _ in pairs):
            return {str.__str__(k): _typed(v, path) for k, v in pairs}
        if set(map(type, chain.from_iterable(pairs))) <= _EXACT_SCALARS:
            return {TAG_DICT: list(map(list, pairs))}  # an {int: int} map, at C speed
        return {TAG_DICT: [[_typed(k, path), _typed(v, path)] for k, v in pairs]}
    finally:
        path.discard(id(value))


def _typed_number(value: Any) -> Any:
    """A Fraction, Decimal or complex (read from its base type's storage), which Python's ``==``
    compares with the numbers JSON has; TypeError for anything else. Their modules are looked up,
    not imported: a program that returns one has imported it."""
    if isinstance(value, complex):
        return {TAG_COMPLEX: [complex.real.__get__(value), complex.imag.__get__(value)]}
    fractions = sys.modules.get("fractions")
    if fractions is not None and isinstance(value, fractions.Fraction):
        return {TAG_FRACTION: [int.__index__(value._numerator), int.__index__(value._denominator)]}
    decimal = sys.modules.get("decimal")
    if decimal is not None and isinstance(value, decimal.Decimal):
        return {TAG_DECIMAL: decimal.Decimal.__str__(value)}
    raise TypeError(f"a {type(value).__name__} has no JSON form")


def _typed_items(items: list[Any], path: set[int]) -> list[Any]:
    """A sequence's items typed; those that are all exact scalars as they are, and exact tuples of
    exact scalars (a list of pairs) in one comprehension."""
    types = set(map(type, items))
    if types <= _EXACT_SCALARS:
        return items
    if types == {tuple} and set(map(type, chain.from_iterable(items))) <= _EXACT_SCALARS:
        return [{TAG_TUPLE: list(t)} for t in items]
    return [_typed(x, path) for x in items]


def _encode(value: Any, json: Any = None) -> str:
    """The typed JSON of a returned value (see the module docstring). ``json``: the module as
    ``invoke`` imported it before the program ran (the program may have put None in
    ``sys.modules['json']`` since, which no reference harness's comparison reads)."""
    if json is None:
        import json

    if _plain(value):
        return json.dumps(value, allow_nan=True)
    return json.dumps(_typed(value, set()), allow_nan=True)


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
        try:  # the last resort must not raise: the program may have closed fd 2
            os.write(2, f"{type(exc).__name__} (traceback unavailable)\n".encode(errors="replace"))
        except BaseException:
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def invoke(code: CodeType, spec: str, ns: dict[str, Any], args_text: bytes, result_fd: int,
           source: bytes | None) -> int:
    """Run the module, call the function, write its value; the exit status (see the docstring)."""
    import json

    fn_name, semantics = parse_spec(spec)
    printed = semantics == "primeintellect"
    try:
        args = json.loads(args_text)
        if semantics == "apps":
            args = _apps_args(args)
        elif semantics == "primeintellect":
            _pasted_args(args)
        if semantics != "python" and source is not None and b"__future__" in source:
            _refuse_future_imports(source)
        if semantics == "lcb":
            _lcb_reliability_guard()
        if semantics == "primeintellect" and source is not None:
            _parse_ahead(source)
        exec(code, ns)
        try:
            callee = _callee(ns, fn_name, semantics, source)
        except _NoFunction as e:
            sys.stderr.write(f"{e}\n")
            sys.stderr.flush()
            return NO_FUNCTION
        value = callee(*args)
        if printed:
            print(value)  # the reference's harness line, on whatever sys.stdout is now
            return 0
    except BaseException as e:
        if printed and isinstance(e, SystemExit) and (e.code is None or isinstance(e.code, int)):
            return 0  # the reference compares what was printed before the process ended
        _report(e, source)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    try:
        text = _encode(value, json)
    except (TypeError, ValueError) as e:
        # a generator, an object, a circular list: no typed JSON form
        sys.stderr.write(f"the return value cannot be compared: {e}\n")
        sys.stderr.flush()
        return UNREPRESENTABLE
    except BaseException as e:  # a subclass's code the encoding ran raised, or the value is too deep
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


def _module_globals(base: dict[str, Any], file: str = SCRIPT_NAME) -> dict[str, Any]:
    """The namespace of a real module registered as ``solution`` (dataclasses, pickle and
    typing look a class's module up in sys.modules), pre-filled with the header's names.
    ``file``: its ``__file__`` (in the fork server, the job's read-only copy of the source)."""
    import types

    module = types.ModuleType(MODULE_NAME)
    sys.modules[MODULE_NAME] = module
    ns = module.__dict__
    ns.update(base)
    ns.update({"__name__": MODULE_NAME, "__doc__": None, "__package__": None, "__spec__": None,
               "__loader__": None, "__file__": file, "__builtins__": __builtins__,
               "__cached__": None, "stdin": sys.stdin, "stdout": sys.stdout, "stderr": sys.stderr})
    return ns


def run_call(code: CodeType, spec: str, base: dict[str, Any]) -> NoReturn:
    """Fork-server mode: the confined child's whole life for one function-call test."""
    from cpfleet.sandbox import child  # already imported by the zygote

    semantics = parse_spec(spec)[1]
    args_text = _read_fd0()
    result_fd = _take_stdio(semantics == "primeintellect")
    threading = sys.modules.get("threading")
    if threading is not None:  # see child.preload_threading
        os.register_at_fork(after_in_child=threading._after_fork)
    child._fresh_stdio()
    child._reseed()
    sys.argv = [SCRIPT_NAME]
    sys.path.insert(0, os.getcwd())
    sys.set_int_max_str_digits(0)
    if semantics in DEEP_RECURSION:
        sys.setrecursionlimit(RECURSION_LIMIT)
    ns = _module_globals(base, child.SCRIPT_PATH)
    status = invoke(code, spec, ns, args_text, result_fd, child.SOURCE)
    del ns
    _exit_now(child._finalize(status))


def _exec_main() -> None:
    """Subprocess mode (``python3 -c EXEC_SOURCE fn_name`` in the test directory)."""
    spec = sys.argv[1]
    semantics = parse_spec(spec)[1]
    args_text = _read_fd0()
    result_fd = _take_stdio(semantics == "primeintellect")
    with open(SCRIPT_NAME, "rb") as f:
        source = f.read()
    code = compile(source, SCRIPT_NAME, "exec", dont_inherit=True)
    sys.argv = [SCRIPT_NAME]
    sys.path.insert(0, os.getcwd())
    sys.set_int_max_str_digits(0)
    if semantics in DEEP_RECURSION:
        sys.setrecursionlimit(RECURSION_LIMIT)
    ns = _module_globals(base_globals(semantics))
    raise SystemExit(invoke(code, spec, ns, args_text, result_fd, source))


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
