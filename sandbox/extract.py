"""Pull the program out of a model completion: the first fenced block in an allowed language.

Models answer in Markdown, so the code is whatever sits in the first fenced block whose language
the job allows (``extract_program``): the fence tag names the language (```cpp/c++/cc/cxx,
```c, ```java, ```python/py/python3, ```pypy; core/languages.py declares them), an untagged
block is the default language (the job's ``language``, else the problem's first ``languages``
entry, else python3) and is taken only where no block names an allowed language (models show
a sample input or output in an untagged block before the code: ``` 1 2 ``` judged as Python
refused the ```python solution after it, which open-r1's, LiveCodeBench's, rLLM's and verl's
extractions all judge), blocks in other languages (```text, a ```java block on a C++-only
problem) are skipped, never run. Python-family tags are one language family: a ```python block
on a job that asks for pypy3 runs under PyPy, and a ```pypy block on a CPython-only job under
CPython (the code is Python either way; the runtime is the job's choice). ``extract_code`` is
the Python-only form (first python or untagged block). Fences
follow CommonMark where it matters for model output: ``` or ~~~ runs of 3+, a closing fence of
the same character at least as long as the opening and with nothing after it, an unterminated
block running to the end of the text (a completion cut by the token limit; the compile step
then reports the syntax error), the opening fence's indentation removed from the block's lines.
CRLF line ends and trailing spaces on fence lines are tolerated.

A reasoning section is not the answer: where a line outside every fenced block closes one
(holds ``</think>``, as DeepSeek-R1, QwQ and Qwen3 close theirs), the program is looked for in
the blocks after the last such line first, and in the whole text only when those hold none. A
draft a model wrote while thinking and then corrected is otherwise judged in place of the
answer it gave (paid where the draft was right and the answer wrong, refused the other way
round), where every trainer's own extraction (open-r1's ``extract_code``, LiveCodeBench's,
rLLM's, verl's ``prime_code``: the last block) takes the answer's block.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cpfleet.core.languages import FENCE_TAGS, LANGUAGES, family_of

# indentation, the fence run (``` or ~~~, 3 or more), the info string
_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_LINE_SPLIT = re.compile(r"\r?\n")
_TAG = re.compile(r"[A-Za-z0-9_+#-]+")


def _is_close(line: str, char: str, length: int) -> bool:
    s = line.strip()
    return len(s) >= length and s == char * len(s)


def _dedent(line: str, indent: int) -> str:
    """Remove up to ``indent`` leading blanks, as CommonMark does for an indented fence."""
    i = 0
    while i < indent and i < len(line) and line[i] in " \t":
        i += 1
    return line[i:]


def extract_code(text: str) -> str | None:
    """The first fenced block tagged python / py / python3 (any case) or untagged; else None.

    Empty blocks are skipped like foreign-language ones. The returned source ends with a newline.
    """
    found = extract_program(text, allowed=("python3",), default="python3", python_family=False)
    return None if found is None else found.code


@dataclass(frozen=True, slots=True)
class Extracted:
    """The program found in a completion and the language it is judged in."""

    language: str
    code: str


def _language_of(tag: str, allowed: Sequence[str], python_family: bool) -> str | None:
    lang = FENCE_TAGS.get(tag)
    if lang is None:
        return None
    if lang in allowed:
        return lang
    if python_family:  # a language family shares its code (core.languages: ``family``)
        for other in family_of(lang):
            if other in allowed:
                return other
    return None


_THINK_END = "</think>"


def _scan(text: str) -> Iterator[tuple[str, str] | None]:
    """Every fenced block in order: (its tag, lower-cased, '' when untagged or unreadable as one;
    its code without surrounding blank lines); and None for each line outside every block that
    closes a reasoning section (holds ``</think>``), in its place among them (one None for a
    run of such lines with no block between: only where a block stands to them counts)."""
    lines = _LINE_SPLIT.split(text)
    i, n = 0, len(lines)
    marked = False
    while i < n:
        m = _OPEN.match(lines[i].rstrip("\r"))
        if m is not None and m.group("fence")[0] == "`" and "`" in m.group("info"):
            m = None  # inline code such as ```print(1)```: not a fence (CommonMark)
        if m is None and not marked and _THINK_END in lines[i]:
            marked = True
            yield None
        i += 1
        if m is None:
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        char, length, indent = fence[0], len(fence), len(m.group("indent"))
        body: list[str] = []
        while i < n and not _is_close(lines[i].rstrip("\r"), char, length):
            body.append(_dedent(lines[i].rstrip("\r"), indent))
            i += 1
        i += 1  # past the closing fence (or the end of the text)
        # the language is the info string's leading word: ```python title="a.py", ```py:sol.py
        m_tag = _TAG.match(info) if info else None
        tag = "" if not info else (m_tag.group().lower() if m_tag is not None else "\0")
        marked = False
        yield tag, "\n".join(body).strip("\n")


def _blocks(text: str) -> Iterator[tuple[str, str]]:
    """Every fenced block in order, reasoning or answer alike (``_scan`` without its marks)."""
    for item in _scan(text):
        if item is not None:
            yield item


def _answer_first(text: str) -> list[list[tuple[str, str]]]:
    """The blocks to look for the program in, in order of preference: those after the last line
    that closes a reasoning section (when there is one), then all of them."""
    items = list(_scan(text))
    marks = [k for k, item in enumerate(items) if item is None]
    every = [item for item in items if item is not None]
    if not marks:
        return [every]
    return [[item for item in items[marks[-1] + 1 :] if item is not None], every]


def extract_program(
    text: str, *, allowed: Sequence[str] | None = None, default: str = "python3", python_family: bool = True
) -> Extracted | None:
    """The first non-empty fenced block tagged with an ``allowed`` language (default: every
    language), else the first untagged one (counting as ``default``), among the blocks after the
    reasoning section (module docstring), else among all; None when there is none. The code ends
    with a newline."""
    allowed = tuple(LANGUAGES if allowed is None else allowed)
    if default not in allowed:
        default = allowed[0] if allowed else default
    for blocks in _answer_first(text):
        for tagged in (True, False):
            for tag, code in blocks:
                if bool(tag) != tagged:
                    continue
                language = default if not tag else _language_of(tag, allowed, python_family)
                if language is not None and code.strip() and language in allowed:
                    return Extracted(language, code + "\n")
    return None


def programs_key(text: str) -> str | None:
    """What makes two completions the same program under EVERY language rule: all their fenced
    blocks, tags included, in order (None: no block). A key for in-flight de-duplication: two
    completions with the same key are judged alike whatever the job's or problem's languages,
    which the first block's code alone does not guarantee (```cpp and ```c blocks of one text,
    a Python block after a C++ one). The blocks are written as a JSON list of [tag, code]
    pairs, which no code can imitate: joined by a separator, a block whose code held that
    separator and a tag line keyed like two blocks, and a program that was never run shared a
    right one's reward. A line that closes a reasoning section is a ``null`` in its place: which
    block is judged depends on where it stands."""
    items = list(_scan(text))
    if not any(item is not None for item in items):
        return None
    return json.dumps([None if item is None else [item[0], item[1]] for item in items])


# tags of blocks that hold no program (sample output, prose): never named as a skipped language
_NOT_CODE = frozenset({"text", "txt", "plaintext", "output", "input", "console", "none", "markdown", "md"})


def skipped_tags(text: str, allowed: Sequence[str] | None = None) -> list[str]:
    """The tags of the fenced blocks that were skipped for their language (```rust, a ```java
    block on a C++-only problem), in order, each once: what NO_CODE's feedback names, so a
    model that answered in a language the problem does not take learns that, not "no code"."""
    allowed = tuple(LANGUAGES if allowed is None else allowed)
    out: list[str] = []
    seen: set[str] = set()  # "each once" by a set: a look-up in ``out`` costs time quadratic in a
    # completion of many distinct tags (6 MB of them: minutes in the worker)
    for tag, code in _blocks(text):
        if tag in _NOT_CODE or not tag or tag == "\0" or not code.strip() or tag in seen:
            continue
        if _language_of(tag, allowed, True) not in allowed:
            out.append(tag)
            seen.add(tag)
    return out


def looked_for(allowed: Sequence[str] | None) -> str:
    """The NO_CODE message's list of what was looked for: 'cpp or java'."""
    names = list(LANGUAGES if allowed is None else allowed)
    return " or ".join(names) if names else "(no language allowed)"
