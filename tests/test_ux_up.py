"""`cpfleet up` as an operator runs it: it keeps its queue and problems in a data folder by
default (Redis AOF) and says on Ctrl-C how many jobs were still queued; its terminal shows a
status block and progress lines, while Celery's and Flower's own output and the per-job log go
to files. Real processes, a real SIGINT."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from fleet_helpers import wait_until

from cpfleet.core import protocol
from cpfleet.fleet.local import queued_jobs
from cpfleet.fleet.processes import Stopped, alive, descendants, stop_on_signals
from cpfleet.fleet.redis_server import RedisServer, free_port

REPO = Path(__file__).resolve().parents[1]
SLOW = {
    "id": "ux/slow",
    "public_tests": [{"input": "1\n", "output": "1\n"}],
    "hidden_tests": [{"input": "2\n", "output": "2\n"}],
    "time_limit_s": 20,
}
SLEEPY = "```python\nimport time  # job {i}\ntime.sleep(1.5)\nprint(input())\n```"  # distinct: no dedupe


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cpfleet", "up", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip


def _status_block(proc: subprocess.Popen[str], timeout: float = 180) -> str:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("  stop"):
            return "".join(lines)
    proc.kill()
    raise AssertionError(f"cpfleet up did not come up: {''.join(lines)}\n{proc.stderr.read() if proc.stderr else ''}")


@pytest.mark.slow
def test_up_keeps_queue_and_problems_says_what_was_queued_and_keeps_its_noise_in_files(tmp_path: Path) -> None:
    from cpfleet.producer.client import FleetClient

    data = tmp_path / "data"
    proc = _start("--data-dir", str(data), "--workers", "1", "--flower-port", "-1", "--metrics-port", "0",
                  "--redis-port", str(free_port()))
    client = None
    try:
        block = _status_block(proc)
        url = re.search(r"redis\s+(redis://\S+)", block).group(1)  # type: ignore[union-attr]
        assert f"queue and problems kept in {data / 'redis'}" in block
        assert re.search(rf"logs\s+{re.escape(str(data / 'logs'))}\s+\(worker.log: one JSON line per job", block)
        loaded = subprocess.run([sys.executable, "-m", "cpfleet", "load", "-", "--redis", url], input="",
                                capture_output=True, text=True, timeout=60)  # `-` is no file: exit 2, no traceback
        assert "Traceback" not in loaded.stderr
        problems = tmp_path / "p.jsonl"
        problems.write_text(json.dumps(SLOW) + "\n")
        loaded = subprocess.run([sys.executable, "-m", "cpfleet", "load", str(problems), "--redis", url],
                                capture_output=True, text=True, timeout=60)
        assert loaded.returncode == 0, loaded.stderr
        client = FleetClient(url, timeout=600)
        futures = client.submit_many([{"problem_id": SLOW["id"], "completion": SLEEPY.format(i=i)} for i in range(12)])
        futures[0].result(timeout=120)  # one judged: a progress line is due, the rest still queued
        assert proc.stdout is not None
        progress: list[str] = []
        pattern = re.compile(r"\d\d:\d\d:\d\d\s+[\d.]+ jobs/s\s+queue \d+\s+done [1-9]\d*\s+OK [1-9]")
        deadline = time.monotonic() + 60
        while not (progress and pattern.match(progress[-1])) and time.monotonic() < deadline:
            progress.append(proc.stdout.readline())
        assert pattern.match(progress[-1]), progress
        started = descendants(proc.pid)
        proc.send_signal(2)  # SIGINT, as Ctrl-C
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    m = re.search(rf"cpfleet up: (\d+) jobs still queued, kept with the problem store in {re.escape(str(data / 'redis'))}", err)
    assert m, err
    left = int(m.group(1))
    assert 1 <= left <= 11
    wait_until(lambda: not alive(started), timeout=60, interval=0.1)  # a liveness wait, not a timing assertion
    assert alive(started) == {}
    # the terminal stays quiet: no Celery banner or superuser warning, no per-job JSON lines
    terminal = out + err
    for noise in ("-------------- ", "superuser", "Inspect method", '"job_id"', "Traceback"):
        assert noise not in terminal, noise
    worker_log = (data / "logs" / "worker.log").read_text()
    assert '"job_id"' in worker_log and "ready." in worker_log

    # the AOF holds the queue and the problem store: a Redis started on that folder has both
    with RedisServer(data_dir=str(data / "redis"), appendonly=True) as server:
        assert queued_jobs(server.url) == left
        r = redis.Redis.from_url(server.url)
        try:
            assert SLOW["id"].encode() in r.smembers(protocol.problem_index_key())
        finally:
            r.close()
    if client is not None:
        client.close()


def test_a_second_up_on_the_same_data_folder_is_refused(tmp_path: Path) -> None:
    import fcntl
    import os

    lock_dir = tmp_path / "data" / "redis"
    lock_dir.mkdir(parents=True)
    fd = os.open(lock_dir / "cpfleet-up.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a running `cpfleet up` holds it
    try:
        out = subprocess.run([sys.executable, "-m", "cpfleet", "up", "--data-dir", str(tmp_path / "data")],
                             capture_output=True, text=True, timeout=60, cwd=REPO)
    finally:
        os.close(fd)
    assert out.returncode == 2
    assert f"cpfleet up: another cpfleet up is using {lock_dir}; stop it, or pass --data-dir DIR or --ephemeral" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_data_folder_that_cannot_be_made_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = subprocess.run([sys.executable, "-m", "cpfleet", "up", "--data-dir", str(blocker / "data")],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert f"cpfleet up: error: argument --data-dir: {blocker / 'data'}: {blocker} is a file" in out.stderr


def test_the_stop_line_says_where_queued_jobs_went() -> None:
    from cpfleet.fleet.local import LocalFleet
    from cpfleet.fleet.up import Places, left_in_queue_line

    own = LocalFleet(flower_port=None, metrics_port=None)  # never started: redis_url None, as after stop()
    external = LocalFleet("redis://127.0.0.1:6390/0", flower_port=None, metrics_port=None)
    kept, memory = Places("/data/redis", "/data/logs"), Places(None, "/tmp/logs")
    assert left_in_queue_line(3, kept, own).startswith("3 jobs still queued, kept with the problem store in /data/redis")
    assert left_in_queue_line(3, memory, own) == "3 jobs still queued, dropped with the in-memory Redis (--ephemeral)"
    assert left_in_queue_line(3, memory, external) == "3 jobs still queued in redis://127.0.0.1:6390/0"
    assert left_in_queue_line(0, memory, own) == "no job was still queued"
    assert left_in_queue_line(None, kept, own).startswith("could not count")


@pytest.mark.parametrize("sig, raised", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Stopped)])
def test_a_stop_signal_during_a_progress_poll_is_raised_when_the_poll_ends(sig: int, raised: type) -> None:
    """A signal raised inside an import or class body reaches `up` as a RuntimeError (Python 3.11
    wraps it), so `up` polls under ``held()``: the signal waits for the poll to finish, then unwinds."""
    finished = []
    with pytest.raises(raised), stop_on_signals() as stop:
        with stop.held():
            os.kill(os.getpid(), sig)
            time.sleep(0.05)  # the handler has run by now, and raised nothing here

            @dataclasses.dataclass
            class Polled:  # a class body, where a raised signal would become a RuntimeError
                field: int = dataclasses.field(default=1)

            finished.append(Polled().field)
    assert finished == [1]
    assert signal.getsignal(sig) is not stop.handle  # the old handler is back


def test_a_stop_signal_inside_a_generic_exception_handler_still_unwinds() -> None:
    """SIGTERM lands wherever the main thread is, e.g. inside the fleet's start-up ping, retried
    under ``except Exception``: the stop must get through it, as Ctrl-C's KeyboardInterrupt does."""
    swallowed = []
    with pytest.raises(Stopped), stop_on_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before os.kill returns
        except Exception as e:  # the generic handler under test
            swallowed.append(e)
    assert swallowed == []


