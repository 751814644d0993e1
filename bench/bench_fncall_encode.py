"""What the function-call harness's typed encoding costs a test child, against ``json.dumps``.

    .venv/bin/python bench/bench_fncall_encode.py [--size 100000] [--rounds 5]

The harness (sandbox/callharness.py ``_encode``) writes a returned value as typed JSON so that
tuples, sets and non-string dict keys keep their types; the baseline, measured in the same run
on the same values, is plain ``json.dumps``, which loses them (what the harness wrote before).
The child pays the encoding inside the program's time limit, so the ratio is what a large
return value costs a correct solution. Best of ``--rounds``; one line per value shape.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpfleet.core.fncall import decode_returned
from cpfleet.sandbox.callharness import _encode


def shapes(n: int) -> dict[str, Any]:
    return {
        f"{n} ints": list(range(n)),
        f"{n} strings": [str(i) for i in range(n)],
        f"{n // 2} [int, int] lists": [[i, i + 1] for i in range(n // 2)],
        f"{n // 2} {{str: int}} dicts": [{"k": i} for i in range(n // 2)],
        f"{n // 2} (int, int) tuples": [(i, i + 1) for i in range(n // 2)],
        f"{{int: int}} of {n}": {i: i for i in range(n)},
    }


def best(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(f"{'value':32} {'json.dumps':>11} {'typed':>9} {'ratio':>6}")
    exact = True
    for name, value in shapes(args.size).items():
        base = best(lambda v=value: json.dumps(v), args.rounds)
        typed = best(lambda v=value: _encode(v), args.rounds)
        back = decode_returned(_encode(value))
        exact = exact and back == value and type(back) is type(value)
        print(f"{name:32} {base * 1000:9.1f}ms {typed * 1000:7.1f}ms {typed / base:5.2f}x")
    print(f"typed round trip exact: {exact}")
    if not exact:
        raise SystemExit("a value did not come back as it was")


if __name__ == "__main__":
    main()
