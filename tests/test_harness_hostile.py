"""Hostile programs against the judging harness, through ``cpfleet.judge_locally`` (the path the
worker and ``cpfleet judge`` take): whatever a program does to itself, its test directory or
its output is judged as the program's own doing (a verdict, reward 0 unless every output is
right), never an infrastructure error (INTERNAL, reward None) and never an unearned reward."""

from __future__ import annotations

import itertools
import json
import keyword
import string

import msgpack
import pytest

import cpfleet
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages
from cpfleet.sandbox.runner import CodeRunner, make_runner

SUM = Problem.from_dict({
    "id": "sum", "time_limit_s": 2,
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}, {"input": "100 23\n", "output": "123\n"}],
})
READ = "import os, sys, signal\na, b = map(int, input().split())\n"


def judge(runner: CodeRunner, code: str) -> cpfleet.JobResult:
    result = cpfleet.judge_locally(SUM, f"```python\n{code}\n```", runner)
    assert not result.infra_error, result.infra_message
    return result


# Extended attributes on the test directory: listing more than 64 KiB of names fails with
# E2BIG, and the job init's check that the directory is pristine for the next test listed them
# unguarded, so the next test was reported INTERNAL (reward None) for the program's own act.
XATTRS = READ + """
for i in range(2000):
    try:
        os.setxattr(".", "user.%05d" % i + "x" * 240, b"1")
    except OSError:
        break
"""


@pytest.mark.parametrize(("answer", "verdict", "reward"), [("a + b", Verdict.OK, 1.0),
                                                           ("a - b", Verdict.WRONG_ANSWER, 0.0)])
def test_extended_attributes_on_the_test_directory_are_the_programs_business(
        runner: CodeRunner, answer: str, verdict: Verdict, reward: float) -> None:
    result = judge(runner, XATTRS + f"print({answer})\n")
    assert (result.verdict, result.reward) == (verdict, reward)


# Output that is not UTF-8: decoded with errors replaced, every invalid byte became U+FFFD, so a
# program printing any invalid byte matched an expected output holding U+FFFD (a dataset
# decoded lossily has them), where every judge compares bytes.
REPLACEMENT = Problem.from_dict({"id": "fffd", "hidden_tests": [{"input": "\n", "output": "a\ufffdb\n"}]})


@pytest.mark.parametrize(("raw", "verdict"), [(b"a\xffb\n", Verdict.WRONG_ANSWER), (b"a\xed\xa0\x80b\n", Verdict.WRONG_ANSWER),
                                              (b"a\xef\xbf\xbdb\n", Verdict.OK)])
def test_bytes_that_are_not_utf8_never_match_a_replacement_character(runner: CodeRunner, raw: bytes,
                                                                       verdict: Verdict) -> None:
    result = cpfleet.judge_locally(REPLACEMENT, f"```python\nimport sys\nsys.stdout.buffer.write({raw!r})\n```", runner,
                                   mode="full")
    assert (result.verdict, result.infra_error) == (verdict, False)
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")
    msgpack.packb(result.to_dict(), use_bin_type=True)


def test_invalid_utf8_in_a_failing_output_is_shown_replaced(runner: CodeRunner) -> None:
    result = judge(runner, READ + "sys.stdout.buffer.write(b'\\xff\\xfe ' + str(a + b).encode() + b'\\n')\n")
    assert result.verdict == Verdict.WRONG_ANSWER
    assert "\ufffd\ufffd 3" in result.observation
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")
    msgpack.packb(result.to_dict(), use_bin_type=True)


# A syntax error on a long line: the error text (the line, and a caret line as wide) went back
# from the job init in one message, past the 64 KiB a message holds, and its cut reply was
# INTERNAL ("marshal data too short") instead of the program's COMPILE_ERROR.
@pytest.mark.parametrize("source", ["x = " + "1+" * 50_000 + ")\n", "x = " + "a" * 100_000 + "(\n",
                                    "s = '" + "x" * 100_000 + "\n"])
@pytest.mark.parametrize("fence", ["python", "pypy3"])
def test_a_syntax_error_on_a_very_long_line_is_a_compile_error(runner: CodeRunner, source: str, fence: str) -> None:
    if fence == "pypy3" and languages.missing_tools("pypy3"):
        pytest.skip("pypy3 not installed here")
    result = cpfleet.judge_locally(SUM, f"```{fence}\n{source}```", runner)
    assert (result.verdict, result.infra_error) == (Verdict.COMPILE_ERROR, False), result.infra_message
    assert "Error" in result.observation and len(result.observation) < 4000


