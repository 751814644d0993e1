"""Both runners give programs the semantics of ``python3 solution.py``."""

from __future__ import annotations

import textwrap

from runner_helpers import run

from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.runner import CodeRunner


def src(code: str) -> str:
    return textwrap.dedent(code).lstrip()


def test_adds_two_numbers(runner: CodeRunner) -> None:
    res = run(runner, "a, b = map(int, input().split())\nprint(a + b)\n", "3 5\n")
    assert res.status == Verdict.OK and res.stdout == b"8\n" and res.exit_code == 0


def test_name_is_main_and_argv_is_the_script(runner: CodeRunner) -> None:
    res = run(runner, "import sys\nif __name__ == '__main__':\n    print('main', sys.argv[0])\n")
    assert res.stdout == b"main solution.py\n"


def test_stdio_are_real_file_descriptors(runner: CodeRunner) -> None:
    code = src("""
        import os, sys
        print(sys.stdin.fileno(), sys.stdout.fileno(), sys.stderr.fileno())
        print(os.fstat(0).st_size, os.read(0, 5))
    """)
    res = run(runner, code, b"hello world")
    assert res.stdout == b"0 1 2\n11 b'hello'\n"


def test_std_streams_look_like_the_interpreters_own(runner: CodeRunner) -> None:
    """The Codeforces FastIO template reads file.mode and fstat(fileno()).st_size."""
    code = src("""
        import os, sys
        print(sys.stdin.mode, sys.stdout.mode, sys.stderr.mode, sys.stdin.name, sys.stdout.name)
        print(sys.stdin.encoding, sys.stdout.errors, sys.stderr.errors, sys.stderr.line_buffering)
        print(os.fstat(sys.stdin.fileno()).st_size, sys.stdin.isatty(), sys.stdout.isatty())
    """)
    res = run(runner, code, b"12345")
    assert res.stdout.decode().splitlines() == [
        "r w w <stdin> <stdout>",
        "utf-8 surrogateescape backslashreplace True",
        "5 False False",
    ]


def test_fastio_template_reads_input_and_flushes_output(runner: CodeRunner) -> None:
    code = src("""
        import os, sys
        from io import BytesIO, IOBase
        BUFSIZE = 8192
        class FastIO(IOBase):
            newlines = 0
            def __init__(self, file):
                self._fd = file.fileno()
                self.buffer = BytesIO()
                self.writable = "x" in file.mode or "r" not in file.mode
                self.write = self.buffer.write if self.writable else None
            def read(self):
                while True:
                    b = os.read(self._fd, max(os.fstat(self._fd).st_size, BUFSIZE))
                    if not b:
                        break
                    ptr = self.buffer.tell()
                    self.buffer.seek(0, 2), self.buffer.write(b), self.buffer.seek(ptr)
                self.newlines = 0
                return self.buffer.read()
            def readline(self):
                while self.newlines == 0:
                    b = os.read(self._fd, max(os.fstat(self._fd).st_size, BUFSIZE))
                    self.newlines = b.count(b"\\n") + (not b)
                    ptr = self.buffer.tell()
                    self.buffer.seek(0, 2), self.buffer.write(b), self.buffer.seek(ptr)
                self.newlines -= 1
                return self.buffer.readline()
            def flush(self):
                if self.writable:
                    os.write(self._fd, self.buffer.getvalue())
                    self.buffer.truncate(0), self.buffer.seek(0)
        class IOWrapper(IOBase):
            def __init__(self, file):
                self.buffer = FastIO(file)
                self.flush = self.buffer.flush
                self.writable = self.buffer.writable
                self.write = lambda s: self.buffer.write(s.encode("ascii"))
                self.read = lambda: self.buffer.read().decode("ascii")
                self.readline = lambda: self.buffer.readline().decode("ascii")
        sys.stdin, sys.stdout = IOWrapper(sys.stdin), IOWrapper(sys.stdout)
        input = lambda: sys.stdin.readline().rstrip("\\r\\n")
        n = int(input())
        print(sum(map(int, input().split())) * n)
    """)
    res = run(runner, code, "2\n1 2 3\n")
    assert res.status == Verdict.OK, res.stderr[-400:]
    assert res.stdout == b"12\n"


def test_sys_exit_code_is_kept_with_output_written_before(runner: CodeRunner) -> None:
    res = run(runner, "print('partial')\nimport sys\nsys.exit(3)\n")
    assert res.exit_code == 3 and res.status == Verdict.RUNTIME_ERROR and res.stdout == b"partial\n"


