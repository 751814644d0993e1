"""Every inline test shape RL datasets use, normalised to the project's ``(input, output)`` pairs.

The datasets trainers feed a judge carry tests in half a dozen shapes (see
docs/problems.md, "Test shapes"); this module is the one place that knows them, so the
``prepare`` converters and the inline-problem path (:mod:`cpfleet.producer.inline`) agree byte for byte.

Stdin/stdout tests become ``(input, output)`` strings as given. Function-call tests become the
project's function-call form: ``input`` is the JSON text of the positional argument list and
``output`` the JSON text of the expected value, and the test set carries ``fn_name`` and
``fn_semantics``: the rules of the shape's reference harness (core/fncall.py), under which the
output means what it means there. Shapes:

- code_contests ``{"input": [str], "output": [str]}``: stdin/stdout; a whole row's test columns
  (``public_tests``, ``private_tests``, ``generated_tests``) keep their public/hidden split, read
  by :func:`from_code_contests_row` for ``cpfleet prepare`` and inline tests alike (a row that
  reads named files, or has no private or generated tests, is refused, as prepare skips it).
  Compared by the official tester's rules (checker ``code_contests``), as ``cpfleet prepare``
  sets for the dataset's rows.
- TACO / APPS ``input_output`` and verl/PRIME ``{"inputs", "outputs", "fn_name"?}``: with
  ``fn_name`` each input is the argument list and each output is the raw expected output,
  usually wrapped in a 1-element list, kept as it is: ``fn_semantics`` ``apps`` judges it as
  their ``testing_util`` does (the value, or its ``[0]``, and their int-key conversion); an
  output that is not a 1-element list is counted. LiveCodeBench's evaluation form uses the
  same keys with string inputs and outputs (JSON lines in, JSON text out): read as such, under
  ``lcb``. Without ``fn_name``, stdin/stdout (inputs or outputs given as lists of lines are
  joined with newlines).
- LiveCodeBench / DeepCoder case lists ``[{"input": str, "output": str, "testtype"}]`` with
  ``testtype`` ``stdin``, ``stdin_stdout`` or ``functional``; a functional input is one JSON
  value per line (one line per argument) and its output is JSON text (``lcb``). ``stdin``
  tests (LiveCodeBench's own label) are compared as LiveCodeBench's ``grade_stdio`` compares
  them (checker ``lcb``: lines, then decimal numbers); ``stdin_stdout`` (rLLM's label for
  TACO's tests) keeps the default checker. The function
  name comes from the case (``fn_name``, ``metadata.func_name``) or from the caller (the row's
  metadata).
- PrimeIntellect ``verification_info`` ``{"language", "test_cases": [...]}`` with cases
  ``{"type": "stdin_stdout", ...}`` or ``{"type": "function_call", "fn_name", "input": [args],
  "output": value}`` (the value plain: PrimeIntellect's harness compares ``print(result)`` with
  ``str(output)``: ``primeintellect``).
- LiveCodeBench ``private_test_cases``: plain JSON, or ``base64(zlib(pickle(json_text)))``. The
  pickle is read by :func:`restricted_unpickle`, which refuses every global (no class, no
  function, no ``__reduce__`` target can be loaded), so a hostile dataset cannot run code here;
  its value must be the JSON text, as LiveCodeBench reads it (a list built by the pickle could
  share one large case thousands of times: gigabytes of tests from a kilobyte of field).
- Whole rows of TACO / APPS (``input_output`` beside its dataset's columns), PrimeIntellect
  (``verification_info`` beside its dataset's columns), DeepCoder (``tests`` beside ``problem``) and
  open-r1 codeforces (``official_tests``): read by the functions ``cpfleet prepare``'s format
  modules call (:func:`from_deepcoder_row`, :func:`from_codeforces_row`...), rows prepare skips
  refused with its reason; their limits are :mod:`cpfleet.core.rowlimits`'s.

A problem mixes no stdin/stdout and function-call tests, and names one function: both are
:class:`TestShapeError`, whose message is the skip reason the converters count.

668 lines: every shape's reading (and the restricted unpickler one of them needs) is one
module on purpose, the single place ``cpfleet prepare`` and inline problems both read tests
through, so the two never read a row differently.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import io
import json
import pickle
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cpfleet.core.errors import TestShapeError
from cpfleet.core.rowlimits import (
    is_code_contests_row,
    is_codeforces_row,
    is_deepcoder_row,
    is_primeintellect_row,
    is_taco_row,
)

# A decompressed LiveCodeBench private-test blob larger than this is refused: the biggest real
# ones are tens of MB, and an unbounded inflate of a hostile blob would exhaust memory.
MAX_DECOMPRESSED_BYTES = 1 << 30

STDIO_KINDS = frozenset({"stdin", "stdin_stdout", "stdio", "standard_io"})
CALL_KINDS = frozenset({"functional", "function_call", "call_based"})

Test = tuple[str, str]


@dataclass(frozen=True, slots=True)
class TestSet:
    """Normalised tests: ``public`` are shown in feedback, ``hidden`` decide the reward."""

    __test__ = False

    public: tuple[Test, ...]
    hidden: tuple[Test, ...]
    fn_name: str | None = None
    language: str | None = None  # the language the dataset states (PrimeIntellect), verbatim
    fn_semantics: str | None = None  # core/fncall.py SEMANTICS; None: the default
    # stdin/stdout tests: the checker type of the shape's reference comparison (``lcb``:
    # LiveCodeBench's grade_stdio; ``code_contests``: its tester; ``real_tokens``: TACO/APPS's,
    # narrowed to what pays no wrong answer); None: the default checker
    stdio_checker: str | None = None


# The stdin/stdout comparison of a shape's reference, by the rules name the shape reads as:
# LiveCodeBench's grade_stdio; CodeContests' official tester (what `cpfleet prepare` gives its
# rows); TACO/APPS's run_test (and the trainers that grade their rows, and PrimeIntellect's
# stdin_stdout cases, with it): its float closeness without the fallbacks that pay wrong answers
STDIO_CHECKERS = {"lcb": "lcb", "code_contests": "code_contests", "apps": "real_tokens"}


def tests_by_rules(public: Sequence[Test], hidden: Sequence[Test], fn_name: str | None, rules: str | None,
                   language: str | None = None) -> TestSet:
    """A :class:`TestSet` judged by the rules of the shape's reference harness: ``rules`` is its
    ``fn_semantics`` for function-call tests, its stdin/stdout comparison (``STDIO_CHECKERS``)
    otherwise."""
    if fn_name:
        return TestSet(tuple(public), tuple(hidden), fn_name, language, rules)
    return TestSet(tuple(public), tuple(hidden), None, language, None, STDIO_CHECKERS.get(rules or ""))


# --- primitives --------------------------------------------------------------------------------


def json_text(value: Any) -> str:
    """The canonical JSON text of a function-call argument list or return value."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as e:
        raise TestShapeError(f"function-call value is not JSON ({e.__class__.__name__})") from None


