"""What a run leaves charged to the slot's memory cgroup after its last process is gone: the next
run (a checker's, most often) waits for what only time frees (memfds or pipes in flight on a
unix socket, freed by the kernel's asynchronous collection: tests/test_checker_programs.py),
never for what reclaim frees (a program's negative dentries stay charged for good otherwise), and
what nothing frees costs one wait, not one per run, and is not taken from a later program's limit."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.cgroups import LEFTOVER_BYTES, SlotCgroup
from cpfleet.sandbox.runner import Limits
from cpfleet.sandbox.runners import make_runner


@pytest.fixture
def slot() -> Iterator[SlotCgroup]:
    cg = SlotCgroup(f"settle-test-{os.getpid()}")
    if not cg.ok or cg.version == 0:
        pytest.skip(f"no writable memory cgroup here: {cg.error}")
    yield cg
    cg.close()
    for path in cg.procs_files + ([cg._cpu_procs_file] if cg._cpu_procs_file else []):
        try:
            os.rmdir(os.path.dirname(path))
        except OSError:
            pass


def _run_in(cg: SlotCgroup, code: str) -> None:
    procs = [*cg.procs_files]
    subprocess.run([sys.executable, "-c", code], check=True,
                   preexec_fn=lambda: [open(p, "w").write("0") for p in procs] and None)


def test_kernel_memory_reclaim_can_free_is_reclaimed_not_waited_for(slot: SlotCgroup) -> None:
    # ~400k failed lookups leave ~70 MB of negative dentries charged to the cgroup after the
    # process is gone; a wait for them would never end, and every later run would wait again
    _run_in(slot, "import os\nfor i in range(400000):\n    try:\n        os.stat('/cpfleet-no-such-file-%d' % i)\n"
                  "    except OSError:\n        pass\n")
    if slot.leftover_bytes() <= LEFTOVER_BYTES:
        pytest.skip("this kernel does not charge dentries to the cgroup")
    assert slot.await_memory_settled(timeout_s=0.5) == 0
    assert slot.leftover_bytes() <= LEFTOVER_BYTES


def test_memory_nothing_frees_costs_one_wait_not_one_per_run(slot: SlotCgroup) -> None:
    # a file in the host's /dev/shm (a run without a mount namespace of its own could leave one):
    # shared memory of the slot's cgroup that neither reclaim (no swap for it here) nor time frees
    shm = f"/dev/shm/cpfleet-settle-test-{os.getpid()}"
    try:
        _run_in(slot, f"with open({shm!r}, 'wb') as f:\n    for _ in range(32):\n        f.write(b'x' * (1 << 20))\n")
        first = slot.await_memory_settled(timeout_s=0.2)
        if first == 0:
            pytest.skip("reclaim freed the shared memory here (swap)")
        assert first > LEFTOVER_BYTES
        assert slot.await_memory_settled(timeout_s=30) == 0  # the level is known: no second wait
        os.unlink(shm)
        assert slot.await_memory_settled(timeout_s=0.2) == 0
        assert slot._stuck_bytes <= LEFTOVER_BYTES  # freed: the level falls with it
    finally:
        if os.path.exists(shm):
            os.unlink(shm)


def test_memory_nothing_frees_is_not_taken_from_a_later_programs_limit() -> None:
    # 64 MiB of shared memory left charged to the runner's slot (as above), then a program using
    # ~100 MB of its 128 MB limit: with the stuck charge counted against it, the slot's cgroup
    # would OOM-kill it, a MEMORY_LIMIT of the host's making
    shm = f"/dev/shm/cpfleet-settle-runner-{os.getpid()}"
    with make_runner("forkserver") as runner:
        cg = runner._cgroup  # type: ignore[attr-defined]
        if cg is None or not cg.ok or cg.version == 0:
            pytest.skip("no writable memory cgroup here: the slot's limit is RLIMIT_AS alone")
        try:
            _run_in(cg, f"with open({shm!r}, 'wb') as f:\n    for _ in range(64):\n        f.write(b'x' * (1 << 20))\n")
            assert runner.load("b = bytearray(100 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\n"
                               "print(len(b) >> 20)\n") is None
            rr = runner.run(b"", Limits(time_s=10, memory_mb=128))
            if cg.stuck_bytes == 0:
                pytest.skip("reclaim freed the shared memory here (swap)")
            assert cg.stuck_bytes >= 60 << 20
            assert (rr.status, rr.stdout) == (Verdict.OK, b"100\n"), rr
            # and a program past its limit is still stopped there, stuck charge or not
            assert runner.load("b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\n") is None
            assert runner.run(b"", Limits(time_s=10, memory_mb=128)).status == Verdict.MEMORY_LIMIT
        finally:
            if os.path.exists(shm):
                os.unlink(shm)
