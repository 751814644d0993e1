"""``cpfleet prepare`` for a folder of Kattis / ICPC problem packages.

A package (problemarchive.org problem format, legacy and 2023-07) is a folder with
``problem.yaml``; the record follows $CPFLEET_SHARED_DATA/icpc-kattis-31.jsonl.gz field for field:

- tests: ``data/sample/**.in`` (public) and ``data/secret/**.in``, each with its ``.ans`` (one
  valid answer), in path order; an interactive test without ``.ans`` gets "". The hidden tests,
  which decide the reward, are the samples followed by the secret tests: Kattis, problemtools and
  DOMjudge run both groups and accept a submission only when every test passes, so a program
  failing a sample is never paid (the shared file keeps the two groups apart; see docs/formats.md).
- limits: ``problem.yaml`` ``limits.time_limit`` (2023-07), else a DOMjudge ``.timelimit``
  file, else ``domjudge-problem.ini`` ``timelimit`` (one over 8 KiB is not read); else none (legacy Kattis sets it from
  the jury's solutions), with the source in ``time_limit_source``. ``limits.memory`` (MiB), else
  :data:`DEFAULT_MEMORY_MB`, with the source in ``memory_limit_source``.
- checker: ``validation: default`` (or absent) -> ``exact_tokens``, or ``float`` when
  ``validator_flags`` carry ``float_tolerance`` / ``float_absolute_tolerance`` /
  ``float_relative_tolerance`` (parsed into the spec, the flag string kept); the flags are
  ``problem.yaml``'s ``validator_flags`` then the test's own or its group's validator arguments
  (``output_validator_args`` of 2023-07 and later, or the legacy ``output_validator_flags``, in a
  test case's ``.yaml``, its group's ``testdata.yaml`` / ``test_group.yaml`` or its parent
  group's), as problemtools passes both per test, and a
  package whose groups end with different flags is skipped (one checker judges every test); a custom
  validator (``validation: custom`` or an ``output_validators/`` folder) ->
  ``kattis_validator`` with every file of the validator's folder in ``files``, its sources in
  ``entry_points``, ``language`` from their suffix; interactive (``validation: custom
  interactive`` or ``type: interactive``) -> ``interactive``, same fields. A validator folder
  with its own ``build`` (or only a ``run``) script has ``language: build_run`` and that
  script as its entry point: it is built by ``build`` and run by ``run``, as problemtools does.
- ``--with-solutions``: ``submissions/<verdict>/<file>`` -> ``submissions``
  ``[{language, file, dir, expected, source}]`` (C, C++, Java, Python 3; Python 2 and other
  languages counted and dropped), and Python 3 ``accepted`` / ``wrong_answer`` ones also as
  ``correct_solutions`` / ``incorrect_solutions``. An interactive problem left with no
  ``correct_solutions`` (without the flag, or no accepted Python 3 submission) is counted in the
  summary's notes (``NO_REFERENCE``): no reference can vouch for its interactor.
- ``python3_interpreter: pypy3``: Kattis judges Python 3 submissions with PyPy, and the time
  limits are sized for that, so a python3 completion is judged under PyPy.
- skipped: scoring and multi-pass problems, packages without tests, packages whose secret tests
  are none or only the samples again (the samples alone would decide the reward), each with its
  reason.

Over 500 lines: one package format read whole (tests, validator flags per group, limits from
three sources, validator folders, submissions, statements), each part small and read together
with the others by :func:`convert_package`.
"""

from __future__ import annotations

import configparser
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cpfleet.core.checkers import checker_language
from cpfleet.core.errors import PrepareError
from cpfleet.core.languages import LANGUAGES, by_extension, checker_languages
from cpfleet.core.records import make_record
from cpfleet.core.testshapes import Test, TestSet
from cpfleet.datasets.formats import Converted, DatasetFormat, PrepareOptions, register_format

# an interactive problem with no correct solution to vouch for its interactor
# (sandbox/interactive.py): an interactor failing while a program runs is the program's
# WRONG_ANSWER unless it fails alone too, so a broken one can cost correct programs their reward
NO_REFERENCE = ("interactive problems without a reference solution (prepare with --with-solutions; an "
                "accepted Python 3 submission vouches for the interactor): an interactor failing on a "
                "program's dialogue is charged to the program unless it fails with no program output at all")

