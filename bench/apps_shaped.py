"""An APPS-shaped problem set, generated: many small problems, each with many tiny tests.

APPS and TACO (and the sets built from them: DeepCoder, PrimeIntellect) differ from
CodeContests in the shape that matters for judging cost: a test is a few lines of input that a
correct solution answers in about a millisecond of CPU, and a problem has tens of them. So the
judge's own per-test work (the round trip to the fork server, the checker, the result) is a
large share of the total, where on CodeContests the solutions' own CPU dominates.

Every problem here is written in code: an input generator, an oracle (an independent
implementation in this file) computing the expected output, and a correct solution in the
style of an APPS answer (reads stdin, prints; or a function for the call-based ones, whose
tests are JSON argument lists and JSON return values, as ``cpfleet prepare`` writes APPS
call-based rows). The first test of each problem is public, every test is hidden, as ``cpfleet
prepare --format apps`` splits them. Deterministic for a seed; nothing is read from any dataset.

    from apps_shaped import build
    problems, solutions = build(seed=1, problems=40)   # records (dicts) and {id: solution source}
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kind:
    """One problem template: ``make(rng)`` gives (stdin text or argument list, expected answer)."""

    name: str
    make: Callable[[random.Random], tuple[Any, Any]]
    solution: str
    fn_name: str | None = None


def _ints(rng: random.Random, n: int, lo: int = -1000, hi: int = 1000) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _word(rng: random.Random, lo: int = 1, hi: int = 8, alphabet: str = "abcde") -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


# --- stdin/stdout kinds --------------------------------------------------------------------------


def _sum_array(rng: random.Random) -> tuple[str, str]:
    a = _ints(rng, rng.randint(1, 30))
    return f"{len(a)}\n{' '.join(map(str, a))}\n", f"{sum(a)}\n"


def _max_subarray(rng: random.Random) -> tuple[str, str]:
    a = _ints(rng, rng.randint(1, 40), -50, 50)
    best = max(sum(a[i:j]) for i in range(len(a)) for j in range(i + 1, len(a) + 1))
    return f"{len(a)}\n{' '.join(map(str, a))}\n", f"{best}\n"


def _palindromes(rng: random.Random) -> tuple[str, str]:
    words = []
    for _ in range(rng.randint(1, 6)):
        w = _word(rng, 1, 6, "ab")
        words.append(w + w[::-1][rng.randint(0, 1):] if rng.random() < 0.5 else w)
    lines = ["YES" if w == w[::-1] else "NO" for w in words]
    return f"{len(words)}\n" + "".join(w + "\n" for w in words), "\n".join(lines) + "\n"


def _gcd_lcm(rng: random.Random) -> tuple[str, str]:
    pairs = [(rng.randint(1, 10**6), rng.randint(1, 10**6)) for _ in range(rng.randint(1, 8))]
    out = "".join(f"{math.gcd(a, b)} {a * b // math.gcd(a, b)}\n" for a, b in pairs)
    return f"{len(pairs)}\n" + "".join(f"{a} {b}\n" for a, b in pairs), out


def _sort_desc(rng: random.Random) -> tuple[str, str]:
    a = _ints(rng, rng.randint(1, 25))
    return f"{len(a)}\n{' '.join(map(str, a))}\n", " ".join(map(str, sorted(a, reverse=True))) + "\n"


def _count_primes(rng: random.Random) -> tuple[str, str]:
    n = rng.randint(1, 3000)
    count = sum(1 for k in range(2, n + 1) if all(k % d for d in range(2, math.isqrt(k) + 1)))
    return f"{n}\n", f"{count}\n"


def _rle(rng: random.Random) -> tuple[str, str]:
    s = "".join(rng.choice("aab") * rng.randint(1, 4) for _ in range(rng.randint(1, 8)))
    out, i = [], 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{s[i]}{j - i}")
        i = j
    return s + "\n", "".join(out) + "\n"


def _brackets(rng: random.Random) -> tuple[str, str]:
    s = "".join(rng.choice("()[]") for _ in range(rng.randint(0, 7) * 2))
    if rng.random() < 0.5:
        s = "".join(rng.choice(["()", "[]", "([])", "[()]"]) for _ in range(rng.randint(1, 4)))
    stack: list[str] = []
    ok = True
    for c in s:
        if c in "([":
            stack.append(c)
        elif not stack or stack.pop() != {")": "(", "]": "["}[c]:
            ok = False
            break
    return s + "\n", ("YES" if ok and not stack else "NO") + "\n"


def _lis(rng: random.Random) -> tuple[str, str]:
    a = _ints(rng, rng.randint(1, 60), 0, 100)
    best = [1] * len(a)
    for i in range(len(a)):
        for j in range(i):
            if a[j] < a[i]:
                best[i] = max(best[i], best[j] + 1)
    return f"{len(a)}\n{' '.join(map(str, a))}\n", f"{max(best)}\n"


def _prefix_queries(rng: random.Random) -> tuple[str, str]:
    a = _ints(rng, rng.randint(1, 30), 0, 100)
    qs = []
    for _ in range(rng.randint(1, 10)):
        lo = rng.randint(1, len(a))
        qs.append((lo, rng.randint(lo, len(a))))
    inp = f"{len(a)} {len(qs)}\n{' '.join(map(str, a))}\n" + "".join(f"{lo} {hi}\n" for lo, hi in qs)
    return inp, "".join(f"{sum(a[lo - 1:hi])}\n" for lo, hi in qs)


def _inversions(rng: random.Random) -> tuple[str, str]:
    a = _ints(rng, rng.randint(1, 50), 0, 20)
    inv = sum(1 for i in range(len(a)) for j in range(i + 1, len(a)) if a[i] > a[j])
    return f"{len(a)}\n{' '.join(map(str, a))}\n", f"{inv}\n"


def _caesar(rng: random.Random) -> tuple[str, str]:
    k = rng.randint(0, 25)
    s = " ".join(_word(rng, 1, 6, "abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 5)))
    out = "".join(chr((ord(c) - 97 + k) % 26 + 97) if c != " " else c for c in s)
    return f"{k}\n{s}\n", out + "\n"


STDIN_KINDS: tuple[Kind, ...] = (
    Kind("sum-array", _sum_array, "n = int(input())\nprint(sum(map(int, input().split())))\n"),
    Kind("max-subarray", _max_subarray, """\