def test_a_picked_flower_port_taken_before_flower_binds_it_is_picked_again(tmp_path: Path) -> None:
    """LocalFleet picks Flower's port, and Flower binds it seconds later: another process's
    socket may take it in between (a loaded CI machine opens many connections). Flower then
    exits on the taken port and is started again on another one."""
    from fleet_helpers import port_held

    from cpfleet.fleet.local import LocalFleet
    from cpfleet.fleet.processes import http_get

    fleet = LocalFleet(workers=1, metrics_port=None, log_dir=str(tmp_path),
                       worker_env={"CPFLEET_REQUIRE_ISOLATION": "any"})
    taken = fleet.flower_port
    with port_held(taken):
        with fleet:
            assert fleet.flower_port != taken
            status, _ = http_get(f"{fleet.flower_url}/healthcheck", timeout=10)
            assert status == 200


def test_the_worker_binds_its_any_metrics_port_itself_so_no_pick_can_be_taken_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A port picked by LocalFleet and bound by the worker seconds later may be taken in between
    (another process's connection; or a server that answers, scraped in the worker's place). Every
    port LocalFleet could pick in advance is taken here: the worker binds port 0 itself and
    reports the port it got, so its /metrics is up and it is the worker's own."""
    from fleet_helpers import port_held

    from cpfleet.fleet import local as local_fleet
    from cpfleet.fleet.processes import http_get

    taken = free_port()
    monkeypatch.setattr(local_fleet, "free_port", lambda: taken)
    fleet = local_fleet.LocalFleet(workers=1, flower_port=None, metrics_port=0, log_dir=str(tmp_path),
                                   worker_env={"CPFLEET_REQUIRE_ISOLATION": "any"})
    with port_held(taken):
        try:
            fleet.start(timeout=60)
            assert fleet.metrics_port not in (None, 0, taken)
            status, body = http_get(str(fleet.metrics_url), timeout=10)
            assert status == 200 and b"cpfleet_" in body
        finally:
            fleet.stop()


