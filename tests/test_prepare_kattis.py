"""``cpfleet prepare`` on folders of Kattis / ICPC problem packages.

Two sources: small packages written here, one per feature (float flags, a custom validator, an
interactor, the 2023-07 layout, a scoring problem, submissions in every language), and the 31
real packages of ../shared/data/icpc-kattis-31.jsonl.gz written back out as package folders,
whose conversion must give the shared file's tests, checkers, limits and submissions back.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import SHARED_DATA_ENV, find_shared_data

from cpfleet.core.checkers import get_checker
from cpfleet.core.problem import Problem
from cpfleet.core.records import loader_check, record_errors
from cpfleet.datasets.formats.kattis import DEFAULT_MEMORY_MB, NO_REFERENCE, NO_SECRET_TEST
from cpfleet.datasets.prepare import HIDDEN_CAP_SHOWN_ONLY, PrepareOptions, PrepareSummary, prepare

REPO = Path(__file__).resolve().parents[1]
ICPC = find_shared_data() / "icpc-kattis-31.jsonl.gz"

VALIDATE_CPP = '#include "validate.h"\nint main(int argc, char **argv) { init_io(argc, argv); accept(); }\n'
VALIDATE_H = "#pragma once\nvoid init_io(int, char**);\nvoid accept();\n"
INTERACTOR_PY = "import sys\nprint(42, flush=True)\nsys.exit(42 if input().strip() == 'ok' else 43)\n"


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def run(src: Path, tmp_path: Path, **opts: Any) -> tuple[PrepareSummary, dict[str, dict[str, Any]]]:
    out = tmp_path / "out.jsonl"
    summary = prepare(str(src), out, PrepareOptions(**opts), progress=False)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for rec in records:
        assert record_errors(rec) == [], rec["id"]
    return summary, {r["id"]: r for r in records}


def pairs(rec: dict[str, Any], key: str) -> list[tuple[str, str]]:
    return [(t["input"], t["output"]) for t in rec[key]]


@pytest.fixture
def contest(tmp_path: Path) -> Path:
    root = tmp_path / "mycontest"
    write(root / "floaty", {
        "problem.yaml": "name: Floaty\nvalidator_flags: float_tolerance 1e-4\nlimits:\n  memory: 1024\n",
        ".timelimit": "2\n",
        "problem_statement/problem.en.tex": "\\problemname{Floaty}\nPrint a half.\n",
        "data/sample/1.in": "1\n", "data/sample/1.ans": "0.5\n",
        "data/secret/group1/01.in": "2\n", "data/secret/group1/01.ans": "1.0\n",
        "data/secret/group1/02.in": "3\n", "data/secret/group1/02.ans": "1.5\n",
        "data/secret/group2/01.in": "4\n", "data/secret/group2/01.ans": "2.0\n",
        "data/secret/orphan.in": "5\n",  # no .ans: dropped and counted
        "submissions/accepted/half.py": "print(int(input()) / 2)\n",
        "submissions/accepted/half.cpp": "#include <cstdio>\nint main(){int n;scanf(\"%d\",&n);printf(\"%f\\n\",n/2.0);}\n",
        "submissions/accepted/Half.java": "class Half { public static void main(String[] a) {} }\n",
        "submissions/accepted/half.kt": "fun main() {}\n",
        "submissions/accepted/multi/main.py": "print(0)\n",
        "submissions/wrong_answer/floor.py": "print(int(input()) // 2)\n",
        "submissions/wrong_answer/old.py": "#!/usr/bin/env python2\nprint int(raw_input()) / 2.0\n",
        "submissions/time_limit_exceeded/slow.c": "int main(){for(;;);}\n",
        "submissions/slow_accepted/slow.py": "print(int(input()) / 2)\n",
    })
    write(root / "anyanswer", {
        "problem.yaml": "name: {en: Any Answer}\nvalidation: custom\nvalidator_flags: case_sensitive\n",
        "domjudge-problem.ini": "timelimit='3'\n",
        "data/sample/a.in": "1\n", "data/sample/a.ans": "1\n",
        "data/secret/b.in": "2\n", "data/secret/b.ans": "2\n",
        "output_validators/val/validate.cpp": VALIDATE_CPP,
        "output_validators/val/validate.h": VALIDATE_H,
    })
    write(root / "guessing", {
        "problem.yaml": "name: Guessing\nvalidation: custom interactive\n",
        "data/sample/1.in": "42\n",  # interactive samples often have no .ans
        "data/secret/1.in": "7\n", "data/secret/1.ans": "\n",
        "output_validators/interactor/interactor.py": INTERACTOR_PY,
    })
    write(root / "newformat", {
        "problem.yaml": "problem_format_version: 2023-07-draft\nname: New\ntype: pass-fail\nlimits:\n  time_limit: 1.5\n",
        "data/sample/1.in": "x\n", "data/sample/1.ans": "x\n",
        "data/secret/1.in": "y\n", "data/secret/1.ans": "y\n",
        "output_validator/validate.cpp": VALIDATE_CPP,
        "output_validator/validate.h": VALIDATE_H,
    })
    write(root / "plain", {
        "problem.yaml": "name: Plain\n",
        "data/sample/1.in": "a\n", "data/sample/1.ans": "A\n",
        "data/secret/1.in": "b\n", "data/secret/1.ans": "B\n",
    })
    write(root / "scored", {
        "problem.yaml": "name: Scored\ntype: scoring\n",
        "data/sample/1.in": "1\n", "data/sample/1.ans": "1\n",
        "data/secret/1.in": "1\n", "data/secret/1.ans": "1\n",
    })
    write(root / "noval", {
        "problem.yaml": "name: Missing validator\nvalidation: custom\n",
        "data/sample/1.in": "1\n", "data/sample/1.ans": "1\n",
        "data/secret/1.in": "1\n", "data/secret/1.ans": "1\n",
    })
    return root


def test_kattis_packages_tests_limits_checkers_and_skips(contest: Path, tmp_path: Path) -> None:
    summary, recs = run(contest, tmp_path)
    assert summary.format == "kattis"
    assert (summary.read, summary.kept) == (7, 5), summary.lines()
    assert summary.skipped == {"scoring problem (per-group scores, not pass/fail)": 1,
                               "custom validation but no output_validators folder": 1}
    assert summary.examples["scoring problem (per-group scores, not pass/fail)"] == ["mycontest/scored"]
    # the interactive package has no reference solution without --with-solutions: said so
    assert summary.notes == {"secret test without .ans dropped": 1, NO_REFERENCE: 1}
    assert any("interactive problems without a reference solution" in line for line in summary.lines())

    floaty = recs["mycontest/floaty"]
    assert floaty["name"] == "Floaty" and floaty["description"].startswith("\\problemname{Floaty}")
    assert pairs(floaty, "public_tests") == [("1\n", "0.5\n")]
    # the reward covers the samples too, first, as Kattis judges them
    assert pairs(floaty, "hidden_tests") == [("1\n", "0.5\n"), ("2\n", "1.0\n"), ("3\n", "1.5\n"), ("4\n", "2.0\n")]
    assert (floaty["time_limit_s"], floaty["time_limit_source"], floaty["memory_limit_mb"]) == (2.0, ".timelimit", 1024)
    assert floaty["memory_limit_source"] == "problem.yaml"
    assert floaty["checker"] == {"type": "float", "validator_flags": "float_tolerance 1e-4", "float_tolerance": 1e-4}
    assert "submissions" not in floaty and "correct_solutions" not in floaty  # only with --with-solutions
    # Kattis judges Python 3 with PyPy: so does a prepared package
    assert all(rec["python3_interpreter"] == "pypy3" for rec in recs.values())
    assert Problem.from_dict(floaty).judged_language("python3") == "pypy3"

    anyanswer = recs["mycontest/anyanswer"]
    assert anyanswer["name"] == "Any Answer"
    assert (anyanswer["time_limit_s"], anyanswer["time_limit_source"]) == (3.0, "domjudge-problem.ini")
    assert anyanswer["checker"] == {
        "type": "kattis_validator", "validation": "custom", "language": "cpp",
        "files": {"output_validators/val/validate.cpp": VALIDATE_CPP, "output_validators/val/validate.h": VALIDATE_H},
        "entry_points": ["output_validators/val/validate.cpp"], "validator_flags": "case_sensitive",
    }

    guessing = recs["mycontest/guessing"]
    assert guessing["checker"] == {
        "type": "interactive", "validation": "custom interactive", "language": "python3",
        "files": {"output_validators/interactor/interactor.py": INTERACTOR_PY},
        "entry_points": ["output_validators/interactor/interactor.py"], "validator_flags": None,
    }
    assert guessing["problem_type"] == "interactive"
    assert pairs(guessing, "public_tests") == [("42\n", "")] and pairs(guessing, "hidden_tests") == [("42\n", ""), ("7\n", "\n")]
    assert (guessing["time_limit_s"], guessing["time_limit_source"]) == (None, None)

    new = recs["mycontest/newformat"]
    assert (new["time_limit_s"], new["time_limit_source"]) == (1.5, "problem.yaml")
    assert new["checker"]["type"] == "kattis_validator"
    assert new["checker"]["entry_points"] == ["output_validator/validate.cpp"]

    assert recs["mycontest/plain"]["checker"] == {"type": "exact_tokens"}


def test_kattis_submissions_by_verdict_and_language(contest: Path, tmp_path: Path) -> None:
    summary, recs = run(contest / "floaty", tmp_path, with_solutions=True)
    assert summary.kept == 1
    floaty = recs["mycontest/floaty"]  # a single package keeps its contest folder in the id
    got = sorted((s["file"], s["language"], s["dir"], s["expected"]) for s in floaty["submissions"])
    assert got == [
        ("submissions/accepted/Half.java", "java", "accepted", "accepted"),
        ("submissions/accepted/half.cpp", "cpp", "accepted", "accepted"),
        ("submissions/accepted/half.py", "python3", "accepted", "accepted"),
        ("submissions/slow_accepted/slow.py", "python3", "slow_accepted", "accepted"),
        ("submissions/time_limit_exceeded/slow.c", "c", "time_limit_exceeded", "time_limit_exceeded"),
        ("submissions/wrong_answer/floor.py", "python3", "wrong_answer", "wrong_answer"),
    ]
    assert floaty["correct_solutions"] == ["print(int(input()) / 2)\n", "print(int(input()) / 2)\n"]
    assert floaty["incorrect_solutions"] == ["print(int(input()) // 2)\n"]
    assert summary.solutions["submissions python2 dropped"] == 1
    assert summary.solutions["submissions multi-file dropped"] == 1
    assert summary.solutions["submissions in other languages (.kt) dropped"] == 1


def test_an_interactive_package_without_a_reference_is_named_in_the_summary(contest: Path, tmp_path: Path) -> None:
    """No correct solution can vouch for its interactor (sandbox/interactive.py): said in the
    summary, with or without --with-solutions, until an accepted Python 3 submission gives one."""
    for opts in ({}, {"with_solutions": True}):
        summary, recs = run(contest / "guessing", tmp_path, **opts)
        assert summary.notes[NO_REFERENCE] == 1, summary.lines()
    write(contest / "guessing", {"submissions/accepted/guess.py": "print(1)\n"})
    summary, recs = run(contest / "guessing", tmp_path, with_solutions=True)
    assert recs["mycontest/guessing"]["correct_solutions"] == ["print(1)\n"]
    assert NO_REFERENCE not in summary.notes, summary.lines()


def test_every_kattis_record_builds_its_checker_and_loads(contest: Path, tmp_path: Path) -> None:
    summary, recs = run(contest, tmp_path)
    for rec in recs.values():
        get_checker(rec["checker"])  # every kind and Kattis parameter prepare writes is registered
        error, checked = loader_check(rec)
        assert error is None and checked
    assert not summary.unchecked


def test_cli_kattis_folder(contest: Path, tmp_path: Path) -> None:
    out = tmp_path / "k.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "cpfleet", "prepare", "--dataset", str(contest), "--out", str(out), "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "(kattis): read 7, kept 5, skipped 2" in proc.stderr
    assert "mycontest/scored" in proc.stderr
    assert len(out.read_text().splitlines()) == 5


def test_a_package_with_a_symlink_or_fifo_is_skipped_and_nothing_outside_is_read(tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("SECRET OUTSIDE THE PACKAGE\n")
    root = tmp_path / "c"
    base = {"problem.yaml": "name: X\n", "data/sample/1.in": "1\n", "data/sample/1.ans": "1\n"}
    write(root / "linked", {**base, "data/secret/1.in": "1\n"})
    (root / "linked" / "data" / "secret" / "1.ans").symlink_to(secret)
    write(root / "linkeddir", base)
    (root / "linkeddir" / "data" / "secret").symlink_to(tmp_path)  # a whole folder elsewhere
    write(root / "piped", {**base, "data/secret/1.ans": "1\n"})
    os.mkfifo(root / "piped" / "data" / "secret" / "1.in")  # reading it would never end
    write(root / "fine", {**base, "data/secret/1.in": "2\n", "data/secret/1.ans": "2\n"})
    write(tmp_path, {"2.in": "3\n", "2.ans": "3\n"})  # what the linked folder would show
    out = tmp_path / "o.jsonl"
    summary = prepare(str(root), out, PrepareOptions(), progress=False)
    assert (summary.read, summary.kept) == (4, 1), summary.lines()
    assert all(r.startswith("unreadable package (") for r in summary.skipped)
    assert sorted(x for rows in summary.examples.values() for x in rows) == ["c/linked", "c/linkeddir", "c/piped"]
    assert "SECRET" not in out.read_text() and json.loads(out.read_text())["id"] == "c/fine"


def test_a_package_with_a_file_name_that_is_not_utf8_is_skipped_and_the_rest_are_written(tmp_path: Path) -> None:
    """A submission's file name is kept in the record: read from a name that is not UTF-8 it held
    a lone surrogate no UTF-8 writer encodes, and the whole prepare run ended in a traceback
    with nothing written (a quoted one in problem.yaml's name did the same)."""
    root = tmp_path / "c"
    base = {"data/sample/1.in": "1\n", "data/sample/1.ans": "1\n", "data/secret/2.in": "2\n", "data/secret/2.ans": "2\n"}
    write(root / "badsub", {**base, "problem.yaml": "name: X\n"})
    sub = root / "badsub" / "submissions" / "accepted"
    sub.mkdir(parents=True)
    (sub / os.fsdecode(b"sol\xff.py")).write_text("print(1)\n")
    write(root / "badname", {**base, "problem.yaml": 'name: "bad \\udcff name"\n'})
    write(root / "fine", {**base, "problem.yaml": "name: Fine\n", "submissions/accepted/a.py": "print(1)\n"})
    summary, recs = run(root, tmp_path, with_solutions=True)
    assert (summary.read, summary.kept) == (3, 1), summary.lines()
    assert list(recs) == ["c/fine"]
    assert all("lone surrogate" in r for r in summary.skipped), summary.skipped


def test_a_package_without_secret_tests_is_skipped_never_rewarded_from_its_samples(tmp_path: Path) -> None:
    """The hidden tests are the samples followed by the secret ones: with no secret test (none
    shipped, none with an .ans, or only the samples again) they were the samples alone, whose
    answers the statement and the feedback show, so a program printing them was paid 1.0."""
    root = tmp_path / "c"
    sample = {"problem.yaml": "name: X\n", "data/sample/1.in": "7\n", "data/sample/1.ans": "49\n"}
    write(root / "samplesonly", sample)
    write(root / "noanswers", {**sample, "data/secret/2.in": "8\n"})  # its .ans missing: dropped
    write(root / "again", {**sample, "data/secret/1.in": "7\n", "data/secret/1.ans": "49\n"})  # the sample again
    write(root / "fine", {**sample, "data/secret/2.in": "8\n", "data/secret/2.ans": "64\n"})
    summary, recs = run(root, tmp_path)
    assert (summary.read, summary.kept) == (4, 1), summary.lines()
    assert list(recs) == ["c/fine"]
    assert summary.skipped == {NO_SECRET_TEST: 3}


def test_max_hidden_that_would_keep_only_the_samples_skips_the_package(tmp_path: Path) -> None:
    """The samples come first among the hidden tests: ``--max-hidden 2`` on a package with two
    samples kept the samples alone, so the reward was paid for printing the statement's answers."""
    root = tmp_path / "c"
    samples = {"problem.yaml": "name: X\n", "data/sample/1.in": "1\n", "data/sample/1.ans": "1\n",
               "data/sample/2.in": "2\n", "data/sample/2.ans": "4\n"}
    write(root / "twosamples", {**samples, "data/secret/3.in": "3\n", "data/secret/3.ans": "9\n"})
    write(root / "onesample", {"problem.yaml": "name: Y\n", "data/sample/1.in": "1\n", "data/sample/1.ans": "1\n",
                               "data/secret/3.in": "3\n", "data/secret/3.ans": "9\n",
                               "data/secret/4.in": "4\n", "data/secret/4.ans": "16\n"})
    summary, recs = run(root, tmp_path, max_hidden=2)
    assert (summary.read, summary.kept) == (2, 1), summary.lines()
    assert summary.skipped == {HIDDEN_CAP_SHOWN_ONLY: 1}
    assert pairs(recs["c/onesample"], "hidden_tests") == [("1\n", "1\n"), ("3\n", "9\n")]


# YAML aliases nest: this 500-byte problem.yaml names a list of 9**10 strings, which reading its
# name as text spelled out (25 GB: all the memory, or hours) in the prepare process. The package is
# skipped as unreadable; a problem.yaml that uses an alias as intended still converts.
def test_a_problem_yaml_of_nested_aliases_skips_its_package_alone(tmp_path: Path) -> None:
    laughs = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    laughs += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    root = tmp_path / "c"
    base = {"data/sample/1.in": "1\n", "data/sample/1.ans": "1\n", "data/secret/2.in": "2\n", "data/secret/2.ans": "2\n"}
    write(root / "laughs", {**base, "problem.yaml": "\n".join(laughs) + "\nname: *a9\n"})
    write(root / "fine", {**base, "problem.yaml": "author: &who Ann\nname: *who\n"})
    summary, recs = run(root, tmp_path)
    assert (summary.read, summary.kept) == (2, 1), summary.lines()
    (reason,) = summary.skipped
    assert reason.startswith("unreadable package (") and "over 100000 values" in reason, reason
    assert recs["c/fine"]["name"] == "Ann"


def test_a_problem_yaml_naming_one_long_string_many_times_skips_its_package(tmp_path: Path) -> None:
    # 140 kB: a string of 100 kB under an anchor, named 10k times in validator_flags (a list the
    # flags are joined from): 1 GB of flags in the record (a minute, 3 GB of memory), under the
    # count of values
    big = "x" * 100_000
    flood = f'name: Z\nbig: &a "{big}"\nvalidator_flags: [{", ".join(["*a"] * 10_000)}]\n'
    root = tmp_path / "c"
    base = {"data/sample/1.in": "1\n", "data/sample/1.ans": "1\n", "data/secret/2.in": "2\n", "data/secret/2.ans": "2\n"}
    write(root / "flood", {**base, "problem.yaml": flood})
    write(root / "fine", {**base, "problem.yaml": "name: Fine\nvalidator_flags: case_sensitive\n"})
    summary, recs = run(root, tmp_path)
    assert (summary.read, summary.kept) == (2, 1), summary.lines()
    (reason,) = summary.skipped
    assert "over 100000 values or" in reason, reason
    assert recs["c/fine"]["checker"] == {"type": "exact_tokens", "validator_flags": "case_sensitive"}


# validator_flags are read as shell words in the prepare process: shlex adds a word's characters
# one at a time, time quadratic in a long word (400k characters 2 s, this one's 6M about 8 minutes);
# they are read once, the same words. Flags a shell could not read (a quote left open) skip their
# package as unreadable, naming why, instead of ending prepare with a traceback.
def test_validator_flags_with_a_long_word_or_an_open_quote_are_read_once(tmp_path: Path) -> None:
    root = tmp_path / "c"
    base = {"data/sample/1.in": "1\n", "data/sample/1.ans": "1\n", "data/secret/2.in": "2\n", "data/secret/2.ans": "2\n"}
    write(root / "long", {**base, "problem.yaml": f"validator_flags: float_tolerance '1e-6' {'a' * 6_000_000}\n"})
    write(root / "open", {**base, "problem.yaml": "validator_flags: float_tolerance \"1e-6\n"})
    summary, recs = run(root, tmp_path)
    assert (summary.read, summary.kept) == (2, 1), summary.lines()
    checker = recs["c/long"]["checker"]
    assert (checker["type"], checker["float_tolerance"]) == ("float", 1e-6)
    (reason,) = summary.skipped
    assert reason.startswith("unreadable package (validator_flags") and "No closing quotation" in reason, reason


# configparser reads a line of blanks between two words in time quadratic in it (40k characters
# 10 s, this 1 MB hours), in the prepare process: a domjudge-problem.ini longer than a real one's
# few lines is read as unparsable, so the time limit comes from the next source, as for any
# domjudge-problem.ini that does not parse.
def test_a_padded_domjudge_problem_ini_is_not_parsed(tmp_path: Path) -> None:
    root = tmp_path / "c"
    base = {"data/sample/1.in": "1\n", "data/sample/1.ans": "1\n", "data/secret/2.in": "2\n", "data/secret/2.ans": "2\n",
            "problem.yaml": "name: X\n"}
    write(root / "padded", {**base, "domjudge-problem.ini": "timelimit = 3\nx" + " " * 1_000_000 + "y\n"})
    write(root / "plain", {**base, "domjudge-problem.ini": "timelimit = '3'\n"})
    _, recs = run(root, tmp_path)
    assert recs["c/plain"]["time_limit_s"] == 3.0
    assert recs["c/padded"]["time_limit_source"] is None and recs["c/padded"]["time_limit_s"] is None


def test_a_folder_without_packages_is_a_clear_error(tmp_path: Path) -> None:
    from cpfleet.core.errors import PrepareError

    (tmp_path / "empty").mkdir()
    with pytest.raises(PrepareError, match="no Kattis problem package"):
        prepare(str(tmp_path / "empty"), tmp_path / "o.jsonl", PrepareOptions(fmt="kattis"), progress=False)


# --- the 31 real packages of the shared ICPC file ----------------------------------------------


def unpack(rec: dict[str, Any], root: Path) -> None:
    """Write a shared-file record back out as the package it came from."""
    contest, short = rec["id"].split("/")
    pkg = root / contest / short
    chk = rec["checker"]
    meta: dict[str, Any] = {"name": rec["name"]}
    if chk["type"] in ("kattis_validator", "interactive"):
        if chk["validation"] == "default":  # an interactor under the 2023-07 `type` key
            meta.update(problem_format_version="2023-07-draft", type="interactive")
        else:
            meta["validation"] = chk["validation"]
        write(pkg, chk["files"])
    if chk.get("validator_flags"):
        meta["validator_flags"] = chk["validator_flags"]
    if rec.get("memory_limit_mb"):
        meta["limits"] = {"memory": rec["memory_limit_mb"]}
    files = {"problem.yaml": yaml.safe_dump(meta)}
    if rec["time_limit_source"] == ".timelimit":
        files[".timelimit"] = f"{rec['time_limit_s']}\n"
    elif rec["time_limit_source"] == "domjudge-problem.ini":
        files["domjudge-problem.ini"] = f"timelimit='{rec['time_limit_s']}'\n"
    for group, key in (("sample", "public_tests"), ("secret", "hidden_tests")):
        for i, t in enumerate(rec[key]):
            files[f"data/{group}/{i:03d}.in"] = t["input"]
            files[f"data/{group}/{i:03d}.ans"] = t["output"]
    for s in rec["submissions"]:
        files[s["file"]] = s["source"]
    files["problem_statement/problem.en.tex"] = rec["description"]
    for rel, text in files.items():
        p = pkg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode("utf-8"))  # byte for byte (statements carry \r\n)