# Signals a program sends itself are its own exit, named for what they are: a SIGXCPU it raises
# after a few milliseconds of CPU is not the CPU rlimit firing (a TIME_LIMIT, not even cached).
@pytest.mark.parametrize("sig", ["SIGXCPU", "SIGSEGV", "SIGKILL", "SIGABRT", "SIGTERM"])
def test_a_signal_a_program_sends_itself_is_its_runtime_error(runner: CodeRunner, sig: str) -> None:
    result = judge(runner, READ + f"print(a + b, flush=True)\nos.kill(os.getpid(), signal.{sig})\n")
    assert (result.verdict, result.reward) == (Verdict.RUNTIME_ERROR, 0.0), result.observation


# An output near the stdout cap, judged by a checker program: its files (input, answer and this
# output) are placed in the checker's test directory, which was only as large as the files a
# test may write (64 MiB), so a legal output made placing them fail: INTERNAL, reward None.
SPLIT_CHECKER = ("import sys\ninp, exp, got = sys.argv[1:4]\n"
                 "print(1 if open(exp).read().split() == open(got).read().split() else 0)\n")
BIG_INPUT = Problem.from_dict({"id": "big", "checker": {"type": "python", "source": SPLIT_CHECKER}, "time_limit_s": 5,
                               "hidden_tests": [{"input": "x" * (2 << 20) + "\n", "output": "1\n"}]})


@pytest.mark.parametrize(("first", "verdict"), [("1", Verdict.OK), ("2", Verdict.WRONG_ANSWER)])
def test_an_output_near_the_stdout_cap_fits_beside_a_checkers_other_files(runner: CodeRunner, first: str,
                                                                          verdict: Verdict) -> None:
    code = f"import sys\nsys.stdout.write('{first}' + ' ' * ((64 << 20) - 3) + '\\n')\n"
    result = cpfleet.judge_locally(BIG_INPUT, f"```python\n{code}```", runner)
    assert (result.verdict, result.infra_error) == (verdict, False), result.infra_message


# The fork server ends a test child the way the interpreter would, through os._exit: a program
# that replaced os._exit (or sys.exit) got the harness's exit skipped and ran on into the job
# init's code, a RUNTIME_ERROR where `python3 solution.py` (the subprocess runner) exits 0.
PATCH_EXIT = "os._exit = lambda *a: None\nsys.exit = lambda *a: None\nos.abort = lambda: None\n"


@pytest.mark.parametrize(("answer", "verdict"), [("a + b", Verdict.OK), ("a - b", Verdict.WRONG_ANSWER)])
def test_a_program_replacing_os_exit_ends_as_python_would(runner: CodeRunner, answer: str, verdict: Verdict) -> None:
    assert judge(runner, READ + PATCH_EXIT + f"print({answer})\n").verdict == verdict
    fn = Problem.from_dict({"id": "fn", "fn_name": "add", "hidden_tests": [{"input": "[5, 7]", "output": "12"}]})
    result = cpfleet.judge_locally(fn, f"```python\nimport os, sys\n{PATCH_EXIT}def add(a, b):\n    return {answer}\n```",
                                   runner)
    assert (result.verdict, result.infra_error) == (verdict, False)


# A source whose compile takes minutes: CPython compiles one f-string of n fields in time
# quadratic in n (~1 MB of `{a}`: past a minute here). The fork server's job init compiled it
# with no CPU limit of its own, the runner stopped waiting after 60 s and the job was INTERNAL
# (reward None) for the program's own doing, the worker's CPU burnt all along (twice, with a
# spare job); it is now the program's COMPILE_ERROR at the compile time limit.
SLOW_COMPILE = "a, b = map(int, input().split())\nx = f'" + "{a}" * 330_000 + "'\nprint(a + b)\n"


@pytest.mark.slow
def test_a_source_that_takes_minutes_to_compile_is_a_compile_error(runner: CodeRunner) -> None:
    result = judge(runner, SLOW_COMPILE)
    assert (result.verdict, result.reward) == (Verdict.COMPILE_ERROR, 0.0)
    assert "compile time limit" in result.observation

