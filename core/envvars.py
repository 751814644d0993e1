"""Every ``CPFLEET_*`` environment variable the code reads: its accepted values and its parser,
in one place (docs/configuration.md is their table for operators).

A garbage value must stop a command before it does anything, in one line that names the
variable, the value and what is accepted: read deep inside a pool process it would surface as
a traceback on stderr and every job ``INTERNAL`` (the fleet looking broken when a setting is).
So the command line (``cpfleet.cli``) and the worker's settings (``workers/config.py``) call
:func:`check_environment` at start, and each module that reads a variable parses it with
:func:`read` from here, so the rule for a value lives once. Relations between variables (the
soft time limit below the hard one) are the worker settings' business, checked there.

The core holds this table (not the workers) because the sandbox reads most of these variables
and may import only the core.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cpfleet.core.defaults import MAX_SLOTS
from cpfleet.core.errors import ConfigError

PREFIX = "CPFLEET_"
DOCS = "docs/configuration.md"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class EnvVar:
    """One variable: what a value may be (shown in the error) and the parser that enforces it
    (raises ValueError with a short reason; returns the typed value)."""

    name: str
    accepted: str
    parse: Callable[[str], Any]


def _integer(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError("not a whole number") from None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ValueError("out of range")
        return value

    return parse


def _number(minimum: float = 0.0, *, allow_min: bool = True) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError("not a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("not a finite number")
        if value < minimum or (value == minimum and not allow_min):
            raise ValueError("out of range")
        return value

    return parse


def parse_bool(raw: str) -> bool:
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError("not a boolean")


def _choice(*values: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        v = raw.strip().lower()
        if v not in values:
            raise ValueError("not one of the choices")
        return v

    return parse


def _concurrency(raw: str) -> str:
    v = raw.strip().lower()
    if v == "auto":
        return v
    if _integer(1)(v) > MAX_SLOTS:
        raise ValueError(f"above {MAX_SLOTS}, the sandbox slots one host has (one per pool process)")
    return v


def _queues(raw: str) -> tuple[str, ...]:
    names = tuple(q.strip() for q in raw.split(",") if q.strip())
    if not names:
        raise ValueError("names no queue")
    return names


def _ttl(raw: str) -> float:
    value = _number(0.0)(raw)
    if 0 < value < 1:
        raise ValueError("out of range")
    return value


_CPP_STD = re.compile(r"^(gnu|c)\+\+\d[\da-z]$")  # c++17, gnu++2a, c++1z


def _cpp_std(raw: str) -> str:
    if not _CPP_STD.match(raw.strip()):
        raise ValueError("not a C++ standard name")
    return raw.strip()


def parse_multipliers(raw: str) -> dict[str, float]:
    """``java=2,pypy3=1.5`` -> {"java": 2.0, "pypy3": 1.5}; a bad entry raises ValueError."""
    from cpfleet.core.languages import LANGUAGES

    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in LANGUAGES:
            raise ValueError(f"bad entry {part!r}: want LANGUAGE=FACTOR with LANGUAGE one of {', '.join(LANGUAGES)}")
        try:
            factor = float(value)
        except ValueError:
            raise ValueError(f"bad factor in {part!r}: not a number") from None
        if not 0 < factor <= 100:
            raise ValueError(f"factor for {name} must be in (0, 100], got {factor:g}")
        out[name] = factor
    return out


def _metrics_port(raw: str) -> int | None:
    """``0`` -> None (no endpoint); ``any`` -> 0 (bind port 0: the kernel's free port, which the
    worker reads back from its socket and writes to ``CPFLEET_METRICS_PORT_FILE``); else the port."""
    if raw.strip().lower() == "any":
        return 0
    return _integer(0, 65535)(raw) or None


def _redis_url(raw: str) -> str:
    from cpfleet.core.redis_url import parse_redis_url

    return parse_redis_url(raw, source=f"${PREFIX}REDIS_URL").url  # RedisUrlError names the fix


def _text(raw: str) -> str:
    return raw


_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def _bind_address(raw: str) -> str:
    """An IP address (``0.0.0.0``, ``127.0.0.1``, ``::``) or a host name to bind the metrics
    endpoint on; checked here so that a port or a URL given as the address is refused at start,
    not found by the endpoint's bind after the worker started (where it only logs a line)."""
    value = raw.strip().removeprefix("[").removesuffix("]")  # [::1] as in a URL
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if "://" in value:
        raise ValueError("a URL; want an address only")
    if ":" in value:
        raise ValueError("holds a port or is no IPv6 address; the port goes in CPFLEET_METRICS_PORT")
    if re.fullmatch(r"[\d.]+", value):
        raise ValueError("not an IPv4 address")
    if not _HOSTNAME.match(value):
        raise ValueError("neither an IP address nor a host name")
    return value