def test_the_shared_icpc_packages_convert_back_to_the_shared_records(tmp_path: Path) -> None:
    if not ICPC.exists():
        pytest.skip(f"shared data not found: no {ICPC} (looked beside the repository and its parents; set {SHARED_DATA_ENV})")
    with gzip.open(ICPC, "rt", encoding="utf-8") as f:
        shared = [json.loads(line) for line in f]
    root = tmp_path / "packages"
    for rec in shared:
        unpack(rec, root)
    # 4 of them (3 interactive) have no sample tests: --min-public 0 keeps them
    summary, recs = run(root, tmp_path, with_solutions=True, min_public=0)
    assert (summary.read, summary.kept) == (len(shared), len(shared)), summary.lines()
    for want in shared:
        got = recs[want["id"]]
        assert pairs(got, "public_tests") == pairs(want, "public_tests"), want["id"]
        # the shared file keeps data/sample and data/secret apart; prepare's reward covers both
        assert pairs(got, "hidden_tests") == pairs(want, "public_tests") + pairs(want, "hidden_tests"), want["id"]
        assert got["checker"] == {k: v for k, v in want["checker"].items() if k != "protocol"}, want["id"]
        assert (got["time_limit_s"], got["time_limit_source"]) == (want["time_limit_s"], want["time_limit_source"])
        assert got["memory_limit_mb"] == (want["memory_limit_mb"] or DEFAULT_MEMORY_MB)
        assert got["name"] == want["name"] and got["description"] == want["description"]
        assert got["problem_type"] == ("interactive" if want["checker"]["type"] == "interactive" else "pass-fail")
        key = lambda s: s["file"]  # noqa: E731
        assert sorted(got["submissions"], key=key) == sorted(want["submissions"], key=key), want["id"]
        py = [s for s in want["submissions"] if s["language"] == "python3"]
        assert sorted(got["correct_solutions"]) == sorted(s["source"] for s in py if s["expected"] == "accepted")
        assert sorted(got["incorrect_solutions"]) == sorted(s["source"] for s in py if s["expected"] == "wrong_answer")
