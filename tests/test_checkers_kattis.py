"""The built-in Kattis comparisons (problemtools default_validator.cc rules) and the validation of
checker specs at load time: exact_tokens, float with validator_flags, program checker specs."""

from __future__ import annotations

from typing import Any

import pytest

from cpfleet.core.checkers import CheckerSpecError, ProgramSpec, get_checker
from cpfleet.core.problem import Problem, ProblemFormatError


def ok(spec: dict[str, Any], expected: str, got: str) -> bool:
    return get_checker(spec).check(expected, got).ok


@pytest.mark.parametrize(
    ("expected", "got", "accepted"),
    [
        ("Yes 1\n", "Yes   1", True),  # whitespace runs and the final newline do not matter
        ("Yes", "yes", True),  # case-insensitive, as the Kattis default validator
        ("1 2", "1 2 3", False),  # trailing output
        ("1 2", "1", False),
        ("1.0", "1.00", False),  # no tolerance without float flags
    ],
)
def test_exact_tokens(expected: str, got: str, accepted: bool) -> None:
    assert ok({"type": "exact_tokens"}, expected, got) is accepted


def test_exact_tokens_ignore_case_by_default_as_problemtools_does_and_count_it_on_request() -> None:
    assert ok({"type": "exact_tokens"}, "NO", "no")
    assert not ok({"type": "exact_tokens", "case_sensitive": True}, "NO", "no")
    assert not ok({"type": "exact_tokens", "validator_flags": "case_sensitive"}, "Yes", "YES")


@pytest.mark.parametrize(
    ("expected", "got", "accepted"),
    [
        ("a b\n", "a b\n", True),
        ("a b\n", "a  b\n", False),
        ("a b\n", "a b", False),  # the trailing newline is a whitespace run too
        ("a\nb\n", "a b\n", False),
    ],
)
def test_space_change_sensitive(expected: str, got: str, accepted: bool) -> None:
    assert ok({"type": "exact_tokens", "validator_flags": "space_change_sensitive"}, expected, got) is accepted


@pytest.mark.parametrize(
    ("expected", "got"),
    [
        ("1\n", "\n1"),  # the same run and token, the run moved to the front
        ("1 2\n", " 1\n2"),  # the same runs in the same order, each one place earlier
        ("1", " 1"),
    ],
)
def test_space_change_sensitive_whitespace_must_sit_where_the_answer_has_it(expected: str, got: str) -> None:
    # problemtools reads the answer's whitespace before each token and demands the same characters
    # from the output there: a leading run the answer lacks is "judge out of space"
    for spec in ({"type": "exact_tokens", "validator_flags": "space_change_sensitive"},
                 {"type": "float", "validator_flags": "float_tolerance 1e-6 space_change_sensitive"}):
        assert not ok(spec, expected, got)
        assert ok(spec, expected, expected)


@pytest.mark.parametrize(
    ("flags", "expected", "got", "accepted"),
    [
        ("float_tolerance 1e-6", "0.5", "0.5000001", True),
        ("float_tolerance 1e-6", "0.5", "0.50001", False),
        ("float_tolerance 1e-6", "1000000", "1000000.5", True),  # relative; integers are floats too
        ("float_absolute_tolerance 1e-6", "1000000", "1000000.5", False),
        ("float_relative_tolerance 1e-6", "0", "0.0000001", False),
        ("float_tolerance 1e-6", "0.5", "nan", False),
        ("float_tolerance 1e-6", "0.5", "abc", False),
        ("float_tolerance 1e-6", "IMPOSSIBLE", "impossible", True),  # words: case-insensitive by default
        ("float_tolerance 1e-6 case_sensitive", "IMPOSSIBLE", "impossible", False),
    ],
)
def test_float_with_kattis_flags(flags: str, expected: str, got: str, accepted: bool) -> None:
    assert ok({"type": "float", "validator_flags": flags}, expected, got) is accepted


@pytest.mark.parametrize(
    ("spec", "accepted"),
    [
        # the default validator reads its flags in order: float_tolerance sets both tolerances and
        # a later specific flag overrides its part, so 0.0001 for 0 is 1e-4 off, past absolute 1e-9
        ({"validator_flags": "float_tolerance 1e-3 float_absolute_tolerance 1e-9"}, False),
        ({"validator_flags": "float_absolute_tolerance 1e-9 float_tolerance 1e-3"}, True),
        # what cpfleet prepare writes: the flags' words copied as keys; the string's order stands
        ({"validator_flags": "float_tolerance 1e-3 float_absolute_tolerance 1e-9",
          "float_tolerance": 1e-3, "float_absolute_tolerance": 1e-9}, False),
        ({"validator_flags": "float_absolute_tolerance 1e-9 float_tolerance 1e-3",
          "float_tolerance": 1e-3, "float_absolute_tolerance": 1e-9}, True),
        # keys alone: the specific key refines the general one
        ({"float_tolerance": 1e-3, "float_absolute_tolerance": 1e-9}, False),
    ],
)
def test_a_specific_float_tolerance_after_float_tolerance_overrides_it_as_problemtools_reads_flags(
        spec: dict[str, Any], accepted: bool) -> None:
    assert ok({"type": "float", **spec}, "0", "0.0001") is accepted


