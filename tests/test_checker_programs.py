"""Checker programs and interactive problems, judged end to end through ``evaluate`` on both
runners with real compilers: a testlib checker, a Kattis output validator, an open-r1 Python
checker and a Kattis interactor accept every valid answer and reject wrong ones; a checker
that does not compile, crashes, hangs or answers outside its protocol is an infrastructure
error (reward None), never a 0 or a 1; checkers are confined like the programs they judge."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core.checkers import ProgramSpec, get_checker
from cpfleet.core.errors import CheckerBroken
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import checker_programs
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.runner import CodeRunner

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CPFLEET_SHARED_DATA", REPO.parent / "shared" / "data")).parent
TESTLIB = Path(os.environ.get("CPFLEET_TESTLIB_DIR") or SHARED / "vendor" / "testlib")


@pytest.fixture(scope="module", autouse=True)
def checker_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A fresh compile cache, and testlib.h from the shared vendor folder when present."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CPFLEET_COMPILE_CACHE_DIR", str(tmp_path_factory.mktemp("compile-cache")))
    if (TESTLIB / "testlib.h").is_file():
        mp.setenv(checker_programs.TESTLIB_ENV, str(TESTLIB))
    yield
    mp.undo()


def fenced(code: str) -> str:
    return f"```python\n{code.strip()}\n```\n"


def problem(pid: str, checker: dict[str, Any], public: list[tuple[str, str]], hidden: list[tuple[str, str]],
            **extra: Any) -> Problem:
    return Problem.from_dict({
        "id": pid, "checker": checker, **extra,
        "public_tests": [{"input": i, "output": o} for i, o in public],
        "hidden_tests": [{"input": i, "output": o} for i, o in hidden],
    })


# --- testlib: any permutation of 1..n ------------------------------------------------------------

PERMUTATION_CHECKER = r"""
#include "testlib.h"
#include <vector>
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    int n = inf.readInt();
    std::vector<int> seen(n + 1, 0);
    for (int i = 0; i < n; i++) {
        int x = ouf.readInt(1, n, "x");
        if (seen[x]++) quitf(_wa, "%d appears twice", x);
    }
    quitf(_ok, "a permutation of 1..%d", n);
}
"""
PERMUTATION_TESTS = [("3\n", "1 2 3\n")], [("5\n", "1 2 3 4 5\n"), ("1\n", "1\n"), ("4\n", "1 2 3 4\n")]


@pytest.mark.skipif(not (TESTLIB / "testlib.h").is_file(), reason=f"testlib.h not found in {TESTLIB}")
def test_testlib_checker_accepts_any_valid_answer_and_rejects_a_wrong_one(runner: CodeRunner) -> None:
    prob = problem("own/permutation", {"type": "testlib", "source": PERMUTATION_CHECKER}, *PERMUTATION_TESTS)
    good = evaluate(prob, fenced("n = int(input())\nprint(*range(n, 0, -1))"), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    bad = evaluate(prob, fenced("n = int(input())\nprint(*([1] * n))"), runner)
    assert (bad.reward, bad.verdict) == (0.0, Verdict.WRONG_ANSWER), bad.observation
    assert "appears twice" in bad.observation  # the checker's message is the feedback


@pytest.mark.skipif(not (TESTLIB / "testlib.h").is_file(), reason=f"testlib.h not found in {TESTLIB}")
@pytest.mark.parametrize("output", ["print(1)", "print(3, 2, 1, 4)"])  # too short (exit 8), extra token (PE)
def test_testlib_verdicts_about_the_output_format_are_rejections_not_checker_failures(
    runner: CodeRunner, output: str
) -> None:
    source = "#define ENABLE_UNEXPECTED_EOF\n" + PERMUTATION_CHECKER
    prob = problem("own/permutation-eof", {"type": "testlib", "source": source}, *PERMUTATION_TESTS)
    res = evaluate(prob, fenced(output), runner)
    assert (res.reward, res.verdict, res.infra_error) == (0.0, Verdict.WRONG_ANSWER, False), res.observation


# partial credit, as Codeforces-style checkers give it: _pc(k) with k = the matching last digits
PARTIAL_CHECKER = r"""
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    long long want = ans.readLong(), got = ouf.readLong();
    if (got == want) quitf(_ok, "right");
    int k = 0;
    for (long long a = want, b = got; k < 3 && a % 10 == b % 10; a /= 10, b /= 10) k++;
    quitf(_pc(k), "%d matching last digits", k);
}
"""


@pytest.mark.skipif(not (TESTLIB / "testlib.h").is_file(), reason=f"testlib.h not found in {TESTLIB}")
@pytest.mark.parametrize("answer", ["4", "2003", "57"], ids=["pc0", "pc3", "pc1"])
def test_testlib_partial_credit_is_never_a_pass_nor_a_judge_failure(
    runner: CodeRunner, answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # testlib exits PC_BASE_EXIT_CODE + k: with its default base 0, _pc(0) would be an accept
    # and _pc(3) a FAIL; checkers are built with the testing systems' base (50)
    monkeypatch.setenv("CPFLEET_TESTLIB_DIR", str(TESTLIB))
    prob = problem("own/partial", {"type": "testlib", "source": PARTIAL_CHECKER}, [("1 2\n", "3\n")], [("1000 3\n", "1003\n")])
    good = evaluate(prob, fenced("print(sum(map(int, input().split())))"), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    res = evaluate(prob, fenced(f"input()\nprint({answer})"), runner)
    assert (res.reward, res.verdict, res.infra_error) == (0.0, Verdict.WRONG_ANSWER, False), res.infra_message
    assert "partially correct" in res.observation


POINTS_CHECKER = r"""
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    long long want = ans.readLong(), got = ouf.readLong();
    if (got == want) quitf(_ok, "right");
    quitp(0.5, "half the points");
}
"""
PC_BASE_NOW = "#ifndef PC_BASE_EXIT_CODE\n#   ifdef TESTSYS\n#       define PC_BASE_EXIT_CODE 50\n#   else\n" \
              "#       define PC_BASE_EXIT_CODE 0\n#   endif\n#endif\n"
# testlib 0.9.x: the base 0 outright (a -D is redefined to it, with a warning), 50 under TESTSYS only
PC_BASE_OLD = "#define PC_BASE_EXIT_CODE 0\n#ifdef TESTSYS\n#undef PC_BASE_EXIT_CODE\n#define PC_BASE_EXIT_CODE 50\n#endif\n"
POINTS_NOW = "#ifndef POINTS_EXIT_CODE\n#   define POINTS_EXIT_CODE 7\n#endif\n"
POINTS_OLD = "#ifndef POINTS_EXIT_CODE\n#   define POINTS_EXIT_CODE 0\n#endif\n"  # testlib 0.9.2: points exit 0


@pytest.mark.skipif(not (TESTLIB / "testlib.h").is_file(), reason=f"testlib.h not found in {TESTLIB}")
@pytest.mark.parametrize(("checker", "now", "old"), [(PARTIAL_CHECKER, PC_BASE_NOW, PC_BASE_OLD),
                                                     (POINTS_CHECKER, POINTS_NOW, POINTS_OLD)], ids=["pc0", "points"])
def test_partial_credit_from_a_checker_shipping_an_older_testlib_is_never_a_pass(
        runner: CodeRunner, checker: str, now: str, old: str) -> None:
    # with the testlib.h it ships, its _pc(0) (or its quitp) exited 0, an accept: a partial
    # answer was paid 1.0
    text = (TESTLIB / "testlib.h").read_text()
    assert now in text
    files = {"checker.cpp": checker, "testlib.h": text.replace(now, old)}
    prob = problem("own/partial-old-testlib", {"type": "testlib", "files": files, "entry_points": ["checker.cpp"]},
                   [("1 2\n", "3\n")], [("1000 3\n", "1003\n")])
    good = evaluate(prob, fenced("print(sum(map(int, input().split())))"), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    res = evaluate(prob, fenced("input()\nprint(4)"), runner)  # no matching last digit: _pc(0)
    assert (res.reward, res.verdict, res.infra_error) == (0.0, Verdict.WRONG_ANSWER, False), res.infra_message
    assert "partially correct" in res.observation


def test_the_defines_a_checker_is_built_with_key_its_cached_results() -> None:
    # results judged by a checker built without TESTSYS (partial credit paid) are never served
    spec = get_checker({"type": "testlib", "source": PARTIAL_CHECKER})
    assert isinstance(spec, ProgramSpec)
    identity = checker_programs.toolchain_identity(spec)
    assert all(define in identity for define in checker_programs.CHECKER_DEFINES), identity


# A Codeforces-style checker for "the smallest number of coins": an answer better than the jury's
# is the jury's failure by its own claim (FAIL), which a program can provoke by printing 0.
BETTER_THAN_JURY_CHECKER = r"""
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    long long jury = ans.readLong(), got = ouf.readLong();
    if (got < jury) quitf(_fail, "participant has the better answer: %lld < %lld", got, jury);
    if (got > jury) quitf(_wa, "%lld coins, %lld possible", got, jury);
    quitf(_ok, "%lld coins", got);
}
"""
ALWAYS_FAIL_CHECKER = r"""
#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    quitf(_fail, "the jury's answer file is inconsistent");
}
"""


@pytest.mark.skipif(not (TESTLIB / "testlib.h").is_file(), reason=f"testlib.h not found in {TESTLIB}")
def test_a_testlib_fail_provoked_by_the_output_alone_is_wrong_answer_not_a_masked_sample(runner: CodeRunner) -> None:
    """FAIL on an impossible optimum is the output's doing when the checker judges the expected
    answer: WRONG_ANSWER, never INTERNAL (a masked sample a policy would learn to provoke); a
    checker that FAILs on the expected answer too is broken: INTERNAL."""
    tests = [("7\n", "3\n")], [("12\n", "3\n"), ("30\n", "6\n")]
    prob = problem("own/coins", {"type": "testlib", "source": BETTER_THAN_JURY_CHECKER}, *tests)
    right = "n = int(input())\nprint(-(-n // 5))"
    good = evaluate(prob, fenced(right), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    res = evaluate(prob, fenced("input()\nprint(0)"), runner)
    assert (res.reward, res.verdict, res.infra_error) == (0.0, Verdict.WRONG_ANSWER, False), res.infra_message
    assert "participant has the better answer" in res.observation
    broken = problem("own/coins-broken", {"type": "testlib", "source": ALWAYS_FAIL_CHECKER}, *tests)
    res = evaluate(broken, fenced(right), runner)
    assert (res.verdict, res.infra_error) == (Verdict.INTERNAL, True)
    assert "fails too" in res.infra_message


# --- Kattis output validator: any two numbers summing to n ---------------------------------------

SUM_VALIDATOR = r"""
#include <cstdio>
#include <fstream>
#include <string>
int main(int argc, char** argv) {
    std::ifstream in(argv[1]);
    long long n; in >> n;
    FILE* msg = fopen((std::string(argv[3]) + "/judgemessage.txt").c_str(), "w");
    if (!msg) return 1;
    long long a, b;
    if (scanf("%lld %lld", &a, &b) != 2) { fprintf(msg, "expected two integers"); return 43; }
    if (a + b != n) { fprintf(msg, "%lld + %lld is not %lld", a, b, n); return 43; }
    char extra[2];
    if (scanf("%1s", extra) == 1) { fprintf(msg, "trailing output"); return 43; }
    return 42;
}
"""


def kattis(source: str, **extra: Any) -> dict[str, Any]:
    return {"type": "kattis_validator", "files": {"output_validators/v/validate.cpp": source},
            "entry_points": ["output_validators/v/validate.cpp"], "language": "cpp", "validator_flags": None,
            "validation": "custom", **extra}


# SUM_VALIDATOR holding 100 MB of its 128 MB all along
HUNGRY_VALIDATOR = SUM_VALIDATOR.replace("#include <cstdio>", "#include <cstdio>\n#include <cstdlib>").replace(
    "std::ifstream in(argv[1]);",
    "volatile char* held = (char*)malloc(100 << 20);\n"
    "    for (size_t i = 0; i < (100 << 20); i += 4096) held[i] = 1;\n    std::ifstream in(argv[1]);")
# a right answer, after 60 MB written to its /tmp (within its 64 MB file size limit) and left there
LEAVES_FILES = ("with open('/tmp/big', 'wb') as f:\n    for _ in range(60):\n        f.write(b'x' * (1 << 20))\n"
                "n = int(input())\nprint(0, n)\n")


def test_files_a_program_leaves_in_its_directory_do_not_crowd_out_its_checkers_memory(runner: CodeRunner) -> None:
    # the checker runs in the slot's memory cgroup right after the test: the test's directory
    # (a tmpfs, memory of that cgroup) must be gone by then, or the checker is OOM-killed and the
    # program's right answer an INTERNAL (a wrong one would hide behind it just as well)
    if not runner.isolation.layers.get("cgroup") or not runner.isolation.layers.get("mountns"):
        pytest.skip("no memory cgroup or test directory of its own here: " + "; ".join(runner.isolation.notes))
    prob = problem("own/sum-hungry", kattis(HUNGRY_VALIDATOR, memory_limit_mb=128), *SUM_TESTS)
    res = evaluate(prob, fenced(LEAVES_FILES), runner)
    assert not res.infra_error, res.infra_message
    assert (res.reward, res.verdict) == (1.0, Verdict.OK), res.observation


# a right answer, then 180 MB in memfds sent over a unix socket to itself, never received, and
# an exit without closing anything: only the kernel's asynchronous unix-socket collection frees
# them, tens of ms after the test ended, when its checker already runs in the slot
LEAVES_IN_FLIGHT = ("import os, socket\nn = int(input())\nprint(0, n, flush=True)\n"
                    "a, b = socket.socketpair()\nfds = []\nfor _ in range(3):\n"
                    "    fds.append(os.memfd_create('held'))\n    for _ in range(60):\n"
                    "        os.write(fds[-1], b'x' * (1 << 20))\n"
                    "socket.send_fds(b, [b'x'], [*fds, a.fileno()])\nos._exit(0)\n")


def test_memory_a_program_leaves_in_flight_on_a_socket_does_not_crowd_out_its_checker(runner: CodeRunner) -> None:
    # seen as INTERNAL ("Device or resource busy": the checker's limit could not be set below
    # the charge) or the checker OOM-killed: the run waits for the slot's memory to fall back
    if not runner.isolation.layers.get("cgroup"):
        pytest.skip("no memory cgroup here: " + "; ".join(runner.isolation.notes))
    prob = problem("own/sum-in-flight", kattis(HUNGRY_VALIDATOR, memory_limit_mb=128), *SUM_TESTS,
                   memory_limit_mb=256)
    res = evaluate(prob, fenced(LEAVES_IN_FLIGHT), runner)
    assert not res.infra_error, res.infra_message
    assert (res.reward, res.verdict) == (1.0, Verdict.OK), res.observation


SUM_TESTS = [("10\n", "5 5\n")], [("3\n", "1 2\n"), ("100\n", "50 50\n")]


def test_kattis_validator_accepts_any_valid_answer_and_its_message_is_the_feedback(runner: CodeRunner) -> None:
    prob = problem("own/sum", kattis(SUM_VALIDATOR), *SUM_TESTS)
    good = evaluate(prob, fenced("n = int(input())\nprint(0, n)"), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    bad = evaluate(prob, fenced("n = int(input())\nprint(1, n)"), runner)
    assert (bad.reward, bad.verdict) == (0.0, Verdict.WRONG_ANSWER), bad.observation
    assert "1 + 10 is not 10" in bad.observation


def test_a_failing_program_is_judged_without_running_the_checker(runner: CodeRunner) -> None:
    prob = problem("own/sum-re", kattis(SUM_VALIDATOR), *SUM_TESTS)
    res = evaluate(prob, fenced("raise ValueError('no')"), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.RUNTIME_ERROR)


@pytest.mark.parametrize(
    ("name", "body", "why"),
    [
        ("crash", "int main() { abort(); }", "checker failed"),
        ("exit0", "int main() { return 0; }", "expected 42 or 43"),
        ("hang", "int main() { volatile long x = 0; for (;;) x++; }", "checker failed"),
        ("nocompile", "int main() { this is not C++ }", "does not compile"),
    ],
)
def test_a_broken_validator_is_an_infrastructure_error_never_a_verdict(
    runner: CodeRunner, name: str, body: str, why: str
) -> None:
    source = "#include <cstdlib>\n" + body + "\n"
    prob = problem(f"own/broken-{name}", kattis(source, time_limit_s=1.0), *SUM_TESTS)
    for code in ("n = int(input())\nprint(0, n)", "print(1, 2)"):  # a right and a wrong program alike
        res = evaluate(prob, fenced(code), runner)
        assert res.reward is None and res.infra_error and res.verdict == Verdict.INTERNAL, res.observation
        assert why in res.infra_message


def test_a_checker_that_does_not_compile_is_compiled_once_and_remembered(runner: CodeRunner) -> None:
    spec = get_checker(kattis("int main() { syntax error }\n"))
    assert isinstance(spec, ProgramSpec)
    with pytest.raises(CheckerBroken, match="does not compile"):
        checker_programs.image_for(runner, spec)
    remembered = checker_programs.base._broken[spec.key()]  # read where image_for keeps it
    with pytest.raises(CheckerBroken) as again:
        checker_programs.image_for(runner, spec)
    assert again.value is remembered  # the same failure, not a second compilation


def test_a_validator_cannot_read_host_files(runner: CodeRunner) -> None:
    """The validator runs confined: a file of this repository (readable by the worker) does
    not exist for it, so it rejects instead of accepting."""
    probe = r"""
