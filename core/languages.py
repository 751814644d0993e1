"""The languages a solution may be written in: one declaration each, read by every layer.

A language is one :class:`LanguageInfo` entry in :data:`BUILTIN` (or one ``register_language``
call): its name, the fence tags that name it in a completion, the names datasets state for it,
its source-file extensions, and whether checker programs may be written in it. Everything that
needs these facts reads them from here: extraction (sandbox/extract.py), the problem format
(``languages``, ``time_limit_multipliers``), the job protocol, the dataset converters
(core/records.py, cpfleet/datasets/formats/kattis.py), ``cpfleet run`` and the checker specs
(core/checkers/). How a language is compiled and run is the sandbox's business
(cpfleet.sandbox.languages: one module per name, its toolchain bound to the entry here by its name),
so that the client layer needs no sandbox import to know the names.

``LANGUAGES`` and ``FENCE_TAGS`` are live views of the registry: a language registered later (a
toy one in a test, a plug-in) is seen by every module that imported them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

from cpfleet.core.errors import RegistrationError


@dataclass(frozen=True, slots=True)
class LanguageInfo:
    """What the layers above the sandbox know about a language.

    ``family``: languages of one family share their code (a ```python block on a pypy3 job
    runs under PyPy); ``dataset_names``: the (lower-cased) names a dataset row states for a
    solution in this language, several languages may claim one (``python`` -> python3 and
    pypy3); ``extensions``: source-file suffixes, case-sensitive (Kattis's ``.C`` is C++, ``.c``
    is C); ``checker_source``: the file name a checker program's inline ``source`` is saved as,
    empty when checker programs cannot be written in this language; ``prompt_tag``: the fence
    tag a feedback message shows as the example (``python`` for both Pythons)."""

    name: str
    fence_tags: tuple[str, ...]
    dataset_names: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()
    family: str = ""
    checker_source: str = ""
    prompt_tag: str = ""

    def example_tag(self) -> str:
        return self.prompt_tag or (self.fence_tags[0] if self.fence_tags else self.name)


BUILTIN: tuple[LanguageInfo, ...] = (
    LanguageInfo("python3", ("python", "py", "python3"), ("python", "python3", "py"), (".py", ".py3"),
                 family="python", checker_source="checker.py", prompt_tag="python"),
    LanguageInfo("pypy3", ("pypy", "pypy3"), ("python", "python3", "py", "pypy", "pypy3"), (),
                 family="python", prompt_tag="python"),
    LanguageInfo("cpp", ("cpp", "c++", "cc", "cxx"), ("cpp", "c++"), (".cpp", ".cc", ".cxx", ".c++", ".C"),
                 checker_source="checker.cpp"),
    LanguageInfo("c", ("c",), ("c",), (".c",), checker_source="checker.c"),
    LanguageInfo("java", ("java",), ("java",), (".java",)),
)

_lock = threading.Lock()
_REGISTRY: dict[str, LanguageInfo] = {info.name: info for info in BUILTIN}


def register_language(info: LanguageInfo, *, replace: bool = False) -> None:
    """Add a language (its toolchain: ``cpfleet.sandbox.languages.register_toolchain``). A fence
    tag, dataset name or extension another language already claims is refused unless that
    sharing is declared (dataset names may be shared: they map to several languages)."""
    if not info.name or not info.name.isidentifier():
        raise RegistrationError(f"a language name must be an identifier, got {info.name!r}")
    with _lock:
        if info.name in _REGISTRY and not replace:
            raise RegistrationError(f"language {info.name!r} is already registered (pass replace=True)")
        others = [i for n, i in _REGISTRY.items() if n != info.name]
        for tag in info.fence_tags:
            if any(tag in o.fence_tags for o in others):
                raise RegistrationError(f"fence tag {tag!r} already names another language")
        for ext in info.extensions:
            if any(ext in o.extensions for o in others):
                raise RegistrationError(f"extension {ext!r} already names another language")
        _REGISTRY[info.name] = info


def unregister_language(name: str) -> None:
    """Remove a registered language (tests register toy ones and take them back)."""
    with _lock:
        if name in {i.name for i in BUILTIN}:
            raise RegistrationError(f"{name!r} is a built-in language")
        _REGISTRY.pop(name, None)


def info(name: str) -> LanguageInfo | None:
    return _REGISTRY.get(name)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def fence_tags() -> dict[str, str]:
    """Fence tags (lower-cased info-string words) -> language."""
    return {tag: i.name for i in _REGISTRY.values() for tag in i.fence_tags}


def family_of(name: str) -> tuple[str, ...]:
    """The languages that share ``name``'s code (itself alone when it has no family)."""
    me = _REGISTRY.get(name)
    if me is None or not me.family:
        return (name,)
    return tuple(n for n, i in _REGISTRY.items() if i.family == me.family)


def dataset_languages(stated: str) -> list[str] | None:
    """The languages a dataset's stated language name judges in (None: no language here)."""
    key = stated.strip().lower()
    found = [n for n, i in _REGISTRY.items() if key in i.dataset_names]
    return found or None


def by_extension(suffix: str) -> str | None:
    """The language of a source file suffix (``.cc`` -> cpp); None when no language claims it."""
    for n, i in _REGISTRY.items():
        if suffix in i.extensions:
            return n
    return None


def checker_languages() -> tuple[str, ...]:
    """The languages a checker or interactor program may be written in."""
    return tuple(n for n, i in _REGISTRY.items() if i.checker_source)


class _Names(Sequence[str]):
    """``LANGUAGES``: the registered names, in registration order, always current."""

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...
    def __getitem__(self, i: int | slice) -> str | tuple[str, ...]:
        return names()[i]

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __contains__(self, x: object) -> bool:
        return x in _REGISTRY

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(other) == names()

    def __hash__(self) -> int:
        return hash(names())

    def __repr__(self) -> str:
        return repr(names())


class _FenceTags(Mapping[str, str]):
    """``FENCE_TAGS``: fence tag -> language, always current."""

    def __getitem__(self, tag: str) -> str:
        return fence_tags()[tag]

    def __iter__(self) -> Iterator[str]:
        return iter(fence_tags())

    def __len__(self) -> int:
        return len(fence_tags())

    def __repr__(self) -> str:
        return repr(fence_tags())


LANGUAGES: Sequence[str] = _Names()
FENCE_TAGS: Mapping[str, str] = _FenceTags()


def fence(code: str, tag: str = "python") -> str:
    """``code`` as a completion the extractor returns whole: in a fence longer than any run of
    backticks inside it (CommonMark: no line of the code can close it), tagged ``tag``."""
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{tag}\n{code}\n{ticks}\n"
