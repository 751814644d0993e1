"""An operator's Java (``CPFLEET_JAVA_HOME``): a JDK or a bare runtime (a JRE) installed outside the
system folders is shown to sandboxed programs at its own path, a runtime without ``javac`` runs
what the PATH's compiler builds for its release, and a home the sandbox cannot show (under /tmp,
/run...) makes Java unavailable by name instead of failing every test as if by the program."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import languages, programs
from cpfleet.sandbox.env import evaluate
from cpfleet.sandbox.languages import java as java_lang
from cpfleet.sandbox.runners import make_runner
from cpfleet.sandbox.zygote_process import toolchain_dirs

SUM = Problem.from_dict({"id": "java-home-sum", "hidden_tests": [{"input": "5 7\n", "output": "12\n"},
                                                                  {"input": "-1 1\n", "output": "0\n"}]})
ADDER = ("import java.util.*;\npublic class Main { public static void main(String[] a) {\n"
         "  Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }\n")


def _path_java() -> str:
    if languages.missing_tools("java"):
        pytest.skip(f"no Java toolchain here: {languages.missing_tools('java')}")
    return languages.get("java").run_argv[0]


@pytest.fixture()
def outside_tmp() -> Iterator[Path]:
    """A folder the sandbox can show at its own path: beside the checkout, or in the user's cache
    when the checkout itself is under /tmp."""
    build = Path(__file__).resolve().parents[1] / "build"
    if str(build.resolve()).startswith("/tmp/"):
        build = Path.home() / ".cache" / "cpfleet-tests"
    build.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="test-javahome-", dir=build))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def fresh_table() -> Iterator[None]:
    languages.table.cache_clear()
    languages.toolchain_version.cache_clear()
    try:
        yield
    finally:
        languages.table.cache_clear()
        languages.toolchain_version.cache_clear()


def _use_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CPFLEET_JAVA_HOME", str(home))
    languages.table.cache_clear()  # the table is built once per process from its environment
    languages.toolchain_version.cache_clear()


def _judges_java_in_the_sandbox() -> None:
    """A Java program judged OK by a fork server with this process's table (its Java folders bound)."""
    with make_runner("forkserver") as runner:
        if not runner.isolation.layers.get("hidden_fs"):
            pytest.skip("this runner has no private root here: nothing to show the Java folders in")
        result = evaluate(SUM, f"```java\n{ADDER}```", runner)
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation


def _runtime_home(root: Path, java: str) -> Path:
    """A Java runtime's folder without a compiler: ``bin/java`` only (a link to this host's JVM,
    which finds its libraries from its real path, as a JRE unpacked in /opt does)."""
    home = root / "jre"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").symlink_to(java)
    for p in (root, home, home / "bin"):
        p.chmod(0o755)
    return home


def test_a_java_runtime_outside_the_system_folders_judges_java_in_the_sandbox(
        outside_tmp: Path, fresh_table: None, monkeypatch: pytest.MonkeyPatch) -> None:
    java = _path_java()
    home = _runtime_home(outside_tmp, java)
    _use_home(monkeypatch, home)
    lang = languages.get("java")
    assert lang.run_argv[0] == str(home / "bin" / "java")
    # no javac in the home: the PATH's compiles, for the same release (no --release needed)
    assert lang.compile is not None and lang.compile.argv[0] != str(home / "bin" / "javac")
    assert "--release" not in lang.compile.argv
    assert lang.sandbox_dirs == (str(home),) and str(home) in toolchain_dirs()
    assert languages.missing_tools("java") == []
    # without the bind the JVM's path does not exist in the sandbox: INTERNAL on every test
    _judges_java_in_the_sandbox()