def stdio_text(value: Any) -> str:
    """A stdin/stdout test side: a string as is; a list of lines joined (TACO/APPS store some
    that way), with a final newline; a bare number as its text.

    A null, a boolean or an object is no test text: TestShapeError. Written as JSON (``null``,
    ``true``) it became an answer that no reference pays (their comparisons fail on a side that
    is not text) and a program could learn to print; a missing side is the dataset's gap."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(stdio_text(x) for x in value) + "\n"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    what = "null" if value is None else type(value).__name__
    raise TestShapeError(f"stdin/stdout test side is {what}, not text")


def lcb_args(text: str) -> list[Any]:
    """A LiveCodeBench functional input: one JSON value per line, one line per argument."""
    if not isinstance(text, str):
        raise TestShapeError("functional input is not a string of JSON lines")
    args = []
    for line in text.split("\n"):
        if not line.strip():
            continue  # a trailing newline is not an argument (an empty string is `""`)
        try:
            args.append(json.loads(line))
        except (ValueError, RecursionError):
            raise TestShapeError("functional input line is not JSON") from None
    return args


def lcb_value(text: Any) -> Any:
    """A LiveCodeBench functional output: JSON text of the expected value."""
    if not isinstance(text, str):
        raise TestShapeError("functional output is not JSON text")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise TestShapeError("functional output is not JSON") from None


def parse_json_field(raw: Any, what: str) -> Any:
    """A column that holds JSON text (or, in some mirrors, the already-parsed value)."""
    if isinstance(raw, str | bytes):
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise TestShapeError(f"malformed {what} JSON") from None
    return raw


# --- the restricted unpickler ------------------------------------------------------------------


class _NoGlobalsUnpickler(pickle.Unpickler):
    """Loads only what pickle opcodes build by themselves (str, bytes, int, float, bool, None,
    list, tuple, dict, set): every opcode that would import a name goes through find_class,
    which refuses, so no constructor or ``__reduce__`` callable (``os.system``...) is reached."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused a persistent id")


