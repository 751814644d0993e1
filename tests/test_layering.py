"""The house's layering is a rule, not a hope: every import of the project points one way.

    core (data model, wire protocol, store keys, errors)      folder core/     -> cpfleet.core
      -> sandbox (execution and judging)                     folder sandbox/  -> cpfleet.sandbox
        -> workers (Celery app, tasks)                       folder workers/  -> cpfleet.workers
      -> producer (the trainer's client)                     folder producer/ -> cpfleet.producer
          -> application (CLI, local fleet, demo, tools)     folder cpfleet/  -> cpfleet.*

The producer sits on the core alone: a trainer that imports the client never imports the
execution machinery. ``cpfleet/__init__.py`` is the import surface and resolves its names lazily,
so it is the one module allowed to name every layer. The check reads every import statement,
including those inside functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FOLDER_LAYER = {"core": "core", "sandbox": "sandbox", "workers": "workers", "producer": "producer", "cpfleet": "app"}
# what each layer may import from the project
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "sandbox": {"core", "sandbox"},
    "workers": {"core", "sandbox", "workers"},
    "producer": {"core", "producer"},
    "app": {"core", "sandbox", "workers", "producer", "app"},
}
# third-party packages a layer must not import: the sandbox and the core run without a broker
FORBIDDEN_THIRD_PARTY: dict[str, set[str]] = {
    "core": {"redis", "celery", "kombu", "datasets", "pyarrow", "prometheus_client"},
    "sandbox": {"redis", "celery", "kombu", "datasets", "pyarrow", "prometheus_client"},
    "producer": {"celery", "datasets", "pyarrow"},
}
FACADE = REPO / "cpfleet" / "__init__.py"
OLD_TOP_LEVEL = {"sandbox", "workers", "producer", "core"}


def _layer_of_module(name: str) -> str | None:
    """The layer of an absolute module name of ours, None for anything else."""
    parts = name.split(".")
    if parts[0] != "cpfleet":
        return None
    if len(parts) == 1:
        return "facade"
    return FOLDER_LAYER.get(parts[1], "app") if parts[1] in FOLDER_LAYER else "app"


def _sources() -> list[tuple[str, Path]]:
    out = []
    for folder, layer in FOLDER_LAYER.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            out.append((layer, path))
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers inside ``if TYPE_CHECKING:`` blocks: annotations only, no runtime edge."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _type_checking_lines(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}:{node.lineno}: relative import; use absolute cpfleet.* names")
            assert node.module is not None
            found.append((node.lineno, node.module))
            if node.module == "cpfleet":  # `from cpfleet import x` may name a subpackage
                found.extend((node.lineno, f"cpfleet.{a.name}") for a in node.names)
    return found


def test_every_project_import_points_down_the_layers() -> None:
    wrong = []
    for layer, path in _sources():
        if path == FACADE:
            continue
        for lineno, module in _imports(path):
            target = _layer_of_module(module)
            top = module.split(".")[0]
            where = f"{path.relative_to(REPO)}:{lineno}"
            if top in OLD_TOP_LEVEL:
                wrong.append(f"{where}: imports {module!r}, a name that is not installed (use cpfleet.{module})")
            elif target == "facade" and module == "cpfleet":
                continue  # `from cpfleet import <subpackage>` was expanded above
            elif target is not None and target not in ALLOWED[layer]:
                wrong.append(f"{where}: {layer} imports {module} ({target})")
            elif top in FORBIDDEN_THIRD_PARTY.get(layer, set()):
                wrong.append(f"{where}: {layer} imports {top}")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_import_rule_itself_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker above must be able to fail: an upward import in a core-shaped file is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from cpfleet.producer.client import FleetClient\n")
    found = [m for _, m in _imports(bad)]
    assert found == ["cpfleet.producer.client"]
    assert _layer_of_module(found[0]) not in ALLOWED["core"]


def test_facade_exports_exactly_what_it_declares() -> None:
    import cpfleet

    assert set(cpfleet.__all__) == {"__version__", *cpfleet._EXPORTS}
    for name in cpfleet.__all__:
        assert getattr(cpfleet, name) is not None, name
    assert issubclass(cpfleet.BrokerUnavailable, cpfleet.CpfleetError)
    assert issubclass(cpfleet.ProblemFormatError, cpfleet.CpfleetError)


def test_every_raised_project_error_derives_from_the_one_base() -> None:
    """Each exception class the project defines outside errors.py is private control flow."""
    public = []
    for _layer, path in _sources():
        if path.name == "errors.py":
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if bases & {"BaseException", "Exception", "RuntimeError", "ValueError", "TimeoutError", "ConnectionError", "OSError"}:
                    public.append(f"{path.relative_to(REPO)}: {node.name}({', '.join(sorted(bases))})")
    allowed_private = {"cpfleet/fleet/processes.py: Stopped(BaseException)"}  # signal-handler control flow
    assert set(public) <= allowed_private, "define public errors in core/errors.py under CpfleetError:\n" + "\n".join(
        sorted(set(public) - allowed_private)
    )


def test_import_surface_works_from_an_installed_wheel_next_to_generic_folders(tmp_path: Path) -> None:
    """A non-editable install, used from a directory that has its own workers/, producer/ and
    sandbox/ folders (as trainer repositories do): the installed names never collide."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    top_level = {p.name for p in target.iterdir() if not p.name.endswith((".dist-info", ".egg-info"))}
    top_level -= {"__pycache__", "bin"}  # bin: the console script
    assert top_level == {"cpfleet"}, f"the wheel installs more than one top-level name: {sorted(top_level)}"
    work = tmp_path / "trainer"
    for name in ("workers", "producer", "sandbox", "core"):
        (work / name).mkdir(parents=True)
        (work / name / "__init__.py").write_text(f"raise ImportError('the trainer repo own {name} was imported')\n")
    code = (
        "import cpfleet, sys\n"
        "from cpfleet import FleetClient, JobResult, Verdict, CpfleetError\n"
        "import cpfleet.workers.tasks, cpfleet.sandbox.env\n"
        "assert cpfleet.__file__.startswith(sys.argv[1]), cpfleet.__file__\n"
        "print(Verdict.OK.value, FleetClient.__module__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(target)], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["OK", "cpfleet.producer.client"]


@pytest.mark.parametrize("module", ["cpfleet.core.problem", "cpfleet.core.results", "cpfleet.core.protocol"])
def test_core_modules_import_no_client_library(module: str) -> None:
    code = f"import sys, {module}\nprint(sorted(m for m in ('redis', 'celery', 'kombu') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
