"""``cpfleet validate``: accepted solutions that fail and incorrect solutions that pass are reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cpfleet.core.problem import Problem
from cpfleet.datasets.validate import ACCEPTED_FAILS, WEAK_TESTS, fence, validate
from cpfleet.sandbox.extract import extract_code

REPO = Path(__file__).resolve().parents[1]
# "print any of them" statements whose human solution prints another valid answer than the
# stored one, as `cpfleet validate` reports on the whole shared file.
MULTI_ANSWER = [
    "codecontests/1217_d_coloring_edges_7410",
    "codecontests/27_b_tournament_1914",
    "codecontests/715_b_complete_the_graph_3806",
]
ACCEPTED = [
    "codecontests/690_c1_brain_network_easy_6407",
    "codecontests/1016_d_vasya_and_the_matrix_3445",
    "codecontests/771_a_bear_and_friendship_condition_2351",
]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cpfleet", "validate", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=600)


def test_validate_on_shared_data_reports_the_multi_answer_failures(
    codecontests_records: list[dict[str, Any]], tmp_path: Path
) -> None:
    by_id = {r["id"]: r for r in codecontests_records}
    for pid in MULTI_ANSWER:  # the reason they fail: several answers are accepted
        assert "any" in by_id[pid]["description"]
    path = tmp_path / "slice.jsonl"
    path.write_text("".join(json.dumps(by_id[pid]) + "\n" for pid in MULTI_ANSWER + ACCEPTED))
    out = tmp_path / "report.json"
    proc = cli(str(path), "--workers", "2", "--json", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    failing = {f["problem_id"]: f for f in report["findings"] if f["finding"] == ACCEPTED_FAILS}
    assert sorted(failing) == sorted(MULTI_ANSWER)
    for f in failing.values():
        assert f["verdict"] == "WRONG_ANSWER"
        assert f["failed_at"].startswith("public #")  # the statement's own example already differs
    assert report["summary"]["solutions"]["correct"] == {"judged": 6, "accepted": 3, "infra": 0}
    assert report["summary"]["problems_with_failing_accepted_solution"] == 3
    for pid in MULTI_ANSWER:  # the table on stdout names them too
        assert any(line.startswith(pid) and ACCEPTED_FAILS in line for line in proc.stdout.splitlines())
    assert "problems whose accepted solution fails: 3" in proc.stdout


def synthetic(pid: str, tests: list[tuple[str, str]], correct: list[str], incorrect: list[str]) -> Problem:
    public = [{"input": i, "output": o} for i, o in tests[:1]]
    hidden = [{"input": i, "output": o} for i, o in tests[1:]]
    return Problem.from_dict({"id": pid, "public_tests": public, "hidden_tests": hidden,
                              "correct_solutions": correct, "incorrect_solutions": incorrect})


MAX_CODE = "a, b = map(int, input().split())\nprint(max(a, b))\n"


def test_incorrect_solution_passing_weak_tests_is_reported() -> None:
    # every test has a >= b, so printing a passes: the tests are weak
    weak = synthetic("max-weak", [("5 3\n", "5\n"), ("9 1\n", "9\n"), ("4 4\n", "4\n")], [MAX_CODE],
                     ["a, b = map(int, input().split())\nprint(a)\n", "print(0)\n"])
    strong = synthetic("max-strong", [("5 3\n", "5\n"), ("1 9\n", "9\n")], [MAX_CODE],
                       ["a, b = map(int, input().split())\nprint(a)\n"])
    # the second hidden test's expected output is wrong: the accepted solution fails there
    broken = synthetic("max-broken", [("1 2\n", "2\n"), ("3 4\n", "4\n"), ("5 6\n", "7\n")], [MAX_CODE], [])
    bare = synthetic("no-solutions", [("1 2\n", "2\n"), ("3 4\n", "4\n")], [], [])
    problems = {p.id: p for p in (weak, strong, broken, bare)}
    report = validate(problems, workers=1)
    found = {(f.problem_id, f.finding, f.solution, f.verdict, f.failed_at) for f in report.findings}
    assert found == {
        ("max-weak", WEAK_TESTS, "incorrect#0", "OK", None),
        ("max-broken", ACCEPTED_FAILS, "correct#0", "WRONG_ANSWER", "hidden #2"),
    }
    assert report.without_solutions == 1
    assert report.solutions["correct"] == {"judged": 3, "accepted": 2, "infra": 0}
    assert report.solutions["incorrect"] == {"judged": 3, "accepted": 1, "infra": 0}
    assert report.problems_with(WEAK_TESTS) == ["max-weak"]


def test_cli_strict_exit_code_and_missing_file(tmp_path: Path) -> None:
    weak = synthetic("w", [("5 3\n", "5\n"), ("9 1\n", "9\n")], [MAX_CODE],
                     ["a, b = map(int, input().split())\nprint(a)\n"])
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(weak.to_dict()) + "\n")
    assert cli(str(path), "--workers", "1", "--no-progress").returncode == 0
    strict = cli(str(path), "--workers", "1", "--no-progress", "--strict")
    assert strict.returncode == 1 and WEAK_TESTS in strict.stdout
    missing = cli(str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip() == f"cpfleet validate: {tmp_path / 'nope.jsonl'}: problem file not found"


def test_fence_survives_backticks_inside_the_solution() -> None:
    code = 's = "```"\nprint(s * 2)  # ````python in a comment\n'
    assert extract_code(fence(code)) == code
