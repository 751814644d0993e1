"""`cpfleet judge` and judge_iter: ordered output, unknown problems, strict input reading, pool."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import wait_until

from cpfleet.cli import main as cpfleet_main
from cpfleet.core.errors import DuplicateProblemError
from cpfleet.core.problem import Problem
from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict
from cpfleet.jobs.judge import InputError, read_jobs, read_problems
from cpfleet.jobs.pool import judge_iter

REPO = Path(__file__).resolve().parents[1]

ADD = {
    "id": "add",
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": f"{i} {i}\n", "output": f"{2 * i}\n"} for i in range(1, 6)],
    "time_limit_s": 1,
    "statement_extra": "unknown fields are ignored",
}
HALF = {
    "id": "half",
    "public_tests": [{"input": "1\n", "output": "0.5\n"}],
    "hidden_tests": [{"input": "3\n", "output": "1.5\n"}, {"input": "5\n", "output": "2.5\n"}],
    "checker": {"type": "float", "abs": 1e-6, "rel": 1e-6},
}


def py(code: str) -> str:
    return f"```python\n{code}\n```"


CORRECT_ADD = py("a, b = map(int, input().split())\nprint(a + b)")
WRONG_ADD = py("a, b = map(int, input().split())\nprint(a * b)")  # right on 2 2 only
CORRECT_HALF = py("print(int(input()) / 2)")
CRASH = py("raise SystemExit(4)")


def _write_jsonl(path: Path, rows: list[Any], gz: bool = False) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def _jobs() -> list[dict[str, Any]]:
    return [
        {"problem_id": "add", "completion": CORRECT_ADD, "job_id": "a-ok"},
        {"problem_id": "half", "completion": CORRECT_HALF},
        {"problem_id": "nope", "completion": CORRECT_ADD, "job_id": "ghost"},
        {"problem_id": "add", "completion": WRONG_ADD, "job_id": "a-wrong"},
        {"problem_id": "add", "completion": "no code here", "job_id": "a-nocode"},
        {"problem_id": "half", "completion": CRASH, "job_id": "h-crash"},
    ]


def _check_results(results: list[dict[str, Any]], reward: str) -> None:
    assert [r["job_id"] for r in results] == ["a-ok", "1", "ghost", "a-wrong", "a-nocode", "h-crash"]
    by = {r["job_id"]: r for r in results}
    assert (by["a-ok"]["reward"], by["a-ok"]["verdict"]) == (1.0, "OK")
    assert (by["1"]["reward"], by["1"]["problem_id"]) == (1.0, "half")
    ghost = by["ghost"]
    assert (ghost["verdict"], ghost["infra_error"], ghost["reward"]) == ("UNKNOWN_PROBLEM", True, None)
    wrong = by["a-wrong"]
    assert wrong["verdict"] == "WRONG_ANSWER"
    assert wrong["reward"] == (0.2 if reward == "fraction" else 0.0)
    assert by["a-nocode"]["verdict"] == "NO_CODE"
    assert by["h-crash"]["verdict"] == "RUNTIME_ERROR"
    for r in results:
        for key in ("job_id", "problem_id", "reward", "verdict", "infra_error", "observation", "public", "hidden"):
            assert key in r
    pub = by["a-ok"]["public"]
    assert (pub["passed"], pub["total"]) == (1, 1)
    assert pub["tests"][0]["verdict"] == "OK" and pub["tests"][0]["ms"] > 0
    assert by["a-ok"]["hidden"]["tests"] == []  # per-test details only for public tests


@pytest.mark.parametrize("reward", ["all_or_nothing", "fraction"])
def test_judge_command_outputs_one_result_per_job_in_input_order(
    tmp_path: Path, reward: str, capsys: pytest.CaptureFixture[str]
) -> None:
    problems = _write_jsonl(tmp_path / "problems.jsonl.gz", [ADD, HALF], gz=True)
    jobs = _write_jsonl(tmp_path / "jobs.jsonl", _jobs())
    rc = cpfleet_main(["judge", str(problems), str(jobs), "--reward", reward, "--workers", "2", "--no-progress"])
    out = capsys.readouterr()
    assert rc == 0
    results = [json.loads(line) for line in out.out.splitlines()]
    _check_results(results, reward)
    assert "judged 6 jobs" in out.err


def test_judge_console_script_runs_as_a_process_with_progress_on_stderr(tmp_path: Path) -> None:
    problems = _write_jsonl(tmp_path / "p.jsonl", [ADD, HALF])
    jobs = _write_jsonl(tmp_path / "j.jsonl", _jobs())
    cmd = [str(REPO / ".venv" / "bin" / "cpfleet"), "judge", str(problems), str(jobs), "--workers", "1"]
    if not Path(cmd[0]).exists():
        cmd = [sys.executable, "-m", "cpfleet", *cmd[1:]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    _check_results([json.loads(line) for line in proc.stdout.splitlines()], "all_or_nothing")
    assert "6/6" in proc.stderr  # tqdm's counter goes to stderr, never into the JSON stream


def test_public_mode_and_subprocess_runner_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problems = _write_jsonl(tmp_path / "p.jsonl", [ADD])
    jobs = _write_jsonl(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": WRONG_ADD}])
    rc = cpfleet_main(
        ["judge", str(problems), str(jobs), "--mode", "public", "--runner", "subprocess", "--workers", "1", "--no-progress"]
    )
    assert rc == 0
    (r,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (r["mode"], r["reward"], r["hidden"]["run"], r["public"]["run"]) == ("public", 0.0, 0, 1)


def test_judge_exits_3_when_no_job_got_a_reward_and_0_when_any_did(tmp_path: Path) -> None:
    """A sandbox that cannot start (here: a solution Python that does not exist) makes every job
    INTERNAL: the results are printed, and the exit status says nothing was judged. One job
    judged beside unknown problems is a run that worked (exit 0)."""
    problems = _write_jsonl(tmp_path / "p.jsonl", [ADD])
    jobs = _write_jsonl(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD}])
    cmd = [sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", "1", "--no-progress"]
    missing = "/nonexistent-cpfleet-venv/bin/python"  # outside /tmp, which is refused for its own reason
    env = {**os.environ, "CPFLEET_SOLUTION_PYTHON": missing}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    (r,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert (r["verdict"], r["reward"], proc.returncode) == ("INTERNAL", None, 3), proc.stderr
    assert "no job got a reward: exit status 3" in proc.stderr
    assert f"{missing} (CPFLEET_SOLUTION_PYTHON) is not an executable file" in proc.stderr
    mixed = _write_jsonl(tmp_path / "m.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD},
                                                {"problem_id": "nope", "completion": CORRECT_ADD}])
    proc = subprocess.run([*cmd[:5], str(mixed), *cmd[6:]], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["verdict"] for line in proc.stdout.splitlines()] == ["OK", "UNKNOWN_PROBLEM"]
    alone = _write_jsonl(tmp_path / "u.jsonl", [{"problem_id": "nope", "completion": CORRECT_ADD}])
    proc = subprocess.run([*cmd[:5], str(alone), *cmd[6:]], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 3 and "no job got a reward" in proc.stderr, proc.stderr


# --- problem reading: the one loader, skipping by default, --strict -------------------------
def test_duplicate_problem_ids_are_an_error_naming_both_lines(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "p.jsonl", [ADD, HALF, ADD])
    with pytest.raises(DuplicateProblemError, match=r"duplicate problem id 'add' on record 3 \(first on record 1\)"):
        read_problems(path)


BAD_PROBLEM_LINES = [
    ('{"id": "x", "public_tests": [', "invalid JSON"),
    ('{"public_tests": []}', "missing or empty 'id'"),
    ('{"id": "x", "hidden_tests": [{"input": 1}]}', "hidden_tests"),
    ('{"id": "x", "checker": {"type": "regex"}}', "unknown checker type 'regex'"),
    ('{"id": "x", "public_tests": [{"input": "1", "output": "1"}], "hidden_tests": []}', "no hidden tests"),
]


@pytest.mark.parametrize(("line", "message"), BAD_PROBLEM_LINES)
def test_bad_problem_lines_are_errors_with_their_line_number_under_strict(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(ADD) + "\n\n" + line + "\n")
    with pytest.raises(InputError, match=rf"p.jsonl:3: .*{message}"):
        read_problems(path, strict=True)


@pytest.mark.parametrize(("line", "message"), BAD_PROBLEM_LINES)
def test_bad_problem_lines_are_skipped_and_the_rest_judged(
    tmp_path: Path, line: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps(ADD) + "\n\n" + line + "\n")
    jobs = _write_jsonl(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD}])
    assert cpfleet_main(["judge", str(problems), str(jobs), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr()
    (r,) = [json.loads(x) for x in out.out.splitlines()]
    assert r["reward"] == 1.0
    assert "p.jsonl:3: skipped" in out.err and message in out.err and "1 skipped" in out.err
    assert cpfleet_main(["judge", str(problems), str(jobs), "--strict", "--no-progress"]) == 2
    assert capsys.readouterr().out == ""


def test_public_mode_skips_a_problem_without_public_tests_that_full_mode_judges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hidden_only = {**ADD, "id": "hidden-only", "public_tests": []}
    problems = _write_jsonl(tmp_path / "p.jsonl", [ADD, hidden_only])
    jobs = _write_jsonl(tmp_path / "j.jsonl", [{"problem_id": pid, "completion": CORRECT_ADD} for pid in ("add", "hidden-only")])
    assert cpfleet_main(["judge", str(problems), str(jobs), "--workers", "1", "--no-progress"]) == 0
    full = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["problem_id"], r["reward"]) for r in full] == [("add", 1.0), ("hidden-only", 1.0)]
    assert cpfleet_main(["judge", str(problems), str(jobs), "--mode", "public", "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr()
    public = [json.loads(x) for x in out.out.splitlines()]
    assert [(r["problem_id"], r["reward"], r["verdict"]) for r in public] == [
        ("add", 1.0, "OK"), ("hidden-only", None, "UNKNOWN_PROBLEM")
    ]
    assert "p.jsonl:2: skipped unjudgeable problem: hidden-only: no public tests" in out.err


def test_a_problem_file_that_loads_nothing_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problems = tmp_path / "p.jsonl"
    problems.write_text("\n".join(line for line, _ in BAD_PROBLEM_LINES) + "\n")
    jobs = _write_jsonl(tmp_path / "j.jsonl", [{"problem_id": "x", "completion": CORRECT_ADD}])
    assert cpfleet_main(["judge", str(problems), str(jobs), "--no-progress"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "no problem loaded" in out.err


@pytest.mark.parametrize(
    "row",
    [[1, 2], {"completion": "x"}, {"problem_id": "add"}, {"problem_id": "add", "completion": "x", "job_id": [1]},
     # a lone surrogate in an id: no result naming it can be written as UTF-8 (judge's output died
     # on it with a traceback), and the fleet's client refuses it
     {"problem_id": "add", "completion": "x", "job_id": "a\ud800"}, {"problem_id": "add\udcff", "completion": "x"}],
)
def test_bad_job_lines_are_skipped_and_counted_or_strict_errors(tmp_path: Path, row: Any) -> None:
    path = _write_jsonl(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": "x"}, row])
    with pytest.raises(InputError, match="j.jsonl:2"):
        read_jobs(path, strict=True)
    read = read_jobs(path)
    assert [j["problem_id"] for j in read.jobs] == ["add"] and read.skipped == 1
    assert read.warnings[0].startswith(f"{path}:2: skipped job line:")


def test_bad_input_makes_the_command_exit_2_before_judging(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problems = _write_jsonl(tmp_path / "p.jsonl", [ADD, ADD])
    jobs = _write_jsonl(tmp_path / "j.jsonl", [{"problem_id": "add", "completion": CORRECT_ADD}])
    assert cpfleet_main(["judge", str(problems), str(jobs), "--no-progress"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "duplicate problem id" in out.err


# --- judge_iter ---------------------------------------------------------------------------
def test_judge_iter_pool_matches_in_process_judging() -> None:
    problems = {p["id"]: Problem.from_dict(p) for p in (ADD, HALF)}
    jobs = _jobs() * 3
    pooled = list(judge_iter(problems, jobs, workers=2, window=3, runner_kind="forkserver"))
    local = list(judge_iter(problems, jobs, workers=1, runner_kind="forkserver"))

    def key(r: JobResult) -> tuple[Any, ...]:
        return (r.job_id, r.problem_id, r.reward, r.verdict, r.public.passed, r.hidden.passed, r.hidden.run)

    assert [key(r) for r in pooled] == [key(r) for r in local]
    assert len({r.worker for r in pooled if not r.infra_error}) >= 1
    assert all(r.problem_version == problems[r.problem_id].content_version() for r in pooled if not r.infra_error)


# A completion holding a lone UTF-16 surrogate (JSON's "\ud800" escape; model text can carry one):
# the pool's msgpack could not send it and the whole run ended with a traceback, nothing written;
# judged in one process it was invalid UTF-8 in the source (a COMPILE_ERROR, a Java program's
# too), where the fleet's client sends its bytes and the worker reads U+FFFD and runs the
# program. Every path now judges what the fleet judges.
SURROGATE_IN_A_STRING = py("x = '\ud800'\na, b = map(int, input().split())\nprint(a + b)")
SURROGATE_IN_PROSE = "Here it is \udcff:\n" + CORRECT_ADD


@pytest.mark.parametrize("workers", [1, 2])
def test_a_completion_with_a_lone_surrogate_is_judged_as_the_fleet_judges_it(
        workers: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problems = {"add": Problem.from_dict(ADD)}
    jobs = [{"problem_id": "add", "completion": c, "job_id": i}
            for i, c in enumerate([SURROGATE_IN_A_STRING, SURROGATE_IN_PROSE, CORRECT_ADD])]
    results = list(judge_iter(problems, jobs, workers=workers))
    assert [(r.verdict, r.reward) for r in results] == [(Verdict.OK, 1.0)] * 3, [r.infra_message for r in results]
    # an id the caller gave comes back as it was, whatever it holds
    weird = list(judge_iter(problems, [{"problem_id": "add", "completion": CORRECT_ADD, "job_id": "j\ud800"}],
                            workers=workers))
    assert [(r.job_id, r.verdict) for r in weird] == [("j\ud800", Verdict.OK)]
    if workers == 1:  # judge_locally itself, the worker's own path, reads it so too
        from cpfleet.sandbox.env import judge_locally
        from cpfleet.sandbox.runner import make_runner

        runner = make_runner("forkserver")
        try:
            assert judge_locally(problems["add"], SURROGATE_IN_A_STRING, runner).verdict == Verdict.OK
        finally:
            runner.close()
    rc = cpfleet_main(["judge", str(_write_jsonl(tmp_path / "p.jsonl", [ADD])),
                       str(_write_jsonl(tmp_path / "j.jsonl", jobs)), "--workers", str(workers), "--no-progress"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (rc, [(r["verdict"], r["reward"]) for r in out]) == (0, [("OK", 1.0)] * 3)


def test_judge_iter_reads_a_lazy_job_stream() -> None:
    problems = {"add": Problem.from_dict(ADD)}
    consumed: list[int] = []

    def stream() -> Any:
        for i in range(12):
            consumed.append(i)
            yield {"problem_id": "add", "completion": CORRECT_ADD if i % 2 else WRONG_ADD, "job_id": f"s{i}"}

    it = judge_iter(problems, stream(), workers=2, window=4)
    first = next(it)
    assert first.job_id == "s0" and first.verdict == Verdict.WRONG_ANSWER
    assert len(consumed) <= 6  # bounded window: the stream is not read ahead of the pool
    rest = list(it)
    assert [r.job_id for r in rest] == [f"s{i}" for i in range(1, 12)]
    assert [r.reward for r in rest[:2]] == [1.0, 0.0]


def test_judge_iter_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        list(judge_iter({}, [], reward_shape="partial"))
    with pytest.raises(ValueError):
        list(judge_iter({}, [], mode="secret"))
    with pytest.raises(ValueError):
        list(judge_iter({}, [], runner_kind="docker"))


def _descendants(root: int) -> list[str]:
    """Command lines of the live (non-zombie) descendants of ``root``, from /proc."""
    children: dict[int, list[int]] = {}
    cmd: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if state == "Z":
                continue
            children.setdefault(int(ppid), []).append(int(entry.name))
            cmd[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(cmd.get(pid, "?"))
        todo.extend(children.get(pid, []))
    return [c for c in found if "resource_tracker" not in c]


def test_pool_processes_and_their_runners_are_gone_after_the_run() -> None:
    import os
    import time

    problems = {"add": Problem.from_dict(ADD)}
    jobs = [{"problem_id": "add", "completion": CORRECT_ADD}] * 4
    already = _descendants(os.getpid())  # e.g. the session's redis-server, started by other tests
    assert [r.reward for r in judge_iter(problems, jobs, workers=2)] == [1.0] * 4

    def new_ones() -> list[str]:
        left = list(already)
        return [c for c in _descendants(os.getpid()) if c not in left or left.remove(c)]

    deadline = time.monotonic() + 60  # liveness wait for exits, not a timing assertion
    while new_ones() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert new_ones() == []


@pytest.mark.slow
def test_a_killed_pool_process_costs_no_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: SIGKILL a pool process mid-run; its jobs are re-run, none is lost or zeroed."""
    import os
    import signal

    import cpfleet.jobs.pool

    reruns: list[str] = []
    isolated = cpfleet.jobs.pool._isolated

    def counting(new_pool: Any, submit: Any, index: int, job: Any) -> JobResult:
        reruns.append(job["job_id"])
        return isolated(new_pool, submit, index, job)

    monkeypatch.setattr(cpfleet.jobs.pool, "_isolated", counting)

    slow = py("x = 0\nfor i in range(4_000_000):\n    x += i\na, b = map(int, input().split())\nprint(a + b)")
    problems = {"add": Problem.from_dict({**ADD, "time_limit_s": 20})}
    jobs = [{"problem_id": "add", "completion": slow, "job_id": f"k{i}"} for i in range(6)]
    results = []
    killed = False
    for result in judge_iter(problems, jobs, workers=2):
        results.append(result)
        if not killed:
            pool_pids = [
                int(entry.name)
                for entry in Path("/proc").iterdir()
                if entry.name.isdigit()
                and _ppid(entry) == os.getpid()
                and b"spawn_main" in _read(entry / "cmdline")
            ]
            assert pool_pids, "no pool process found"
            os.kill(pool_pids[0], signal.SIGKILL)
            killed = True
    assert [r.job_id for r in results] == [f"k{i}" for i in range(6)]
    assert [(r.verdict, r.reward, r.infra_error) for r in results] == [(Verdict.OK, 1.0, False)] * 6
    assert reruns, "the broken pool was not detected"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _session(pid: int) -> int:
    stat = _read(Path(f"/proc/{pid}/stat")).decode(errors="replace")
    try:
        return int(stat.rsplit(")", 1)[1].split()[3])
    except (IndexError, ValueError):
        return -1