SECONDS = "a number of seconds"
VARIABLES: tuple[EnvVar, ...] = (
    EnvVar("CPFLEET_REDIS_URL", "redis://HOST:PORT/DB, rediss://..., unix:///PATH.sock or sentinel://...", _redis_url),
    EnvVar("CPFLEET_QUEUES", "comma-separated queue names, at least one", _queues),
    EnvVar("CPFLEET_CONCURRENCY", f"auto or a whole number from 1 to {MAX_SLOTS}", _concurrency),
    EnvVar("CPFLEET_RUNNER", "forkserver or subprocess", _choice("forkserver", "subprocess")),
    EnvVar("CPFLEET_SOFT_TIME_LIMIT", f"{SECONDS} > 0", _number(0.0, allow_min=False)),
    EnvVar("CPFLEET_HARD_TIME_LIMIT", f"{SECONDS} > 0", _number(0.0, allow_min=False)),
    EnvVar("CPFLEET_JOB_TIME_BUDGET", f"{SECONDS} > 0", _number(0.0, allow_min=False)),
    EnvVar("CPFLEET_VISIBILITY_TIMEOUT", "a whole number of seconds >= 1", _integer(1)),
    EnvVar("CPFLEET_UNACKED_RESTORE_INTERVAL", "a whole number of seconds >= 1", _integer(1)),
    EnvVar("CPFLEET_NODE_TTL", "0 (off) or a number of seconds >= 1", _ttl),
    EnvVar("CPFLEET_MAX_RETRIES", "a whole number >= 0", _integer(0)),
    EnvVar("CPFLEET_RESULT_CACHE", "1 or 0 (also true/false, yes/no, on/off)", parse_bool),
    EnvVar("CPFLEET_RESULT_CACHE_TTL", "a whole number of seconds >= 1", _integer(1)),
    EnvVar("CPFLEET_BROKER_LEAN", "1 or 0 (also true/false, yes/no, on/off)", parse_bool),
    EnvVar("CPFLEET_FAIL_FAST", "1 or 0 (also true/false, yes/no, on/off)", parse_bool),
    EnvVar("CPFLEET_PROBLEM_CACHE_MB", "a number of MiB >= 0", _number(0.0)),
    EnvVar("CPFLEET_TASK_EVENTS", "1 or 0 (also true/false, yes/no, on/off)", parse_bool),
    EnvVar("CPFLEET_REDIS_SOCKET_TIMEOUT", f"{SECONDS} > 0", _number(0.0, allow_min=False)),
    EnvVar("CPFLEET_HEALTH_CHECK_INTERVAL", "a whole number of seconds >= 0", _integer(0)),
    EnvVar("CPFLEET_REPLY_RETRY_S", f"{SECONDS} >= 0", _number(0.0)),
    EnvVar("CPFLEET_REQUIRE_ISOLATION", "full, partial or any", _choice("full", "partial", "any")),
    EnvVar("CPFLEET_METRICS_PORT", "a port 1-65535, 0 (off), or any (a free one)", _metrics_port),
    EnvVar("CPFLEET_METRICS_PORT_FILE", "a file path", _text),
    EnvVar("CPFLEET_METRICS_ADDR", "an IP address or host name to bind, e.g. 0.0.0.0, 127.0.0.1 or ::", _bind_address),
    EnvVar("CPFLEET_FLOWER_REFRESH_S", f"{SECONDS} > 0", _number(0.0, allow_min=False)),
    EnvVar("CPFLEET_DATA_DIR", "a folder", _text),
    EnvVar("CPFLEET_TESTLIB_DIR", "a folder holding testlib.h", _text),
    EnvVar("CPFLEET_MAX_MEMORY_MB", "a whole number of MiB >= 16 (the least memory limit a problem may state)",
           _integer(16)),
    EnvVar("CPFLEET_SANDBOX_UID_BASE", "a whole number from 1000 to 4000000000", _integer(1000, 4_000_000_000)),
    EnvVar("CPFLEET_SLOT_DIR", "a folder", _text),
    EnvVar("CPFLEET_SOLUTION_PYTHON", "a Python executable", _text),
    EnvVar("CPFLEET_PYPY", "a PyPy executable", _text),
    EnvVar("CPFLEET_PYPY_FORK", "1 or 0", _choice("1", "0")),
    EnvVar("CPFLEET_JAVA_HOME", "a JDK or Java runtime folder (bin/java; bin/javac, else the PATH's)", _text),
    EnvVar("CPFLEET_JAVA_GC", "serial or g1", _choice("serial", "g1")),
    EnvVar("CPFLEET_CPP_STD", "a -std= name such as gnu++17, c++20 or gnu++2a", _cpp_std),
    EnvVar("CPFLEET_FORK_AHEAD", "auto, 1 or 0", _choice("auto", "1", "0")),
    EnvVar("CPFLEET_STATIC_LINK", "1 or 0", _choice("1", "0")),
    EnvVar("CPFLEET_TIME_MULTIPLIERS", "LANGUAGE=FACTOR,... such as java=2,pypy3=1.5", parse_multipliers),
    EnvVar("CPFLEET_COMPILE_CACHE_DIR", "a folder", _text),
    EnvVar("CPFLEET_COMPILE_CACHE_MB", "a whole number of MiB >= 0", _integer(0)),
    EnvVar("CPFLEET_PCH_DIR", "a folder", _text),
    EnvVar("CPFLEET_PCH", "1 or 0", _choice("1", "0")),
    # read by the container's entrypoint (docker/entrypoint.sh), not by Python
    EnvVar("CPFLEET_CGROUP_SETUP", "1 or 0", _choice("1", "0")),
    EnvVar("CPFLEET_NOFILE", "a whole number of open files >= 1", _integer(1)),
    # read by the test suite and the benchmarks only
    EnvVar("CPFLEET_SHARED_DATA", "a folder of datasets", _text),
)
BY_NAME: dict[str, EnvVar] = {v.name: v for v in VARIABLES}
# read by the project's scripts and tests only (scripts/test, scripts/test-containers, the
# entrypoint's tests): known names, so never taken for a typo, but no setting of cpfleet's
TOOLING = frozenset({
    "CPFLEET_PYTHON", "CPFLEET_TEST_REDIS_PORT", "CPFLEET_TEST_BASE_IMAGE", "CPFLEET_TEST_DEBIAN_MIRROR",
    "CPFLEET_TEST_STATE_DIR", "CPFLEET_CGROUP_ROOT",
})


