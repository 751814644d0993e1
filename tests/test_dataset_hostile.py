"""Hostile datasets: problem records whose text no UTF-8 encodes, function-call data and return
values holding lone surrogates. Bad problem data is refused when it is loaded, with its field
named; values a program returns are shown in its feedback without breaking the result's
encoding (JSON for ``cpfleet judge``, msgpack for the fleet's reply)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import pytest

import cpfleet
from cpfleet.core.problem import Problem, ProblemFormatError
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.runner import CodeRunner

LONE = "\ud800"  # what json.loads makes of the escape "\ud800": no UTF-8 encodes it
GOOD = {"id": "p", "public_tests": [{"input": "1\n", "output": "1\n"}], "hidden_tests": [{"input": "1\n", "output": "1\n"}]}


def with_field(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(json.dumps(GOOD))
    at: Any = record
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return record


@pytest.mark.parametrize("path", [("hidden_tests", 0, "input"), ("hidden_tests", 0, "output"),
                                  ("public_tests", 0, "output"), ("description",), ("starter_code",),
                                  ("correct_solutions",), ("id",)])
def test_a_lone_surrogate_in_a_problem_record_is_refused_naming_the_field(path: tuple[Any, ...]) -> None:
    value: Any = [f"print(1) # {LONE}"] if path == ("correct_solutions",) else f"x{LONE}y"
    with pytest.raises(ProblemFormatError, match="surrogate") as e:
        Problem.from_dict(with_field(path, value))
    assert str(path[-1] if path[-1] != 0 else path[0]) in str(e.value)


def test_a_lone_surrogate_in_a_checker_spec_is_refused() -> None:
    with pytest.raises(ProblemFormatError, match="surrogate"):
        Problem.from_dict(with_field(("checker",), {"type": "python", "source": f"print(1) # {LONE}"}))


def test_cpfleet_judge_skips_such_a_record_and_judges_the_rest(tmp_path: Path) -> None:
    bad = with_field(("hidden_tests", 0, "output"), LONE + "\n")
    bad["id"] = "bad"
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps(bad) + "\n" + json.dumps(GOOD) + "\n")
    jobs = tmp_path / "j.jsonl"
    jobs.write_text("".join(json.dumps({"problem_id": pid, "job_id": pid, "completion": "```python\nprint(1)\n```"}) + "\n"
                            for pid in ("bad", "p")))
    out = subprocess.run([sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--no-progress",
                          "--workers", "1"], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in out.stderr, out.stderr
    assert "surrogate" in out.stderr
    results = {r["job_id"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert results["p"]["reward"] == 1.0
    assert results["bad"]["reward"] is None  # its problem was refused: never judged, never a 0


FN = Problem.from_dict({"id": "fn", "fn_name": "f",
                        "public_tests": [{"input": "[1]", "output": '"a"'}],
                        "hidden_tests": [{"input": '["\\udc80"]', "output": '"\\ud800"'}]})


def encodable(result: cpfleet.JobResult) -> None:
    d = result.to_dict()
    json.dumps(d, ensure_ascii=False).encode("utf-8")  # what cpfleet judge writes
    msgpack.packb(d, use_bin_type=True)  # what a worker replies


@pytest.mark.parametrize(("code", "verdict"), [
    ("def f(x):\n    return 'a' if x == 1 else '\\ud800'", Verdict.OK),
    ("def f(x):\n    return '\\ud800'", Verdict.OK),  # the public test (shown) fails, the hidden one passes
    ("def f(x):\n    return ['\\udfff', {'\\ud800': 1}]", Verdict.WRONG_ANSWER),
    ("def f(x):\n    return 'a' if x == 1 else x", Verdict.WRONG_ANSWER),
])
def test_lone_surrogates_in_returned_and_expected_values_are_shown_and_encodable(
        runner: CodeRunner, code: str, verdict: Verdict) -> None:
    result = cpfleet.judge_locally(FN, f"```python\n{code}\n```", runner)
    assert (result.verdict, result.infra_error) == (verdict, False), result.infra_message
    encodable(result)


# A function-call test whose JSON nests deeper than Python's recursion limit: decoding it raised
# RecursionError, which no loader caught, and cpfleet judge died on the record.
@pytest.mark.parametrize("field", ["input", "output"])
@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_a_function_call_test_nested_too_deep_is_refused(field: str, depth: int) -> None:
    deep = "[" * depth + "]" * depth
    test = {"input": "[1]", "output": "1", field: f"[{deep}]" if field == "input" else deep}
    with pytest.raises(ProblemFormatError, match="nest"):
        Problem.from_dict({"id": "deep", "fn_name": "f", "hidden_tests": [test]})


def test_a_function_call_test_nested_as_deep_as_real_data_is_judged(runner: CodeRunner) -> None:
    deep = "[" * 100 + "1" + "]" * 100
    problem = Problem.from_dict({"id": "deep", "fn_name": "f", "hidden_tests": [{"input": f"[{deep}]", "output": deep}]})
    result = cpfleet.judge_locally(problem, "```python\ndef f(x):\n    return x\n```", runner)
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0)


def test_cpfleet_judge_skips_records_nested_past_the_json_decoders_limit(tmp_path: Path) -> None:
    # json.loads raises RecursionError (not ValueError) past ~1000 levels: the record and the
    # job line are malformed input, skipped and named, and every other one is judged
    deep = "[" * 100_000 + "]" * 100_000
    problems = tmp_path / "p.jsonl"
    problems.write_text('{"id": "deep", "x": ' + deep + ', "hidden_tests": []}\n' + json.dumps(GOOD) + "\n")
    jobs = tmp_path / "j.jsonl"
    jobs.write_text(json.dumps({"problem_id": "p", "job_id": "ok", "completion": "```python\nprint(1)\n```"}) + "\n"
                    + '{"problem_id": "p", "job_id": "deep", "x": ' + deep + "}\n")
    out = subprocess.run([sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--no-progress",
                          "--workers", "1"], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["job_id"], r["reward"]) for r in results] == [("ok", 1.0)]
    assert "p.jsonl:1" in out.stderr and "j.jsonl:2" in out.stderr


@pytest.mark.parametrize("limits", [{"time_limit_s": True}, {"memory_limit_mb": True}, {"memory_limit_mb": 100.7}])
def test_limits_that_are_not_numbers_or_whole_megabytes_are_refused(limits: dict[str, Any]) -> None:
    with pytest.raises(ProblemFormatError, match="time_limit_s|memory_limit_mb"):
        Problem.from_dict({"id": "typo", "hidden_tests": [{"input": "", "output": "1"}], **limits})


def test_whole_limits_written_as_floats_or_strings_still_load() -> None:
    p = Problem.from_dict({"id": "ok", "hidden_tests": [{"input": "", "output": "1"}],
                           "time_limit_s": "2.5", "memory_limit_mb": 256.0})
    assert (p.time_limit_s, p.memory_limit_mb) == (2.5, 256)


def test_a_function_name_longer_than_the_sandboxs_messages_carry_is_refused_at_load() -> None:
    # the name travels in the job-start message to the runner's zygote (64 KiB): a 100 kB one,
    # a valid identifier, ended the zygote on every job of the problem ("restarting the sandbox
    # zygote", INTERNAL), for the data's doing
    with pytest.raises(ProblemFormatError, match="fn_name"):
        Problem.from_dict({"id": "long", "fn_name": "f" * 100_000, "hidden_tests": [{"input": "[1]", "output": "1"}]})
    Problem.from_dict({"id": "ok", "fn_name": "f" * 200, "hidden_tests": [{"input": "[1]", "output": "1"}]})


def test_a_run_message_over_the_channels_bound_is_refused_before_it_is_sent(runner: CodeRunner) -> None:
    """A message past what the receiver reads (64 KiB) arrived cut short, and the job init or
    zygote decoding it exited: a checker's 80 kB of arguments ended its job init on every run.
    Such a message is now refused before it is sent (INTERNAL for that run, as for one past the
    socket's buffer), and the runner goes on."""
    from cpfleet.sandbox import programs
    from cpfleet.sandbox.runner import Limits

    image = programs.source_image("python3", "import sys\nprint(sum(map(len, sys.argv[1:])))\n")
    limits = Limits(time_s=5.0, memory_mb=256)
    with programs.open_session(runner, image) as session:
        too_long = session.run(b"", limits, argv=["y" * 80_000])
    assert too_long.status == Verdict.INTERNAL and "over the channel" in too_long.error, too_long.error
    with programs.open_session(runner, image) as session:
        fine = session.run(b"", limits, argv=["y" * 30_000])
    assert (fine.status, fine.stdout) == (Verdict.OK, b"30000\n"), fine.error
