"""C, C++, Java and PyPy solutions judged end to end (cpfleet.sandbox.env.evaluate) on every runner:
the same verdicts as Python, compile errors without a test run, hostile sources, availability."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import pathlib
import shutil
import zlib
from collections.abc import Mapping

import pytest

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.languages import java as java_lang
from cpfleet.sandbox.runner import CodeRunner

SUM = Problem.from_dict({
    "id": "sum", "time_limit_s": 1, "memory_limit_mb": 256,
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}, {"input": "100 1\n", "output": "101\n"}],
})

# For the programs that fill memory: reaching the limit costs reclaim time charged as their own CPU,
# and until the OOM killer's victim has exited that grew from ~0.15 s to ~0.6 s here under load, near
# SUM's 1 s (TIME_LIMIT, also the program's own failure). 10 s leaves the memory limit the only one
# they can reach; the time limit is not what those cases test.
SUM_ROOMY = Problem.from_dict({**SUM.to_dict(), "time_limit_s": 10})

CPP_OK = "#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}\n"
C_OK = "#include <stdio.h>\n#include <math.h>\nint main(void){long long a,b;scanf(\"%lld %lld\",&a,&b);" \
       "printf(\"%lld\\n\",a+b+(long long)floor(sqrt(0.25)));return 0;}\n"
JAVA_OK = ("import java.util.*;\npublic class Adder {\n public static void main(String[] x) {\n"
           "  Scanner s = new Scanner(System.in);\n  System.out.println(s.nextLong() + s.nextLong());\n }\n}\n")

CASES = {
    # language, source, expected verdict, expected reward
    "cpp_ok": ("cpp", CPP_OK, Verdict.OK, 1.0),
    "cpp_wa": ("cpp", "#include <cstdio>\nint main(){long long a,b;scanf(\"%lld%lld\",&a,&b);printf(\"%lld\",a-b);}", Verdict.WRONG_ANSWER, 0.0),
    "cpp_tle": ("cpp", "int main(){volatile unsigned long x=0; for(;;) x++;}", Verdict.TIME_LIMIT, 0.0),
    "cpp_re": ("cpp", "#include <cstdlib>\nint main(){abort();}", Verdict.RUNTIME_ERROR, 0.0),
    "cpp_segv": ("cpp", "int main(){ volatile int *p = 0; return *p; }", Verdict.RUNTIME_ERROR, 0.0),
    "cpp_exit3": ("cpp", "int main(){ return 3; }", Verdict.RUNTIME_ERROR, 0.0),
    "cpp_mle": ("cpp", "#include <vector>\nint main(){std::vector<char*> v; for(;;){char*p=new char[1<<20];"
                "for(int i=0;i<(1<<20);i+=4096)p[i]=1; v.push_back(p);}}", Verdict.MEMORY_LIMIT, 0.0),
    "cpp_ce": ("cpp", "int main(){ return undeclared; }", Verdict.COMPILE_ERROR, 0.0),
    "cpp_static_1gb": ("cpp", "static char big[1<<30]; int main(){ big[12345]=1; return big[0]; }",
                       Verdict.MEMORY_LIMIT, 0.0),
    "c_ok": ("c", C_OK, Verdict.OK, 1.0),
    "c_wa": ("c", "#include <stdio.h>\nint main(void){puts(\"3\");return 0;}", Verdict.WRONG_ANSWER, 0.0),
    "c_tle": ("c", "int main(void){volatile unsigned long x=0; for(;;) x++;}", Verdict.TIME_LIMIT, 0.0),
    "c_re": ("c", "int main(void){ volatile int *p = 0; return *p; }", Verdict.RUNTIME_ERROR, 0.0),
    "c_mle": ("c", "#include <stdlib.h>\n#include <string.h>\nint main(void){for(;;){char*p=malloc(1<<20);"
              "if(!p) return 1; memset(p,1,1<<20);}}", Verdict.MEMORY_LIMIT, 0.0),
    "c_ce": ("c", "int main(void){ return }", Verdict.COMPILE_ERROR, 0.0),
    "java_ok": ("java", JAVA_OK, Verdict.OK, 1.0),
    "java_wa": ("java", "public class Main { public static void main(String[] a) { System.out.println(3); } }",
                Verdict.WRONG_ANSWER, 0.0),
    "java_tle": ("java", "public class Main { public static void main(String[] a) { long x = 0;"
                 " while (true) { x++; if (x == -5) System.out.println(x); } } }", Verdict.TIME_LIMIT, 0.0),
    "java_re": ("java", "public class Main { public static void main(String[] a) { int[] z = new int[1];"
                " z[5] = 1; } }", Verdict.RUNTIME_ERROR, 0.0),
    "java_mle": ("java", "import java.util.*;\npublic class Main { public static void main(String[] a) {"
                 " List<long[]> l = new ArrayList<>(); while (true) l.add(new long[1 << 20]); } }",
                 Verdict.MEMORY_LIMIT, 0.0),
    "java_ce": ("java", "public class Main { public static void main(String[] a) { int x = ; } }",
                Verdict.COMPILE_ERROR, 0.0),
}


def _needs(language: str) -> None:
    missing = languages.missing_tools(language)
    if missing:
        pytest.skip(f"{language} toolchain not installed here: {missing}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_languages_get_the_same_verdicts_as_python(runner: CodeRunner, case: str) -> None:
    language, source, verdict, reward = CASES[case]
    _needs(language)
    tag = {"cpp": "cpp", "c": "c", "java": "java"}[language]
    problem = SUM_ROOMY if verdict == Verdict.MEMORY_LIMIT else SUM
    result = evaluate(problem, f"My answer:\n```{tag}\n{source}\n```\n", runner, job_id=case)
    assert (result.verdict, result.reward, result.infra_error) == (verdict, reward, False), result.observation
    assert result.language == language
    if verdict == Verdict.COMPILE_ERROR:
        assert result.public.run == 0 and result.hidden.run == 0
        assert "error" in result.observation


def test_compile_error_feedback_carries_the_compilers_first_diagnostic(runner: CodeRunner) -> None:
    _needs("cpp")
    result = evaluate(SUM, "```cpp\nint main(){ return undeclared_name_xyz; }\n```", runner)
    assert result.verdict == Verdict.COMPILE_ERROR
    assert "undeclared_name_xyz" in result.observation and "was not declared" in result.observation


def test_pypy_runs_python_completions_when_the_job_asks_for_it(runner: CodeRunner) -> None:
    _needs("pypy3")
    code = "```python\nimport sys, platform\na, b = map(int, input().split())\nprint(a + b)\n" \
           "print(platform.python_implementation(), file=sys.stderr)\n```"
    result = evaluate(SUM, code, runner, language="pypy3")
    assert (result.verdict, result.reward, result.language) == (Verdict.OK, 1.0, "pypy3"), result.observation
    assert "PyPy" in result.observation  # the public test's stderr names the interpreter
    broken = evaluate(SUM, "```python\ndef f(:\n```", runner, language="pypy3")
    assert broken.verdict == Verdict.COMPILE_ERROR and broken.public.run == 0


@pytest.mark.parametrize(("hostile", "verdict"), [
    ('#include "/dev/zero"\nint main(){}', Verdict.COMPILE_ERROR),
    ('#include "/dev/urandom"\nint main(){}', Verdict.COMPILE_ERROR),
    # the compiler's stdin is empty: the include is empty, the program compiles and prints nothing
    ('#include "/dev/stdin"\nint main(){}', Verdict.WRONG_ANSWER),
    # (a template instantiation bomb is in test_programs.py, under a 1 s compile limit)
])
def test_hostile_sources_end_as_compile_error_never_a_hung_worker(runner: CodeRunner, hostile: str,
                                                                   verdict: Verdict) -> None:
    _needs("cpp")
    result = evaluate(SUM, f"```cpp\n{hostile}\n```", runner)
    assert result.verdict == verdict and not result.infra_error, result.observation
    after = evaluate(SUM, f"```cpp\n{CPP_OK}```", runner)  # the runner still judges
    assert after.verdict == Verdict.OK


def test_gigantic_binary_is_a_compile_error_naming_the_limit(runner: CodeRunner) -> None:
    _needs("cpp")
    # 80 MB of initialised data: the binary itself is over the 64 MB cap on compiled programs
    source = "#include <cstdio>\nchar big[80 << 20] = {1};\n" \
             "int main(){ int i = 0; if (std::scanf(\"%d\", &i) != 1) return 1; std::printf(\"%d\", big[i]); }"
    result = evaluate(SUM, f"```cpp\n{source}\n```", runner)
    assert result.verdict == Verdict.COMPILE_ERROR and not result.infra_error
    assert "limit" in result.observation


def test_time_limit_multiplier_gives_a_language_more_time(runner: CodeRunner) -> None:
    _needs("cpp")
    # Spins until it has used 1 s of CPU, whatever the machine's speed: over a 0.3 s limit, well
    # under 0.3 s x 12. A fixed loop count would take 1 s on one CPU and 4 s on another.
    spin = "#include <ctime>\nint main(){ while (std::clock() < CLOCKS_PER_SEC) {} return 0; }"
    base = {"id": "spin", "time_limit_s": 0.3, "hidden_tests": [{"input": "", "output": ""}],
            "checker": {"type": "tokens"}}
    strict = evaluate(Problem.from_dict(base), f"```cpp\n{spin}\n```", runner)
    lenient = evaluate(Problem.from_dict({**base, "time_limit_multipliers": {"cpp": 12}}), f"```cpp\n{spin}\n```",
                       runner)
    assert strict.verdict == Verdict.TIME_LIMIT
    assert lenient.verdict == Verdict.OK, lenient.observation


def test_problem_languages_restrict_what_is_judged(runner: CodeRunner) -> None:
    _needs("cpp")
    only_cpp = Problem.from_dict({**SUM.to_dict(), "languages": ["cpp"]})
    python_only_answer = evaluate(only_cpp, "```python\nprint(3)\n```", runner)
    assert python_only_answer.verdict == Verdict.NO_CODE and "cpp" in python_only_answer.observation
    untagged = evaluate(only_cpp, f"```\n{CPP_OK}```", runner)  # untagged = the problem's language
    assert untagged.verdict == Verdict.OK and untagged.language == "cpp"


def test_job_language_not_allowed_by_the_problem_is_an_infrastructure_error(runner: CodeRunner) -> None:
    only_cpp = Problem.from_dict({**SUM.to_dict(), "languages": ["cpp"]})
    result = evaluate(only_cpp, "```java\nclass A{}\n```", runner, language="java")
    assert result.infra_error and result.reward is None and "java" in result.infra_message


def test_unavailable_toolchain_is_internal_naming_it_never_a_zero(runner: CodeRunner, monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: object) -> None:

    monkeypatch.setenv("CPFLEET_PYPY", "/nonexistent/pypy3")
    languages.table.cache_clear()
    languages.toolchain_version.cache_clear()
    try:
        result = evaluate(SUM, "```pypy\nprint(3)\n```", runner, language="pypy3")
    finally:
        monkeypatch.undo()
        languages.table.cache_clear()
        languages.toolchain_version.cache_clear()
    assert result.verdict == Verdict.INTERNAL and result.infra_error and result.reward is None
    assert "/nonexistent/pypy3" in result.infra_message and "pypy3" in result.infra_message


def test_java_solution_whose_class_is_not_main_runs(runner: CodeRunner) -> None:
    _needs("java")
    source = "import java.io.*;\nclass Helper { static long add(long a, long b) { return a + b; } }\n" \
             "public class Solution_42 { public static void main(String[] args) throws IOException {\n" \
             " String[] p = new BufferedReader(new InputStreamReader(System.in)).readLine().trim().split(\" \");\n" \
             " System.out.println(Helper.add(Long.parseLong(p[0]), Long.parseLong(p[1]))); } }\n"
    result = evaluate(SUM, f"```java\n{source}```", runner)
    assert result.verdict == Verdict.OK, result.observation



# Codeforces starts Java with -DONLINE_JUDGE=true and DOMjudge with -DONLINE_JUDGE, as C and C++ get
# -DONLINE_JUDGE: contest templates read a local input.txt unless the property is set, so a right
# answer was a RUNTIME_ERROR (FileNotFoundException) on every test.
JAVA_LOCAL_INPUT_UNLESS_ON_A_JUDGE = """import java.io.*;
import java.util.*;
public class Main { public static void main(String[] args) throws IOException {
  boolean judge = System.getProperty("ONLINE_JUDGE") != null;
  Scanner s = new Scanner(judge ? new InputStreamReader(System.in) : new FileReader("input.txt"));
  System.out.println(s.nextLong() OP s.nextLong()); } }
