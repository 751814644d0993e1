"""Peak memory of judging one job whose public tests each print a lot: ``cpfleet judge --workers 1``.

The case: a problem with ``--tests`` public tests (and one hidden test), judged against a
program that prints ``--mib`` MiB on every test (a wrong answer, so the checker reads all of
it), in each output shape (``--shape``, default all of them): ``lines`` (short numeric lines),
``line`` (one line of short tokens, ``'ab ' * n``), ``word`` (one token, no whitespace) and
``binary`` (random bytes, mostly invalid UTF-8). The judge must keep only what the checker and
the clipped feedback need, so its memory is O(output cap), not O(tests x cap) nor O(tokens).

Measured: the peak of the summed RSS of the whole ``cpfleet judge`` process tree (the judge,
its zygote, the job init and the test program), sampled every few milliseconds, for that job
and, in the same run, for the baseline: the same command on the same tests with a program that
prints one line. Goal: the whole tree under 600 MB in every shape.
Not a test: no assertions.

    .venv/bin/python bench/bench_judge_memory.py [--tests 5] [--mib 60] [--shape line]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

GOAL_MB = 600.0
LINE = "123456789\n"


# Each shape writes 1 MiB pieces so the program's own memory stays small: the tree's peak is
# the judge's. The expression builds one piece.
SHAPES = {
    "lines": f"{LINE!r} * ({1 << 20} // {len(LINE)})",
    "line": f"'ab ' * ({1 << 20} // 3)",
    "word": f"'x' * {1 << 20}",
    "binary": f"__import__('random').Random(1).randbytes({1 << 20})",
}


def _flood(mib: int, shape: str) -> str:
    binary = shape == "binary"
    code = (
        "import sys\n"
        f"piece = {SHAPES[shape]}\n"
        f"out = sys.stdout{'.buffer' if binary else ''}\n"
        f"for _ in range({mib}):\n"
        "    out.write(piece)\n"
    )
    return f"```python\n{code}```\n"


TRIVIAL = "```python\nprint(1)\n```\n"


def _tree_rss(root: psutil.Process) -> int:
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def measure(problems: Path, completion: str, workdir: Path) -> tuple[int, str]:
    """Peak tree RSS (bytes) of one ``cpfleet judge --workers 1`` run, and its one result line."""
    jobs = workdir / "jobs.jsonl"
    jobs.write_text(json.dumps({"problem_id": "mem", "completion": completion}) + "\n")
    cmd = [sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs), "--workers", "1", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    root = psutil.Process(proc.pid)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(root))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"cpfleet judge failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    return peak, out.decode().strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=5, help="public tests, each printing --mib MiB")
    ap.add_argument("--mib", type=int, default=60, help="MiB printed per test (the stdout cap is 64)")
    ap.add_argument("--shape", choices=sorted(SHAPES), action="append",
                    help="output shape(s) to measure (default: all)")
    ap.add_argument("--checker", default="tokens", help="the problem's checker type (default tokens)")
    args = ap.parse_args()
    shapes = args.shape or list(SHAPES)
    mb = 1e6
    with tempfile.TemporaryDirectory(prefix="cpfleet-bench-mem-") as tmp:
        workdir = Path(tmp)
        problems = workdir / "problems.jsonl"
        tests = [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(args.tests)]
        record = {"id": "mem", "public_tests": tests, "hidden_tests": tests[:1], "time_limit_s": 20,
                  "checker": {"type": args.checker}}
        problems.write_text(json.dumps(record) + "\n")
        base, _ = measure(problems, TRIVIAL, workdir)
        print(f"peak RSS of the judge process tree, {args.checker} checker: baseline (trivial program) "
              f"{base / mb:.0f} MB (goal: every shape < {GOAL_MB:.0f} MB)")
        for shape in shapes:
            peak, line = measure(problems, _flood(args.mib, shape), workdir)
            result = json.loads(line)
            print(f"  {shape:7s}: {args.tests} public tests x {args.mib} MiB of stdout each -> "
                  f"{result['verdict']}, public {result['public']['passed']}/{result['public']['total']} "
                  f"run {result['public']['run']}: peak {peak / mb:.0f} MB, "
                  f"{peak / base:.1f}x the baseline, difference {(peak - base) / mb:.0f} MB")


if __name__ == "__main__":
    main()
