"""cpfleet.sandbox.programs: compile a source set confined and cached, run it with argv, files
and collected outputs, connect two programs interactively."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import cpfleet
from cpfleet.core.errors import ProgramError, SandboxBroken
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages, programs
from cpfleet.sandbox.runner import CodeRunner, Limits

pytestmark = pytest.mark.skipif(bool(languages.missing_tools("cpp")), reason="g++ is not installed here")

VALIDATOR_H = "#pragma once\n#include <fstream>\n#include <string>\ninline std::string slurp(const char* p)" \
              "{ std::ifstream f(p); std::string s, t; while (f >> t) s += t + ' '; return s; }\n"
VALIDATOR = """#include <cstdio>
#include <iostream>
#include <fstream>
#include "include/validate.h"
int main(int argc, char** argv) {
    if (argc < 4) return 3;
    std::string input = slurp(argv[1]), answer = slurp(argv[2]);
    std::string got, t; while (std::cin >> t) got += t + ' ';
    std::ofstream msg(std::string(argv[3]) + "/judgemessage.txt");
    msg << "input=" << input << "answer=" << answer << "got=" << got;
    return got == answer ? 42 : 43;
}
"""


@pytest.fixture
def cache(tmp_path: Path) -> programs.CompileCache:
    return programs.CompileCache(str(tmp_path / "cache"))


def test_validator_gets_argv_read_only_files_a_writable_dir_and_its_feedback_is_collected(
        runner: CodeRunner, cache: programs.CompileCache) -> None:
    built = programs.compile_program(runner, "cpp", {"v/validate.cpp": VALIDATOR, "v/include/validate.h": VALIDATOR_H},
                                     ["v/validate.cpp"], cache=cache)
    assert built.ok, built.diagnostics
    files = {"input": b"1 2\n", "answer": b"3\n", "feedback/": b""}
    with programs.open_session(runner, built.image) as v:  # type: ignore[arg-type]
        good = v.run(b"3\n", Limits(time_s=5), argv=["input", "answer", "feedback"], files=files,
                     collect=["feedback/judgemessage.txt"])
        bad = v.run(b"4\n", Limits(time_s=5), argv=["input", "answer", "feedback"], files=files,
                    collect=["feedback/judgemessage.txt", "feedback/missing.txt"])
    assert good.exit_code == 42 and bad.exit_code == 43
    assert good.files["feedback/judgemessage.txt"] == b"input=1 2 answer=3 got=3 "
    assert bad.files == {"feedback/judgemessage.txt": b"input=1 2 answer=3 got=4 "}


def test_placed_files_cannot_be_changed_by_the_program(runner: CodeRunner, cache: programs.CompileCache) -> None:
    src = "#include <cstdio>\nint main(){ FILE* f = std::fopen(\"answer\", \"w\"); std::printf(\"%d\", f != 0); }"
    built = programs.compile_program(runner, "cpp", {"w.cpp": src}, ["w.cpp"], cache=cache)
    assert built.ok, built.diagnostics
    rr = programs.run_program(runner, built.image, files={"answer": b"3\n"})  # type: ignore[arg-type]
    assert rr.status == Verdict.OK and rr.stdout == b"0"


def test_collect_does_not_follow_a_link_the_program_planted(runner: CodeRunner, cache: programs.CompileCache) -> None:
    src = "#include <unistd.h>\nint main(){ return symlink(\"/etc/hostname\", \"feedback/judgemessage.txt\"); }"
    built = programs.compile_program(runner, "cpp", {"l.cpp": src}, ["l.cpp"], cache=cache)
    assert built.ok, built.diagnostics
    rr = programs.run_program(runner, built.image, files={"feedback/": b""},  # type: ignore[arg-type]
                              collect=["feedback/judgemessage.txt"])
    assert rr.exit_code == 0 and rr.files == {}


INTERACTOR = """#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
    FILE* in = std::fopen(argv[1], "r"); int secret = 0; if (!in || std::fscanf(in, "%d", &secret) != 1) return 3;
    for (int q = 0; q < 30; q++) {
        int g; if (std::scanf("%d", &g) != 1) return 43;
        if (g == secret) { std::printf("yes\\n"); std::fflush(stdout); return 42; }
        std::printf(g < secret ? "higher\\n" : "lower\\n"); std::fflush(stdout);
    }
    return 43;
}
"""
SEARCHER = """#include <cstdio>
#include <cstring>
int main() { int lo = 1, hi = 1000; char r[16];
  while (true) { int m = (lo + hi) / 2; std::printf("%d\\n", m); std::fflush(stdout);
    if (std::scanf("%15s", r) != 1) return 1; if (!std::strcmp(r, "yes")) return 0;
    if (!std::strcmp(r, "higher")) lo = m + 1; else hi = m - 1; } }
