"""What the test child runs once it is confined: the program, with ``python3 solution.py``
semantics (fork mode), or a real ``python3 solution.py`` (exec mode).

563 lines in one module: every part of it (the std streams built in the zygote, the program's
run, its exit as the interpreter's own, under CPython and PyPy) runs in the test child around
the program, from the one import the zygote makes before it forks; the parts share state bound
before any program runs (the prebuilt streams, ``os._exit``, the builtins the exit reads), and a
second module would be a second import in every zygote for no reader of its own."""

from __future__ import annotations

import _io
import atexit  # built in (no mapping); imported here, a test's exit need not run the import system
import builtins
import gc  # built in, bound here: a program may put None in sys.modules['gc'], which python3's exit never reads
import io
import os
import resource
import signal  # built in
import sys
import types
from _weakref import ref as _weak  # built in
from os import _exit as _exit_now  # bound at import, before any program: it may replace os._exit
from types import CodeType

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing would grow every fork
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

# PyPy's own start-up and shutdown differ from CPython's in ways a program can observe (its
# std streams, no collection at exit, the int digit limit): the fork server mirrors the
# interpreter it runs in (sandbox/zygote.py runs under either; docs/pypy.md)
PYPY = sys.implementation.name == "pypy"
# libc's fflush, bound before any program runs (CPython): ``python3 solution.py`` ends in libc's
# exit(), which flushes every C stdio stream after the interpreter's own shutdown, so what a
# program wrote through C stdio (``ctypes.CDLL(None).printf``, a C extension's stdout) comes out;
# a test child ends in ``_exit``, which flushes nothing. (The zygote loaded ctypes already:
# sandbox/linux.py.)
_c_fflush: Callable[[Any], int] | None = None
if not PYPY:
    import ctypes

    try:
        _c_fflush = ctypes.CDLL(None).fflush
    except (OSError, AttributeError):
        _c_fflush = None
SCRIPT_NAME = "solution.py"
SOURCE = b""  # the program's source, set by the job init; used only to print tracebacks
# ``__main__.__file__``: the absolute path of a read-only copy of the source the job init placed
# for all of its tests (jobinit.JobInit._place_script), as python3 (3.9+) makes the script's path
# absolute. multiprocessing's spawn and forkserver start methods re-run the main module from it
# (a Pool restarted its workers forever when it named no file), and a program may read itself.
# Code objects keep the name SCRIPT_NAME: tracebacks show ``File "solution.py"``. Its
# ``__loader__`` is a SourceFileLoader of that file, as python3's is: inspect.getsource and
# warnings read the main module's source lines through it (linecache.lazycache).
SCRIPT_PATH = SCRIPT_NAME
_SourceFileLoader = sys.modules["_frozen_importlib_external"].SourceFileLoader
_SCRIPT_DIR = ""  # the program's directory, set when it starts

# The harness ends a run in the program's own interpreter, after the program, where python3 ends
# it in C: what the program rebinds there must not decide the exit status. Under CPython the
# harness's functions look builtins up in a copy taken here, before any program (a rebound
# ``builtins.print`` or ``isinstance`` is not theirs), and use the interpreter state bound here:
# the modules table, the atexit, gc and ``sys.exc_info`` entry points. PyPy's own exit path is
# Python code that reads those as the program left them, so there they are read at exit. Under
# both, an int's range is a C long's whatever the program made of ``sys.maxsize``, and the calls
# that place the source for a traceback (the harness's own step) are the ones bound here. The
# program's ``__main__`` gets the interpreter's own builtins (``_new_main``).
_PROGRAM_BUILTINS = builtins  # the module, as python3 gives ``__main__`` (an imported module gets its dict)
if not PYPY:
    globals()["__builtins__"] = dict(vars(builtins))  # read by the functions defined below it
