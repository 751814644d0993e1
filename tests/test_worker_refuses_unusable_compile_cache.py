"""A node whose compile cache folder is refused (``CPFLEET_COMPILE_CACHE_DIR`` naming a file, or a
folder others may write in) exits at start naming it, before it takes a job: otherwise every
compiled job and checker it took would be an infrastructure error. Real redis-server, real
prefork worker."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import redis
from fleet_helpers import FleetWorker

from cpfleet.workers.resources import SETTING_EXIT_CODE


@pytest.mark.parametrize("kind", ["a-file", "writable-by-others"])
def test_a_node_with_an_unusable_compile_cache_folder_exits_naming_it(redis_url: str, tmp_path: Path, kind: str) -> None:
    target = tmp_path / "cache"
    if kind == "a-file":
        target.write_text("not a folder\n")
    else:
        target.mkdir()
        os.chmod(target, 0o777)
    queue = "cache-" + uuid.uuid4().hex[:8]
    r = redis.Redis.from_url(redis_url)
    r.lpush(queue, b"left alone")  # a node that refuses to start consumes nothing
    node = FleetWorker(redis_url, tmp_path, concurrency=1,
                       env={"CPFLEET_QUEUES": queue, "CPFLEET_COMPILE_CACHE_DIR": str(target)})
    node.start(wait=False)
    try:
        assert node.proc is not None
        assert node.proc.wait(timeout=120) == SETTING_EXIT_CODE
    finally:
        node.stop()
    log = node.log_text()
    assert "refuses to start" in log and "compile cache folder (CPFLEET_COMPILE_CACHE_DIR)" in log, log[-3000:]
    assert str(target) in log and "Traceback" not in log
    assert "ready." not in log
    assert r.llen(queue) == 1
