"""The seams between modules hold: the client layer's modules use each other's public methods
only (one ``Submitter`` for ``FleetClient`` and the batcher), and a ``JobResult`` is built once
from its ``JobStamp`` with the worker's fields, its wire form unchanged."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import msgpack
import pytest

from cpfleet.core.problem import Problem
from cpfleet.core.results import JobResult, JobStamp, Timings
from cpfleet.core.results import TestReport as Report
from cpfleet.core.results import TestSetSummary as Summary
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.runner import CodeRunner

REPO = Path(__file__).resolve().parents[1]


def _private_reaches(path: Path) -> list[str]:
    """``obj._name`` where ``obj`` is not ``self``/``cls`` and this module defines no ``_name``
    itself: a reach into another module's internals (dunders are not private)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if node.attr not in defined:
            found.append(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{node.lineno}: "
                         f"{ast.unparse(node)}")
    return found


def test_client_layer_modules_reach_into_no_other_modules_privates() -> None:
    found = [hit for path in sorted((REPO / "producer").glob("*.py")) for hit in _private_reaches(path)]
    assert not found, "private attributes used across modules (make them public or move the code):\n" + "\n".join(found)


def test_the_private_reach_rule_itself_catches_a_reach(tmp_path: Path) -> None:
    bad = tmp_path / "batcher.py"
    bad.write_text("class A:\n    def f(self, fleet):\n        self._own = 1\n        return fleet._make(self._own)\n")
    assert [hit.split(": ", 1)[1] for hit in _private_reaches(bad)] == ["fleet._make"]


def _wire(result: JobResult) -> bytes:
    return msgpack.packb(result.to_dict(), use_bin_type=True)


def test_a_stamp_builds_the_same_wire_result_as_the_fields_set_one_by_one() -> None:
    """The stamp puts the worker's fields in at construction: the bytes on the wire are those
    of a result built bare and then given them, as the worker did before."""
    public = Summary(passed=1, total=2, run=2, first_failure=Verdict.WRONG_ANSWER, first_failure_index=1,
                            tests=[Report(Verdict.OK, 3.0, 2.0), Report(Verdict.WRONG_ANSWER, 4.0, 3.0)])
    stamp = JobStamp("j", "p", "public", "fraction", problem_version="v1", worker="w@h", queued_ms=12.5)
    built = stamp.result(0.5, Verdict.WRONG_ANSWER, observation="obs", public=public, executed_ms=9.0, cpu_ms=5.0,
                         compile_ms=1.0, language="cpp", deterministic=False)
    patched = JobResult("j", "p", 0.5, Verdict.WRONG_ANSWER, observation="obs", public=public, language="cpp",
                        deterministic=False)
    patched.timings = Timings(queued_ms=12.5, executed_ms=9.0, cpu_ms=5.0, compile_ms=1.0)
    patched.mode, patched.reward_shape, patched.problem_version, patched.worker = "public", "fraction", "v1", "w@h"
    assert _wire(built) == _wire(patched)
    assert JobResult.from_dict(msgpack.unpackb(_wire(built), raw=False)) == built
    assert set(built.to_dict()) == {f.name for f in fields(JobResult)}


def test_a_stamped_infra_error_is_masked_and_keeps_the_jobs_options() -> None:
    infra = JobStamp("j", "p", "public", "fraction", worker="w").infra("sandbox died", language="c")
    assert (infra.reward, infra.infra_error, infra.verdict) == (None, True, Verdict.INTERNAL)
    assert infra.observation == "[infrastructure error: sandbox died]"
    assert (infra.mode, infra.reward_shape, infra.worker, infra.language) == ("public", "fraction", "w", "c")
    # the classmethod every other caller uses is the stamp's, with only the ids known
    assert _wire(JobResult.infra("j", "p", "x", Verdict.UNKNOWN_PROBLEM)) == _wire(
        JobStamp("j", "p").infra("x", Verdict.UNKNOWN_PROBLEM))


