"""A real TCP proxy in front of a redis-server that can drop a connection at a chosen moment:
the moment Redis sends the client a reply carrying a given marker (a job's wire id). It stands
for a network that dies after Redis has executed a pop but before the client has read its answer."""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to the upstream port; ``cut_on(marker)`` arms a one-shot cut."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._marker: bytes | None = None
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.cuts = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cut_on(self, marker: bytes) -> None:
        """Drop the next connection to which Redis sends bytes containing ``marker`` (once)."""
        with self._lock:
            self._marker = marker

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self._socks += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, from_server: bool) -> None:
        tail = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if from_server:
                    with self._lock:
                        marker = self._marker
                        hit = marker is not None and marker in tail + data
                        if hit:
                            self._marker = None
                            self.cuts += 1
                    if hit:
                        break  # the answer never reaches the client
                    tail = data[-256:]
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.close()
            except OSError:
                pass

    def __enter__(self) -> CuttingProxy:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
