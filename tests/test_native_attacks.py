"""The sandbox's attack tests in C and C++: a compiled program gets the same confinement as a
Python test (fork bomb, memory bomb, output floods, setsid orphans, refused system calls, files
of other tests), on every runner."""

from __future__ import annotations

import resource
import signal
from collections.abc import Iterator

import pytest

from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages, programs
from cpfleet.sandbox.runner import CodeRunner, Limits, RunResult
from cpfleet.sandbox.runners import make_runner

pytestmark = pytest.mark.skipif(bool(languages.missing_tools("cpp") or languages.missing_tools("c")),
                                reason="g++/gcc not installed here")


def load(runner: CodeRunner, language: str, source: str) -> None:
    built = programs.compile_program(runner, language, {"a." + ("c" if language == "c" else "cpp"): source},
                                     ["a." + ("c" if language == "c" else "cpp")])
    assert built.ok, built.diagnostics
    assert built.image is not None
    runner.load_program(built.image)


def run(runner: CodeRunner, language: str, source: str, stdin: bytes = b"", **limits: object) -> RunResult:
    load(runner, language, source)
    return runner.run(stdin, Limits(**limits))  # type: ignore[arg-type]


@pytest.fixture
def sane(runner: CodeRunner) -> Iterator[None]:
    """After each attack the runner still judges an ordinary program correctly."""
    yield
    rr = run(runner, "c", "#include <stdio.h>\nint main(void){ puts(\"ok\"); return 0; }")
    assert (rr.status, rr.stdout) == (Verdict.OK, b"ok\n")


FORK_BOMB = """#include <unistd.h>
int main(void){ for(;;) fork(); }
"""


@pytest.mark.slow
@pytest.mark.parametrize("language", ["c", "cpp"])
def test_fork_bomb_is_contained(runner: CodeRunner, language: str, sane: None) -> None:
    rr = run(runner, language, FORK_BOMB, time_s=1, wall_factor=1.0, wall_slack_s=1.0)
    assert rr.status in (Verdict.TIME_LIMIT, Verdict.RUNTIME_ERROR)


@pytest.mark.slow
def test_memory_bomb_in_many_processes_is_bounded(runner: CodeRunner, sane: None) -> None:
    # 8 processes of 60 MB each under a 128 MB limit: the cgroup (or each process's rlimit) stops them
    src = """#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
int main(void){ for (int i = 0; i < 8; i++) if (fork() == 0) { volatile char *p = malloc(60 << 20);
  if (!p) return 1; for (int j = 0; j < (60 << 20); j += 4096) p[j] = 1; sleep(3); return 0; }
  int st, bad = 0; while (wait(&st) > 0) if (!WIFEXITED(st) || WEXITSTATUS(st)) bad++; return bad ? 9 : 0; }
"""
    rr = run(runner, "c", src, time_s=2, memory_mb=128)
    assert rr.status != Verdict.OK


def test_stdout_flood_is_output_limit(runner: CodeRunner, sane: None) -> None:
    src = "#include <stdio.h>\nint main(void){ static char b[1<<16]; for(;;) fwrite(b, 1, sizeof b, stdout); }"
    rr = run(runner, "c", src, stdout_bytes=1 << 20)
    assert rr.status == Verdict.OUTPUT_LIMIT and len(rr.stdout) <= 1 << 20


def test_stderr_flood_is_output_limit(runner: CodeRunner, sane: None) -> None:
    src = "#include <stdio.h>\nint main(void){ static char b[1<<16]; for(;;) fwrite(b, 1, sizeof b, stderr); }"
    rr = run(runner, "c", src, stderr_bytes=1 << 20)
    assert rr.status == Verdict.OUTPUT_LIMIT


ORPHAN = """#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <ctype.h>
int main(void){ char in[16] = {0}; fgets(in, sizeof in, stdin);
  if (!strncmp(in, "spawn", 5)) { if (fork() == 0) { setsid(); if (fork() == 0) { sleep(30); } _exit(0); }
    puts("spawned"); return 0; }
  int n = 0; DIR *d = opendir("/proc"); struct dirent *e;
  while ((e = readdir(d))) if (isdigit((unsigned char)e->d_name[0])) n++;
  printf("%d\\n", n); return 0; }
"""


