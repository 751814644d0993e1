"""What a run leaves charged to the slot's memory cgroup after its last process is gone: the next
run (a checker's, most often) waits for what only time frees (memfds or pipes in flight on a
unix socket, freed by the kernel's asynchronous collection: tests/test_checker_programs.py),
never for what reclaim frees (a program's negative dentries stay charged for good otherwise), and
what nothing frees costs one wait, not one per run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from cpfleet.sandbox.cgroups import LEFTOVER_BYTES, SlotCgroup


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
