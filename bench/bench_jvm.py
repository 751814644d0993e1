"""Java per-test start: the baseline JVM run line (Serial) against today's (Serial, the default)
and CPFLEET_JAVA_GC=g1's, same run.

A trivial Java program (prints one line) and a+b (reads two numbers with a Scanner, the
usual contest idiom) are compiled once through the real compile path, then each test is one
``runner.run`` of the forkserver runner with full isolation (pid namespace, seccomp, cgroup,
uid drop, fresh tmpfs), the baseline argv and the current table's two argvs taking turns test
by test (the order rotated) so load drifts hit all alike. ``--java-home DIR`` adds another
JVM (a newer JDK or JRE, as ``CPFLEET_JAVA_HOME``) to the same rotation, against the same baseline. Prints the median wall and CPU (the child's, as the runner
accounts it) per test and the ratios. Goal: >= 2x faster per test. Not a test: no assertions
beyond the outputs being right.

    nice .venv/bin/python bench/bench_jvm.py [--tests 40] [--java-home DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import tempfile
import time

from cpfleet.sandbox import languages, programs
from cpfleet.sandbox.languages import PROG_DIR
from cpfleet.sandbox.languages.java import JVM_THREAD_STACK_KB
from cpfleet.sandbox.runner import Limits, make_runner

TRIVIAL = 'public class Main { public static void main(String[] a) { System.out.println("hi"); } }\n'
APLUSB = """import java.util.*;
public class Main { public static void main(String[] a) {
  Scanner s = new Scanner(System.in); long x = s.nextLong(), y = s.nextLong(); System.out.println(x + y); } }
"""
# the price side: an allocation-heavy run (sorts, a TreeMap, many short-lived arrays), where the
# collector's own CPU shows
HEAVY = """import java.util.*;
public class Main { public static void main(String[] a) {
  long s = 0; for (int r = 0; r < 30; r++) { int n = 200000; long[] v = new long[n];
    for (int i = 0; i < n; i++) v[i] = (i * 2654435761L) % 1000003; Arrays.sort(v); for (long x : v) s += x; }
  TreeMap<Integer, Integer> m = new TreeMap<>(); for (int i = 0; i < 1000000; i++) m.merge(i * 7919 % 100003, 1, Integer::sum);
  ArrayList<int[]> l = new ArrayList<>(); for (int i = 0; i < 2000000; i++) { l.add(new int[]{i, i}); if (l.size() > 100000) l.clear(); }
  System.out.println(s + " " + m.size()); } }
"""


def baseline_argv(java: str) -> tuple[str, ...]:
    """The run line before the start-up work (the baseline), with {main} = Main."""
    return (java, "-Xmx{mem}m", "-Xss{stack}m", f"-XX:ThreadStackSize={JVM_THREAD_STACK_KB}", "-XX:+UseSerialGC",
            "-XX:-UsePerfData", "-XX:CICompilerCount=2", "-XX:ActiveProcessorCount=1", "-Dfile.encoding=UTF-8",
            "-cp", PROG_DIR, "Main")


def _run_argv(gc: str, home: str | None) -> tuple[str, ...]:
    env = {k: v for k, v in os.environ.items() if k != "CPFLEET_JAVA_HOME"}
    env["CPFLEET_JAVA_GC"] = gc
    if home:
        env["CPFLEET_JAVA_HOME"] = home
    return languages.build_table(env)["java"].run_argv_for("Main")


ROWS = {"serial": "today's default (Serial)", "g1": "CPFLEET_JAVA_GC=g1", "home": "--java-home (Serial)",
        "home-g1": "--java-home, g1"}


def bench(name: str, source: str, stdin: bytes, want: bytes, tests: int, home: str | None) -> None:
    with make_runner("forkserver") as runner:
        built = programs.compile_program(runner, "java", {"Main.java": source}, ["Main.java"],
                                         cache=programs.CompileCache(tempfile.mkdtemp(prefix="cpfleet-bench-")))
        assert built.ok and built.image is not None, built.diagnostics
        path_java = languages.build_table({k: v for k, v in os.environ.items() if k != "CPFLEET_JAVA_HOME"})
        images = {
            "baseline": dataclasses.replace(built.image, argv=baseline_argv(path_java["java"].run_argv[0])),
            "serial": dataclasses.replace(built.image, argv=_run_argv("serial", None)),
            "g1": dataclasses.replace(built.image, argv=_run_argv("g1", None)),
        }
        if home:
            images["home"] = dataclasses.replace(built.image, argv=_run_argv("serial", home))
            images["home-g1"] = dataclasses.replace(built.image, argv=_run_argv("g1", home))
        limits = Limits(time_s=20, memory_mb=256)
        wall: dict[str, list[float]] = {k: [] for k in images}
        cpu: dict[str, list[float]] = {k: [] for k in images}
        order = list(images)
        for i in range(tests + 2):
            for which in order[i % len(order):] + order[: i % len(order)]:
                runner.load_program(images[which])
                t0 = time.perf_counter()
                rr = runner.run(stdin, limits)
                dt = time.perf_counter() - t0
                assert rr.stdout == want, (which, rr)
                if i >= 2:  # the first two rounds warm the page cache
                    wall[which].append(dt)
                    cpu[which].append(rr.cpu_s)
    mw = {k: statistics.median(v) * 1000 for k, v in wall.items()}
    mc = {k: statistics.median(v) * 1000 for k, v in cpu.items()}
    print(f"{name}: {tests} isolated tests each, median per test")
    print(f"  baseline flags           wall {mw['baseline']:7.1f} ms   cpu {mc['baseline']:7.1f} ms")
    for which in images:
        if which == "baseline":
            continue
        label = ROWS[which]
        print(f"  {label:24s} wall {mw[which]:7.1f} ms   cpu {mc[which]:7.1f} ms   speedup: wall "
              f"{mw['baseline'] / mw[which]:5.2f}x, cpu {mc['baseline'] / mc[which]:5.2f}x  (goal >= 2x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=40)
    parser.add_argument("--heavy-tests", type=int, default=4, help="0 skips the allocation-heavy run")
    parser.add_argument("--java-home", help="another JVM to measure in the same rotation (a JDK or JRE folder)")
    args = parser.parse_args()
    if args.tests < 1 or args.heavy_tests < 0:
        parser.error("--tests must be at least 1 and --heavy-tests at least 0")
    home = os.path.abspath(args.java_home) if args.java_home else None
    if home:
        if not os.access(os.path.join(home, "bin", "java"), os.X_OK):
            parser.error(f"--java-home {home}: no bin/java there")
        # this process's zygotes show that JVM to the sandbox (the table's sandbox_dirs); the
        # other rows name the PATH's JVM explicitly
        os.environ["CPFLEET_JAVA_HOME"] = home
        print("--java-home:", subprocess.run([os.path.join(home, "bin", "java"), "-version"], capture_output=True,
                                             text=True, check=False).stderr.splitlines()[0])
    print("this worker's run argv:", " ".join(languages.get("java").run_argv))
    print("measured: baseline (Serial, before) vs today's default and CPFLEET_JAVA_GC=g1 (the archive mapped whole)")
    bench("trivial", TRIVIAL, b"", b"hi\n", args.tests, home)
    bench("a+b", APLUSB, b"3 4\n", b"7\n", args.tests, home)
    if args.heavy_tests:
        bench("allocation-heavy (the collector's price)", HEAVY, b"", b"3000019960320 200005\n", args.heavy_tests,
              home)


if __name__ == "__main__":
    main()
