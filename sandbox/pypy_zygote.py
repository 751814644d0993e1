"""PyPy programs in a fork server of their own: the zygote (sandbox/zygote.py) run under PyPy.

A ``pypy3`` solution on the exec path starts a fresh PyPy per test (25-40 ms of CPU before the
program's first line). Here a PyPy zygote, started by the runner the first time a PyPy job
comes, forks the job init (which compiles the source once, with PyPy's own compiler) and each
test child from a warm PyPy, exactly as the CPython zygote does: the same namespaces, seccomp
filter, rlimits, slot uid and cgroup, the same messages, the same verdict mapping on the
runner side (``ZygoteRunner.run_job``, sandbox/verdicts.py). The runner checks its layers with the same probe as
its own and refuses it (the exec path then runs PyPy programs) when any layer the CPython
zygote has is missing here.

What differs from a CPython job, and why:

- Memory: the ``cgroup`` model of the pypy3 language table entry (sandbox/languages/pypy3.py), as on
  the exec path: no RLIMIT_AS (PyPy reserves far more address space than it uses), the slot's
  cgroup at the memory limit plus the runtime's allowance. The zygote's own pages stay charged
  to the zygote; a test is charged for the pages it writes, never more than a fresh PyPy.
- The interpreter's start-up and shutdown are PyPy's (sandbox/child.py, ``PYPY``): its std
  stream layout, its int digit limit, no collection at exit.

The code that runs in the PyPy zygote is shared with CPython's and written for Python 3.9
(PyPy 7.3's language level): no ``match``, no runtime ``X | Y``, no 3.10+ library calls.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
from typing import Any

from cpfleet.core.errors import SandboxBroken
from cpfleet.sandbox import languages
from cpfleet.sandbox.cgroups import SlotCgroup
from cpfleet.sandbox.jobinit import LOAD_ANSWER_S
from cpfleet.sandbox.jobs import Job, send_source
from cpfleet.sandbox.slots import Slot
from cpfleet.sandbox.zygote_process import recv_within, site_packages, spawn_zygote, stop_zygote

log = logging.getLogger("cpfleet.sandbox")

SETUP_TIMEOUT_S = 60.0  # PyPy's start and the zygote's preloads take ~1 s; a loaded host more


def pypy_executable() -> str:
    """The PyPy the pypy3 language runs (CPFLEET_PYPY, else pypy3 on PATH)."""
    return languages.get("pypy3").tools[0]


class PyPyZygote:
    """One PyPy zygote of a runner's slot: started on demand, restarted when it dies."""

    def __init__(self, pypy: str, slot: Slot, cgroup: SlotCgroup | None, isolate: bool) -> None:
        self.pypy = pypy
        self._slot = slot
        self._cgroup = cgroup
        self._isolate = isolate
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctrl: socket.socket | None = None
        self._scratch = ""  # the zygote's scratch directory (spawn_zygote), removed with it
        self.layers: dict[str, bool] = {}
        self.notes: list[str] = []
        self.start()

    def start(self) -> None:
        cgroup_fds, cpu_counted = self._cgroup.open_zygote_fds() if self._cgroup is not None else ([], False)
        try:
            self._proc, self._ctrl, self._scratch = spawn_zygote(self.pypy, {
                "uid": self._slot.uid, "gid": self._slot.gid, "python": self.pypy,
                # the directories `pypy3 solution.py` has on sys.path (its site, which the
                # zygote does not run: -S)
                "site_packages": site_packages(self.pypy), "python_dirs": site_packages(self.pypy),
                "isolate": self._isolate, "pch_dir": "", "cpu_usage_fd": cpu_counted}, cgroup_fds)
        finally:
            for fd in cgroup_fds:
                os.close(fd)
        try:
            reply = recv_within(self._ctrl, SETUP_TIMEOUT_S)
        except BaseException:
            self.stop()  # a zygote that never answered is not left behind
            raise
        self.layers = dict(reply["layers"])
        self.notes = list(reply["notes"])
        if self._cgroup is None:
            self.layers["cgroup"] = False

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def open_job(self, payload: bytes) -> tuple[Job, dict[str, Any]]:
        """A fork-mode job of ``payload`` (the source) and its init's compile answer. Raises
        SandboxBroken when the zygote cannot start it (the zygote is restarted for the next)."""
        if not self.alive():
            self.stop()
            self.start()
        assert self._ctrl is not None
        job = Job()
        try:
            send_source(self._ctrl, {"op": "job", "mode": "fork"}, [job.theirs.fileno()], payload, None)
            job.theirs.close()  # the init holds it now: its death alone is our EOF
            reply = recv_within(job.sock, LOAD_ANSWER_S)  # the init answers once it compiled
        except (OSError, SandboxBroken) as e:
            job.close()
            self.stop()
            if isinstance(e, SandboxBroken):
                raise
            raise SandboxBroken(f"starting the PyPy job failed: {type(e).__name__}: {e}") from e
        job.memory_model = "cgroup"
        job.extra_cgroup_bytes = languages.get("pypy3").extra_cgroup_mb << 20
        return job, reply

    def stop(self) -> None:
        stop_zygote(self._proc, self._ctrl, self._scratch)
        self._proc, self._ctrl, self._scratch = None, None, ""
