"""Where and how to connect: :class:`Settings`, read from a DSN by :func:`parse_dsn`.

What every connection gets from its Settings (:meth:`Settings.connect_kwargs`):

* autocommit on: pyfsm's procedures run their own transactions, and ``START TRANSACTION``
  inside a procedure would silently commit whatever a caller had open.
* Every socket read and write is bounded (PyMySQL's ``read_timeout`` / ``write_timeout``,
  see :class:`Settings`), so a stalled connection, or a server that accepts a connection
  but never sends its greeting, fails with DatabaseUnavailable instead of waiting forever.
  A call that timed out is not repeated by :meth:`pyfsm.db.pool.Database.run`: it already
  waited its bound. PyMySQL closes the connection on a timeout, so the pool replaces it.
* A DSN may name several servers (``mysql://u:p@h1:3306,h2:3306/db``, parsed by
  :mod:`pyfsm.db.hosts`); :meth:`Settings.host_order` says in which order a new connection
  tries them (see :mod:`pyfsm.db.connecting`).
"""

from __future__ import annotations

import math
import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from ..errors import InvalidArgument
from .hosts import DEFAULT_HOST, DEFAULT_PORT, Host, HostMemory, parse_hosts, where

#: Default bound on one socket read (seconds). The longest legitimate wait in a call: a
#: row-lock wait, which InnoDB ends after innodb_lock_wait_timeout (50 s by default) with
#: 1205 (Deadlock); the relay's standby wait in GET_LOCK (at most 60 s); a reporting or list
#: query over a big table (seconds). pyfsm's procedures never wait in GET_LOCK (timeout 0).
#: 300 s is five times the longest of these, and still ends a hang.
READ_TIMEOUT = 300.0
#: Default bound on one socket write (seconds). A request is at most about 1.1 MB and the
#: server reads it as it arrives: a write blocks only when the server no longer reads.
WRITE_TIMEOUT = 60.0
#: The largest timeout accepted (PyMySQL's own limit for connect_timeout: a year).
MAX_TIMEOUT = 31536000.0
#: Default bound on the TCP connect (seconds): a server on a network that answers does so
#: within milliseconds; one that does not (down, or blackholed) costs this much before the
#: next of the DSN's servers is tried.
CONNECT_TIMEOUT = 5.0


