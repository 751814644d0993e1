"""Hostile compiled programs at compile time, through ``cpfleet.judge_locally`` (the path the
worker and ``cpfleet judge`` take): whatever a source makes its compiler read or write is the
program's own doing (COMPILE_ERROR, a limit, or its tests' verdicts), never an infrastructure
error (INTERNAL, reward None), and its messages show nothing the sandbox hides."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import pytest

import cpfleet
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages, programs
from cpfleet.sandbox.runner import CodeRunner

SUM = Problem.from_dict({
    "id": "sum-compiled", "time_limit_s": 5, "languages": ["c", "cpp", "java"],
    "public_tests": [{"input": "1 2\n", "output": "3\n"}],
    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}],
})


def judge(runner: CodeRunner, language: str, code: str) -> cpfleet.JobResult:
    if languages.missing_tools(language):
        pytest.skip(f"no {language} toolchain here")
    result = cpfleet.judge_locally(SUM, f"```{language}\n{code}\n```", runner, mode="full")
    assert not result.infra_error, result.infra_message
    return result


# A class in a package many names deep is one compiled file in as many directories; the program
# tmpfs was sized for two inodes a file, so placing it failed (ENOSPC) and the job was INTERNAL.
JAVA_SUM = """import java.util.*;
public class Main { public static void main(String[] a) { Scanner s = new Scanner(System.in);
  System.out.println(s.nextInt() %s s.nextInt()); } }"""
DEEP_PACKAGE = "package " + ".".join(f"p{i}" for i in range(100)) + ";\n"


@pytest.mark.parametrize(("op", "verdict", "reward"), [("+", Verdict.OK, 1.0), ("-", Verdict.WRONG_ANSWER, 0.0)])
def test_a_java_class_in_a_deep_package_is_judged(runner: CodeRunner, op: str, verdict: Verdict,
                                                  reward: float) -> None:
    result = judge(runner, "java", DEEP_PACKAGE + JAVA_SUM % op)
    assert (result.verdict, result.reward) == (verdict, reward)


# Deeper than Python's recursion limit (1000): os.makedirs recursed once per directory while the
# sandbox placed the compiled class, and the job process placing it died ("the sandbox process
# exited", a zygote restart): INTERNAL, reward None, for a wrong program's doing.
@pytest.mark.parametrize(("op", "verdict", "reward"), [("+", Verdict.OK, 1.0), ("-", Verdict.WRONG_ANSWER, 0.0)])
def test_a_java_class_in_a_package_past_the_recursion_limit_is_judged(runner: CodeRunner, op: str, verdict: Verdict,
                                                                    reward: float) -> None:
    package = "package " + ".".join(["p"] * 1200) + ";\n"
    result = judge(runner, "java", package + JAVA_SUM % op)
    assert (result.verdict, result.reward) == (verdict, reward)


# A public class named past NAME_MAX bytes names its source file: writing it failed
# (ENAMETOOLONG) and the job was INTERNAL; a class of that name elsewhere is javac's to refuse.
LONG = "A" * 300


@pytest.mark.parametrize("code", [JAVA_SUM.replace("public class Main", f"public class {LONG}") % "+",
                                  JAVA_SUM.replace("public class Main", f"class {LONG}") % "+",
                                  JAVA_SUM.replace("public class Main {", f"public class Main {{ class {LONG} {{}}") % "+"],
                         ids=["public", "not-public", "nested"])
def test_a_java_class_named_past_a_file_names_length_is_a_compile_error(runner: CodeRunner, code: str) -> None:
    result = judge(runner, "java", code)
    assert (result.verdict, result.reward) == (Verdict.COMPILE_ERROR, 0.0)


# The class a Java solution is started by is read from its code: the detector stripped comments
# with a pattern that read string literals as code, so a "/*" or "//" inside a string opened a
# comment that swallowed the public class, and a "public class Foo" or "package" line inside a
# literal named a class javac never made: a valid program was a COMPILE_ERROR or a RUNTIME_ERROR.
JAVA_LITERALS = {
    "comment-opened-in-a-string": ('class Glob { static String G = "src/*.txt"; }\n', "/** the sum */\n"),
    "url-in-a-string": ('class Url { static String U = "http://example.com"; } ', ""),
    "declaration-in-a-string": ('class Text { static String T = "public class Foo"; static char Q = \'"\'; }\n', ""),
    "package-in-a-text-block": ('class Text { static String T = """\n  package not.mine;\n  """; }\n', ""),
    # javac's own readings: a text block's \""" is an escaped quote, not its end, and a Unicode
    # escape is its character before anything else (\u0022 is a quote, so "/*" is in a string)
    "escaped-quotes-in-a-text-block": ('class Text { static String T = """\n  say \\"""hi\n  """; }\n', ""),
    "unicode-escaped-quotes": ("class Glob { static String G = \\u0022src/*.txt\\u0022; }\n", ""),
}


