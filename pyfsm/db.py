"""Connections: DSN parsing, the pool, and the one place driver errors become pyfsm errors.

Pool settings that matter for correctness:

* autocommit on: pyfsm's procedures run their own transactions, and ``START TRANSACTION``
  inside a procedure would silently commit whatever a caller had open.
* DBUtils' transparent failover is switched off (``isfatal`` always False). Left on, it
  re-executes a statement whose connection died, which for a write whose commit reached the
  server would apply the transition twice.
* Liveness is checked on checkout with ``connection.open``, a local flag PyMySQL clears
  when a socket fails, so no extra round trip is spent on a ping.
* Every session runs in UTC and READ COMMITTED (set explicitly: the server default is
  REPEATABLE READ, whose gap locks deadlock unrelated instances). READ COMMITTED still
  takes InnoDB's duplicate-check locks on the history table's unique indexes, so two
  instances with neighbouring ids can rarely deadlock; the server then rolls the whole
  transaction back and :meth:`Database.call` makes the call again.
"""

from __future__ import annotations

import os
import random
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import pymysql
from dbutils.pooled_db import PooledDB
from pymysql.constants import SERVER_STATUS

from .errors import (
    TRANSIENT,
    DatabaseUnavailable,
    Deadlock,
    FsmError,
    InvalidArgument,
    TransactionOpen,
    from_mysql_error,
)

DEADLOCK = 1213

Row = dict[str, Any]
T = TypeVar("T")

SESSION_SETUP = (
    "SET time_zone = '+00:00'",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
)
#: MySQL 8's default sql_mode; MariaDB accepts it too. Routines keep the mode they were
#: created under, so DDL sessions use this strict one.
STRICT_SQL_MODE = (
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)


@dataclass(frozen=True)
class Settings:
    """Where and how to connect. Built from a DSN by :func:`parse_dsn`."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    database: str = ""
    tls: bool = False
    connect_timeout: float = 5.0
    tls_ca: str | None = None
    tls_verify: bool = True

    def connect_kwargs(self, *, database: bool = True) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "host": self.host, "port": self.port, "user": self.user, "password": self.password,
            "charset": "utf8mb4", "autocommit": True, "connect_timeout": self.connect_timeout,
        }
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

    def dsn(self) -> str:
        auth = quote(self.user, safe="") + (f":{quote(self.password, safe='')}" if self.password else "")
        options = {"tls": "true"} if self.tls else {}
        if self.tls and self.tls_ca:
            options["tls_ca"] = self.tls_ca
        if self.tls and not self.tls_verify:
            options["tls_verify"] = "false"
        query = ("?" + urlencode(options)) if options else ""
        return f"mysql://{auth}@{self.host}:{self.port}/{self.database}{query}"


def parse_dsn(dsn: str | None = None) -> Settings:
    """Parse ``mysql://user:password@host:port/database``; default: $PYFSM_DSN.

    Options: ``tls=true`` (verify the server against the system CAs), ``tls_ca=/path/ca.pem``,
    ``tls_verify=false`` (encrypt without verifying: only on a network you trust),
    ``connect_timeout=5``.
    """
    dsn = dsn if dsn is not None else os.environ.get("PYFSM_DSN")
    if not dsn:
        raise InvalidArgument("no DSN given and PYFSM_DSN is not set (expected mysql://user:password@host:port/database)")
    parts = urlsplit(dsn)
    if parts.scheme not in ("mysql", "mariadb", "mysql+pymysql"):
        raise InvalidArgument(f"DSN must start with mysql://, got {parts.scheme!r}")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {"tls", "tls_ca", "tls_verify", "connect_timeout"}
    if unknown:
        raise InvalidArgument(f"unknown DSN options: {sorted(unknown)}")
    flags = {}
    for name, default in (("tls", "false"), ("tls_verify", "true")):
        value = query.get(name, default).lower()
        if value not in ("true", "false", "1", "0"):
            raise InvalidArgument(f"DSN option {name} must be true or false")
        flags[name] = value in ("true", "1")
    try:
        port = parts.port or 3306
        timeout = float(query.get("connect_timeout", 5))
    except ValueError as exc:
        raise InvalidArgument(f"bad DSN: {exc}") from None
    return Settings(
        host=parts.hostname or "127.0.0.1", port=port, user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""), database=parts.path.lstrip("/"),
        tls=flags["tls"], connect_timeout=timeout, tls_ca=query.get("tls_ca"), tls_verify=flags["tls_verify"],
    )


def connect(settings: Settings, *, database: bool = True) -> pymysql.connections.Connection:
    """One unpooled connection with pyfsm's session settings (for DDL and tools)."""
    try:
        conn = pymysql.connect(**settings.connect_kwargs(database=database))
    except pymysql.err.MySQLError as exc:
        raise translate(exc) from exc
    with conn.cursor() as cur:
        for statement in SESSION_SETUP:
            cur.execute(statement)
    return conn


