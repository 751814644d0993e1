"""Inline tests in every dataset shape -> problem records (cpfleet.core.testshapes, cpfleet.producer.inline).

Each shape is written here as the dataset stores it; the expected records are spelled out by
hand (the JSON text of argument lists and return values), so a change in normalisation shows.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import zlib
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core.errors import InlineProblemError, TestShapeError
from cpfleet.core.records import loader_check, pairs_of, record_errors, registered_checker_types
from cpfleet.core.testshapes import decode_lcb_private, normalize_tests, restricted_unpickle
from cpfleet.producer.inline import content_id, problem_from_tests


def lcb_blob(value: Any) -> str:
    """LiveCodeBench's private-test encoding: base64(zlib(pickle(json text)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(value)))).decode()


def test_taco_call_based_keeps_raw_outputs_and_args_as_json_lists_under_the_apps_rules() -> None:
    """APPS/TACO's testing_util judges against the raw (usually one-element-wrapped) output: it
    is kept as it is, and the record says whose rules read it (fn_semantics apps)."""
    io_ = {"fn_name": "is_anagram", "inputs": [["foefet", "toffee"], ["ab", "bc"]], "outputs": [[True], [False]]}
    rec = problem_from_tests(json.dumps(io_))
    assert rec["fn_name"] == "is_anagram" and rec["fn_semantics"] == "apps"
    assert pairs_of(rec, "hidden_tests") == [('["foefet", "toffee"]', "[true]"), ('["ab", "bc"]', "[false]")]
    assert pairs_of(rec, "public_tests") == [('["foefet", "toffee"]', "[true]")]
    assert rec["languages"] == ["python3", "pypy3"]
    assert record_errors(rec) == []


def test_a_wrapped_list_output_is_kept_wrapped() -> None:
    rec = problem_from_tests({"fn_name": "two_sum", "inputs": [[[2, 7, 11, 15], 9]], "outputs": [[[0, 1]]]})
    assert pairs_of(rec, "hidden_tests") == [("[[2, 7, 11, 15], 9]", "[[0, 1]]")]


def test_livecodebench_evaluation_form_input_output_with_string_arguments() -> None:
    io_ = {"fn_name": "f", "inputs": ["[4, 3]\n2"], "outputs": ["[3, 4]"]}
    rec = problem_from_tests(io_)
    assert pairs_of(rec, "hidden_tests") == [("[[4, 3], 2]", "[3, 4]")]
    assert rec["fn_semantics"] == "lcb"
    # the same as the dataset column, passed whole
    assert problem_from_tests({"input_output": json.dumps(io_)})["id"] == rec["id"]


def test_verl_prime_stdio_shape_and_lines_joined() -> None:
    rec = problem_from_tests({"inputs": ["1 2\n", ["3 4", "5 6"]], "outputs": ["3\n", 7]}, num_public=2)
    assert pairs_of(rec, "hidden_tests") == [("1 2\n", "3\n"), ("3 4\n5 6\n", "7")]
    assert "fn_name" not in rec and "languages" not in rec


def test_code_contests_shape() -> None:
    rec = problem_from_tests({"input": ["1\n", "2\n"], "output": ["2\n", "4\n"]})
    assert pairs_of(rec, "hidden_tests") == [("1\n", "2\n"), ("2\n", "4\n")]
    assert pairs_of(rec, "public_tests") == [("1\n", "2\n")]


def test_code_contests_row_columns_keep_their_split() -> None:
    row = {"public_tests": {"input": ["1\n"], "output": ["2\n"]},
           "private_tests": {"input": ["3\n"], "output": ["6\n"]},
           "generated_tests": {"input": ["5\n"], "output": ["10\n"]}}
    rec = problem_from_tests(json.dumps(row))
    assert pairs_of(rec, "public_tests") == [("1\n", "2\n")]
    assert pairs_of(rec, "hidden_tests") == [("3\n", "6\n"), ("5\n", "10\n")]
    # only its public tests, the statement's examples: refused, as cpfleet prepare skips the row
    with pytest.raises(InlineProblemError, match="no hidden tests"):
        problem_from_tests({"public_tests": {"input": ["1\n"], "output": ["2\n"]}, "private_tests": None})


