"""extract_program: which fenced block is the program, and in which language."""

from __future__ import annotations

import pytest

import cpfleet
from cpfleet.core.problem import Problem
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.extract import extract_code, extract_program
from cpfleet.sandbox.languages import LANGUAGES
from cpfleet.sandbox.runner import CodeRunner


@pytest.mark.parametrize(
    ("tag", "language"),
    [("cpp", "cpp"), ("c++", "cpp"), ("cc", "cpp"), ("cxx", "cpp"), ("CPP", "cpp"), ("c", "c"), ("java", "java"),
     ("python", "python3"), ("py", "python3"), ("python3", "python3"), ("pypy", "pypy3"), ("pypy3", "pypy3")],
)
def test_fence_tag_names_the_language(tag: str, language: str) -> None:
    found = extract_program(f"```{tag}\nbody\n```")
    assert found is not None and (found.language, found.code) == (language, "body\n")


def test_first_block_in_an_allowed_language_wins() -> None:
    text = "```java\nclass A {}\n```\n```cpp\nint main(){}\n```\n```python\nprint(1)\n```"
    assert extract_program(text).language == "java"  # type: ignore[union-attr]
    found = extract_program(text, allowed=("cpp", "python3"))
    assert found is not None and found.language == "cpp" and found.code == "int main(){}\n"


def test_untagged_block_is_the_default_language() -> None:
    found = extract_program("```\nint main(){}\n```", allowed=("cpp",), default="cpp")
    assert found is not None and found.language == "cpp"
    found = extract_program("```\nprint(1)\n```")
    assert found is not None and found.language == "python3"


def test_block_in_a_language_the_job_does_not_allow_is_skipped() -> None:
    assert extract_program("```java\nclass A {}\n```", allowed=("cpp",), default="cpp") is None
    assert extract_program("```text\nhello\n```\n```c\nint main(){}\n```", allowed=("c",)).language == "c"  # type: ignore[union-attr]


def test_python_block_runs_under_pypy_when_the_job_asks_for_pypy() -> None:
    found = extract_program("```python\nprint(1)\n```", allowed=("pypy3",), default="pypy3")
    assert found is not None and found.language == "pypy3"
    found = extract_program("```pypy\nprint(1)\n```", allowed=("python3",), default="python3")
    assert found is not None and found.language == "python3"


def test_c_block_is_not_taken_for_cpp() -> None:
    assert extract_program("```c\nint main(){}\n```", allowed=("cpp",), default="cpp") is None


def test_extract_code_stays_python_only() -> None:
    text = "```cpp\nint main(){}\n```\n```pypy\nprint(2)\n```\n```python\nprint(1)\n```"
    assert extract_code(text) == "print(1)\n"


def test_every_language_has_a_fence_tag() -> None:
    from cpfleet.sandbox.languages import FENCE_TAGS

    assert set(FENCE_TAGS.values()) == set(LANGUAGES)


# NO_CODE's feedback names the blocks skipped for their language, each once; in the worker, on the
# completion, a completion of many blocks in distinct unknown languages is read once (each tag
# looked up in everything named before it took minutes for these 6 MB).
def test_a_completion_of_many_foreign_language_blocks_is_no_code_read_once(runner: CodeRunner) -> None:
    problem = Problem.from_dict({"id": "echo", "languages": ["cpp"], "hidden_tests": [{"input": "1\n", "output": "1\n"}]})
    completion = "".join(f"```lang{i}\nx\n```\n" for i in range(400_000))
    result = cpfleet.judge_locally(problem, completion, runner)
    assert result.verdict == Verdict.NO_CODE and not result.infra_error
    assert "(found ```lang0, ```lang1, ```lang2: not a language judged here)" in result.observation