def _ppid(entry: Path) -> int:
    stat = _read(entry / "stat").decode(errors="replace")
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return -1


def test_a_judge_bug_in_one_job_is_internal_and_the_batch_goes_on_in_process() -> None:
    # a registered checker that raises: a bug on the judge's side, never the program's; the
    # in-process path (workers=1) answers INTERNAL for that job as the pool and the fleet do
    from cpfleet.core.checkers import CheckResult, register_checker

    class Buggy:
        name = "test_buggy"

        def check(self, expected: str, got: str) -> CheckResult:
            raise ZeroDivisionError("checker bug")

    register_checker("test_buggy", lambda params: Buggy(), replace=True)
    problems = {p["id"]: Problem.from_dict(p) for p in (ADD, {**HALF, "id": "buggy", "checker": {"type": "test_buggy"}})}
    jobs = [{"problem_id": "add", "completion": CORRECT_ADD}, {"problem_id": "buggy", "completion": CORRECT_HALF},
            {"problem_id": "add", "completion": CORRECT_ADD}]
    results = list(judge_iter(problems, jobs, workers=1))
    assert [(r.verdict, r.reward, r.infra_error) for r in results] == [
        (Verdict.OK, 1.0, False), (Verdict.INTERNAL, None, True), (Verdict.OK, 1.0, False)]
    assert "checker bug" in results[1].infra_message


