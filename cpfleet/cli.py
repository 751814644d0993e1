"""The ``cpfleet`` command. Each subcommand lives in its own module with ``configure(parser)``
and ``run(args) -> int``; modules are imported only when their subcommand runs, so
``cpfleet judge`` never imports celery and ``cpfleet submit`` never imports the sandbox."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from cpfleet.core import defaults

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "judge": ("cpfleet.jobs.judge", "evaluate jobs locally, without any queue"),
    "prepare": ("cpfleet.datasets.prepare", "convert a dataset (code_contests, TACO/APPS, LiveCodeBench, PrimeIntellect, DeepCoder, open-r1 codeforces, a Kattis package) to problem JSONL"),
    "load": ("cpfleet.datasets.load", "upload problems to the Redis problem store"),
    "validate": ("cpfleet.datasets.validate", "run reference solutions to find broken or weak problems"),
    "worker": ("cpfleet.workers.cli", "start a Celery worker (prefork, concurrency = CPUs)"),
    "submit": ("cpfleet.jobs.submit", "submit jobs through the fleet, JSONL in and out"),
    "run": ("cpfleet.jobs.run", "run a program on inputs in the fleet's sandbox (no judging), or --local"),
    "up": ("cpfleet.fleet.up", "start redis + worker + flower locally"),
    "demo": ("cpfleet.demo.command", "run a demo batch on an embedded Redis"),
    "serve": ("cpfleet.gateway.serve", "HTTP gateway: OpenRLHF and slime rewards, SandboxFusion (verl), code-judge, Piston, E2B router, batch judge"),
}


DESCRIPTION = """\
Judge LLM completions of competitive-programming problems and turn them into RL rewards:
locally (cpfleet judge) or through a fleet of sandboxed workers on Redis (cpfleet up,
load, submit), with the Python client FleetClient for trainers."""

EPILOG = f"""\
start here:
  cpfleet demo                           a demo batch on an embedded Redis (nothing to set up)
  cpfleet judge PROBLEMS JOBS            judge a JSONL of jobs locally, one result per line
  cpfleet up                             Redis + worker + Flower on this machine
  cpfleet load PROBLEMS; cpfleet submit JOBS    the same jobs through that fleet

Commands that talk to Redis take --redis URL, else ${defaults.REDIS_URL_ENV}, else
{defaults.DEFAULT_REDIS_URL}. `cpfleet COMMAND --help` lists a command's options.

