"""The shipped checkers on outputs as large as the stdout cap: they tokenise one block at a
time (memory O(output), not O(tokens) objects), with the same answers as on small blocks."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from cpfleet.core.checkers import base, get_checker

SPECS = [{"type": "tokens"}, {"type": "code_contests"}, {"type": "float", "abs": 1e-3}, {"type": "real_tokens"}]


def _cases() -> list[tuple[str, str]]:
    rng = random.Random(7)
    expected = "\n".join(" ".join(str(rng.randint(-50, 50)) for _ in range(rng.randint(1, 6))) for _ in range(40)) + "\n"
    toks = expected.split()
    cases = [(expected, expected), (expected, expected.replace("\n", " ")), (expected, expected + "\n\n  ")]
    for k in (0, 5, len(toks) - 1):
        wrong = list(toks)
        wrong[k] = "X" + wrong[k]
        cases.append((expected, " ".join(wrong)))
    cases += [(expected, " ".join(toks[:-3])), (expected, expected + " 1 2 3\n"), (expected, ""), ("", expected)]
    cases += [(expected, expected.upper() + "\x0c"), ("1.0001 NaN\n", "1.0002 nan\n")]
    return cases


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s["type"])
def test_block_tokenising_gives_the_same_answers_as_one_block(spec: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    checker = get_checker(spec)
    whole = [checker.check(e, g) for e, g in _cases()]
    monkeypatch.setattr(base, "_SPLIT_BLOCK", 5)  # every output now spans many blocks
    assert [checker.check(e, g) for e, g in _cases()] == whole


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s["type"])
def test_a_huge_wrong_output_is_checked_without_a_token_per_object(spec: dict[str, object]) -> None:
    # 16 MiB of 9-digit lines: str.split() of it alone would allocate ~1.8M strings (~100 MB)
    got = "123456789\n" * (16 * 1024 * 1024 // 10)
    checker = get_checker(spec)
    tracemalloc.start()
    try:
        result = checker.check("123456789\n", got)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not result.ok and f"output has {len(got) // 10} tokens, expected 1" in result.detail
    assert peak < 2 * len(got), f"peak {peak >> 20} MiB for a {len(got) >> 20} MiB output"


_SHAPE_BYTES = 8 << 20


def _shape(name: str) -> str:
    """An output of ~8 MiB in one of the shapes a program can print."""
    if name == "lines":
        return "123456789\n" * (_SHAPE_BYTES // 10)
    if name == "line":  # one line of short tokens: the worst case for a line-by-line reader
        return "ab " * (_SHAPE_BYTES // 3)
    if name == "tabs":  # the same between tabs: a block ends at every separator, not only a space
        return "ab\t" * (_SHAPE_BYTES // 3)
    if name == "feeds":  # between form feeds: separators for the C tokenisers, not for code_contests
        return "ab\x0c" * (_SHAPE_BYTES // 3)
    if name == "word":  # no whitespace at all
        return "x" * _SHAPE_BYTES
    assert name == "binary"  # random bytes as the judge decodes them (U+FFFD: two bytes a char)
    return random.Random(3).randbytes(_SHAPE_BYTES).decode("utf-8", errors="replace")


ALL_SPECS = [
    *SPECS,
    {"type": "exact_tokens"},
    {"type": "exact_tokens", "validator_flags": "case_sensitive space_change_sensitive"},
    {"type": "float", "validator_flags": "float_tolerance 1e-6"},
]


@pytest.mark.parametrize("shape", ["lines", "line", "tabs", "feeds", "word", "binary"])
@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: f"{s['type']}-{s.get('validator_flags', '')}")
def test_every_output_shape_is_checked_in_memory_bounded_by_its_size(spec: dict[str, object], shape: str) -> None:
    # a wrong answer the checker must read past the first token of, on an answer of one token
    got = _shape(shape)
    checker = get_checker(spec)
    tracemalloc.start()
    try:
        result = checker.check("ab\n", got)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not result.ok and result.detail
    # the text itself is 8-16 MiB; a token per object would be ~25x that for the 'ab ' line
    assert peak < 3 * _SHAPE_BYTES, f"peak {peak >> 20} MiB for a {_SHAPE_BYTES >> 20} MiB {shape} output"


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: f"{s['type']}-{s.get('validator_flags', '')}")
def test_a_long_line_of_tokens_is_judged_exactly(spec: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    # the same verdicts and details whether the line spans one block or hundreds
    expected = "ab " * 2000 + "\n"
    cases = [expected, "ab " * 2000, "ab " * 1999 + "abc", "ab " * 2001, "ab " * 1999, "ab\r\n" * 2000,
             "ab " * 1000 + "\r" * 300 + "\n" + "ab " * 1000, "  " + expected + "  \n\n",
             "ab\t" * 2000, "ab\x0b" * 2000, "ab\x0c" * 2000, "ab\t" * 1999 + "a\x0cb", "a\x0cb " * 2000]
    checker = get_checker(spec)
    whole = [checker.check(expected, g) for g in cases]
    assert whole[0].ok and not whole[2].ok
    monkeypatch.setattr(base, "_SPLIT_BLOCK", 7)
    monkeypatch.setattr(base, "_STRIP_CHUNK", 5)
    assert [checker.check(expected, g) for g in cases] == whole


def test_a_huge_returned_value_is_judged_without_building_it() -> None:
    # a function-call test whose program returns 8 MiB of ["ab", "ab", ...]: parsing it would
    # build ~1.4M strings (~100 MB); it holds far more values than the expected one, so it is a
    # wrong answer told from a count
    import json

    from cpfleet.core.verdict import Verdict
    from cpfleet.sandbox import fncall
    from cpfleet.sandbox.runner import RunResult

    got = json.dumps(["ab"] * (_SHAPE_BYTES // 6)).encode()
    rr = RunResult(Verdict.OK, exit_code=0, stdout=got)
    tracemalloc.start()
    try:
        out = fncall.judge(rr, '["ab"]', None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.verdict == Verdict.WRONG_ANSWER and "holds 1398102 values, the expected one 2" in out.detail
    assert peak < 3 * len(got), f"peak {peak >> 20} MiB for a {len(got) >> 20} MiB value"


def test_a_large_correct_returned_value_is_still_parsed_and_accepted() -> None:
    import json

    from cpfleet.core.fncall import text_value_count, value_count
    from cpfleet.core.verdict import Verdict
    from cpfleet.sandbox import fncall
    from cpfleet.sandbox.runner import RunResult

    rng = random.Random(5)
    value = [{"k,[": [rng.random(), "x]\"{", None, True], str(i): {}} for i in range(20000)]
    expected = json.dumps(value, separators=(",", ":"))
    assert text_value_count(json.dumps(value)) == value_count(value) == text_value_count(expected)
    ok = fncall.judge(RunResult(Verdict.OK, exit_code=0, stdout=json.dumps(value).encode()), expected, None)
    assert ok.verdict == Verdict.OK, ok.detail
    wrong = fncall.judge(RunResult(Verdict.OK, exit_code=0, stdout=json.dumps(value + [1]).encode()), expected, None)
    assert wrong.verdict == Verdict.WRONG_ANSWER and "expected 20000 elements, got 20001" in wrong.detail