def restricted_unpickle(data: bytes) -> Any:
    """``pickle.loads`` that can build plain data only; pickle.UnpicklingError otherwise."""
    return _NoGlobalsUnpickler(io.BytesIO(data)).load()


def _inflate(data: bytes, limit: int) -> bytes:
    d = zlib.decompressobj()
    out = d.decompress(data, limit)
    if d.unconsumed_tail:
        raise TestShapeError(f"private tests decompress past {limit} bytes")
    return out


def decode_lcb_private(raw: Any, *, max_bytes: int = MAX_DECOMPRESSED_BYTES) -> list[Any]:
    """LiveCodeBench ``private_test_cases``: JSON text, or base64(zlib(pickle(JSON text)))."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return []
    if isinstance(raw, list):
        return raw
    if not isinstance(raw, str):
        raise TestShapeError("private_test_cases is neither JSON text nor a base64 blob")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        value = None
    else:
        if isinstance(value, list):
            return value
        raise TestShapeError("private_test_cases JSON is not a list")
    try:
        packed = base64.b64decode(raw.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise TestShapeError("private_test_cases is neither JSON nor base64") from None
    try:
        pickled = _inflate(packed, max_bytes)
    except zlib.error:
        raise TestShapeError("private_test_cases is not zlib data") from None
    try:
        value = restricted_unpickle(pickled)
    except pickle.UnpicklingError as e:
        raise TestShapeError(f"private_test_cases pickle refused ({e})") from None
    except Exception as e:  # a truncated or garbled pickle raises many kinds
        raise TestShapeError(f"private_test_cases pickle unreadable ({e.__class__.__name__})") from None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            raise TestShapeError("unpickled private_test_cases is not UTF-8 text") from None
    if not isinstance(value, str):
        # LiveCodeBench reads the pickle's value as JSON text (json.loads), and text is all it
        # may be here: a pickle builds other values with shared references, so 1.5 kB of field
        # made a list of 20k references to one 1 MB case, 20 GB of tests once written or hashed
        raise TestShapeError(f"unpickled private_test_cases is a {type(value).__name__}, not JSON text")
    try:
        value = json.loads(value)
    except (ValueError, RecursionError):
        raise TestShapeError("unpickled private_test_cases is not JSON") from None
    if not isinstance(value, list):
        raise TestShapeError(f"unpickled private_test_cases is a {type(value).__name__}, not a list")
    return value


# --- shapes ------------------------------------------------------------------------------------


def split_public(tests: Sequence[Test], num_public: int) -> tuple[tuple[Test, ...], tuple[Test, ...]]:
    """For shapes without a public/private split: the first ``num_public`` tests are shown,
    and every test (those included) decides the reward."""
    return tuple(tests[:num_public]), tuple(tests)


def from_code_contests(raw: Any) -> list[Test]:
    """``{"input": [str], "output": [str]}`` (None or empty: no tests).

    Both sides must be lists, one item per test: a string there (``{"input": "5\\n", "output":
    "6\\n"}``, one test written without its list) would otherwise be read a character at a time,
    each character a test of its own, so the judged tests would not be the dataset's (a correct
    program failed on ``"\\n"``, a wrong one paid on single characters)."""
    if not raw:
        return []
    if not isinstance(raw, Mapping):
        raise TestShapeError("code_contests tests are not {input: [...], output: [...]}")
    inputs, outputs = raw.get("input"), raw.get("output")
    inputs = [] if inputs is None else inputs
    outputs = [] if outputs is None else outputs
    if not isinstance(inputs, list | tuple) or not isinstance(outputs, list | tuple):
        raise TestShapeError("code_contests tests are not {input: [...], output: [...]} "
                             "(one list item per test; a single test is [{\"input\", \"output\"}])")
    if len(inputs) != len(outputs):
        raise TestShapeError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    return [(stdio_text(i), stdio_text(o)) for i, o in zip(inputs, outputs, strict=True)]


# Why ``cpfleet prepare`` skips a code_contests row, and inline tests refuse one, whose program
# reads or writes named files: the tests are those files' contents, not stdin/stdout
CODE_CONTESTS_NAMED_FILES = "reads or writes named files (input_file/output_file), not stdin/stdout"
# A row without private or generated tests has only its public ones, the statement's examples,
# which a program can print without solving anything: prepare skips it ("no hidden tests")
CODE_CONTESTS_NO_HIDDEN = ("no hidden tests: the code_contests row has no private_tests or generated_tests "
                           "(its public tests are the statement's examples)")


def code_contests_named_files(row: Mapping[str, Any]) -> bool:
    """Whether a code_contests row's program reads or writes named files (``input_file`` /
    ``output_file``): no stdin/stdout problem."""
    return bool(row.get("input_file") or row.get("output_file"))


def from_code_contests_row(row: Mapping[str, Any]) -> TestSet:
    """A deepmind/code_contests row's tests, as ``cpfleet prepare`` and inline tests both read
    them: public = ``public_tests``, hidden = ``private_tests`` ++ ``generated_tests``, compared
    by the official tester's rules."""
    public = from_code_contests(row.get("public_tests"))
    hidden = from_code_contests(row.get("private_tests")) + from_code_contests(row.get("generated_tests"))
    return tests_by_rules(public, hidden, None, "code_contests")


