"""Without a mount namespace (isolation off, or refused by the kernel: an unprivileged container)
a job's source and each test's working directory are host directories. They are made in the
zygote's scratch directory, which goes with the zygote: a spare job made ahead and killed with
its zygote, a test cut short, a directory a test locked (chmod 0) leave nothing behind in the
host's temporary directory after the runner closes, however many workers restart over a run."""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path

import pytest

from cpfleet.core.verdict import Verdict
from cpfleet.sandbox.forkserver import ForkServerRunner
from cpfleet.sandbox.runner import Limits

# says where it runs and what its source is, and leaves a locked directory with a file in it
LEAVES_A_LOCKED_DIRECTORY = textwrap.dedent("""
    import os
    print(os.getcwd())
    print(__file__)
    os.makedirs("locked/inner")
    open("locked/inner/data", "w").write("x")
    os.chmod("locked/inner", 0)
    os.chmod("locked", 0)
""").lstrip()

_OURS = ("cpfleet-zygote-", "cpfleet-src-", "cpfleet-test-", "cpfleet-prog-")


def test_a_closed_runner_leaves_no_job_or_test_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    runner = ForkServerRunner(isolate=False)
    try:
        assert runner.load(LEAVES_A_LOCKED_DIRECTORY) is None
        res = runner.run(b"", Limits(time_s=5))
        assert res.status == Verdict.OK, res.stderr[-500:]
        cwd, source = res.stdout.decode().split()
        # the directories the test used were in the runner's temporary directory, so that
        # their absence below is a removal, not directories made somewhere else
        assert Path(cwd).is_relative_to(tmp_path) and Path(source).is_relative_to(tmp_path), (cwd, source)
        assert runner.load("import time\ntime.sleep(30)\n") is None
        assert runner.run(b"", Limits(time_s=0.5)).status == Verdict.TIME_LIMIT
        runner.prepare_next()  # a spare job, killed unused by close()
    finally:
        runner.close()
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(_OURS)]
    assert left == [], left
    assert not os.path.exists(cwd) and not os.path.exists(source)