"""


def test_interactive_pair_talks_through_pipes(runner: CodeRunner, cache: programs.CompileCache) -> None:
    inter = programs.compile_program(runner, "cpp", {"i.cpp": INTERACTOR}, ["i.cpp"], cache=cache)
    sol = programs.compile_program(runner, "cpp", {"s.cpp": SEARCHER}, ["s.cpp"], cache=cache)
    assert inter.ok and sol.ok
    runner.load_program(sol.image)  # type: ignore[arg-type]
    with programs.open_session(runner, inter.image) as i:  # type: ignore[arg-type]
        res = programs.run_interactive(runner, programs.loaded_session(runner), Limits(time_s=2), i,
                                       Limits(time_s=2), argv=["input"], files={"input": b"737\n"})
    assert res.interactor.exit_code == 42 and res.solution.status == Verdict.OK


def test_interactive_solution_in_python_against_a_compiled_interactor(runner: CodeRunner,
                                                                       cache: programs.CompileCache) -> None:
    inter = programs.compile_program(runner, "cpp", {"i.cpp": INTERACTOR}, ["i.cpp"], cache=cache)
    assert inter.ok
    # a wrong strategy: always guesses 1, never finds 737 -> the interactor says 43 and ends it
    assert runner.load("while True:\n    print(1, flush=True)\n    if input() == 'yes':\n        break\n") is None
    with programs.open_session(runner, inter.image) as i:  # type: ignore[arg-type]
        res = programs.run_interactive(runner, programs.loaded_session(runner), Limits(time_s=2), i,
                                       Limits(time_s=2), argv=["input"], files={"input": b"737\n"})
    assert res.interactor.exit_code == 43
    assert res.solution.status != Verdict.OK  # it got EOF (EOFError) or was stopped: never OK


@pytest.mark.parametrize("name", ["../x.cpp", "/etc/x.cpp", "a//b.cpp", "", "./a.cpp"])
def test_bad_source_names_are_refused_before_anything_runs(runner: CodeRunner, name: str,
                                                           cache: programs.CompileCache) -> None:
    with pytest.raises(ProgramError):
        programs.compile_program(runner, "cpp", {name: "int main(){}"}, [name], cache=cache)


def test_duplicates_compile_once_and_hit_the_cache(runner: CodeRunner, cache: programs.CompileCache) -> None:
    sources = [f"int main(){{ return {i}; }}\n" for i in range(3)]
    outcomes = [programs.compile_program(runner, "cpp", {"a.cpp": sources[i % 3]}, ["a.cpp"], cache=cache)
                for i in range(9)]
    assert [o.cache_hit for o in outcomes] == [False] * 3 + [True] * 6
    assert all(o.ok for o in outcomes)
    assert len({o.key for o in outcomes}) == 3


def test_cache_is_bounded_in_bytes(tmp_path: Path) -> None:
    cache = programs.CompileCache(str(tmp_path / "c"), max_bytes=10_000)
    for i in range(10):
        cache.put(f"k{i}", {"ok": True, "files": {"a.out": (os.urandom(3000), 0o755)}})
    assert cache.size_bytes() <= 10_000
    assert cache.get("k9") is not None and cache.get("k0") is None  # least recently used went first


def _race(root: str, key: str, n: int) -> int:
    cache = programs.CompileCache(root)
    payload = {"ok": True, "files": {"a.out": (bytes([n]) * 200_000, 0o755)}}
    seen = 0
    for _ in range(200):
        cache.put(key, payload)
        entry = cache.get(key)
        assert entry is not None and len(entry["files"]["a.out"][0]) == 200_000  # always a whole entry
        seen += 1
    return seen


def test_pool_processes_racing_for_one_key_always_read_a_whole_entry(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        assert pool.starmap(_race, [(str(tmp_path), "same", 1), (str(tmp_path), "same", 2)]) == [200, 200]


@pytest.mark.slow
def test_compile_that_exceeds_its_time_limit_is_not_cached(runner: CodeRunner, cache: programs.CompileCache) -> None:
    # 2^40 distinct instantiations
    bomb = ("template<int N, unsigned long long M> struct B { static const unsigned long long v = "
           "B<N-1, 2*M>::v + B<N-1, 2*M+1>::v; };\n"
           "template<unsigned long long M> struct B<0, M> { static const unsigned long long v = M; };\n"
           "int main(){ return (int)(B<40, 1>::v & 1); }")
    tight = Limits(time_s=1, memory_mb=1024, wall_s=20, stdout_bytes=64 << 20, file_size_mb=64, nproc=64)
    first = programs.compile_program(runner, "cpp", {"b.cpp": bomb}, ["b.cpp"], cache=cache, limits=tight)
    assert not first.ok and first.limit in ("TIME_LIMIT", "MEMORY_LIMIT"), first.diagnostics
    second = programs.compile_program(runner, "cpp", {"b.cpp": bomb}, ["b.cpp"], cache=cache, limits=tight)
    assert not second.cache_hit


def test_precompiled_header_gives_the_same_program(runner: CodeRunner, cache: programs.CompileCache) -> None:
    src = "#include <bits/stdc++.h>\nint main(){ std::vector<int> v{3,1,2}; std::sort(v.begin(), v.end());" \
          " for (int x : v) std::cout << x; }"
    with_pch = programs.compile_program(runner, "cpp", {"p.cpp": src}, ["p.cpp"], cache=cache)
    without = programs.compile_program(runner, "cpp", {"p.cpp": src}, ["p.cpp"], cache=cache, use_pch=False)
    assert with_pch.ok and without.ok and with_pch.key != without.key
    assert "not used" not in with_pch.diagnostics  # -Winvalid-pch would say so
    outs = [programs.run_program(runner, b.image).stdout for b in (with_pch, without)]  # type: ignore[arg-type]
    assert outs == [b"123", b"123"]


@pytest.fixture(scope="module")
def java_ok() -> Iterator[None]:
    if languages.missing_tools("java"):
        pytest.skip("no JDK here")
    yield


def test_java_program_with_a_package_and_helper_classes(runner: CodeRunner, cache: programs.CompileCache,
                                                         java_ok: None) -> None:
    src = "package judge.sol;\nclass H { static int f() { return 7; } }\n" \
          "public class Entry { public static void main(String[] a) { System.out.print(H.f()); } }\n"
    files, entries = programs.solution_sources("java", src)
    built = programs.compile_program(runner, "java", files, entries, cache=cache)
    assert built.ok, built.diagnostics
    rr = programs.run_program(runner, built.image, limits=Limits(time_s=5, memory_mb=256))  # type: ignore[arg-type]
    assert (rr.status, rr.stdout) == (Verdict.OK, b"7"), rr.stderr


def test_a_compile_stopped_by_the_wall_clock_is_never_a_cached_verdict(runner: CodeRunner,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The wall-clock backstop of a compile fires on machine load (its CPU limit not reached):
    the program's COMPILE_ERROR, as a test's wall TIME_LIMIT is its own, but the job's result
    was marked deterministic, so the result cache kept it and every later submission of the
    same program failed to compile for good."""
    monkeypatch.setattr(programs, "COMPILE_LIMITS", dataclasses.replace(programs.COMPILE_LIMITS, wall_s=0.05))
    problem = Problem.from_dict({"id": "sum-wall", "hidden_tests": [{"input": "1 2\n", "output": "3\n"}]})
    code = (f"#include <cstdio>\n// {uuid.uuid4()}: a source no compile cache holds\n"
            "int main() { int a, b; if (scanf(\"%d %d\", &a, &b) != 2) return 1; printf(\"%d\\n\", a + b); }\n")
    result = cpfleet.judge_locally(problem, f"```cpp\n{code}```", runner)
    assert (result.verdict, result.reward, result.deterministic) == (Verdict.COMPILE_ERROR, 0.0, False)
    assert "wall-clock limit" in result.observation and "s CPU)" not in result.observation, result.observation


