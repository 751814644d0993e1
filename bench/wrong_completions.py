"""Wrong completions for the fail-fast benchmark and tests, made from real correct programs.

Early in RL training most completions are wrong in the ways a language model is wrong: an
off-by-one bound, a strict comparison where a loose one was needed, a special case handled
wrongly, a right algorithm that is too slow on the large test. Each generator here turns a
correct Python solution into one such program, deterministically (same source, same kind, same
seed: same program), so a benchmark and a test can judge exactly the same completions twice:

* ``cmp``: one comparison's strictness flipped (``<`` <-> ``<=``, ``>`` <-> ``>=``);
* ``const``: one integer literal moved by one (off-by-one in a bound or an initial value);
* ``range``: one ``range(...)`` loses its last iteration;
* ``edge``: a wrong answer for a degenerate input (first input token ``1``), the special case a
  model "handles" with a made-up answer (the seed picks which); the input is peeked with
  ``os.pread`` so the program itself reads it unchanged;
* ``slow``: right answers, but spins until the time limit on the problem's largest input (a
  quadratic algorithm where the large test needs n log n).

The seed gives distinct programs of one kind: a GRPO group's completions share blind spots, so
the same failure comes back in several programs.

Not every mutant is wrong (a flipped comparison can be equivalent); callers judge them and keep
the wrong ones.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator

KINDS = ("cmp", "const", "range", "edge", "slow")

_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


class _Sites(ast.NodeVisitor):
    def __init__(self) -> None:
        self.cmp: list[tuple[ast.Compare, int]] = []
        self.const: list[ast.Constant] = []
        self.range: list[ast.Call] = []

    def visit_Compare(self, node: ast.Compare) -> None:
        self.cmp += [(node, i) for i, op in enumerate(node.ops) if type(op) in _FLIP]
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if type(node.value) is int and 0 <= node.value <= 10**6:
            self.const.append(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "range" and 1 <= len(node.args) <= 2:
            self.range.append(node)
        self.generic_visit(node)


def _ast_mutant(source: str, kind: str, rng: random.Random) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    sites = _Sites()
    sites.visit(tree)
    if kind == "cmp" and sites.cmp:
        node, i = rng.choice(sites.cmp)
        node.ops[i] = _FLIP[type(node.ops[i])]()
    elif kind == "const" and sites.const:
        c = rng.choice(sites.const)
        c.value = c.value + 1
    elif kind == "range" and sites.range:
        call = rng.choice(sites.range)
        last = call.args[-1]
        call.args[-1] = ast.BinOp(left=last, op=ast.Sub(), right=ast.Constant(1))
    else:
        return None
    try:
        return ast.unparse(ast.fix_missing_locations(tree))
    except Exception:
        return None


_PEEK = """import os as _fc_os
try:
    _fc_head = _fc_os.pread(0, {n}, 0)
except OSError:
    _fc_head = b''
"""


_EDGE_ANSWERS = ("0", "-1", "1", "'NO'", "''")


def _edge_mutant(source: str, seed: int) -> str:
    answer = _EDGE_ANSWERS[seed % len(_EDGE_ANSWERS)]
    return (_PEEK.format(n=64) + f"if _fc_head.split()[:1] == [b'1']:\n    print({answer})\n    raise SystemExit(0)\n"
            + source)


def _slow_mutant(source: str, largest_input: int, seed: int) -> str:
    spin = "while True:\n        pass" if seed % 2 == 0 else "_fc_x = 0\n    while _fc_x >= 0:\n        _fc_x += 1"
    return (_PEEK.format(n=largest_input + 1) + f"if len(_fc_head) >= {largest_input}:\n    {spin}\n" + source)


def mutant(source: str, kind: str, seed: int, largest_input: int = 0) -> str | None:
    """One wrong-ish program of ``kind`` from the correct ``source``; None when the source has
    no site for it (or, for ``slow``, no input to be slow on)."""
    rng = random.Random(f"{kind}:{seed}:{len(source)}")
    if kind == "edge":
        return _edge_mutant(source, seed)
    if kind == "slow":
        return _slow_mutant(source, largest_input, seed) if largest_input > 0 else None
    out = _ast_mutant(source, kind, rng)
    return None if out is None or out == source else out


def completions(source: str, largest_input: int, per_kind: int = 2,
                kinds: tuple[str, ...] = KINDS) -> Iterator[tuple[str, int, str]]:
    """(kind, seed, fenced completion) for up to ``per_kind`` distinct mutants of each kind."""
    for kind in kinds:
        seen: set[str] = set()
        for seed in range(per_kind * 4):
            if len(seen) >= per_kind:
                break
            code = mutant(source, kind, seed, largest_input)
            if code is None or code in seen:
                continue
            seen.add(code)
            yield kind, seed, f"```python\n{code}\n```"
