"""Java: ``javac`` then the JVM, in the ``cgroup`` memory model (the JVM reserves far more
address space than it uses).

The JVM gets ``-Xmx`` = the memory limit and a main thread whose stack is the memory limit too,
at most 1 GB, the largest ``-Xss`` a JVM accepts (the launcher sizes the main thread from
``-Xss``; the later ``-XX:ThreadStackSize``, which the launcher does not read, gives every other
thread 64 MB, as DOMjudge and Kattis give all of them), and its cgroup allowance is the limit
plus ``JVM_OVERHEAD_MB`` for what lives outside the heap (metaspace, code cache, thread stacks).
A solution's file and the class it is started by are its public class (``java_main_class``).

Settings read from the environment when a table is built:

- ``CPFLEET_JAVA_HOME``: a JDK whose ``bin/javac`` and ``bin/java`` are used; default: PATH. A
  Java runtime without a compiler (a JRE) runs what the PATH's ``javac`` compiles, for the
  runtime's release where the runtime is the older (``--release``). A home outside the system
  folders, and the installation its tools (or the PATH's) really live in, are bound read-only
  into the sandbox at their own paths (``Language.sandbox_dirs``).
- ``CPFLEET_JAVA_GC`` (default ``serial``, or ``g1``): the collector (``JAVA_GCS``).
"""

from __future__ import annotations

import bisect
import functools
import os
import re
import subprocess
from collections.abc import Iterator, Mapping

from cpfleet.core import envvars
from cpfleet.sandbox.languages.base import PROG_DIR, SELF_TEST_EXPECTED, SOURCES, CompileStep, Language, which

__all__ = ["JVM_OVERHEAD_MB", "JVM_THREAD_STACK_KB", "JVM_START_FLAGS", "JVM_FAST_START_FLAGS", "JAVA_GCS",
           "JVM_LOG_FLAGS", "JAVA_JUDGE_PROPERTIES", "jvm_accepts", "jvm_fast_start", "jvm_warnings_to_stderr", "java_release", "java_gc_flags", "java_main_class", "java_file_class", "MAIN_CLASS_RULES", "jvm_class_sharing",
           "SELF_TEST", "toolchain"]

JVM_OVERHEAD_MB = 256
JVM_THREAD_STACK_KB = 64 << 10  # the stack of a Java thread other than main
# The JDK's own class-data-sharing archive (lib/server/classes.jsa, shipped by the JDK packages)
# maps the ~1,400 classes every start loads instead of parsing them; ``auto`` falls back to
# loading them when the archive is missing or does not fit (``jvm_class_sharing`` says so loudly
# at start-up), never failing the run. No per-program archive: an AppCDS archive of a
# solution's few classes saves less than one JVM start costs to build it.
JVM_START_FLAGS = ("-Xshare:auto", "-XX:-UsePerfData")
# Start-up work a contest program never pays back, where the JVM accepts the flags
# (``jvm_fast_start``; another JDK may lack one, and then none is used): the archive mapped at its
# own address instead of relocated to a random one (JDK 17.0.x builds relocate by default,
# ~8 ms of CPU per start; the sandbox, not the JVM's address layout, is the isolation), and no
# stubs generated for the AES, SHA, GHASH, Base64 and CRC32/Adler32 intrinsics (~5 ms; a program
# that uses those classes runs their Java code: the same results, slower). ~10 ms of ~65 ms of
# CPU per trivial Java test (bench/bench_jvm.py).
JVM_FAST_START_FLAGS = (
    "-XX:+UnlockDiagnosticVMOptions", "-XX:ArchiveRelocationMode=0",
    "-XX:-UseAESIntrinsics", "-XX:-UseAESCTRIntrinsics", "-XX:-UseGHASHIntrinsics", "-XX:-UseSHA",
    "-XX:-UseBASE64Intrinsics", "-XX:-UseCRC32Intrinsics", "-XX:-UseCRC32CIntrinsics", "-XX:-UseAdler32Intrinsics",
)
# The JVM writes its own warnings (unified logging: a thread it could not start, a container
# limit it misreads, an archive it could not map) to stdout by default, into the program's
# answer: a right answer became a WRONG_ANSWER, whether the warning was of the program's making
# or the host's. Warnings and errors go to stderr instead, where they are feedback.
# (and the VM's own output outside unified logging, "CodeCache is full" and the like)
JVM_LOG_FLAGS = ("-Xlog:disable", "-Xlog:all=warning:stderr", "-XX:+DisplayVMOutputToStderr")
# What a contest program may ask to learn it runs on a judge: Codeforces starts Java with
# -DONLINE_JUDGE=true, DOMjudge with -DONLINE_JUDGE (C and C++ get the -DONLINE_JUDGE macro here).
# Templates read a local input.txt unless the property is set, so without it a right answer ended
# as a FileNotFoundException, a RUNTIME_ERROR on every test.
JAVA_JUDGE_PROPERTIES = ("-DONLINE_JUDGE=true",)
JAVA_GCS = {
    # DOMjudge's and Kattis's collector, the default: time limits sized on those judges hold;
    # ~25% less CPU than G1 on an allocation-heavy run (bench/bench_jvm.py)
    "serial": ("-XX:+UseSerialGC",),
    # G1 maps the archive's heap objects too (JDK 17 maps them for G1 only): the module graph
    # comes ready-made, ~15 ms of CPU less per test (~1.4x for a trivial program), for fleets
    # whose Java tests are short; with -XX:ActiveProcessorCount=1 it runs one GC thread
    "g1": ("-XX:+UseG1GC",),
}


