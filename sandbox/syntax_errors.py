"""A Python program's compile error as the judge shows it, in one home for both interpreters.

CPython programs are compiled by the fork server's job init (sandbox/jobinit.py), PyPy programs
by PyPy itself in the language's compile step, which cannot import cpfleet: that step runs this
module's source with ``pypy3 -c`` (``pypy_check_script``), so the module imports the standard
library only. A syntax error on a line of 100 kB (a table on one line) would quote that line and
a caret line as wide, past what one message to the runner holds: such a line is shown as a
window around the error, with its caret, and the whole text is bounded.
"""

from __future__ import annotations

import sys

ERROR_LINE_CHARS = 160  # of a long source line, the part around the error that a compile error shows
ERROR_TEXT_CHARS = 8192  # the most of a compile error's text sent back (a message holds 64 KiB)
COMPILE_ERRORS = (SyntaxError, ValueError, OverflowError, RecursionError)  # what compile() raises for a bad source


def compile_error_text(e: BaseException) -> str:
    """The compile error as Python prints it (without the judge's own frames), bounded."""
    import traceback  # only on an error: the fork server's init keeps its imports few

    text, offset = getattr(e, "text", None), getattr(e, "offset", None)
    if isinstance(e, SyntaxError) and isinstance(text, str) and len(text) > ERROR_LINE_CHARS \
            and isinstance(offset, int) and offset > 0:
        line = text.rstrip("\n")
        start = max(0, min(offset - 1 - ERROR_LINE_CHARS // 2, len(line) - ERROR_LINE_CHARS))
        head = "..." if start else ""
        tail = "..." if start + ERROR_LINE_CHARS < len(line) else ""
        e.text = head + line[start : start + ERROR_LINE_CHARS] + tail + "\n"
        e.offset = offset - start + len(head)
        end = getattr(e, "end_offset", None)
        if isinstance(end, int) and end > 0:
            e.end_offset = max(e.offset, min(end - start + len(head), len(head) + ERROR_LINE_CHARS + 1))
    out = "".join(traceback.format_exception_only(type(e), e))
    return out if len(out) <= ERROR_TEXT_CHARS else out[: ERROR_TEXT_CHARS // 2] + "\n...\n" + out[-ERROR_TEXT_CHARS // 2 :]


def check_and_copy(source_path: str, out_path: str) -> int:
    """PyPy's compile step: a syntax check by the interpreter that will run the program; the
    error on stderr and exit 1 (COMPILE_ERROR), else the source copied to ``out_path``."""
    with open(source_path, "rb") as f:
        source = f.read()
    try:
        compile(source, "solution.py", "exec", dont_inherit=True)
    except COMPILE_ERRORS as e:
        sys.stderr.write(compile_error_text(e))
        return 1
    with open(out_path, "wb") as f:
        f.write(source)
    return 0


def pypy_check_script() -> str:
    """This module's source and a call of ``check_and_copy(argv[1], 'out/solution.py')``, for
    ``pypy3 -c``. Part of the compile step's argv, so the compile cache's key changes with it."""
    with open(__file__, encoding="utf-8") as f:
        own = f.read()
    return own + "\nsys.exit(check_and_copy(sys.argv[1], 'out/solution.py'))\n"
