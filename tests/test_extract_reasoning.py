"""A reasoning section is not the answer: where a completion closes one (``</think>``), the
program judged is the answer's block, not a draft written while thinking. Every trainer's own
extraction (open-r1's ``extract_code``, LiveCodeBench's, rLLM's, verl's ``prime_code``) takes
the answer's block; judging the draft paid a right draft under a wrong answer and refused a
right answer after a wrong draft."""

from __future__ import annotations

import pytest

from cpfleet.core.problem import Problem
from cpfleet.jobs.pool import judge_iter
from cpfleet.sandbox.extract import extract_code, extract_program, programs_key

WRONG = "a, b = map(int, input().split())\nprint(a - b)\n"
RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"


def _think(draft: str, answer: str) -> str:
    return (f"<think>\nA first try:\n```python\n{draft}```\nLet me check it again.\n</think>\n"
            f"Here is my solution:\n```python\n{answer}```\n")


def test_the_answer_block_is_taken_over_a_draft_in_the_reasoning() -> None:
    assert extract_code(_think(WRONG, RIGHT)) == RIGHT
    assert extract_code(_think(RIGHT, WRONG)) == WRONG


def test_the_answer_block_is_taken_in_any_language() -> None:
    text = "<think>\n```cpp\nint main() { return 1; }\n```\n</think>\n```java\nclass A {}\n```\n"
    found = extract_program(text)
    assert found is not None and found.language == "java"


def test_the_reasoning_is_read_when_the_answer_holds_no_usable_block() -> None:
    # the answer names no program (or only sample output): the text is read whole, as before
    assert extract_code("<think>\n```python\nprint(1)\n```\n</think>\nSee above.") == "print(1)\n"
    text = "<think>\n```python\nprint(1)\n```\n</think>\nOutput:\n```text\n3\n```\n"
    assert extract_code(text) == "print(1)\n"


def test_the_last_closing_line_ends_the_reasoning() -> None:
    text = ("<think>\n```python\nprint(1)\n```\n</think>\n```python\nprint(2)\n```\n"
            "</think> oops\n```python\nprint(3)\n```\n")
    assert extract_code(text) == "print(3)\n"


def test_a_closing_tag_inside_a_block_is_code() -> None:
    # the answer's own code prints the tag: it does not cut the block, nor end a reasoning
    text = "```python\nprint('</think>')\n```\n```python\nprint(2)\n```\n"
    assert extract_code(text) == "print('</think>')\n"


def test_without_a_reasoning_section_the_first_usable_block_still_wins() -> None:
    text = "<think>\nno end: cut by the token limit\n```python\nprint(1)\n```\n```python\nprint(2)\n```"
    assert extract_code(text) == "print(1)\n"


def test_the_key_tells_where_the_reasoning_ends() -> None:
    # the same blocks in the same order, judged on different code: never one de-duplicated job
    before = "```python\nprint(1)\n```\n</think>\n```python\nprint(2)\n```\n"
    after = "```python\nprint(1)\n```\n```python\nprint(2)\n```\n</think>\n"
    assert programs_key(before) != programs_key(after)
    assert programs_key("</think>\n" + after) == programs_key("</think>\n</think>\n" + after)
    assert programs_key("</think> no block") is None


@pytest.mark.parametrize(("draft", "answer", "reward"), [(WRONG, RIGHT, 1.0), (RIGHT, WRONG, 0.0)],
                         ids=["wrong_draft_right_answer", "right_draft_wrong_answer"])
def test_cpfleet_judge_pays_the_answer_not_the_draft(draft: str, answer: str, reward: float) -> None:
    problem = Problem.from_dict({
        "id": "add", "statement": "Print a+b.",
        "public_tests": [{"input": "1 2\n", "output": "3\n"}],
        "hidden_tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}],
    })
    [result] = judge_iter({"add": problem}, [{"problem_id": "add", "completion": _think(draft, answer)}], workers=1)
    assert result.reward == reward
    assert str(result.verdict) == ("OK" if reward else "WRONG_ANSWER")