def from_input_output(io_: Any, counts: Counter[str] | None = None) -> tuple[list[Test], str | None, str | None]:
    """TACO / APPS ``input_output`` and verl/PRIME ``{"inputs", "outputs", "fn_name"?}``: the tests,
    ``fn_name`` and the reference's rules (``fn_semantics`` of function-call tests, ``apps`` for
    stdin/stdout ones: see :func:`tests_by_rules`)."""
    io_ = parse_json_field(io_, "input_output")
    if not isinstance(io_, Mapping):
        raise TestShapeError("no input_output tests")
    inputs, outputs = io_.get("inputs"), io_.get("outputs")
    if inputs is None and outputs is None:
        raise TestShapeError("no input_output tests")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise TestShapeError("malformed input_output (inputs/outputs lengths differ)")
    fn_name = io_.get("fn_name")
    if not fn_name:
        return [(stdio_text(i), stdio_text(o)) for i, o in zip(inputs, outputs, strict=True)], None, "apps"
    if not isinstance(fn_name, str):
        raise TestShapeError("fn_name is not a string")
    tests = []
    kinds = set()
    for args, out in zip(inputs, outputs, strict=True):
        if isinstance(args, str) and isinstance(out, str):
            # LiveCodeBench's evaluation form: JSON lines in, JSON text out
            tests.append((json_text(lcb_args(args)), json_text(lcb_value(out))))
            kinds.add("lcb")
            continue
        if not isinstance(args, list):
            raise TestShapeError("call-based input is not an argument list")
        if counts is not None and not (isinstance(out, list) and len(out) == 1):
            counts["call-based output not wrapped in a 1-element list (judged as APPS/TACO judge it)"] += 1
        tests.append((json_text(args), json_text(out)))  # raw: the apps rules unwrap it
        kinds.add("apps")
    if len(kinds) > 1:
        raise TestShapeError("mixes LiveCodeBench-serialised tests and argument lists")
    return tests, fn_name, kinds.pop() if kinds else "apps"