SLEEPY_ADD = py("import time\ntime.sleep(0.3)\na, b = map(int, input().split())\nprint(a + b)")


def test_a_pool_started_by_a_thread_that_then_exits_keeps_its_processes() -> None:
    """A library caller starts judge_iter in a worker thread that ends while another thread
    reads the rest. The pool processes were armed with PR_SET_PDEATHSIG, which fires when the
    *thread* that forked them exits: they were SIGKILLed, the pool broke and every job still
    in flight or to come was re-run one at a time in a fresh process of its own."""
    import os
    import threading
    import time

    problems = {"add": Problem.from_dict({**ADD, "time_limit_s": 20})}
    jobs = [{"problem_id": "add", "completion": SLEEPY_ADD, "job_id": f"t{i}"} for i in range(6)]
    results = judge_iter(problems, jobs, workers=2, window=2)
    got: list[JobResult] = []
    native: list[int] = []
    starter = threading.Thread(target=lambda: (native.append(threading.get_native_id()), got.append(next(results))))
    starter.start()
    starter.join()
    deadline = time.monotonic() + 30  # liveness wait: the thread gone from the kernel too, not a timing assertion
    while os.path.exists(f"/proc/self/task/{native[0]}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(f"/proc/self/task/{native[0]}")
    got.extend(results)
    assert [r.job_id for r in got] == [f"t{i}" for i in range(6)]
    assert [(r.verdict, r.reward, r.infra_error) for r in got] == [(Verdict.OK, 1.0, False)] * 6
    # the two pool processes judged every job: none was re-run in a process of its own
    assert len({r.worker for r in got}) <= 2, [r.worker for r in got]


KILLED_PARENT_SCRIPT = """
import sys, threading
from cpfleet.core.problem import Problem
from cpfleet.jobs.pool import judge_iter

if __name__ == "__main__":
    problem = {"id": "add", "public_tests": [{"input": "1 2\\n", "output": "3\\n"}],
               "hidden_tests": [{"input": "2 2\\n", "output": "4\\n"}], "time_limit_s": 60}
    slow = "```python\\nimport time\\ntime.sleep(60)\\nprint(4)\\n```"
    fast = "```python\\na, b = map(int, input().split())\\nprint(a + b)\\n```"
    jobs = [{"problem_id": "add", "completion": fast, "job_id": "fast"}]
    jobs += [{"problem_id": "add", "completion": slow, "job_id": f"s{i}"} for i in range(4)]
    results = judge_iter({"add": Problem.from_dict(problem)}, jobs, workers=2, window=3)
    starter = threading.Thread(target=lambda: print(next(results).job_id, flush=True))
    starter.start()
    starter.join()
    for r in results:  # the slow jobs: this process is SIGKILLed while they run
        print(r.job_id, flush=True)
"""


@pytest.mark.parametrize("started_by", ["main thread", "a thread that exited"])
def test_pool_processes_and_their_sandboxes_die_when_the_judging_process_is_killed(
        tmp_path: Path, started_by: str) -> None:
    """kill -9 of a process judging with a pool: no pool process, zygote or test program outlives
    it, whether the pool was started by its main thread or by a thread that has since exited."""
    import os
    import signal
    import time

    from cpfleet.fleet.processes import alive, descendants

    script = KILLED_PARENT_SCRIPT
    if started_by == "main thread":
        script = script.replace("threading.Thread(target=lambda: print(next(results).job_id, flush=True))",
                                "threading.Thread(target=lambda: None)")
        script = script.replace("    starter.join()\n", "    starter.join()\n    print(next(results).job_id, flush=True)\n")
    path = tmp_path / "judging.py"
    path.write_text(script)
    proc = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "fast"  # the pool is up and judging the slow jobs
        deadline = time.monotonic() + 60  # liveness wait for the slow programs to start
        while time.monotonic() < deadline:
            started = descendants(proc.pid)
            if any(_session(pid) == pid for pid in started):  # a test program, in a session of its own
                break
            time.sleep(0.1)
        assert any(_session(pid) == pid for pid in started), "no test program seen running"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_until(lambda: not alive(started), timeout=60, interval=0.1)  # a liveness wait, not a timing assertion
    left = alive(started)
    for pid in left:  # never leak into the rest of the session
        os.kill(pid, signal.SIGKILL)
    assert left == {}, f"outlived the killed judging process: {left}"