# A class name javac takes that does not start with an ASCII letter (``Ärger``) was not seen at all:
# the file was named after another class (or Main), and javac refused the public class in it.
def test_a_java_public_class_named_with_a_non_ascii_letter_is_judged(runner: CodeRunner) -> None:
    result = judge(runner, "java", JAVA_SUM.replace("public class Main", "public class Ärger") % "+")
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation


# javac reads Unicode escapes first: ``public class \u00c4rger`` is Ärger, to be saved as Ärger.java
def test_a_java_public_class_named_through_a_unicode_escape_is_judged(runner: CodeRunner) -> None:
    result = judge(runner, "java", JAVA_SUM.replace("public class Main", "public class \\u00c4rger") % "+")
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation


# A non-public class Main holding a class declared before its main (``static class Node``, the usual
# contest idiom, or a public inner class): the nested class was read as the one to start, "java
# Node" found no such class, and a valid program was a RUNTIME_ERROR on every test.
NESTED_BEFORE_MAIN = {
    "static-nested-class": "  static class Node { int v; }\n",
    "public-inner-class": "  public class Edge { int to; }\n",
}


@pytest.mark.parametrize("nested", list(NESTED_BEFORE_MAIN.values()), ids=list(NESTED_BEFORE_MAIN))
@pytest.mark.parametrize(("op", "verdict", "reward"), [("+", Verdict.OK, 1.0), ("-", Verdict.WRONG_ANSWER, 0.0)])
def test_a_java_class_nested_before_main_is_not_the_one_started(runner: CodeRunner, nested: str, op: str,
                                                                   verdict: Verdict, reward: float) -> None:
    code = JAVA_SUM.replace("public class Main { ", "class Main {\n" + nested + "  ", 1) % op
    result = judge(runner, "java", code)
    assert (result.verdict, result.reward) == (verdict, reward), result.observation


# javac takes a public class without ``main`` beside a non-public class that has it (the public
# class names the file, ``main`` lives in the other): the public class was started, "no main
# method", a RUNTIME_ERROR on every test of a valid program. The class holding main is started.
MAIN_BESIDE_PUBLIC = {
    "public-helper-first": JAVA_SUM.replace("public class Main", "public class Solver { static int twice(int x) { return 2 * x; } }\nclass Main"),
    "public-helper-after": JAVA_SUM.replace("public class Main", "class Main") + "\npublic class Solver { }\n",
    "public-sealed-interface": JAVA_SUM.replace("public class Main", "public sealed interface Shape permits Circle { }\n"
                                                "final class Circle implements Shape { }\nclass Main"),
    "public-non-sealed-class": JAVA_SUM.replace("public class Main", "class Main") + "\nsealed class Base permits Shape { }\n"
                                                                                    "public non-sealed class Shape extends Base { }\n",
    "both-with-main": JAVA_SUM.replace("public class Main", "class Other { public static void main(String[] a) { System.out.println(0); } }\npublic class Main"),
}


@pytest.mark.parametrize("code", list(MAIN_BESIDE_PUBLIC.values()), ids=list(MAIN_BESIDE_PUBLIC))
@pytest.mark.parametrize(("op", "verdict", "reward"), [("+", Verdict.OK, 1.0), ("-", Verdict.WRONG_ANSWER, 0.0)])
def test_the_java_class_holding_main_is_started_beside_a_public_class_without_it(
        runner: CodeRunner, code: str, op: str, verdict: Verdict, reward: float) -> None:
    result = judge(runner, "java", code.replace("%s", op))
    assert (result.verdict, result.reward) == (verdict, reward), result.observation


# ``main`` declared with modifiers other than ``public``, ``static`` and ``final`` in their usual
# order (``synchronized``, ``strictfp``, ``static public final``), type parameters or an annotation
# among them is still the JVM's entry point; in a non-public class followed by another top-level
# class it was not seen, the last class was started ("Main method not found in class Helper"),
# and a valid program was a RUNTIME_ERROR on every test.
MAIN_MODIFIERS = {
    "synchronized": "public static synchronized void main",
    "strictfp": "public static strictfp void main",
    "static-public-final": "static public final void main",
    "type-parameter": "public static <T> void main",
    "annotation-among-modifiers": "public static @Deprecated void main",
    "annotation-with-braces-before": '@SuppressWarnings({"unchecked", "rawtypes"}) public static void main',
}