def test_a_compiler_the_sandbox_cannot_see_is_a_sandbox_failure_not_a_compile_error(
        runner: CodeRunner, cache: programs.CompileCache, tmp_path: Path) -> None:
    # a C++ toolchain whose g++ lives under /tmp on the host (each test's own folder inside the
    # sandbox): the compile's shell answered "not found", which was the program's COMPILE_ERROR
    # (cached, so every later submission of it too)
    hidden = tmp_path / "g++"
    hidden.write_text('#!/bin/sh\nexec g++ "$@"\n')
    hidden.chmod(0o755)
    builtin = languages.TOOLCHAINS["cpp"]

    def unseen(env: Mapping[str, str]) -> languages.Language:
        lang = builtin(env)
        assert lang.compile is not None
        return dataclasses.replace(lang, compile=dataclasses.replace(lang.compile, argv=(str(hidden),
                                                                                         *lang.compile.argv[1:])))

    languages.register_toolchain("cpp", unseen, replace=True)
    try:
        for _ in range(2):  # nothing was cached either
            with pytest.raises(SandboxBroken, match="cannot be run inside the sandbox"):
                programs.compile_program(runner, "cpp", {"a.cpp": "int main() { return 0; }\n"}, ["a.cpp"], cache=cache)
    finally:
        languages.register_toolchain("cpp", builtin, replace=True)
    built = programs.compile_program(runner, "cpp", {"a.cpp": "int main() { return 0; }\n"}, ["a.cpp"], cache=cache)
    assert built.ok, built.diagnostics


SCRIPTED_NOT_FOUND = 'echo "cpfleet: no compiler in the sandbox at /usr/bin/g++: not found" >&2; exit 127\n'


def test_a_compile_step_that_exits_as_a_missing_compiler_would_is_still_a_compile_error(
        runner: CodeRunner, cache: programs.CompileCache) -> None:
    # a language whose compile step runs the source's own code (a build script): its exit status
    # 127 and a "not found" of its choosing are its own failure, whatever the sandbox is missing
    builtin = languages.TOOLCHAINS["cpp"]

    def scripted(env: Mapping[str, str]) -> languages.Language:
        lang = builtin(env)
        assert lang.compile is not None
        return dataclasses.replace(lang, compile=dataclasses.replace(lang.compile, argv=("/bin/sh", languages.SOURCES)))

    languages.register_toolchain("cpp", scripted, replace=True)
    try:
        built = programs.compile_program(runner, "cpp", {"a.cpp": SCRIPTED_NOT_FOUND},
                                         ["a.cpp"], cache=cache)
    finally:
        languages.register_toolchain("cpp", builtin, replace=True)
    assert not built.ok and "not found" in built.diagnostics, built.diagnostics
