"""What a new user meets first: one version, every option's help naming its default, the
verdict codes documented as the code has them, a float mismatch that says how close was close
enough. Real CLI through subprocess where it is a CLI behaviour."""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cpfleet import __version__
from cpfleet.cli import SUBCOMMANDS, build_parser
from cpfleet.core.checkers import get_checker
from cpfleet.core.verdict import Verdict
from cpfleet.rewards import VERDICT_CODES

REPO = Path(__file__).resolve().parents[1]


def test_version_is_one_and_printed_by_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "cpfleet", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"cpfleet {__version__}"
    # the installed distribution's metadata is read from the same attribute (pyproject: dynamic)
    assert importlib.metadata.version("cpfleet") == __version__
    assert 'version = "' not in (REPO / "pyproject.toml").read_text().split("[project]")[1].split("[")[0]


def _subparser(name: str) -> argparse.ArgumentParser:
    parser, _ = build_parser([name])
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub: argparse.ArgumentParser = action.choices[name]
    return sub


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_option_has_help_that_names_its_default(command: str) -> None:
    sub = _subparser(command)
    formatter = sub._get_formatter()
    missing = []
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        text = formatter._expand_help(action) if action.help else ""
        takes_value = action.nargs != 0
        if not text or (action.option_strings and takes_value and "default" not in text.lower()):
            missing.append(f"{'/'.join(action.option_strings) or action.dest}: {text!r}")
    assert not missing, f"cpfleet {command}: options without help or default: {missing}"


def test_help_of_the_options_the_issue_named() -> None:
    prepare = subprocess.run([sys.executable, "-m", "cpfleet", "prepare", "--help"], capture_output=True, text=True, timeout=60)
    assert re.search(r"--split SPLIT\s+dataset split .*\(default: test\)", " ".join(prepare.stdout.split())), prepare.stdout
    serve = subprocess.run([sys.executable, "-m", "cpfleet", "serve", "--help"], capture_output=True, text=True, timeout=60)
    flat = " ".join(serve.stdout.split())
    assert "--port PORT TCP port (default: 8080)" in flat
    assert re.search(r"--redis URL .*\(default: \$CPFLEET_REDIS_URL, else redis://", flat), flat


def test_verdict_table_in_the_docs_matches_the_code() -> None:
    text = (REPO / "docs" / "verdicts.md").read_text()
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| (\d+) \|", text, re.M))
    assert {k: int(v) for k, v in rows.items()} == VERDICT_CODES
    assert set(VERDICT_CODES) == {str(v) for v in Verdict}
    for verdict in Verdict:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{verdict}` |"))
        assert ("| true |" in row) == verdict.is_infra


@pytest.mark.parametrize(
    ("spec", "expected", "got", "words"),
    [
        ({"type": "float", "abs": 1e-4, "rel": 1e-9}, "0.5\n", "0.51\n", "within absolute 0.0001 or relative 1e-09"),
        ({"type": "float"}, "1 2.5\n", "1 2.6\n", "within absolute 1e-06 or relative 1e-06"),
        ({"type": "float", "float_tolerance": 1e-3}, "3.0\n", "3.5\n", "allowed: absolute 0.001 or relative 0.001"),
    ],
)
def test_float_mismatch_names_the_tolerance(spec: dict, expected: str, got: str, words: str) -> None:
    result = get_checker(spec).check(expected, got)
    assert not result.ok
    assert words in result.detail, result.detail


def test_ctrl_c_while_the_subcommand_module_is_imported_is_exit_130_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # a user who presses Ctrl-C right after Enter interrupts the subcommand's import (a few
    # tenths of a second for `judge`): main() answers 130 with one line, as it does later on
    import cpfleet.cli

    def interrupted(name: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cpfleet.cli.importlib, "import_module", interrupted)
    assert cpfleet.cli.main(["judge", "p.jsonl", "j.jsonl"]) == 130
    assert capsys.readouterr().err == "cpfleet: interrupted\n"


def test_ctrl_c_before_a_command_prints_its_own_summary_names_the_command(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # e.g. `cpfleet submit` interrupted while it connects: the line names the command, as its
    # other lines do, not a bare "interrupted"
    import cpfleet.cli
    import cpfleet.jobs.submit

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cpfleet.jobs.submit, "run", interrupted)
    assert cpfleet.cli.main(["submit", "jobs.jsonl"]) == 130
    assert capsys.readouterr().err == "cpfleet submit: interrupted\n"


@pytest.mark.parametrize("token", [" ", "sekrit\n", " sekrit"])
def test_serve_refuses_a_token_no_client_could_send(token: str) -> None:
    # the gateway strips the Authorization value it reads, so such a token would make every
    # request a 401 with no sign of why; and a blank one must not open a public port
    from cpfleet.gateway import serve

    parser = argparse.ArgumentParser()
    serve.configure(parser)
    args = parser.parse_args(["--host", "0.0.0.0", "--token", token])
    with pytest.raises(SystemExit, match="--token has blanks at its ends"):
        serve.config_from_args(args)


@pytest.mark.parametrize("command", ["judge", "serve"])
def test_a_sigterm_while_the_commands_module_imports_stops_it_as_ctrl_c_with_143(command: str) -> None:
    """The signal is sent by the process to itself at the moment the command's module starts to
    import (an import hook), the window a `timeout` or a scheduler's stop hit at random: it killed
    the command by signal (-15) where a moment later it stopped with a line and 143."""
    script = (
        "import os, signal, sys\n"
        "class Hook:\n"
        "    def find_spec(self, name, path, target=None):\n"
        f"        if name == {SUBCOMMANDS[command][0]!r}:\n"
        "            os.kill(os.getpid(), signal.SIGTERM)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Hook())\n"
        "from cpfleet.cli import main\n"
        f"sys.exit(main([{command!r}, '--help']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 143, (proc.returncode, proc.stderr)
    assert proc.stderr == "cpfleet: interrupted\n" and proc.stdout == ""
