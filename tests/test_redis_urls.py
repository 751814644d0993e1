"""Every entry point checks its Redis URL at start, by the one set of rules in
``cpfleet.core.redis_url``: each documented mistake is one clear line (naming the URL and the
fix) and a nonzero exit for a command, a ``RedisUrlError`` (a ValueError) for the Python API;
never a traceback, never a worker retrying forever against a URL it misread. Real processes:
the commands run as a user runs them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpfleet import FleetClient
from cpfleet.core.errors import RedisUrlError
from cpfleet.core.redis_url import parse_redis_url
from cpfleet.rewards import AsyncTRLReward, TRLReward, compute_score, compute_score_async, compute_score_batch

REPO = Path(__file__).resolve().parents[1]

# (the mistake, a piece of the one line that must explain it)
MISTAKES = [
    ("127.0.0.1:6379", "no scheme; write redis://127.0.0.1:6379/0"),
    ("localhost", "no scheme; write redis://localhost/0"),
    ("http://127.0.0.1:6379/0", "unknown scheme 'http://'"),
    ("amqp://guest@127.0.0.1//", "unknown scheme 'amqp://'"),
    ("redis://127.0.0.1:redis/0", "the port must be a number"),
    ("redis://127.0.0.1:70000/0", "the port must be a number"),
    ("redis://127.0.0.1:6379/zero", "the database must be a number"),
    ("sentinel://127.0.0.1:26379/0", "needs the master's name"),
    ("sentinel://127.0.0.1:26379,/0?master=m", "an empty Sentinel address"),
]
IDS = [m[0] for m in MISTAKES]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("inputs")
    problems = d / "problems.jsonl"
    problems.write_text(
        '{"id": "t/echo", "public_tests": [{"input": "1\\n", "output": "1\\n"}], '
        '"hidden_tests": [{"input": "2\\n", "output": "2\\n"}]}\n'
    )
    jobs = d / "jobs.jsonl"
    jobs.write_text('{"problem_id": "t/echo", "completion": "print(input())", "job_id": "j"}\n')
    program = d / "hello.py"
    program.write_text("print('hello')\n")
    return {"problems": problems, "jobs": jobs, "program": program}


def _commands(url: str, files: dict[str, Path]) -> dict[str, list[str]]:
    return {
        "load": ["load", str(files["problems"]), "--redis", url],
        "submit": ["submit", str(files["jobs"]), "--redis", url, "--no-progress"],
        "worker": ["worker", "--redis", url],
        "serve": ["serve", "--redis", url, "--port", "1"],
        "up": ["up", "--redis", url],
        "run": ["run", str(files["program"]), "--redis", url],
    }


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpfleet", *argv], cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})},
    )


def _one_clear_line(out: subprocess.CompletedProcess[str], url: str, needle: str, command: str) -> None:
    assert out.returncode not in (0, None), (command, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout, (command, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, (command, out.stderr)
    assert lines[0].startswith(f"cpfleet {command}: invalid Redis URL"), (command, lines[0])
    assert repr(url) in lines[0] and needle in lines[0], (command, lines[0])


@pytest.mark.parametrize(("url", "needle"), MISTAKES, ids=IDS)
def test_every_command_refuses_each_mistake_in_one_line(url: str, needle: str, files: dict[str, Path]) -> None:
    for command, argv in _commands(url, files).items():
        _one_clear_line(_run(argv), url, needle, command)


@pytest.mark.parametrize(("url", "needle"), MISTAKES[:3], ids=IDS[:3])
def test_a_mistake_in_cpfleet_redis_url_is_named_with_its_source(url: str, needle: str, files: dict[str, Path]) -> None:
    for command in ("load", "submit", "worker", "serve", "run"):
        argv = [command] + ([str(files["problems"])] if command == "load" else [])
        argv += [str(files["jobs"])] if command == "submit" else []
        argv += [str(files["program"])] if command == "run" else []
        out = _run(argv, env={"CPFLEET_REDIS_URL": url})
        _one_clear_line(out, url, needle, command)
        assert "(from $CPFLEET_REDIS_URL)" in out.stderr


def test_the_worker_no_longer_reads_a_bare_host_port_as_an_amqp_broker(files: dict[str, Path]) -> None:
    out = _run(["worker", "--redis", "127.0.0.1:6379", "--dry-run"])
    assert out.returncode == 2 and "amqp" not in out.stderr + out.stdout


@pytest.mark.parametrize(("url", "needle"), MISTAKES, ids=IDS)
def test_the_python_entry_points_raise_redis_url_error(url: str, needle: str) -> None:
    constructors = {
        "FleetClient": lambda: FleetClient(url),
        "TRLReward": lambda: TRLReward(url),
        "AsyncTRLReward": lambda: AsyncTRLReward(url),
        "compute_score": lambda: compute_score("d", "print(1)", "t/echo", redis_url=url),
        "compute_score_batch": lambda: compute_score_batch(["d"], ["print(1)"], ["t/echo"], redis_url=url),
        "compute_score_async": lambda: asyncio.run(compute_score_async("d", "print(1)", "t/echo", redis_url=url)),
    }
    for name, make in constructors.items():
        with pytest.raises(RedisUrlError) as info:
            make()
        assert isinstance(info.value, ValueError), name
        message = str(info.value)
        assert "\n" not in message and needle in message, (name, message)


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "redis://:secret@10.0.0.5:6380/2",
        "rediss://user:p%40ss@redis.example:6380/1",
        "unix:///run/redis.sock?db=3",
        "redis://[::1]:6379/0",
        "sentinel://10.0.0.1:26379,10.0.0.2:26379,10.0.0.3/0?master=cpfleet",
        "sentinel://10.0.0.1:26379;sentinel://10.0.0.2:26379/0?master_name=cpfleet",
    ],
)
def test_the_documented_forms_are_accepted(url: str) -> None:
    target = parse_redis_url(url)
    assert target.url == url
    if target.is_sentinel:
        assert target.master == "cpfleet" and len(target.sentinels) >= 2
        assert target.sentinels[-1][1] in (26379,)
        # kombu's spelling, with the master's name in the transport options
        assert target.broker_url().count("sentinel://") == len(target.sentinels)
        assert target.broker_transport_options()["master_name"] == "cpfleet"
    assert "secret" not in target.safe and "p%40ss" not in target.safe


def test_an_unreachable_redis_is_one_line_for_a_command(files: dict[str, Path]) -> None:
    from cpfleet.fleet.redis_server import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    for argv in (["load", str(files["problems"]), "--redis", url], ["serve", "--redis", url, "--port", "1"]):
        out = _run(argv)
        assert out.returncode not in (0, None) and "Traceback" not in out.stderr, out.stderr
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Redis" in lines[0] and url.split("//")[1].split("/")[0] in lines[0], out.stderr


def test_celery_and_flower_started_on_the_app_refuse_a_bad_url_in_one_line() -> None:
    url = "127.0.0.1:6379"
    for argv in (["-m", "celery", "-A", "cpfleet.workers.app", "worker"],
                 ["-m", "cpfleet.fleet.flower_launch", "-A", "cpfleet.workers.app", "flower"]):
        out = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "CPFLEET_REDIS_URL": url})
        assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "no scheme; write redis://127.0.0.1:6379/0" in lines[0], out.stderr
