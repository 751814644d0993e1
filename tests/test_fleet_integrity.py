"""Reward integrity through a real fleet: a slow program ends TIME_LIMIT inside the job's time
budget (never INTERNAL from the task's soft time limit), and load-dependent verdicts never
enter the result cache."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest
import redis
from fleet_helpers import FleetWorker

from cpfleet.core.results import JobResult
from cpfleet.core.verdict import Verdict
from cpfleet.fleet.redis_server import RedisServer
from cpfleet.producer.client import FleetClient
from cpfleet.workers.config import JOB_OVERHEAD_S, JOB_TAIL_S, Settings, job_end_s, job_time_budget
from cpfleet.workers.result_cache import ResultCache

SOFT_LIMIT_S = 10  # the worker's soft time limit here: its job time budget is 9 s

MANY = {
    "id": "integrity/many",
    "public_tests": [{"input": "0\n", "output": "1\n"}],
    "hidden_tests": [{"input": f"{i}\n", "output": f"{i + 1}\n"} for i in range(1, 31)],
    "time_limit_s": 0.5,
}


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    env = {"CPFLEET_SOFT_TIME_LIMIT": str(SOFT_LIMIT_S), "CPFLEET_HARD_TIME_LIMIT": "20"}
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("integrity"), concurrency=1, env=env) as worker:
        yield worker


@pytest.fixture
def fleet(node: FleetWorker) -> Iterator[FleetClient]:
    with FleetClient(node.redis_url, timeout=60) as client:
        client.register_problems([MANY])
        yield client


def test_a_program_slow_on_every_test_ends_time_limit_never_internal(fleet: FleetClient) -> None:
    # each test sleeps 0.6 s: under its wall backstop (2.5 s), so every test alone passes, but
    # 31 of them (~19 s) run far past the task's soft limit (10 s); the job's budget (9 s) stops it
    code = f"```python\nimport time  # {uuid.uuid4().hex}\ntime.sleep(0.6)\nprint(int(input()) + 1)\n```"
    r = fleet.submit("integrity/many", code, reward_shape="fraction").result(timeout=90)
    assert (r.verdict, r.reward, r.infra_error) == (Verdict.TIME_LIMIT, 0.0, False), r.infra_message
    assert "time budget" in r.stopped and 0 < r.hidden.run < 30
    assert not r.deterministic


def _slow_to_compile(body: str, keywords: int = 6000, depth: int = 3) -> str:
    """``body`` after a dead branch that CPython takes seconds to compile: a call of
    ``keywords`` keywords (checked pairwise) ``depth`` ``finally`` blocks deep (each doubles it)."""
    lines = ["if len(__name__) < 0:"]
    for level in range(1, depth + 1):
        lines += ["    " * level + "try:", "    " * level + "    pass", "    " * level + "finally:"]
    lines.append("    " * (depth + 1) + "print(" + ",".join(f"k{i}=0" for i in range(keywords)) + ")")
    return "\n".join(lines) + "\n" + body


def test_a_program_slow_to_load_and_on_every_test_ends_time_limit_never_internal(fleet: FleetClient) -> None:
    # its load (~2.5 s of compile on an idle machine, under the 15 s compile limit) comes out of
    # the task's soft limit (10 s) before the tests start: a full budget (9 s) after it would
    # run the task into its soft limit (INTERNAL); the tests get what the soft limit leaves
    code = _slow_to_compile(f"import time  # {uuid.uuid4().hex}\ntime.sleep(0.6)\nprint(int(input()) + 1)\n")
    r = fleet.submit("integrity/many", f"```python\n{code}```", reward_shape="fraction").result(timeout=90)
    assert (r.verdict, r.reward, r.infra_error) == (Verdict.TIME_LIMIT, 0.0, False), r.infra_message
    assert "time budget" in r.stopped, r.stopped
    assert r.hidden.run < 30 and not r.deterministic


def test_a_wall_backstop_verdict_is_judged_again_not_served_from_the_cache(fleet: FleetClient) -> None:
    code = f"```python\nimport time  # {uuid.uuid4().hex}\ntime.sleep(30)\n```"
    first = fleet.submit("integrity/many", code).result(timeout=90)
    second = fleet.submit("integrity/many", code).result(timeout=90)
    assert first.verdict == second.verdict == Verdict.TIME_LIMIT
    assert "wall-clock backstop" in first.stopped and not first.deterministic
    assert not first.cache_hit and not second.cache_hit
    # a CPU-time verdict is deterministic and is cached
    spin = f"```python\nwhile True:  # {uuid.uuid4().hex}\n    pass\n```"
    first = fleet.submit("integrity/many", spin).result(timeout=90)
    second = fleet.submit("integrity/many", spin).result(timeout=90)
    assert first.deterministic and "CPU time limit 0.5s exceeded" in first.stopped
    assert not first.cache_hit and second.cache_hit and second.verdict == Verdict.TIME_LIMIT


def test_result_cache_refuses_load_dependent_results(redis_url: str) -> None:
    cache = ResultCache(redis.Redis.from_url(redis_url), ttl_s=60)
    key = cache.key("v-" + uuid.uuid4().hex, "print(1)\n", "all_or_nothing", "full")
    flaky = JobResult(job_id="j", problem_id="p", reward=0.0, verdict=Verdict.TIME_LIMIT, deterministic=False)
    assert not cache.put(key, flaky)
    assert cache.get(key, "j2") is None
    steady = JobResult(job_id="j", problem_id="p", reward=0.0, verdict=Verdict.TIME_LIMIT)
    assert cache.put(key, steady) and cache.get(key, "j3") is not None


def test_the_job_time_budget_leaves_the_worst_case_job_under_the_soft_limit() -> None:
    s = Settings.from_env({})
    assert s.job_time_budget_s + JOB_OVERHEAD_S <= s.soft_time_limit_s
    # the tests end by job_end_s after the task's start whatever the load took, leaving the tail
    assert job_end_s(600) + JOB_TAIL_S == 600 and job_end_s(10) == 9
    assert job_time_budget(600) == 600 - JOB_OVERHEAD_S and job_time_budget(20) == 18
    assert Settings.from_env({"CPFLEET_JOB_TIME_BUDGET": "100"}).job_time_budget_s == 100
    with pytest.raises(ValueError, match="CPFLEET_JOB_TIME_BUDGET"):
        Settings.from_env({"CPFLEET_JOB_TIME_BUDGET": "590"})


OPTIONAL_SUM = """```cpp
#include <cstdio>
#include <optional>
int main() { std::optional<int> a, b; int x, y; if (std::scanf("%d %d", &x, &y) != 2) return 1;
             a = x; b = y; std::printf("%d\\n", *a + *b); }
```"""


def test_workers_with_another_toolchain_setting_never_serve_each_others_cached_results(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # the same completion is a compile error under C++11 (no std::optional) and correct under
    # C++17: a worker set to gnu++17 must judge it itself, not take the C++11 worker's cached verdict
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed (the languages' toolchains: see .ci/run)")
    problem = {"id": f"integrity/optional-{uuid.uuid4().hex[:8]}", "hidden_tests": [{"input": "2 3\n", "output": "5\n"}]}
    verdicts = []
    # a Redis of its own: this module's `node` worker (default settings) must not take these jobs
    with RedisServer(data_dir=str(tmp_path_factory.mktemp("toolchain-redis"))) as server:
        for std in ("c++11", "gnu++17", "c++11"):
            logs = tmp_path_factory.mktemp("toolchain")
            with FleetWorker(server.url, logs, concurrency=1, env={"CPFLEET_CPP_STD": std}) as worker:
                with FleetClient(worker.redis_url, timeout=60) as client:
                    client.register_problems([problem])
                    r = client.submit(problem["id"], OPTIONAL_SUM).result(timeout=90)
            verdicts.append((r.verdict, r.cache_hit))
    assert verdicts == [(Verdict.COMPILE_ERROR, False), (Verdict.OK, False), (Verdict.COMPILE_ERROR, True)]