def _lcb_labelled(case: Mapping[str, Any]) -> bool:
    """Whether the case bears LiveCodeBench's ``testtype`` label. A null there is no label: a
    column of case objects read from Arrow or parquet holds every row's keys, so a
    PrimeIntellect case (``type``) mixed with LiveCodeBench ones comes with ``testtype: None``."""
    return case.get("testtype") is not None


def _case_label(case: Mapping[str, Any]) -> Any:
    """The case's kind label: LiveCodeBench's ``testtype``, else PrimeIntellect's ``type``."""
    return case.get("testtype") if _lcb_labelled(case) else case.get("type")


def _case_kind(case: Mapping[str, Any], default_call: bool) -> str:
    kind = _case_label(case)
    if kind is None:
        return "call" if default_call else "stdio"
    if not isinstance(kind, str):  # a label of another type (a dict is not even hashable)
        raise TestShapeError(f"test type of type {type(kind).__name__}, not a name")
    if kind in STDIO_KINDS:
        return "stdio"
    if kind in CALL_KINDS:
        return "call"
    raise TestShapeError(f"unknown test type {str(kind)[:40]!r}")


def _case_fn_name(case: Mapping[str, Any]) -> str | None:
    name = case.get("fn_name") or case.get("func_name")
    meta = case.get("metadata")
    if not name and isinstance(meta, Mapping):
        name = meta.get("func_name") or meta.get("fn_name")
    if name is not None and not isinstance(name, str):
        raise TestShapeError("fn_name is not a string")
    return name or None


def from_cases(cases: Any, *, fn_name: str | None = None) -> tuple[list[Test], str | None, str | None]:
    """A list of per-test objects (LiveCodeBench, DeepCoder, PrimeIntellect ``test_cases``): the
    tests, ``fn_name`` and the reference's rules (``testtype``: LiveCodeBench's; ``type``:
    PrimeIntellect's): ``fn_semantics`` for function-call tests; for stdin/stdout tests ``lcb``
    when every case is LiveCodeBench's ``testtype: stdin``, ``apps`` when every case is labelled
    ``stdin_stdout`` (rLLM's label for TACO/APPS rows, PrimeIntellect's ``type``: both graded
    with TACO's run_test), else None (see :func:`tests_by_rules`)."""
    cases = parse_json_field(cases, "test cases")
    if cases is None:
        return [], None, None
    if not isinstance(cases, list):
        raise TestShapeError("test cases are not a list")
    tests: list[Test] = []
    kinds: set[str] = set()
    names: set[str] = set()
    rules: set[str] = set()
    for case in cases:
        if not isinstance(case, Mapping) or "input" not in case or "output" not in case:
            raise TestShapeError("a test case is not {input, output}")
        kind = _case_kind(case, default_call=False)
        kinds.add(kind)
        if kind == "stdio":
            tests.append((stdio_text(case["input"]), stdio_text(case["output"])))
            # LiveCodeBench's label; rLLM's for TACO/APPS rows and PrimeIntellect's (both
            # graded with TACO's run_test); no label or another: the default comparison
            label = _case_label(case)
            rules.add("lcb" if _lcb_labelled(case) and label == "stdin" else "apps" if label == "stdin_stdout" else "")
            continue
        name = _case_fn_name(case) or fn_name
        if not name:
            raise TestShapeError("function-call test without a function name")
        names.add(name)
        rules.add("lcb" if _lcb_labelled(case) else "primeintellect")
        raw_in, raw_out = case["input"], case["output"]
        if isinstance(raw_in, str) and not _lcb_labelled(case) and case.get("type") in CALL_KINDS:
            # PrimeIntellect's key with the argument list as JSON text: its harness pastes the
            # input into `args = <input>`, so the text is the whole list; the output stays plain
            try:
                args = json.loads(raw_in)
            except (ValueError, RecursionError):
                raise TestShapeError("function_call input is not a JSON argument list") from None
            if not isinstance(args, list):
                raise TestShapeError("function_call input is not a JSON argument list")
            value = raw_out
        elif isinstance(raw_in, str):  # LiveCodeBench serialisation: JSON lines in, JSON text out
            args, value = lcb_args(raw_in), lcb_value(raw_out)
        elif isinstance(raw_in, list):  # PrimeIntellect: the argument list and the plain value
            args, value = raw_in, raw_out
        else:
            raise TestShapeError("function-call input is neither JSON lines nor an argument list")
        tests.append((json_text(args), json_text(value)))
    if len(kinds) > 1:
        raise TestShapeError("mixes stdin/stdout and function-call tests")
    if len(names) > 1:
        raise TestShapeError("function-call tests name several functions")
    if kinds == {"stdio"}:  # a reference's comparison only when every case bears its label
        only = rules.pop() if len(rules) == 1 else ""
        return tests, None, only or None
    if len(rules) > 1:
        raise TestShapeError("mixes LiveCodeBench (testtype) and PrimeIntellect (type) function-call tests")
    return tests, (names.pop() if names else None), (rules.pop() if rules else None)