def translate(exc: BaseException, **context: Any) -> BaseException:
    """The pyfsm error for a driver error, or the driver error itself if it has no pyfsm meaning."""
    if isinstance(exc, FsmError):
        return exc
    return from_mysql_error(exc, **context) or exc


#: A connection idle longer than this gets a real ping on checkout: the server may have
#: closed it (wait_timeout), which the client only learns on its next read.
IDLE_PING_SECONDS = 10.0


def _is_alive(conn: Any) -> bool:
    """DBUtils' checkout check: free for busy connections, one ping for idle ones."""
    if not conn.open:
        return False
    used = getattr(conn, "pyfsm_used", None)
    if used is not None and time.monotonic() - used < IDLE_PING_SECONDS:
        return True
    try:
        conn.ping(reconnect=False)
    except pymysql.err.MySQLError:
        return False
    conn.pyfsm_used = time.monotonic()
    return True


def _connect(**kwargs: Any) -> Any:
    conn = pymysql.connect(**kwargs)
    conn.pyfsm_used = time.monotonic()
    return conn


def _never_fatal(_error: BaseException) -> bool:
    return False


class Database:
    """A pool of PyMySQL connections and the helpers that run pyfsm's procedures."""

    def __init__(self, settings: Settings, *, pool_size: int = 8) -> None:
        if not 1 <= pool_size <= 1000:
            raise InvalidArgument("pool_size must be between 1 and 1000")
        self.settings = settings
        self._pool = PooledDB(
            creator=_connect, maxconnections=pool_size, maxcached=pool_size, blocking=True,
            reset=False, ping=(1, _is_alive), isfatal=_never_fatal, setsession=list(SESSION_SETUP),
            **settings.connect_kwargs(),
        )

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection (autocommit, UTC, READ COMMITTED), returned to the pool after."""
        try:
            conn = self._pool.connection()
        except pymysql.err.MySQLError as exc:
            raise translate(exc) from exc
        try:
            yield conn
        finally:
            conn.close()

    def call(
        self, sql: str, args: Sequence[Any], *, retry_connection: bool, writes: bool,
        on: Any = None, **context: Any,
    ) -> list[Row]:
        """Run one CALL and return the rows of its first result set, draining the rest.

        Every result set is drained so that an error raised after the first one (it arrives
        at nextset()) is reported here and not on the next, unrelated query.

        Failures are retried only where repeating cannot apply a change twice. A deadlock
        (1213): the server has rolled the whole transaction back, so the call is made again,
        up to 3 times in all. No connection, or a socket found closed before sending: the
        call never reached the server, so any call is retried, a few times within about a
        second. A connection lost while the call was under way: only with
        ``retry_connection``, for reads and for writes carrying a request id, whose repeat
        returns the original transition.

        ``on``: a connection to use instead of one from the pool (a lock holder's, see
        pyfsm.locks); a lost connection is never retried there, since another connection
        would not hold the locks.
        """
        connection_delays = list(CONNECTION_RETRY_DELAYS)
        deadlock_delays = [0.002, 0.008]
        while True:
            try:
                if on is not None:
                    return _execute(on, sql, args, writes=writes)
                return self._call_once(sql, args, writes=writes)
            except NotSent as failed:  # no connection: nothing reached the server, any call may retry
                err = failed.error
                if _transient(err) and connection_delays:
                    _pause(connection_delays.pop(0))
                    continue
                raise self.with_server(err) from failed
            except pymysql.err.MySQLError as exc:
                err = translate(exc, **context)
                # errno 0: PyMySQL found the socket closed before sending, so the call never ran
                safe = on is None and (retry_connection or getattr(err, "errno", None) == 0)
                if _transient(err) and safe and connection_delays:
                    _pause(connection_delays.pop(0))
                    continue
                if isinstance(err, Deadlock) and err.errno == DEADLOCK and deadlock_delays:
                    time.sleep(deadlock_delays.pop(0) * random.uniform(0, 1))
                    continue
                raise self.with_server(err) from exc

    def read(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn`` on a raw pooled connection, retrying a transient connection failure."""
        delays = list(CONNECTION_RETRY_DELAYS)
        while True:
            try:
                with self.connection() as pooled:
                    return fn(_raw(pooled))
            except pymysql.err.MySQLError as exc:
                err = translate(exc)
                if not (_transient(err) and delays):
                    raise self.with_server(err) from exc
            except DatabaseUnavailable as err:
                if not (_transient(err) and delays):
                    raise self.with_server(err) from None
            _pause(delays.pop(0))

    def with_server(self, err: BaseException) -> BaseException:
        """An outage says which server is out, and what the driver saw (never an empty message).

        errno 0 is PyMySQL finding its socket already closed (a pooled connection the server
        dropped, which DBUtils could not replace): reported as 2006, server gone away.
        """
        if isinstance(err, DatabaseUnavailable) and not getattr(err, "_named", False):
            seen = str(err) or "the connection was closed"
            where = f"{self.settings.host}:{self.settings.port}"
            err.message = f"the MySQL server at {where} is unavailable: {seen}"
            err.args = (err.message,)
            if err.errno == 0:
                err.errno = 2006
            err._named = True  # type: ignore[attr-defined]
        return err

    def _call_once(self, sql: str, args: Sequence[Any], *, writes: bool) -> list[Row]:
        try:
            pooled = self._pool.connection()
        except pymysql.err.MySQLError as exc:  # no connection could be had: nothing was sent
            raise NotSent(translate(exc)) from exc
        try:
            return _execute(pooled, sql, args, writes=writes)
        finally:
            pooled.close()


