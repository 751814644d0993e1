"""Whether the Hugging Face Hub can be reached, asked once and quickly before a dataset is opened.

Without network, ``datasets.load_dataset`` retries each Hub request with back-off (a minute or
more where packets are dropped, not refused) before it fails, and even then a dataset in the
local cache is only used in offline mode. So ``cpfleet prepare`` probes the Hub's address with a
short TCP connect first; when that fails (or ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` is
set) it opens the dataset in offline mode: from the cache if it is there, else a clear error at
once. Behind a proxy (``HTTPS_PROXY`` ...) the probe is skipped: the proxy decides what is
reachable, not a direct connection.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 3.0
DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = ("1", "true", "yes", "on")
_PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy")


def endpoint() -> str:
    """The Hub's address as the libraries use it (``HF_ENDPOINT``, else huggingface.co)."""
    return os.environ.get("HF_ENDPOINT", "").strip() or DEFAULT_ENDPOINT


def offline_requested() -> bool:
    """Whether the user asked for offline mode (``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE``)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def unreachable(timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the Hub cannot be reached now (a name that does not resolve, a connection refused or
    timed out), or None when a TCP connection to it opens, or a proxy is set (not probed). The
    name lookup is bounded too: it runs on a daemon thread given ``timeout`` seconds."""
    if any(os.environ.get(v, "").strip() for v in _PROXIES):
        return None
    parts = urlsplit(endpoint())
    host = parts.hostname or ""
    port = parts.port or (80 if parts.scheme == "http" else 443)
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(str(exc) or type(exc).__name__)

    thread = threading.Thread(target=probe, name="cpfleet-hub-probe", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    if not outcome:
        return f"no answer from {host}:{port} within {timeout:g} s"
    why = outcome[0]
    return None if why is None else f"{host}:{port}: {why}"


@contextlib.contextmanager
def offline_mode() -> Iterator[None]:
    """The Hub libraries in offline mode for the block (cache only, no request, no retry): their
    switches are module constants read when they were imported, so they are set here and put
    back after, with the variable for anything imported inside the block."""
    import datasets.config
    import huggingface_hub.constants

    saved = (datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE, os.environ.get("HF_HUB_OFFLINE"))
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved[0], saved[1]
        if saved[2] is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved[2]