"""


@pytest.mark.parametrize(("op", "verdict", "reward"), [("+", Verdict.OK, 1.0), ("-", Verdict.WRONG_ANSWER, 0.0)])
def test_java_programs_see_the_online_judge_property_as_on_codeforces(runner: CodeRunner, op: str, verdict: Verdict,
                                                                      reward: float) -> None:
    _needs("java")
    result = evaluate(SUM, f"```java\n{JAVA_LOCAL_INPUT_UNLESS_ON_A_JUDGE.replace('OP', op)}```", runner)
    assert (result.verdict, result.reward) == (verdict, reward), result.observation


# A runtime bounded by the cgroup alone (the JVM, PyPy) may hold its memory limit and the runtime's
# allowance beyond it (``extra_cgroup_mb``); its peak RSS includes the runtime itself. One that
# failed by itself after filling most of its limit (an index out of bounds, its heap well inside
# -Xmx) was a MEMORY_LIMIT inferred from a peak RSS near the limit: the verdict and the feedback
# named memory for what every judge calls a runtime error.
FILL_THEN_FAIL = {
    "java": ("public class Main { public static void main(String[] a) { int[][] x = new int[52][];\n"
             "  for (int i = 0; i < 52; i++) { x[i] = new int[1 << 20]; x[i][i] = 1; }\n"
             "  int[] y = new int[3]; System.out.println(y[x[51][51] + 4]); } }\n"),
    "pypy3": "x = [0] * (27 << 20)\nprint([0, 1, 2][x[0] + 4])\n",
}


@pytest.mark.parametrize("language", list(FILL_THEN_FAIL))
def test_a_runtime_error_after_filling_most_of_the_memory_limit_is_a_runtime_error(runner: CodeRunner,
                                                                                    language: str) -> None:
    _needs(language)
    problem = Problem.from_dict({"id": "fill-then-fail", "time_limit_s": 10, "memory_limit_mb": 256,
                                 "public_tests": [{"input": "", "output": "1\n"}],
                                 "hidden_tests": [{"input": "", "output": "1\n"}]})
    tag = "pypy" if language == "pypy3" else language
    result = evaluate(problem, f"```{tag}\n{FILL_THEN_FAIL[language]}```", runner, language=language)
    assert (result.verdict, result.reward) == (Verdict.RUNTIME_ERROR, 0.0), result.observation
    assert "Index" in result.observation, result.observation


def test_deep_recursion_works_in_cpp_and_java(runner: CodeRunner) -> None:
    _needs("cpp")
    deep = Problem.from_dict({"id": "deep", "hidden_tests": [{"input": "1000000\n", "output": "1000000\n"}]})
    cpp = "#include <cstdio>\nint d(int n){ volatile char pad[16]; pad[0]=n; return n==0?0:1+d(n-1)+pad[0]*0; }\n" \
          "int main(){ int n; if(scanf(\"%d\",&n)!=1) return 1; printf(\"%d\\n\", d(n)); }"
    assert evaluate(deep, f"```cpp\n{cpp}\n```", runner).verdict == Verdict.OK
    if shutil.which("java"):
        java = "public class Main { static int d(int n){ return n==0?0:1+d(n-1); }\n" \
               " public static void main(String[] a){ System.out.println(d(new java.util.Scanner(System.in).nextInt())); } }"
        result = evaluate(deep, f"```java\n{java}\n```", runner)
        assert result.verdict == Verdict.OK, result.observation


def test_job_language_reaches_pool_processes(tmp_path: object) -> None:
    """cpfleet judge with several workers: each job's own language is honoured."""
    _needs("pypy3")
    from cpfleet.jobs.pool import judge_iter

    jobs = [{"problem_id": "sum", "job_id": str(i), "completion": "```python\nprint(sum(map(int, input().split())))\n```",
             "language": "pypy3" if i % 2 else "python3"} for i in range(4)]
    results = list(judge_iter({"sum": SUM}, jobs, workers=2))
    assert [r.language for r in results] == ["python3", "pypy3", "python3", "pypy3"]
    assert all(r.reward == 1.0 for r in results), [r.observation for r in results]


