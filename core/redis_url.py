"""The Redis URL rules, in one place: every entry point (the CLI commands, ``FleetClient``, the
trainer adapters, ``cpfleet serve``, the workers) parses its URL here at start, so a mistake is
one clear line naming the URL and the fix, never a traceback or a worker that retries forever
against a URL it misread (Celery reads ``127.0.0.1:6379`` as an AMQP broker).

Accepted forms::

    redis://[[user]:password@]host[:port][/db]          plain TCP (port 6379, db 0 by default)
    rediss://...                                         the same over TLS
    unix://[[user]:password@]/path/to/redis.sock[?db=N]  a Unix socket
    sentinel://[[user]:password@]host:port[,host:port...][/db]?master=NAME
                                                         Redis Sentinel: the current primary of
                                                         NAME, asked of these Sentinels (port
                                                         26379 by default); ``sentinel_password``
                                                         in the query authenticates to the
                                                         Sentinels themselves

kombu's own Sentinel spelling, ``sentinel://h1:p1;sentinel://h2:p2/db`` with the master name
in a ``master`` (or ``master_name``) query parameter, is read as the same thing.

This module only parses: the core imports no client library. ``producer.connection`` and
``workers.resources`` turn a ``RedisTarget`` into a redis-py client, kombu reads
``broker_url()`` and ``broker_transport_options()``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote

from cpfleet.core.errors import RedisUrlError

SCHEMES = ("redis", "rediss", "unix", "sentinel")
DEFAULT_PORT = 6379
DEFAULT_SENTINEL_PORT = 26379
FORMS = "redis://HOST:PORT/DB, rediss://..., unix:///PATH.sock or sentinel://HOST:PORT[,HOST:PORT]/DB?master=NAME"
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)$")


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """A checked Redis URL. ``url`` is the URL as given (what messages name, password masked by
    ``safe``); the other fields are what a connection needs."""

    url: str
    scheme: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    path: str = ""  # unix socket path
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str = ""
    sentinel_password: str | None = None

    @property
    def is_sentinel(self) -> bool:
        return self.scheme == "sentinel"

    @property
    def safe(self) -> str:
        """The URL with its password(s) masked, for messages and logs."""
        return mask_password(self.url)

    def broker_url(self) -> str:
        """The URL kombu's transport understands: itself, except Sentinel, which kombu spells as
        one ``sentinel://host:port/db`` per Sentinel joined by ``;`` (the master name travels in
        ``broker_transport_options``)."""
        if not self.is_sentinel:
            return self.url
        auth = ""
        if self.password is not None:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password, safe='')}@"
        return ";".join(f"sentinel://{auth}{_netloc(h, p)}/{self.db}" for h, p in self.sentinels)

    def broker_transport_options(self) -> dict[str, object]:
        """What kombu's Sentinel transport needs besides the URL (nothing for the others)."""
        if not self.is_sentinel:
            return {}
        options: dict[str, object] = {"master_name": self.master}
        if self.sentinel_password is not None:
            options["sentinel_kwargs"] = {"password": self.sentinel_password}
        return options


# With Sentinel, every job push and every reply push waits (WAIT 1, at most this long) until a
# replica has it: Redis replicates asynchronously, and Sentinel promotes the replica with the
# largest replication offset, so a write one replica acknowledged survives the primary's loss.
REPLICA_WAIT_MS = 1000
# After a WAIT that no replica answered (none is left, e.g. after a failover until the old
# primary comes back as a replica), pushes go out without waiting for this long, then one
# WAIT probes again: a fleet without a replica is not slowed by a second per push.
REPLICA_PROBE_S = 5.0