# Run as the driver of a `cpfleet` command: the first class body's __set_name__ after the command
# installed its stop handlers (a StopSignals.handle) gets the signal, the window where Python 3.11
# wraps the raised KeyboardInterrupt/Stopped in a RuntimeError ("Error calling __set_name__").
# Start-up imports Celery, kombu and redis lazily, whose class bodies run such hooks.
SIGNAL_IN_A_CLASS_BODY = """
import os, signal, sys
sig = getattr(signal, sys.argv[1])
fired = []

def hook(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "__set_name__" and not fired:
        handler = signal.getsignal(signal.SIGINT)
        if type(getattr(handler, "__self__", None)).__name__ == "StopSignals":
            fired.append(frame.f_code.co_filename)
            sys.setprofile(None)
            os.kill(os.getpid(), sig)

sys.setprofile(hook)
from cpfleet.cli import main
status = main(sys.argv[2:])
print("signal sent in a class body of", fired, file=sys.stderr)
sys.exit(status)
"""


@pytest.mark.parametrize("command, sig, status, said", [
    (["up", "--ephemeral", "--redis-port", "0"], "SIGINT", 0, "cpfleet up: stopping (SIGINT)"),
    (["demo", "--jobs", "4"], "SIGTERM", 143, "cpfleet demo: stopping (SIGTERM)"),
])
def test_a_stop_signal_inside_a_lazy_import_during_start_up_stops_cleanly(
        tmp_path: Path, command: list[str], sig: str, status: int, said: str) -> None:
    """Ctrl-C (or SIGTERM) while `cpfleet up` or `demo` starts its fleet lands wherever the main
    thread is, often inside one of Celery's lazy imports: it must stop the fleet and say so in
    a line, never print a traceback."""
    args = [*command, "--workers", "1", "--flower-port", "-1", "--metrics-port", "-1", "--logs", str(tmp_path / "logs")]
    proc = subprocess.Popen([sys.executable, "-c", SIGNAL_IN_A_CLASS_BODY, sig, *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CPFLEET_REQUIRE_ISOLATION": "any"})
    try:
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "signal sent in a class body of ['" in err, err  # the hook found a class body to land in
    assert "Traceback" not in err and "RuntimeError" not in err, err
    assert said in err, err
    assert proc.returncode == status, err


def test_a_named_metrics_port_taken_before_the_worker_binds_it_fails_the_start_saying_why(tmp_path: Path) -> None:
    """A port the caller named never moves, so when another process takes it first the worker
    runs without /metrics: the start must fail at once with the bind's reason and the way out,
    not wait out its deadline and report a port that did not answer."""
    from fleet_helpers import port_held

    from cpfleet.core.errors import FleetError
    from cpfleet.fleet.local import LocalFleet

    port = free_port()
    fleet = LocalFleet(workers=1, flower_port=None, metrics_port=port, log_dir=str(tmp_path),
                       worker_env={"CPFLEET_REQUIRE_ISOLATION": "any"})
    with port_held(port), pytest.raises(FleetError) as caught:
        fleet.start(timeout=60)
    message = str(caught.value)
    assert f"worker could not serve its metrics on port {port} ([Errno 98] Address already in use)" in message
    assert "name another port, or 0 for any free one" in message
    assert fleet.worker is None  # the failed start stopped what it had started


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM", "worker killed"])
def test_up_ephemeral_removes_the_logs_folder_it_made_when_stopped_and_keeps_it_when_it_failed(
        tmp_path: Path, stop: str) -> None:
    """`up --ephemeral` without --logs makes a temporary logs folder: stopped as asked (Ctrl-C,
    SIGTERM) it removes that folder and leaves no folder of its own in the temporary directory
    and no process; when the fleet failed (its worker died) the folder is kept and named, since the
    error line points into it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cpfleet", "up", "--ephemeral", "--workers", "1", "--flower-port", "-1",
         "--metrics-port", "0", "--redis-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp), "CPFLEET_REQUIRE_ISOLATION": "any"},
    )  # fmt: skip
    try:
        block = _status_block(proc)
        m = re.search(r"logs\s+(\S+)\s+\(worker.log: one JSON line per job; flower.log; removed when up stops\)", block)
        assert m, block
        logs = Path(m.group(1))
        assert logs.parent == tmp and (logs / "worker.log").is_file()
        started = descendants(proc.pid)
        if stop == "worker killed":
            worker = next(pid for pid in started if "celery" in Path(f"/proc/{pid}/cmdline").read_text())
            os.kill(worker, signal.SIGKILL)
        else:
            proc.send_signal(signal.Signals[stop])
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_until(lambda: not alive(started), timeout=60, interval=0.1)  # a liveness wait, not a timing assertion
    assert alive(started) == {}
    assert "Traceback" not in err, err
    if stop == "worker killed":
        assert proc.returncode == 1, err
        assert f"cpfleet up: logs kept in {logs}" in err, err
        assert (logs / "worker.log").is_file()
    else:
        assert proc.returncode == 0, err
        # the workers' caches shared across runs (cpfleet-compile-UID, ...) are not up's to remove
        made = [p.name for p in tmp.iterdir() if p.name.startswith(("cpfleet-logs-", "cpfleet-metrics-port-"))]
        assert made == [], err


def test_up_ephemeral_keeps_its_logs_folder_when_up_itself_fails(tmp_path: Path) -> None:
    """A bug inside `up` (fault injection: building the fleet raises) is a failure, not a stop as
    asked: the temporary logs folder is kept and named, as when the fleet failed."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = (
        "import sys\n"
        "from cpfleet.fleet import up\n"
        "def broken(*args, **kwargs):\n"
        "    raise RuntimeError('a bug while building the fleet')\n"
        "up.fleet_from_args = broken\n"
        "from cpfleet.cli import main\n"
        "sys.exit(main(['up', '--ephemeral', '--workers', '1', '--flower-port', '-1', '--metrics-port', '-1',"
        " '--redis-port', '0']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(tmp)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, proc.stderr
    kept = [p for p in tmp.iterdir() if p.name.startswith("cpfleet-logs-")]
    assert len(kept) == 1 and f"logs kept in {kept[0]}" in proc.stderr, (proc.stderr, list(tmp.iterdir()))