# A compile's time is not bounded by the source's size. CPython checks a call's keyword names
# pairwise (quadratic in their count) and compiles a ``finally`` body once per way out of its
# ``try``, so each nesting level doubles the compiles of what it holds: 58 kB, a call of 10k
# keywords eight ``finally`` blocks deep, compile for minutes. Only sources past 256 KiB were
# compiled under the compile time limit; the job init compiled this one with no limit and the
# runner gave up after 120 s: INTERNAL (reward None) for the program's own doing.
def _keywords_deep_in_finally(keywords: int, depth: int) -> str:
    names = [n for n in ("".join(t) for size in (1, 2, 3) for t in itertools.product(string.ascii_letters, repeat=size))
             if not keyword.iskeyword(n) and not keyword.issoftkeyword(n)][:keywords]
    lines = ["a, b = map(int, input().split())", "print(a + b)", "if a < 0:"]
    for level in range(1, depth + 1):
        lines += ["    " * level + "try:", "    " * level + "    pass", "    " * level + "finally:"]
    lines.append("    " * (depth + 1) + "print(" + ",".join(f"{n}=0" for n in names) + ")")
    return "\n".join(lines) + "\n"


SMALL_SLOW_COMPILE = _keywords_deep_in_finally(10_000, 8)


@pytest.mark.slow
def test_a_small_source_that_takes_minutes_to_compile_is_a_compile_error(runner: CodeRunner) -> None:
    assert len(SMALL_SLOW_COMPILE) < 64 << 10
    result = judge(runner, SMALL_SLOW_COMPILE)
    assert (result.verdict, result.reward) == (Verdict.COMPILE_ERROR, 0.0)
    assert "compiling the program" in result.observation



# Code objects nested past marshal's depth limit (a valid program: ~1000 nested lambdas). A spare
# job forks its first test's child before the program arrives and sends it the compiled code by
# marshal, which raised ValueError in the job init: the init died and the job was INTERNAL
# (reward None) for a right program and a wrong one alike, a masked sample a policy could learn.
NESTED_CODE = "f = " + "lambda: " * 1000 + "1\n" + READ


@pytest.mark.parametrize(("answer", "verdict", "reward"), [("a + b", Verdict.OK, 1.0),
                                                           ("a - b", Verdict.WRONG_ANSWER, 0.0)])
def test_code_nested_past_marshals_limit_is_judged_on_a_spare_job_forked_ahead(
        fork_runner: CodeRunner, answer: str, verdict: Verdict, reward: float) -> None:
    for _ in range(2):  # the spare job is made between jobs, as a worker does after each reply
        fork_runner.prepare_next()
        result = judge(fork_runner, f"{NESTED_CODE}print({answer})")
        assert (result.verdict, result.reward) == (verdict, reward)


# The fork server compiles a Python program in the job init, whose stderr is the judging
# process's own (the worker's log): each SyntaxWarning the compile raised (``x is 1``, one per
# line) was written there, megabytes of log per job at a program's will.
def test_a_programs_compile_warnings_stay_out_of_the_judges_own_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    runner = make_runner("forkserver")  # started here, so its processes write to the captured stderr
    try:
        result = judge(runner, "".join(f"if {i} is {i}: pass\n" for i in range(50)) + READ + "print(a + b)")
    finally:
        runner.close()
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0)
    assert "SyntaxWarning" not in capfd.readouterr().err


# Defence that holds: the right answer printed (and flushed) before the program fails is no pass
# under either reward shape: the exit status and the limits decide before the output is compared.
AFTER_PRINT = READ + "print(a + b, flush=True)\n"


@pytest.mark.parametrize("shape", ["fraction", "all_or_nothing"])
@pytest.mark.parametrize(("then", "verdict"), [("sys.exit(1)", Verdict.RUNTIME_ERROR),
                                               ("os.kill(os.getpid(), signal.SIGSEGV)", Verdict.RUNTIME_ERROR),
                                               ("os.kill(1, signal.SIGKILL)", Verdict.RUNTIME_ERROR),
                                               ("x = bytearray(1 << 40)", Verdict.MEMORY_LIMIT)],
                         ids=["exit-1", "segv", "kill-init", "memory"])
def test_a_right_answer_printed_before_failing_earns_nothing(runner: CodeRunner, then: str, verdict: Verdict,
                                                            shape: str) -> None:
    result = cpfleet.judge_locally(SUM, f"```python\n{AFTER_PRINT}{then}\n```", runner, reward_shape=shape)
    assert not result.infra_error, result.infra_message
    assert (result.verdict, result.reward, result.hidden.passed) == (verdict, 0.0, 0)


# The exit status of a SystemExit holding an int: the fork server took ``code & 0xFF`` of any int,
# so `sys.exit(2**64)` (past a C long: `python3 solution.py` exits 255) or an int subclass whose
# ``__and__`` answers 0 (python3 reads the int's own value, 1) ended with status 0, and the right
# answer printed before was paid where the reference interpreter fails the run. `sys.exit(256)`
# is status 0 under python3 too, and stays a pass.
SUBCLASS_EXIT = ("class I(int):\n    def __and__(self, other): return 0\n    __rand__ = __and__\n"
                 "    def __index__(self): return 0\nsys.exit(I(1))")


@pytest.mark.parametrize(("then", "verdict"), [("sys.exit(2**64)", Verdict.RUNTIME_ERROR),
                                               ("sys.exit(-2**64)", Verdict.RUNTIME_ERROR),
                                               (SUBCLASS_EXIT, Verdict.RUNTIME_ERROR),
                                               ("sys.exit(256)", Verdict.OK)],
                         ids=["past-c-long", "below-c-long", "int-subclass", "256"])
def test_an_exit_status_is_the_one_python3_ends_with(runner: CodeRunner, then: str, verdict: Verdict) -> None:
    result = judge(runner, AFTER_PRINT + then + "\n")
    assert (result.verdict, result.reward) == (verdict, 1.0 if verdict == Verdict.OK else 0.0)


# An exception raised while the interpreter joins the program's threads at exit (the program
# replaced ``threading._shutdown``): CPython and PyPy print it as ignored and keep the exit
# status, the fork server took a SystemExit(0) there for the status, and a program that failed
# with an uncaught exception after printing the right answer ended with status 0 and was paid.
SHUTDOWN_EXIT_0 = ("import threading\ndef shutdown():\n    raise SystemExit(0)\nthreading._shutdown = shutdown\n"
                   "raise ValueError('after the answer')\n")


def test_an_exit_forced_at_thread_shutdown_does_not_undo_a_failure(runner: CodeRunner) -> None:
    result = judge(runner, AFTER_PRINT + SHUTDOWN_EXIT_0)
    assert (result.verdict, result.reward) == (Verdict.RUNTIME_ERROR, 0.0)
    assert "ValueError: after the answer" in result.observation


# Interpreter state a program rebinds after printing its answer, then failing: the fork server's
# harness ends the run in the program's own interpreter and read that state where python3's exit
# path, written in C, never does (a builtin, ``sys.maxsize``, ``sys.modules``, ``sys.exc_info``,
# ``atexit._run_exitfuncs``, ``gc.collect``, and the ``os`` and ``resource`` calls that place the
# source for a traceback), so a hook put there exited 0 and the answer was paid where python3
# exits 1 (255 for ``sys.exit(2**64)``).
EXIT_0 = "import atexit, builtins, gc, resource\nexit_0 = lambda *args, **kwargs: os._exit(0)\n"
REBOUND_THEN_FAILED = {
    "print": "builtins.print = exit_0\nsys.exit('failed')\n",
    "isinstance": "builtins.isinstance = exit_0\nsys.exit(3)\n",
    "maxsize": "sys.maxsize = 2**80\nsys.exit(2**64)\n",
    "modules": "class Modules(dict):\n    get = pop = exit_0\nsys.modules = Modules(sys.modules)\nraise ValueError\n",
    "exc_info": "sys.exc_info = exit_0\nraise ValueError\n",
    "atexit": "atexit._run_exitfuncs = exit_0\nraise ValueError\n",
    "gc": "gc.collect = exit_0\nraise ValueError\n",
    "os.open": "os.open = exit_0\nraise ValueError\n",
    "os.path.join": "os.path.join = exit_0\nraise ValueError\n",
    "os.close": "os.close = exit_0\nraise ValueError\n",
    "resource.getrlimit": "resource.getrlimit = exit_0\nraise ValueError\n",
}