class ReplicaWait:
    """When to follow a push with ``WAIT 1 REPLICA_WAIT_MS`` (Sentinel URLs only): always
    while replicas confirm, and once per REPLICA_PROBE_S while none does. Not thread-safe by
    itself: each user keeps its own (a race only costs one extra or one skipped WAIT)."""

    __slots__ = ("enabled", "_skip_until")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._skip_until = 0.0

    def due(self, now: float) -> bool:
        """Whether the push made at ``now`` (monotonic seconds) should WAIT."""
        return self.enabled and now >= self._skip_until

    def record(self, acked: object, now: float) -> bool:
        """The WAIT's answer (replicas that confirmed); returns whether one did."""
        ok = isinstance(acked, int) and acked >= 1
        self._skip_until = 0.0 if ok else now + REPLICA_PROBE_S
        return ok


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def mask_password(url: str) -> str:
    """``url`` with anything between ``://`` and ``@`` past the first ``:`` replaced by ``***``."""
    return re.sub(r"(://[^:/@;]*:)[^@/;]*@", r"\1***@", url)


def _fail(url: str, why: str) -> RedisUrlError:
    return RedisUrlError(f"invalid Redis URL {mask_password(url)!r}: {why}")


def parse_redis_url(url: object, *, source: str = "") -> RedisTarget:
    """Check ``url`` and return its parts; raises ``RedisUrlError`` (a ValueError) with one line
    that names the URL, what is wrong and the form to use. ``source`` says where the URL came
    from (``"$CPFLEET_REDIS_URL"``), for the message."""
    try:
        return _parse(url)
    except RedisUrlError as exc:
        if source:
            raise RedisUrlError(f"{exc} (from {source})") from None
        raise


def _parse(url: object) -> RedisTarget:
    if not isinstance(url, str):
        raise RedisUrlError(f"invalid Redis URL: expected a string like {FORMS}, got {type(url).__name__}")
    text = url.strip()
    if not text:
        raise RedisUrlError(f"empty Redis URL: expected {FORMS}")
    if text != url or any(c.isspace() for c in text):
        raise _fail(url, "contains whitespace")
    if "://" not in text:
        hint = f"redis://{text}/0" if _looks_like_host_port(text) else "redis://HOST:PORT/DB"
        raise _fail(url, f"no scheme; write {hint} (accepted: {FORMS})")
    scheme, rest = text.split("://", 1)
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise _fail(url, f"unknown scheme {scheme + '://'!r}; accepted: {FORMS}")
    if scheme == "sentinel":
        return _parse_sentinel(url, rest)
    rest, query = _split_query(url, rest, strict=False)
    userinfo, at, hostpart = rest.rpartition("@")
    username, password = _userinfo(url, userinfo) if at else (None, None)
    db = _db(url, query.get("db"))
    if scheme == "unix":
        if not hostpart.startswith("/") or hostpart == "/":
            raise _fail(url, "a unix:// URL needs an absolute socket path, e.g. unix:///run/redis.sock")
        return RedisTarget(url=url, scheme=scheme, path=unquote(hostpart), db=db, username=username, password=password)
    hostport, slash, dbpart = hostpart.partition("/")
    if slash and dbpart:
        if "db" in query:
            raise _fail(url, "the database is given twice (path and ?db=)")
        db = _db(url, dbpart)
    host, port = _host_port(url, hostport or "127.0.0.1", DEFAULT_PORT)
    return RedisTarget(url=url, scheme=scheme, host=host, port=port, db=db, username=username, password=password)


def _parse_sentinel(url: str, rest: str) -> RedisTarget:
    # kombu's spelling repeats the scheme for each Sentinel, joined by ';'
    pieces = rest.split(";")
    for i, piece in enumerate(pieces[1:], 1):
        if not piece.lower().startswith("sentinel://"):
            raise _fail(url, "after ';' each Sentinel is written sentinel://HOST:PORT")
        pieces[i] = piece[len("sentinel://") :]
    query: dict[str, str] = {}
    path = ""
    hosts: list[tuple[str, int]] = []
    username = password = None
    for piece in pieces:
        piece, q = _split_query(url, piece)
        query.update(q)
        userinfo, at, hostpart = piece.rpartition("@")
        if at:
            username, password = _userinfo(url, userinfo)
        hostlist, slash, p = hostpart.partition("/")
        if slash and p:
            if path and p != path:
                raise _fail(url, "the Sentinels name different databases")
            path = p
        for item in hostlist.split(","):
            if not item:
                raise _fail(url, "an empty Sentinel address; write sentinel://HOST:PORT[,HOST:PORT...]/DB?master=NAME")
            hosts.append(_host_port(url, item, DEFAULT_SENTINEL_PORT))
    master = query.pop("master", "") or query.pop("master_name", "")
    if not master:
        raise _fail(url, "a sentinel:// URL needs the master's name: add ?master=NAME (the name in sentinel.conf)")
    db = _db(url, path or query.get("db"))
    sentinel_password = query.get("sentinel_password")
    return RedisTarget(
        url=url, scheme="sentinel", db=db, username=username, password=password,
        sentinels=tuple(hosts), master=master, sentinel_password=sentinel_password,
        host=hosts[0][0], port=hosts[0][1],
    )