@pytest.mark.parametrize("declaration", list(MAIN_MODIFIERS.values()), ids=list(MAIN_MODIFIERS))
@pytest.mark.parametrize(("op", "verdict", "reward"), [("+", Verdict.OK, 1.0), ("-", Verdict.WRONG_ANSWER, 0.0)])
def test_a_java_main_declared_with_any_modifiers_is_the_one_started(runner: CodeRunner, declaration: str, op: str,
                                                                     verdict: Verdict, reward: float) -> None:
    code = (JAVA_SUM.replace("public class Main", "class Main").replace("public static void main", declaration)
            + "\nclass Helper { static int twice(int x) { return 2 * x; } }\n")
    result = judge(runner, "java", code % op)
    assert (result.verdict, result.reward) == (verdict, reward), result.observation


def before_main(helper: str, doc: str) -> str:
    """JAVA_SUM with ``helper`` (a class) and ``doc`` (a comment) between its import and its class."""
    return JAVA_SUM.replace("public class Main", helper + doc + "public class Main", 1)


@pytest.mark.parametrize("code", [before_main(*parts) for parts in JAVA_LITERALS.values()], ids=list(JAVA_LITERALS))
@pytest.mark.parametrize(("op", "verdict", "reward"), [("+", Verdict.OK, 1.0), ("-", Verdict.WRONG_ANSWER, 0.0)])
def test_a_java_main_class_is_read_from_code_not_from_its_literals(runner: CodeRunner, code: str, op: str,
                                                                   verdict: Verdict, reward: float) -> None:
    result = judge(runner, "java", code % op)
    assert (result.verdict, result.reward) == (verdict, reward), result.observation


# The detector runs in the worker, on the untrusted text, before any sandbox limit: every line
# start followed by blank lines, and every "/*" never closed, cost it time quadratic in their number
# (1 MB of newlines: ~20 minutes of the worker's CPU, twice per job, even for a compile cache hit;
# 300k openings: ~15 minutes). Each is read once now, and so is a literal left open.
def test_a_java_source_padded_with_blank_lines_is_judged(runner: CodeRunner) -> None:
    result = judge(runner, "java", JAVA_SUM % "+" + "\n" * 1_000_000)
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation


@pytest.mark.parametrize("padding", ["/*\n" * 300_000, '"' + '\\"' * 300_000 + "\n", "'" + "\\'" * 300_000 + "\n",
                                     '"""' * 300_000, "\n" * 1_000_000, "\\" * 1_000_000, "\\u" * 300_000,
                                     '"""' + '\\"' * 300_000, "static " * 300_000, "{ static " * 300_000,
                                     "void main(" * 300_000],
                         ids=["comment-openings", "string-escapes", "char-escapes", "text-block-quotes", "blank-lines",
                              "backslashes", "unicode-escape-openings", "text-block-escapes", "modifiers",
                              "modifiers-after-braces", "main-openings"])
def test_the_java_main_class_detector_reads_a_padded_source_once(padding: str) -> None:
    main_class = languages.get("java").main_class
    assert main_class is not None
    assert main_class(JAVA_SUM % "+" + "\n" + padding) == "Main"

# An ELF that names a program interpreter that does not exist (a C source can: a ".interp"
# section) is refused by execve with ENOENT, which the job init took for a missing binary: INTERNAL.
INTERP = """const char interp[] __attribute__((section(".interp"))) = "/nonexistent/ld.so";
#include <stdio.h>
int main(void) { int a, b; if (scanf("%d %d", &a, &b) != 2) return 1; printf("%d\\n", a + b); return 0; }"""


def test_a_binary_naming_a_missing_interpreter_is_its_runtime_error(runner: CodeRunner) -> None:
    result = judge(runner, "c", INTERP)
    assert (result.verdict, result.reward) == (Verdict.RUNTIME_ERROR, 0.0)
    assert "cannot execute" in result.observation