@pytest.mark.parametrize("then", REBOUND_THEN_FAILED.values(), ids=REBOUND_THEN_FAILED.keys())
def test_interpreter_state_a_program_rebinds_does_not_undo_its_failure(runner: CodeRunner, then: str) -> None:
    result = judge(runner, AFTER_PRINT + EXIT_0 + then)
    assert (result.verdict, result.reward) == (Verdict.RUNTIME_ERROR, 0.0), result.observation


# ``sys.executable`` in a test: the fork server's interpreter may be a virtualenv's link, which the
# sandbox does not show, and a program running it (subprocess, multiprocessing's spawn) failed
# with FileNotFoundError where ``python3 solution.py`` runs it.
RUN_EXECUTABLE = READ + "import subprocess\nsys.exit(subprocess.run([sys.executable, '-c', f'print({a} + {b})']).returncode)\n"


def test_a_program_can_run_its_own_interpreter(runner: CodeRunner) -> None:
    result = judge(runner, RUN_EXECUTABLE)
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation


# ``python3 solution.py`` flushes sys.stderr and sys.stdout as soon as the main module ends,
# returned or raised (CPython's flush_io, before PyErr_Print), and only then joins its threads
# and runs its atexit handlers. The fork server flushed after those: an
# atexit handler that writes the right answer raw and leaves with os._exit(0) discarded a wrong
# answer still in the buffer and was paid, where python3 prints both (a WRONG_ANSWER); and an
# answer printed before an atexit handler or a thread's os._exit(0) was lost, where python3 shows it.
FLUSHED_AT_THE_MAIN_MODULES_END = {
    "wrong-answer-then-raw-right-answer-at-exit": (
        READ + "import atexit\nprint(a - b)\natexit.register(lambda: (os.write(1, b'%d\\n' % (a + b)), os._exit(0)))\n",
        Verdict.WRONG_ANSWER, 0.0),
    "answer-then-exception-then-exit-0-at-exit": (
        READ + "import atexit\nprint(a + b)\natexit.register(lambda: os._exit(0))\nraise ValueError\n", Verdict.OK, 1.0),
    "answer-then-an-excepthook-that-exits-0": (
        READ + "print(a + b)\nsys.excepthook = lambda *args: os._exit(0)\nraise ValueError\n", Verdict.OK, 1.0),
    "answer-then-a-thread-exits-0": (
        READ + "import threading, time\ndef later():\n    time.sleep(0.1)\n    os._exit(0)\n"
               "threading.Thread(target=later).start()\nprint(a + b)\n", Verdict.OK, 1.0),
}


@pytest.mark.parametrize(("code", "verdict", "reward"), FLUSHED_AT_THE_MAIN_MODULES_END.values(),
                         ids=FLUSHED_AT_THE_MAIN_MODULES_END.keys())
def test_the_std_streams_are_flushed_when_the_main_module_ends_as_python3_does(
        runner: CodeRunner, code: str, verdict: Verdict, reward: float) -> None:
    result = judge(runner, code)
    assert (result.verdict, result.reward) == (verdict, reward), result.observation


# A std stream the program lets go (``sys.stdout = sys.__stdout__ = None``, or both rebound to a
# stream of its own) is flushed by its finalizer that moment under ``python3 solution.py``. The fork
# server kept the streams it built alive, so their buffer was never written: a wrong answer printed
# before was dropped and a right one written raw after it was paid, and a right answer was lost.
LET_GO = {
    "wrong-answer-then-streams-dropped-then-raw-right-answer": (
        READ + "print(a - b)\nsys.stdout = sys.__stdout__ = None\nos.write(1, b'%d\\n' % (a + b))\n",
        Verdict.WRONG_ANSWER, 0.0),
    "wrong-answer-then-streams-rebound-then-raw-right-answer": (
        READ + "print(a - b)\nsys.stdout = sys.__stdout__ = open(1, 'w', closefd=False)\nos.write(1, b'%d\\n' % (a + b))\n",
        Verdict.WRONG_ANSWER, 0.0),
    "answer-then-streams-dropped": (READ + "print(a + b)\nsys.stdout = sys.__stdout__ = None\n", Verdict.OK, 1.0),
}


