"""``cpfleet validate`` on every problem kind: function-call problems, checker programs and
interactive problems report accepted solutions that fail, incorrect ones that pass (weak tests)
and checkers that cannot judge (a finding of its own, not an infrastructure error); the ICPC
file's ``submissions`` serve as reference solutions."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cpfleet.core.problem import Problem
from cpfleet.datasets.validate import ACCEPTED_FAILS, CHECKER_ERROR, WEAK_TESTS, validate

VALIDATOR_OK = r"""
#include <cstdio>
int main() { long long a, b; return scanf("%lld %lld", &a, &b) == 2 && a + b == 10 ? 42 : 43; }
"""


def kattis(source: str, kind: str = "kattis_validator") -> dict[str, object]:
    return {"type": kind, "files": {"v/validate.cpp": source}, "entry_points": ["v/validate.cpp"], "language": "cpp"}


PROBLEMS = [
    {  # function call, weak tests: the incorrect solution (always 0) passes
        "id": "fn/weak", "fn_name": "f",
        "public_tests": [{"input": "[0]", "output": "0"}], "hidden_tests": [{"input": "[0]", "output": "0"}],
        "correct_solutions": ["def f(x):\n    return x * 2\n"],
        "incorrect_solutions": ["def f(x):\n    return 0\n"],
    },
    {  # function call: the accepted solution fails (returns a string)
        "id": "fn/broken-reference", "fn_name": "f",
        "public_tests": [{"input": "[1]", "output": "2"}], "hidden_tests": [{"input": "[2]", "output": "4"}],
        "correct_solutions": ["def f(x):\n    return str(x * 2)\n"],
    },
    {  # a validator that accepts any pair summing to 10; sound tests
        "id": "kattis/sum", "checker": kattis(VALIDATOR_OK),
        "public_tests": [{"input": "", "output": "5 5"}], "hidden_tests": [{"input": "", "output": "5 5"}],
        "correct_solutions": ["print(1, 9)"], "incorrect_solutions": ["print(1, 1)"],
    },
    {  # a validator that crashes: a checker error, for the correct and the incorrect solution alike
        "id": "kattis/crash", "checker": kattis("#include <cstdlib>\nint main() { abort(); }\n"),
        "public_tests": [{"input": "", "output": "5 5"}], "hidden_tests": [{"input": "", "output": "5 5"}],
        "correct_solutions": ["print(1, 9)"], "incorrect_solutions": ["print(1, 1)"],
    },
]


def test_validate_reports_every_finding_kind_across_problem_kinds() -> None:
    problems = {p["id"]: Problem.from_dict(p) for p in PROBLEMS}
    report = validate(problems, workers=1)
    assert report.problems_with(WEAK_TESTS) == ["fn/weak"]
    assert report.problems_with(ACCEPTED_FAILS) == ["fn/broken-reference"]
    assert report.problems_with(CHECKER_ERROR) == ["kattis/crash"]
    assert not report.infra  # a broken checker is the problem's finding, not the fleet's failure
    assert report.solutions["correct"]["accepted"] == 2  # fn/weak and kattis/sum


def test_validate_cli_reads_the_submissions_of_a_kattis_style_file(tmp_path: Path) -> None:
    record = {
        "id": "kattis/sum-subs", "checker": kattis(VALIDATOR_OK), "time_limit_s": 2.0,
        "public_tests": [{"input": "", "output": "5 5"}], "hidden_tests": [{"input": "", "output": "5 5"}],
        "submissions": [
            {"language": "python3", "expected": "accepted", "file": "a.py", "source": "print(2, 8)"},
            {"language": "python3", "expected": "wrong_answer", "file": "w.py", "source": "print(2, 9)"},
            {"language": "python3", "expected": "wrong_answer", "file": "weak.py", "source": "print(3, 7)"},
            {"language": "cpp", "expected": "accepted", "file": "a.cpp", "source": "int main(){}"},
        ],
    }
    path = tmp_path / "p.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(record) + "\n")
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "cpfleet", "validate", str(path), "--workers", "1", "--no-progress",
                           "--json", str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["summary"]["solutions"]["correct"] == {"judged": 1, "accepted": 1, "infra": 0}
    assert report["summary"]["solutions"]["incorrect"]["judged"] == 2
    assert [(f["problem_id"], f["finding"], f["solution"]) for f in report["findings"]] == [
        ("kattis/sum-subs", WEAK_TESTS, "incorrect#1")
    ]


@pytest.mark.parametrize("bad", [{"language": "python3", "expected": "accepted"}, "not a dict"])
def test_malformed_submissions_are_ignored_not_fatal(bad: object) -> None:
    p = Problem.from_dict({"id": "x", "public_tests": [{"input": "", "output": ""}], "submissions": [bad]})
    assert p.correct_solutions == ()
