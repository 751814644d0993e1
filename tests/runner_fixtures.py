"""Shared runner fixtures: one runner per kind per test module (starting one costs a zygote)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.runner import CodeRunner, Limits, RunResult
from sandbox.runners import RUNNER_KINDS, make_runner


@pytest.fixture(scope="module", params=RUNNER_KINDS)
def runner(request: pytest.FixtureRequest) -> Iterator[CodeRunner]:
    r = make_runner(request.param)
    yield r
    r.close()


def run(runner: CodeRunner, source: str, stdin: str | bytes = b"", **limits: object) -> RunResult:
    err = runner.load(source)
    assert err is None, err
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return runner.run(data, Limits(**limits))  # type: ignore[arg-type]
