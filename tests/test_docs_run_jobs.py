"""docs/run-jobs.md's Python recipe, run as written against a real fleet (a real redis-server and
a real worker): every call it shows works when pasted, and each prints what its comment says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleet_helpers import FleetWorker

from cpfleet.fleet.redis_server import RedisServer

REPO = Path(__file__).resolve().parents[1]
PAGE = (REPO / "docs" / "run-jobs.md").read_text()


@pytest.fixture(scope="module")
def node(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetWorker]:
    with FleetWorker(redis_server.url, tmp_path_factory.mktemp("fleet"), concurrency=2) as worker:
        yield worker


def test_the_python_recipe_runs_as_written_and_prints_what_its_comments_say(node: FleetWorker, tmp_path: Path) -> None:
    (recipe,) = re.findall(r"^```python\n(.*?)^```", PAGE, re.M | re.S)
    # what each print() shows, as its comment states it (the text after the last '# ' and any 'label: ')
    expected = [c.split(": ", 1)[-1] for c in re.findall(r"^\s*print\(.*#\s*(.+?)\s*$", recipe, re.M)]
    assert len(expected) == 5, expected
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}, "CPFLEET_REDIS_URL": node.redis_url}
    proc = subprocess.run([sys.executable, "-c", recipe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    # a program's output keeps its newline, so the printed text is compared blank for blank
    assert proc.stdout.split() == " ".join(expected).split(), (proc.stdout, expected)
