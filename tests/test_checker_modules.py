"""One module per checker kind, found by the registry (as DMOJ's judge keeps its checkers): each
built-in comparison kind's checker and declaration live in core/checkers/<module>.py, each
checker-program protocol in sandbox/checker_programs/<kind>.py, and what they share has one home
(base.py), never a copy in a kind's module. docs/ARCHITECTURE.md's recipe relies on this."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from cpfleet.core import checkers
from cpfleet.core.checkers import program_specs
from cpfleet.sandbox import checker_programs

REPO = Path(__file__).resolve().parents[1]

# kind -> the module of core/checkers/ that holds it
COMPARISON_MODULES = {
    "tokens": "tokens",
    "code_contests": "code_contests",
    "float": "floats",
    "real_tokens": "real_tokens",
    "exact_tokens": "exact_tokens",
    "lines": "lines",
    "lcb": "lcb",
    "sandboxfusion": "sandboxfusion",
}
PROGRAM_PROTOCOLS = ("testlib", "kattis_validator", "python")
SHARED = {"__init__.py", "base.py", "program_specs.py"}  # the registry, the shared pieces, the program specs


@pytest.mark.parametrize("kind", sorted(COMPARISON_MODULES))
def test_each_comparison_kind_lives_in_its_own_module(kind: str) -> None:
    module = importlib.import_module(f"cpfleet.core.checkers.{COMPARISON_MODULES[kind]}")
    assert type(checkers.get_checker({"type": kind})).__module__ == module.__name__
    assert checkers.checker_kind(kind) is module.KIND, "the registry's declaration is the module's KIND"
    assert f"``{kind}``" in (module.__doc__ or "").split("\n", 1)[0], "the module's docstring opens with its kind"


def test_the_registry_lists_every_kind_module_and_nothing_else() -> None:
    folder = REPO / "core" / "checkers"
    modules = {p.stem for p in folder.glob("*.py") if p.name not in SHARED}
    assert modules == set(COMPARISON_MODULES.values())
    compare = {k.name for k in checkers.BUILTIN_KINDS if k.role == checkers.COMPARE}
    assert compare == set(COMPARISON_MODULES)
    assert {k.name for k in checkers.BUILTIN_KINDS if k.role != checkers.COMPARE} == {k.name for k in program_specs.KINDS}


def test_float_with_kattis_flags_is_the_kattis_validators_one_comparison() -> None:
    checker = checkers.get_checker({"type": "float", "validator_flags": "float_tolerance 1e-6"})
    assert type(checker) is checkers.KattisTokensChecker
    assert type(checker).__module__ == "cpfleet.core.checkers.exact_tokens"


@pytest.mark.parametrize("kind", PROGRAM_PROTOCOLS)
def test_each_checker_program_protocol_lives_in_its_own_module(kind: str) -> None:
    assert checker_programs.PROTOCOLS[kind].__module__ == f"cpfleet.sandbox.checker_programs.{kind}"
    assert checkers.checker_kind(kind) in program_specs.KINDS
    modules = {p.stem for p in (REPO / "sandbox" / "checker_programs").glob("*.py")} - {"__init__", "base"}
    assert modules == set(PROGRAM_PROTOCOLS)


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("package", ["core/checkers", "sandbox/checker_programs"])
def test_no_kind_module_redefines_a_shared_piece(package: str) -> None:
    """The whitespace, number and block helpers (and the protocols' running and exit codes) have
    one home, base.py: a kind module defining one of its names again would be a second rule."""
    folder = REPO / package
    shared = _top_level_names(folder / "base.py")
    copies = {p.name: sorted(_top_level_names(p) & shared) for p in folder.glob("*.py") if p.name != "base.py"}
    assert {name: found for name, found in copies.items() if found} == {}
