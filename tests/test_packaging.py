"""The distribution holds the whole house: a wheel built from this checkout (what the worker image
and ``pip install .`` install) contains every module of every layer and the demo's data, so a
subpackage missing from pyproject's explicit ``packages`` list fails here rather than on a host."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = {"cpfleet": "cpfleet", "core": "cpfleet.core", "sandbox": "cpfleet.sandbox", "workers": "cpfleet.workers",
          "producer": "cpfleet.producer"}


def _package_folders() -> set[str]:
    """Every folder of the layers that is a Python package, as its import name."""
    found = set()
    for folder, name in LAYERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join((name, *rel.parts)))
    return found


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert set(config["tool"]["setuptools"]["packages"]) == _package_folders()


def test_a_wheel_of_the_checkout_holds_every_module_and_the_demo_data(tmp_path: Path) -> None:
    # built from a copy of what the Dockerfile copies, so setuptools' build/ folder stays out of the checkout
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for folder in LAYERS:
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, timeout=600, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("cpfleet-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, name in LAYERS.items():
        for source in (REPO / folder).rglob("*.py"):
            rel = source.relative_to(REPO / folder)
            assert "/".join((*name.split("."), *rel.parts)) in names, source
    assert "cpfleet/demo/data/demo-problems.jsonl.gz" in names
    solutions = {p.name for p in (REPO / "cpfleet" / "demo" / "solutions").glob("*.py")}
    assert solutions and all(f"cpfleet/demo/solutions/{s}" in names for s in solutions)