def test_livecodebench_functional_lines_become_argument_lists() -> None:
    public = [{"input": "[4, 3, 2, 3, 1]\n[2, 2, 5, 2, 3, 6]", "output": "[3, 4]", "testtype": "functional"}]
    private = [{"input": '"abc"\n3\n', "output": '"cab"', "testtype": "functional"}]
    row = {"public_test_cases": json.dumps(public), "private_test_cases": lcb_blob(private),
           "metadata": json.dumps({"func_name": "findIntersectionValues"})}
    rec = problem_from_tests(row)
    assert rec["fn_name"] == "findIntersectionValues"
    assert pairs_of(rec, "public_tests") == [("[[4, 3, 2, 3, 1], [2, 2, 5, 2, 3, 6]]", "[3, 4]")]
    assert pairs_of(rec, "hidden_tests") == [
        ("[[4, 3, 2, 3, 1], [2, 2, 5, 2, 3, 6]]", "[3, 4]"), ('["abc", 3]', '"cab"'),
    ]


def test_livecodebench_and_deepcoder_stdin_kinds() -> None:
    cases = [{"input": "1\n", "output": "1\n", "testtype": "stdin"},
             {"input": "2\n", "output": "4\n", "testtype": "stdin_stdout"}]
    rec = problem_from_tests(cases)
    assert pairs_of(rec, "hidden_tests") == [("1\n", "1\n"), ("2\n", "4\n")]


def test_deepcoder_per_test_metadata_names_the_function() -> None:
    cases = [{"input": "[2, 3, 1, 4]", "output": "3", "testtype": "functional",
              "metadata": {"func_name": "sumImbalanceNumbers"}}]
    rec = problem_from_tests(cases)
    assert rec["fn_name"] == "sumImbalanceNumbers"
    assert pairs_of(rec, "hidden_tests") == [("[[2, 3, 1, 4]]", "3")]


def test_primeintellect_function_call_output_is_the_plain_value_and_language_maps() -> None:
    info = {"language": "python", "test_cases": [
        {"type": "function_call", "fn_name": "majorityElement", "input": [[3, 2, 3]], "output": 3},
        {"type": "function_call", "fn_name": "majorityElement", "input": [[1]], "output": [1]},
    ]}
    rec = problem_from_tests(json.dumps(info))
    assert rec["fn_name"] == "majorityElement"
    assert pairs_of(rec, "hidden_tests") == [("[[3, 2, 3]]", "3"), ("[[1]]", "[1]")]
    assert rec["languages"] == ["python3", "pypy3"]
    as_text = problem_from_tests({"test_cases": [
        {"type": "function_call", "fn_name": "f", "input": "[[3, 2, 3], 1]", "output": 3}]})
    assert pairs_of(as_text, "hidden_tests") == [("[[3, 2, 3], 1]", "3")]
    cpp = problem_from_tests({"language": "cpp", "test_cases": [{"type": "stdin_stdout", "input": "1\n", "output": "1\n"}]})
    assert cpp["languages"] == ["cpp"]
    with pytest.raises(InlineProblemError, match="rust"):
        problem_from_tests({"language": "rust", "test_cases": [{"type": "stdin_stdout", "input": "", "output": ""}]})


