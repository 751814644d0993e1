"""The problem format: what ``cpfleet judge`` reads and what the problem store holds.

A problem is plain data (no behaviour beyond parsing and hashing) so that the producer,
the workers and the judge can all share it without importing the execution machinery.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from cpfleet.core.errors import NoHiddenTestsError, NoPublicTestsError, ProblemFormatError
from cpfleet.core.protocol import check_mode, rewarded_tests

DEFAULT_TIME_LIMIT_S = 2.0
DEFAULT_MEMORY_LIMIT_MB = 512
# the limits a problem may state: a time limit in (0, MAX_TIME_LIMIT_S] seconds, a memory limit in
# [MIN_MEMORY_LIMIT_MB, MAX_MEMORY_LIMIT_MB]; the record check (core/records.py) and cpfleet
# prepare's --time-limit / --memory-limit read the same bounds
MAX_TIME_LIMIT_S = 600.0
MIN_MEMORY_LIMIT_MB = 16
MAX_MEMORY_LIMIT_MB = 65536


@dataclass(frozen=True, slots=True)
class TestCase:
    input: str
    output: str


@dataclass(frozen=True, slots=True)
class Problem:
    id: str
    public_tests: tuple[TestCase, ...]
    hidden_tests: tuple[TestCase, ...]
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    checker: dict[str, Any] = field(default_factory=lambda: {"type": "tokens"})
    description: str = ""
    correct_solutions: tuple[str, ...] = ()
    incorrect_solutions: tuple[str, ...] = ()
    fn_name: str | None = None  # function-call problem (sandbox/fncall.py): tests are JSON args -> JSON value
    # which reference harness's rules judge a function-call problem (core/fncall.py ``SEMANTICS``)
    fn_semantics: str = "python"
    starter_code: str = ""  # shown in feedback when the function is missing; never prepended
    languages: tuple[str, ...] | None = None  # allowed solution languages (None: any)
    time_limit_multipliers: dict[str, float] = field(default_factory=dict)  # per language, default 1.0
    # what a python3 program is judged with: None (CPython) or "pypy3" (Kattis judges Python 3
    # with PyPy, and ICPC juries size their time limits for that; see ``judged_language``)
    python3_interpreter: str | None = None

    @classmethod
    def from_dict(cls, d: Any) -> Problem:
        """Parse one JSON/msgpack record; unknown fields are ignored, bad ones raise ProblemFormatError."""
        if not isinstance(d, dict):
            raise ProblemFormatError(f"a problem must be an object, got {type(d).__name__}")
        pid = d.get("id")
        if not isinstance(pid, str) or not pid:
            raise ProblemFormatError("missing or empty 'id'")
        tl = d.get("time_limit_s")
        ml = d.get("memory_limit_mb")
        if isinstance(tl, bool) or isinstance(ml, bool):  # float(True) is 1.0: a typo, not a limit
            raise ProblemFormatError(f"{pid}: time_limit_s and memory_limit_mb must be numbers, got "
                                     f"{tl!r} and {ml!r}")
        if isinstance(ml, float) and not ml.is_integer():
            raise ProblemFormatError(f"{pid}: memory_limit_mb must be a whole number of MB, got {ml}")
        try:
            time_limit = DEFAULT_TIME_LIMIT_S if tl is None else float(tl)
            memory_limit = DEFAULT_MEMORY_LIMIT_MB if ml is None else int(ml)
        except (TypeError, ValueError) as e:
            raise ProblemFormatError(f"{pid}: bad limits: {e}") from None
        if not (0 < time_limit <= MAX_TIME_LIMIT_S):
            raise ProblemFormatError(f"{pid}: time_limit_s must be in (0, {MAX_TIME_LIMIT_S:g}], got {time_limit}")
        if not (MIN_MEMORY_LIMIT_MB <= memory_limit <= MAX_MEMORY_LIMIT_MB):
            raise ProblemFormatError(f"{pid}: memory_limit_mb must be in [{MIN_MEMORY_LIMIT_MB}, "
                                     f"{MAX_MEMORY_LIMIT_MB}], got {memory_limit}")
        checker = d.get("checker") or {"type": "tokens"}
        if not isinstance(checker, dict) or not isinstance(checker.get("type"), str):
            raise ProblemFormatError(f"{pid}: checker must be an object with a 'type'")
        # build it once now, so an unknown type or bad tolerance fails at load time with the
        # problem's id, not later as an infrastructure error on every job (custom checkers
        # must be registered in the loading process too)
        from cpfleet.core.checkers import get_checker

        try:
            get_checker(checker)
        except ProblemFormatError as e:
            raise ProblemFormatError(f"{pid}: {e}") from None
        public = _parse_tests(pid, "public_tests", d.get("public_tests"))
        hidden = _parse_tests(pid, "hidden_tests", d.get("hidden_tests"))
        fn_name = d.get("fn_name")
        from cpfleet.core.fncall import validate, validate_semantics

        if fn_name is not None:
            fn_name = validate(pid, fn_name, checker, public + hidden)
        fn_semantics = validate_semantics(pid, d.get("fn_semantics"), fn_name, checker)
        starter = d.get("starter_code") or ""
        if not isinstance(starter, str):
            raise ProblemFormatError(f"{pid}: starter_code must be a string")
        langs, multipliers = _parse_languages(pid, d.get("languages"), d.get("time_limit_multipliers"))
        interpreter = _parse_python3_interpreter(pid, d.get("python3_interpreter"), fn_name)
        problem = cls(
            id=pid,
            public_tests=public,
            hidden_tests=hidden,
            fn_name=fn_name,
            fn_semantics=fn_semantics,
            starter_code=starter,
            time_limit_s=time_limit,
            memory_limit_mb=memory_limit,
            checker=dict(checker),
            description=str(d.get("description") or ""),
            correct_solutions=_parse_solutions(pid, "correct_solutions", d.get("correct_solutions"))
            or _jury_solutions(d.get("submissions"), "accepted"),
            incorrect_solutions=_parse_solutions(pid, "incorrect_solutions", d.get("incorrect_solutions"))
            or _jury_solutions(d.get("submissions"), "wrong_answer"),
            languages=langs,
            time_limit_multipliers=multipliers,
            python3_interpreter=interpreter,
        )
        refuse_lone_surrogates(problem.to_dict())
        return problem

    def to_dict(self) -> dict[str, Any]:
        """The JSONL / msgpack record (inverse of from_dict)."""
        d: dict[str, Any] = {
            "id": self.id,
            "description": self.description,
            "public_tests": [{"input": t.input, "output": t.output} for t in self.public_tests],
            "hidden_tests": [{"input": t.input, "output": t.output} for t in self.hidden_tests],
            "time_limit_s": self.time_limit_s,
            "memory_limit_mb": self.memory_limit_mb,
            "checker": self.checker,
        }
        if self.correct_solutions:
            d["correct_solutions"] = list(self.correct_solutions)
        if self.incorrect_solutions:
            d["incorrect_solutions"] = list(self.incorrect_solutions)
        if self.fn_name is not None:
            d["fn_name"] = self.fn_name
            if self.fn_semantics != "python":
                d["fn_semantics"] = self.fn_semantics
        if self.starter_code:
            d["starter_code"] = self.starter_code
        if self.languages is not None:
            d["languages"] = list(self.languages)
        if self.time_limit_multipliers:
            d["time_limit_multipliers"] = dict(self.time_limit_multipliers)
        if self.python3_interpreter is not None:
            d["python3_interpreter"] = self.python3_interpreter
        return d

    def judged_language(self, language: str) -> str:
        """The language a ``language`` program of this problem is judged in: ``python3`` is
        ``pypy3`` where the problem says so (``python3_interpreter``), every other stays."""
        if language == "python3" and self.python3_interpreter is not None:
            return self.python3_interpreter
        return language

    def validate_for_judging(self, mode: str = "full") -> None:
        """See the module function :func:`validate_for_judging` (the one judging rule)."""
        validate_for_judging(self, mode)

    def content_version(self) -> str:
        """Hash of everything that changes a verdict: tests, limits, checker (not the statement)."""
        judged = [
            self.id,
            [[t.input, t.output] for t in self.public_tests],
            [[t.input, t.output] for t in self.hidden_tests],
            repr(float(self.time_limit_s)),
            self.memory_limit_mb,
            sorted(self.checker.items()),
        ]
        if self.fn_name is not None:  # appended only when set: stdin problems keep their versions
            from cpfleet.core.fncall import RULES_VERSION

            judged.append(["fn_name", self.fn_name])
            # the rules a call is judged by: a change of either judges the same tests anew
            judged.append(["fn_rules", RULES_VERSION, self.fn_semantics])
        # appended only when set, so the versions of problems without them stay as they were
        if self.languages is not None:
            judged.append(["languages", list(self.languages)])
        if self.time_limit_multipliers:
            judged.append(["time_limit_multipliers", sorted(self.time_limit_multipliers.items())])
        if self.python3_interpreter is not None:
            judged.append(["python3_interpreter", self.python3_interpreter])
        return hashlib.blake2b(msgpack.packb(judged, use_bin_type=True), digest_size=12).hexdigest()


def cap_keeps_only_shown(public: Sequence[tuple[str, str]], hidden: Sequence[tuple[str, str]], cap: int) -> bool:
    """Whether keeping the first ``cap`` hidden tests (``--max-hidden``) would leave only tests
    among the public ones, (input, output) pairs, when the hidden tests held others: formats
    that reward the shown tests too list them first (Kattis's samples, TACO's first tests), and
    their answers are in the feedback and often the statement, so the capped problem would pay
    for printing them (``validate_for_judging``'s reason for hidden tests)."""
    shown = set(public)
    unshown = [t not in shown for t in hidden]
    return any(unshown) and not any(unshown[:cap])


def validate_for_judging(problem: Problem, mode: str = "full") -> None:
    """The one rule every entry point applies before a problem may be judged or registered.

    ``mode="full"`` (the default, and what registration checks: ``cpfleet load``,
    ``cpfleet validate``, ``FleetClient.register_problems``, ``cpfleet judge``) needs at least
    one hidden test: the reward comes from hidden tests only, and the public tests are shown to
    the model with their expected outputs, so rewarding them would pay for copying.
    ``mode="hidden"`` is judged by full mode's rule (the same tests give the reward).
    ``mode="public"`` (``cpfleet judge --mode public``, and a public-mode job at the worker)
    needs at least one public test. Public tests are optional otherwise: interactive problems,
    for one, often have none. So no reward is ever a fraction over zero tests. Raises
    ``NoHiddenTestsError`` / ``NoPublicTestsError`` (both ``ProblemFormatError``).
    """
    check_mode(mode)
    if rewarded_tests(mode) == "hidden" and not problem.hidden_tests:
        raise NoHiddenTestsError(
            f"{problem.id}: no hidden tests: the reward comes from hidden tests only, so this problem "
            "cannot be judged (public tests are feedback the model sees, never the reward in full mode)"
        )
    if rewarded_tests(mode) == "public" and not problem.public_tests:
        raise NoPublicTestsError(
            f"{problem.id}: no public tests: public mode rewards public tests, so it cannot judge this problem"
        )


def judging_refusal(problem: Problem, mode: str = "full") -> str | None:
    """``validate_for_judging`` as a value: the reason the problem is refused, or None."""
    try:
        validate_for_judging(problem, mode)
    except ProblemFormatError as e:
        return str(e)
    return None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def refuse_lone_surrogates(record: Mapping[str, Any]) -> None:
    """ProblemFormatError naming the first string of the record (as the problem keeps it) that
    holds a lone UTF-16 surrogate (JSON's ``"\\ud800"`` escape): no UTF-8 encodes it, so it
    could never be a program's input or output, and hashing, storing or reporting the problem
    would fail on it far from here."""
    todo: list[tuple[str, Any]] = [("", record)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, str):
            m = _LONE_SURROGATE.search(value)
            if m is not None:
                pid = record.get("id")
                who = f"{pid}: " if isinstance(pid, str) and _LONE_SURROGATE.search(pid) is None else ""
                raise ProblemFormatError(f"{who}{where} holds a lone surrogate {m.group()!r} at character "
                                         f"{m.start()}: not UTF-8 text")
        elif isinstance(value, dict):
            todo.extend((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
            todo.extend((f"{where} key", k) for k in value if isinstance(k, str))
        elif isinstance(value, list | tuple):
            todo.extend((f"{where}[{i}]", v) for i, v in enumerate(value))


def _parse_tests(pid: str, name: str, raw: Any) -> tuple[TestCase, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ProblemFormatError(f"{pid}: '{name}' must be a list of {{input, output}}")
    tests = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            raise ProblemFormatError(f"{pid}: {name}[{i}] must be {{'input': str, 'output': str}}")
        tests.append(TestCase(t["input"], t["output"]))
    return tuple(tests)


def _parse_solutions(pid: str, name: str, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        raise ProblemFormatError(f"{pid}: '{name}' must be a list of strings")
    return tuple(raw)


JURY_LANGUAGES = ("python3",)  # the languages this judge runs (C++, C and Java come with the languages work)


def _jury_solutions(raw: Any, expected: str) -> tuple[str, ...]:
    """Reference solutions from a Kattis-style ``submissions`` list (the shared ICPC file's
    shape: ``{"language", "expected", "source", ...}``), used when the record has no
    ``correct_solutions``/``incorrect_solutions``: ``accepted`` ones are correct, ``wrong_answer``
    ones incorrect (time-limit and run-time-error submissions depend on the machine)."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        s["source"] for s in raw
        if isinstance(s, dict) and s.get("language") in JURY_LANGUAGES and s.get("expected") == expected
        and isinstance(s.get("source"), str)
    )
PYTHON3_INTERPRETERS = ("python3", "pypy3")  # CPython, the default, or PyPy


def _parse_python3_interpreter(pid: str, raw: Any, fn_name: str | None) -> str | None:
    """``python3_interpreter``: "pypy3", or "python3"/absent (CPython: stored as None, so the
    versions of problems that name the default stay as they were)."""
    if raw is None or raw == "python3":
        return None
    if raw not in PYTHON3_INTERPRETERS:
        raise ProblemFormatError(f"{pid}: python3_interpreter must be one of {list(PYTHON3_INTERPRETERS)}, got {raw!r}")
    if fn_name is not None:
        raise ProblemFormatError(f"{pid}: a function-call problem is judged with CPython (its harness), "
                                 f"not python3_interpreter {raw!r}")
    return str(raw)


def _parse_languages(pid: str, raw: Any, raw_mult: Any) -> tuple[tuple[str, ...] | None, dict[str, float]]:
    from cpfleet.core.languages import LANGUAGES

    langs: tuple[str, ...] | None = None
    if raw is not None:
        if not isinstance(raw, list) or not raw or not all(isinstance(x, str) and x in LANGUAGES for x in raw):
            raise ProblemFormatError(f"{pid}: 'languages' must be a non-empty list of {list(LANGUAGES)}, got {raw!r}")
        langs = tuple(dict.fromkeys(raw))
    multipliers: dict[str, float] = {}
    if raw_mult is not None:
        if not isinstance(raw_mult, dict):
            raise ProblemFormatError(f"{pid}: 'time_limit_multipliers' must be an object {{language: factor}}")
        for name, factor in raw_mult.items():
            if name not in LANGUAGES or isinstance(factor, bool) or not isinstance(factor, int | float) \
                    or not (0 < float(factor) <= 100):
                raise ProblemFormatError(f"{pid}: time_limit_multipliers[{name!r}] must be a factor in (0, 100] "
                                         f"for one of {list(LANGUAGES)}, got {factor!r}")
            multipliers[name] = float(factor)
    return langs, multipliers
