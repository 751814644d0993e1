"""The names of the languages a solution may be written in, and the fence tags that name them.

Plain data shared by the problem format (``languages``, ``time_limit_multipliers``), the wire
protocol and the sandbox; how each language is compiled and run lives in cpfleet.sandbox.languages.
"""

from __future__ import annotations

from collections.abc import Mapping

LANGUAGES = ("python3", "pypy3", "cpp", "c", "java")

# fence tags (lower-cased info-string words) -> language
FENCE_TAGS: Mapping[str, str] = {
    "python": "python3", "py": "python3", "python3": "python3",
    "pypy": "pypy3", "pypy3": "pypy3",
    "cpp": "cpp", "c++": "cpp", "cc": "cpp", "cxx": "cpp",
    "c": "c",
    "java": "java",
}