n = int(input())
a = list(map(int, input().split()))
best = cur = a[0]
for x in a[1:]:
    cur = max(x, cur + x)
    best = max(best, cur)
print(best)
"""),
    Kind("palindromes", _palindromes, """\
import sys
data = sys.stdin.read().split()
t = int(data[0])
for w in data[1:1 + t]:
    print("YES" if w == w[::-1] else "NO")
"""),
    Kind("gcd-lcm", _gcd_lcm, """\
from math import gcd
t = int(input())
for _ in range(t):
    a, b = map(int, input().split())
    g = gcd(a, b)
    print(g, a // g * b)
"""),
    Kind("sort-desc", _sort_desc, "input()\nprint(*sorted(map(int, input().split()), reverse=True))\n"),
    Kind("count-primes", _count_primes, """\
n = int(input())
sieve = bytearray([1]) * (n + 1)
sieve[0:2] = b"\\x00\\x00"[: min(2, n + 1)]
for i in range(2, int(n ** 0.5) + 1):
    if sieve[i]:
        sieve[i * i :: i] = bytearray(len(range(i * i, n + 1, i)))
print(sum(sieve))
"""),
    Kind("run-length", _rle, """\
from itertools import groupby
s = input().strip()
print("".join(f"{k}{len(list(g))}" for k, g in groupby(s)))
"""),
    Kind("brackets", _brackets, """\
s = input().strip()
stack = []
pair = {")": "(", "]": "["}
ok = True
for c in s:
    if c in "([":
        stack.append(c)
    elif not stack or stack.pop() != pair[c]:
        ok = False
        break
print("YES" if ok and not stack else "NO")
"""),
    Kind("lis", _lis, """\
from bisect import bisect_left
input()
tails = []
for x in map(int, input().split()):
    i = bisect_left(tails, x)
    if i == len(tails):
        tails.append(x)
    else:
        tails[i] = x
print(len(tails))
"""),
    Kind("prefix-queries", _prefix_queries, """\
import sys
from itertools import accumulate
input = sys.stdin.readline
n, q = map(int, input().split())
pre = [0] + list(accumulate(map(int, input().split())))
out = []
for _ in range(q):
    lo, hi = map(int, input().split())
    out.append(pre[hi] - pre[lo - 1])
print("\\n".join(map(str, out)))
"""),
    Kind("inversions", _inversions, """\
n = int(input())
a = list(map(int, input().split()))
def count(xs):
    if len(xs) < 2:
        return xs, 0
    m = len(xs) // 2
    left, x = count(xs[:m])
    right, y = count(xs[m:])
    merged, inv, i, j = [], x + y, 0, 0
    while i < len(left) and j < len(right):
        if right[j] < left[i]:
            merged.append(right[j])
            inv += len(left) - i
            j += 1
        else:
            merged.append(left[i])
            i += 1
    return merged + left[i:] + right[j:], inv
print(count(a)[1])
"""),
    Kind("caesar", _caesar, """\
k = int(input())
s = input()
print("".join(chr((ord(c) - 97 + k) % 26 + 97) if c.isalpha() else c for c in s))
"""),
)


# --- call-based kinds (fn_name; JSON arguments and return value) ---------------------------------


def _two_sum(rng: random.Random) -> tuple[list[Any], Any]:
    nums = rng.sample(range(-50, 50), rng.randint(2, 15))
    i, j = sorted(rng.sample(range(len(nums)), 2))
    return [nums, nums[i] + nums[j]], sorted(
        next([a, b] for b in range(len(nums)) for a in range(b) if nums[a] + nums[b] == nums[i] + nums[j]))


def _max_profit(rng: random.Random) -> tuple[list[Any], Any]:
    p = _ints(rng, rng.randint(1, 30), 1, 100)
    return [p], max([0] + [p[j] - p[i] for i in range(len(p)) for j in range(i + 1, len(p))])


def _rotate(rng: random.Random) -> tuple[list[Any], Any]:
    n = rng.randint(1, 5)
    m = [_ints(rng, n, 0, 9) for _ in range(n)]
    return [m], [[m[n - 1 - j][i] for j in range(n)] for i in range(n)]


def _is_anagram(rng: random.Random) -> tuple[list[Any], Any]:
    a = _word(rng, 1, 8, "abc")
    b = "".join(rng.sample(a, len(a))) if rng.random() < 0.5 else _word(rng, 1, 8, "abc")
    return [a, b], sorted(a) == sorted(b)


def _digit_root_case(rng: random.Random) -> tuple[list[Any], Any]:
    n = rng.randint(0, 10**12)
    r = n
    while r >= 10:
        r = sum(int(c) for c in str(r))
    return [n], r


def _count_words(rng: random.Random) -> tuple[list[Any], Any]:
    words = [_word(rng, 1, 3, "ab") for _ in range(rng.randint(0, 12))]
    return [" ".join(words)], len(set(words))


CALL_KINDS: tuple[Kind, ...] = (
    Kind("two-sum", _two_sum, """\
def two_sum(nums, target):
    seen = {}
    for i, x in enumerate(nums):
        if target - x in seen:
            return [seen[target - x], i]
        seen[x] = i
""", fn_name="two_sum"),
    Kind("max-profit", _max_profit, """\
def max_profit(prices):
    best, low = 0, prices[0]
    for p in prices:
        low = min(low, p)
        best = max(best, p - low)
    return best
""", fn_name="max_profit"),
    Kind("rotate", _rotate, """\
def rotate(matrix):
    return [list(row) for row in zip(*matrix[::-1])]
""", fn_name="rotate"),
    Kind("is-anagram", _is_anagram, """\
from collections import Counter
def is_anagram(a, b):
    return Counter(a) == Counter(b)
""", fn_name="is_anagram"),
    Kind("digital-root", _digit_root_case, """\
def digital_root(n):
    return 0 if n == 0 else 1 + (n - 1) % 9
""", fn_name="digital_root"),
    Kind("count-words", _count_words, """\
def count_words(s):
    return len(set(s.split()))
""", fn_name="count_words"),
)


def build(seed: int = 1, problems: int = 40, min_tests: int = 15, max_tests: int = 60,
          call_share: float = 0.25) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``problems`` records (about ``call_share`` of them call-based), each with
    ``min_tests``..``max_tests`` tests, the first public; and each problem's correct solution."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    solutions: dict[str, str] = {}
    n_call = round(problems * call_share)
    kinds = [STDIN_KINDS[i % len(STDIN_KINDS)] for i in range(problems - n_call)]
    kinds += [CALL_KINDS[i % len(CALL_KINDS)] for i in range(n_call)]
    for index, kind in enumerate(kinds):
        pid = f"apps-shaped/{index:04d}-{kind.name}"
        tests = []
        seen: set[str] = set()
        for _ in range(rng.randint(min_tests, max_tests)):
            given, expected = kind.make(rng)
            if kind.fn_name is None:
                test = {"input": given, "output": expected}
            else:
                test = {"input": json.dumps(given), "output": json.dumps(expected)}
            if test["input"] not in seen:
                seen.add(test["input"])
                tests.append(test)
        rec: dict[str, Any] = {"id": pid, "public_tests": tests[:1], "hidden_tests": tests,
                               "time_limit_s": 2.0, "memory_limit_mb": 256}
        if kind.fn_name is not None:
            rec["fn_name"] = kind.fn_name
            rec["languages"] = ["python3", "pypy3"]
        records.append(rec)
        solutions[pid] = kind.solution
    return records, solutions