def test_exit_builtin_and_sys_exit_none_are_success(runner: CodeRunner) -> None:
    assert run(runner, "print(1)\nexit()\nprint(2)\n").stdout == b"1\n"
    res = run(runner, "import sys\nprint('x')\nsys.exit()\n")
    assert res.status == Verdict.OK and res.exit_code == 0


def test_sys_exit_with_message_prints_it_and_exits_1(runner: CodeRunner) -> None:
    res = run(runner, "import sys\nsys.exit('bad input')\n")
    assert res.exit_code == 1 and b"bad input" in res.stderr


def test_uncaught_exception_shows_traceback_with_source_line(runner: CodeRunner) -> None:
    res = run(runner, "x = [1]\nprint(x[5])\n")
    assert res.status == Verdict.RUNTIME_ERROR and res.exit_code == 1
    assert b"IndexError" in res.stderr and b"print(x[5])" in res.stderr and b"solution.py" in res.stderr


def test_non_daemon_threads_are_joined_and_atexit_runs(runner: CodeRunner) -> None:
    code = src("""
        import atexit, threading, time
        atexit.register(lambda: print('atexit'))
        def late():
            time.sleep(0.2)
            print('thread done', flush=True)
        threading.Thread(target=late).start()
        print('main done')
    """)
    res = run(runner, code)
    assert res.status == Verdict.OK
    assert res.stdout.decode().splitlines() == ["main done", "thread done", "atexit"]


def test_a_fork_made_while_a_thread_runs_exits_normally(runner: CodeRunner) -> None:
    """threading's after-fork hook runs in the program's own forks (the fork server keeps it
    out of the forks that create test children): without it the forked child would count the
    parent's thread as alive and wait for it forever at exit."""
    code = src("""
        import os, threading
        release = threading.Event()
        worker = threading.Thread(target=release.wait)
        worker.start()
        pid = os.fork()
        if pid == 0:
            print('child sees', threading.active_count(), 'thread', flush=True)
        else:
            _, status = os.waitpid(pid, 0)
            release.set()
            worker.join()
            print('child exit status', status)
    """)
    res = run(runner, code, time_s=5, wall_s=10)
    assert res.status == Verdict.OK, (res.status, res.error, res.stderr[-500:])
    assert res.stdout.decode().splitlines() == ["child sees 1 thread", "child exit status 0"]


def test_deep_recursion_in_big_stack_thread(runner: CodeRunner) -> None:
    code = src("""
        import sys, threading
        threading.stack_size(2**26)
        sys.setrecursionlimit(10**6)
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)
        def main():
            print(depth(10**5))
        t = threading.Thread(target=main)
        t.start()
        t.join()
    """)
    res = run(runner, code)
    assert res.status == Verdict.OK, res.stderr[-500:]
    assert res.stdout == b"100000\n"


def test_binary_stdin_and_os_write(runner: CodeRunner) -> None:
    code = "import os, sys\ndata = sys.stdin.buffer.read()\nos.write(1, data[::-1])\n"
    assert run(runner, code, b"abc\x00\xff").stdout == b"\xff\x00cba"


def test_input_until_eof(runner: CodeRunner) -> None:
    code = src("""
        total = 0
        while True:
            try:
                total += int(input())
            except EOFError:
                break
        print(total)
    """)
    assert run(runner, code, "1\n2\n3\n4").stdout == b"10\n"


def test_big_ints_print_past_4300_digits(runner: CodeRunner) -> None:
    res = run(runner, "print(len(str(10**5000)))\nprint(int('9' * 5000) % 7)\n")
    assert res.status == Verdict.OK, res.stderr
    assert res.stdout.split()[0] == b"5001"


def test_raising_stack_rlimit_to_infinity_does_not_crash(runner: CodeRunner) -> None:
    code = src("""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_STACK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        sys.setrecursionlimit(10**5)
        print('ok')
    """)
    res = run(runner, code)
    assert res.status == Verdict.OK and res.stdout == b"ok\n", res.stderr


def test_200_mb_list_fits_under_512_mb(runner: CodeRunner) -> None:
    res = run(runner, "a = [0] * (25 * 10**6)\nprint(len(a))\n", memory_mb=512, time_s=5)
    assert res.status == Verdict.OK, (res.status, res.error, res.stderr[-300:])
    assert res.stdout == b"25000000\n"


def test_five_megabytes_of_output_is_accepted(runner: CodeRunner) -> None:
    res = run(runner, "import sys\nline = 'x' * 99 + '\\n'\nsys.stdout.write(line * 52429)\n")
    assert res.status == Verdict.OK and len(res.stdout) == 100 * 52429 and not res.stdout_truncated