exit status: 0 done; 1 the work failed (a part of `cpfleet up` stopped, a demo verdict not as
expected); 2 a bad argument, input file or CPFLEET_* setting (one line says which); 3 Redis
cannot be reached (the line says what to do); 130 interrupted (Ctrl-C; 143 on SIGTERM, which
stops a command the same way), except `up`, for which Ctrl-C is the way to stop (0, as on
SIGTERM), and `worker`, which exits as Celery does (1); 141 when the reader of the output went
away (`| head`).
`cpfleet run` exits with the program's own status (with --json or --batch: 0, the statuses
being in the JSON; 3 when the fleet failed)."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, unless the text already names it: a user
    should never have to read the source to learn what an omitted option means."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text.lower() or any(action.default is v for v in (None, False, True, argparse.SUPPRESS)):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text + " (default: %(default)s)"
        return text


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """The ``cpfleet`` parser, and the subcommand's own parser when ``argv`` names one (only
    that subcommand's module is imported and configured)."""
    parser = argparse.ArgumentParser(
        prog="cpfleet",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from cpfleet import __version__

    parser.add_argument("--version", action="version", version=f"cpfleet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = argv[0] if argv and not argv[0].startswith("-") else None
    chosen = None
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
        if name == wanted:
            mod = importlib.import_module(module)
            mod.configure(p)
            p.set_defaults(_module=mod)
            chosen = p
    return parser, chosen


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # importing the subcommand's module takes most of a start (0.1-0.2 s): a Ctrl-C or a SIGTERM
    # then stops it as later, one line and 130 or 143, not a traceback or a death by signal.
    # (Before this line, the interpreter's start and this module's import, a SIGTERM still kills
    # the process outright: nothing has been read or written yet, so nothing is lost.)
    with sigterm_as_ctrl_c("") as terminated:
        try:
            parser, command_parser = build_parser(argv)
        except KeyboardInterrupt:
            print("cpfleet: interrupted", file=sys.stderr)
            return 143 if terminated else 130
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the subcommand's usage, with what it takes instead when it says
        hint = getattr(getattr(args, "_module", None), "UNRECOGNIZED_HINT", "")
        (command_parser or parser).error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    with sigterm_as_ctrl_c(args.command) as terminated:
        return _run_command(args, terminated)


def _run_command(args: argparse.Namespace, terminated: list[int]) -> int:
    """The chosen command's status, its expected failures each as one line on stderr."""
    from cpfleet.core.errors import BrokerFull, BrokerUnavailable, ConfigError, RedisUrlError

    try:
        check_environment(args.command)
        check_redis_url(args)
        status = int(args._module.run(args) or 0)
        return 143 if terminated and status == 130 else status
    except ConfigError as exc:  # a CPFLEET_* variable with a bad value: one line per variable
        for line in str(exc).splitlines():
            print(f"cpfleet {args.command}: {line}", file=sys.stderr)
        return 2
    except RedisUrlError as exc:  # the user's typo: one line, never a traceback
        print(f"cpfleet {args.command}: {exc}", file=sys.stderr)
        return 2
    except (BrokerUnavailable, BrokerFull) as exc:  # a Redis that is not there (or full): one line
        print(f"cpfleet {args.command}: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:  # named as every other line of the command is
        print(f"cpfleet {args.command}: interrupted", file=sys.stderr)
        return 143 if terminated else 130
    except BrokenPipeError:  # stdout's reader went away (`| head`): stop as it asked, no traceback
        # what is still buffered goes nowhere, so the interpreter's last flush cannot fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout with no descriptor (main() called in-process)
            pass
        finally:
            os.close(devnull)
        try:
            print(f"cpfleet {args.command}: stopped: the output was closed (broken pipe)", file=sys.stderr)
        except OSError:  # stderr went to the same closed pipe (`2>&1 | head`): nobody is left to tell
            pass
        return 141  # as a command killed by SIGPIPE
    except SystemExit as exc:  # a command's refusal of its arguments as a message: a usage error
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        raise


# Commands that stop on SIGTERM by signal handling of their own: `up` and `demo` stop their
# fleet, `serve` drains its requests (uvicorn), `worker` is Celery's warm shutdown
OWN_SIGTERM = frozenset({"up", "demo", "serve", "worker"})


@contextlib.contextmanager
def sigterm_as_ctrl_c(command: str) -> Iterator[list[int]]:
    """Within the block SIGTERM (``kill``, ``timeout``, a batch scheduler, a container stop) stops
    the command as Ctrl-C does: Python's default kills it on the spot, so ``judge`` left no "N of
    M judged" line and ``submit`` left its client's claim in Redis, where the workers kept judging
    the withdrawn jobs until the claim expired. The yielded list gets the signal's number once one
    came (the exit status is then 143, not 130). A SIGTERM ignored or handled by whoever started
    the command is left so, as is one outside the main thread (no handler can be set there).
    ``command`` is "" while the chosen command's module imports: nothing has started, so every
    command, those with a SIGTERM handling of their own too, stops so then."""
    received: list[int] = []
    previous = signal.getsignal(signal.SIGTERM)
    if command in OWN_SIGTERM or previous is not signal.SIG_DFL or threading.current_thread() is not threading.main_thread():
        yield received
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)  # main() called in-process leaves no handler behind


# Commands that use $CPFLEET_REDIS_URL (else the default) when --redis is not given; `up`
# starts a Redis of its own instead, `run --local` uses none.
USES_REDIS_ENV = frozenset({"load", "submit", "worker", "serve", "run"})


def check_environment(command: str) -> None:
    """Check every ``CPFLEET_*`` variable before the command does anything (raises ConfigError),
    and warn about a name that is nearly one of ours: a typo would otherwise do nothing, silently.
    The Redis URL is left to ``check_redis_url``: ``--redis`` overrides it, and commands without
    Redis never read it."""
    from cpfleet.core import envvars

    for name, meant in envvars.misspelled():
        print(f"cpfleet {command}: warning: {name} is not a cpfleet setting; did you mean {meant}?", file=sys.stderr)
    envvars.check_environment(skip=(defaults.REDIS_URL_ENV,))


def check_redis_url(args: argparse.Namespace) -> None:
    """Check the command's Redis URL before it does anything else (raises RedisUrlError): a
    command must not read a large file, or a worker start retrying forever, on a URL it misread."""
    from cpfleet.core.redis_url import parse_redis_url

    explicit = getattr(args, "redis", None)
    if explicit is not None:
        parse_redis_url(explicit, source="--redis")
    elif args.command in USES_REDIS_ENV and not getattr(args, "local", False):  # `run --local` needs no Redis
        defaults.redis_target(None)


if __name__ == "__main__":
    sys.exit(main())
