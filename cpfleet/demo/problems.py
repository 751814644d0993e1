"""The demo's own problem set: a dozen classic problems with generated tests.

Why the project writes its own: ``cpfleet demo`` must run on a fresh machine with no dataset
download, and its completions must cover every verdict on purpose. Each problem has a
reference solution, an independent in-process oracle that computes the expected outputs (so a
bug in one shows up as a disagreement in the tests), a subtly *wrong* solution (fails a test
with WRONG_ANSWER), a *slow* one (right answers, wrong complexity: passes the small public
tests, hits the time limit on a large hidden one), and the broken completions a model produces
(a syntax error, a runtime error, no code at all).

Tests are generated from a fixed seed, so the set is the same everywhere; the shipped copy
``cpfleet/demo/data/demo-problems.jsonl.gz`` is this module's output (``python -m
cpfleet.demo.problems --write``), and a test checks that it has not drifted.

Over 500 lines because most of it is data: each problem's statement, generator, oracle and
solutions, kept together so a problem reads as one unit.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import io
import json
import math
import random
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cpfleet.argtypes import output_file
from cpfleet.core.problem import Problem, TestCase
from cpfleet.core.verdict import Verdict

SEED = 20260101
TIME_LIMIT_S = 1.0  # small on purpose: slow completions cost one time limit of CPU each
MEMORY_LIMIT_MB = 256
SHIPPED = "demo-problems.jsonl.gz"
# The package's own folder, from this file: importlib.resources.files("cpfleet") would resolve
# "cpfleet" again, and a directory of that name next to the user's script (a checkout named
# cpfleet) turns it into a namespace package whose MultiplexedPath points into the wrong tree.
_HERE = Path(__file__).resolve().parent

# completion kind -> the job verdict it must get
KINDS: dict[str, Verdict] = {
    "correct": Verdict.OK,
    "wrong": Verdict.WRONG_ANSWER,
    "slow": Verdict.TIME_LIMIT,
    "syntax_error": Verdict.COMPILE_ERROR,
    "runtime_error": Verdict.RUNTIME_ERROR,
    "no_code": Verdict.NO_CODE,
}


@dataclass(frozen=True)
class Spec:
    """One problem before its tests are generated."""

    name: str
    title: str
    statement: str
    gen: Callable[[random.Random, str], str]  # (rng, size: tiny|small|medium|large) -> input
    oracle: Callable[[str], str]  # input -> expected output
    reference: str  # the files in solutions/ (real Python files, so ruff and mypy check them)
    wrong: str
    slow: str


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split()]


def _arr(rng: random.Random, n: int, lo: int, hi: int) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _line(xs: list[int]) -> str:
    return " ".join(map(str, xs))


SIZES = {"tiny": 5, "small": 50, "medium": 2000, "large": 20000}


# ---- 1. a + b ----------------------------------------------------------------------------


def _gen_ab(rng: random.Random, size: str) -> str:
    hi = {"tiny": 20, "small": 10**6, "medium": 10**12, "large": 10**18}[size]
    return f"{rng.randint(0, hi)} {rng.randint(hi // 2, hi)}\n"


def _oracle_ab(inp: str) -> str:
    a, b = _ints(inp)
    return f"{a + b}\n"


# ---- 2. sum of an array -------------------------------------------------------------------


def _gen_sum(rng: random.Random, size: str) -> str:
    n = SIZES[size]
    return f"{n}\n{_line(_arr(rng, n, -10**9, 10**9))}\n"


def _oracle_sum(inp: str) -> str:
    xs = _ints(inp)
    return f"{sum(xs[1 : 1 + xs[0]])}\n"


# ---- 3. maximum subarray ------------------------------------------------------------------


def _gen_maxsub(rng: random.Random, size: str) -> str:
    n = SIZES[size]
    if size == "tiny":  # all negative: the classic trap
        return f"{n}\n{_line(_arr(rng, n, -100, -1))}\n"
    return f"{n}\n{_line(_arr(rng, n, -10**6, 10**6))}\n"


def _oracle_maxsub(inp: str) -> str:
    xs = _ints(inp)
    a = xs[1 : 1 + xs[0]]
    best = cur = a[0]
    for x in a[1:]:
        cur = max(x, cur + x)
        best = max(best, cur)
    return f"{best}\n"


# ---- 4. Fibonacci modulo 1e9+7 ------------------------------------------------------------

MOD = 10**9 + 7


def _gen_fib(rng: random.Random, size: str) -> str:
    hi = {"tiny": 30, "small": 1000, "medium": 10**9, "large": 10**18}[size]
    return f"{rng.randint(hi // 2, hi)}\n"


def _oracle_fib(inp: str) -> str:
    n = int(inp)

    def mat_mult(x: list[list[int]], y: list[list[int]]) -> list[list[int]]:
        return [
            [(x[0][0] * y[0][0] + x[0][1] * y[1][0]) % MOD, (x[0][0] * y[0][1] + x[0][1] * y[1][1]) % MOD],
            [(x[1][0] * y[0][0] + x[1][1] * y[1][0]) % MOD, (x[1][0] * y[0][1] + x[1][1] * y[1][1]) % MOD],
        ]

    result, base = [[1, 0], [0, 1]], [[1, 1], [1, 0]]
    while n:
        if n & 1:
            result = mat_mult(result, base)
        base = mat_mult(base, base)
        n >>= 1
    return f"{result[0][1]}\n"


# ---- 5. sorting ---------------------------------------------------------------------------


def _gen_sort(rng: random.Random, size: str) -> str:
    n = SIZES[size]
    return f"{n}\n{_line(_arr(rng, n, -10**6, 10**6))}\n"


def _oracle_sort(inp: str) -> str:
    xs = _ints(inp)
    return _line(sorted(xs[1 : 1 + xs[0]])) + "\n"


# ---- 6. counting primes -------------------------------------------------------------------


def _gen_primes(rng: random.Random, size: str) -> str:
    if size == "tiny":
        return f"{rng.choice([2, 3, 5, 7, 11, 13, 17, 19, 23, 29])}\n"  # n prime: the <= trap
    hi = {"small": 1000, "medium": 10**5, "large": 3 * 10**6}[size]
    return f"{rng.randint(hi // 2, hi)}\n"


def _oracle_primes(inp: str) -> str:
    n = int(inp)
    return f"{sum(1 for k in range(2, n + 1) if _is_prime(k))}\n" if n < 10**5 else f"{_sieve_count(n)}\n"


def _is_prime(k: int) -> bool:
    return k >= 2 and all(k % d for d in range(2, math.isqrt(k) + 1))


def _sieve_count(n: int) -> int:
    flags = [True] * (n + 1)
    flags[0] = flags[1] = False
    for p in range(2, math.isqrt(n) + 1):
        if flags[p]:
            for m in range(p * p, n + 1, p):
                flags[m] = False
    return sum(flags)


# ---- 7. bracket matching ------------------------------------------------------------------

_PAIRS = {")": "(", "]": "[", "}": "{"}


def _balanced(rng: random.Random, n_pairs: int) -> str:
    out: list[str] = []
    stack: list[str] = []
    opens = n_pairs
    while opens or stack:
        if opens and (not stack or rng.random() < 0.5):
            c = rng.choice("([{")
            stack.append(c)
            out.append(c)
            opens -= 1
        else:
            out.append({"(": ")", "[": "]", "{": "}"}[stack.pop()])
    return "".join(out)


def _gen_brackets(rng: random.Random, size: str) -> str:
    if size == "large":  # one deep nesting: 50,000 levels
        return "1\n" + "(" * 50000 + ")" * 50000 + "\n"
    t = {"tiny": 6, "small": 20, "medium": 50}[size]
    length = {"tiny": 3, "small": 10, "medium": 200}[size]
    lines = []
    for _ in range(t):
        s = _balanced(rng, rng.randint(1, length))
        kind = rng.randrange(4)
        if kind == 1:  # same counts, wrong types: ([)]-style
            s = s.replace("]", ")", 1) if "]" in s else s + "]"
        elif kind == 2:  # right types, wrong order
            s = s[::-1]
        elif kind == 3:  # a stray closer
            s = s + ")"
        lines.append(s)
    return f"{t}\n" + "\n".join(lines) + "\n"


def _oracle_brackets(inp: str) -> str:
    lines = inp.split("\n")
    out = []
    for s in lines[1 : 1 + int(lines[0])]:
        stack: list[str] = []
        ok = True
        for c in s.strip():
            if c in "([{":
                stack.append(c)
            elif not stack or stack.pop() != _PAIRS[c]:
                ok = False
                break
        out.append("YES" if ok and not stack else "NO")
    return "\n".join(out) + "\n"


# ---- 8. gcd and lcm -----------------------------------------------------------------------


def _gen_gcd(rng: random.Random, size: str) -> str:
    if size == "large":  # subtraction-based gcd needs ~10^12 steps on (10^12, 1)
        return f"2\n{10**12} 1\n{10**12 - 11} 3\n"
    t = {"tiny": 3, "small": 10, "medium": 200}[size]
    hi = {"tiny": 50, "small": 10**4, "medium": 10**9}[size]
    pairs = []
    for _ in range(t):
        g = rng.randint(1, 30)
        pairs.append(f"{g * rng.randint(1, hi)} {g * rng.randint(1, hi)}")
    return f"{t}\n" + "\n".join(pairs) + "\n"


def _oracle_gcd(inp: str) -> str:
    xs = _ints(inp)
    out = []
    for i in range(xs[0]):
        a, b = xs[1 + 2 * i], xs[2 + 2 * i]
        g = math.gcd(a, b)
        out.append(f"{g} {a // g * b}")
    return "\n".join(out) + "\n"


# ---- 9. binary search: how many elements are <= x ------------------------------------------


def _gen_bsearch(rng: random.Random, size: str) -> str:
    n = SIZES[size]
    a = sorted(_arr(rng, n, 0, max(3, n // 2)))  # many duplicates: the bisect_left trap
    qs = [rng.randint(-1, max(3, n // 2) + 1) for _ in range(n)]
    return f"{n} {n}\n{_line(a)}\n{_line(qs)}\n"


def _oracle_bsearch(inp: str) -> str:
    xs = _ints(inp)
    n, q = xs[0], xs[1]
    a = xs[2 : 2 + n]
    return "\n".join(str(bisect.bisect_right(a, x)) for x in xs[2 + n : 2 + n + q]) + "\n"


# ---- 10. longest strictly increasing subsequence -------------------------------------------


def _gen_lis(rng: random.Random, size: str) -> str:
    n = SIZES[size]
    return f"{n}\n{_line(_arr(rng, n, 1, max(5, n // 4)))}\n"


def _oracle_lis(inp: str) -> str:
    xs = _ints(inp)
    a = xs[1 : 1 + xs[0]]
    best = [1] * len(a) if len(a) <= 2000 else None
    if best is not None:  # O(n^2) DP for small inputs: independent of the reference's method
        for i in range(len(a)):
            for j in range(i):
                if a[j] < a[i] and best[j] + 1 > best[i]:
                    best[i] = best[j] + 1
        return f"{max(best)}\n"
    tails: list[int] = []
    for x in a:
        k = bisect.bisect_left(tails, x)
        tails[k : k + 1] = [x]
    return f"{len(tails)}\n"


# ---- 11. 0/1 knapsack (small) -------------------------------------------------------------


def _gen_knap(rng: random.Random, size: str) -> str:
    n = {"tiny": 4, "small": 10, "medium": 40, "large": 60}[size]
    cap = {"tiny": 10, "small": 100, "medium": 2000, "large": 5000}[size]
    items = [(rng.randint(1, cap // 2), rng.randint(1, 1000)) for _ in range(n)]
    body = "\n".join(f"{w} {v}" for w, v in items)
    return f"{n} {cap}\n{body}\n"


def _oracle_knap(inp: str) -> str:
    xs = _ints(inp)
    n, cap = xs[0], xs[1]
    best = {0: 0}  # weight -> best value: a sparse DP, not the reference's dense array
    for i in range(n):
        w, v = xs[2 + 2 * i], xs[3 + 2 * i]
        for used, val in list(best.items()):
            if used + w <= cap and best.get(used + w, -1) < val + v:
                best[used + w] = val + v
    return f"{max(best.values())}\n"


# ---- 12. palindromes ----------------------------------------------------------------------


def _gen_pal(rng: random.Random, size: str) -> str:
    if size == "large":
        return "1\n" + "a" * 100000 + "\n"
    t = {"tiny": 4, "small": 10, "medium": 40}[size]
    length = {"tiny": 5, "small": 20, "medium": 500}[size]
    lines = []
    for i in range(t):
        half = "".join(rng.choice("ab") for _ in range(rng.randint(1, length)))
        mid = rng.choice(["", "c"])  # odd lengths: the half-split trap
        s = half + mid + half[::-1]
        if i % 2:
            s = s[:-1] + ("b" if s[-1] == "a" else "a")
        lines.append(s)
    return f"{t}\n" + "\n".join(lines) + "\n"


def _oracle_pal(inp: str) -> str:
    lines = inp.split("\n")
    out = []
    for s in lines[1 : 1 + int(lines[0])]:
        i, j = 0, len(s) - 1
        while i < j and s[i] == s[j]:
            i, j = i + 1, j - 1
        out.append("YES" if i >= j else "NO")
    return "\n".join(out) + "\n"


# ---- the specs: statements and the three solutions of each ----------------------------------

def _solutions(name: str) -> dict[str, str]:
    """The reference, wrong and slow programs of problem ``name``, from ``solutions/``."""
    folder = _HERE / "solutions"
    base = name.replace("-", "_")
    return {kind: (folder / f"{base}_{kind}.py").read_text(encoding="utf-8") for kind in ("reference", "wrong", "slow")}


SPECS: tuple[Spec, ...] = (
    Spec(
        "a-plus-b",
        "A + B",
        "Read two integers 0 <= a, b <= 10^18 on one line and print a + b.",
        _gen_ab,
        _oracle_ab,
        **_solutions("a-plus-b"),
    ),
    Spec(
        "array-sum",
        "Sum of an array",
        "The first line has n (1 <= n <= 20000), the second n integers |a_i| <= 10^9. Print their sum.",
        _gen_sum,
        _oracle_sum,
        **_solutions("array-sum"),
    ),
    Spec(
        "max-subarray",
        "Maximum subarray",
        "Given n (1 <= n <= 20000) integers, print the largest sum of a non-empty contiguous subarray.",
        _gen_maxsub,
        _oracle_maxsub,
        **_solutions("max-subarray"),
    ),
    Spec(
        "fibonacci-mod",
        "Fibonacci modulo 10^9+7",
        "Given 0 <= n <= 10^18, print F(n) mod 10^9+7, where F(0) = 0, F(1) = 1.",
        _gen_fib,
        _oracle_fib,
        **_solutions("fibonacci-mod"),
    ),
    Spec(
        "sorting",
        "Sort the numbers",
        "Given n (1 <= n <= 20000) integers, print them in non-decreasing order, space-separated.",
        _gen_sort,
        _oracle_sort,
        **_solutions("sorting"),
    ),
    Spec(
        "count-primes",
        "Counting primes",
        "Given 2 <= n <= 3*10^6, print how many primes are <= n.",
        _gen_primes,
        _oracle_primes,
        **_solutions("count-primes"),
    ),
    Spec(
        "brackets",
        "Bracket matching",
        "The first line has t; each of the next t lines is a string of ()[]{}. Print YES if it is balanced, else NO.",
        _gen_brackets,
        _oracle_brackets,
        **_solutions("brackets"),
    ),
    Spec(
        "gcd-lcm",
        "GCD and LCM",
        "The first line has t; each of the next t lines has 1 <= a, b <= 10^12. Print gcd(a, b) and lcm(a, b).",
        _gen_gcd,
        _oracle_gcd,
        **_solutions("gcd-lcm"),
    ),
    Spec(
        "count-at-most",
        "Binary search",
        "The first line has n and q (<= 20000), the second a sorted array of n integers, the third q queries x. "
        "For each query print how many elements are <= x.",
        _gen_bsearch,
        _oracle_bsearch,
        **_solutions("count-at-most"),
    ),
    Spec(
        "lis",
        "Longest increasing subsequence",
        "Given n (1 <= n <= 20000) integers, print the length of the longest strictly increasing subsequence.",
        _gen_lis,
        _oracle_lis,
        **_solutions("lis"),
    ),
    Spec(
        "knapsack",
        "0/1 knapsack",
        "The first line has n (<= 60) and the capacity W (<= 5000); each of the next n lines a weight and a "
        "value. Print the largest total value of a subset whose total weight is at most W.",
        _gen_knap,
        _oracle_knap,
        **_solutions("knapsack"),
    ),
    Spec(
        "palindromes",
        "Palindromes",
        "The first line has t; each of the next t lines is a string of lowercase letters. Print YES for a "
        "palindrome, else NO.",
        _gen_pal,
        _oracle_pal,
        **_solutions("palindromes"),
    ),
)

PUBLIC_SIZES = ("tiny", "small")
HIDDEN_SIZES = ("tiny", "small", "small", "medium", "medium", "large")


def problem_id(name: str) -> str:
    return f"demo/{name}"


def build_problem(spec: Spec, seed: int = SEED) -> Problem:
    """One problem with its tests generated from ``seed`` and the spec's name."""
    rng = random.Random(f"{seed}:{spec.name}")
    public = tuple(_case(spec, rng, size) for size in PUBLIC_SIZES)
    hidden = tuple(_case(spec, rng, size) for size in HIDDEN_SIZES)
    return Problem(
        id=problem_id(spec.name),
        public_tests=public,
        hidden_tests=hidden,
        time_limit_s=TIME_LIMIT_S,
        memory_limit_mb=MEMORY_LIMIT_MB,
        checker={"type": "tokens"},
        description=f"{spec.title}\n\n{spec.statement}",
        correct_solutions=(spec.reference,),
        incorrect_solutions=(spec.wrong, spec.slow),
    )


