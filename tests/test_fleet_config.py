"""Worker settings: defaults, validation of the reliability invariants, the Celery config they
produce, the `cpfleet worker` command line, and the docs table that lists them."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_helpers import REPO

from cpfleet.workers.config import SETTINGS, Settings


def test_defaults_keep_the_visibility_timeout_above_the_hard_limit_above_the_soft_limit() -> None:
    s = Settings.from_env({})
    assert 0 < s.soft_time_limit_s < s.hard_time_limit_s < s.visibility_timeout_s
    assert s.concurrency == "auto" and s.runner == "forkserver" and s.queues == ("cpfleet",)


@pytest.mark.parametrize(
    ("env", "complaint"),
    [
        ({"CPFLEET_SOFT_TIME_LIMIT": "50", "CPFLEET_HARD_TIME_LIMIT": "40"}, "SOFT_TIME_LIMIT"),
        ({"CPFLEET_HARD_TIME_LIMIT": "100", "CPFLEET_VISIBILITY_TIMEOUT": "100", "CPFLEET_SOFT_TIME_LIMIT": "90"}, "VISIBILITY"),
        ({"CPFLEET_RUNNER": "docker"}, "RUNNER"),
        ({"CPFLEET_QUEUES": " , "}, "QUEUES"),
        ({"CPFLEET_MAX_RETRIES": "-1"}, "MAX_RETRIES"),
        ({"CPFLEET_RESULT_CACHE": "maybe"}, "boolean"),
    ],
)
def test_bad_settings_fail_at_start_with_the_reason(env: dict[str, str], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        Settings.from_env(env)


def test_celery_config_is_msgpack_only_at_least_once_without_prefetch_or_result_backend() -> None:
    s = Settings.from_env({"CPFLEET_HARD_TIME_LIMIT": "100", "CPFLEET_SOFT_TIME_LIMIT": "90", "CPFLEET_QUEUES": "a,b"})
    c = s.celery_config()
    assert c["accept_content"] == ["msgpack"] and c["task_serializer"] == c["result_serializer"] == "msgpack"
    assert c["task_acks_late"] and c["task_retry_on_worker_lost"] and not c["task_reject_on_worker_lost"]
    assert c["worker_prefetch_multiplier"] == 1 and c["worker_disable_prefetch"]
    assert c["result_backend"] is None and c["task_ignore_result"]
    for opts in (c["broker_transport_options"], c["result_backend_transport_options"]):
        assert opts["visibility_timeout"] == 160 > c["task_time_limit"] == 100 > c["task_soft_time_limit"] == 90
    assert c["broker_transport_options"]["socket_timeout"] > 0 and c["broker_transport_options"]["socket_keepalive"]
    assert [q.name for q in c["task_queues"]] == ["a", "b"] and c["task_default_queue"] == "a"
    assert c["worker_concurrency"] == "auto"


def test_the_app_registers_the_task_with_bounded_retries() -> None:
    from cpfleet.core.protocol import TASK_NAME
    from cpfleet.workers.app import app, settings

    task = app.tasks[TASK_NAME]
    assert task.acks_late and task.max_retries == settings.max_retries and task.default_retry_delay == 0
    assert app.conf.worker_disable_prefetch and app.conf.accept_content == ["msgpack"]


def test_cpfleet_worker_execs_a_prefork_celery_worker_with_the_settings() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cpfleet.cli", "worker", "--redis", "redis://10.0.0.1:6400/2", "-c", "3",
         "--queues", "q1,q2", "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    argv = shlex.split(out.stdout)
    argv = argv[next(i for i, word in enumerate(argv) if "=" not in word):]  # after the settings' assignments
    assert argv[1:6] == ["-m", "celery", "-A", "cpfleet.workers.app", "worker"]
    assert argv[argv.index("-P") + 1] == "prefork" and argv[argv.index("-c") + 1] == "3"
    assert argv[argv.index("-Q") + 1] == "q1,q2"
    assert {"--without-gossip", "--without-mingle", "--disable-prefetch", "-E"} <= set(argv)


def test_the_dry_run_prints_a_command_that_runs_the_same_worker_as_written() -> None:
    """``--dry-run`` printed Celery's argv alone, space-joined: the settings the options pass
    through the environment (the Redis URL, the runner...) were missing, so the command, copied
    into a unit file or a script, started a worker on the default Redis; and a node name with a
    blank came out as several words."""
    out = subprocess.run(
        [sys.executable, "-m", "cpfleet.cli", "worker", "--redis", "redis://10.0.0.1:6400/2", "--runner", "subprocess",
         "-n", "node one@h", "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")},
    )
    assert out.returncode == 0, out.stderr
    words = shlex.split(out.stdout)
    assert "CPFLEET_REDIS_URL=redis://10.0.0.1:6400/2" in words and "CPFLEET_RUNNER=subprocess" in words, words
    assert words[words.index("-n") + 1] == "node one@h"


def test_the_dry_runs_settings_stay_assignments_in_a_shell_whatever_their_value() -> None:
    """A setting whose value needs quoting (a TLS URL's ``?ssl_cert_reqs=none``) came out quoted
    whole, ``'CPFLEET_REDIS_URL=...'``: a shell takes that word for the command to run (``command
    not found``), so the pasted command never started a worker. Only the value is quoted."""
    url = "rediss://10.0.0.1:6400/2?ssl_cert_reqs=none"
    out = subprocess.run(
        [sys.executable, "-m", "cpfleet.cli", "worker", "--redis", url, "--runner", "subprocess", "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")},
    )
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    settings = line[: line.index(" " + shlex.quote(sys.executable) + " ")]  # what comes before the program
    shown = subprocess.run(["sh", "-c", f"{settings} env"], capture_output=True, text=True, timeout=30,
                           env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert shown.returncode == 0, shown.stderr
    assert f"CPFLEET_REDIS_URL={url}" in shown.stdout.splitlines() and "CPFLEET_RUNNER=subprocess" in shown.stdout


def test_cpfleet_worker_refuses_bad_settings_without_a_traceback() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cpfleet.cli", "worker", "--runner", "subprocess", "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={"CPFLEET_VISIBILITY_TIMEOUT": "5", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 2 and "VISIBILITY" in out.stderr and "Traceback" not in out.stderr


def test_docs_list_every_setting_with_its_default() -> None:
    # one table (docs/configuration.md); docs/fleet.md points at it instead of keeping a copy
    assert "(configuration.md)" in (Path(REPO) / "docs" / "fleet.md").read_text()
    doc = (Path(REPO) / "docs" / "configuration.md").read_text()
    for s in SETTINGS:
        assert f"`{s.env}`" in doc, s.env
        if s.default:
            assert f"| `{s.env}` | `{s.default}` |" in doc, s.env
