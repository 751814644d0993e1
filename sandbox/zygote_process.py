"""Starting a zygote (sandbox/zygote.py) from the runner's side, and checking what it holds.

``spawn_zygote`` execs one under an interpreter (the worker's CPython, a configured solution
interpreter, or PyPy: sandbox/pypy_zygote.py) with a clean environment and hands it its
configuration; ``self_test_probe`` and ``check_self_test`` are the probe every runner runs
through a new zygote, and how its output marks a layer missing. The helpers below say which
directories an interpreter needs shown in the sandbox.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import select
import socket
import subprocess
import sys
from typing import Any

from cpfleet.core.errors import SandboxBroken, SlotDirError
from cpfleet.core.verdict import Verdict
from cpfleet.sandbox import zygote
from cpfleet.sandbox.isolation import remove_tree
from cpfleet.sandbox.runner import RunResult

log = logging.getLogger("cpfleet.sandbox")

CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": "/box"}


def zygote_command(python: str | None = None) -> list[str]:
    """``python -I -S``: no site, so no .pth hooks (editable installs, setuptools' shims)
    import dozens of modules into the process that every test forks from.

    Without site there is no editable-install finder either, and ``cpfleet/__init__.py`` is
    not wanted in the zygote, so the boot line registers bare ``cpfleet`` and
    ``cpfleet.sandbox`` package objects whose ``__path__`` is this folder: the zygote's own
    imports resolve there and nothing else of the project is loaded or on ``sys.path``.

    The boot line first raises its stack rlimit to the hard limit and execs itself again when it
    was lower: the kernel lays out a process's memory at exec by that limit (a small one leaves
    the stack ~128 MB below the shared libraries), and every forked Python test inherits this
    layout, so only then can a test's stack grow to its memory limit (isolation.confine_to_test).
    """
    sandbox_dir = os.path.dirname(os.path.abspath(zygote.__file__))
    boot = (
        "import sys, os, resource as R; s, h = R.getrlimit(R.RLIMIT_STACK); "
        "s != h and (R.setrlimit(R.RLIMIT_STACK, (h, h)), "
        "os.execv(sys.executable, open('/proc/self/cmdline', 'rb').read().split(b'\\0')[:-1])); "
        "M = type(sys); top = M('cpfleet'); top.__path__ = []; "
        f"sub = M('cpfleet.sandbox'); sub.__path__ = [{sandbox_dir!r}]; top.sandbox = sub; "
        "sys.modules.update({'cpfleet': top, 'cpfleet.sandbox': sub}); "
        "import cpfleet.sandbox.zygote as z; z.main()"
    )
    return [python or sys.executable, "-I", "-S", "-c", boot]


def spawn_zygote(python: str | None, config: dict[str, Any],
                 cgroup_fds: list[int]) -> tuple[subprocess.Popen[bytes], socket.socket, str]:
    """Start a zygote under ``python`` (None: this interpreter) and send it its ``config`` and
    the slot's cgroup fds: the process, our end of its control channel (the caller reads its
    setup reply) and its scratch directory, which ``stop_zygote`` removes.

    The scratch directory holds the host directories of jobs without a mount namespace (their
    source, program files and test directories). A job removes its own when it ends, but one
    killed with its zygote (a spare job, a test cut short by a reset) cannot: its zygote's
    scratch goes with the zygote instead, from here, where nothing the job ran can stop it."""
    import tempfile

    scratch = tempfile.mkdtemp(prefix="cpfleet-zygote-")
    os.chmod(scratch, 0o711)  # a test's uid passes through to its own directory, lists nothing
    config = {**config, "scratch": scratch}
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = subprocess.Popen(
            [*zygote_command(python), str(theirs.fileno()), str(os.getpid())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            # its own process group: a terminal's Ctrl-C is for the command that owns the
            # runner, which closes it; the zygote dies with the runner's process anyway (Zygote.serve)
            process_group=0,
            env=CHILD_ENV,  # never the worker's: it holds the broker URL and its password
        )
    except BaseException:
        ours.close()
        remove_tree(scratch)
        raise
    finally:
        theirs.close()
    try:
        zygote.send(ours, config, cgroup_fds)
    except BaseException:
        stop_zygote(proc, ours, scratch)
        raise
    return proc, ours, scratch


def stop_zygote(proc: subprocess.Popen[bytes] | None, ctrl: socket.socket | None, scratch: str = "") -> None:
    """Close a zygote's control socket, kill and reap its process (either may be None) and
    remove its scratch directory."""
    if ctrl is not None:
        ctrl.close()
    if proc is not None:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    if scratch:
        remove_tree(scratch)


def recv_within(sock: socket.socket, timeout: float) -> Any:
    """The next message from a zygote or job init; SandboxBroken when none comes in time or
    the process exited."""
    r, _, _ = select.select([sock], [], [], timeout)
    if not r:
        raise SandboxBroken(f"no answer from the sandbox within {timeout:.0f}s")
    msg, fds = zygote.recv(sock)
    for fd in fds:
        os.close(fd)
    if msg is None:
        raise SandboxBroken("the sandbox process exited")
    return msg


def self_test_probe(port: int) -> str:
    """A program that reports what a test child sees: whether it reaches a loopback listener
    of ours on ``port`` (a self-test must never send traffic off the machine, even when the
    network namespace is missing), its uid, its pid and its seccomp mode."""
    return (
        "import os, socket\n"
        "r = []\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1); r.append('net-open')\n"
        "except OSError: pass\n"
        "r.append('uid=%d' % os.getuid())\n"
        "r.append('pid=%d' % os.getpid())\n"
        "try:\n    r += ['seccomp=' + l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')]\n"
        "except OSError: pass\n"
        "print(' '.join(r))\n"
    )


def check_self_test(err: str | None, res: RunResult, layers: dict[str, bool], notes: list[str], uid: int) -> None:
    """Mark in ``layers`` (with a note) each layer the probe's run shows missing."""
    out = res.stdout.decode(errors="replace").split()
    if err or res.status != Verdict.OK:
        layers["self_test"] = False
        notes.append(f"self-test failed: {err or res.status} {res.error} {res.stderr[-300:]!r}")
        return
    layers["self_test"] = True
    if "net-open" in out:
        layers["netns"] = False
        notes.append("self-test reached a loopback port: no network isolation")
    if layers.get("uid_drop") and f"uid={uid}" not in out:
        layers["uid_drop"] = False
        notes.append(f"self-test ran as {out}, not uid {uid}")
    if layers.get("pidns") and not any(o.startswith("pid=") and int(o[4:]) < 10 for o in out):
        layers["pidns"] = False
    if layers.get("seccomp") and "seccomp=2" not in out:
        layers["seccomp"] = False
        notes.append("self-test ran without its seccomp filter")