# Defences that held: each is the program's COMPILE_ERROR with the compiler's own words.
@pytest.mark.parametrize(("language", "code", "said"), [
    ("cpp", '#include </dev/random>\nint main() {}', "out of memory"),
    ("c", '#include "/dev/zero"\nint main(void) {}', "out of memory"),
    ("cpp", '#include "/etc/shadow"\nint main() {}', "Permission denied"),
    ("cpp", 'asm(".section .data\\n.incbin \\"/etc/shadow\\"");\nint main() {}', "/etc/shadow"),
    ("cpp", 'asm(".section .data\\n.incbin \\"/dev/urandom\\"");\nint main() {}', "/dev/urandom"),
    ("cpp", "template<int N> struct F { static const int v = F<N - 1>::v + F<N - 2>::v; };\n"
            "template<> struct F<0> { static const int v = 0; };\ntemplate<> struct F<1> { static const int v = 1; };\n"
            "int main() { return F<100000>::v; }", "template instantiation depth"),
], ids=["include-dev-random", "include-dev-zero", "include-shadow", "incbin-shadow", "incbin-urandom", "template-depth"])
def test_hostile_compiles_hold_as_compile_errors(runner: CodeRunner, language: str, code: str, said: str) -> None:
    result = judge(runner, language, code)
    assert (result.verdict, result.reward) == (Verdict.COMPILE_ERROR, 0.0)
    assert said in result.observation


# A valid program whose compile prints warnings past the cap of a compile's messages (1 MiB):
# gcc quotes the whole source line in each warning, so a long line with a warning per statement
# (or per entry of a table) makes megabytes. The compile was stopped at the cap and the program
# was a COMPILE_ERROR though gcc would have built it; it is now compiled again without warnings
# and judged by its tests. A comment unique to the run keeps the compile cache out of it.
WARNINGS = "static int zero(int x) { " + "x = x / 0; " * 5000 + "return x; }\n"
SUM_C = '#include <stdio.h>\nint main(void) { int a, b; if (scanf("%d %d", &a, &b) != 2) return 1; ' \
        'printf("%d\\n", a OP b); return 0; }\n'


@pytest.mark.parametrize("language", ["c", "cpp"])
@pytest.mark.parametrize(("op", "verdict", "reward"), [("+", Verdict.OK, 1.0), ("-", Verdict.WRONG_ANSWER, 0.0)])
def test_warnings_past_the_cap_of_compiler_messages_leave_a_valid_program_to_its_tests(
        runner: CodeRunner, language: str, op: str, verdict: Verdict, reward: float) -> None:
    code = f"// {uuid.uuid4()}\n{WARNINGS}{SUM_C.replace('OP', op)}"
    result = judge(runner, language, code)
    assert (result.verdict, result.reward) == (verdict, reward), result.observation[:500]


def test_an_error_among_warnings_past_the_cap_is_still_a_compile_error_naming_it(runner: CodeRunner) -> None:
    result = judge(runner, "c", f"// {uuid.uuid4()}\n{WARNINGS}int main(void) {{ return undefined_name; }}\n")
    assert (result.verdict, result.reward) == (Verdict.COMPILE_ERROR, 0.0)
    assert "undefined_name" in result.observation and "compiled again with -w" in result.observation


# A source that includes the compiler's own output streams read a pipe the compiler itself held
# open for writing (its messages, or gcc -pipe's assembly on its way to the assembler): the read
# waited until the wall clock stopped the compile, 60 s of a worker's slot per job. The compiler's
# messages now go to a file and gcc runs without -pipe, so such an include reads what is there.
@pytest.mark.parametrize("language", ["c", "cpp"])
@pytest.mark.parametrize("stream", ["/dev/stdout", "/dev/stderr", "/proc/self/fd/1", "/proc/self/fd/2", "/dev/stdin"])
def test_a_source_including_the_compilers_own_streams_is_compiled_at_once(
        runner: CodeRunner, language: str, stream: str) -> None:
    code = f'// {uuid.uuid4()}\n#include "{stream}"\n{SUM_C.replace("OP", "+")}'
    result = judge(runner, language, code)
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation[:500]


# A build that waits is stopped by the wall clock; its message named the 15 s CPU limit it never
# reached.
def test_a_compile_stopped_by_the_wall_clock_says_so(runner: CodeRunner, tmp_path: Path) -> None:
    cache = programs.CompileCache(str(tmp_path))
    built = programs.build_run_program(runner, {"build": "#!/bin/sh\nsleep 60\n", "run": "#!/bin/sh\n"},
                                       cache=cache, limits=replace(programs.COMPILE_LIMITS, wall_s=2.0))
    assert not built.ok and not built.deterministic
    assert "wall-clock limit" in built.diagnostics and "s CPU)" not in built.diagnostics, built.diagnostics
