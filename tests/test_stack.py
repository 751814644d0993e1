"""The stack a solution gets: its main thread's stack is as large as its memory limit, as on
Kattis, DOMjudge and Codeforces (a flood fill 500,000 frames deep is an accepted solution), in
every language, and the threads it starts get stacks of a sane default size, so a correct
program starting a few threads is not refused them by the memory limit (glibc sizes default
thread stacks from the stack rlimit, and each one counts against RLIMIT_AS). The C++ cases
(500,000 frames at 1024 MB, four threads at 256 MB) are in tests/judge_cases/."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner


def _problem(memory_mb: int, n: int) -> Problem:
    return Problem.from_dict({
        "id": f"stack-{memory_mb}", "time_limit_s": 10, "memory_limit_mb": memory_mb,
        "public_tests": [{"input": f"{n}\n", "output": f"{n}\n"}],
        "hidden_tests": [{"input": f"{n}\n", "output": f"{n}\n"}],
    })


def _needs(language: str) -> None:
    missing = languages.missing_tools(language)
    if missing:
        pytest.skip(f"{language} toolchain not installed here: {missing}")


# Each frame holds a 256-byte buffer the optimiser cannot drop: 500,000 frames need ~150-200 MB
# of stack, well past the 64 MB a stack rlimit of the usual kind gives, well within 1024 MB.
# The C++ program lives in the data-driven suite (tests/judge_cases/deep_stack: accepted at 1024
# MB; threads: four std::threads accepted at 256 MB); here it must still fail at 64 MB.
CASES = Path(__file__).resolve().parent / "judge_cases"
CPP_DEEP = (CASES / "deep_stack" / "submissions" / "dfs.cpp").read_text()

JAVA_DEEP = """
import java.util.*;
public class Main {
    static int depth(int left, long a, long b, long c) {
        if (left == 0) return 0;
        return 1 + depth(left - 1, a + left, b ^ a, c + b);
    }
    public static void main(String[] x) {
        int n = new Scanner(System.in).nextInt();
        System.out.println(depth(n, 1, 2, 3));
    }
}
"""

# Recursion through a C function (functools.lru_cache's wrapper) uses the C stack at every level,
# as recursive DFS with a cache does in contest Python: 300,000 levels need more than 64 MB.
PY_DEEP = """
import sys
from functools import lru_cache
sys.setrecursionlimit(10**7)
@lru_cache(maxsize=None)
def depth(left):
    return 0 if left == 0 else 1 + depth(left - 1)
n = int(input())
print(depth(n))
"""


def test_cpp_recursion_past_the_memory_limit_is_still_refused(runner: CodeRunner) -> None:
    # the stack is bounded by the memory limit: 500,000 frames of ~300 bytes do not fit in 64 MB
    _needs("cpp")
    result = evaluate(_problem(64, 500_000), f"```cpp\n{CPP_DEEP}```\n", runner, job_id="cpp-deep-64")
    assert result.verdict in (Verdict.RUNTIME_ERROR, Verdict.MEMORY_LIMIT) and result.reward == 0.0
    assert not result.infra_error


def test_java_main_thread_gets_a_stack_as_large_as_the_memory_limit(runner: CodeRunner) -> None:
    # 4,000,000 frames: past 64 MB of stack whether the JIT compiled the method or not
    _needs("java")
    result = evaluate(_problem(1024, 4_000_000), f"```java\n{JAVA_DEEP}```\n", runner, job_id="java-deep")
    assert (result.verdict, result.reward, result.infra_error) == (Verdict.OK, 1.0, False), result.observation


def test_python_deep_recursion_through_c_frames_gets_the_memory_limit_as_stack(runner: CodeRunner) -> None:
    result = evaluate(_problem(1024, 300_000), f"```python\n{PY_DEEP}```\n", runner, job_id="py-deep")
    assert (result.verdict, result.reward, result.infra_error) == (Verdict.OK, 1.0, False), result.observation


# RLIMIT_AS (the memory limit of C and C++) counts address space reserved, not used: glibc reserves
# 64 MB for the malloc arena of each thread that allocates. A program running its solve() in a
# thread of its own (the big-stack idiom: 16 MB here) and holding a 200 MB vector under a 256 MB
# limit needed 16 + 64 + 200 MB of it: a MEMORY_LIMIT for the right answer the same program
# without the thread gets. 300 MB is past the limit with or without the arena.
CPP_SOLVE_IN_A_THREAD = """#include <bits/stdc++.h>
#include <pthread.h>
void* solve(void*) { long long n; std::cin >> n; std::string s = "x"; std::vector<int> v(N, 1);
  std::cout << n + v[12345] - 1 << "\\n"; return nullptr; }
int main() { pthread_attr_t at; pthread_attr_init(&at); pthread_attr_setstacksize(&at, 16 << 20);
  pthread_t t; if (pthread_create(&t, &at, solve, nullptr)) return 7; pthread_join(t, nullptr); }
"""


@pytest.mark.parametrize(("mb", "verdict", "reward"), [(200, Verdict.OK, 1.0), (300, Verdict.MEMORY_LIMIT, 0.0)])
def test_a_thread_holding_most_of_the_memory_limit_is_not_refused_it_by_its_malloc_arena(
        runner: CodeRunner, mb: int, verdict: Verdict, reward: float) -> None:
    _needs("cpp")
    code = CPP_SOLVE_IN_A_THREAD.replace("N, 1", f"{mb << 18}, 1")
    result = evaluate(_problem(256, 5), f"```cpp\n{code}```\n", runner, job_id=f"cpp-thread-{mb}")
    assert (result.verdict, result.reward) == (verdict, reward), result.observation