def test_content_id_is_shared_by_equal_tests_and_differs_for_any_judged_change() -> None:
    a = problem_from_tests({"inputs": ["1\n"], "outputs": ["1\n"]})
    same = problem_from_tests(json.dumps({"outputs": ["1\n"], "inputs": ["1\n"]}))
    assert a["id"] == same["id"] and a["id"].startswith("inline/")
    assert content_id(a) == a["id"]
    others = [
        problem_from_tests({"inputs": ["1\n"], "outputs": ["2\n"]}),
        problem_from_tests({"inputs": ["1\n"], "outputs": ["1\n"]}, time_limit_s=3),
        problem_from_tests({"inputs": ["1\n"], "outputs": ["1\n"]}, memory_limit_mb=64),
        problem_from_tests({"inputs": ["1\n"], "outputs": ["1\n"]}, checker={"type": "float"}),
        problem_from_tests({"inputs": ["1\n"], "outputs": ["1\n"]}, languages=["cpp"]),
        problem_from_tests({"inputs": ["1\n"], "outputs": ["1\n"]}, num_public=0),
    ]
    assert len({a["id"], *(o["id"] for o in others)}) == 1 + len(others)
    # the starter code is shown, not judged: it does not change the id
    assert problem_from_tests({"inputs": ["1\n"], "outputs": ["1\n"]}, starter_code="def f(): pass")["id"] == a["id"]


@pytest.mark.parametrize(
    ("tests", "reason"),
    [
        ("not json", "malformed tests JSON"),
        ({"inputs": ["1"], "outputs": []}, "lengths differ"),
        ([{"input": "1", "output": "1", "testtype": "stdin"},
          {"input": "[1]", "output": "1", "testtype": "functional", "fn_name": "f"}], "mixes"),
        ([{"input": "[1]", "output": "1", "testtype": "functional"}], "without a function name"),
        ([{"input": "[1]", "output": "1", "testtype": "functional", "fn_name": "f"},
          {"input": "[1]", "output": "1", "testtype": "functional", "fn_name": "g"}], "several functions"),
        ([{"input": "{oops", "output": "1", "testtype": "functional", "fn_name": "f"}], "not JSON"),
        ({"fn_name": "f", "inputs": ["1"], "outputs": [[1]]}, "not an argument list"),
        ({"weird": 1}, "unrecognised test shape"),
        ([], "no tests"),
    ],
)
def test_malformed_inline_tests_are_refused_with_the_reason(tests: Any, reason: str) -> None:
    with pytest.raises(InlineProblemError, match=reason):
        problem_from_tests(tests)


def test_absurdly_nested_tests_are_refused_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(InlineProblemError):
        problem_from_tests(json.dumps({"inputs": ["x"], "outputs": ["y"]}).replace('"x"', deep))
    # [{"input": [[[...]]] 50,000 deep, "output": "x", "testtype": "stdin"}] in protocol-0 opcodes:
    # the unpickler builds it without recursion, everything after it would recurse
    n = 50_000
    raw = (b"((S'input'\n" + b"(" * n + b"l" * n
           + b"S'output'\nS'x'\nS'testtype'\nS'stdin'\nd" + b"l.")
    assert len(restricted_unpickle(raw)[0]) == 3
    blob = base64.b64encode(zlib.compress(raw)).decode()
    with pytest.raises(InlineProblemError):
        problem_from_tests({"public_test_cases": "[]", "private_test_cases": blob})


def test_nan_time_limit_is_refused() -> None:
    with pytest.raises(InlineProblemError):
        problem_from_tests({"inputs": ["1"], "outputs": ["1"]}, time_limit_s=float("nan"))


STDIO = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
LCB_CASES = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]


@pytest.mark.parametrize(
    ("tests", "limits"),
    [
        ({**STDIO, "time_limit_s": 6}, (6, None)),  # beside a shape that has room for them
        ({"tests": LCB_CASES, "time_limit_s": 6, "memory_limit_mb": 1024}, (6, 1024)),  # around a list
        (json.dumps({"tests": json.dumps(STDIO), "memory_limit_mb": 256}), (None, 256)),  # JSON text, both levels
        ({"public_tests": [{"input": "1 2\n", "output": "3\n"}], "hidden_tests": [{"input": "1 2\n", "output": "3\n"}],
          "time_limit_s": 0.5}, (0.5, None)),  # the project's own shape
        ({"tests": {**STDIO, "time_limit_s": 3}, "memory_limit_mb": 64}, (3, 64)),  # the wrapper adds, the tests keep
    ],
)
def test_inline_tests_may_state_their_limits_and_are_judged_under_them(tests: Any, limits: tuple[Any, Any]) -> None:
    """A trainer's tests column is all the fleet gets of a problem: limits stated in it are the
    record's, and the same tests under other limits are another problem (another content id)."""
    rec = problem_from_tests(tests)
    assert (rec["time_limit_s"], rec["memory_limit_mb"]) == limits
    assert pairs_of(rec, "hidden_tests") == [("1 2\n", "3\n")]
    assert record_errors(rec) == [] and loader_check(rec)[0] is None
    assert rec["id"] != problem_from_tests(STDIO)["id"]