def check_primeintellect_task(row: Mapping[str, Any]) -> None:
    """TestShapeError when a PrimeIntellect row's ``task_type`` is not ``verifiable_code`` (the
    dataset's other tasks carry no tests to judge code by)."""
    task = row.get("task_type")
    if task is not None and task != "verifiable_code":
        raise TestShapeError(f"task_type {str(task)[:40]!r} is not verifiable_code")


def from_verification_info(info: Any) -> TestSet:
    """PrimeIntellect ``verification_info``: every test (none public yet), fn_name, fn_semantics
    and the stated ``language``."""
    info = parse_json_field(info, "verification_info")
    if not isinstance(info, Mapping) or not isinstance(info.get("test_cases"), list):
        raise TestShapeError("verification_info has no test_cases list")
    tests, fn_name, semantics = from_cases(info["test_cases"])
    language = info.get("language")
    return tests_by_rules((), tests, fn_name, semantics, language if isinstance(language, str) else None)


def from_deepcoder_row(row: Mapping[str, Any], *, fn_name: str | None = None, num_public: int = 1,
                       counts: Counter[str] | None = None) -> TestSet:
    """An ``agentica-org/DeepCoder-Preview-Dataset`` row, as ``cpfleet prepare`` and inline tests
    both read it: ``tests`` is a TACO dict or a list of cases typed ``stdin`` / ``stdin_stdout`` /
    ``functional`` (or PrimeIntellect's ``type``); the function name comes from the case, else
    the row's ``metadata`` (``func_name``), else ``fn_name``. The first ``num_public`` tests are
    shown, all of them decide the reward. PrimeIntellect's function-call cases are judged as
    rLLM, DeepCoder's grader, judges them: through TACO's run_test (``apps``)."""
    meta = parse_json_field(row.get("metadata"), "metadata")
    meta_fn = meta.get("func_name") if isinstance(meta, Mapping) else None
    if meta_fn is not None and not isinstance(meta_fn, str):
        raise TestShapeError("metadata func_name is not a string")
    fn_name = meta_fn or fn_name
    raw = parse_json_field(row.get("tests"), "tests")
    if isinstance(raw, Mapping) and ("inputs" in raw or "outputs" in raw):
        io_ = dict(raw)
        if fn_name and not io_.get("fn_name"):
            io_["fn_name"] = fn_name
        tests, fn, rule = from_input_output(io_, counts)
    elif isinstance(raw, Mapping) and "test_cases" in raw:
        tests, fn, rule = from_cases(raw["test_cases"])
    else:
        tests, fn, rule = from_cases(raw, fn_name=fn_name)
    if rule == "primeintellect":
        # rLLM runs its PrimeIntellect rows' plain outputs through TACO's run_test
        # (rllm/rewards/code_reward.py primeintellect_check_correctness); stdin/stdout rows
        # labelled stdin_stdout (its TACO and PrimeIntellect rows) come as ``apps`` already
        rule = "apps"
    public, hidden = split_public(tests, num_public)
    return tests_by_rules(public, hidden, fn, rule)


CODEFORCES_INTERACTIVE = "interactive (interaction_format set): the dataset carries no interactor program"
CODEFORCES_FILE_IO = "input_mode is not stdio: reads or writes named files"


