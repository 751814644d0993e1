"""A Redis that is not as the user thinks, through the real CLI and the Python API: one that
wants a password the URL lacks, a wrong password, a port where something else answers, nothing
listening. Each command says what is wrong and what to do in one line, exit status 3, never
the password and never a traceback; ``cpfleet worker`` refuses a URL that cannot heal instead
of retrying it forever, and warns when a live node already has its name."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import redis
from fleet_helpers import FleetWorker, port_held, store_problems, wait_until

from cpfleet.core.errors import BrokerUnavailable
from cpfleet.fleet.redis_server import RedisServer, free_port
from cpfleet.producer.client import FleetClient

PASSWORD = "s3cret-pw"


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[int]:
    """A real redis-server that requires a password (set after start: the server's readiness probe is a bare PING)."""
    with RedisServer() as server:
        redis.Redis(port=server.port).config_set("requirepass", PASSWORD)
        yield server.port


@pytest.fixture(scope="module")
def not_redis() -> Iterator[int]:
    """An HTTP server on loopback: the user typed the port of something else."""

    class Quiet(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


def _files(tmp_path: Path) -> tuple[Path, Path]:
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"id": "t/a", "public_tests": [{"input": "1 2\n", "output": "3\n"}],
                                    "hidden_tests": [{"input": "5 7\n", "output": "12\n"}]}) + "\n")
    jobs = tmp_path / "j.jsonl"
    jobs.write_text(json.dumps({"problem_id": "t/a", "completion": "print(3)", "job_id": "j1"}) + "\n")
    return problems, jobs


def _commands(tmp_path: Path, url: str) -> list[list[str]]:
    problems, jobs = _files(tmp_path)
    program = tmp_path / "prog.py"
    program.write_text("print(1)\n")
    return [
        ["load", str(problems), "--redis", url],
        ["submit", str(jobs), "--redis", url, "--no-progress"],
        ["run", str(program), "--redis", url],
        ["serve", "--redis", url, "--port", str(free_port())],
        ["up", "--redis", url, "--workers", "1", "--flower-port", "-1", "--metrics-port", "-1"],
        ["worker", "--redis", url, "-c", "1"],
    ]