@pytest.mark.parametrize(("code", "verdict", "reward"), LET_GO.values(), ids=LET_GO.keys())
def test_a_std_stream_the_program_lets_go_is_flushed_then_as_python3_does(
        runner: CodeRunner, code: str, verdict: Verdict, reward: float) -> None:
    result = judge(runner, code)
    assert (result.verdict, result.reward) == (verdict, reward), result.observation


# The std streams a test starts with are built once, in the zygote, whose stdout is /dev/null: a
# stream reads whether its file is seekable when it is made, so ``sys.stdout.seekable()`` was True
# in a test, whose stdout is a pipe (False under ``python3 solution.py``).
SEEKABLE = READ + "print(a + b if (sys.stdin.seekable(), sys.stdout.seekable(), sys.stderr.seekable()) == (True, False, False) else 0)\n"


def test_the_std_streams_say_what_a_test_s_files_are(runner: CodeRunner) -> None:
    result = judge(runner, SEEKABLE)
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation


# An uncaught exception whose report fails (fd 2 closed, a ``sys.excepthook`` that raises): the
# harness's last-resort write to fd 2 raised in turn, the exception unwound out of the fork
# server's test child into the job init's frames it was forked in, and their ``finally`` exited
# 0: the answer printed before was paid where python3 exits 1. A function-call program that
# wrote its value on the result channel itself (fd 3) and then failed the same way was paid too.
UNREPORTABLE = "os.close(2)\ndef hook(*args):\n    raise RuntimeError('hook')\nsys.excepthook = hook\nraise ValueError\n"
UNREPORTABLE_CALL = ("import os\ndef add(a, b):\n    os.write(3, str(a + b).encode())\n    os.close(2)\n"
                     "    raise ValueError\n")


def test_an_exception_whose_report_fails_is_still_a_failure(runner: CodeRunner) -> None:
    result = judge(runner, AFTER_PRINT + UNREPORTABLE)
    assert (result.verdict, result.reward) == (Verdict.RUNTIME_ERROR, 0.0)
    fn = Problem.from_dict({"id": "fn", "fn_name": "add", "hidden_tests": [{"input": "[5, 7]", "output": "12"}]})
    called = cpfleet.judge_locally(fn, f"```python\n{UNREPORTABLE_CALL}```", runner)
    assert (called.verdict, called.reward, called.infra_error) == (Verdict.RUNTIME_ERROR, 0.0, False)


# A program that puts None in ``sys.modules`` for a module the harness imported after the program
# ran (``gc`` at the fork server's exit and in the function-call encoding, ``json`` for the
# returned value, ``ast`` where the primeintellect rules find the callee on the exec path): the
# import raised and a right answer was a RUNTIME_ERROR, where ``python3 solution.py`` and every
# reference harness (none of them imports those after the program) end it as printed or returned.
HIDDEN_MODULES = ("gc", "json", "ast")


@pytest.mark.parametrize("module", HIDDEN_MODULES)
@pytest.mark.parametrize(("answer", "verdict"), [("a + b", Verdict.OK), ("a - b", Verdict.WRONG_ANSWER)])
def test_a_module_the_program_hides_from_imports_leaves_its_verdict_as_python3_gives_it(
        runner: CodeRunner, module: str, answer: str, verdict: Verdict) -> None:
    hide = f"sys.modules[{module!r}] = None\n"
    printed = judge(runner, READ + hide + f"print({answer})\n")
    assert (printed.verdict, printed.reward) == (verdict, 1.0 if verdict == Verdict.OK else 0.0), printed.observation
    for semantics in ("python", "primeintellect"):
        fn = Problem.from_dict({"id": f"fn-{semantics}", "fn_name": "add", "fn_semantics": semantics,
                                "hidden_tests": [{"input": "[5, 7]", "output": "12"}]})
        called = cpfleet.judge_locally(fn, f"```python\nimport sys\n{hide}def add(a, b):\n    return {answer}\n```",
                                       runner)
        assert (called.verdict, called.reward, called.infra_error) == (verdict, float(verdict == Verdict.OK), False), \
            (semantics, called.observation)


# ``__builtins__`` in the program's ``__main__`` is the builtins module under ``python3
# solution.py``; the fork server gave the module's dict (what an imported module holds), so a
# program calling ``__builtins__.abs`` or reading ``__builtins__.__dict__`` failed (a right answer's
# RUNTIME_ERROR) where python3 ran it.
BUILTINS_MODULE = READ + "import builtins\nassert __builtins__ is builtins\nprint(__builtins__.abs(a + b))\n"


