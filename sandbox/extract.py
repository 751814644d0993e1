"""Pull the program out of a model completion: the first fenced Python (or untagged) block.

Models answer in Markdown, so the code is whatever sits in the first fenced block that could be
Python. Blocks in other languages (```cpp, ```java, ```text ...) are skipped, never run. Fences
follow CommonMark where it matters for model output: ``` or ~~~ runs of 3+, a closing fence of
the same character at least as long as the opening and with nothing after it, an unterminated
block running to the end of the text (a completion cut by the token limit; the compile step
then reports the syntax error), the opening fence's indentation removed from the block's lines.
CRLF line ends and trailing spaces on fence lines are tolerated.
"""

from __future__ import annotations

import re

PYTHON_TAGS = frozenset({"python", "py", "python3"})

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
    lines = _LINE_SPLIT.split(text)
    i, n = 0, len(lines)
    while i < n:
        m = _OPEN.match(lines[i].rstrip("\r"))
        i += 1
        if m is None:
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        if fence[0] == "`" and "`" in info:
            continue  # inline code such as ```print(1)```: not a fence (CommonMark)
        char, length, indent = fence[0], len(fence), len(m.group("indent"))
        body: list[str] = []
        while i < n and not _is_close(lines[i].rstrip("\r"), char, length):
            body.append(_dedent(lines[i].rstrip("\r"), indent))
            i += 1
        i += 1  # past the closing fence (or the end of the text)
        if info:  # the language is the info string's leading word: ```python title="a.py", ```py:sol.py
            m_tag = _TAG.match(info)
            if m_tag is None or m_tag.group().lower() not in PYTHON_TAGS:
                continue
        code = "\n".join(body).strip("\n")
        if code.strip():
            return code + "\n"
    return None