def check_codeforces_row(row: Mapping[str, Any]) -> None:
    """TestShapeError when an open-r1/codeforces row is none ``cpfleet prepare`` or inline tests
    judge: interactive (the dataset carries the protocol as prose, no interactor program), or
    reading named files, or without an ``id``."""
    if isinstance(row.get("interaction_format"), str) and row["interaction_format"].strip():
        raise TestShapeError(CODEFORCES_INTERACTIVE)
    if row.get("input_mode") not in (None, "", "stdio"):
        raise TestShapeError(CODEFORCES_FILE_IO)
    if not str(row.get("id") or ""):
        raise TestShapeError("no id")


def _codeforces_pairs(raw: Any) -> list[Test]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TestShapeError("official_tests / examples is not a list")
    out = []
    for t in raw:
        if not isinstance(t, Mapping) or t.get("input") is None or t.get("output") is None:
            raise TestShapeError("a test is not {input, output}")
        out.append((stdio_text(t["input"]), stdio_text(t["output"])))
    return out


def from_codeforces_row(row: Mapping[str, Any], *, num_public: int = 1, generated: Sequence[Test] = ()) -> TestSet:
    """An open-r1/codeforces row, as ``cpfleet prepare`` and inline tests both read it (after
    :func:`check_codeforces_row`): hidden = ``official_tests`` then ``generated`` (the tests the
    dataset ships apart, which only prepare's ``--generated-tests`` reads), public = ``examples``,
    else the first ``num_public`` hidden tests; ``language`` (the verifiable-prompts subset's) as
    stated. Its checker: :func:`codeforces_checker`."""
    hidden = _codeforces_pairs(row.get("official_tests")) + list(generated)
    public = _codeforces_pairs(row.get("examples")) or hidden[:num_public]
    language = row.get("language")
    return TestSet(tuple(public), tuple(hidden), language=language if isinstance(language, str) else None)