@functools.lru_cache(maxsize=8)
def site_packages(python: str | None) -> list[str]:
    """The site-packages of a configured solution interpreter, asked of the interpreter itself
    with site on (the zygote runs it with -S, where a venv's own directories are not set up)."""
    if python is None:
        return []
    out = subprocess.run([python, "-c", "import json, site, sys; print(json.dumps(site.getsitepackages()))"],
                         capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0:
        raise SandboxBroken(f"the solution interpreter {python} does not run: {out.stderr.strip()[-300:]}")
    return [str(p) for p in json.loads(out.stdout)]


def refuse_interpreter_under_tmp(python: str | None) -> None:
    """A configured interpreter must live outside /tmp: inside the sandbox /tmp is the test's
    own directory, so a venv there cannot be shown at its path, and every solution would fail
    to start, as if by its own fault. Refused here, as the worker's setup error it is."""
    if python is None:
        return
    from cpfleet.sandbox.isolation import hidden_from_sandbox

    tree = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(python))))
    if hidden_from_sandbox(tree):
        raise SandboxBroken(
            f"the solution interpreter {python} lives under {tree}, which the sandbox replaces with its own "
            f"(each test's directory, /run, /dev...): put its venv elsewhere (CPFLEET_SOLUTION_PYTHON)"
        )


def refuse_missing_interpreter(python: str | None) -> None:
    """A configured solution interpreter must be an executable file here: otherwise every job
    would be INTERNAL with a bare "No such file or directory", naming neither the setting nor
    what to fix."""
    if python is not None and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise SandboxBroken(
            f"the solution interpreter {python} (CPFLEET_SOLUTION_PYTHON) is not an executable file on this host: "
            "point CPFLEET_SOLUTION_PYTHON at a python3 (a venv's bin/python), or unset it to use this one"
        )


def solution_python_dirs(python: str | None) -> list[str]:
    """Directories the sandbox must show for a configured interpreter: its own tree (a venv's
    bin/ and pyvenv.cfg; exec mode runs it by that path) and its site-packages."""
    if python is None:
        return []
    return [os.path.dirname(os.path.dirname(os.path.abspath(python))), *site_packages(python)]


def toolchain_dirs() -> list[str]:
    """Host folders outside the system ones that this process's languages run tools from
    (``Language.sandbox_dirs``: an operator's ``CPFLEET_JAVA_HOME``), for the zygote to bind."""
    from cpfleet.sandbox import languages  # the registry builds every toolchain: only when a zygote starts
    from cpfleet.sandbox.isolation import hidden_from_sandbox

    # a hidden one makes its language unavailable (languages.missing_tools) and is not bound
    return sorted({d for lang in languages.table().values() for d in lang.sandbox_dirs if not hidden_from_sandbox(d)})


def pch_root() -> str:
    """The host directory of precompiled headers (created world-readable; '' when it cannot be)."""
    from cpfleet.sandbox.programs import PchCache

    try:
        return PchCache().ensure_root()
    except (OSError, SlotDirError) as e:  # refused: C++ compiles without a header, never with a planted one
        log.warning("no precompiled headers: %s", e)
        return ""
