"""The fork server is indistinguishable from ``python3 solution.py`` on real programs: every
human solution of the shared CodeContests data gives the same stdout and exit status on both
runners (the subprocess runner execs a real interpreter; it is the reference semantics)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.extract import extract_code
from cpfleet.sandbox.runner import CodeRunner, Limits
from cpfleet.sandbox.runners import make_runner

TESTS_PER_PROBLEM = 1


@pytest.fixture(scope="module")
def both_runners() -> Iterator[tuple[CodeRunner, CodeRunner]]:
    fork, reference = make_runner("forkserver"), make_runner("subprocess")
    yield fork, reference
    fork.close()
    reference.close()


def test_every_human_solution_behaves_the_same_on_both_runners(
    both_runners: tuple[CodeRunner, CodeRunner], codecontests_records: list[dict]
) -> None:
    fork, reference = both_runners
    limits = Limits(time_s=4)
    differences = []
    compared = 0
    for rec in codecontests_records:
        source = rec["correct_solutions"][0]
        source = extract_code(f"```python\n{source}\n```") or source
        tests = (rec["public_tests"] + rec["hidden_tests"])[:TESTS_PER_PROBLEM]
        if fork.load(source) != reference.load(source):
            differences.append((rec["id"], "compile", "", ""))
            continue
        for t in tests:
            data = t["input"].encode()
            a = fork.run(data, limits)
            fork_view = (a.status, a.exit_code, a.stdout)
            reference.load(source)
            b = reference.run(data, limits)
            fork.load(source)
            if Verdict.TIME_LIMIT in (a.status, b.status):
                continue  # CPU-time races between an exec'd and a forked interpreter are not semantics
            compared += 1
            if fork_view != (b.status, b.exit_code, b.stdout):
                differences.append((rec["id"], str(a.status), a.stderr[-300:], b.stderr[-300:]))
    assert compared >= 250
    assert differences == []