def test_builtins_in_main_is_the_builtins_module_as_python3_has_it(runner: CodeRunner) -> None:
    result = judge(runner, BUILTINS_MODULE)
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation


# A SystemExit raised by the program's own sys.excepthook: CPython's PyErr_Print exits with its
# status (handle_system_exit), so ``python3 solution.py`` ends a right answer with status 0 there
# and the fork server ended it 1. Only the hook's SystemExit counts: one raised by anything else
# the harness runs to print the traceback (a traceback module the program patched, used when it
# left a solution.py of its own in the way) is the report failing, status 1 as before.
HOOK_EXITS = "def hook(*args):\n    raise SystemExit({code})\nsys.excepthook = hook\nraise ValueError\n"
PATCHED_PRINTER_EXITS_0 = ("import traceback\ntraceback.print_exception = lambda *a, **k: sys.exit(0)\n"
                           "open('solution.py', 'w').write('taken')\nraise ValueError\n")


@pytest.mark.parametrize(("then", "verdict"), [(HOOK_EXITS.format(code=0), Verdict.OK),
                                               (HOOK_EXITS.format(code=3), Verdict.RUNTIME_ERROR),
                                               (HOOK_EXITS.format(code="'failed'"), Verdict.RUNTIME_ERROR),
                                               (PATCHED_PRINTER_EXITS_0, Verdict.RUNTIME_ERROR)],
                         ids=["hook-exits-0", "hook-exits-3", "hook-exits-with-text", "patched-printer-exits-0"])
def test_an_excepthook_that_exits_ends_the_run_as_python3_does(runner: CodeRunner, then: str, verdict: Verdict) -> None:
    result = judge(runner, AFTER_PRINT + then)
    assert (result.verdict, result.reward) == (verdict, 1.0 if verdict == Verdict.OK else 0.0), result.observation


# After an uncaught exception (or one raised while threads are joined at exit) the fork server's
# report ran the program's code where python3's, written in C, runs none: it imported linecache
# and traceback after the program, when the program's own solution.py stood where the source is
# placed for the C printer (``sys.path[0]`` is the program's directory, and ``sys.modules`` its to
# fill), and it set and read ``__traceback__`` by name (a property of the exception's class).
# Each ran the program's ``os._exit(0)`` there: a failure with the right answer printed was paid.
EXITS_0 = "class Exits0:\n    def __getattr__(self, name):\n        os._exit(0)\n"
SHUTDOWN_RAISES = "import threading\ndef shutdown():\n    raise ValueError('at shutdown')\nthreading._shutdown = shutdown\n"
REPORT_RUNS_THE_PROGRAM = {
    "planted-modules": EXITS_0 + "sys.modules['traceback'] = sys.modules['linecache'] = Exits0()\n"
                       "open('solution.py', 'w').write('taken')\nraise ValueError\n",
    "planted-file": "open('linecache.py', 'w').write('import os\\nos._exit(0)\\n')\n"
                    "open('solution.py', 'w').write('taken')\nraise ValueError\n",
    "planted-modules-at-shutdown": EXITS_0 + SHUTDOWN_RAISES + "sys.modules['traceback'] = sys.modules['linecache'] = "
                                   "Exits0()\nraise ValueError\n",
    "traceback-property": "class E(Exception):\n    __traceback__ = property(lambda s: None, lambda s, v: os._exit(0))\n"
                          "raise E\n",
    "traceback-property-at-shutdown": "import threading\nclass E(Exception):\n"
                                      "    __traceback__ = property(lambda s: os._exit(0), lambda s, v: None)\n"
                                      "def shutdown():\n    raise E\nthreading._shutdown = shutdown\nraise ValueError\n",
}


@pytest.mark.parametrize("then", REPORT_RUNS_THE_PROGRAM.values(), ids=REPORT_RUNS_THE_PROGRAM.keys())
def test_the_report_of_a_failure_runs_none_of_the_programs_code(runner: CodeRunner, then: str) -> None:
    result = judge(runner, AFTER_PRINT + then)
    assert (result.verdict, result.reward) == (Verdict.RUNTIME_ERROR, 0.0), result.observation
    assert "sandbox" not in result.observation  # the harness's own frames are not shown