#include <cstdio>
int main(int argc, char** argv) {
    FILE* f = fopen("%s", "r");
    return f ? 42 : 43;
}
""".replace("%s", str(REPO / "pyproject.toml"))
    prob = problem("own/peek", kattis(probe), [("1\n", "1\n")], [("1\n", "1\n")])
    res = evaluate(prob, fenced("print(1)"), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.WRONG_ANSWER), res.observation


# --- open-r1 generated_checker (Python): argv input, correct output, solution output; prints 1/0 --

PY_CHECKER = """
import sys
inp, correct, got = (open(p).read() for p in sys.argv[1:4])
n = int(inp)
try:
    vals = sorted(map(int, got.split()))
except ValueError:
    print(0)
    raise SystemExit
print(1 if vals == list(range(1, n + 1)) else 0)
"""


def test_python_checker_follows_the_open_r1_protocol(runner: CodeRunner) -> None:
    prob = problem("own/perm-py", {"type": "python", "source": PY_CHECKER}, *PERMUTATION_TESTS)
    good = evaluate(prob, fenced("n = int(input())\nprint(*range(n, 0, -1))"), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    bad = evaluate(prob, fenced("n = int(input())\nprint(*range(n))"), runner)
    assert (bad.reward, bad.verdict) == (0.0, Verdict.WRONG_ANSWER), bad.observation
    broken = problem("own/perm-py-broken", {"type": "python", "source": "print('yes')"}, *PERMUTATION_TESTS)
    res = evaluate(broken, fenced("n = int(input())\nprint(*range(n, 0, -1))"), runner)
    assert res.infra_error and res.reward is None and "not 1 or 0" in res.infra_message


# fails (not 1 or 0, quoting the answer) on any answer holding the marker: a checker that breaks
# on one hidden test and on the expected answer there too
LEAKY_CHECKER = """
import sys
correct = open(sys.argv[2]).read()
if "SECRET" in correct:
    sys.stderr.write("broken here, the answer was " + correct)
    raise SystemExit(1)
