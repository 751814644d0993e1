"""The dataset formats ``cpfleet prepare`` reads: one module each, found by name.

A format is one :class:`DatasetFormat` registered by its own module in this package:
``code_contests``, ``taco`` (``taco`` and ``apps``, one schema), ``livecodebench``, ``deepcoder``,
``primeintellect``, ``codeforces`` (open-r1) and ``kattis`` (a folder of problem packages);
``common`` holds what two inline-JSON formats share. Everything else reads this registry:
``--format``'s choices and help, the detection from a dataset's columns (or, for a folder format,
from the path), and the conversion loop (cpfleet/datasets/prepare.py). Adding a format is one
module here that calls :func:`register_format`, its name in :data:`BUILTIN_MODULES`, and its
tests (docs/ARCHITECTURE.md has the recipe).

Two kinds: a **row** format converts each row of a table (a hub dataset or a local parquet /
JSON / Arrow file) with ``convert(row, index, opts, counts)``; a **folder** format reads a local
folder (``detect_path``) as items (``items(root)``: ``(name, item)``) converted one by one with
``convert_item(item, name, opts, counts)``. Either converter returns the record in the shared
schema or the reason the row is skipped (a string), adding to ``counts`` what it noticed.
"""

from __future__ import annotations

import importlib
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpfleet.core.errors import RegistrationError


@dataclass(frozen=True, slots=True)
class PrepareOptions:
    split: str = "test"
    fmt: str | None = None
    max_hidden: int | None = None
    min_public: int = 1
    difficulty: tuple[int | None, int | None] | None = None
    max_samples: int | None = None
    with_solutions: bool = False
    max_solutions: int | None = None
    num_public: int = 1  # formats without a public/hidden split
    config: str | None = None  # the hub dataset's config (DeepCoder: primeintellect, taco, lcbv5, codeforces)
    subset: str | None = None  # names DeepCoder ids (deepcoder/<subset>/<split>/<row>); defaults to config
    generated_tests: str | None = None  # open-r1/codeforces: folder of test_cases_XXXX.parquet
    data_files: tuple[str, ...] = ()  # hub repo files to load (e.g. LiveCodeBench test6.jsonl)
    time_limit_s: float | None = None  # --time-limit: every problem's, whatever its row states
    memory_limit_mb: int | None = None  # --memory-limit: every problem's, whatever its row states


Converted = dict[str, Any] | str
RowConverter = Callable[[Mapping[str, Any], int, PrepareOptions, Counter[str]], Converted]
ItemConverter = Callable[[Any, str, PrepareOptions, Counter[str]], Converted]


@dataclass(frozen=True, slots=True)
class DatasetFormat:
    """One dataset format. ``detect``: True when a table's column names are this format's (tried
    in ``priority`` order, lowest first, so a more specific format is asked before a looser
    one); None: only ``--format`` selects it."""

    name: str
    summary: str  # one line for ``cpfleet prepare --help``
    convert: RowConverter | None = None
    detect: Callable[[set[str]], bool] | None = None
    priority: int = 100
    detect_path: Callable[[Path], bool] | None = None
    items: Callable[[Path], Iterator[tuple[str, Any]]] | None = None
    convert_item: ItemConverter | None = None
    # the columns not to decode at all under these options (the heavy ones a run does not need)
    drop_columns: Callable[[PrepareOptions, Iterable[str]], list[str]] | None = None
    # the options this format runs with (e.g. a hub config that names a subset)
    options: Callable[[PrepareOptions], PrepareOptions] | None = None
    # The per-test time limit the dataset's own grader gives a row that states none (LiveCodeBench's
    # run_test: a 6 s alarm per test), so a correct solution that the dataset's grader accepts is
    # not refused here for a limit the dataset never set; ``harness`` names that grader in the
    # record's ``time_limit_source``. None: the project's default (core/problem.py).
    harness_time_limit_s: float | None = None
    harness: str = ""

    @property
    def folder(self) -> bool:
        return self.items is not None


_lock = threading.Lock()
_FORMATS: dict[str, DatasetFormat] = {}


def register_format(fmt: DatasetFormat, *, replace: bool = False) -> None:
    if not fmt.name or not isinstance(fmt.name, str):
        raise RegistrationError("a dataset format needs a non-empty name")
    if (fmt.convert is None) == (fmt.items is None) or (fmt.items is None) != (fmt.convert_item is None):
        raise RegistrationError(f"format {fmt.name!r}: give either convert (rows) or items + convert_item (a folder)")
    with _lock:
        if fmt.name in _FORMATS and not replace:
            raise RegistrationError(f"dataset format {fmt.name!r} is already registered (pass replace=True)")
        _FORMATS[fmt.name] = fmt


def unregister_format(name: str) -> None:
    with _lock:
        _FORMATS.pop(name, None)


# the modules of the built-in formats, in the order ``--format``'s help lists them
BUILTIN_MODULES = ("code_contests", "taco", "livecodebench", "deepcoder", "primeintellect", "codeforces", "kattis")


def _load_builtin() -> None:
    """Import the modules that register the built-in formats (they register on import)."""
    for module in BUILTIN_MODULES:
        importlib.import_module(f"{__name__}.{module}")


def formats() -> dict[str, DatasetFormat]:
    _load_builtin()
    with _lock:
        return dict(_FORMATS)


def names() -> list[str]:
    return list(formats())


def get(name: str) -> DatasetFormat | None:
    return formats().get(name)


def detect_columns(columns: Iterable[str]) -> str | None:
    """The row format whose ``detect`` accepts these columns first (by priority); None: none."""
    cols = set(columns)
    for fmt in sorted(formats().values(), key=lambda f: f.priority):
        if fmt.detect is not None and fmt.detect(cols):
            return fmt.name
    return None


def detect_path(path: Path) -> str | None:
    """The folder format that recognises ``path``; None when none does."""
    for fmt in sorted(formats().values(), key=lambda f: f.priority):
        if fmt.detect_path is not None and fmt.detect_path(path):
            return fmt.name
    return None


def help_text() -> str:
    """Every format with its one-line summary, for ``--format``'s help."""
    return "; ".join(f"{f.name}: {f.summary}" for f in formats().values())
