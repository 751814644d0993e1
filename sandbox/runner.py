"""The runner interface, CodeRunner: load one program, run it on many inputs; and
``make_runner``, which maps a runner name to an implementation.

A real sandbox (gVisor, nsjail, a remote executor) plugs in as another CodeRunner. Two
implementations ship: the fork server (default: a warm interpreter forks one child per test)
and the subprocess runner (a fresh ``python3 solution.py`` per test: reference semantics and
benchmark baseline). Both run children under the same isolation (sandbox/isolation.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType

from cpfleet.core.errors import OptionError
from cpfleet.core.verdict import Verdict

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-test limits. TLE is judged on CPU time; ``wall_s`` is only a backstop."""

    time_s: float = 2.0
    memory_mb: int = 512
    wall_s: float | None = None  # default: wall_factor * time_s + wall_slack_s
    wall_factor: float = 3.0
    wall_slack_s: float = 1.0
    stdout_bytes: int = 64 * MiB  # past this the program is killed: OUTPUT_LIMIT
    stderr_bytes: int = 8 * MiB  # past this the program is killed: OUTPUT_LIMIT
    stderr_keep_bytes: int = 64 * 1024  # how much stderr is kept for feedback
    file_size_mb: int = 64
    nproc: int = 128  # processes + threads of the slot's uid
    nofile: int = 256

    # the default backstop is moved by the time the test waited for a CPU (machine load), up
    # to this many times itself; see sandbox/police.py
    wall_max_factor: float = 3.0
    # a hard cap from outside (what is left of the job's time budget): no test runs past it
    wall_cap_s: float | None = None
    # a memory limit a problem or a caller stated (a test's, a checker's, a run job's): held to
    # what this worker may give a test (sandbox/capacity.py); the fleet's own (a compile's, a
    # self-test's) are not
    stated: bool = False

    @property
    def wall_backstop_s(self) -> float:
        if self.wall_s is not None:
            return self.wall_s
        return self.wall_factor * self.time_s + self.wall_slack_s

    @property
    def wall_max_s(self) -> float:
        """The latest a test is killed: an explicit ``wall_s`` is exact; the default backstop
        may move by the time the test spent waiting for a CPU, up to ``wall_max_factor`` x."""
        latest = self.wall_s if self.wall_s is not None else self.wall_max_factor * self.wall_backstop_s
        return latest if self.wall_cap_s is None else min(latest, self.wall_cap_s)


@dataclass(slots=True)
class RunResult:
    """What one execution did. ``status`` is OK when the program exited 0 within limits."""

    status: Verdict
    exit_code: int | None = None
    signal: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    cpu_s: float = 0.0
    wall_s: float = 0.0
    max_rss_kb: int = 0
    error: str = ""  # detail for INTERNAL / OUTPUT_LIMIT / MEMORY_LIMIT / TIME_LIMIT: what fired
    # False when the verdict depended on machine load (the wall-clock backstop fired, or memory
    # was judged by the near-the-limit heuristic): a quieter machine could decide otherwise,
    # so such a result must not be cached
    deterministic: bool = True
    files: dict[str, bytes] = field(default_factory=dict)  # files collected from its directory (programs)
    # bytes the program wrote to each stream, kept or not (0: the runner does not count them)
    stdout_total: int = 0
    stderr_total: int = 0


@dataclass(frozen=True, slots=True)
class ProgramImage:
    """A compiled program as a runner starts it: its files (placed read-only in a directory of
    their own), the argv each test execs (``{prog}`` stands for that directory) and the memory
    model of its runtime (sandbox/languages/base.py: "address_space" bounds each process's address
    space at the memory limit as well as the cgroup; "cgroup" leaves the address space free,
    for runtimes such as the JVM that reserve far more than they use, with ``extra_cgroup_mb``
    on top of the limit for the runtime's own footprint)."""

    files: Mapping[str, tuple[bytes, int]]  # relative path -> (content, mode)
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    memory_model: str = "address_space"
    extra_cgroup_mb: int = 0


@dataclass(slots=True)
class IsolationReport:
    """Which isolation layers the runner actually got (self-tested at start)."""

    layers: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def level(self) -> str:
        got = [k for k, v in self.layers.items() if v]
        missing = [k for k, v in self.layers.items() if not v]
        return "full" if not missing else ("partial" if got else "none")

    def summary(self) -> str:
        missing = [k for k, v in self.layers.items() if not v]
        s = f"isolation={self.level}"
        if missing:
            s += " missing=" + ",".join(missing)
        return s


class CodeRunner(ABC):
    """Runs one untrusted program at a time (in any language of sandbox/languages/) against many inputs."""

    name: str = "abstract"

    @abstractmethod
    def load(self, source: str, fn_name: str | None = None) -> str | None:
        """Compile ``source`` for the following runs. Returns None, or the syntax error text.
        ``fn_name``: a function-call problem (each run's stdin is the JSON argument list, its
        stdout the JSON return value; sandbox/callharness.py); runners that cannot call
        functions raise NotImplementedError for it."""

    def load_program(self, image: ProgramImage) -> None:
        """Load a compiled program (its files and argv) for the following runs. Raises when it
        cannot be placed: an infrastructure failure, never the program's."""
        raise NotImplementedError(f"runner {self.name} cannot run compiled programs")

    def forks_pypy(self) -> bool:
        """Whether ``load_pypy`` runs PyPy programs in a fork server here (else they are
        compiled and run as programs, ``load_program``: a fresh PyPy per test)."""
        return False

    def load_pypy(self, source: str) -> str | None:
        """Compile ``source`` with PyPy for the following runs, where ``forks_pypy``: None, or
        the syntax error text."""
        raise NotImplementedError(f"runner {self.name} has no PyPy fork server")

    def expect_runs(self, n: int) -> None:  # noqa: B027 - optional hook
        """A hint after ``load``: the caller means to make at most ``n`` runs of the loaded
        program. A runner that prepares each next run ahead (the fork server forks its test
        child while the caller judges the last run) then prepares none after the last."""

    @abstractmethod
    def run(self, stdin: bytes, limits: Limits) -> RunResult:
        """Run the loaded program once with ``stdin``; never raises for program misbehaviour.
        A sandbox that cannot run the test answers status INTERNAL or raises SandboxFailure."""

    @property
    @abstractmethod
    def isolation(self) -> IsolationReport:
        """The isolation layers this runner got."""

    def prepare_next(self) -> None:  # noqa: B027 - optional hook
        """The caller has no test to run until its next ``load``: set up now, off the request
        path, what the next job needs (the fork server starts a spare job). Optional hook."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the runner's processes and resources."""

    def __enter__(self) -> CodeRunner:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


RUNNER_KINDS = ("forkserver", "subprocess")


def make_runner(kind: str = "forkserver", *, isolate: bool = True) -> CodeRunner:
    """A ready runner (its zygote started and self-tested). One per process; close() it.
    A CPFLEET_* setting with a bad value raises ConfigError naming it, before anything starts."""
    from cpfleet.core import envvars
    from cpfleet.sandbox.forkserver import ForkServerRunner
    from cpfleet.sandbox.subprocess_runner import SubprocessRunner

    envvars.check_environment(skip=("CPFLEET_REDIS_URL",))  # a runner needs no Redis

    if kind == "forkserver":
        return ForkServerRunner(isolate=isolate)
    if kind == "subprocess":
        return SubprocessRunner(isolate=isolate)
    raise OptionError(f"unknown runner kind {kind!r}; choose one of {RUNNER_KINDS}")