_C_LONG_MAX = sys.maxsize
_MODULES = sys.modules
_run_exitfuncs = atexit._run_exitfuncs
_OWN_EXCEPTHOOK = sys.__excepthook__  # the interpreter's printer, whatever the program makes of sys
# the slots the interpreter's C code reads, not what a class of the program's makes of the names
_TRACEBACK_SLOT = BaseException.__dict__["__traceback__"]
_NAME_SLOT = type.__dict__["__name__"]
_gc_collect = gc.collect
_exc_info = sys.exc_info
_open, _close, _pwrite, _write, _join = os.open, os.close, os.pwrite, os.write, os.path.join
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_getrlimit, _RLIMIT_FSIZE = resource.getrlimit, resource.RLIMIT_FSIZE

# ``sys.executable`` as a program sees it: the worker's may be a virtualenv's link to the
# interpreter, which the sandbox's root does not show (it shows the interpreter's own directory,
# isolation.python_dirs), and a program that runs sys.executable (subprocess, multiprocessing's
# spawn) failed where ``python3 solution.py`` runs. Resolved here, on the host's file system.
_EXECUTABLE = os.path.realpath(sys.executable) if sys.executable else sys.executable


def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` from offset 0 with pwrite, leaving the file offset where it was (so a
    memfd a child reads as its stdin, whose offset it shares, still starts at 0)."""
    view = memoryview(data)
    while view:
        view = view[_pwrite(fd, view, len(data) - len(view)):]


def _pypy_std_stream(fd: int, name: str, write: bool) -> io.TextIOWrapper:
    """One std stream as PyPy 3.9's app_main builds it (``create_stdio``), with the buffering
    the interpreter gave its own stream over the same fd number, which a fork must keep (it
    decides how much a printing program costs, and what a killed program has already written):
    PyPy 7.3.11 buffers stdout and stderr in the sandbox's environment, and writes them
    unbuffered (a write per ``print``) only under PYTHONUNBUFFERED, which the zygote ignores
    (``-I``) and a test's environment does not hold."""
    own = (sys.__stdin__, sys.__stdout__, sys.__stderr__)[fd]
    buffered = own is None or not isinstance(own.buffer, io.FileIO)
    if write and not buffered:
        buf: Any = open(fd, "wb", buffering=0, closefd=False)
        buf.name = name
    else:
        buf = open(fd, "wb" if write else "rb", closefd=False)
        buf.raw.name = name
    stream = io.TextIOWrapper(
        buf,
        encoding=own.encoding if own is not None else "utf-8",
        errors=own.errors if own is not None else ("backslashreplace" if fd == 2 else "strict"),
        newline="\n",
        line_buffering=own.line_buffering if own is not None else True,
        write_through=own.write_through if own is not None else True,
    )
    stream.mode = "w" if write else "r"  # type: ignore[misc]
    return stream

def _std_stream(fd: int, name: str, write: bool) -> io.TextIOWrapper:
    """One std stream built as CPython's create_stdio builds it for a non-tty: a buffered
    binary stream whose raw file is named "<stdin>"/"<stdout>"/"<stderr>", wrapped in a
    TextIOWrapper that carries a ``mode`` attribute ("r"/"w"). Common CP templates (FastIO)
    read ``sys.stdin.mode`` and ``os.fstat(sys.stdin.fileno())``. Under PyPy, PyPy's layout."""
    if PYPY:
        return _pypy_std_stream(fd, name, write)
    buf = open(fd, "wb" if write else "rb", closefd=False)
    buf.raw.name = name  # type: ignore[attr-defined]
    stream = io.TextIOWrapper(
        buf,
        encoding="utf-8",
        errors="backslashreplace" if fd == 2 else "surrogateescape",  # as python3 under C.UTF-8
        newline="\n",
        line_buffering=fd == 2,
    )
    stream.mode = "w" if write else "r"  # type: ignore[misc]
    return stream


_PREBUILT: tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper] | None = None
_STARTED_WITH: tuple[Any, ...] = ()  # PyPy: weak references to the stdout and stderr a test started with
# PyPy: weak references to the files the program opened, in order (``track_opened_files``)
_OPENED: list[Any] = []
_OPENED_PRUNE_AT = 1024  # entries; the dead ones are dropped when the list passes it (then twice its live size)


def prebuild_stdio() -> None:
    """Build the three std streams once, in the zygote, over fd numbers 0/1/2 (never used there).
    Each test child inherits a pristine copy and only installs it: building them per test cost
    ~0.3 ms of the child's time. A child's dup2 makes fds 0/1/2 its job's memfd and pipes.

    Fds 1 and 2 are a pipe while the streams are built, as a test's are: a stream reads whether
    its file is seekable (and where it stands) once, when it is made, and the zygote's stdout is
    /dev/null, which is. Built over it, a test's ``sys.stdout.seekable()`` was True where
    ``python3 solution.py`` says False, and PyPy's ``sys.stdout.reconfigure(...)`` seeked the
    pipe and raised (a valid program's RUNTIME_ERROR)."""
    global _PREBUILT
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    r, w = os.pipe()
    try:
        for fd in saved:
            os.dup2(w, fd)
        _PREBUILT = (_std_stream(0, "<stdin>", False), _std_stream(1, "<stdout>", True), _std_stream(2, "<stderr>", True))
    finally:
        for fd, old in saved.items():
            os.dup2(old, fd)
            os.close(old)
        os.close(r)
        os.close(w)


def _fresh_stdio() -> None:
    """Std streams over the real fds 0/1/2, configured like the interpreter's own at startup.

    Under CPython ``sys`` then holds their only references, as in a fresh interpreter: a stream
    the program lets go (``sys.stdout = sys.__stdout__ = None``, or both rebound to another) is
    flushed by its finalizer at that moment, as under ``python3 solution.py``. Kept alive here,
    its buffer was never written: a wrong answer printed before was dropped, and a right one
    written raw after it was paid. PyPy flushes such a stream when its garbage collector
    finalizes it, or at exit with every buffered writer still alive: ``_finalize_pypy`` flushes
    the two here if they are still alive then (weak references, which keep nothing alive)."""
    global _PREBUILT, _STARTED_WITH
    stdin, stdout, stderr = _PREBUILT or (
        _std_stream(0, "<stdin>", False), _std_stream(1, "<stdout>", True), _std_stream(2, "<stderr>", True)
    )
    _PREBUILT = None
    if PYPY:
        _STARTED_WITH = (_weak(stdout), _weak(stderr))
        del _OPENED[:]  # what the zygote opened is not the program's
    sys.stdin = stdin
    sys.stdout = stdout
    sys.stderr = stderr
    sys.__stdin__ = stdin  # type: ignore[misc]
    sys.__stdout__ = stdout  # type: ignore[misc]
    sys.__stderr__ = stderr  # type: ignore[misc]


def track_opened_files() -> None:
    """PyPy only, in the zygote: ``open`` (the one function ``builtins.open``, ``io.open`` and
    ``_io.open`` name, and ``os.fdopen`` calls) keeps a weak reference to every file it returns,
    so that ``_finalize_pypy`` flushes the buffered writers a program opened wherever it keeps them.
    ``pypy3 solution.py`` flushes every live buffered writer at exit from a registry Python cannot
    reach: a writer held in a function's local, an object's attribute, a list, or only by its
    bound ``write`` (``write = open(1, "w").write``) had its answer flushed there and lost here (a
    right answer's WRONG_ANSWER), where only the program's globals were looked at. The wrapper's
    frame is hidden from tracebacks (``__pypy__.hidden_applevel``), as PyPy hides its own."""
    if not PYPY:
        return
    import _io as io_module

    from __pypy__ import hidden_applevel

    real_open = io_module.open

    @hidden_applevel
    def open(*args: Any, **kwargs: Any) -> Any:
        global _OPENED_PRUNE_AT
        opened = real_open(*args, **kwargs)
        _OPENED.append(_weak(opened))
        if len(_OPENED) > _OPENED_PRUNE_AT:  # a program opening files in a loop: keep the live ones
            _OPENED[:] = [r for r in _OPENED if r() is not None]
            _OPENED_PRUNE_AT = max(1024, 2 * len(_OPENED))
        return opened

    open.__module__, open.__doc__ = real_open.__module__, real_open.__doc__
    io: Any = sys.modules.get("io")
    builtins.open = io_module.open = open
    if io is not None:
        io.open = open


def _reseed() -> None:
    """Children of one zygote must not share random state (a fresh interpreter would not)."""
    rnd = sys.modules.get("random")
    if rnd is not None:
        rnd.seed()


# What the interpreter makes of an int past a C long in SystemExit: CPython's conversion fails
# and it exits with -1 (status 255); PyPy reports the OverflowError and exits with 1.
_EXIT_PAST_C_LONG = 1 if PYPY else 255


def _exit_code(exc: SystemExit) -> int:
    """The exit status ``python3 solution.py`` ends with for ``exc``: an int's own value (read
    from int's storage, as the interpreter's C conversion reads it: a subclass's ``__and__`` or
    ``__index__`` is not asked) modulo 256 when it fits a C long, else ``_EXIT_PAST_C_LONG``
    (``sys.exit(2**64)`` after a correct answer is a failure there, never status 0); anything
    else printed and 1."""
    code = exc.code
    if code is None:
        return 0
    if PYPY:
        # PyPy's app_main (handle_sys_exit) takes ``int(code)`` (a float, a numeric string, an
        # object with __int__: its value, printed nothing), printing the code and exiting 1 only
        # where that raises
        try:
            code = int(code)
        except BaseException:
            pass
    if isinstance(code, int):
        value = int.__index__(code)
        return value & 0xFF if -_C_LONG_MAX - 1 <= value <= _C_LONG_MAX else _EXIT_PAST_C_LONG
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def install_site_builtins() -> None:
    """``exit()``/``quit()`` and friends, which ``site`` adds; the zygote runs with -S so that
    no .pth hook (editable installs, setuptools' distutils shim) bloats every fork."""
    import site

    site.setquit()
    site.setcopyright()
    site.sethelper()


def preload_threading() -> None:
    """Import threading (in the zygote) without registering its after-fork hook: the hook is
    Python code that would run in every test child the init forks, writing to ~150 pages that
    must first be copied (~0.2 ms a test). Not preloading it instead cost the programs that
    use threads (deep recursion in a big-stack thread is a common idiom) ~1.5 ms a test.
    ``run_compiled`` registers the hook, so forks the program itself makes get it, as under
    ``python3 solution.py``."""
    register = os.register_at_fork
    delattr(os, "register_at_fork")  # threading registers its hook only if os has this
    try:
        import threading  # noqa: F401
    finally:
        os.register_at_fork = register


_PREPARED_MAIN: dict[str, object] | None = None  # see prepare_main


def prepare_main(argv: list[str] | None = None) -> None:
    """Set up the interpreter state a ``python3 solution.py`` starts with that does not depend
    on the test (std streams, argv, the int digit limit, an empty ``__main__``), for the next
    ``run_compiled``. A child forked ahead of its test does this while it waits
    (sandbox/zygote.py). The namespace is held here, not by the caller, so that releasing
    ``__main__`` at exit really frees it (finalizers run as under CPython)."""
    global _PREPARED_MAIN
    _PREPARED_MAIN = _new_main(argv)


def _new_main(argv: list[str] | None) -> dict[str, object]:
    threading = sys.modules.get("threading")
    if threading is not None:  # see preload_threading
        os.register_at_fork(after_in_child=threading._after_fork)
    _fresh_stdio()
    _reseed()
    sys.argv = [SCRIPT_NAME, *(argv or ())]
    sys.executable = _EXECUTABLE
    if not PYPY:  # PyPy keeps its default limit (4300 digits), as `pypy3 solution.py` has it
        sys.set_int_max_str_digits(0)
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    loader = _SourceFileLoader("__main__", SCRIPT_PATH) if SCRIPT_PATH != SCRIPT_NAME else None
    main.__dict__.update({"__name__": "__main__", "__doc__": None, "__package__": None, "__spec__": None,
                          "__loader__": loader, "__file__": SCRIPT_PATH, "__builtins__": _PROGRAM_BUILTINS,
                          "__cached__": None})
    return main.__dict__


def run_compiled(code: CodeType, argv: list[str] | None = None) -> NoReturn:
    """Execute ``code`` as ``__main__`` and end the process the way the interpreter would
    (see ``_finalize``): exit status from SystemExit, traceback and 1 on an uncaught exception.
    The state ``prepare_main`` set up is used when it ran earlier in this process."""
    global _PREPARED_MAIN, _SCRIPT_DIR
    namespace = _PREPARED_MAIN if _PREPARED_MAIN is not None else _new_main(argv)
    _PREPARED_MAIN = None
    _SCRIPT_DIR = os.getcwd()
    sys.path.insert(0, _SCRIPT_DIR)  # the script's directory, as for `python3 solution.py`
    status = 0
    try:
        try:
            exec(code, namespace)
        finally:
            if not PYPY:  # before the exit status or the traceback is reported (see _flush_io)
                _flush_io()
    except SystemExit as e:
        status = _exit_code(e)
    except BaseException:
        status = _report_uncaught()
    if PYPY:
        _flush_io()
    del namespace
    _exit_now(_finalize(status))


def _flush_io() -> None:
    """CPython's flush_io, which ``python3 solution.py`` runs the moment the main module ends,
    returned or raised, before a SystemExit's code or the traceback is reported: flush
    sys.stderr, then sys.stdout, as the program left them, every error ignored. ``pypy3
    solution.py`` flushes them too, but after that report (its own excepthook flushes stdout
    first; one the program set does not). Under both, threads are joined and atexit handlers
    run only after it (``_finalize``), so what the program printed is out before one of them
    can end the process (``os._exit(0)`` after writing an answer of its own)."""
    for name in ("stderr", "stdout"):
        try:
            getattr(sys, name).flush()
        except BaseException:
            pass


def _report_uncaught() -> int:
    """Print the traceback as the interpreter would, minus our own frame: with the
    interpreter's own printer (C) once the source is where it reads source lines from
    (``_place_source``); where it cannot be placed (the program made a solution.py of its own,
    or lowered RLIMIT_FSIZE below the source), still with that printer under CPython, which then
    shows the lines it finds or none, and under PyPy with the traceback module from linecache
    (PyPy's own excepthook imports traceback too). The printer is both exactly ``python3
    solution.py``'s output and far cheaper: importing traceback in a test child cost ~14 ms a
    failing test. And no module is imported after the program ran: a ``linecache`` or
    ``traceback`` it planted in its directory (``sys.path[0]``) or in ``sys.modules`` ended the
    report with its own ``os._exit(0)``, a failure paid where python3 prints in C and exits 1."""
    exc_type, exc, tb = (sys.exc_info if PYPY else _exc_info)()
    tb = tb.tb_next if tb is not None and tb.tb_frame.f_code is run_compiled.__code__ else tb
    try:
        hook = sys.excepthook
        if hook is _OWN_EXCEPTHOOK and exc is not None:
            # the C printer starts from the exception's own traceback, set in its slot: a
            # ``__traceback__`` property of the program's class is not the interpreter's to call
            _TRACEBACK_SLOT.__set__(exc, tb)
            if _place_source() or not PYPY:
                _OWN_EXCEPTHOOK(exc_type, exc, tb)  # type: ignore[arg-type]
            else:
                import linecache
                import traceback

                text = SOURCE.decode("utf-8", errors="replace")
                linecache.cache[SCRIPT_NAME] = (len(text), None, text.splitlines(True), SCRIPT_NAME)
                traceback.print_exception(exc_type, exc, tb)
        else:
            try:
                hook(exc_type, exc, tb)  # type: ignore[arg-type]
            except SystemExit as e:
                # CPython's PyErr_Print exits with the status of a SystemExit its sys.excepthook
                # raised (handle_system_exit), as if the program had raised it; PyPy reports the
                # hook's failure and exits 1 (below). Only the program's own hook counts: a
                # SystemExit out of anything else the harness runs here is the report failing.
                if PYPY:
                    raise
                return _exit_code(e)
    except BaseException:
        # e.g. no memory left to print with: still say what killed the program
        _last_words(lambda: f"Traceback (most recent call last):\n  File \"{SCRIPT_NAME}\"\n{_name(exc_type)}\n")
    return 130 if exc_type is KeyboardInterrupt else 1


def _name(cls: Any) -> str:
    """A class's own name, read from its slot: a metaclass's ``__name__`` is the program's code."""
    try:
        return str(_NAME_SLOT.__get__(cls))
    except BaseException:
        return "Exception"


def _last_words(text: Callable[[], str]) -> None:
    """Write ``text()`` to fd 2 if it can be: the last resort of the harness's own error reports,
    which must never raise. The program may have closed fd 2 or made its exception's class
    raise on ``__name__``; what raised here would otherwise end the run unreported (in the fork
    server, unwinding into the job init's frames)."""
    try:
        _write(2, text().encode(errors="replace"))
    except BaseException:
        pass


def _place_source() -> bool:
    """Write the program's source as solution.py in its directory, where the interpreter's
    traceback printer looks for the lines it shows (the file named in the code, then the
    ``sys.path`` entries). Done only when a traceback is about to be printed: the file marks
    the directory as used, so the next test gets a fresh one. False when the name is taken
    (the program made such a file), the source would pass RLIMIT_FSIZE, or writing fails."""
    if not _SCRIPT_DIR or len(SOURCE) >= _getrlimit(_RLIMIT_FSIZE)[0]:
        return False
    try:
        fd = _open(_join(_SCRIPT_DIR, SCRIPT_NAME), _NEW_FILE, 0o444)
    except OSError:
        return False
    try:
        write_all(fd, SOURCE)
    except OSError:
        return False
    finally:
        _close(fd)
    return True


def _flush_std_files() -> bool:
    """CPython's flush_std_files: flush the current sys.stdout/sys.stderr unless closed."""
    ok = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None:
            continue
        try:
            closed = bool(getattr(stream, "closed", False))
        except BaseException:  # CPython's file_is_closed: a ``closed`` that raises is "open"
            closed = False
        if closed:
            continue
        try:
            stream.flush()
        except BaseException:
            ok = False
    return ok


def _finalize(status: int) -> int:
    """The steps of Py_FinalizeEx that a program can observe, in its order: join non-daemon
    threads, run atexit handlers, flush the std streams, collect garbage, release ``__main__``
    (its objects' finalizers run with their globals intact, as when CPython collects the module
    dict as a cycle: custom writers that flush in ``__del__`` do flush), restore the original
    std streams and flush them again. A failed
    flush makes the exit status 120, as Py_Exit does."""
    threading = (sys.modules if PYPY else _MODULES).get("threading")
    if threading is not None and not (PYPY and _only_main_thread(threading)):
        try:
            threading._shutdown()
        except BaseException as e:
            _report_ignored(e, "threading._shutdown()")  # the interpreter's exit status stands
    try:
        (atexit._run_exitfuncs if PYPY else _run_exitfuncs)()
    except BaseException:
        pass
    flushed = _flush_std_files()
    if PYPY:
        return _finalize_pypy(status, flushed)
    try:  # steps the interpreter cannot fail: what the program did to ``sys`` leaves the status
        _gc_collect()
        _MODULES.pop("__main__", None)
        _gc_collect()
        # finalize_modules restores the original streams before its last flush: output written
        # to sys.__stdout__ by an atexit handler while sys.stdout was replaced still comes out
        sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    except BaseException:
        pass
    flushed = _flush_std_files() and flushed
    if _c_fflush is not None:
        try:
            _c_fflush(None)  # exit()'s flush of the C stdio streams, after Py_FinalizeEx's (above)
        except BaseException:
            pass
    return status if flushed else 120


def _report_ignored(exc: BaseException, where: str) -> None:
    """What the interpreter does with an exception raised while it shuts down (a
    ``threading._shutdown`` the program replaced, an interrupt while joining its threads): print
    it as unraisable and keep the exit status it had. A ``SystemExit(0)`` raised there after an
    uncaught exception is a failure under ``python3 solution.py``, never status 0. Under
    CPython with the interpreter's own printer, as ``PyErr_WriteUnraisable`` prints it, importing
    nothing after the program ran (``_report_uncaught``)."""
    if not PYPY:
        try:
            tb = _TRACEBACK_SLOT.__get__(exc)
            while tb is not None and tb.tb_frame.f_code.co_filename != SCRIPT_NAME:
                tb = tb.tb_next  # the harness's frames are not the program's
            _TRACEBACK_SLOT.__set__(exc, tb)  # the printer starts from the exception's own
            _last_words(lambda: f"Exception ignored in: {where}\n")
            _place_source()
            _OWN_EXCEPTHOOK(type(exc), exc, tb)
        except BaseException:
            _last_words(lambda: f"Exception ignored in: {where}: {_name(type(exc))}\n")
        return
    try:
        import linecache
        import traceback

        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != SCRIPT_NAME:
            tb = tb.tb_next  # the harness's frames are not the program's
        text = SOURCE.decode("utf-8", errors="replace")
        linecache.cache[SCRIPT_NAME] = (len(text), None, text.splitlines(True), SCRIPT_NAME)
        sys.stderr.write(f"Exception ignored in: {where}\n" + "".join(traceback.format_exception(type(exc), exc, tb)))
        sys.stderr.flush()
    except BaseException:
        _last_words(lambda: f"Exception ignored in: {where}: {_name(type(exc))}\n")


def _only_main_thread(threading: Any) -> bool:
    """No thread but the main one was ever started and nothing asked to run at threading's
    shutdown: ``threading._shutdown`` would have nothing to do (under PyPy it is Python code,
    ~0.25 ms in a fresh fork)."""
    return (len(threading._active) == 1 and not threading._limbo
            and not getattr(threading, "_threading_atexits", None) and not getattr(threading, "_shutdown_locks", None))


def _finalize_pypy(status: int, flushed: bool) -> int:
    """The rest of PyPy's shutdown (``space.finish``): no garbage collection (PyPy runs no
    finalizer at exit, and a full collection in a fork would copy the whole zygote heap, ~15 ms
    a test), but its ``_io`` module flushes every buffered writer still alive. That registry is
    not reachable from Python; the files the program opened that are still alive
    (``track_opened_files``, in the order it opened them) and the writers it keeps in its globals
    (one it built itself, ``io.BufferedWriter(raw)``) are flushed here (docs/pypy.md), and so are
    the std streams the program started with, wherever it left them (``_fresh_stdio``)."""
    # in the order they were made, as far as PyPy's registry keeps one: the std streams first
    values = [f for f in (r() for r in (*_STARTED_WITH, *_OPENED)) if f is not None]
    try:  # nothing the program did to its globals or to ``sys`` changes the status here
        main = sys.modules.get("__main__")
        values += list(getattr(main, "__dict__", {}).values())
    except BaseException:
        pass
    for value in values:
        try:
            # _io._IOBase, not io.IOBase: an ABC, whose isinstance runs its registry in Python
            if isinstance(value, _io._IOBase) and value is not sys.stdout and value is not sys.stderr:
                if not value.closed and value.writable():
                    value.flush()
        except BaseException:
            pass
    try:
        sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    except BaseException:
        pass
    flushed = _flush_std_files() and flushed
    return status if flushed else 120


def exec_python(source: bytes, python: str, argv: list[str] | None = None,
                fn_name: str | None = None) -> NoReturn:
    """Exec mode: write solution.py into the private cwd and replace ourselves with python3
    (``python3 solution.py``, or for a function-call problem the harness, which imports
    solution.py and calls ``fn_name``: sandbox/callharness.py)."""
    with open(SCRIPT_NAME, "wb") as f:
        f.write(source)
    env = dict(os.environ, PYTHONINTMAXSTRDIGITS="0", PYTHONDONTWRITEBYTECODE="1")
    if fn_name is not None:
        from cpfleet.sandbox import callharness

        args = [python, "-c", callharness.EXEC_SOURCE, fn_name]
    else:
        args = [python, SCRIPT_NAME, *(argv or ())]
    try:
        os.execve(python, args, env)
    finally:
        os._exit(127)


EXEC_FAILED = "exec:"
# RLIMIT_AS (the memory limit of C and C++ programs) counts address space reserved, not used, and
# glibc reserves 64 MB (HEAP_MAX_SIZE) for the malloc arena of each thread that allocates: a program
# running its solve() in a thread of its own (the big-stack idiom) and holding 200 MB under a
# 256 MB limit ran out of address space at 16 + 64 + 200 MB, a MEMORY_LIMIT that neither a
# committed-memory judge (Codeforces) nor a cgroup one (DOMjudge) gives it. With one arena every
# thread allocates from the main one, which reserves what it holds. glibc reads the setting at
# exec (a static binary too).
ONE_MALLOC_ARENA = "glibc.malloc.arena_max=1"
_PYTHON_IGNORED = (signal.SIGPIPE, signal.SIGXFSZ)  # what a compiled program gets back as SIG_DFL
# execve errors that are the program's own doing: its image does not fit the memory limit
PROGRAM_EXEC_ERRNOS = frozenset({12, 7})  # ENOMEM, E2BIG


def exec_program(argv: list[str], env: dict[str, str], status_w: int, image_dir: str = "",
                 dialogue: bool = False) -> NoReturn:
    """Program mode: replace ourselves with a compiled program (or its runtime, e.g. the JVM).
    ``status_w`` is close-on-exec: a successful exec closes it, a failed one reports the errno
    on it so the job init can tell "the binary needs more memory than allowed" (ENOMEM: the
    program's own doing) from "the binary is missing" (infrastructure). When the binary is the
    program's own file (in ``image_dir``), there and executable, any other refusal is about what
    it holds (an ELF naming an interpreter that does not exist, which a C source can ask for with
    a ``.interp`` section): the program's runtime error, exit 127 and the reason on stderr, as a
    shell answers it.

    Under an address-space limit, glibc is told to keep one malloc arena (``ONE_MALLOC_ARENA``).

    The signals the Python runtime ignores (SIGPIPE and SIGXFSZ: CPython sets both to SIG_IGN at
    start, and an ignored signal stays ignored across execve) are set back to their default
    first, as a judge or a shell starts a program: a write past the file size limit, or to a
    closed pipe, kills it. Inherited, they turned that death into a write error the program
    could ignore and exit 0 after, paying a right answer printed before a failure that every
    reference judge ends as a runtime error. ``dialogue``: one side of an interactive pair
    keeps SIGPIPE ignored: problemtools' ``interactive`` counts a program's death by SIGPIPE
    as exit 0, the interactor deciding (the interactor itself never meets a closed pipe: the
    judge keeps the read end of its output open, sandbox/pairs.py, as problemtools does).
    """
    for sig in _PYTHON_IGNORED:
        if not (dialogue and sig == signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
    environ = dict(os.environ, **env)
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        tunables = environ.get("GLIBC_TUNABLES")
        environ["GLIBC_TUNABLES"] = f"{tunables}:{ONE_MALLOC_ARENA}" if tunables else ONE_MALLOC_ARENA
    try:
        os.execve(argv[0], argv, environ)
    except OSError as e:
        if (e.errno not in PROGRAM_EXEC_ERRNOS and image_dir and argv[0].startswith(image_dir + "/")
                and os.path.isfile(argv[0]) and os.access(argv[0], os.X_OK)):
            try:
                os.write(2, f"cannot execute {argv[0]}: {e.strerror or e}\n".encode(errors="replace"))
            finally:
                os._exit(127)
        try:
            os.write(status_w, f"{EXEC_FAILED}{e.errno or 0}:{e}".encode(errors="replace"))
        finally:
            os._exit(127)
    os._exit(127)