_KNOWN_QUERY = {"db", "master", "master_name", "sentinel_password"}


def _split_query(url: str, rest: str, strict: bool = True) -> tuple[str, dict[str, str]]:
    """The part before ``?`` and the query's values. ``strict``: only the Sentinel parameters are
    allowed (a redis:// URL may carry redis-py's own connection parameters, which it reads)."""
    rest, _, query = rest.partition("?")
    parsed = parse_qs(query, keep_blank_values=True) if query else {}
    unknown = sorted(set(parsed) - _KNOWN_QUERY)
    if unknown and strict:
        raise _fail(url, f"unknown query parameter(s) {', '.join(unknown)} (known: {', '.join(sorted(_KNOWN_QUERY))})")
    return rest, {k: v[-1] for k, v in parsed.items()}


def _userinfo(url: str, userinfo: str) -> tuple[str | None, str | None]:
    user, colon, password = userinfo.partition(":")
    if not colon:  # redis://secret@host: redis-py reads a lone part as the password
        return None, unquote(user)
    return (unquote(user) or None), unquote(password)


def _db(url: str, text: str | None) -> int:
    if text is None or text == "":
        return 0
    if not text.isdigit():
        raise _fail(url, f"the database must be a number >= 0, got {text!r}")
    return int(text)


def _host_port(url: str, text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):  # [ipv6]:port
        host, _, after = text[1:].partition("]")
        port_text = after[1:] if after.startswith(":") else ""
        if after and not after.startswith(":"):
            raise _fail(url, f"cannot read host and port from {text!r}")
    else:
        host, colon, port_text = text.partition(":")
        if colon and not port_text:
            raise _fail(url, f"no port after ':' in {text!r}")
    if not host or not _HOST.match(host if not text.startswith("[") else f"[{host}]"):
        raise _fail(url, f"{host!r} is not a host name or address")
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise _fail(url, f"the port must be a number from 1 to 65535, got {port_text!r}")
        return host, int(port_text)
    return host, default_port


def _looks_like_host_port(text: str) -> bool:
    host, _, port = text.partition(":")
    return bool(host) and _HOST.match(host) is not None and (not port or port.split("/")[0].isdigit())


# What a redis-py error means for the person at the keyboard, and what to do about it. Matched
# on the class name and the server's words, since the core imports no client library.
_ASKS_PASSWORD = ("NOAUTH", "Authentication required", "HELLO must be called with the client already authenticated")
_WRONG_PASSWORD = ("WRONGPASS", "invalid username-password pair", "invalid password")
_REFUSED = ("Connection refused", "Error 111 ", "No such file or directory")
_NOT_REDIS = ("Connection closed by server", "Protocol Error", "protocol error")
# Connected, then nothing came back: a web UI (Flower waits for an HTTP request's end), a proxy
# or a listener that is not Redis. A Redis that is up answers a PING at once, even when loading.
_SILENT = ("Timeout reading from",)  # "... socket", or "... HOST:PORT" where redis-py names the peer


