"""C++, C, Java and PyPy jobs through a real fleet (redis-server + prefork worker + FleetClient):
the job's language travels on the wire, results match ``cpfleet judge``, duplicates hit the
compile cache, a missing toolchain is INTERNAL naming it, and the worker says at start which
languages it has."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import start_worker  # noqa: F401  (fixture)

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.producer.client import FleetClient
from cpfleet.sandbox import languages

SUM = Problem.from_dict({
    "id": "lang/sum", "time_limit_s": 2,
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}, {"input": "100 1\n", "output": "101\n"}],
})
CPP = "```cpp\n#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}\n```"
C_CE = "```c\nint main(void){ return }\n```"
JAVA_WA = "```java\npublic class Main { public static void main(String[] a) { System.out.println(0); } }\n```"
PY = "```python\nprint(sum(map(int, input().split())))\n```"


def test_language_jobs_through_the_fleet(redis_url: str, start_worker, tmp_path: Path) -> None:  # noqa: F811
    if languages.missing_tools("cpp") or languages.missing_tools("c"):
        pytest.skip("g++/gcc not installed here")
    worker = start_worker(redis_url, concurrency=2, env={"CPFLEET_COMPILE_CACHE_DIR": str(tmp_path / "cc")})
    assert "languages: python3" in worker.log_text()
    jobs = [{"problem_id": SUM.id, "completion": CPP, "job_id": f"cpp-{i}"} for i in range(4)]
    jobs += [{"problem_id": SUM.id, "completion": C_CE, "job_id": "c-ce"}]
    expected = {f"cpp-{i}": (Verdict.OK, 1.0, "cpp") for i in range(4)}
    expected["c-ce"] = (Verdict.COMPILE_ERROR, 0.0, "c")
    if not languages.missing_tools("java"):
        jobs.append({"problem_id": SUM.id, "completion": JAVA_WA, "job_id": "java-wa"})
        expected["java-wa"] = (Verdict.WRONG_ANSWER, 0.0, "java")
    if not languages.missing_tools("pypy3"):
        jobs.append({"problem_id": SUM.id, "completion": PY, "job_id": "pypy", "language": "pypy3"})
        expected["pypy"] = (Verdict.OK, 1.0, "pypy3")
    with FleetClient(redis_url, timeout=240, use_cache=False) as fleet:
        fleet.register_problems([SUM])
        results = fleet.gather(fleet.submit_many(jobs), timeout=300)
    got = {r.job_id: (r.verdict, r.reward, r.language) for r in results}
    assert got == expected, [r.infra_message or r.observation for r in results if got[r.job_id] != expected[r.job_id]]
    compiled = [r for r in results if r.job_id.startswith("cpp-") and r.timings.compile_ms > 0]
    assert len(compiled) == 1  # four duplicates compile once per host (a racing pool process waits for it)


def test_missing_toolchain_is_internal_through_the_fleet(redis_url: str, start_worker) -> None:  # noqa: F811
    start_worker(redis_url, concurrency=1, env={"CPFLEET_PYPY": "/nonexistent/pypy3"})
    with FleetClient(redis_url, timeout=120) as fleet:
        fleet.register_problems([SUM])
        result = fleet.submit(SUM.id, PY, language="pypy3").result(timeout=120)
    assert result.infra_error and result.reward is None and "/nonexistent/pypy3" in result.infra_message


def test_trainer_reward_dedupe_never_merges_two_different_cpp_programs(redis_url: str, start_worker) -> None:  # noqa: F811
    """AsyncTRLReward de-duplicates in-flight jobs by their program: two different C++ answers
    in one batch must each get their own reward (a wrong one never inherits a right one's)."""
    import asyncio

    from cpfleet.rewards import AsyncTRLReward

    if languages.missing_tools("cpp"):
        pytest.skip("g++ not installed here")
    start_worker(redis_url, concurrency=2)
    wrong = "```cpp\n#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a-b<<'\\n';}\n```"
    with FleetClient(redis_url) as fleet:
        fleet.register_problems([SUM])
    reward = AsyncTRLReward(redis_url, timeout_s=240)
    try:
        got = asyncio.run(reward(prompts=["p", "p", "p"], completions=[CPP, wrong, CPP], problem_id=[SUM.id] * 3))
    finally:
        reward.close()
    assert got == [1.0, 0.0, 1.0]


def test_trainer_reward_dedupe_never_merges_a_block_that_holds_the_key_separator(redis_url: str, start_worker) -> None:  # noqa: F811
    """The in-flight dedupe key of a completion lists its fenced blocks: one block whose code
    holds what separates two blocks in that list (NUL NUL, then a tag line) must not share the
    key of the completion with those two blocks. The one-block program has NUL bytes in its
    Python source (a syntax error) and must not inherit the two-block completion's reward."""
    import asyncio

    from cpfleet.rewards import AsyncTRLReward

    start_worker(redis_url, concurrency=2)
    right = "```python\nprint(sum(map(int, input().split())))\n```\n```text\nnotes\n```"
    merged = "```python\nprint(sum(map(int, input().split())))\0\0text\nnotes\n```"
    with FleetClient(redis_url) as fleet:
        fleet.register_problems([SUM])
    reward = AsyncTRLReward(redis_url, timeout_s=240)
    try:
        got = asyncio.run(reward(prompts=["p", "p"], completions=[right, merged], problem_id=[SUM.id] * 2))
    finally:
        reward.close()
    assert got == [1.0, 0.0]


def test_in_flight_dedupe_never_merges_a_problem_id_with_inline_tests_of_that_digest(redis_url: str, start_worker) -> None:  # noqa: F811
    """A stored problem's id is free text: one spelled like the dedupe key of an inline test set
    (``tests:`` and that set's digest) must not share the in-flight result of a job on those
    inline tests. The stored problem expects other answers, so the same program is right on the
    inline tests and wrong on the stored problem, in one batch."""
    import asyncio

    from cpfleet.producer.inline_registry import tests_digest

    start_worker(redis_url, concurrency=2)
    inline = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}
    lookalike = Problem.from_dict({
        "id": "tests:" + tests_digest(inline),
        "public_tests": [{"input": "1 2\n", "output": "4\n"}],
        "hidden_tests": [{"input": "3 4\n", "output": "8\n"}],
    })
    program = "```python\nprint(sum(map(int, input().split())))\n```"
    with FleetClient(redis_url) as fleet:
        fleet.register_problems([lookalike])

        async def both() -> list[float]:
            got = await asyncio.gather(fleet.evaluate(inline, program, timeout=240),
                                       fleet.evaluate(lookalike.id, program, timeout=240))
            return [r.reward for r in got]

        assert asyncio.run(both()) == [1.0, 0.0]


def test_the_async_client_takes_a_language_and_never_shares_one_programs_result_across_languages(
        redis_url: str, start_worker) -> None:  # noqa: F811
    """``await fleet.evaluate(..., language=...)``, the path of agentic rollouts and the gateway:
    the job is judged in that language; the same text in flight as python3 and as pypy3 is two
    jobs; an unknown language fails its own call only."""
    import asyncio

    from cpfleet.core.errors import UnknownLanguage

    if languages.missing_tools("pypy3"):
        pytest.skip("pypy3 not installed here")
    start_worker(redis_url, concurrency=2)

    async def judge(fleet: FleetClient) -> list[object]:
        return await asyncio.gather(
            fleet.evaluate(SUM.id, PY, language="pypy3"), fleet.evaluate(SUM.id, PY, language="python3"),
            fleet.evaluate(SUM.id, PY, language="cobol"), return_exceptions=True)

    with FleetClient(redis_url, timeout=240, use_cache=False) as fleet:
        fleet.register_problems([SUM])
        pypy, cpython, unknown = asyncio.run(judge(fleet))
    assert isinstance(unknown, UnknownLanguage) and "cobol" in str(unknown)
    from cpfleet.core.results import JobResult

    assert isinstance(pypy, JobResult) and isinstance(cpython, JobResult), (pypy, cpython)
    assert [(r.language, r.reward, r.cache_hit) for r in (pypy, cpython)] == [("pypy3", 1.0, False), ("python3", 1.0, False)]