def _execute(pooled: Any, sql: str, args: Sequence[Any], *, writes: bool) -> list[Row]:
    raw = _raw(pooled)
    if writes and raw.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS:
        raise TransactionOpen("this connection is inside a transaction; pyfsm's procedures commit their own")
    cur = pooled.cursor()
    try:
        cur.execute(sql, args)
        rows = _rows(cur)
        while cur.nextset():
            pass
        return rows
    finally:
        cur.close()
        raw.pyfsm_used = time.monotonic()


#: Pauses between attempts after a connection failure: about a second in all.
CONNECTION_RETRY_DELAYS = (0.05, 0.15, 0.4, 0.6)


def _transient(err: BaseException) -> bool:
    return isinstance(err, DatabaseUnavailable) and err.errno in TRANSIENT


def _pause(delay: float) -> None:
    time.sleep(delay * random.uniform(0.5, 1.5))


class NotSent(Exception):
    """A failure before anything was sent to the server (no connection could be had)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _raw(pooled: Any) -> Any:
    """The PyMySQL connection inside DBUtils' wrappers (or the connection itself, unpooled)."""
    return pooled._con._con if hasattr(pooled, "_con") else pooled


def _rows(cur: Any) -> list[Row]:
    if cur.description is None:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def call_sql(procedure: str, nargs: int) -> str:
    """``CALL `procedure`(%s, ...)`` for a procedure name pyfsm built and validated itself."""
    return f"CALL `{procedure}`({', '.join(['%s'] * nargs)})"