@pytest.mark.parametrize(
    ("tests", "limits"),
    [
        ({"input_output": {**STDIO, "time_limit_s": 6}}, (6, None)),  # a TACO row's column passed whole
        ({"input_output": json.dumps({**STDIO, "memory_limit_mb": 256})}, (None, 256)),  # as the row holds it
        ({"input_output": {**STDIO, "time_limit_s": 6}, "time_limit_s": 6.0}, (6, None)),
        ({"tests": {"input_output": {**STDIO, "time_limit_s": 6}}, "memory_limit_mb": 64}, (6, 64)),
        ({"verification_info": {"test_cases": [{"type": "stdin_stdout", "input": "1 2\n", "output": "3\n"}],
                                "time_limit_s": 6}}, (6, None)),  # a PrimeIntellect row's column
    ],
)
def test_limits_stated_inside_a_dataset_rows_column_are_not_dropped(tests: Any, limits: tuple[Any, Any]) -> None:
    """A row's column passed whole (``{"input_output": ...}``, ``{"verification_info": ...}``)
    holds a shape with room for the limits: stated there they are the record's, never dropped in
    silence for the project's 2 s (a solution the dataset's grader accepts refused for TLE)."""
    rec = problem_from_tests(tests)
    assert (rec["time_limit_s"], rec["memory_limit_mb"]) == limits
    assert pairs_of(rec, "hidden_tests") == [("1 2\n", "3\n")]


def test_a_row_column_and_its_wrapper_stating_other_limits_is_refused() -> None:
    with pytest.raises(InlineProblemError, match=re.escape("their wrapper 2")):
        problem_from_tests({"input_output": {**STDIO, "time_limit_s": 6}, "time_limit_s": 2})


@pytest.mark.parametrize(
    ("tests", "given", "reason"),
    [
        ({**STDIO, "time_limit_s": "6"}, None, "not a number"),
        ({**STDIO, "time_limit_s": True}, None, "not a number"),
        ({**STDIO, "time_limit_s": 601}, None, "time_limit_s must be in (0, 600]"),
        ({**STDIO, "memory_limit_mb": 100.5}, None, "memory_limit_mb must be an int"),
        ({**STDIO, "time_limit_s": 6}, 2.0, "the caller gives 2.0"),  # one of the two would be ignored
        ({"tests": {**STDIO, "time_limit_s": 3}, "time_limit_s": 6}, None, "their wrapper 6"),
        ({"tests": [], "time_limit_s": 6}, None, "no tests"),
    ],
)
def test_stated_limits_that_cannot_hold_are_refused_with_the_reason(tests: Any, given: float | None, reason: str) -> None:
    with pytest.raises(InlineProblemError, match=re.escape(reason)):
        problem_from_tests(tests, time_limit_s=given)


def test_own_record_shape_passes_through() -> None:
    raw = {"public_tests": [{"input": "1", "output": "1"}], "hidden_tests": [{"input": "2", "output": "2"}]}
    ts = normalize_tests(raw)
    assert ts.public == (("1", "1"),) and ts.hidden == (("2", "2"),) and ts.fn_name is None


# --- LiveCodeBench private tests: the restricted unpickler ---------------------------------------


def test_lcb_private_tests_in_plain_json_and_in_the_compressed_pickle_decode_alike() -> None:
    cases = [{"input": "1\n", "output": "2\n", "testtype": "stdin"}]
    assert decode_lcb_private(json.dumps(cases)) == cases
    assert decode_lcb_private(lcb_blob(cases)) == cases
    assert decode_lcb_private("") == []