def test_stderr_is_captured_separately(runner: CodeRunner) -> None:
    res = run(runner, "import sys\nprint('out')\nprint('err', file=sys.stderr)\n")
    assert res.stdout == b"out\n" and res.stderr == b"err\n"


def test_syntax_error_is_reported_at_load_and_nothing_runs(runner: CodeRunner) -> None:
    err = runner.load("print('a'\n")
    assert err is not None and "SyntaxError" in err
    assert runner.run(b"", __import__("cpfleet.sandbox.runner").sandbox.runner.Limits()).status == Verdict.INTERNAL


def test_utf8_text_round_trips(runner: CodeRunner) -> None:
    res = run(runner, "s = input()\nprint(s[::-1], len(s))\n", "héllo✓\n")
    assert res.stdout.decode() == "✓olléh 6\n"


def test_random_differs_between_tests_like_fresh_interpreters(runner: CodeRunner) -> None:
    runner.load("import random\nprint(random.getrandbits(64))\n")
    from cpfleet.sandbox.runner import Limits

    outs = {runner.run(b"", Limits()).stdout for _ in range(3)}
    assert len(outs) == 3


def test_custom_writer_is_flushed_by_its_finalizer_at_exit(runner: CodeRunner) -> None:
    """CPython collects __main__ at shutdown; IOBase.__del__ closes, hence flushes, the writer."""
    code = src("""
        from io import IOBase, BytesIO
        import os
        class W(IOBase):
            def __init__(s): s.b = BytesIO()
            def write(s, x): s.b.write(x.encode())
            def flush(s): os.write(1, s.b.getvalue())
        w = W(); w.write('hello\\n')
    """)
    res = run(runner, code)
    assert res.stdout == b"hello\n" and res.exit_code == 0


def test_closing_stdout_is_not_a_flush_failure(runner: CodeRunner) -> None:
    res = run(runner, "import sys\nwith sys.stdout as f:\n    print('hello', file=f)\n")
    assert res.stdout == b"hello\n" and res.exit_code == 0 and res.status == Verdict.OK


def test_finalizers_of_main_objects_run_with_globals_intact(runner: CodeRunner) -> None:
    code = src("""
        import os
        class D:
            def __del__(self):
                os.write(1, b"del ran\\n")
        _x = D()
        y = D()
    """)
    assert run(runner, code).stdout == b"del ran\ndel ran\n"


def test_failing_stdout_flush_at_exit_is_status_120(runner: CodeRunner) -> None:
    code = src("""
        import sys
        class Bad:
            def write(self, s): return len(s)
            def flush(self): raise OSError('disk full')
        sys.stdout = Bad()
        print('x')
    """)
    res = run(runner, code)
    assert res.exit_code == 120


def test_atexit_writer_to_the_original_stdout_is_flushed(runner: CodeRunner) -> None:
    code = src("""
        import atexit, io, sys
        buf = io.StringIO()
        sys.stdout = buf
        atexit.register(lambda: sys.__stdout__.write(buf.getvalue()))
        print(42)
    """)
    assert run(runner, code).stdout == b"42\n"


def test_stdio_reopened_by_name_reaches_the_judge(runner: CodeRunner) -> None:
    """``open('/dev/stdout')``, ``/proc/self/fd/1`` or C's ``freopen("/dev/stdout", ...)`` open the
    test's own pipes anew, as any judge lets a program: the pipes were root's (mode 0600), the
    open failed with EACCES under the slot's uid and a correct answer written there was lost."""
    code = src("""
        a, b = map(int, open('/dev/stdin').read().split())
        with open('/dev/stdout', 'w') as out:
            out.write(f'{a + b}\\n')
        with open('/proc/self/fd/1', 'w') as out:
            out.write(f'{a * b}\\n')
        with open('/dev/stderr', 'w') as err:
            err.write('note\\n')
    """)
    res = run(runner, code, "3 5\n")
    assert (res.status, res.stdout, res.stderr) == (Verdict.OK, b"8\n15\n", b"note\n")


def test_a_stream_whose_closed_raises_is_flushed_at_exit_as_python_does(runner: CodeRunner) -> None:
    """CPython's exit flush takes a ``closed`` that raises for "open" and flushes; the fork
    server's must not turn it into a failure of the harness (status 1 for a correct program)."""
    code = src("""
        import os, sys
        class Writer:
            def __init__(self): self.held = []
            def write(self, s): self.held.append(s); return len(s)
            def flush(self): os.write(1, ''.join(self.held).encode()); self.held = []
            @property
            def closed(self): raise RuntimeError('no')
        sys.stdout = Writer()
        print('hello')
    """)
    res = run(runner, code)
    assert (res.status, res.exit_code, res.stdout) == (Verdict.OK, 0, b"hello\n")