def _cli(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPFLEET_")}
    return subprocess.run([sys.executable, "-m", "cpfleet", *argv], env=env, capture_output=True, text=True, timeout=timeout)


def _assert_says(proc: subprocess.CompletedProcess[str], words: str) -> None:
    assert proc.returncode == 3, (proc.args, proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and PASSWORD not in proc.stderr and "wrong-pw" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "Redis" in ln]
    assert words in line, line


def test_every_command_says_the_url_lacks_the_password(locked_redis: int, tmp_path: Path) -> None:
    for argv in _commands(tmp_path, f"redis://127.0.0.1:{locked_redis}/0"):
        _assert_says(_cli(argv), "this Redis requires a password: put it in the URL, redis://:PASSWORD@HOST:PORT/DB")


def test_every_command_says_the_password_is_wrong_without_printing_it(locked_redis: int, tmp_path: Path) -> None:
    for argv in _commands(tmp_path, f"redis://:wrong-pw@127.0.0.1:{locked_redis}/0"):
        _assert_says(_cli(argv), "Redis refused the user or password in the URL")


def test_the_right_password_works(locked_redis: int, tmp_path: Path) -> None:
    problems, _ = _files(tmp_path)
    proc = _cli(["load", str(problems), "--redis", f"redis://:{PASSWORD}@127.0.0.1:{locked_redis}/0"])
    assert proc.returncode == 0 and proc.stdout.startswith("written 1"), proc.stderr


def test_a_port_where_something_else_answers_is_named(not_redis: int, tmp_path: Path) -> None:
    for argv in _commands(tmp_path, f"redis://127.0.0.1:{not_redis}/0")[:5]:
        _assert_says(_cli(argv), "does not answer as Redis; check the port")


class SilentPort:
    """A real listening socket that accepts every connection, reads what the client sends and
    never answers (Flower's port, a netcat): records, per connection, the seconds from its accept
    to the client's giving up on it (closing it)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.held_s: list[float] = []
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._open.append(conn)
            threading.Thread(target=self._drain, args=(conn, time.monotonic()), daemon=True).start()

    def _drain(self, conn: socket.socket, accepted: float) -> None:
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        self.held_s.append(time.monotonic() - accepted)

    def close(self) -> None:
        self._listener.close()
        for conn in self._open:
            conn.close()


def test_a_port_that_accepts_and_stays_silent_is_named_after_the_probe_not_waited_on(tmp_path: Path) -> None:
    """Flower's port, a proxy: the connection is accepted and nothing ever answers. Each command
    looks with the one probe (``connection.unreachable``, bounded at ``PROBE_TIMEOUT_S``, shorter
    than the command's own work would wait: ``load``'s writes minutes, ``submit``'s and ``run``'s
    client 10 s), names the port as not Redis in the same words, and gives the connection up.
    How long it waited is not asserted (no timing assertions on a shared machine)."""
    silent = SilentPort()
    try:
        for argv in _commands(tmp_path, f"redis://127.0.0.1:{silent.port}/0")[:5]:
            silent.held_s.clear()
            _assert_says(_cli(argv, timeout=60), "accepts connections on that port but does not answer as Redis")
            # the command gave its connection up (closed it) rather than leaving it hanging
            assert wait_until(lambda: bool(silent.held_s), timeout=10), argv[0]
    finally:
        silent.close()


@pytest.mark.parametrize("words", ["Timeout reading from socket", "Timeout reading from 127.0.0.1:6379"])
def test_a_silent_port_is_named_in_either_of_redis_pys_timeout_wordings(words: str) -> None:
    """redis-py raises the parser's "Timeout reading from socket" or, re-raised with the peer,
    "Timeout reading from HOST:PORT", depending on where in the read the timeout struck: the
    hint must not depend on which."""
    from cpfleet.core.redis_url import connection_hint

    hint = connection_hint(redis.exceptions.TimeoutError(words))
    assert hint.startswith(words) and "accepts connections on that port but does not answer as Redis" in hint, hint


def test_nothing_listening_says_how_to_get_a_redis(tmp_path: Path) -> None:
    for argv in _commands(tmp_path, f"redis://127.0.0.1:{free_port()}/0")[:5]:
        _assert_says(_cli(argv), "is Redis running there? `cpfleet up` starts one")


def test_a_sentinel_url_at_a_plain_redis_says_it_is_no_sentinel(redis_server: RedisServer, tmp_path: Path) -> None:
    """The raw answer was Redis's "unknown command `SENTINEL`, with args beginning with: `MASTERS`"."""
    url = f"sentinel://127.0.0.1:{redis_server.port}/0?master=mymaster"
    for argv in _commands(tmp_path, url)[:5]:
        _assert_says(_cli(argv), "is a Redis, not a Sentinel: a sentinel:// URL lists the Sentinels' addresses")


def test_the_python_client_says_the_same(locked_redis: int) -> None:
    with pytest.raises(BrokerUnavailable, match="requires a password: put it in the URL"):
        FleetClient(f"redis://127.0.0.1:{locked_redis}/0")
    with pytest.raises(BrokerUnavailable, match="refused the user or password") as caught:
        FleetClient(f"redis://:wrong-pw@127.0.0.1:{locked_redis}/0")
    assert "wrong-pw" not in str(caught.value)


def test_a_worker_started_before_its_redis_says_it_waits_and_keeps_waiting(tmp_path: Path) -> None:
    from cpfleet.workers.cli import preflight

    url = f"redis://127.0.0.1:{free_port()}/0"
    refusal, warnings = preflight(url, "n@h")
    assert refusal is None  # docker compose, a reboot: the Redis comes up after the node
    assert len(warnings) == 1 and "does not answer yet" in warnings[0] and "the worker waits for it" in warnings[0]


def test_a_second_worker_with_a_live_nodes_name_is_warned(redis_url: str, tmp_path: Path) -> None:
    from cpfleet.core import protocol
    from cpfleet.workers.cli import preflight

    store_problems(redis_url, "t/echo")
    node = FleetWorker(redis_url, tmp_path, concurrency=1).start()
    try:
        client = redis.Redis.from_url(redis_url)
        assert wait_until(lambda: any(f.decode().startswith(node.hostname + "/") for f in client.hkeys(protocol.nodes_key())), 30)
        refusal, warnings = preflight(redis_url, node.hostname)
        assert refusal is None
        assert len(warnings) == 1 and f"another live worker is named {node.hostname}" in warnings[0], warnings
        assert preflight(redis_url, f"other-{socket.gethostname()}@x") == (None, [])
    finally:
        node.stop(timeout=15)


def test_a_picked_port_taken_before_redis_binds_it_is_picked_again() -> None:
    """RedisServer() picks a free port, and redis-server binds it a moment later: another
    process's socket may take it in between (a loaded CI machine opens many connections). The
    server then comes up on another port; a port the caller named stays an error."""
    server = RedisServer()
    taken = server.port
    with port_held(taken):
        with server:
            assert server.port != taken
            assert redis.Redis.from_url(server.url).ping()
        named = RedisServer(port=taken)
        with pytest.raises(RuntimeError, match=f"could not bind port {taken}"):
            named.start()
        named.close()


@pytest.fixture(scope="module")
def tls_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A real TLS listener on loopback (a self-signed certificate), as a Redis tls-port is to a
    client that speaks plain RESP: its handshake fails on the client's first bytes and it drops
    the connection (this machine's redis-server is built without TLS)."""
    import ssl

    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(folder / "k.pem"),
                    "-out", str(folder / "c.pem"), "-days", "1", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(folder / "c.pem", folder / "k.pem")
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                ctx.wrap_socket(conn, server_side=True).close()
            except (OSError, ssl.SSLError):
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def test_a_rediss_url_at_a_plain_redis_says_the_server_speaks_no_tls(redis_server: RedisServer, tmp_path: Path) -> None:
    """The TLS handshake got no answer from a plain Redis, and all that was said was "Timeout
    connecting to server"."""
    url = f"rediss://127.0.0.1:{redis_server.port}/0"
    for argv in (_commands(tmp_path, url)[i] for i in (0, 2)):  # load, run
        _assert_says(_cli(argv), "the URL says rediss:// (TLS) but the server did not complete a TLS handshake")
    with pytest.raises(BrokerUnavailable, match="this Redis probably speaks plain TCP; write redis://"):
        FleetClient(url)
    from cpfleet.workers.cli import preflight

    refusal, _ = preflight(url, "n@h")  # a worker refuses it: waiting never heals a wrong scheme
    assert refusal is not None and "probably speaks plain TCP" in refusal


def test_a_redis_url_at_a_tls_port_says_the_url_may_need_rediss(tls_port: int, tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{tls_port}/0"
    for argv in (_commands(tmp_path, url)[i] for i in (0, 2)):  # load, run
        _assert_says(_cli(argv), "if that port is a TLS port (tls-port), the URL must say rediss:// instead of redis://")
    with pytest.raises(BrokerUnavailable, match="the URL must say rediss://"):
        FleetClient(url)
