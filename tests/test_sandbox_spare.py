"""The fork server's spare job (``prepare_next``): a job loaded into it behaves exactly like one
started on demand, and a spare that died while waiting costs nothing but the time to start a
job the usual way."""

from __future__ import annotations

import os
import signal

from fleet_helpers import wait_until
from runner_helpers import children

from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.forkserver import ForkServerRunner
from cpfleet.sandbox.runner import Limits

# what a test can see of its job: its pid, its working directory, who it runs as, its filter
PROBE = (
    "import os\n"
    "status = [l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')]\n"
    "print(os.getpid(), sorted(os.listdir('.')), os.getuid(), status, input())\n"
)


def _run(runner: ForkServerRunner, source: str, stdin: bytes, fn_name: str | None = None) -> tuple[str | None, bytes]:
    err = runner.load(source, fn_name)
    if err is not None:
        return err, b""
    res = runner.run(stdin, Limits(time_s=5))
    assert res.status == Verdict.OK, (res.status, res.error, res.stderr[-500:])
    return None, res.stdout


def test_a_program_loaded_into_the_spare_sees_what_an_on_demand_job_shows_it(fork_runner: ForkServerRunner) -> None:
    _, on_demand = _run(fork_runner, PROBE, b"x\n")
    fork_runner.prepare_next()
    _, from_spare = _run(fork_runner, PROBE, b"x\n")
    assert from_spare == on_demand
    assert from_spare.split()[-1] == b"x"


def test_the_spare_serves_function_call_jobs_and_reports_compile_errors(fork_runner: ForkServerRunner) -> None:
    fork_runner.prepare_next()
    assert _run(fork_runner, "def add(a, b):\n    return a + b\n", b"[2, 3]", fn_name="add") == (None, b"5")
    fork_runner.prepare_next()
    err, _ = _run(fork_runner, "print(\n", b"")
    assert err is not None and "SyntaxError" in err


def test_a_spare_that_died_while_waiting_is_replaced_and_the_job_still_runs(fork_runner: ForkServerRunner) -> None:
    fork_runner.load("print(1)\n")
    fork_runner.run(b"", Limits(time_s=5))  # a loaded job, so the zygote has two job processes below
    assert fork_runner._proc is not None
    zygote = fork_runner._proc.pid
    before = set(children(zygote))
    fork_runner.prepare_next()

    def spare() -> list[int]:  # the spare's job process, once its init is below it
        return [p for p in set(children(zygote)) - before if children(p)]

    assert wait_until(lambda: bool(spare()), timeout=60), "no spare job process appeared"
    os.kill(children(spare()[0])[0], signal.SIGKILL)  # its init: the spare can no longer answer
    assert _run(fork_runner, "print(input()[::-1])\n", b"abc\n") == (None, b"cba\n")


def test_the_zygotes_warm_up_source_compiles() -> None:
    """The zygote compiles WARM_SOURCE at startup; a source that did not compile would stop
    every runner from starting."""
    from cpfleet.sandbox import zygote

    code = compile(zygote.WARM_SOURCE, "solution.py", "exec", dont_inherit=True)
    assert "solve" in code.co_names
