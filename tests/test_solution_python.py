"""CPFLEET_SOLUTION_PYTHON: solutions run under a configured interpreter (a venv with extra
packages, as AtCoder offers numpy), in both runners, still confined."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpfleet.core.errors import SandboxBroken
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.runner import Limits
from cpfleet.sandbox.runners import RUNNER_KINDS, make_runner

CODE = "import solhelper\nprint(solhelper.answer())\n"


@pytest.fixture(scope="module")
def venv() -> Iterator[Path]:
    # not under /tmp (inside the sandbox /tmp is the test's directory): beside the checkout,
    # unless the checkout itself is under /tmp
    build = Path(__file__).resolve().parents[1] / "build"
    if str(build.resolve()).startswith("/tmp/"):
        build = Path.home() / ".cache" / "cpfleet-tests"
    build.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="test-solvenv-", dir=build))
    try:
        yield _make_venv(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _make_venv(root: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "v")], check=True)
    site = subprocess.run([str(root / "v" / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "solhelper.py").write_text("def answer():\n    return 42\n")
    # the sandbox uid must be able to read it, as any system site-packages
    for p in [root, *root.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644 if not p.name.startswith("python") else 0o755)
    return root / "v" / "bin" / "python"


@pytest.mark.parametrize("kind", RUNNER_KINDS)
def test_configured_interpreter_gives_solutions_its_packages(kind: str, venv: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with make_runner(kind) as plain:
        assert plain.load(CODE) is None
        assert plain.run(b"", Limits()).status == Verdict.RUNTIME_ERROR  # no such module by default
    monkeypatch.setenv("CPFLEET_SOLUTION_PYTHON", str(venv))
    with make_runner(kind) as runner:
        assert runner.isolation.level == "full" or not runner.isolation.layers.get("hidden_fs")
        assert runner.load(CODE) is None
        rr = runner.run(b"", Limits())
        assert (rr.status, rr.stdout) == (Verdict.OK, b"42\n"), rr.stderr


@pytest.mark.parametrize("kind", RUNNER_KINDS)
def test_an_interpreter_under_tmp_is_refused_as_a_setup_error(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # inside the sandbox /tmp is the test's own directory: every solution would fail to start
    monkeypatch.setenv("CPFLEET_SOLUTION_PYTHON", "/tmp/some-venv/bin/python")
    with pytest.raises(SandboxBroken, match="under /tmp"):
        make_runner(kind)
