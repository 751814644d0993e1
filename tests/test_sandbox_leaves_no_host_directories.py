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


def _locked_tree_removed_as(uid: int | None, root: Path, outside: Path) -> bool:
    """Build a tree a same-uid test could leave (directories chmod 0, a link to a directory
    outside it) and ``remove_tree`` it, as ``uid`` (None: as we are) in a child when we are
    root: whether it is gone."""
    from cpfleet.sandbox.zygote_process import remove_tree

    def build_and_remove() -> bool:
        (root / "a" / "b").mkdir(parents=True)
        (root / "a" / "b" / "data").write_text("x")
        (root / "a" / "link").symlink_to(outside)
        for d in (root / "a" / "b", root / "a", root):
            d.chmod(0)
        remove_tree(str(root))
        return not os.path.lexists(root)

    if uid is None:
        return build_and_remove()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(uid)
            os.setuid(uid)
            code = 0 if build_and_remove() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def test_a_tree_a_same_uid_test_locked_is_removed_and_no_link_in_it_followed() -> None:
    """Without a uid drop (a runner that is not root), a test runs as the runner's uid and can
    take the runner's access to its directories away: removal gives it back first, and changes
    nothing a link in the tree points at."""
    import shutil

    # in the host's temporary directory, which an unprivileged uid reaches (pytest's is 0700)
    base = Path(tempfile.mkdtemp(prefix="cpfleet-remove-tree-"))
    try:
        base.chmod(0o777)  # the unprivileged uid below makes its tree in it
        outside = base / "outside"
        outside.mkdir()
        outside.chmod(0o755)
        uid = 65534 if os.geteuid() == 0 else None
        assert _locked_tree_removed_as(uid, base / "tree", outside)
        assert outside.stat().st_mode & 0o777 == 0o755
    finally:
        shutil.rmtree(base, ignore_errors=True)


# 3000 directories, each inside the last: shutil.rmtree recursed once per level, and the
# RecursionError ended the job init that removed the test's directory (INTERNAL for the program's
# doing) or, at the runner's close, the worker's judging process itself (no result for any job).
NESTS_3000_DIRECTORIES = textwrap.dedent("""
    import os
    for _ in range(3000):
        os.mkdir("d")
        os.chdir("d")
    print("deep")
""").lstrip()


def test_a_tree_nested_past_the_recursion_limit_is_removed_and_the_program_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    runner = ForkServerRunner(isolate=False)
    try:
        assert runner.load(NESTS_3000_DIRECTORIES) is None
        first, second = (runner.run(b"", Limits(time_s=10)) for _ in range(2))
        for res in (first, second):
            assert (res.status, res.stdout) == (Verdict.OK, b"deep\n"), res.error
    finally:
        runner.close()
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(_OURS)]
    assert left == [], left