def test_the_icpc_files_float_record_shape_is_accepted() -> None:
    spec = {"type": "float", "validator_flags": "float_tolerance 1e-6", "float_tolerance": 1e-06}
    assert ok(spec, "0.25", "0.2500004")


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "float", "validator_flags": "float_tolerance"},
        {"type": "float", "validator_flags": "float_tolerance x"},
        {"type": "float", "validator_flags": "ignore_case"},
        {"type": "exact_tokens", "validator_flags": "float_tolerance 1e-6"},
        {"type": "exact_tokens", "case_sensitive": "yes"},
        {"type": "testlib"},
        {"type": "testlib", "files": {"../x.cpp": "int main(){}"}},
        {"type": "kattis_validator", "files": {"a.cpp": "", "b.cpp": ""}},
        {"type": "kattis_validator", "files": {"a.cpp": "x"}, "entry_points": ["missing.cpp"]},
        {"type": "kattis_validator", "files": {"a.cpp": "x"}, "language": "rust"},
        {"type": "python", "source": "print(1)", "time_limit_s": 0},
        # a scoring problem's validator accepts (42) partial answers, scored beside: not pass/fail
        {"type": "kattis_validator", "validation": "custom score", "source": "int main() { return 42; }"},
    ],
)
def test_a_bad_checker_spec_fails_when_the_problem_is_loaded(spec: dict[str, Any]) -> None:
    with pytest.raises(CheckerSpecError):
        get_checker(spec)
    with pytest.raises(ProblemFormatError, match="p1"):
        Problem.from_dict({"id": "p1", "checker": spec, "public_tests": [{"input": "", "output": ""}]})


@pytest.mark.parametrize("kind", ["kattis_validator", "interactive"])
@pytest.mark.parametrize("flags", ["y" * 80_000, ["case_sensitive"] * 20_000, "a\0b"])
def test_validator_flags_no_run_message_or_execve_can_carry_are_refused_at_load(kind: str, flags: Any) -> None:
    """The flags are the validator's (or interactor's) arguments, sent to the job init in one
    message of at most 64 KiB: 80 kB of them killed the job init on every run (INTERNAL, "the
    job init exited", a sandbox failure for the problem's data); a NUL cannot be passed to
    execve (the program never started: a checker error). Refused when the problem is loaded."""
    spec = {"type": kind, "source": "int main() { return 42; }", "validator_flags": flags}
    with pytest.raises(CheckerSpecError, match="validator_flags"):
        get_checker(spec)
    get_checker({**spec, "validator_flags": "float_tolerance 1e-6 case_sensitive space_change_sensitive"})


def test_program_specs_keep_the_icpc_record_shape_and_hash_by_content() -> None:
    base = {"type": "kattis_validator", "validation": "custom", "language": "cpp", "validator_flags": None,
            "files": {"v/validate.cpp": "int main(){}", "v/validate.h": ""}, "entry_points": ["v/validate.cpp"],
            "protocol": "kattis: validator input_file answer_file feedback_dir [flags] < team_output"}
    a = get_checker(base)
    assert isinstance(a, ProgramSpec) and a.entry_points == ("v/validate.cpp",) and a.protocol == "kattis"
    b = get_checker({**base, "files": {**base["files"], "v/validate.h": "// changed"}})
    assert isinstance(b, ProgramSpec) and a.key() != b.key()
    testlib_interactor = get_checker({"type": "interactive", "protocol": "testlib", "source": "int main(){}"})
    assert isinstance(testlib_interactor, ProgramSpec) and testlib_interactor.protocol == "testlib"


def test_a_checker_file_holding_a_separator_never_keys_like_two_files() -> None:
    # the key is the compiled checker's identity in the compile cache: a dataset's single file
    # whose text holds the old separators and a second file's name must not be served the
    # binary of the problem that really has the two files
    base = {"type": "kattis_validator", "validation": "custom", "language": "cpp", "validator_flags": None,
            "entry_points": ["v/validate.cpp"], "protocol": "kattis"}
    two = get_checker({**base, "files": {"v/validate.cpp": "#include \"w.h\"\n//", "v/w.h": "int main(){return 42;}"}})
    one = get_checker({**base, "files": {"v/validate.cpp": "#include \"w.h\"\n//\1v/w.h\0int main(){return 42;}"}})
    assert isinstance(two, ProgramSpec) and isinstance(one, ProgramSpec)
    assert one.key() != two.key()
