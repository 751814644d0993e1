"""``cpfleet prepare`` on local fixtures in each RL dataset's schema: LiveCodeBench, APPS,
DeepCoder, PrimeIntellect, open-r1 codeforces.

Every fixture is written here in the dataset's own shape (parquet through
``datasets.Dataset.from_list(...).to_parquet``, or JSONL) and read back through
``datasets.load_dataset`` exactly as a hub download would be; the expected records (tests as
JSON text of argument lists / return values, limits, checkers, languages) are spelled out by hand.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from cpfleet.core.errors import DatasetUnavailableError, PrepareError
from cpfleet.core.records import record_errors, registered_checker_types
from cpfleet.datasets.prepare import PrepareOptions, PrepareSummary, detect_format, open_dataset, prepare

REPO = Path(__file__).resolve().parents[1]


def to_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    import datasets

    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def run(src: Path, tmp_path: Path, **opts: Any) -> tuple[PrepareSummary, dict[str, dict[str, Any]]]:
    out = tmp_path / "out.jsonl"
    summary = prepare(str(src), out, PrepareOptions(**opts), cache_dir=str(tmp_path / "hf-cache"), progress=False)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for rec in records:
        assert record_errors(rec) == [], rec["id"]
    return summary, {r["id"]: r for r in records}


def pairs(rec: dict[str, Any], key: str = "hidden_tests") -> list[tuple[str, str]]:
    return [(t["input"], t["output"]) for t in rec[key]]


def lcb_blob(value: Any) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(value)))).decode()


class _Shell:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (self.command,))


# --- LiveCodeBench -----------------------------------------------------------------------------


def lcb_rows(marker: Path) -> list[dict[str, Any]]:
    common = {"platform": "leetcode", "contest_id": "weekly-contest-1", "contest_date": "2024-01-01T00:00:00",
              "difficulty": "easy"}
    functional_public = [
        {"input": "[4, 3, 2, 3, 1]\n[2, 2, 5, 2, 3, 6]", "output": "[3, 4]", "testtype": "functional"},
    ]
    functional_private = [
        {"input": "[3, 4, 2, 3]\n[1, 5]", "output": "[0, 0]", "testtype": "functional"},
        {"input": '"a\\nb"\n[]', "output": "null", "testtype": "functional"},
    ]
    stdin_public = [{"input": "3\n1 2 3\n", "output": "6\n", "testtype": "stdin"}]
    stdin_private = [{"input": "1\n5\n", "output": "5\n", "testtype": "stdin"}]
    hostile = base64.b64encode(zlib.compress(pickle.dumps([_Shell(f"touch {marker}")]))).decode()
    return [
        {**common, "question_title": "Find Intersection Values", "question_content": "Given nums1, nums2...",
         "question_id": "2956", "starter_code": "class Solution:\n    def findIntersectionValues(self, nums1, nums2):\n        ",
         "public_test_cases": json.dumps(functional_public), "private_test_cases": lcb_blob(functional_private),
         "metadata": json.dumps({"func_name": "findIntersectionValues"})},
        {**common, "platform": "atcoder", "question_title": "Sum", "question_content": "Print the sum.",
         "question_id": "abc300_a", "starter_code": "", "public_test_cases": json.dumps(stdin_public),
         "private_test_cases": json.dumps(stdin_private), "metadata": "{}"},
        {**common, "question_title": "Evil", "question_content": "x", "question_id": "666", "starter_code": "",
         "public_test_cases": json.dumps(stdin_public), "private_test_cases": hostile, "metadata": "{}"},
        {**common, "question_title": "No name", "question_content": "x", "question_id": "667", "starter_code": "",
         "public_test_cases": json.dumps(functional_public), "private_test_cases": "", "metadata": "{}"},
    ]


def test_livecodebench_parquet_functional_and_stdin_with_compressed_private_tests(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    src = to_parquet(lcb_rows(marker), tmp_path / "lcb" / "test.parquet")
    summary, recs = run(src, tmp_path)
    assert summary.format == "livecodebench"
    assert (summary.read, summary.kept) == (4, 2)
    assert summary.skipped == {
        "private_test_cases pickle refused (refused to load global posix.system)": 1,
        "function-call test without a function name": 1,
    }
    assert not marker.exists()  # the hostile pickle never ran
    fn = recs["lcb/2956"]
    assert fn["fn_name"] == "findIntersectionValues"
    assert fn["fn_semantics"] == "lcb"
    assert fn["starter_code"].startswith("class Solution:")
    assert fn["languages"] == ["python3", "pypy3"]
    assert pairs(fn, "public_tests") == [("[[4, 3, 2, 3, 1], [2, 2, 5, 2, 3, 6]]", "[3, 4]")]
    assert pairs(fn) == [
        ("[[4, 3, 2, 3, 1], [2, 2, 5, 2, 3, 6]]", "[3, 4]"),
        ("[[3, 4, 2, 3], [1, 5]]", "[0, 0]"),
        ('["a\\nb", []]', "null"),
    ]
    stdin = recs["lcb/abc300_a"]
    assert "fn_name" not in stdin and "languages" not in stdin
    assert pairs(stdin, "public_tests") == [("3\n1 2 3\n", "6\n")]
    assert pairs(stdin) == [("3\n1 2 3\n", "6\n"), ("1\n5\n", "5\n")]
    # LiveCodeBench rows state no limits: its run_test's 6 s per test, the project's memory limit
    assert (stdin["time_limit_s"], stdin["time_limit_source"], stdin["memory_limit_mb"]) == (
        6.0, "LiveCodeBench's run_test (6 s per test)", None)
    assert fn["time_limit_s"] == 6.0


def test_format_detection_for_every_dataset() -> None:
    assert detect_format(["question_id", "public_test_cases", "private_test_cases", "metadata"]) == "livecodebench"
    assert detect_format(["problem", "tests", "solutions", "starter_code", "metadata"]) == "deepcoder"
    assert detect_format(["problem_id", "prompt", "verification_info", "task_type"]) == "primeintellect"
    assert detect_format(["id", "contest_id", "official_tests", "generated_tests", "generated_checker"]) == "codeforces"


# --- APPS call-based ---------------------------------------------------------------------------


def test_apps_call_based_problems_become_function_call_problems(tmp_path: Path) -> None:
    rows = [
        {"problem_id": 7, "question": "Is it an anagram?", "difficulty": "introductory", "url": "u",
         "starter_code": "def is_anagram(a, b):\n\t", "solutions": json.dumps(["def is_anagram(a, b): return sorted(a) == sorted(b)"]),
         "input_output": json.dumps({"fn_name": "is_anagram", "inputs": [["foefet", "toffee"], ["ab", "bc"]],
                                     "outputs": [[True], [False]]})},
        {"problem_id": 8, "question": "Pairs.", "difficulty": "interview", "url": "u", "starter_code": "",
         "solutions": "[]", "input_output": json.dumps({"fn_name": "pairs", "inputs": [[[1, 2, 3]]],
                                                        "outputs": [[[[1, 2], [2, 3]]]]})},
    ]
    src = to_parquet(rows, tmp_path / "apps" / "test-0.parquet")
    summary, recs = run(src, tmp_path, with_solutions=True, num_public=1)
    assert summary.format == "apps" and summary.kept == 2
    assert summary.notes == {"no time limit stated: 4 s per test, as APPS's run_test gives": 2}
    ana = recs["apps/test/7"]
    assert ana["fn_name"] == "is_anagram" and ana["starter_code"] == "def is_anagram(a, b):\n\t"
    # the raw outputs, wrapped as APPS stores them: fn_semantics apps judges them as APPS does
    assert pairs(ana) == [('["foefet", "toffee"]', "[true]"), ('["ab", "bc"]', "[false]")]
    assert ana["fn_semantics"] == "apps"
    assert ana["correct_solutions"] == ["def is_anagram(a, b): return sorted(a) == sorted(b)"]
    assert pairs(recs["apps/test/8"]) == [("[[1, 2, 3]]", "[[[1, 2], [2, 3]]]")]


# --- DeepCoder ---------------------------------------------------------------------------------


DEEPCODER = {
    "lcbv5": [{"problem": "Sum imbalance.", "starter_code": "class Solution:\n    def sumImbalanceNumbers(self, nums):",
               "solutions": [], "metadata": json.dumps({"func_name": "sumImbalanceNumbers"}),
               "tests": json.dumps([{"input": "[2, 3, 1, 4]", "output": "3", "testtype": "functional"},
                                    {"input": "[1, 3, 3, 3, 5]", "output": "8", "testtype": "functional"}])}],
    "taco": [{"problem": "Add.", "starter_code": "def add(a, b):", "solutions": ["def add(a, b): return a + b"],
              "metadata": json.dumps({}),
              "tests": json.dumps({"fn_name": "add", "inputs": [[1, 2], [5, 5]], "outputs": [[3], [10]]})}],
    "codeforces": [{"problem": "Double.", "starter_code": "", "solutions": [], "metadata": "{}",
                    "tests": json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"},
                                         {"input": "5\n", "output": "10\n", "testtype": "stdin"}])}],
    "primeintellect": [{"problem": "Echo.", "starter_code": "", "solutions": [], "metadata": "{}",
                        "tests": json.dumps([{"input": "x\n", "output": "x\n", "type": "stdin_stdout"},
                                             {"input": "y\n", "output": "y\n", "testtype": "stdin_stdout"}])},
                       {"problem": "Major.", "starter_code": "", "solutions": [], "metadata": "{}",
                        "tests": json.dumps([{"type": "function_call", "fn_name": "majorityElement",
                                              "input": [[3, 2, 3]], "output": 3}])}],
}
DEEPCODER_EXPECTED: dict[str, list[tuple[str | None, list[tuple[str, str]]]]] = {
    "lcbv5": [("sumImbalanceNumbers", [("[[2, 3, 1, 4]]", "3"), ("[[1, 3, 3, 3, 5]]", "8")])],
    "taco": [("add", [("[1, 2]", "[3]"), ("[5, 5]", "[10]")])],
    "codeforces": [(None, [("2\n", "4\n"), ("5\n", "10\n")])],
    "primeintellect": [(None, [("x\n", "x\n"), ("y\n", "y\n")]), ("majorityElement", [("[[3, 2, 3]]", "3")])],
}


# whose rules judge each row: rLLM (DeepCoder's grader) runs TACO rows and PrimeIntellect rows
# through TACO's run_test, LiveCodeBench rows through LiveCodeBench's
DEEPCODER_SEMANTICS: dict[str, list[str | None]] = {
    "lcbv5": ["lcb"], "taco": ["apps"], "codeforces": [None], "primeintellect": [None, "apps"],
}


@pytest.mark.parametrize("config", sorted(DEEPCODER))
def test_deepcoder_configs(config: str, tmp_path: Path) -> None:
    src = to_parquet(DEEPCODER[config], tmp_path / config / "train.parquet")
    summary, recs = run(src, tmp_path, split="train", config=config, num_public=1)
    assert summary.format == "deepcoder" and summary.kept == len(DEEPCODER[config]), summary.lines()
    for i, (fn_name, tests) in enumerate(DEEPCODER_EXPECTED[config]):
        rec = recs[f"deepcoder/{config}/train/{i}"]
        assert rec.get("fn_name") == fn_name
        assert rec.get("fn_semantics") == DEEPCODER_SEMANTICS[config][i]
        assert pairs(rec) == tests
        assert pairs(rec, "public_tests") == tests[:1]
        # DeepCoder rows state no limits; rLLM, its grader, gives each test 6 s
        assert (rec["time_limit_s"], rec["time_limit_source"]) == (6.0, "rLLM's DeepCoder grader (6 s per test)")


# --- PrimeIntellect ----------------------------------------------------------------------------


def pi_row(pid: str, language: str, cases: list[dict[str, Any]], gold: str = "", task: str = "verifiable_code") -> dict[str, Any]:
    return {"source": "apps", "task_type": task, "in_source_id": f"src-{pid}", "problem_id": pid,
            "prompt": f"Solve {pid} in {language}.", "gold_standard_solution": gold, "metadata": "{}",
            "verification_info": json.dumps({"language": language, "test_cases": cases})}


def test_primeintellect_verification_info_languages_and_gold_solutions(tmp_path: Path) -> None:
    stdio = [{"type": "stdin_stdout", "input": "1 2\n", "output": "3\n"}, {"type": "stdin_stdout", "input": "2 2\n", "output": "4\n"}]
    rows = [
        pi_row("p1", "python", stdio, gold="Here:\n```python\nprint(sum(map(int, input().split())))\n```\n"),
        pi_row("p2", "cpp", stdio, gold="```cpp\nint main(){}\n```"),
        pi_row("p3", "python", [{"type": "function_call", "fn_name": "f", "input": [[1], "a"], "output": ["a"]}]),
        pi_row("p4", "rust", stdio),
        pi_row("p5", "python", stdio, task="verifiable_math"),
    ]
    src = tmp_path / "pi.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary, recs = run(src, tmp_path, split="train", with_solutions=True)
    assert summary.format == "primeintellect"
    assert summary.skipped == {"language 'rust' is not judged by cpfleet": 1,
                               "task_type 'verifiable_math' is not verifiable_code": 1}
    p1, p2, p3 = recs["primeintellect/p1"], recs["primeintellect/p2"], recs["primeintellect/p3"]
    assert pairs(p1) == [("1 2\n", "3\n"), ("2 2\n", "4\n")] and pairs(p1, "public_tests") == [("1 2\n", "3\n")]
    assert p1["languages"] == ["python3", "pypy3"] and p2["languages"] == ["cpp"]
    assert p1["correct_solutions"] == ["print(sum(map(int, input().split())))\n"]
    assert p2["correct_solutions"] == []
    assert summary.solutions == {"correct python3 kept": 1, "correct other languages dropped": 1}
    assert (p3["fn_name"], pairs(p3)) == ("f", [('[[1], "a"]', '["a"]')])
    assert p3["fn_semantics"] == "primeintellect"


# The gold answer's first fenced block is found in the prepare process, on a dataset row: a search
# for ``` ... line end ... ``` from every ``` read to the end of the text from each, time quadratic
# in a run of backticks with no block closed after it (this row: tens of minutes). The text is read
# once; a row without a closed block keeps its whole text as the answer, as before.
def test_a_gold_answer_of_unclosed_fences_is_read_once(tmp_path: Path) -> None:
    stdio = [{"type": "stdin_stdout", "input": "1\n", "output": "1\n"}]
    unclosed = "```python print(input()) " + "`" * 2_000_000
    rows = [pi_row("p1", "python", stdio, gold=unclosed),
            pi_row("p2", "python", stdio, gold="```py\nprint(input())\n```\n" + unclosed)]
    src = tmp_path / "pi.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, recs = run(src, tmp_path, split="train", with_solutions=True)
    assert recs["primeintellect/p1"]["correct_solutions"] == [unclosed]
    assert recs["primeintellect/p2"]["correct_solutions"] == ["print(input())\n"]


# --- open-r1 codeforces ------------------------------------------------------------------------

CHECKER = "import sys\ninp, out, ans = (open(p).read() for p in sys.argv[1:4])\nprint(1)\n"


def cf_row(cf_id: str, **kw: Any) -> dict[str, Any]:
    contest, index = cf_id.split("/")
    row: dict[str, Any] = {
        "id": cf_id, "contest_id": int(contest), "index": index, "title": f"Problem {cf_id}",
        "description": "Print twice n.", "input_format": "One integer n.", "output_format": "2n.", "note": None,
        "time_limit": 2.0, "memory_limit": 256.0, "input_mode": "stdio", "interaction_format": None,
        "examples": [{"input": "1\n", "output": "2\n"}],
        "official_tests": [{"input": "1\n", "output": "2\n"}, {"input": "7\n", "output": "14\n"}],
        "official_tests_complete": True, "generated_checker": None, "executable": True, "generated_tests": 0,
        "rating": 800, "tags": ["math"],
    }
    row.update(kw)
    return row


def test_open_r1_codeforces_official_generated_checker_limits_and_skips(tmp_path: Path) -> None:
    rows = [
        cf_row("2063/A", generated_tests=3, time_limit=1.5, memory_limit=512.0),
        cf_row("2063/B", generated_checker=CHECKER),
        cf_row("2063/C", interaction_format="Ask at most 30 queries ..."),
        cf_row("2063/D", input_mode="file"),
        cf_row("1999/A", generated_tests=2),  # its contest's generated-tests file is absent
        cf_row("2063/E", examples=None, official_tests=[], generated_tests=1),
    ]
    src = to_parquet(rows, tmp_path / "cf" / "train.parquet")
    gen = tmp_path / "generated_tests"
    to_parquet([  # shuffled on purpose: the test order is test_case_i
        {"problem_id": "2063/A", "input": "3\n", "output": "6\n", "test_case_i": 2},
        {"problem_id": "2063/B", "input": "9\n", "output": "18\n", "test_case_i": 0},
        {"problem_id": "2063/A", "input": "1000\n", "output": "2000\n", "test_case_i": 0},
        {"problem_id": "2063/A", "input": "0\n", "output": "0\n", "test_case_i": 1},
        {"problem_id": "2063/E", "input": "4\n", "output": "8\n", "test_case_i": 0},
    ], gen / "test_cases_2063.parquet")
    summary, recs = run(src, tmp_path, split="train", generated_tests=str(gen))
    assert summary.format == "codeforces"
    assert (summary.read, summary.kept) == (6, 4)
    assert summary.skipped == {
        "interactive (interaction_format set): the dataset carries no interactor program": 1,
        "input_mode is not stdio: reads or writes named files": 1,
    }
    assert summary.notes["generated tests read"] == 4
    assert summary.notes["generated tests not read (contest file absent)"] == 1
    a = recs["codeforces/2063/A"]
    assert (a["time_limit_s"], a["memory_limit_mb"]) == (1.5, 512)
    assert pairs(a, "public_tests") == [("1\n", "2\n")]
    assert pairs(a) == [("1\n", "2\n"), ("7\n", "14\n"), ("1000\n", "2000\n"), ("0\n", "0\n"), ("3\n", "6\n")]
    assert "checker" not in a
    b = recs["codeforces/2063/B"]
    assert b["checker"] == {"type": "python", "source": CHECKER}
    assert pairs(b) == [("1\n", "2\n"), ("7\n", "14\n")]  # generated_tests 0: the file is not read for it
    assert (b["time_limit_s"], b["memory_limit_mb"]) == (2.0, 256)
    assert pairs(recs["codeforces/1999/A"]) == [("1\n", "2\n"), ("7\n", "14\n")]
    e = recs["codeforces/2063/E"]  # no examples, no official tests: the generated ones serve for both
    assert pairs(e, "public_tests") == pairs(e) == [("4\n", "8\n")]
    capped, recs_capped = run(src, tmp_path, split="train", generated_tests=str(gen), max_hidden=3)
    assert pairs(recs_capped["codeforces/2063/A"])[-1] == ("1000\n", "2000\n") and capped.hidden_capped == 1


def test_a_python_checker_problem_is_checked_by_the_loader_and_loads(tmp_path: Path) -> None:
    src = to_parquet([cf_row("5/A", generated_checker=CHECKER)], tmp_path / "cf.parquet")
    summary, recs = run(src, tmp_path, split="train")
    assert "python" in registered_checker_types()
    assert not summary.unchecked
    from cpfleet.core.problem import Problem

    assert Problem.from_dict(recs["codeforces/5/A"]).checker["type"] == "python"


# --- the hub path ------------------------------------------------------------------------------


def test_hub_names_go_to_load_dataset_and_an_unreachable_hub_is_dataset_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    # these machines cannot reach the hub: offline mode makes that fail at once instead of
    # after the client's retries (the settings are read at import, so set the constant too)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    with pytest.raises(Exception) as raw:
        open_dataset("agentica-org/DeepCoder-Preview-Dataset", "train", config="lcbv5",
                     cache_dir=str(tmp_path / "cache"))
    assert "DeepCoder-Preview-Dataset" in str(raw.value)
    with pytest.raises(DatasetUnavailableError, match="cannot load 'livecodebench/code_generation_lite'"):
        prepare("livecodebench/code_generation_lite", tmp_path / "o.jsonl",
                PrepareOptions(data_files=("test6.jsonl",)), cache_dir=str(tmp_path / "cache"), progress=False)
    assert not (tmp_path / "o.jsonl").exists()
    with pytest.raises(PrepareError, match="must be of one kind"):
        open_dataset("livecodebench/code_generation_lite", "test", data_files=("test6.jsonl", "code_generation_lite.py"))


def test_cli_reads_a_local_livecodebench_file_and_names_skipped_rows(tmp_path: Path) -> None:
    src = to_parquet(lcb_rows(tmp_path / "pwned"), tmp_path / "lcb.parquet")
    out = tmp_path / "p.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "cpfleet", "prepare", "--dataset", str(src), "--out", str(out),
         "--cache-dir", str(tmp_path / "hf-cache"), "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "(livecodebench): read 4, kept 2, skipped 2" in proc.stderr
    assert "row 2 (question_id 666)" in proc.stderr and "row 3 (question_id 667)" in proc.stderr
    assert len(out.read_text().splitlines()) == 2