def test_setsid_orphan_does_not_outlive_its_test(runner: CodeRunner, sane: None) -> None:
    load(runner, "c", ORPHAN)
    res = runner.run(b"spawn", Limits(time_s=0.5))
    assert (res.status, res.stdout) == (Verdict.TIME_LIMIT, b"spawned\n")  # the orphan sleeps past the backstop
    if not runner.isolation.layers.get("pidns"):
        pytest.skip("no pid namespace: /proc shows the host")
    assert runner.run(b"look", Limits()).stdout == b"2\n"  # the job init and this test, nothing else


SYSCALLS = """#define _GNU_SOURCE
#include <stdio.h>
#include <errno.h>
#include <unistd.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/ptrace.h>
int e(long r){ return r == -1 ? errno : 0; }
int main(void){
  printf("ptrace %d\\n", e(ptrace(PTRACE_TRACEME, 0, 0, 0)));
  printf("add_key %d\\n", e(syscall(SYS_add_key, "user", "k", "v", 1, -4)));
  printf("unshare %d\\n", e(unshare(CLONE_NEWUSER)));
  printf("mount %d\\n", e(syscall(SYS_mount, "none", "/box", "tmpfs", 0, 0)));
  printf("bpf %d\\n", e(syscall(SYS_bpf, 0, 0, 0)));
  printf("vsock %d\\n", e(socket(40, SOCK_STREAM, 0)));
  printf("inet %d\\n", e(socket(AF_INET, SOCK_STREAM, 0) >= 0 ? 0 : -1));
  return 0; }
"""


def test_raw_syscalls_the_filter_refuses_fail_from_c(runner: CodeRunner, sane: None) -> None:
    if not runner.isolation.layers.get("seccomp"):
        pytest.skip("no seccomp filter on this architecture")
    rr = run(runner, "c", SYSCALLS)
    assert rr.status == Verdict.OK, rr.stderr
    got = dict(line.split() for line in rr.stdout.decode().splitlines())
    assert got["ptrace"] == "1" and got["add_key"] == "1" and got["unshare"] == "1"  # EPERM
    assert got["mount"] != "0" and got["bpf"] != "0" and got["vsock"] != "0"
    assert got["inet"] == "0"  # an ordinary socket is allowed (the network namespace is empty)


LEAVE = """#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void){ const char *names[] = {"left.txt", "/tmp/left.txt", "/dev/shm/left", "/run/left"};
  char in[16] = {0}; fgets(in, sizeof in, stdin);
  if (!strncmp(in, "write", 5)) { for (int i = 0; i < 4; i++) { FILE *f = fopen(names[i], "w");
      if (!f) return 2; fputs("secret", f); fclose(f); } puts("written"); return 0; }
  int seen = 0; for (int i = 0; i < 4; i++) seen += access(names[i], F_OK) == 0; printf("%d\\n", seen); return 0; }
"""


@pytest.mark.parametrize("language", ["c", "cpp"])
def test_files_of_one_test_are_gone_in_the_next(runner: CodeRunner, language: str, sane: None) -> None:
    load(runner, language, LEAVE)
    assert runner.run(b"write", Limits()).stdout == b"written\n"
    assert runner.run(b"check", Limits()).stdout == b"0\n"


def test_program_files_are_read_only_and_the_host_is_hidden(runner: CodeRunner, sane: None) -> None:
    src = """#include <stdio.h>
#include <unistd.h>
int main(void){ char host[4096] = {0}; if (!fgets(host, sizeof host, stdin)) return 2;
  FILE *f = fopen("/prog/a.out", "r+"); printf("%d %d %d\\n", f != NULL,
  access(host, F_OK) == 0, access("/etc/shadow", R_OK) == 0); return 0; }
"""
    if not runner.isolation.layers.get("hidden_fs"):
        pytest.skip("no minimal root here: host files stay visible")
    rr = run(runner, "c", src, stdin=__file__.encode())  # this test file, on the host
    assert rr.status == Verdict.OK and rr.stdout == b"0 0 0\n", rr.stdout