def _case(spec: Spec, rng: random.Random, size: str) -> TestCase:
    inp = spec.gen(rng, size)
    return TestCase(inp, spec.oracle(inp))


def build_problems(seed: int = SEED) -> list[Problem]:
    return [build_problem(s, seed) for s in SPECS]


# ---- completions: what a model would answer ---------------------------------------------


def fenced(code: str, prose: str = "Here is my solution.") -> str:
    """A completion as a model writes it: a sentence, then one fenced Python block."""
    return f"{prose}\n\n```python\n{code.rstrip()}\n```\n"


def syntax_error(code: str) -> str:
    """The reference made invalid Python, the way a model slips: the first block colon dropped
    (``for x in a`` ...) if that breaks it, else an unclosed call at its end, else a stray
    closing parenthesis before it. Each candidate is compiled: dropping a colon can leave valid
    code (a comment or a string ending in ``:``), and the demo promises a SyntaxError."""
    lines = code.split("\n")
    candidates = []
    for i, line in enumerate(lines):
        if line.rstrip().endswith(":"):
            candidates.append("\n".join([*lines[:i], line.rstrip()[:-1], *lines[i + 1 :]]))
            break
    candidates += [code + "\nprint(\n", ")\n" + code]
    for candidate in candidates:
        if not _compiles(candidate):
            return candidate
    raise AssertionError("unreachable: a leading ')' is never valid Python")