def test_a_runtime_older_than_the_paths_javac_gets_class_files_of_its_release(
        outside_tmp: Path, fresh_table: None, monkeypatch: pytest.MonkeyPatch) -> None:
    java = _path_java()
    javac_release = java_lang.java_release(languages.get("java").compile.argv[0])  # type: ignore[union-attr]
    if javac_release <= 11:
        pytest.skip(f"the PATH's javac is release {javac_release}: no older runtime to stand for")
    # a runtime that says it is release 11 (it runs this host's JVM): class files of the
    # compiler's own release would be refused there at every test, an error of the host's making
    home = outside_tmp / "jre11"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text(
        '#!/bin/sh\nif [ "$1" = -version ]; then echo \'openjdk version "11.0.22" 2024-01-16\' >&2; exit 0; fi\n'
        f'exec {java} "$@"\n')
    (home / "bin" / "java").chmod(0o755)
    for p in (outside_tmp, home, home / "bin"):
        p.chmod(0o755)
    _use_home(monkeypatch, home)
    assert java_lang.java_release(str(home / "bin" / "java")) == 11
    lang = languages.get("java")
    assert lang.compile is not None
    release = lang.compile.argv.index("--release")
    assert lang.compile.argv[release + 1] == "11"
    with make_runner("forkserver") as runner:
        built = programs.compile_program(runner, "java", {"Main.java": ADDER}, ["Main.java"],
                                         cache=programs.CompileCache(str(outside_tmp / "cache")))
        assert built.ok and built.image is not None, built.diagnostics
        klass = built.image.files["Main.class"][0]
        assert int.from_bytes(klass[6:8], "big") == 55  # Java 11's class file version
        result = evaluate(SUM, f"```java\n{ADDER}```", runner)
    assert (result.verdict, result.reward) == (Verdict.OK, 1.0), result.observation


@pytest.mark.parametrize("under", ["tmp", "run"])
def test_a_java_home_the_sandbox_cannot_show_makes_java_unavailable_by_name(
        under: str, tmp_path: Path, fresh_table: None, monkeypatch: pytest.MonkeyPatch) -> None:
    java = _path_java()
    # /tmp is each test's own folder in the sandbox, /run a link to it: a home there is not
    # bound (binding under /run would even break the sandbox's root) and Java says why
    home = _runtime_home(tmp_path, java) if under == "tmp" else Path("/run/cpfleet-no-such-jre")
    _use_home(monkeypatch, home)
    missing = languages.missing_tools("java")
    assert any(str(home) in m and "cannot see it" in m for m in missing), missing
    assert str(home) not in toolchain_dirs()
    assert "java (missing: " in languages.availability_line()
    assert os.path.isabs(languages.get("java").run_argv[0])


def test_a_java_home_linking_into_another_installation_judges_java_in_the_sandbox(
        outside_tmp: Path, fresh_table: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # a home of links (bin/java and bin/javac) into a Java installation outside the system folders
    # (here a runtime image jlink makes): binding the home alone left the compiler's real path
    # absent in the sandbox, "javac: not found", every program's COMPILE_ERROR
    _path_java()
    jlink = shutil.which("jlink", path="/usr/local/bin:/usr/bin:/bin") or shutil.which("jlink")
    if jlink is None:
        pytest.skip("no jlink here to make a Java installation outside the system folders")
    image = outside_tmp / "image"
    made = subprocess.run([jlink, "--add-modules", "java.base,jdk.compiler", "--no-header-files", "--no-man-pages",
                           "--output", str(image)], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    home = outside_tmp / "home"
    (home / "bin").mkdir(parents=True)
    for tool in ("java", "javac"):
        (home / "bin" / tool).symlink_to(image / "bin" / tool)
    for p in (outside_tmp, home, home / "bin"):
        p.chmod(0o755)
    _use_home(monkeypatch, home)
    assert set(languages.get("java").sandbox_dirs) == {str(home), str(image)}
    _judges_java_in_the_sandbox()


def test_a_java_home_reached_through_a_chain_of_links_judges_java_in_the_sandbox(
        outside_tmp: Path, fresh_table: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # java -> current -> jre (as a version manager's "current" link is): each link is recreated
    # as a link in the sandbox, so one left out (current) made the JVM's path dangle there, every
    # test INTERNAL while Java was announced as available
    _runtime_home(outside_tmp, _path_java())
    (outside_tmp / "current").symlink_to("jre")
    (outside_tmp / "java").symlink_to("current")
    _use_home(monkeypatch, outside_tmp / "java")
    assert {str(outside_tmp / name) for name in ("java", "current", "jre")} <= set(toolchain_dirs())
    _judges_java_in_the_sandbox()


def test_a_java_home_holding_a_folder_the_sandbox_makes_leaves_the_sandbox_whole(
        fresh_table: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # /var holds /var/tmp, which the sandbox's root makes itself (a link to the test's folder):
    # bound read-only there, it left the root no place for it, and the minimal root failed for
    # every language (host files visible to programs, the self-test failed)
    _path_java()
    _use_home(monkeypatch, Path("/var"))
    assert "/var" not in toolchain_dirs()
    assert any(m.startswith("/var (") and "cannot see it" in m for m in languages.missing_tools("java"))
    with make_runner("forkserver") as runner:
        if not runner.isolation.layers.get("mountns"):
            pytest.skip("no mount namespace here: no minimal root to keep")
        assert runner.isolation.layers.get("hidden_fs"), runner.isolation.notes