def test_a_cache_hit_answers_with_this_jobs_fields_and_the_cached_judging() -> None:
    cached = JobStamp("old", "p", problem_version="v0", worker="other").result(
        1.0, Verdict.OK, observation="all passed", executed_ms=800.0, cpu_ms=700.0, compile_ms=300.0, language="cpp")
    hit = JobStamp("new", "p", problem_version="v1", worker="me", queued_ms=4.0).cached(cached, executed_ms=0.5)
    assert (hit.job_id, hit.worker, hit.problem_version, hit.cache_hit) == ("new", "me", "v1", True)
    assert hit.timings == Timings(queued_ms=4.0, executed_ms=0.5, cpu_ms=0.0, compile_ms=300.0)
    assert (hit.reward, hit.verdict, hit.observation, hit.language) == (1.0, Verdict.OK, "all passed", "cpp")
    assert cached.job_id == "old" and not cached.cache_hit  # the cached result itself is untouched


def test_the_old_names_still_work_as_aliases_of_the_new(fork_runner: CodeRunner) -> None:
    """Each has a name for what it is and keeps its older name as an alias for code that uses
    it: the local judge (``cpfleet.judge_locally``, not to be confused with the fleet's
    ``FleetClient.evaluate``) and the runner factory (``cpfleet.sandbox.runner``, not a module a
    letter apart)."""
    import cpfleet
    from cpfleet.sandbox import runner, runners

    assert cpfleet.evaluate is cpfleet.judge_locally
    assert "judge_locally" in cpfleet.__all__ and "evaluate" in cpfleet.__all__
    assert runners.make_runner is runner.make_runner and runners.RUNNER_KINDS == runner.RUNNER_KINDS
    problem = Problem.from_dict({"id": "double", "public_tests": [{"input": "2\n", "output": "4\n"}],
                                 "hidden_tests": [{"input": "5\n", "output": "10\n"}]})
    right, wrong = "```python\nprint(2 * int(input()))\n```", "```python\nprint(int(input()))\n```"
    for judge in (cpfleet.evaluate, cpfleet.judge_locally):
        assert (judge(problem, right, fork_runner).reward, judge(problem, wrong, fork_runner).reward) == (1.0, 0.0)


def test_the_dataset_schema_lives_in_the_core_and_its_old_paths_still_import() -> None:
    """records.py and testshapes.py are read by the client (inline tests) and by the dataset
    tools: they are in the core, below both; the old client-layer paths name the same modules."""
    import cpfleet.core.records
    import cpfleet.core.testshapes
    import cpfleet.producer.records
    import cpfleet.producer.testshapes
    from cpfleet.producer.records import record_errors

    assert cpfleet.producer.records is cpfleet.core.records
    assert cpfleet.producer.testshapes is cpfleet.core.testshapes
    assert record_errors is cpfleet.core.records.record_errors
    assert record_errors({"id": "x", "time_limit_s": -1}) == ["time_limit_s must be in (0, 600] or null"]


def test_a_health_check_asks_the_client_not_its_redis_connection() -> None:
    """What the gateway's health and status endpoints need (is Redis there, how long is the
    queue) is the client's public answer, so nothing reads ``fleet._redis``. A real Redis,
    killed."""
    from fleet_helpers import store_problems

    from cpfleet.core.errors import BrokerUnavailable
    from cpfleet.fleet.redis_server import RedisServer
    from cpfleet.producer.client import FleetClient

    with RedisServer() as server:
        store_problems(server.url, "t/none")
        client = FleetClient(server.url, queue="nobody-listens", timeout=900, unreachable_grace=None)
        try:
            assert client.broker_reachable() and client.queue_depth() == 0
            client.submit_many([{"problem_id": "t/none", "completion": "print(1)"}] * 3)
            assert client.queue_depth() == 3  # no worker takes them
            server.stop(kill=True)
            assert not client.broker_reachable()
            with pytest.raises(BrokerUnavailable):
                client.queue_depth()
        finally:
            client.close()