def _compiles(code: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning (invalid escapes...) is not an error
        try:
            compile(code, "<completion>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):  # ValueError: NUL bytes in the source
            return False
    return True


def runtime_error(code: str) -> str:
    """Reads the input as one integer per line: a ValueError on any line with two tokens."""
    return "import sys\nvalues = [int(line) for line in sys.stdin]\nprint(sum(values) // len(values[1:2]))\n"


def completions_for(spec: Spec) -> dict[str, str]:
    """One completion per kind in KINDS."""
    return {
        "correct": fenced(spec.reference, f"{spec.title}: the standard approach works."),
        "wrong": fenced(spec.wrong, "This should handle every case."),
        "slow": fenced(spec.slow, "A straightforward solution:"),
        "syntax_error": fenced(syntax_error(spec.reference), "Let me write it quickly."),
        "runtime_error": fenced(runtime_error(spec.reference), "Reading the input line by line:"),
        "no_code": (
            f"To solve {spec.title.lower()} I would think about the constraints first and then pick "
            "an algorithm; I am not sure yet which one, so no code this time."
        ),
    }


def demo_completions() -> dict[str, dict[str, str]]:
    """problem id -> kind -> completion, for the shipped set."""
    return {problem_id(s.name): completions_for(s) for s in SPECS}


# ---- the shipped file -------------------------------------------------------------------


def jobs_jsonl() -> bytes:
    """Jobs for ``cpfleet judge`` / ``cpfleet submit``: one per problem and kind, ids say which."""
    lines = []
    for pid, kinds in demo_completions().items():
        for kind, text in kinds.items():
            job = {"job_id": f"{pid}:{kind}", "problem_id": pid, "completion": text}
            lines.append(json.dumps(job) + "\n")
    return "".join(lines).encode()


def to_jsonl(problems: list[Problem]) -> bytes:
    return "".join(json.dumps(p.to_dict(), sort_keys=True) + "\n" for p in problems).encode()


def gzip_bytes(data: bytes) -> bytes:
    """Deterministic gzip (no name, mtime 0), so the shipped file is reproducible byte for byte."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(data)
    return buf.getvalue()


def shipped_bytes() -> bytes:
    return (_HERE / "data" / SHIPPED).read_bytes()


def load_shipped() -> list[Problem]:
    """The demo problem set as shipped in the package."""
    return list(parse_jsonl(gzip.decompress(shipped_bytes())))


def parse_jsonl(data: bytes) -> Iterator[Problem]:
    for n, line in enumerate(data.decode().splitlines(), 1):
        if line.strip():
            try:
                yield Problem.from_dict(json.loads(line))
            except ValueError as e:
                raise ValueError(f"line {n}: {e}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cpfleet.demo.problems", description="Generate the demo problem set.")
    p.add_argument("--write", action="store_true", help=f"rewrite the shipped cpfleet/demo/data/{SHIPPED}")
    p.add_argument("-o", "--out", type=output_file, help="write plain JSONL to this file ('-' for stdout)")
    p.add_argument("--jobs-out", metavar="FILE", type=output_file, help="write one job per problem and completion kind (JSONL)")
    p.add_argument("--seed", type=int, default=SEED)
    args = p.parse_args(argv)
    data = to_jsonl(build_problems(args.seed))
    if args.jobs_out:
        Path(args.jobs_out).write_bytes(jobs_jsonl())
    if args.write:
        target = Path(__file__).with_name("data") / SHIPPED
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(gzip_bytes(data))
        print(f"wrote {target} ({len(SPECS)} problems)", file=sys.stderr)
    if args.out == "-":
        sys.stdout.buffer.write(data)
    elif args.out:
        Path(args.out).write_bytes(data)
    if not (args.write or args.out or args.jobs_out):
        p.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
