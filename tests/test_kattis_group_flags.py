"""Kattis packages: the validator flags a test is judged with are ``problem.yaml``'s
``validator_flags`` followed by its test group's ``output_validator_flags`` (a group's
``testdata.yaml``, else its parent group's), as problemtools passes them per test; a package
whose groups need different flags is skipped with that reason, never judged by one group's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cpfleet.core.checkers import get_checker
from cpfleet.datasets.prepare import PrepareOptions, prepare


def package(root: Path, files: dict[str, str]) -> Path:
    base = {"problem.yaml": "name: p\n", "data/sample/1.in": "1\n", "data/sample/1.ans": "0.5\n",
            "data/secret/2.in": "2\n", "data/secret/2.ans": "YES\n"}
    for rel, text in {**base, **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def convert(pkg: Path, tmp_path: Path) -> tuple[Any, list[dict[str, Any]]]:
    out = tmp_path / "out.jsonl"
    summary = prepare(str(pkg), out, PrepareOptions(min_public=0), progress=False)
    return summary, [json.loads(line) for line in out.read_text().splitlines()]


def test_problem_yaml_flags_and_the_root_testdata_flags_are_both_applied(tmp_path: Path) -> None:
    pkg = package(tmp_path / "c" / "p", {"problem.yaml": "name: p\nvalidator_flags: float_tolerance 1e-6\n",
                                         "data/testdata.yaml": "output_validator_flags: case_sensitive\n"})
    _, [rec] = convert(pkg, tmp_path)
    checker = get_checker(rec["checker"])
    assert checker.check("YES\n", "YES\n").ok
    assert not checker.check("YES\n", "yes\n").ok  # case_sensitive from testdata.yaml: problemtools refuses it
    assert checker.check("0.5\n", "0.5000001\n").ok  # float_tolerance from problem.yaml


def test_flags_set_in_the_groups_testdata_yaml_are_applied(tmp_path: Path) -> None:
    group = "output_validator_flags: float_tolerance 1e-4\n"
    pkg = package(tmp_path / "c" / "p", {"data/sample/testdata.yaml": group, "data/secret/testdata.yaml": group})
    _, [rec] = convert(pkg, tmp_path)
    assert get_checker(rec["checker"]).check("0.5\n", "0.50001\n").ok  # within the group's tolerance


def test_a_subgroup_inherits_its_parent_groups_flags(tmp_path: Path) -> None:
    pkg = package(tmp_path / "c" / "p", {"data/testdata.yaml": "output_validator_flags: float_tolerance 1e-4\n",
                                         "data/secret/g1/3.in": "3\n", "data/secret/g1/3.ans": "0.5\n"})
    _, [rec] = convert(pkg, tmp_path)
    assert get_checker(rec["checker"]).check("0.5\n", "0.50001\n").ok


def test_a_package_whose_groups_have_different_flags_is_skipped_with_the_reason(tmp_path: Path) -> None:
    pkg = package(tmp_path / "c" / "p", {"data/secret/testdata.yaml": "output_validator_flags: case_sensitive\n"})
    summary, records = convert(pkg, tmp_path)
    assert records == []
    [reason] = summary.skipped
    assert reason.startswith("test groups with different validator flags")


def test_a_package_without_group_flags_keeps_its_problem_yaml_flags(tmp_path: Path) -> None:
    pkg = package(tmp_path / "c" / "p", {"problem.yaml": "name: p\nvalidator_flags: float_tolerance 1e-6\n"})
    _, [rec] = convert(pkg, tmp_path)
    assert rec["checker"] == {"type": "float", "validator_flags": "float_tolerance 1e-6", "float_tolerance": 1e-6}


def test_output_validator_args_of_the_2023_07_format_are_applied(tmp_path: Path) -> None:
    # 2023-07 names them output_validator_args, a list of words; read as legacy flags only, the
    # package was judged case-insensitively: `yes` paid for `YES`
    pkg = package(tmp_path / "c" / "p", {"problem.yaml": "problem_format_version: 2023-07-draft\nname: p\n",
                                         "data/testdata.yaml": "output_validator_args: [case_sensitive]\n"})
    _, [rec] = convert(pkg, tmp_path)
    checker = get_checker(rec["checker"])
    assert checker.check("YES\n", "YES\n").ok and not checker.check("YES\n", "yes\n").ok


def test_a_2025_09_test_group_yaml_gives_its_groups_arguments(tmp_path: Path) -> None:
    group = "output_validator_args: [float_tolerance, '1e-4']\n"
    pkg = package(tmp_path / "c" / "p", {"problem.yaml": "problem_format_version: 2025-09\nname: p\n",
                                         "data/sample/test_group.yaml": group, "data/secret/test_group.yaml": group})
    _, [rec] = convert(pkg, tmp_path)
    assert get_checker(rec["checker"]).check("0.5\n", "0.50001\n").ok


def test_a_test_cases_own_arguments_count_as_its_flags(tmp_path: Path) -> None:
    # one test case's own .yaml makes it case-sensitive: one checker cannot judge both rules
    pkg = package(tmp_path / "c" / "p", {"problem.yaml": "problem_format_version: 2023-07-draft\nname: p\n",
                                         "data/secret/2.yaml": "output_validator_args: [case_sensitive]\n"})
    summary, records = convert(pkg, tmp_path)
    [reason] = summary.skipped
    assert records == [] and reason.startswith("test groups with different validator flags")
