"""extract_code: which fenced block of a completion is the program."""

from __future__ import annotations

import pytest

from cpfleet.sandbox.extract import extract_code


# --- the basic cases --------------------------------------------------------------------------
def test_python_tagged_block_is_extracted() -> None:
    text = "Here is my solution:\n```python\nprint(int(input()) * 2)\n```\nDone."
    assert extract_code(text) == "print(int(input()) * 2)\n"


def test_py_tag_is_python() -> None:
    assert extract_code("```py\nx = 1\n```") == "x = 1\n"


def test_cpp_block_is_skipped_for_the_following_python_block() -> None:
    text = "```cpp\nint main() { return 0; }\n```\nand in Python:\n```python\nprint(1)\n```\n"
    assert extract_code(text) == "print(1)\n"


def test_untagged_block_is_taken() -> None:
    assert extract_code("Answer:\n```\nprint(2)\n```\n") == "print(2)\n"


def test_text_without_fence_has_no_code() -> None:
    assert extract_code("print(1)  # I forgot the fence") is None


# --- robustness ------------------------------------------------------------------------------
def test_crlf_line_endings_are_tolerated_and_normalised() -> None:
    text = "Solution:\r\n```python\r\na = input()\r\nprint(a)\r\n```\r\n"
    assert extract_code(text) == "a = input()\nprint(a)\n"


@pytest.mark.parametrize("tag", ["Python", "PYTHON3", "Py", "python3"])
def test_tag_is_case_insensitive(tag: str) -> None:
    assert extract_code(f"```{tag}\nprint(3)\n```") == "print(3)\n"


def test_trailing_spaces_on_fence_lines_are_tolerated() -> None:
    assert extract_code("```python   \nprint(4)\n```   \t\nafter") == "print(4)\n"


def test_unterminated_fence_runs_to_the_end_of_the_text() -> None:
    # a completion cut by the token limit: the code is taken; a syntax error is the compile step's job
    assert extract_code("```python\nimport sys\nprint(sys.stdin.read())") == "import sys\nprint(sys.stdin.read())\n"


def test_backticks_inside_strings_do_not_close_the_block() -> None:
    code = 's = "```"\nt = \'``` not a fence\'\nprint(s, t)\n'
    assert extract_code(f"```python\n{code}```\n") == code


def test_longer_opening_fence_needs_an_equally_long_closing_fence() -> None:
    text = "````python\nprint('''\n```\n''')\n````\n"
    assert extract_code(text) == "print('''\n```\n''')\n"


def test_tilde_fences_are_supported() -> None:
    assert extract_code("~~~python\nprint(5)\n~~~\n") == "print(5)\n"


def test_a_backtick_fence_is_not_closed_by_tildes() -> None:
    assert extract_code("```python\nprint(6)\n~~~\nprint(7)\n```") == "print(6)\n~~~\nprint(7)\n"


@pytest.mark.parametrize("lang", ["java", "cpp", "c++", "rust", "text", "bash", "pycon"])
def test_other_languages_only_means_no_code(lang: str) -> None:
    assert extract_code(f"```{lang}\nprint(1)\n```") is None


def test_first_usable_block_wins() -> None:
    text = "```python\nprint('first')\n```\n```python\nprint('second')\n```"
    assert extract_code(text) == "print('first')\n"


def test_empty_block_is_skipped() -> None:
    assert extract_code("```python\n\n```\n```python\nprint(8)\n```") == "print(8)\n"


def test_indented_fence_removes_its_indentation_from_the_body() -> None:
    text = "1. Code:\n   ```python\n   for i in range(2):\n       print(i)\n   ```\n"
    assert extract_code(text) == "for i in range(2):\n    print(i)\n"


def test_inline_triple_backticks_are_not_a_fence() -> None:
    assert extract_code("use ```print(1)``` here") is None


def test_info_string_after_the_language_is_ignored() -> None:
    assert extract_code('```python title="sol.py"\nprint(9)\n```') == "print(9)\n"


@pytest.mark.parametrize("info", ["python:solution.py", "py{cmd=true}", "Python3 main.py"])
def test_language_is_the_leading_word_of_the_info_string(info: str) -> None:
    assert extract_code(f"```{info}\nprint(10)\n```") == "print(10)\n"


@pytest.mark.parametrize("info", ["{.cpp}", "c++", "python2", "pythonic", ":python"])
def test_info_strings_that_do_not_name_python_are_skipped(info: str) -> None:
    assert extract_code(f"```{info}\nprint(11)\n```") is None


def test_a_block_holding_the_old_block_separator_keys_apart_from_two_blocks() -> None:
    from cpfleet.sandbox.extract import programs_key

    two = "```python\nprint(1)\n```\n```text\nnotes\n```"
    one = "```python\nprint(1)\0\0text\nnotes\n```"
    assert programs_key(two) != programs_key(one)
    assert programs_key(two) == programs_key("Here:\n" + two + "\nDone.")  # prose still does not count