# A C or C++ program is exec'd under RLIMIT_AS with glibc told to keep one malloc arena
# (sandbox/child.py): a threaded program's verdict depends on it (MEMORY_LIMIT at 16 + 64 + 200 MB
# of a 256 MB limit with an arena per thread, OK with one), so results judged without it are not
# served for it.
def test_the_environment_a_compiled_program_is_exec_with_is_part_of_its_result_cache_identity(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cpfleet.sandbox import child
    from cpfleet.sandbox.env import program_identity

    completion = f"```cpp\n{CPP_OK}```"
    before = program_identity(SUM, completion, None)
    python_before = program_identity(SUM, "```python\nprint(3)\n```", None)
    monkeypatch.setattr(child, "ONE_MALLOC_ARENA", "glibc.malloc.arena_max=2")
    assert program_identity(SUM, completion, None) != before
    assert program_identity(SUM, "```python\nprint(3)\n```", None) == python_before  # forked, not exec'd


@pytest.mark.parametrize("setting", [{"CPFLEET_CPP_STD": "c++20"}, {"CPFLEET_STATIC_LINK": "0"},
                                     {"CPFLEET_TIME_MULTIPLIERS": "cpp=2"}])
def test_a_toolchain_setting_changes_the_programs_result_cache_identity(setting: dict[str, str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from cpfleet.sandbox.env import program_identity

    completion = f"```cpp\n{CPP_OK}```"
    languages.table.cache_clear()
    before = program_identity(SUM, completion, None)
    python_before = program_identity(SUM, "```python\nprint(3)\n```", None)
    for name, value in setting.items():
        monkeypatch.setenv(name, value)
    languages.table.cache_clear()
    try:
        after = program_identity(SUM, completion, None)
        python_after = program_identity(SUM, "```python\nprint(3)\n```", None)
    finally:
        monkeypatch.undo()
        languages.table.cache_clear()
    assert before is not None and after is not None and before != after
    assert before.endswith(CPP_OK) and after.endswith(CPP_OK)
    assert python_before == python_after  # a C++ setting leaves Python's results shared


def test_java_collector_setting_changes_the_programs_result_cache_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    from cpfleet.sandbox.env import program_identity

    completion = f"```java\n{JAVA_OK}```"
    languages.table.cache_clear()
    try:
        serial = program_identity(SUM, completion, None)
        assert "-XX:+UseSerialGC" in languages.get("java").run_argv  # the default
        monkeypatch.setenv("CPFLEET_JAVA_GC", "g1")
        languages.table.cache_clear()
        g1 = program_identity(SUM, completion, None)
        assert "-XX:+UseG1GC" in languages.get("java").run_argv
        monkeypatch.setenv("CPFLEET_JAVA_GC", "parallel")
        with pytest.raises(ValueError, match="CPFLEET_JAVA_GC"):
            languages.build_table()
    finally:
        monkeypatch.undo()
        languages.table.cache_clear()
    assert g1 is not None and serial is not None and g1 != serial


def test_java_main_class_rules_are_part_of_the_programs_result_cache_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    # which class a Java program is saved and started as decides its verdict: a result cached
    # under another reading of the source (a valid program once refused) must not be served
    from cpfleet.sandbox.env import program_identity

    completion = f"```java\n{JAVA_OK}```"
    languages.table.cache_clear()
    try:
        now = program_identity(SUM, completion, None)
        monkeypatch.setattr(java_lang, "MAIN_CLASS_RULES", java_lang.MAIN_CLASS_RULES + 1)
        languages.table.cache_clear()
        later = program_identity(SUM, completion, None)
    finally:
        monkeypatch.undo()
        languages.table.cache_clear()
    assert now is not None and later is not None and now != later


def test_jvm_maps_the_jdks_class_sharing_archive_here() -> None:
    _needs("java")
    java = languages.get("java").run_argv[0]
    home = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    if not os.path.exists(os.path.join(home, "lib", "server", "classes.jsa")):
        pytest.skip(f"this JDK ({home}) ships no class-data sharing archive")
    assert java_lang.jvm_class_sharing() == ""
    assert languages.availability_line().count("java") == 1  # no warning on the start-up line


def test_a_corrupt_class_sharing_archive_is_named_and_the_program_still_judged(runner: CodeRunner,
                                                                               tmp_path: pathlib.Path) -> None:
    from cpfleet.sandbox import programs
    from cpfleet.sandbox.runner import Limits

    _needs("java")
    bad = tmp_path / "classes.jsa"
    bad.write_bytes(b"not an archive" * 4096)
    bad.chmod(0o644)
    tmp_path.chmod(0o755)
    argv = languages.get("java").run_argv
    broken = (argv[0], f"-XX:SharedArchiveFile={bad}", *argv[1:])
    why = java_lang.jvm_class_sharing(broken)
    assert "shared archive" in why, why
    built = programs.compile_program(runner, "java", {"Adder.java": JAVA_OK}, ["Adder.java"],
                                     cache=programs.CompileCache(str(tmp_path / "cache")))
    assert built.ok and built.image is not None, built.diagnostics
    # the archive is the JVM's first option, so a run cannot start without meeting it
    image = dataclasses.replace(built.image, argv=(built.image.argv[0], f"-XX:SharedArchiveFile={bad}",
                                                   *built.image.argv[1:]))
    runner.load_program(image)
    result = runner.run(b"5 7\n", Limits(time_s=5, memory_mb=256))
    assert result.status == Verdict.OK and result.stdout == b"12\n", result


def test_a_jvm_that_cannot_map_its_class_sharing_archive_is_named_on_the_start_up_line(tmp_path: pathlib.Path) -> None:
    # the warning is the java module's start_warning, read by the registry's availability_line
    _needs("java")
    bad = tmp_path / "classes.jsa"
    bad.write_bytes(b"not an archive" * 4096)
    builtin = languages.TOOLCHAINS["java"]

    def broken(env: Mapping[str, str]) -> languages.Language:
        lang = builtin(env)
        return dataclasses.replace(lang, run_argv=(lang.run_argv[0], f"-XX:SharedArchiveFile={bad}", *lang.run_argv[1:]))

    languages.register_toolchain("java", broken, replace=True)
    try:
        line = languages.availability_line()
    finally:
        languages.register_toolchain("java", builtin, replace=True)
    assert "java (WARNING: no class-data sharing, each test starts ~2x slower: " in line, line
    assert "shared archive" in line and line.count("WARNING") == 1, line


def test_java_under_a_memory_limit_above_1gb_runs(runner: CodeRunner) -> None:
    # the main thread's stack is the memory limit capped at the JVM's largest -Xss (1 GB): an
    # uncapped -Xss2048m stops the JVM before the program runs, a RUNTIME_ERROR not of its making
    _needs("java")
    big = Problem.from_dict({**SUM.to_dict(), "id": "sum-2g", "memory_limit_mb": 2048})
    result = evaluate(big, f"```java\n{JAVA_OK}```", runner)
    assert result.reward == 1.0, result.observation


# Java programs whose classes the JVM's fast start leaves without intrinsics (SHA, CRC32,
# Adler32, Base64, AES) get the same results from the classes' Java code
HASHES = """import java.security.*; import java.util.*; import java.util.zip.*; import javax.crypto.*; import javax.crypto.spec.*;
public class Main { public static void main(String[] a) throws Exception {
  byte[] m = new Scanner(System.in).next().getBytes("UTF-8");
  StringBuilder h = new StringBuilder(); for (byte b : MessageDigest.getInstance("SHA-256").digest(m)) h.append(String.format("%02x", b));
  CRC32 c = new CRC32(); c.update(m); Adler32 d = new Adler32(); d.update(m);
  Cipher aes = Cipher.getInstance("AES/ECB/NoPadding"); aes.init(Cipher.ENCRYPT_MODE, new SecretKeySpec(new byte[16], "AES"));
  byte[] block = aes.doFinal(new byte[16]); aes.init(Cipher.DECRYPT_MODE, new SecretKeySpec(new byte[16], "AES"));
  System.out.println(h + " " + c.getValue() + " " + d.getValue() + " " + Base64.getEncoder().encodeToString(m)
                     + " " + Arrays.equals(aes.doFinal(block), new byte[16])); } }
"""


def test_java_without_the_skipped_intrinsics_computes_the_same_hashes(runner: CodeRunner) -> None:
    _needs("java")
    assert set(java_lang.JVM_FAST_START_FLAGS) <= set(languages.get("java").run_argv)  # this JDK takes them
    m = b"cpfleet"
    expected = f"{hashlib.sha256(m).hexdigest()} {zlib.crc32(m)} {zlib.adler32(m)} {base64.b64encode(m).decode()} true\n"
    problem = Problem.from_dict({"id": "hashes", "hidden_tests": [{"input": "cpfleet\n", "output": expected}]})
    result = evaluate(problem, f"```java\n{HASHES}```", runner)
    assert result.reward == 1.0, result.observation


def test_a_jvm_that_refuses_the_fast_start_flags_runs_without_them(tmp_path: pathlib.Path) -> None:
    # a JDK that does not know one of the flags (another vendor or version) refuses to start with
    # it: then none is used, rather than every Java test failing before its program runs
    old_jdk = tmp_path / "java"
    old_jdk.write_text("#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in *ArchiveRelocationMode*) "
                       "echo 'Unrecognized VM option' >&2; exit 1;; esac; done\nexit 0\n")
    old_jdk.chmod(0o755)
    assert java_lang.jvm_fast_start(str(old_jdk)) == ()
    assert java_lang.jvm_fast_start(str(tmp_path / "no-such-java")) == ()
    real = languages.get("java").run_argv[0] if not languages.missing_tools("java") else None
    if real is not None:
        assert java_lang.jvm_fast_start(real) == java_lang.JVM_FAST_START_FLAGS


# a program that starts threads until the JVM can start no more (its per-test process limit),
# catches that and prints its answer: the JVM's own warnings about it go to stderr, not into the
# answer (by default the JVM logs them on stdout: a right answer was a WRONG_ANSWER)
THREADS_PAST_NPROC = """import java.util.*;
public class Main { public static void main(String[] a) throws Exception {
  Scanner s = new Scanner(System.in); long x = s.nextLong(), y = s.nextLong(); int started = 0;
  try { for (int i = 0; i < 100000; i++) { Thread t = new Thread(() -> { try { Thread.sleep(60000); } catch (InterruptedException e) { } });
      t.setDaemon(true); t.start(); started++; } } catch (Throwable e) { }
  System.out.println(x + y); System.out.flush(); System.err.println("started " + started); Runtime.getRuntime().halt(0); } }
"""


def test_the_jvms_own_warnings_go_to_stderr_not_into_the_answer(runner: CodeRunner) -> None:
    _needs("java")
    assert set(java_lang.JVM_LOG_FLAGS) <= set(languages.get("java").run_argv)  # this JDK takes them
    problem = Problem.from_dict({"id": "threads-past-nproc", "time_limit_s": 10, "memory_limit_mb": 512,
                                 "hidden_tests": [{"input": "5 7\n", "output": "12\n"}]})
    result = evaluate(problem, f"```java\n{THREADS_PAST_NPROC}```", runner)
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation
