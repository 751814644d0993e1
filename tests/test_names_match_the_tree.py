"""The names the house tells a reader (docs, docstrings, help texts, log names) are names of
things that exist: a module path, a repository path, a ``python -m`` command, a logger.

Folders get regrouped and modules split; a name left behind in prose reads as true and sends a
newcomer to a file or a function that is not there. These checks read the tree as text (no
project import) so they fail on a stale name wherever it was left."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("core", "sandbox", "workers", "producer")
TOP_FOLDERS = (*LAYERS, "cpfleet", "tests", "bench", "scripts", "docs", "docker", "examples")
# dotted names that are not modules: the Celery task names (core/protocol.py)
NOT_MODULES = {"cpfleet.evaluate", "cpfleet.run"}


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [f for f in out.split() if (REPO / f).is_file()]


def prose_files() -> list[Path]:
    """The docs, every Python source of the tree (its docstrings, comments and strings), the
    scripts and the Dockerfile."""
    keep = (".md", ".py", ".yml", ".sh", ".toml")
    return [REPO / f for f in tracked()
            if (f.endswith(keep) or "." not in Path(f).name) and not f.startswith("tests/judge_cases/")]


def module_file(parts: list[str]) -> Path | None:
    """The file of module ``cpfleet.<parts>`` in this checkout (package-dir mapping of pyproject)."""
    if parts and parts[0] in LAYERS:
        base, rest = REPO / parts[0], parts[1:]
    else:
        base, rest = REPO / "cpfleet", parts
    path = base.joinpath(*rest)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def top_level_names(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def resolves(dotted: str) -> bool:
    """``cpfleet.<module>.<name>``: the longest module prefix exists and defines the next name."""
    parts = dotted.split(".")[1:]
    for k in range(len(parts), 0, -1):
        path = module_file(parts[:k])
        if path is not None:
            return k == len(parts) or parts[k] in top_level_names(path)
    return not parts or parts[0] in top_level_names(REPO / "cpfleet" / "__init__.py")


DOTTED = re.compile(r"(?<![\w./-])cpfleet(?:\.[A-Za-z_]\w*)+")
LOGGER = re.compile(r"getLogger\(\s*\"([\w.]+)\"\s*\)|^\w*LOGGER\s*=\s*\"([\w.]+)\"", re.M)


def logger_names() -> set[str]:
    return {a or b for path in prose_files() if path.suffix == ".py" for a, b in LOGGER.findall(path.read_text())}


def test_every_cpfleet_dotted_name_in_docs_and_sources_resolves() -> None:
    """A logger's name is checked by the logger test below, a task name is not a module."""
    not_modules = NOT_MODULES | logger_names()
    stale = []
    for path in prose_files():
        text = path.read_text(errors="replace")
        for m in DOTTED.finditer(text):
            name = m.group(0)
            if name in not_modules or name.startswith("cpfleet.__"):
                continue
            if not resolves(name):
                stale.append(f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {name}")
    assert not stale, "names of modules or attributes that do not exist:\n" + "\n".join(stale)


# a folder of the tree, then a path with a file suffix or a further folder ("tests/s" is a rate)
REPO_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(TOP_FOLDERS) + r")/[\w./*<>-]*[\w/*>])")


# paths of other projects that a docstring quotes (SandboxFusion's, open-r1's)
EXTERNAL_PATHS = {"sandbox/utils/testing.py", "scripts/e2b_router.py"}


def test_every_repository_path_the_docs_and_sources_name_exists() -> None:
    files = set(tracked())
    folders = {str(Path(f).parent) for f in files} | {str(p) for f in files for p in Path(f).parents}
    stale = []
    for doc in sorted(str(p.relative_to(REPO)) for p in prose_files()):
        text = (REPO / doc).read_text()
        for m in REPO_PATH.finditer(text):
            path = m.group(1).rstrip("/.")
            if "/" not in path.split("/", 1)[1] and "." not in path.split("/", 1)[1]:
                continue  # a rate or a name ("tests/s", "cpfleet/slot-<uid>"), not a path
            if re.match(r"[\w.-]*[$({]", text[m.end():m.end() + 80]):
                continue  # the rest is made by the shell
            if "*" in path or "<" in path or path in files or path in folders or path in EXTERNAL_PATHS:
                continue
            stale.append(f"{doc}:{text.count(chr(10), 0, m.start()) + 1}: {path}")
    assert not stale, "paths named that are not in the tree:\n" + "\n".join(stale)


def test_the_layout_section_names_every_folder() -> None:
    """docs/ARCHITECTURE.md's layout covers every folder of the tree (a judging case's folder is
    data inside tests/judge_cases/)."""
    page = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    layout = page[page.index("## Layout and import rules"):page.index("## One job, end to end")]
    folders = {str(Path(f).parent) for f in tracked() if "/" in f and not f.startswith("tests/judge_cases/")}
    missing = []
    for folder in sorted(folders | {"tests/judge_cases"}):
        last = folder.rsplit("/", 1)[-1]
        if f"{last}/" not in layout:
            missing.append(folder)
    assert not missing, f"folders docs/ARCHITECTURE.md's layout does not name: {missing}"


def python_m_commands() -> set[str]:
    found = set()
    for path in prose_files():
        found.update(re.findall(r"python3? -m (cpfleet[\w.]*)", path.read_text(errors="replace")))
    return found


@pytest.mark.parametrize("module", sorted(python_m_commands()))
def test_every_python_m_command_the_house_names_runs_and_names_itself(module: str) -> None:
    proc = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    usage = re.search(r"^usage: (.*)$", proc.stdout, re.M | re.I)
    assert usage is not None, proc.stdout
    # its usage line names the command a user typed: the module, or the cpfleet subcommand it is
    assert usage.group(1).startswith((f"python -m {module} ", "cpfleet ")), usage.group(1)


def module_name(path: Path) -> str:
    """``cpfleet.<...>`` of a source file of the tree (what ``__name__`` is in it)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts if parts[0] == "cpfleet" else ["cpfleet", *parts])


def test_every_logger_is_its_module_or_a_documented_name() -> None:
    """A literal that spells the module's own name is a copy that a move leaves behind:
    ``__name__`` follows the module."""
    documented = set(re.findall(r"`(cpfleet[\w.]*)`", (REPO / "docs" / "monitoring.md").read_text()))
    wrong = []
    for path in prose_files():
        if path.suffix != ".py" or path.parts[len(REPO.parts)] == "tests":
            continue
        for literal, constant in LOGGER.findall(path.read_text()):
            name = literal or constant
            if name == module_name(path):
                wrong.append(f"{path.relative_to(REPO)}: getLogger({name!r}) is getLogger(__name__)")
            elif name not in documented:
                wrong.append(f"{path.relative_to(REPO)}: getLogger({name!r})")
    assert not wrong, "loggers named neither by __name__ nor in docs/monitoring.md:\n" + "\n".join(wrong)


def test_every_module_over_500_lines_says_at_its_top_why_it_is_one_module() -> None:
    long = []
    for path in prose_files():
        rel = path.relative_to(REPO)
        if path.suffix != ".py" or rel.parts[0] not in (*LAYERS, "cpfleet"):
            continue
        text = path.read_text()
        if text.count("\n") > 500 and not re.search(r"\b\d{3} lines\b", ast.get_docstring(ast.parse(text)) or ""):
            long.append(str(rel))
    assert not long, f"modules over 500 lines whose docstring does not say why: {long}"


def test_every_package_docstring_names_each_module_and_subpackage_of_its_folder() -> None:
    unnamed = []
    for init in (REPO / f for f in tracked() if f.endswith("__init__.py")):
        if init.relative_to(REPO).parts[0] not in (*LAYERS, "cpfleet"):
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for entry in sorted(init.parent.iterdir()):
            if entry.name == "__init__.py" or not (entry.suffix == ".py" or (entry / "__init__.py").is_file()):
                continue
            if not re.search(rf"\b{re.escape(entry.stem)}\b", doc):
                unnamed.append(f"{init.relative_to(REPO)}: {entry.name}")
    assert not unnamed, "modules their package's docstring does not name:\n" + "\n".join(unnamed)