class _SystemCall:
    """Pickles to ``os.system(command)``: what a hostile dataset would ship."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (self.command,))


def test_a_pickle_that_would_call_os_system_is_refused_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps([_SystemCall(f"touch {marker}")])
    with pytest.raises(pickle.UnpicklingError, match="refused"):
        restricted_unpickle(payload)
    blob = base64.b64encode(zlib.compress(payload)).decode()
    with pytest.raises(TestShapeError, match="refused"):
        decode_lcb_private(blob)
    assert not marker.exists()
    # the same bytes through the standard unpickler do run the command: the test's payload is live
    pickle.loads(payload)
    assert marker.exists()


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_restricted_unpickler_builds_plain_data_in_every_protocol(protocol: int) -> None:
    value: dict[str, Any] = {"a": [1, 2.5, None, True, "x"], "t": (1, 2), "s": "é\n"}
    if protocol >= 3:  # older protocols pickle bytes through a global (_codecs.encode), refused
        value["b"] = b"raw"
    assert restricted_unpickle(pickle.dumps(value, protocol=protocol)) == value


def test_restricted_unpickler_refuses_any_class_even_harmless_ones() -> None:
    import collections

    with pytest.raises(pickle.UnpicklingError):
        restricted_unpickle(pickle.dumps(collections.OrderedDict(a=1)))


def test_a_decompression_bomb_is_refused_at_the_limit() -> None:
    blob = base64.b64encode(zlib.compress(pickle.dumps("x" * 5_000_000))).decode()
    with pytest.raises(TestShapeError, match="decompress past"):
        decode_lcb_private(blob, max_bytes=1_000_000)


def test_a_pickle_of_shared_references_is_refused_before_it_spells_out_gigabytes() -> None:
    # 1.5 kB of field: a list of 20k references to one 1 MB case, which pickle stores once; the
    # problem held 20 GB of tests once written (prepare) or hashed (an inline problem's id).
    # LiveCodeBench reads the pickle's value as JSON text, which has no shared references.
    case = {"input": "1\n" * 500_000, "output": "1\n", "testtype": "stdin"}
    blob = base64.b64encode(zlib.compress(pickle.dumps([case] * 20_000, protocol=4))).decode()
    assert len(blob) < 2_000
    with pytest.raises(TestShapeError, match="not JSON text"):
        decode_lcb_private(blob)
    assert decode_lcb_private(lcb_blob([case])) == [case]  # the same case pickled as JSON text


def test_unpickled_non_list_is_refused() -> None:
    with pytest.raises(TestShapeError, match="not a list"):
        decode_lcb_private(lcb_blob({"input": "1"}))


# --- the records against the loader of this build ---------------------------------------------


def test_stdio_inline_record_loads_with_this_builds_problem_loader() -> None:
    rec = problem_from_tests({"input": ["1\n"], "output": ["2\n"]})
    error, checked = loader_check(rec)
    assert checked and error is None


def test_inline_record_with_a_registered_checker_kind_loads() -> None:
    rec = problem_from_tests({"input": ["1\n"], "output": ["2\n"]}, checker={"type": "exact_tokens"})
    assert record_errors(rec) == []
    assert "exact_tokens" in registered_checker_types()
    error, checked = loader_check(rec)
    assert checked and error is None


def test_the_same_call_tests_under_other_rules_are_another_problem() -> None:
    """fn_semantics decides verdicts, so it is part of an inline problem's content id."""
    own = {"fn_name": "f", "public_tests": [], "hidden_tests": [{"input": "[1]", "output": "[1]"}]}
    a = problem_from_tests(own)
    b = problem_from_tests({**own, "fn_semantics": "apps"})
    assert "fn_semantics" not in a and b["fn_semantics"] == "apps"
    assert a["id"] != b["id"]
    with pytest.raises(InlineProblemError, match="fn_semantics must be one of"):
        problem_from_tests({**own, "fn_semantics": "leetcode"})
    with pytest.raises(InlineProblemError, match="function-call tests"):
        problem_from_tests({**own, "fn_name": None, "fn_semantics": "apps"})