def codeforces_checker(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """An open-r1/codeforces row's ``generated_checker`` (Python source) as the problem's
    checker: the problem accepts several answers and its checker decides; None without one."""
    src = row.get("generated_checker")
    return {"type": "python", "source": src} if isinstance(src, str) and src.strip() else None


def _merge_fn(a: str | None, b: str | None) -> str | None:
    if a and b and a != b:
        raise TestShapeError("public and private tests name different functions")
    return a or b


def from_lcb(public: Any, private: Any, metadata: Any = None) -> TestSet:
    """A LiveCodeBench row's ``public_test_cases``, ``private_test_cases`` and ``metadata``.

    Public tests are shown; public and private tests together decide the reward (LCB grades
    on both)."""
    meta = parse_json_field(metadata, "metadata")
    fn_name = meta.get("func_name") if isinstance(meta, Mapping) else None
    if fn_name is not None and not isinstance(fn_name, str):
        raise TestShapeError("metadata func_name is not a string")
    pub, fn_pub, _ = from_cases(public, fn_name=fn_name)
    priv, fn_priv, _ = from_cases(decode_lcb_private(private), fn_name=fn_name)
    fn = _merge_fn(fn_pub, fn_priv)
    if pub and priv and (fn_pub is None) != (fn_priv is None):
        raise TestShapeError("mixes stdin/stdout and function-call tests")
    return tests_by_rules(pub, pub + priv, fn, "lcb")


# A dataset row's column passed whole as the tests: alone in a mapping, its value is the test set
ROW_COLUMNS = ("input_output", "verification_info")


def normalize_tests(raw: Any, *, fn_name: str | None = None, num_public: int = 1) -> TestSet:
    """Any inline shape above (JSON text or parsed) -> a :class:`TestSet`.

    Shapes with a public/private split keep it; the others show the first ``num_public``
    tests and reward on all. The project's own ``{"public_tests", "hidden_tests"}`` is taken
    as is (with ``fn_name`` from the object or the argument)."""
    raw = parse_json_field(raw, "tests")
    if raw is None:
        raise TestShapeError("no tests")
    if isinstance(raw, list):
        tests, fn, rule = from_cases(raw, fn_name=fn_name)
        pub, hid = split_public(tests, num_public)
        return tests_by_rules(pub, hid, fn, rule)
    if not isinstance(raw, Mapping):
        raise TestShapeError(f"tests of type {type(raw).__name__}")
    for wrapper in ROW_COLUMNS:  # a dataset row's column, passed whole
        if wrapper in raw and len(raw) == 1:
            return normalize_tests(raw[wrapper], fn_name=fn_name, num_public=num_public)
    if is_code_contests_row(raw):  # its limits: producer/inline.py's stated_limits
        if code_contests_named_files(raw):
            raise TestShapeError(CODE_CONTESTS_NAMED_FILES)
        cc = from_code_contests_row(raw)
        if not cc.hidden:
            raise TestShapeError(CODE_CONTESTS_NO_HIDDEN)
        return cc
    if "public_tests" in raw or "hidden_tests" in raw:
        pub_l, hid_l = _own_tests(raw.get("public_tests")), _own_tests(raw.get("hidden_tests"))
        own_fn = raw.get("fn_name") or fn_name
        if own_fn is not None and not isinstance(own_fn, str):
            raise TestShapeError("fn_name is not a string")
        own_rule = raw.get("fn_semantics")
        if own_rule is not None and not isinstance(own_rule, str):
            raise TestShapeError("fn_semantics is not a string")
        if own_rule is not None and not own_fn:
            raise TestShapeError("fn_semantics applies to function-call tests (fn_name) only")
        return TestSet(tuple(pub_l), tuple(hid_l), own_fn or None, fn_semantics=own_rule)
    if "public_test_cases" in raw or "private_test_cases" in raw:
        meta = raw.get("metadata")
        if meta is None and fn_name:
            meta = {"func_name": fn_name}
        return from_lcb(raw.get("public_test_cases"), raw.get("private_test_cases"), meta)
    if "test_cases" in raw:
        info = from_verification_info(raw)
        pub, hid = split_public(info.hidden, num_public)
        return dataclasses.replace(info, public=pub, hidden=hid)
    if is_codeforces_row(raw):  # an open-r1/codeforces row passed whole, as cpfleet prepare reads it
        check_codeforces_row(raw)
        return from_codeforces_row(raw, num_public=num_public)
    if is_deepcoder_row(raw):  # a DeepCoder row passed whole, as cpfleet prepare reads it
        return from_deepcoder_row(raw, fn_name=fn_name, num_public=num_public)
    if is_primeintellect_row(raw):  # a PrimeIntellect row passed whole, as cpfleet prepare reads it
        check_primeintellect_task(raw)
        return normalize_tests({"verification_info": raw["verification_info"]}, fn_name=fn_name, num_public=num_public)
    if is_taco_row(raw):  # a TACO / APPS row passed whole: its input_output, as cpfleet prepare reads it
        raw = parse_json_field(raw["input_output"], "input_output")
        if not isinstance(raw, Mapping) or not ("inputs" in raw or "outputs" in raw):
            raise TestShapeError("no input_output tests")
    if "inputs" in raw or "outputs" in raw:
        io_ = dict(raw)
        if fn_name and not io_.get("fn_name"):
            io_["fn_name"] = fn_name
        tests, fn, rule = from_input_output(io_)
        pub, hid = split_public(tests, num_public)
        return tests_by_rules(pub, hid, fn, rule)
    if "input" in raw and "output" in raw:
        tests = from_code_contests(raw)
        pub, hid = split_public(tests, num_public)
        return tests_by_rules(pub, hid, None, "code_contests")
    raise TestShapeError(f"unrecognised test shape with keys {sorted(map(str, raw))[:8]}")


def _own_tests(raw: Any) -> list[Test]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TestShapeError("public_tests/hidden_tests is not a list")
    out = []
    for t in raw:
        if not isinstance(t, Mapping) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            raise TestShapeError("a test is not {input: str, output: str}")
        out.append((t["input"], t["output"]))
    return out


def as_records(tests: Sequence[Test]) -> list[dict[str, str]]:
    """``(input, output)`` pairs -> the problem record's ``[{"input", "output"}]``."""
    return [{"input": i, "output": o} for i, o in tests]
