"""The registries are the only declarations: every layer agrees with them (the checker-program
languages of the record check and of the loader, fence tags, dataset names, extensions), and
no module keeps its own copy of the language list."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from cpfleet.core import checkers
from cpfleet.core import languages as core_languages
from cpfleet.core.errors import CheckerSpecError
from cpfleet.core.records import checker_errors, languages_for
from cpfleet.sandbox import languages
from cpfleet.sandbox.extract import extract_program

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("language", [*core_languages.LANGUAGES, "build_run", "python", "c++", "pascal"])
@pytest.mark.parametrize("kind", ["kattis_validator", "interactive", "testlib"])
def test_the_record_check_and_the_loader_accept_the_same_checker_languages(kind: str, language: str) -> None:
    files = {"v/run": "#!/bin/sh\nexit 42\n"} if language == "build_run" else {"v/check.txt": "x"}
    spec = {"type": kind, "files": files, "entry_points": list(files), "language": language}
    shape_ok = not checker_errors(spec)
    try:
        checkers.get_checker(spec)
        loads = True
    except CheckerSpecError:
        loads = False
    assert shape_ok == loads, (checker_errors(spec), language)
    assert loads == (checkers.checker_language(language) is not None)


def test_every_declared_fence_tag_extension_and_dataset_name_reaches_its_language() -> None:
    for info in core_languages.BUILTIN:
        for tag in info.fence_tags:
            found = extract_program(f"```{tag}\nx\n```", allowed=(info.name,))
            assert found is not None and found.language == info.name, tag
        for ext in info.extensions:
            assert core_languages.by_extension(ext) == info.name
        for name in info.dataset_names:
            assert info.name in (languages_for(name) or [])
        assert info.name in languages.table(), "every built-in language has a toolchain"


def test_a_kattis_validator_in_a_language_checkers_cannot_use_is_skipped_with_the_reason(tmp_path: Path) -> None:
    from cpfleet.datasets.formats.kattis import program_checker

    folder = tmp_path / "output_validators" / "v"
    folder.mkdir(parents=True)
    (folder / "Validator.java").write_text("public class Validator {}\n")
    reason = program_checker(tmp_path, "kattis_validator", "custom", None, Counter())
    assert isinstance(reason, str) and "java" in reason and "checker programs are in" in reason


def test_no_module_keeps_its_own_copy_of_the_language_list() -> None:
    """A literal naming all five built-in languages outside core/languages.py is a second
    declaration that drifts (as records.py's did)."""
    names = [re.escape(f'"{n}"') for n in ("python3", "pypy3", "cpp", "c", "java")]
    copy = re.compile(r"\(\s*" + r"\s*,\s*".join(names))
    offenders = [str(p.relative_to(REPO)) for folder in ("core", "sandbox", "workers", "producer", "cpfleet")
                 for p in (REPO / folder).rglob("*.py")
                 if p.name != "languages.py" and copy.search(p.read_text())]
    assert offenders == []