print(1)
"""


def test_a_checker_failing_on_a_hidden_test_keeps_its_words_out_of_the_feedback(runner: CodeRunner) -> None:
    """Its stderr may quote the hidden answer or input (testlib's "expected: ..."): the operator
    reads it in infra_message, the model's observation only says where the judging failed."""
    hidden = problem("own/leaky-hidden", {"type": "python", "source": LEAKY_CHECKER}, [("1\n", "1\n")],
                     [("2\n", "2\n"), ("3\n", "SECRET-3\n")])
    res = evaluate(hidden, fenced("print(input())"), runner)
    assert res.infra_error and res.reward is None
    assert "SECRET-3" in res.infra_message and "SECRET" not in res.observation, res.observation
    assert "hidden test" in res.observation
    # on a public test the same failure is shown: its answer is in the feedback anyway
    public = problem("own/leaky-public", {"type": "python", "source": LEAKY_CHECKER}, [("3\n", "SECRET-3\n")],
                     [("2\n", "2\n")])
    res = evaluate(public, fenced("print(input())"), runner)
    assert res.infra_error and "SECRET-3" in res.observation and "SECRET-3" in res.infra_message


NAIVE_PY_CHECKER = """
import sys
inp, correct, got = (open(p).read() for p in sys.argv[1:4])
n = int(inp)
print(1 if sorted(map(int, got.split())) == list(range(1, n + 1)) else 0)  # int('x') raises
"""
# abort()s when the output is not two numbers, and spins forever on a negative first number
NAIVE_VALIDATOR = r"""
#include <cstdio>
#include <cstdlib>
#include <fstream>
int main(int argc, char** argv) {
    std::ifstream in(argv[1]);
    long long n; in >> n;
    long long a, b;
    if (std::scanf("%lld %lld", &a, &b) != 2) std::abort();
    if (a < 0) { volatile long long x = 0; for (;;) x++; }
    return a + b == n ? 42 : 43;
}
"""


@pytest.mark.parametrize(
    ("checker", "tests", "right", "provoking", "deterministic"),
    [
        ({"type": "python", "source": NAIVE_PY_CHECKER}, PERMUTATION_TESTS,
         "n = int(input())\nprint(*range(n, 0, -1))", "print('hello')", True),
        (kattis(NAIVE_VALIDATOR, time_limit_s=1.0), SUM_TESTS, "n = int(input())\nprint(0, n)", "print('x')", True),
        # the validator's own time limit ends it: load could change that, so never cached
        (kattis(NAIVE_VALIDATOR, time_limit_s=1.0), SUM_TESTS, "n = int(input())\nprint(0, n)",
         "n = int(input())\nprint(-1, n + 1)", False),
    ],
    ids=["python-crash", "kattis-abort", "kattis-hang"],
)
def test_output_that_makes_a_working_checker_fail_is_wrong_answer_never_internal(
    runner: CodeRunner, checker: dict[str, Any], tests: Any, right: str, provoking: str, deterministic: bool
) -> None:
    # the checker fails on output it did not expect, but judges the expected answer: the
    # failure is the output's doing, so it pays 0 and is never masked as INTERNAL
    prob = problem(f"own/naive-{checker['type']}", checker, *tests)
    good = evaluate(prob, fenced(right), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    res = evaluate(prob, fenced(provoking), runner)
    assert (res.reward, res.verdict, res.infra_error) == (0.0, Verdict.WRONG_ANSWER, False), res.infra_message
    assert "could not judge this output" in res.observation
    assert res.deterministic is deterministic


# --- interactive: guess the number (Kattis interactor protocol) ----------------------------------

GUESS_INTERACTOR = r"""
#include <cstdio>
#include <fstream>
#include <string>
int main(int argc, char** argv) {
    std::ifstream in(argv[1]);
    int secret; in >> secret;
    FILE* msg = fopen((std::string(argv[3]) + "/judgemessage.txt").c_str(), "w");
    for (int q = 0; q < 12; q++) {
        int g;
        if (scanf("%d", &g) != 1) { fprintf(msg, "no guess"); return 43; }
        if (g == secret) { printf("correct\n"); fflush(stdout); return 42; }
        printf(g < secret ? "higher\n" : "lower\n");
        fflush(stdout);
    }
    fprintf(msg, "too many guesses");
    return 43;
}
"""
GUESS_TESTS = [("37\n", "")], [("1\n", ""), ("1000\n", ""), ("512\n", "")]
BINARY_SEARCH = """
lo, hi = 1, 1000
while True:
    mid = (lo + hi) // 2
    print(mid, flush=True)
    r = input()
    if r == "correct":
        break
    if r == "higher":
        lo = mid + 1
    else:
        hi = mid - 1
"""


def guess_problem(pid: str, **extra: Any) -> Problem:
    checker = kattis(GUESS_INTERACTOR)
    checker["type"] = "interactive"
    return problem(pid, checker, *GUESS_TESTS, **extra)


def test_interactive_accepts_a_correct_program_and_rejects_a_wrong_one(runner: CodeRunner) -> None:
    prob = guess_problem("own/guess")
    good = evaluate(prob, fenced(BINARY_SEARCH), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    linear = "g = 1\nwhile True:\n    print(g, flush=True)\n    if input() == 'correct':\n        break\n    g += 1\n"
    bad = evaluate(prob, fenced(linear), runner)
    assert (bad.reward, bad.verdict) == (0.0, Verdict.WRONG_ANSWER), bad.observation


def test_interactive_deadlock_ends_as_time_limit(runner: CodeRunner) -> None:
    prob = guess_problem("own/guess-tight", time_limit_s=0.5)
    waits = "import sys\nsys.stdin.readline()\nprint(500)\n"  # reads first: both sides wait to read
    res = evaluate(prob, fenced(waits), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.TIME_LIMIT), res.observation


def test_interactive_program_crash_after_an_accepted_dialogue_is_its_own_failure(runner: CodeRunner) -> None:
    """The solution may end on its own after the interactor exits: its crash then counts, as on
    Kattis (it is stopped only if it keeps running)."""
    prob = guess_problem("own/guess-crash-after")
    res = evaluate(prob, fenced(BINARY_SEARCH + "raise SystemExit(3)\n"), runner)
    assert (res.reward, res.verdict) == (0.0, Verdict.RUNTIME_ERROR), res.observation


# aborts when the program's output ends before the dialogue does (a little later, as a slow
# interactor would): an interactor cut short by a program that left early
ABORTS_AT_EOF = GUESS_INTERACTOR.replace(
    'if (scanf("%d", &g) != 1) { fprintf(msg, "no guess"); return 43; }',
    'if (scanf("%d", &g) != 1) { usleep(200000); abort(); }',
).replace("#include <cstdio>", "#include <cstdio>\n#include <cstdlib>\n#include <unistd.h>")


@pytest.mark.parametrize("program", ["print(1, flush=True)\n", "print(1, flush=True)\nraise SystemExit(3)\n"],
                         ids=["exits", "crashes"])
def test_an_interactor_failing_after_the_program_left_early_is_the_programs_failure(
    runner: CodeRunner, program: str
) -> None:
    checker = kattis(ABORTS_AT_EOF)
    checker["type"] = "interactive"
    prob = problem("own/guess-aborts", checker, *GUESS_TESTS)
    good = evaluate(prob, fenced(BINARY_SEARCH), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    res = evaluate(prob, fenced(program), runner)
    assert res.reward == 0.0 and not res.infra_error, res.infra_message
    assert res.verdict == (Verdict.WRONG_ANSWER if "SystemExit" not in program else Verdict.RUNTIME_ERROR)
    assert "ended before the interaction was complete" in res.observation


MEMFD_HOG_GUESSER = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
static char buf[1 << 16];
int main(void) {
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < 64; i++) {  /* up to 4 GB in files no process maps: no RSS, no RLIMIT_AS */
        int fd = memfd_create("x", 0);
        if (fd < 0) break;
        for (int k = 0; k < 1024; k++) if (write(fd, buf, sizeof buf) != sizeof buf) goto done;
    }
done:;
    int lo = 1, hi = 1000; char r[64];
    for (;;) {
        int mid = (lo + hi) / 2; printf("%d\n", mid); fflush(stdout);
        if (scanf("%63s", r) != 1 || !strcmp(r, "correct")) return 0;
        if (!strcmp(r, "higher")) lo = mid + 1; else hi = mid - 1;
    }
}
"""


def test_a_program_whose_memory_gets_the_interactor_oom_killed_is_over_its_memory(runner: CodeRunner) -> None:
    # the pair shares one memory cgroup; memory held in memfds is in no process's RSS, so the
    # OOM killer picks the interactor: the overrun is still the program's, never INTERNAL
    if not runner.isolation.layers.get("cgroup"):
        pytest.skip("no memory cgroup on this machine: " + "; ".join(runner.isolation.notes))
    checker = kattis(GUESS_INTERACTOR, memory_limit_mb=128)
    checker["type"] = "interactive"
    # a generous time limit: the writes reach the pair's 384 MB well before it, even on a slow machine
    prob = problem("own/guess-memfd", checker, *GUESS_TESTS, memory_limit_mb=256, time_limit_s=10)
    res = evaluate(prob, f"```c\n{MEMFD_HOG_GUESSER}```", runner)
    assert (res.reward, res.verdict, res.infra_error) == (0.0, Verdict.MEMORY_LIMIT, False), res.infra_message


def test_interactive_program_that_crashes_mid_dialogue_earns_nothing(runner: CodeRunner) -> None:
    prob = guess_problem("own/guess-crash")
    crash = "print(500, flush=True)\ninput()\nraise SystemExit(3)\n"
    res = evaluate(prob, fenced(crash), runner)
    assert res.reward == 0.0 and res.verdict in (Verdict.RUNTIME_ERROR, Verdict.WRONG_ANSWER), res.observation


TESTLIB_GUESS_INTERACTOR = r"""
#include "testlib.h"
#include <iostream>
int main(int argc, char* argv[]) {
    registerInteraction(argc, argv);
    int secret = inf.readInt();
    for (int q = 1; q <= 12; q++) {
        int g = ouf.readInt(1, 1000, "guess");
        if (g == secret) {
            std::cout << "correct" << std::endl;
            tout << q << std::endl;
            quitf(_ok, "found in %d guesses", q);
        }
        std::cout << (g < secret ? "higher" : "lower") << std::endl;
    }
    quitf(_wa, "too many guesses");
}
"""


@pytest.mark.skipif(not (TESTLIB / "testlib.h").is_file(), reason=f"testlib.h not found in {TESTLIB}")
def test_testlib_interactor_accepts_a_correct_program_and_rejects_a_wrong_one(runner: CodeRunner) -> None:
    checker = {"type": "interactive", "protocol": "testlib", "source": TESTLIB_GUESS_INTERACTOR}
    prob = problem("own/guess-testlib", checker, *GUESS_TESTS)
    good = evaluate(prob, fenced(BINARY_SEARCH), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    linear = "g = 1\nwhile True:\n    print(g, flush=True)\n    if input() == 'correct':\n        break\n    g += 1\n"
    bad = evaluate(prob, fenced(linear), runner)
    assert (bad.reward, bad.verdict) == (0.0, Verdict.WRONG_ANSWER), bad.observation
    assert "too many guesses" in bad.observation


# FAILs (the jury's own-error claim) when a guess is past the bound its data promises
TESTLIB_FAILING_GUESS_INTERACTOR = TESTLIB_GUESS_INTERACTOR.replace(
    'int g = ouf.readInt(1, 1000, "guess");',
    'int g = ouf.readInt();\n        if (g > 1000) quitf(_fail, "guess %d past the bound: the jury data is inconsistent", g);')


@pytest.mark.skipif(not (TESTLIB / "testlib.h").is_file(), reason=f"testlib.h not found in {TESTLIB}")
def test_a_testlib_interactor_fail_provoked_by_the_program_is_its_wrong_answer(runner: CodeRunner) -> None:
    """The interactor FAILs on the program's dialogue but accepts the reference solution's: the
    program's WRONG_ANSWER (a masked sample would pay provoking it); with no reference to ask,
    the interactor run alone (nothing to read) does not FAIL, so the program's output brought the
    FAIL: its WRONG_ANSWER too, as for any interactor failure (sandbox/interactive.py)."""
    checker = {"type": "interactive", "protocol": "testlib", "source": TESTLIB_FAILING_GUESS_INTERACTOR}
    provoking = "print(5000, flush=True)\ninput()\n"
    prob = problem("own/guess-testlib-fail", checker, *GUESS_TESTS, correct_solutions=[BINARY_SEARCH])
    good = evaluate(prob, fenced(BINARY_SEARCH), runner)
    assert (good.reward, good.verdict) == (1.0, Verdict.OK), good.observation
    res = evaluate(prob, fenced(provoking), runner)
    assert (res.reward, res.verdict, res.infra_error) == (0.0, Verdict.WRONG_ANSWER, False), res.infra_message
    assert "judge failure (FAIL)" in res.observation
    bare = problem("own/guess-testlib-fail-bare", checker, *GUESS_TESTS)
    res = evaluate(bare, fenced(provoking), runner)
    assert (res.reward, res.verdict, res.infra_error) == (0.0, Verdict.WRONG_ANSWER, False), res.infra_message
    assert "no reference solution could vouch for it" in res.observation
