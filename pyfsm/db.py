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
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

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

    def connect_kwargs(self, *, database: bool = True) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "host": self.host, "port": self.port, "user": self.user, "password": self.password,
            "charset": "utf8mb4", "autocommit": True, "connect_timeout": self.connect_timeout,
        }
        if database and self.database:
            kwargs["database"] = self.database
        if self.tls:
            kwargs["ssl"] = {"check_hostname": True}
        else:
            # PyMySQL otherwise tries TLS on every connect (~80 ms against ~1.5 ms).
            kwargs["ssl_disabled"] = True
        return kwargs

    def with_database(self, database: str) -> Settings:
        return Settings(self.host, self.port, self.user, self.password, database, self.tls, self.connect_timeout)

    def dsn(self) -> str:
        auth = self.user + (f":{self.password}" if self.password else "")
        query = "?tls=true" if self.tls else ""
        return f"mysql://{auth}@{self.host}:{self.port}/{self.database}{query}"


def parse_dsn(dsn: str | None = None) -> Settings:
    """Parse ``mysql://user:password@host:port/database?tls=true``; default: $PYFSM_DSN."""
    dsn = dsn if dsn is not None else os.environ.get("PYFSM_DSN")
    if not dsn:
        raise InvalidArgument("no DSN given and PYFSM_DSN is not set (expected mysql://user:password@host:port/database)")
    parts = urlsplit(dsn)
    if parts.scheme not in ("mysql", "mariadb", "mysql+pymysql"):
        raise InvalidArgument(f"DSN must start with mysql://, got {parts.scheme!r}")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {"tls", "connect_timeout"}
    if unknown:
        raise InvalidArgument(f"unknown DSN options: {sorted(unknown)}")
    tls = query.get("tls", "false").lower()
    if tls not in ("true", "false", "1", "0"):
        raise InvalidArgument("DSN option tls must be true or false")
    try:
        port = parts.port or 3306
        timeout = float(query.get("connect_timeout", 5))
    except ValueError as exc:
        raise InvalidArgument(f"bad DSN: {exc}") from None
    return Settings(
        host=parts.hostname or "127.0.0.1", port=port, user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""), database=parts.path.lstrip("/"),
        tls=tls in ("true", "1"), connect_timeout=timeout,
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


def _is_open(conn: Any) -> bool:
    return bool(conn.open)


def _never_fatal(_error: BaseException) -> bool:
    return False


class Database:
    """A pool of PyMySQL connections and the helpers that run pyfsm's procedures."""

    def __init__(self, settings: Settings, *, pool_size: int = 8) -> None:
        if not 1 <= pool_size <= 1000:
            raise InvalidArgument("pool_size must be between 1 and 1000")
        self.settings = settings
        self._pool = PooledDB(
            creator=pymysql, maxconnections=pool_size, maxcached=pool_size, blocking=True,
            reset=False, ping=(1, _is_open), isfatal=_never_fatal, setsession=list(SESSION_SETUP),
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
        **context: Any,
    ) -> list[Row]:
        """Run one CALL and return the rows of its first result set, draining the rest.

        Every result set is drained so that an error raised after the first one (it arrives
        at nextset()) is reported here and not on the next, unrelated query.

        Two kinds of failure are retried, each only where repeating cannot apply a change
        twice. A deadlock (1213): the server has rolled the whole transaction back, so the
        call is made again, up to 3 times in all. A lost or refused connection, a few times
        within about a second, only with ``retry_connection``: for reads, and for writes
        carrying a request id, whose repeat returns the original transition.
        """
        connection_delays = [0.05, 0.15, 0.4, 0.6] if retry_connection else []
        deadlock_delays = [0.002, 0.008]
        while True:
            try:
                return self._call_once(sql, args, writes=writes)
            except pymysql.err.MySQLError as exc:
                err = translate(exc, **context)
                if isinstance(err, DatabaseUnavailable) and err.errno in TRANSIENT and connection_delays:
                    time.sleep(connection_delays.pop(0) * random.uniform(0.5, 1.5))
                    continue
                if isinstance(err, Deadlock) and err.errno == DEADLOCK and deadlock_delays:
                    time.sleep(deadlock_delays.pop(0) * random.uniform(0, 1))
                    continue
                raise err from exc

    def _call_once(self, sql: str, args: Sequence[Any], *, writes: bool) -> list[Row]:
        with self.connection() as conn:
            if writes and _raw(conn).server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS:
                raise TransactionOpen(
                    "this connection is inside a transaction; pyfsm's procedures commit their own")
            cur = conn.cursor()
            try:
                cur.execute(sql, args)
                rows = _rows(cur)
                while cur.nextset():
                    pass
                return rows
            finally:
                cur.close()


def _raw(pooled: Any) -> Any:
    """The PyMySQL connection inside DBUtils' wrappers."""
    return pooled._con._con


def _rows(cur: Any) -> list[Row]:
    if cur.description is None:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def call_sql(procedure: str, nargs: int) -> str:
    """``CALL `procedure`(%s, ...)`` for a procedure name pyfsm built and validated itself."""
    return f"CALL `{procedure}`({', '.join(['%s'] * nargs)})"