# A TLS handshake that failed or got no answer (the words of Python's ssl module, which redis-py
# keeps as the error's cause or context while saying only "Timeout connecting to server").
# A certificate the client refused is not among them: that server does speak TLS.
_TLS_FAILED = ("handshake operation timed out", "wrong version number", "WRONG_VERSION_NUMBER",
               "EOF occurred in violation of protocol", "UNEXPECTED_EOF", "record layer failure", "packet length too long")

PLAIN_NOT_TLS = ("the URL says rediss:// (TLS) but the server did not complete a TLS handshake: this Redis "
                 "probably speaks plain TCP; write redis://HOST:PORT/DB (or enable TLS on the server)")
TLS_NOT_PLAIN = "if that port is a TLS port (tls-port), the URL must say rediss:// instead of redis://"


def _chain_text(exc: BaseException) -> str:
    """The words of ``exc`` and of the errors it was raised from or during (a few levels)."""
    words, seen, e = [], 0, exc
    while e is not None and seen < 4:
        words.append(f"{type(e).__name__}: {e}")
        e, seen = e.__cause__ or e.__context__, seen + 1  # type: ignore[assignment]
    return " | ".join(words)


def connection_hint(exc: BaseException, target: RedisTarget | None = None) -> str:
    """The server's error, plus what to do about it when the cause is a usual one: a password
    missing from or wrong in the URL, nothing listening, something other than Redis on the port,
    TLS on one side only (``target``: the URL tried, whose scheme says whether TLS was spoken)."""
    text = str(exc).strip() or type(exc).__name__
    if target is not None and target.scheme == "rediss" and not any(s in text for s in _ASKS_PASSWORD + _WRONG_PASSWORD):
        if any(s in _chain_text(exc) for s in _TLS_FAILED) and not any(s in text for s in _REFUSED):
            return f"{text.rstrip('.')}: {PLAIN_NOT_TLS}"
    plain = target is not None and target.scheme == "redis"
    if any(s in text for s in _ASKS_PASSWORD):
        return ("this Redis requires a password: put it in the URL, redis://:PASSWORD@HOST:PORT/DB "
                "(or redis://USER:PASSWORD@... for an ACL user)")
    if type(exc).__name__ == "AuthenticationError" or any(s in text for s in _WRONG_PASSWORD):
        return f"Redis refused the user or password in the URL ({text.rstrip('.')}): check them"
    if any(s in text for s in _REFUSED):
        return (f"{text.rstrip('.')}: is Redis running there? `cpfleet up` starts one; "
                f"--redis URL or ${'CPFLEET_REDIS_URL'} points elsewhere")
    if any(s in text for s in _NOT_REDIS):
        return (f"{text.rstrip('.')}: the server on that port does not answer as Redis; check the port"
                + (f"; {TLS_NOT_PLAIN}" if plain else ""))
    if any(s in text for s in _SILENT):
        return (f"{text.rstrip('.')}: something accepts connections on that port but does not answer as Redis; "
                "check the port" + (f"; {TLS_NOT_PLAIN}" if plain else ""))
    if plain and "Connection reset by peer" in text:  # a TLS server drops a client that speaks plain RESP
        return f"{text.rstrip('.')}: the server dropped the connection; {TLS_NOT_PLAIN}"
    if "DB index is out of range" in text:
        return NO_SUCH_DB
    if "unknown command" in text.lower() and "sentinel" in text.lower():
        return NOT_A_SENTINEL
    return text


# A sentinel:// URL whose address is a Redis server, not a Sentinel: it answers every command but
# SENTINEL, so the raw error ("unknown command `SENTINEL`, with args beginning with: `MASTERS`")
# names no cause.
NOT_A_SENTINEL = ("the server at the URL's address is a Redis, not a Sentinel: a sentinel:// URL lists the "
                  "Sentinels' addresses (port 26379 by default); to use this Redis itself write redis://HOST:PORT/DB")


# A URL naming a database the server does not have: the server answers, so waiting (as a worker
# does for a Redis that is not up yet) never heals it; the worker refuses to start on it.
NO_SUCH_DB = ("this Redis has no database of the number in the URL (DB index is out of range): "
              "the /DB at the URL's end must be below the server's `databases` setting (16 by default: 0-15)")
