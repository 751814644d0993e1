"""``sandbox.runs.execute`` on each shipped runner (the fork server and the subprocess runner),
in this process: the worker's code path for run jobs without the fleet around it."""

from __future__ import annotations

from cpfleet.core.results import RunStatus
from cpfleet.sandbox.runner import CodeRunner
from cpfleet.sandbox.runs import execute


def test_inputs_files_and_limits_on_each_runner(runner: CodeRunner) -> None:
    code = ("import sys\nname = sys.stdin.read().strip()\n"
            "print(open('in.txt').read() + name)\nopen('out.txt', 'w').write(name * 2)\n"
            "if name == 'spin':\n    while True: pass\n")
    r = execute(runner, code, [b"a", b"spin", b"b"], language="python3", files={"in.txt": b"hi "},
                fetch_files=("out.txt",), time_limit_s=0.5, job_id="j")
    assert (r.job_id, r.status, r.infra_error) == ("j", RunStatus.FINISHED, False), r.infra_message
    a, spin, b = r.runs
    assert (a.status, a.stdout, a.files) == (RunStatus.FINISHED, "hi a\n", {"out.txt": b"aa"})
    assert (spin.status, spin.limit) == (RunStatus.TIME_LIMIT, "cpu_time")
    assert spin.files == {"out.txt": b"spinspin"}  # written before it spun: read back all the same
    assert (b.status, b.stdout, b.files) == (RunStatus.FINISHED, "hi b\n", {"out.txt": b"bb"})


def test_nothing_runs_without_a_program(runner: CodeRunner) -> None:
    none = execute(runner, "no fence here", [b""], language=None, extract=True)
    assert (none.status, none.runs, none.infra_error) == (RunStatus.NO_CODE, (), False)
    unknown = execute(runner, "x", [b""], language="cobol")
    assert (unknown.status, unknown.infra_error) == (RunStatus.INTERNAL, True) and "cobol" in unknown.infra_message


def test_a_sleeping_program_meets_the_wall_clock_backstop(runner: CodeRunner) -> None:
    r = execute(runner, "import time\ntime.sleep(60)", [b""], language="python3", time_limit_s=0.3)
    (run,) = r.runs
    assert (run.status, run.limit, run.deterministic) == (RunStatus.TIME_LIMIT, "wall_time", False)
    assert run.cpu_ms < 300 and "wall" in run.detail