VERDICT_DIRS = {
    "accepted": "accepted", "slow_accepted": "accepted", "wrong_answer": "wrong_answer",
    "time_limit_exceeded": "time_limit_exceeded", "run_time_error": "run_time_error",
    "runtime_error": "run_time_error", "partially_accepted": "partially_accepted",
    "memory_limit_exceeded": "memory_limit_exceeded", "output_limit_exceeded": "output_limit_exceeded",
    "compile_error": "compile_error",
}
FLOAT_FLAGS = ("float_tolerance", "float_absolute_tolerance", "float_relative_tolerance")
# A package that states no memory limit gets the judges' own default: problemtools'
# system_default.yaml (memory: 2048) and DOMjudge's 2 GiB; the project's 512 MB would refuse
# accepted jury solutions that need ~800 MB
DEFAULT_MEMORY_MB = 2048
NO_SECRET_TEST = "no secret test beyond the samples (the samples alone, shown in the statement, would decide the reward)"
MAX_FILE_BYTES = 64 << 20  # a test or validator file above this is refused, not read


def iter_packages(root: Path) -> Iterator[Path]:
    """``root`` itself when it is a package, else the packages one or two levels below it
    (a contest folder, or a folder of contests), in path order."""
    if (root / "problem.yaml").is_file():
        yield root
        return
    for yaml_path in sorted([*root.glob("*/problem.yaml"), *root.glob("*/*/problem.yaml")]):
        yield yaml_path.parent


def is_package_folder(path: Path) -> bool:
    return path.is_dir() and next(iter_packages(path), None) is not None