def check_timeout(name: str, value: Any) -> float:
    """``value`` as seconds if it is a finite number in (0, a year]; InvalidArgument otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or not 0 < value <= MAX_TIMEOUT
    ):
        raise InvalidArgument(
            f"{name} must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, got {value!r:.80}"
        )
    return float(value)


@dataclass(frozen=True)
class Settings:
    """Where and how to connect. Built from a DSN by :func:`parse_dsn`.

    ``connect_timeout`` bounds the TCP connect; ``read_timeout`` / ``write_timeout`` bound
    every socket read and write after it, the server's greeting included (defaults:
    :data:`READ_TIMEOUT`, :data:`WRITE_TIMEOUT`; keep ``read_timeout`` above the longest
    call you make, e.g. above the server's innodb_lock_wait_timeout if you raised it).

    ``galera_writes`` (DSN option): ``one`` (the default) connects only to the writer: a
    Galera cluster's writer node, or a Group Replication group's primary
    (:func:`pyfsm.db.cluster.refuse_unless_writer`); ``any`` turns the check off.

    ``host`` and ``port`` are the DSN's first server, ``more_hosts`` the others in the DSN's
    order (:attr:`hosts` is all of them; :meth:`with_hosts` sets them). They are the
    configuration, so equal DSNs give equal Settings; the server in use is :attr:`in_use`,
    remembered in ``host_memory`` (shared by copies, never compared).
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    user: str = "root"
    password: str = field(default="", repr=False)
    database: str = ""
    tls: bool = False
    connect_timeout: float = CONNECT_TIMEOUT
    tls_ca: str | None = None
    tls_verify: bool = True
    read_timeout: float = READ_TIMEOUT
    write_timeout: float = WRITE_TIMEOUT
    more_hosts: tuple[Host, ...] = ()
    galera_writes: str = "one"
    host_memory: HostMemory = field(default_factory=HostMemory, compare=False, repr=False)

    @property
    def hosts(self) -> tuple[Host, ...]:
        """Every server of the DSN in the DSN's order, ``(host, port)`` first."""
        return ((self.host, self.port), *self.more_hosts)

    @property
    def in_use(self) -> Host:
        """The server new connections try first: the one that answered last, else the first."""
        return self.host_memory.get(self.hosts) or (self.host, self.port)

    def host_order(self) -> tuple[Host, ...]:
        """The servers in the order a new connection tries them.

        Sticky: the one that answered last comes first, then the others in the DSN's order.
        A first server that is down (or blackholed: a whole connect_timeout) thus costs one
        failed attempt, not one per new connection. Only when the sticky one fails is the
        list tried from its start again; a server that comes back is not preferred over the
        one in use while that one answers.
        """
        hosts = self.hosts
        last = self.host_memory.get(hosts)
        if last is None or last == hosts[0]:
            return hosts
        return (last, *(h for h in hosts if h != last))

    def with_hosts(self, hosts: Sequence[Host]) -> Settings:
        """These settings with other servers (tried in this order), checked (InvalidArgument)."""
        checked = parse_hosts(",".join(where(str(h), p) for h, p in hosts)) if hosts else ()
        if not checked:
            raise InvalidArgument("with_hosts needs at least one (host, port)")
        (host, port), *more = checked
        return replace(self, host=host, port=port, more_hosts=tuple(more))

    def connect_kwargs(
        self, *, database: bool = True, timeouts: bool = True, server: Host | None = None
    ) -> dict[str, Any]:
        """PyMySQL's keyword arguments. ``timeouts=False``: no read or write bound (DDL).

        ``server``: which one (default :attr:`in_use`). One plain ``pymysql.connect`` goes to
        that server only; :func:`pyfsm.db.connecting.connect` and the pool try the whole list.
        """
        host, port = server or self.in_use
        kwargs: dict[str, Any] = {
            "host": host,
            "port": port,
            "user": self.user,
            "password": self.password,
            "charset": "utf8mb4",
            "autocommit": True,
            "connect_timeout": self.connect_timeout,
        }
        if timeouts:
            kwargs["read_timeout"], kwargs["write_timeout"] = self.read_timeout, self.write_timeout
        if database and self.database:
            kwargs["database"] = self.database
        if self.tls:
            kwargs["ssl"] = self.tls_context()
        else:
            # PyMySQL otherwise tries TLS on every connect (~80 ms against ~1.5 ms).
            kwargs["ssl_disabled"] = True
        return kwargs

    def tls_context(self) -> ssl.SSLContext:
        """Verify the server's certificate and name (system CAs or ``tls_ca``) unless told not to."""
        ctx = ssl.create_default_context(cafile=self.tls_ca)
        if not self.tls_verify:  # encrypted but open to impersonation: only by explicit choice
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def with_database(self, database: str) -> Settings:
        return replace(self, database=database)

    def with_timeouts(self, *, read_timeout: Any = None, write_timeout: Any = None) -> Settings:
        """These settings with the given timeouts (None: keep), checked (InvalidArgument)."""
        read = self.read_timeout if read_timeout is None else check_timeout("read_timeout", read_timeout)
        write = self.write_timeout if write_timeout is None else check_timeout("write_timeout", write_timeout)
        return replace(self, read_timeout=read, write_timeout=write)

    def dsn(self) -> str:
        auth = quote(self.user, safe="") + (f":{quote(self.password, safe='')}" if self.password else "")
        options = {"tls": "true"} if self.tls else {}
        if self.tls and self.tls_ca:
            options["tls_ca"] = self.tls_ca
        if self.tls and not self.tls_verify:
            options["tls_verify"] = "false"
        if self.read_timeout != READ_TIMEOUT:
            options["read_timeout"] = repr(self.read_timeout)
        if self.galera_writes != "one":
            options["galera_writes"] = self.galera_writes
        if self.write_timeout != WRITE_TIMEOUT:
            options["write_timeout"] = repr(self.write_timeout)
        query = ("?" + urlencode(options)) if options else ""
        servers = ",".join(where(host, port) for host, port in self.hosts)
        return f"mysql://{auth}@{servers}/{self.database}{query}"