def _error(var: EnvVar, raw: str, reason: str) -> ConfigError:
    return ConfigError(var.name, raw, f"{var.name}={raw!r} is not valid ({reason}); accepted: {var.accepted} (see {DOCS})")


def read(name: str, default: Any = None, env: Mapping[str, str] | None = None) -> Any:
    """The parsed value of variable ``name`` (``default`` when unset or blank), or ConfigError
    naming the variable, its value and what it accepts."""
    var = BY_NAME[name]
    raw = (os.environ if env is None else env).get(name, "")
    if not raw.strip():
        return default
    try:
        return var.parse(raw.strip())
    except ConfigError:
        raise
    except ValueError as exc:  # RedisUrlError is one: its message already says everything
        if exc.__class__ is not ValueError:
            raise ConfigError(name, raw, str(exc)) from None
        raise _error(var, raw, str(exc)) from None


def check_environment(env: Mapping[str, str] | None = None, *, skip: tuple[str, ...] = ()) -> None:
    """Parse every set variable; raise one ConfigError whose message has a line per bad one."""
    env = os.environ if env is None else env
    errors: list[ConfigError] = []
    for var in VARIABLES:
        if var.name in skip:
            continue
        try:
            read(var.name, env=env)
        except ConfigError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigError(errors[0].variable, errors[0].value, "\n".join(str(e) for e in errors))


def misspelled(env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(name, the known name it is closest to)`` for each set ``CPFLEET_*`` variable that is
    not one of ours but nearly is: a typo would otherwise be ignored in silence."""
    env = os.environ if env is None else env
    out = []
    for name in sorted(env):
        if name.startswith(PREFIX) and name not in BY_NAME and name not in TOOLING:
            close = difflib.get_close_matches(name, BY_NAME, n=1, cutoff=0.85)
            if close:
                out.append((name, close[0]))
    return out