# the worker's start-up check (sandbox/selftest.py) compiles and runs it
SELF_TEST = (
    f'public class Main {{ public static void main(String[] a) {{ System.out.println("{SELF_TEST_EXPECTED}"); }} }}\n'
)


def _java_tool(tool: str, env: Mapping[str, str]) -> str:
    home = env.get("CPFLEET_JAVA_HOME")
    if home:
        return os.path.join(home, "bin", tool)
    found = which(tool)
    return os.path.realpath(found) if os.path.isabs(found) else found


_RELEASE = re.compile(r'(?:version "|javac )(1\.)?(\d+)')


@functools.lru_cache(maxsize=8)
def java_release(tool: str) -> int:
    """The Java release (17, 25...) of a ``java`` or ``javac`` executable; 0 when it cannot be run."""
    try:
        out = subprocess.run([tool, "-version"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    m = _RELEASE.search((out.stdout + out.stderr).decode(errors="replace"))
    return int(m.group(2)) if m and out.returncode == 0 else 0


def _compiler(env: Mapping[str, str], java: str) -> tuple[str, tuple[str, ...]]:
    """The ``javac`` that compiles for the JVM at ``java``, and the flags that make its class
    files loadable there: the home's own compiler, else (a runtime without one) the PATH's,
    told to compile for the runtime's release when the runtime is the older one (its class files
    would otherwise be refused at every test, a failure of the host's making). A home with
    neither keeps its own names, which ``missing_tools`` then reports."""
    javac = _java_tool("javac", env)
    if not env.get("CPFLEET_JAVA_HOME") or os.access(javac, os.X_OK) or not os.access(java, os.X_OK):
        return javac, ()
    found = which("javac")
    javac = os.path.realpath(found) if os.path.isabs(found) else found
    runtime, compiler = java_release(java), java_release(javac)
    return javac, (("--release", str(runtime)) if 0 < runtime < compiler else ())


def _link_hops(path: str) -> list[str]:
    """``path`` and every link it leads through to a folder (``/opt/java`` -> ``current`` ->
    ``jdk-21``): each is recreated as a link in the sandbox, so every hop must be there too."""
    hops = [os.path.normpath(path)]
    while os.path.islink(hops[-1]) and len(hops) <= 40:  # the kernel's own limit on a chain of links
        hops.append(os.path.normpath(os.path.join(os.path.dirname(hops[-1]), os.readlink(hops[-1]))))
    return hops


def _sandbox_dirs(env: Mapping[str, str], tools: tuple[str, ...]) -> tuple[str, ...]:
    """The Java folders ``tools`` run from where the sandbox's system folders do not hold them:
    the configured home (every link it leads through, the folder it ends at) and the installation
    each tool's real path lies in (a home's bin/java linking into another JDK, a PATH's JDK under
    /opt or the user's home); sandboxed programs see only those, so its compiler or JVM could not
    be started there. An installation is the folder two up from the tool that holds a ``release``
    file (every JDK and runtime image has one), so a folder of wrapper scripts binds nothing."""
    from cpfleet.sandbox.isolation import SYSTEM_PATHS, within  # the sandbox's view: read at call time

    home = env.get("CPFLEET_JAVA_HOME")
    dirs = dict.fromkeys((*_link_hops(home), os.path.realpath(home)) if home and os.path.isabs(home) else ())
    for tool in tools:
        install = os.path.dirname(os.path.dirname(os.path.realpath(tool)))
        if os.path.isabs(tool) and os.path.isfile(os.path.join(install, "release")):
            dirs[install] = None
    return tuple(d for d in dirs if not within(d, SYSTEM_PATHS))


@functools.lru_cache(maxsize=16)
def jvm_accepts(java: str, flags: tuple[str, ...]) -> bool:
    """Whether the JVM at ``java`` starts with ``flags``: asked once per process, JVM and set of
    flags, so a JDK that lacks one (another vendor or version) runs without that set instead of
    failing every test before its program runs."""
    if not os.path.isabs(java) or not os.access(java, os.X_OK):
        return False
    try:
        out = subprocess.run([java, *flags, "-XX:-UsePerfData", "-version"], capture_output=True, timeout=60,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def jvm_fast_start(java: str) -> tuple[str, ...]:
    """``JVM_FAST_START_FLAGS`` where the JVM at ``java`` accepts them, else ()."""
    return JVM_FAST_START_FLAGS if jvm_accepts(java, JVM_FAST_START_FLAGS) else ()


def jvm_warnings_to_stderr(java: str) -> tuple[str, ...]:
    """``JVM_LOG_FLAGS`` where the JVM at ``java`` accepts them (JDK 9 and later), else ()."""
    return JVM_LOG_FLAGS if jvm_accepts(java, JVM_LOG_FLAGS) else ()


def java_gc_flags(env: Mapping[str, str]) -> tuple[str, ...]:
    """The collector flags of ``CPFLEET_JAVA_GC`` (``serial``, the default, or ``g1``)."""
    gc: str = envvars.read("CPFLEET_JAVA_GC", "serial", env)
    return JAVA_GCS[gc]


# the modifiers may stand in any order (``final public class``, ``public abstract sealed class``):
# after ``public`` come the ones a top-level type may also have, then its kind
_JAVA_PUBLIC = re.compile(r"\bpublic\s+(?:(?:final|abstract|strictfp|sealed|non-sealed)\s+)*(?:class|interface|enum|record)\s+((?:[^\W\d]|\$)[\w$]*)")
_JAVA_CLASS = re.compile(r"\b(?:class|interface|enum|record)\s+((?:[^\W\d]|\$)[\w$]*)")
# a method named ``main`` returning void: group 1 is everything declared before ``void`` since the
# last ``;``, ``{``, ``}`` or ``)`` (its modifiers in any order, ``synchronized`` and ``strictfp``
# included, its annotations and type parameters), which ``_declares_static`` reads. A match starts
# only right after one of those characters and its group 1 never runs past the next, so the source
# is read once however many modifiers or ``void main(`` it holds. (An annotation's arguments hold a
# ``)``: what follows it starts a match of its own.)
_JAVA_MAIN = re.compile(r"(?:\A|(?<=[;{})]))([^;{}()]*?)\bvoid\s+main\s*\(")
_JAVA_WORD = re.compile(r"[\w$@.]+")
# what is not code: a text block, a string or char literal, a comment, matched left to right as
# javac's scanner reads them (a "//" or "/*" inside a string opens no comment, and a "public class"
# or "package" line inside a literal or a comment declares nothing); one left open runs to the end of
# its line (a literal) or of the source (a comment, a text block), as javac reads it, so every
# opening matches and the source is read once, not once per opening. A text block's ``\"""`` is
# an escaped quote followed by two more, not its end.
_JAVA_NOT_CODE = re.compile(r'"""(?:[^"\\]|\\[\s\S]?|"(?!""))*(?:"""|\Z)|"(?:[^"\\\n]|\\.?)*(?:"|$)'
                            r'|\'(?:[^\'\\\n]|\\.?)*(?:\'|$)|//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)', re.M)
# javac reads a Unicode escape (a backslash, one or more u, four hex digits) as its character
# before anything else (JLS 3.3): ``\u0022`` opens a string, ``\u000a`` ends a // comment, and
# ``\u00c4rger`` names Ärger. A backslash starts one only after an even number of backslashes, so
# each run of them is matched whole (and read once).
_JAVA_UNICODE_ESCAPE = re.compile(r"(\\+)(?:u+([0-9a-fA-F]{4}))?")
# a line's leading blanks only: ``^\s*`` would read on across every blank line after each line start
# (time quadratic in a source of empty lines)
_JAVA_PACKAGE = re.compile(r"^[ \t\f\v\r]*package\s+([\w.]+)\s*;", re.M)


# The version of ``java_main_class``'s reading (part of the Java fingerprint, so results a result
# cache holds from another reading are not served): 2 reads literals and comments as javac does
# and class names past ASCII, 3 Unicode escapes, a text block's escaped quotes and top-level
# classes only, 4 the class that declares ``main`` before a public class that does not, and
# sealed and non-sealed public classes, 5 a ``main`` whose modifiers stand in any order, with
# ``synchronized``, ``strictfp``, type parameters or annotations among them.
MAIN_CLASS_RULES = 5


def _unicode_escapes(source: str) -> str:
    """``source`` with its Unicode escapes read as javac reads them (``_JAVA_UNICODE_ESCAPE``); a
    surrogate pair written as two escapes is one character, as it is to javac."""
    if "\\u" not in source:
        return source

    def one(m: re.Match[str]) -> str:
        run, code = m.group(1), m.group(2)
        return m.group() if code is None or len(run) % 2 == 0 else run[:-1] + chr(int(code, 16))

    text = _JAVA_UNICODE_ESCAPE.sub(one, source)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _at_depth(text: str, found: Iterator[re.Match[str]], depth: int) -> Iterator[re.Match[str]]:
    """The matches of ``found`` inside exactly ``depth`` braces of ``text`` (its literals and
    comments already blanked): at 0 the top-level classes (a class nested in another, ``static
    class Node`` declared before ``main`` in a non-public ``class Main``, is not one ``java`` can
    start by its name), at 1 a top-level class's own methods. Each stretch of ``text`` is counted
    once."""
    level, at = 0, 0
    for m in found:
        level += text.count("{", at, m.start()) - text.count("}", at, m.start())
        at = m.start()
        if level == depth or (depth == 0 and level < 0):
            yield m


def _declares_static(modifiers: str) -> bool:
    """Whether the words before a method's ``void`` make it ``static`` (the JVM starts no other
    ``main``); an annotation such as ``@static`` is not the modifier."""
    return "static" in _JAVA_WORD.findall(modifiers)


def _read_classes(source: str) -> tuple[str | None, list[str], list[str], str]:
    """What names a Java source's classes: its public top-level class (None without one), its
    top-level classes in order, the top-level classes whose bodies declare ``static void main``
    (in order, a class once per main) and its package ('' without one)."""
    text = _JAVA_NOT_CODE.sub(lambda m: '""' if m.group().startswith(('"', "'")) else " ", _unicode_escapes(source))
    classes = list(_at_depth(text, _JAVA_CLASS.finditer(text), 0))
    public = next(_at_depth(text, _JAVA_PUBLIC.finditer(text), 0), None)
    starts = [c.start() for c in classes]
    owners = [classes[i - 1].group(1) for m in _at_depth(text, _JAVA_MAIN.finditer(text), 1)
              if _declares_static(m.group(1)) and (i := bisect.bisect_right(starts, m.start())) > 0]
    pkg = _JAVA_PACKAGE.search(text)
    return public.group(1) if public else None, [c.group(1) for c in classes], owners, pkg.group(1) if pkg else ""


def java_main_class(source: str) -> str:
    """The class a Java solution is started by: the top-level class whose body declares
    ``static void main``, the public one first when several do, else its public class, else its
    last top-level class (a package-qualified name when it declares a package). A public class
    without ``main`` beside a ``class Main`` that has it compiles, and only ``Main`` can start."""
    public, classes, owners, pkg = _read_classes(source)
    if public and (public in owners or not owners):
        name = public
    else:
        name = owners[0] if owners else classes[-1] if classes else "Main"
    return f"{pkg}.{name}" if pkg else name


def java_file_class(source: str) -> str:
    """The class a single-file Java solution's file is named after: javac wants a public class in
    a file of its name, whichever class holds ``main``."""
    public, _, _, pkg = _read_classes(source)
    return (f"{pkg}.{public}" if pkg else public) if public else java_main_class(source)


def jvm_class_sharing(run_argv: tuple[str, ...] | None = None) -> str:
    """'' when the JVM of ``run_argv`` (default: the table's Java run line) maps its class-data
    sharing archive, else why not (the JVM's own words). Asked once with ``-Xshare:on``, which
    fails where ``-Xshare:auto`` silently starts without the archive: a worker whose JDK lost
    or corrupted it still judges correctly, only slower, and its start-up line says so."""
    if run_argv is None:
        from cpfleet.sandbox.languages import get  # the registry imports this module: read it at call time

        run_argv = get("java").run_argv
    flags = [a.replace("{mem}", "256").replace("{stack}", "256") for a in run_argv[1:]
             if a.startswith("-X") and not a.startswith("-Xshare")]
    try:
        out = subprocess.run([run_argv[0], *flags, "-Xshare:on", "-version"], capture_output=True, timeout=60,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run {run_argv[0]}: {e}"
    if out.returncode == 0:
        return ""
    said = (out.stdout + out.stderr).decode(errors="replace").split("\n")
    return " ".join(line.strip() for line in said if line.strip())[:300] or f"exit status {out.returncode}"


def _class_sharing_warning(lang: Language) -> str:
    why = jvm_class_sharing(lang.run_argv)
    return f"no class-data sharing, each test starts ~2x slower: {why}" if why else ""


def toolchain(env: Mapping[str, str]) -> Language:
    java = _java_tool("java", env)
    javac, release = _compiler(env, java)
    fast = jvm_fast_start(java)
    # javac runs its own JDK's JVM: the same one, or (under a JRE's home) the PATH JDK's
    compile_fast = fast if javac == _java_tool("javac", env) else jvm_fast_start(os.path.join(os.path.dirname(javac), "java"))
    return Language(
        "java", "Main.java",
        CompileStep((javac, "-J-Xmx768m", "-J-XX:+UseSerialGC", "-J-XX:-UsePerfData", "-J-Xss64m",
                     *(f"-J{flag}" for flag in compile_fast),
                     "-J-XX:TieredStopAtLevel=1", *release, "-encoding", "UTF-8", "-nowarn", "-d", "out",
                     SOURCES), (javac, "-version")),
        (java, "-Xmx{mem}m", "-Xss{stack}m", f"-XX:ThreadStackSize={JVM_THREAD_STACK_KB}", *java_gc_flags(env),
         *JVM_START_FLAGS, *jvm_warnings_to_stderr(java), *fast, "-XX:CICompilerCount=2", "-XX:ActiveProcessorCount=1", "-Dfile.encoding=UTF-8",
         *JAVA_JUDGE_PROPERTIES, "-cp", PROG_DIR, "{main}"),
        "cgroup", extra_cgroup_mb=JVM_OVERHEAD_MB, tools=(javac, java), compile_memory_model="cgroup",
        oom_markers=(b"java.lang.OutOfMemoryError",), main_class=java_main_class, file_class=java_file_class,
        main_class_rules=MAIN_CLASS_RULES, start_warning=_class_sharing_warning,
        sandbox_dirs=_sandbox_dirs(env, (javac, java)),
    )
