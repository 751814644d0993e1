"""An untagged block is the program only where no block names an allowed language: models show
a sample input or output in an untagged block before their ```python (or ```cpp) solution, and
judging that sample as the program refused a correct solution (COMPILE_ERROR for ``1 2``,
WRONG_ANSWER for ``3``), which open-r1's, LiveCodeBench's, rLLM's and verl's extractions all
judge."""

from __future__ import annotations

import pytest

from cpfleet.core.problem import Problem
from cpfleet.jobs.pool import judge_iter
from cpfleet.sandbox.extract import extract_code, extract_program

RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"


def test_a_tagged_block_wins_over_an_untagged_sample_before_it() -> None:
    text = f"For the sample\n```\n1 2\n```\nthe answer is 3:\n```python\n{RIGHT}```\n"
    assert extract_code(text) == RIGHT
    found = extract_program("Input:\n```\n5\n```\n```cpp\nint main() {}\n```\n", allowed=("cpp",), default="cpp")
    assert found is not None and found.code == "int main() {}\n"


def test_an_untagged_block_is_taken_when_no_block_names_an_allowed_language() -> None:
    assert extract_code("```\nprint(1)\n```\n```cpp\nint main() {}\n```\n") == "print(1)\n"
    assert extract_code("```text\n3\n```\n```\nprint(2)\n```\n") == "print(2)\n"
    found = extract_program("```\nint main() {}\n```\n```java\nclass A {}\n```\n", allowed=("cpp",), default="cpp")
    assert found is not None and found.code == "int main() {}\n"


def test_the_answer_section_still_comes_before_the_reasoning() -> None:
    # an untagged answer after a tagged draft in the reasoning is the answer
    text = "<think>\n```python\nprint(1)\n```\n</think>\n```\nprint(2)\n```\n"
    assert extract_code(text) == "print(2)\n"


@pytest.mark.parametrize("sample", ["1 2", "3"], ids=["sample_input", "sample_output"])
def test_cpfleet_judge_pays_the_solution_after_an_untagged_sample(sample: str) -> None:
    problem = Problem.from_dict({
        "id": "add", "statement": "Print a+b.",
        "public_tests": [{"input": "1 2\n", "output": "3\n"}],
        "hidden_tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}],
    })
    completion = f"For the sample:\n```\n{sample}\n```\nSolution:\n```python\n{RIGHT}```\n"
    [result] = judge_iter({"add": problem}, [{"problem_id": "add", "completion": completion}], workers=1)
    assert str(result.verdict) == "OK"
    assert result.reward == 1.0