def _read_text(path: Path, *, exact: bool = False) -> str:
    """A regular file of the package, decoded. Paths are built from the package's resolved
    folder, so one that resolves elsewhere went through a symbolic link: refused, as a link in a
    downloaded package could point anywhere on this machine; so are FIFOs and devices (a read
    that never ends) and files over MAX_FILE_BYTES.

    ``exact``: the file is a test's input or answer, which a record holds as text: bytes that
    are not UTF-8 raise PrepareError (the package is skipped, naming the file) rather than
    becoming U+FFFD, which would hand the program other bytes than the jury's input and compare
    its output with an answer no program prints. Other files (sources, statements) are read
    with U+FFFD for such bytes."""
    if path.resolve() != path:
        raise PrepareError(f"{path}: a symbolic link (refused: it could point outside the package)")
    if not path.is_file():
        raise PrepareError(f"{path}: not a regular file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise PrepareError(f"{path}: over {MAX_FILE_BYTES >> 20} MiB")
    data = path.read_bytes()
    if exact:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PrepareError(f"{path}: not UTF-8 (byte {e.start}): a test is kept as text") from None
    return data.decode("utf-8", errors="replace")


# values a problem.yaml / testdata.yaml may hold with its aliases expanded (real ones: a few dozen),
# and characters in its strings: no more than a file of the largest size read holds without aliases
MAX_YAML_VALUES = 100_000
MAX_YAML_CHARS = MAX_FILE_BYTES


def _within_values(data: Any, cap: int, max_chars: int = MAX_YAML_CHARS) -> bool:
    """Whether ``data`` holds at most ``cap`` values and ``max_chars`` characters of strings,
    counting every alias where it is used, read in time bounded by ``cap`` and the file's size:
    YAML aliases nest, so a 400-byte file can stand for a list of billions of items (or one that
    contains itself), which ``str()`` of a field or any walk of it would spell out (hours, all
    the memory); and a 1 MB string named by 500 aliases in ``validator_flags`` made a 500 MB
    record (60k aliases, under the value cap: 60 GB), past what a file without aliases holds."""
    todo, n, chars = [data], 0, 0
    while todo:
        v = todo.pop()
        n += 1
        if isinstance(v, str):
            chars += len(v)
        if n > cap or chars > max_chars:
            return False
        if isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
    return True


def _load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(_read_text(path)) if path.is_file() else {}
    except yaml.YAMLError as e:
        raise PrepareError(f"{path}: not YAML ({e.__class__.__name__})") from None
    if not _within_values(data, MAX_YAML_VALUES):
        raise PrepareError(f"{path}: over {MAX_YAML_VALUES} values or {MAX_YAML_CHARS} characters with its aliases "
                           "expanded")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PrepareError(f"{path}: not a YAML mapping")
    return data


def _tests(pkg: Path, group: str, interactive: bool, counts: Counter[str]) -> list[Test]:
    base = pkg / "data" / group
    if not base.is_dir():
        return []
    tests = []
    for inp in sorted(base.rglob("*.in"), key=lambda p: p.relative_to(base).as_posix()):
        ans = inp.with_suffix(".ans")
        if ans.is_file():
            tests.append((_read_text(inp, exact=True), _read_text(ans, exact=True)))
        elif interactive:
            tests.append((_read_text(inp, exact=True), ""))
        else:
            counts[f"{group} test without .ans dropped"] += 1
    return tests


def _limits(meta: dict[str, Any]) -> dict[str, Any]:
    limits = meta.get("limits")
    return limits if isinstance(limits, dict) else {}


# a domjudge-problem.ini is a few short lines; configparser reads a line of blanks between words in
# time quadratic in it (40k characters 10 s, 1 MB hours), so a longer one is read as unparsable
MAX_INI_CHARS = 8 << 10


def _time_limit(pkg: Path, meta: dict[str, Any]) -> tuple[float | None, str | None]:
    limits = _limits(meta)
    tl = limits.get("time_limit")
    if isinstance(tl, int | float) and not isinstance(tl, bool) and tl > 0:
        return float(tl), "problem.yaml"
    dot = pkg / ".timelimit"
    if dot.is_file():
        try:
            value = float(_read_text(dot).strip())
        except ValueError:
            value = 0.0
        if value > 0:
            return value, ".timelimit"
    ini = pkg / "domjudge-problem.ini"
    if ini.is_file():
        parser = configparser.ConfigParser()
        text, value = _read_text(ini), 0.0
        try:
            if len(text) <= MAX_INI_CHARS:
                parser.read_string("[problem]\n" + text)
                raw = parser.get("problem", "timelimit", fallback="").strip().strip("'\"")
                value = float(raw) if raw else 0.0
        except (configparser.Error, ValueError):
            value = 0.0
        if value > 0:
            return value, "domjudge-problem.ini"
    return None, None


def _memory_limit(meta: dict[str, Any]) -> tuple[int, str]:
    """The memory limit in MiB and where it comes from."""
    limits = _limits(meta)
    mem = limits.get("memory")
    if isinstance(mem, int | float) and not isinstance(mem, bool) and mem >= 16:
        return int(mem), "problem.yaml"
    return DEFAULT_MEMORY_MB, "default"


def _flag_words(flags: Any) -> str:
    """A ``validator_flags`` / ``output_validator_flags`` / ``output_validator_args`` value as
    text ('' when absent)."""
    if flags is None:
        return ""
    if isinstance(flags, list):
        return " ".join(str(f) for f in flags).strip()
    return str(flags).strip()


# a test group's settings file: testdata.yaml (legacy, 2023-07), test_group.yaml (2025-09)
_GROUP_FILES = ("testdata.yaml", "test_group.yaml")
# the arguments a group or a test case gives the output validator: output_validator_args (2023-07
# and later, a list of words), output_validator_flags (legacy, a string)
_ARG_KEYS = ("output_validator_args", "output_validator_flags")


def _stated_flags(config: dict[str, Any]) -> str | None:
    """The output validator's arguments a settings file states (None: it states none, so its
    group's or parent's apply)."""
    for key in _ARG_KEYS:
        if key in config:
            return _flag_words(config[key])
    return None


def _group_flags(pkg: Path, folder: Path, known: dict[Path, str]) -> str:
    """The output validator's arguments of the test group ``folder`` (a folder under ``data/``):
    its own settings file's (``_GROUP_FILES``, ``_ARG_KEYS``), else its parent group's, up to
    ``data/`` ('' when none says), as problemtools' TestCaseGroup inherits a key its group's
    file leaves out."""
    if folder in known:
        return known[folder]
    data = pkg / "data"
    flags = "" if folder == data else _group_flags(pkg, folder.parent, known)
    for name in _GROUP_FILES:
        stated = _stated_flags(_load_yaml(folder / name))
        if stated is not None:
            flags = stated
            break
    known[folder] = flags
    return flags


def _tests_flags(meta: dict[str, Any], pkg: Path) -> set[str]:
    """The validator flags the tests are judged with, one text per distinct set ('' for none):
    ``problem.yaml``'s ``validator_flags`` followed by each test's own arguments (a test case's
    ``<name>.yaml``, 2023-07 and later), else its group's (problemtools passes the validator
    both, in that order, per test). The record has one checker for all its tests, so more than
    one text here is a package this format cannot convert: judged with one group's flags, the
    other groups' tests would be compared by rules their jury did not set (a tolerance missing,
    or ``case_sensitive``)."""
    problem_flags = _flag_words(meta.get("validator_flags"))
    known: dict[Path, str] = {}
    combined: set[str] = set()
    for group in ("sample", "secret"):
        base = pkg / "data" / group
        if not base.is_dir():
            continue
        for inp in sorted(base.rglob("*.in")):
            own = _stated_flags(_load_yaml(inp.with_suffix(".yaml")))
            test_flags = own if own is not None else _group_flags(pkg, inp.parent, known)
            combined.add(" ".join(w for w in (problem_flags, test_flags) if w))
    if not combined:  # no tests (the package is skipped for that): the flags it states
        combined.add(" ".join(w for w in (problem_flags, _group_flags(pkg, pkg / "data", known)) if w))
    return combined


# a POSIX shell word: escaped characters, single- and double-quoted strings, other characters that
# are not blanks; each piece told by its first character, so a word is read once
_SHELL_WORD = re.compile(r"""(?:\\.|'[^']*'|"(?:[^"\\]|\\.)*"|[^ \t\r\n'"\\])+""", re.S)
_SHELL_PIECE = re.compile(r"""\\(.)|'([^']*)'|"((?:[^"\\]|\\.)*)"|([^ \t\r\n'"\\]+)""", re.S)
_DQ_ESCAPE = re.compile(r"""\\([\\"])""")
_SHELL_NOT_BLANK = re.compile(r"[^ \t\r\n]")


def shell_words(text: str) -> list[str]:
    """``shlex.split(text)`` in time linear in ``text``: shlex adds a word's characters to it one
    at a time (time quadratic in a long word: 400k characters 2 s, a large problem.yaml's flags
    hours, in the prepare process). The same words, and ValueError where shlex raises it (a quote
    left open, a backslash at the end)."""
    words: list[str] = []
    pos = _next_word(text, 0)
    while pos < len(text):
        m = _SHELL_WORD.match(text, pos)
        end = m.end() if m is not None else pos
        if end < len(text) and text[end] not in " \t\r\n":  # a quote or backslash the text ends in
            # inside an open double quote a backslash pairs with the next character: an odd run
            # of them at the end leaves one escaping nothing
            odd = (len(text) - len(text.rstrip("\\"))) % 2 == 1
            raise ValueError("No escaped character" if text[end] == "\\" or (text[end] == '"' and odd)
                             else "No closing quotation")
        parts: list[str] = []
        for piece in _SHELL_PIECE.finditer(text, pos, end):
            escaped, single, double, plain = piece.groups()
            if double is not None:
                parts.append(_DQ_ESCAPE.sub(r"\1", double))
            else:
                parts.append(escaped if escaped is not None else single if single is not None else plain)
        words.append("".join(parts))
        pos = _next_word(text, end)
    return words


def _next_word(text: str, pos: int) -> int:
    m = _SHELL_NOT_BLANK.search(text, pos)
    return len(text) if m is None else m.start()


def default_checker(flags: str | None) -> dict[str, Any]:
    """Kattis's default output validator: exact tokens, or floats when a tolerance flag is set."""
    try:
        words = shell_words(flags) if flags else []
    except ValueError as e:
        raise PrepareError(f"validator_flags {flags!r}: {e}") from None
    spec: dict[str, Any] = {}
    i = 0
    while i < len(words):
        if words[i] in FLOAT_FLAGS and i + 1 < len(words):
            try:
                spec[words[i]] = float(words[i + 1])
            except ValueError:
                raise PrepareError(f"validator_flags {flags!r}: {words[i]} needs a number") from None
            i += 2
        else:
            i += 1
    if spec:
        return {"type": "float", "validator_flags": flags, **spec}
    if flags:
        return {"type": "exact_tokens", "validator_flags": flags}
    return {"type": "exact_tokens"}


def _validator_folder(pkg: Path) -> Path | None:
    for name in ("output_validators", "output_validator"):
        d = pkg / name
        if d.is_dir() and any(p.is_file() for p in d.rglob("*")):
            return d
    return None


def program_checker(pkg: Path, kind: str, validation: str, flags: str | None,
                    counts: Counter[str]) -> dict[str, Any] | str:
    """The package's own validator (or interactor) as a checker spec, or a skip reason."""
    folder = _validator_folder(pkg)
    if folder is None:
        return f"{validation or kind} validation but no output_validators folder"
    subdirs = sorted(d for d in folder.iterdir() if d.is_dir())
    loose = [p for p in folder.iterdir() if p.is_file()]
    vdir = folder if loose or not subdirs else subdirs[0]
    if not loose and len(subdirs) > 1:
        counts["several output validators: the first one taken"] += 1
    files = {p.relative_to(pkg).as_posix(): _read_text(p)
             for p in sorted(vdir.rglob("*")) if p.is_file()}
    top = vdir.relative_to(pkg).as_posix()
    for script in ("build", "run"):
        if f"{top}/{script}" in files:
            # problemtools' BuildRun: built by its build script, then run by its run script
            return {"type": kind, "validation": validation, "files": files, "language": "build_run",
                    "entry_points": [f"{top}/{script}"], "validator_flags": flags}
    entry = [f for f in files if by_extension(Path(f).suffix)]
    languages = {by_extension(Path(f).suffix) for f in entry}
    if not entry:
        return f"validator folder has no source in {', '.join(LANGUAGES)}"
    if len(languages) > 1:
        return "validator sources in several languages"
    if checker_language(next(iter(languages))) is None:
        return f"validator in {next(iter(languages))}: checker programs are in {', '.join(checker_languages())}"
    return {
        "type": kind,
        "validation": validation,
        "files": files,
        "language": languages.pop(),
        "entry_points": entry,
        "validator_flags": flags,
    }


def _submission_language(path: Path, source: str) -> str | None:
    lang = by_extension(path.suffix)
    if lang == "python3":
        first = source.split("\n", 1)[0]
        if first.startswith("#!") and "python2" in first:
            return "python2"
    return lang


def _submissions(pkg: Path, opts: PrepareOptions, counts: Counter[str]) -> list[dict[str, str]]:
    root = pkg / "submissions"
    if not root.is_dir():
        return []
    subs: list[dict[str, str]] = []
    for vdir in sorted(d for d in root.iterdir() if d.is_dir()):
        expected = VERDICT_DIRS.get(vdir.name)
        if expected is None:
            counts[f"submissions in unknown folder {vdir.name[:30]!r} dropped"] += 1
            continue
        for item in sorted(vdir.iterdir()):
            if item.is_dir():
                counts["submissions multi-file dropped"] += 1
                continue
            source = _read_text(item)
            lang = _submission_language(item, source)
            if lang == "python2":
                counts["submissions python2 dropped"] += 1
                continue
            if lang is None:
                counts[f"submissions in other languages ({item.suffix or 'no suffix'}) dropped"] += 1
                continue
            subs.append({"language": lang, "file": item.relative_to(pkg).as_posix(), "dir": vdir.name,
                         "expected": expected, "source": source})
    if opts.max_solutions is not None:
        per_kind: Counter[tuple[str, str]] = Counter()
        capped = []
        for s in subs:
            per_kind[(s["language"], s["expected"])] += 1
            if per_kind[(s["language"], s["expected"])] <= opts.max_solutions:
                capped.append(s)
            else:
                counts["submissions over --max-solutions"] += 1
        subs = capped
    for s in subs:
        counts[f"submissions {s['language']} {s['expected']} kept"] += 1
    return subs


def _statement(pkg: Path) -> tuple[str, str | None]:
    for folder in ("problem_statement", "statement"):
        d = pkg / folder
        if not d.is_dir():
            continue
        for name in ("problem.en.tex", "problem.tex", "problem.en.md", "problem.md"):
            if (d / name).is_file():
                return _read_text(d / name), "latex" if name.endswith(".tex") else "markdown"
        found = sorted(d.glob("problem.*.tex")) + sorted(d.glob("problem.*.md"))
        if found:
            return _read_text(found[0]), "latex" if found[0].suffix == ".tex" else "markdown"
    return "", None


def _name(meta: dict[str, Any], pkg: Path) -> str:
    name = meta.get("name")
    if isinstance(name, dict):
        name = name.get("en") or next(iter(name.values()), None)
    return str(name) if name else pkg.name


def convert_package(pkg: Path, pid: str, opts: PrepareOptions, counts: Counter[str]) -> Converted:
    """One problem package -> a record in the shared schema, or the reason it is skipped."""
    pkg = pkg.resolve()
    meta = _load_yaml(pkg / "problem.yaml")
    validation = str(meta.get("validation") or "default").strip()
    ptype = meta.get("type") or "pass-fail"
    types = {str(t) for t in ptype} if isinstance(ptype, list) else set(str(ptype).split())
    if "scoring" in types or "score" in validation.split():
        return "scoring problem (per-group scores, not pass/fail)"
    if "multi-pass" in types:
        return "multi-pass problem"
    interactive = "interactive" in types or "interactive" in validation.split()
    all_flags = _tests_flags(meta, pkg)
    if len(all_flags) > 1:
        return ("test groups with different validator flags "
                f"({' / '.join(repr(f) for f in sorted(all_flags))[:200]}): one checker judges every test")
    flags = all_flags.pop() or None
    if interactive:
        checker: dict[str, Any] | str = program_checker(pkg, "interactive", validation, flags, counts)
    elif validation.split()[0] == "custom" or (
        "validation" not in meta and meta.get("problem_format_version") and _validator_folder(pkg) is not None
    ):  # legacy "default" means Kattis's own validator whatever folders exist; 2023-07 has no
        # `validation` key and uses the package's validator when it ships one
        checker = program_checker(pkg, "kattis_validator", validation, flags, counts)
    else:
        checker = default_checker(flags)
    if isinstance(checker, str):
        return checker
    public = _tests(pkg, "sample", interactive, counts)
    secret = _tests(pkg, "secret", interactive, counts)
    if public and all(t in public for t in secret):
        # the hidden tests are the samples and the secret ones: without a secret test of its own
        # (none, none with its .ans, only the samples again) the reward would come from the
        # samples alone, whose answers the statement and the feedback show
        return NO_SECRET_TEST
    tl, tl_source = _time_limit(pkg, meta)
    memory_mb, memory_source = _memory_limit(meta)
    description, fmt = _statement(pkg)
    rec = make_record(
        pid, TestSet(tuple(public), (*public, *secret)),
        name=_name(meta, pkg),
        description=description,
        time_limit_s=tl,
        memory_limit_mb=memory_mb,
        checker=checker,
        extra={"time_limit_source": tl_source, "memory_limit_source": memory_source, "description_format": fmt,
               "problem_type": "interactive" if interactive else "pass-fail",
               "source": meta.get("source"), "license": meta.get("license")},
    )
    # Kattis judges "Python 3" with PyPy, and juries size their time limits for that: a
    # python3 completion runs under PyPy here too (Problem.python3_interpreter)
    rec["python3_interpreter"] = "pypy3"
    if opts.with_solutions:
        subs = _submissions(pkg, opts, counts)
        rec["submissions"] = subs
        rec["correct_solutions"] = [s["source"] for s in subs
                                    if s["language"] == "python3" and s["expected"] == "accepted"]
        rec["incorrect_solutions"] = [s["source"] for s in subs
                                      if s["language"] == "python3" and s["expected"] == "wrong_answer"]
    if interactive and not rec.get("correct_solutions"):
        counts[NO_REFERENCE] += 1
    return rec


def package_id(pkg: Path) -> str:
    """``<contest folder>/<package folder>``, e.g. ``gcpc2021/arcade2``, whichever folder
    (the package, its contest, a folder of contests) was given."""
    pkg = pkg.resolve()
    return f"{pkg.parent.name}/{pkg.name}"


def _packages(root: Path) -> Iterator[tuple[str, Path]]:
    for pkg in iter_packages(root):
        yield package_id(pkg), pkg


register_format(DatasetFormat(
    "kattis", "Kattis problem package (problem.yaml), or a folder of them",
    detect_path=is_package_folder, items=_packages, convert_item=lambda pkg, pid, opts, counts: convert_package(pkg, pid, opts, counts),
    priority=10))
