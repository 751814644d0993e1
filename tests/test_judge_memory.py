"""`cpfleet judge`'s memory is bounded by the output cap whatever the output's shape: a program
printing ~60 MiB as numeric lines, as one line of short tokens (between spaces, tabs, carriage
returns or vertical tabs), as one token or as binary bytes keeps the whole judge process tree
(judge, zygote, job init, program) under 600 MB.

Memory is not timing: the peak RSS of the tree is sampled from /proc while the command runs,
and the bound is the goal of bench/bench_judge_memory.py (a line of 'ab ' tokens took the
tree to ~1.6 GB when the checker split a whole line at once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

GOAL_BYTES = 600 * 1000 * 1000
PIECES = {  # each program writes 60 pieces of 1 MiB: its own memory stays small
    "lines": "'123456789\\n' * 104857",
    "line": "'ab ' * 349525",
    # one line of short tokens between tabs, carriage returns or vertical tabs: separators of
    # every tokeniser, which a block must end at as it ends at a space
    "tabs": "'ab\\t' * 349525",
    "returns": "'ab\\r' * 349525",
    "vtabs": "'ab\\x0b' * 349525",
    "word": "'x' * 1048576",
    "binary": "__import__('random').Random(1).randbytes(1048576)",
}


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _tree_rss(root: int) -> int:
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += _rss(pid)
        todo += _children(pid)
    return total


@pytest.mark.timeout(300)
@pytest.mark.parametrize("shape", sorted(PIECES))
def test_judge_tree_memory_is_bounded_for_every_output_shape(tmp_path: Path, shape: str) -> None:
    tests = [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(1)]
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "mem", "public_tests": tests, "hidden_tests": tests[:1],
                                    "time_limit_s": 20}) + "\n")
    out = "sys.stdout.buffer" if shape == "binary" else "sys.stdout"
    code = f"import sys\npiece = {PIECES[shape]}\nfor _ in range(60):\n    {out}.write(piece)\n"
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"problem_id": "mem", "completion": f"```python\n{code}```\n"}) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "cpfleet", "judge", str(problems), str(jobs),
                             "--workers", "1", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            done.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate(timeout=280)
    done.set()
    sampler.join()
    assert proc.returncode == 0, stderr.decode(errors="replace")[-2000:]
    result = json.loads(stdout)
    assert result["verdict"] == "WRONG_ANSWER" and result["reward"] == 0.0
    assert result["public"]["run"] == 1 and result["public"]["passed"] == 0
    assert peak > 60 << 20  # the sampler saw the output being held
    assert peak < GOAL_BYTES, f"judge tree peaked at {peak / 1e6:.0f} MB on a {shape} output"