def parse_dsn(dsn: str | None = None) -> Settings:
    """Parse ``mysql://user:password@host:port/database``; default: $PYFSM_DSN.

    Several servers, tried in order (see :meth:`Settings.host_order`):
    ``mysql://user:password@h1:3306,h2:3306,h3/database`` (see :func:`parse_hosts`).

    Options: ``tls=true`` (verify the server against the system CAs), ``tls_ca=/path/ca.pem``,
    ``tls_verify=false`` (encrypt without verifying: only on a network you trust),
    ``connect_timeout=5``, ``read_timeout=300``, ``write_timeout=60`` (seconds, see
    :class:`Settings`). Anything malformed raises InvalidArgument.
    """
    dsn = dsn if dsn is not None else os.environ.get("PYFSM_DSN")
    if dsn is not None and not isinstance(dsn, str):
        raise InvalidArgument(f"the DSN must be a string, got {type(dsn).__name__}")
    if not dsn:
        raise InvalidArgument(
            "no DSN given and PYFSM_DSN is not set (expected mysql://user:password@host:port/database)"
        )
    try:
        parts = urlsplit(dsn)
        user, password = parts.username, parts.password
    except ValueError as exc:  # an unclosed [IPv6 bracket, ...
        raise InvalidArgument(f"bad DSN: {exc}") from None
    if parts.scheme not in ("mysql", "mariadb", "mysql+pymysql"):
        raise InvalidArgument(f"DSN must start with mysql://, got {parts.scheme!r}")
    # urlsplit reads one host:port only; the list after the userinfo is parsed here
    (host, port), *more = parse_hosts(parts.netloc.rpartition("@")[2])
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {
        "tls",
        "tls_ca",
        "tls_verify",
        "connect_timeout",
        "read_timeout",
        "write_timeout",
        "galera_writes",
    }
    if unknown:
        raise InvalidArgument(f"unknown DSN options: {sorted(unknown)}")
    galera_writes = query.get("galera_writes", "one")
    if galera_writes not in ("one", "any"):
        raise InvalidArgument(f"DSN option galera_writes must be one or any, got {galera_writes!r:.40}")
    flags = {}
    for name, default in (("tls", "false"), ("tls_verify", "true")):
        value = query.get(name, default).lower()
        if value not in ("true", "false", "1", "0"):
            raise InvalidArgument(f"DSN option {name} must be true or false")
        flags[name] = value in ("true", "1")
    timeouts: dict[str, float] = {}
    for name, fallback in (
        ("connect_timeout", CONNECT_TIMEOUT),
        ("read_timeout", READ_TIMEOUT),
        ("write_timeout", WRITE_TIMEOUT),
    ):
        try:
            seconds = float(query.get(name, fallback))
        except ValueError:
            raise InvalidArgument(f"DSN option {name} must be a number of seconds, got {query[name]!r:.80}") from None
        timeouts[name] = check_timeout(f"DSN option {name}", seconds)
    return Settings(
        host=host,
        port=port,
        more_hosts=tuple(more),
        user=unquote(user or "root"),
        password=unquote(password or ""),
        database=parts.path.lstrip("/"),
        tls=flags["tls"],
        tls_ca=query.get("tls_ca"),
        tls_verify=flags["tls_verify"],
        connect_timeout=timeouts["connect_timeout"],
        read_timeout=timeouts["read_timeout"],
        write_timeout=timeouts["write_timeout"],
        galera_writes=galera_writes,
    )