PRIORITY = """#include <stdio.h>
#include <sched.h>
#include <sys/resource.h>
int main(void){ struct sched_param p = { .sched_priority = 1 }, o = { 0 };
  int fifo = sched_setscheduler(0, SCHED_FIFO, &p) == 0;
  if (fifo) sched_setscheduler(0, SCHED_OTHER, &o);
  printf("fifo %d nice %d\\n", fifo, setpriority(PRIO_PROCESS, 0, -5) == 0); return 0; }
"""


def test_a_worker_allowed_real_time_priority_does_not_pass_it_on_to_programs() -> None:
    # a worker started under `ulimit -r 99 -e 40` (a container's --ulimit rtprio, limits.conf):
    # a program with the allowance could spin under SCHED_FIFO and starve the host's CPU
    raised = {limit: resource.getrlimit(limit) for limit in (resource.RLIMIT_RTPRIO, resource.RLIMIT_NICE)}
    try:
        try:
            resource.setrlimit(resource.RLIMIT_RTPRIO, (99, 99))
            resource.setrlimit(resource.RLIMIT_NICE, (40, 40))
        except (ValueError, OSError) as e:  # raising a hard limit needs CAP_SYS_RESOURCE
            pytest.skip(f"cannot give this worker a real-time allowance to pass on: {e}")
        runner = make_runner("forkserver")
    finally:
        for limit, value in raised.items():
            resource.setrlimit(limit, value)
    try:
        if not runner.isolation.layers.get("uid_drop"):
            pytest.skip("no uid drop: the program keeps the worker's capabilities")
        rr = run(runner, "c", PRIORITY)
        assert (rr.status, rr.stdout) == (Verdict.OK, b"fifo 0 nice 0\n"), rr.stderr
    finally:
        runner.close()


# A right answer, then a death a judge or a shell gives the program: a write to a pipe whose
# reader is gone (SIGPIPE), or a write past the file size limit (SIGXFSZ, raised here directly).
SIGNAL_DEATHS = {
    "SIGPIPE": "int p[2]; if (pipe(p) != 0) return 3; close(p[0]); if (write(p[1], \"x\", 1) < 0) return 0;",
    "SIGXFSZ": "raise(SIGXFSZ);",
}


@pytest.mark.parametrize("death", sorted(SIGNAL_DEATHS))
def test_a_compiled_program_dies_of_the_signals_the_python_runtime_ignores(runner: CodeRunner, death: str, sane: None) -> None:
    # the worker is Python, which ignores SIGPIPE and SIGXFSZ; an exec'd program must not
    # inherit that: ignored, the write fails, the program exits 0 and its printed 3 was paid
    src = ("#include <signal.h>\n#include <stdio.h>\n#include <unistd.h>\n"
           "int main(void){ puts(\"3\"); fflush(stdout); " + SIGNAL_DEATHS[death] + " return 0; }\n")
    rr = run(runner, "c", src)
    assert rr.stdout == b"3\n"
    assert rr.status == Verdict.RUNTIME_ERROR, (rr.status, rr.exit_code, rr.error)
    assert rr.signal == getattr(signal, death), rr.signal


# The feedback names a death by signal and what it usually means, as the model reads it next:
# "killed by signal 8" says nothing to a policy that divided by zero.
SIGNAL_FEEDBACK = {
    "int main(int argc, char** argv){ (void)argv; return 100 / (argc - 1); }": "signal 8 (SIGFPE: an arithmetic error",
    "int main(void){ volatile int* p = 0; *p = 1; return 0; }":
        "signal 11 (SIGSEGV: an invalid memory access, or the stack overflowed)",
    "#include <stdlib.h>\nint main(void){ abort(); }": "signal 6 (SIGABRT: abort()",
    "#include <stdio.h>\nint main(void){ FILE* f = fopen(\"x\", \"w\"); for (;;) fputc('x', f); }":
        "signal 25 (SIGXFSZ: a file written past the file size limit of 64 MB)",
}


@pytest.mark.parametrize("source", list(SIGNAL_FEEDBACK), ids=["fpe", "segv", "abort", "file-size"])
def test_a_death_by_signal_is_named_with_its_usual_cause(runner: CodeRunner, source: str, sane: None) -> None:
    rr = run(runner, "c", source)
    assert rr.status == Verdict.RUNTIME_ERROR, (rr.status, rr.error)
    assert SIGNAL_FEEDBACK[source] in rr.error, rr.error
