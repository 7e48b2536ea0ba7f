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
* Every socket read and write is bounded (PyMySQL's ``read_timeout`` / ``write_timeout``,
  see :class:`Settings`), so a stalled connection, or a server that accepts a connection
  but never sends its greeting, fails with DatabaseUnavailable instead of waiting forever.
  A call that timed out is not repeated by :meth:`Database.call`: it already waited its
  bound. PyMySQL closes the connection on a timeout, so the pool replaces it.
* A DSN may name several servers (``mysql://u:p@h1:3306,h2:3306/db``). A new connection
  (the pool's, or :func:`connect`'s) goes to the first of them that accepts it and answers
  the session setup, starting from the one that answered last (see :meth:`Settings.host_order`).
  The setup ends with ``DO 0``, a statement a Galera node refuses (1047) until it is ready
  for use, so such a node is passed over like one that is down. Calls are never moved:
  a call whose connection died is retried (on a new connection, so on whichever server
  answers) only under the rules of :meth:`Database.call`.
* A connection goes back to the pool after a failure only when the server refused the call
  with one of pyfsm's own errors (31000-31999): the reply was read whole and the procedure's
  handlers ran. Any other exception closes it (:func:`discard`): a reply read only in part
  (text that is not UTF-8, an interrupt) leaves the protocol out of step, and after a
  deadlock inside a trigger the server may end the CALL without running the procedure's
  handler, leaving its ``@fsm_*`` transition context set on the session.
* A refused login (LoginFailed, 1045) and a database the server does not have
  (UnknownDatabase, 1049) are the DSN's errors, not outages: never retried, never passed
  over to the next server, and raised without the driver's traceback (their message names
  the server, what it said and what to fix). :func:`create_database` creates a missing one.
"""

from __future__ import annotations

import logging
import math
import os
import random
import re
import ssl
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import pymysql
from dbutils.pooled_db import PooledDB
from pymysql.constants import SERVER_STATUS

from ..errors import (
    TRANSIENT,
    AccessDenied,
    DatabaseUnavailable,
    Deadlock,
    FsmError,
    InvalidArgument,
    InvalidEncoding,
    LoginFailed,
    NotWriterNode,
    TransactionOpen,
    UnknownDatabase,
    from_mysql_error,
)
from .hosts import DEFAULT_HOST, DEFAULT_PORT, Host, HostMemory, parse_hosts, where

DEADLOCK = 1213
log = logging.getLogger("pyfsm.db")

Row = dict[str, Any]
T = TypeVar("T")

SESSION_SETUP = (
    "SET time_zone = '+00:00'",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
)
#: Run after SESSION_SETUP on every new connection: a Galera node that is not ready for use
#: (joining, or cut off from the primary component) still answers SET and table-less SELECTs
#: but refuses any other statement with 1047, and a server shutting down refuses it with
#: 1053; either way the next server of the DSN is tried. Elsewhere it does nothing.
READY_PROBE = "DO 0"
#: MySQL 8's default sql_mode; MariaDB accepts it too. Routines keep the mode they were
#: created under, so DDL sessions use this strict one.
STRICT_SQL_MODE = (
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)


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


def check_timeout(name: str, value: Any) -> float:
    """``value`` as seconds if it is a finite number in (0, a year]; InvalidArgument otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) \
            or not 0 < value <= MAX_TIMEOUT:
        raise InvalidArgument(f"{name} must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, "
                              f"got {value!r:.80}")
    return float(value)


#: One server of a DSN: (host, port).
@dataclass(frozen=True)
class Settings:
    """Where and how to connect. Built from a DSN by :func:`parse_dsn`.

    ``connect_timeout`` bounds the TCP connect; ``read_timeout`` / ``write_timeout`` bound
    every socket read and write after it, the server's greeting included (defaults:
    :data:`READ_TIMEOUT`, :data:`WRITE_TIMEOUT`; keep ``read_timeout`` above the longest
    call you make, e.g. above the server's innodb_lock_wait_timeout if you raised it).

    ``galera_writes`` (DSN option): ``one`` (the default) connects only to the writer: a
    Galera cluster's writer node, or a Group Replication group's primary
    (:func:`refuse_unless_writer`); ``any`` turns the check off.

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
    connect_timeout: float = 5.0
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

    def connect_kwargs(self, *, database: bool = True, timeouts: bool = True,
                       server: Host | None = None) -> dict[str, Any]:
        """PyMySQL's keyword arguments. ``timeouts=False``: no read or write bound (DDL).

        ``server``: which one (default :attr:`in_use`). One plain ``pymysql.connect`` goes to
        that server only; :func:`connect` and the pool try the whole list.
        """
        host, port = server or self.in_use
        kwargs: dict[str, Any] = {
            "host": host, "port": port, "user": self.user, "password": self.password,
            "charset": "utf8mb4", "autocommit": True, "connect_timeout": self.connect_timeout,
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
        raise InvalidArgument("no DSN given and PYFSM_DSN is not set (expected mysql://user:password@host:port/database)")
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
    unknown = set(query) - {"tls", "tls_ca", "tls_verify", "connect_timeout", "read_timeout", "write_timeout",
                            "galera_writes"}
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
    for name, fallback in (("connect_timeout", 5.0), ("read_timeout", READ_TIMEOUT),
                           ("write_timeout", WRITE_TIMEOUT)):
        try:
            seconds = float(query.get(name, fallback))
        except ValueError:
            raise InvalidArgument(f"DSN option {name} must be a number of seconds, got {query[name]!r:.80}") from None
        timeouts[name] = check_timeout(f"DSN option {name}", seconds)
    return Settings(
        host=host, port=port, more_hosts=tuple(more), user=unquote(user or "root"),
        password=unquote(password or ""), database=parts.path.lstrip("/"),
        tls=flags["tls"], tls_ca=query.get("tls_ca"), tls_verify=flags["tls_verify"],
        connect_timeout=timeouts["connect_timeout"], read_timeout=timeouts["read_timeout"],
        write_timeout=timeouts["write_timeout"], galera_writes=galera_writes,
    )


def connect(settings: Settings, *, database: bool = True, timeouts: bool = False) -> pymysql.connections.Connection:
    """One unpooled connection with pyfsm's session settings (for DDL and tools, and leases).

    Goes to the first of the DSN's servers that answers (:func:`open_connection`). Without
    ``timeouts`` it has no read or write bound: DDL (a migration's ALTER TABLE on a big
    table) takes as long as it takes. Leases ask for the bounds.
    """
    try:
        return open_connection(settings, database=database, timeouts=timeouts)
    except pymysql.err.MySQLError as exc:
        err = translate(exc)
        if isinstance(err, DatabaseUnavailable) and len(settings.hosts) > 1:
            name_servers(err, settings)  # which of the servers were tried, and what each said
        if err is exc:
            raise
        raise err from _cause(err, exc)


#: How often a new connection is made when its session setup hit a deadlock (see
#: :func:`_connect_to`).
SETUP_DEADLOCK_ATTEMPTS = 3


def _connect_to(kwargs: dict[str, Any], settings: Settings) -> tuple[Any, bool]:
    """A connection to the server ``kwargs`` name, its session set up; and whether it is a
    Galera node's (checked for being the writer: :func:`refuse_unless_writer`).

    A deadlock (1213) in the session setup is met again with a new connection, up to
    SETUP_DEADLOCK_ATTEMPTS in all: on a Galera node a new connection served by a cached
    server thread that a conflicting write set had aborted gets 1213 on its very first
    statement, and nothing of any call has been sent yet.
    """
    for attempt in range(1, SETUP_DEADLOCK_ATTEMPTS + 1):
        conn = pymysql.connect(**kwargs)
        try:
            with conn.cursor() as cur:
                for statement in (*SESSION_SETUP, READY_PROBE):
                    cur.execute(statement)
                return conn, settings.galera_writes == "one" and refuse_unless_writer(cur)
        except BaseException as exc:  # the connection died, timed out or was refused right after the handshake
            with suppress(Exception):
                conn.close()
            if not (isinstance(exc, pymysql.err.MySQLError) and exc.args and exc.args[0] == DEADLOCK
                    and attempt < SETUP_DEADLOCK_ATTEMPTS):
                raise
        _pause(0.01)
    raise AssertionError("unreachable: the last attempt returns or raises")


def open_connection(settings: Settings, *, database: bool = True, timeouts: bool = True) -> Any:
    """A new connection to the first of ``settings.host_order()`` that accepts it and answers
    the session setup (SESSION_SETUP, then READY_PROBE); that server is remembered.

    A server is passed over on a transient failure only (:data:`pyfsm.errors.TRANSIENT`:
    refused, unreachable, lost, timed out, shutting down, a Galera node not ready (1047),
    too many connections). Any other error (a refused login, LoginFailed; no such database,
    UnknownDatabase; a deadlock in the setup) is raised at once: another server of the same
    cluster would say the same, or the failure is not the server's. When every server
    failed, the last error is raised with ``pyfsm_tried``, the servers and what each said,
    in the order tried (a refusal also carries it: its message names the server that refused).
    """
    kwargs = settings.connect_kwargs(database=database, timeouts=timeouts)
    order = settings.host_order()
    tried: list[tuple[str, str]] = []
    for n, (host, port) in enumerate(order, 1):
        try:
            conn, galera = _connect_to({**kwargs, "host": host, "port": port}, settings)
        except pymysql.err.MySQLError as exc:
            tried.append((where(host, port), str(exc)))
            exc.pyfsm_tried = list(tried)  # type: ignore[attr-defined]
            if not _transient(translate(exc)):
                raise
            if n < len(order):
                continue
            settings.host_memory.forget(settings.hosts)  # none answered: next time from the first again
            # raised here, not after the loop: a raise outside this handler (inside DBUtils'
            # own) would replace the TimeoutError that timed_out() looks for in __context__
            raise
        settings.host_memory.remember(settings.hosts, (host, port))
        conn.pyfsm_used = time.monotonic()
        if galera:  # checked again on checkout every WRITER_RECHECK_SECONDS (_is_alive)
            conn.pyfsm_writer_checked = conn.pyfsm_used
        return conn
    raise AssertionError("a DSN names at least one server")


#: Run on a new connection to a server whose greeting does not say MariaDB (MySQL and its
#: builds): whether it is a Galera node (wsrep_on) or configured as a Group Replication member
#: (group_replication_group_name, set only where the plugin is loaded), and super_read_only;
#: any account may run it. MariaDB is asked ``SHOW VARIABLES LIKE 'wsrep_on'`` alone (a
#: cheaper scan there; MariaDB has no Group Replication).
MYSQL_CLUSTER_VARIABLES = ("SHOW VARIABLES WHERE Variable_name IN "
                           "('wsrep_on', 'super_read_only', 'group_replication_group_name')")
#: Whether a Group Replication member is its group's writable primary: super_read_only (ON on
#: secondaries, on a new primary until it applied its backlog, on a member that left the
#: group), whether its own row says ONLINE and PRIMARY, and how many of the members it sees
#: are ONLINE (a primary cut off from the majority of its group cannot commit).
GROUP_PRIMARY_SQL = (
    "SELECT @@GLOBAL.super_read_only, "
    "COALESCE(MAX(MEMBER_ID = @@GLOBAL.server_uuid AND MEMBER_STATE = 'ONLINE' AND MEMBER_ROLE = 'PRIMARY'), 0), "
    "COALESCE(SUM(MEMBER_STATE = 'ONLINE'), 0), COUNT(*) FROM performance_schema.replication_group_members"
)
#: SELECT denied on a table: an account that may not read performance_schema.
_TABLE_ACCESS_DENIED = 1142


def refuse_unless_writer(cur: Any) -> bool:
    """On a member of a cluster that is not the member pyfsm writes through, raise 31025
    (NotWriterNode); whether the server is a member of a cluster (and so its writer).

    pyfsm writes through one server of a cluster at a time (docs/scaling.md). It knows two:

    * **Galera** (``wsrep_on`` ON): the writer is the node Galera lists first in the current
      view, ``wsrep_local_index`` 0 (through several nodes at once, locks and workers
      stalled the cluster). Every node of the primary component agrees on it, and when the
      membership changes (a node died or came back) there is a new one.
    * **MySQL Group Replication** (InnoDB Cluster; ``group_replication_group_name`` set): the
      writer is the group's primary, the member whose row of
      performance_schema.replication_group_members says ONLINE and PRIMARY, that sees a
      majority of its group ONLINE, and whose super_read_only is OFF (:data:`GROUP_PRIMARY_SQL`).
      A secondary, a member recovering or in error, and one configured for a group but not
      in it are passed over; a member with super_read_only ON is, without a second query. An
      account that may not read performance_schema (1142) is judged by super_read_only alone.

    Raised as a driver error, so that a new connection passes over this server to the next
    of the DSN's servers like over one not ready (1047). One query on any other server
    (MySQL and MariaDB without either answer wsrep_on OFF or nothing, and no group name); a
    second on a Galera node or a Group Replication member with super_read_only OFF. Which
    kind the server is stays on the connection (``pyfsm_cluster``) for :func:`is_writer`.
    """
    conn = cur.connection
    if "mariadb" in str(getattr(conn, "server_version", "") or "").lower():
        cur.execute("SHOW VARIABLES LIKE 'wsrep_on'")
    else:
        cur.execute(MYSQL_CLUSTER_VARIABLES)
    variables = {str(name).lower(): str(value or "") for name, value in cur.fetchall()}
    if variables.get("wsrep_on", "").upper() == "ON":
        conn.pyfsm_cluster = "galera"
        if not is_writer(cur):
            raise pymysql.err.OperationalError(
                NotWriterNode.errno, "this Galera node is not the cluster's writer node (wsrep_local_index 0): "
                                     "pyfsm writes through one node at a time; list every node in the DSN, or add "
                                     "galera_writes=any to write through any")
        return True
    if variables.get("group_replication_group_name"):
        conn.pyfsm_cluster = "group"
        if variables.get("super_read_only", "").upper() == "ON" or not is_writer(cur):
            raise pymysql.err.OperationalError(
                NotWriterNode.errno, "this MySQL Group Replication member is not its group's primary (ONLINE, "
                                     "PRIMARY, super_read_only OFF): pyfsm writes through the primary; list every "
                                     "member in the DSN, or connect through MySQL Router's read-write port")
        return True
    return False


def is_writer(cur: Any) -> bool:
    """Whether this server is still the writer of its cluster (see :func:`refuse_unless_writer`):
    a Galera node's ``wsrep_local_index`` 0, or a Group Replication member's being its group's
    primary. A connection not marked by refuse_unless_writer is taken for a Galera node's."""
    if getattr(cur.connection, "pyfsm_cluster", "galera") == "group":
        try:
            cur.execute(GROUP_PRIMARY_SQL)
        except pymysql.err.MySQLError as exc:
            if not exc.args or exc.args[0] != _TABLE_ACCESS_DENIED:
                raise
            cur.execute("SELECT @@GLOBAL.super_read_only")  # the account may not read performance_schema
            return not int(cur.fetchone()[0] or 0)
        read_only, primary, online, members = (int(v or 0) for v in cur.fetchone())
        return not read_only and primary == 1 and 2 * online > members
    cur.execute("SHOW STATUS LIKE 'wsrep_local_index'")
    row = cur.fetchone()
    return row is not None and str(row[1]) == "0"


def set_timeouts(conn: Any, read: float | None, write: float | None) -> tuple[float | None, float | None]:
    """Change a connection's read and write bounds; returns the old ones.

    PyMySQL has no public setter: it reads these two attributes before every socket read and
    write (``_read_packet``, ``_write_bytes``), so changing them applies from the next one.
    """
    raw = _raw(conn)
    old = (raw._read_timeout, raw._write_timeout)
    raw._read_timeout, raw._write_timeout = read, write
    return old


@contextmanager
def bounded(conn: Any, seconds: float) -> Iterator[None]:
    """Reads and writes on ``conn`` bounded by ``seconds`` (at most its own bounds) meanwhile."""
    raw = _raw(conn)
    read, write = raw._read_timeout, raw._write_timeout
    set_timeouts(raw, min(seconds, read or seconds), min(seconds, write or seconds))
    try:
        yield
    finally:
        set_timeouts(raw, read, write)


def timed_out(exc: BaseException | None) -> bool:
    """Whether a driver error (or the pyfsm error made of it) comes from a socket timeout.

    PyMySQL raises OperationalError 2013 (read) or 2006 (write) from inside its handler of
    the socket's TimeoutError, so the timeout is the error's ``__context__``; the number
    alone cannot tell a timeout from a cut connection.
    """
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, TimeoutError):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _timeout_error(err: BaseException, *, sent: bool, writes: bool, seconds: float | None) -> BaseException:
    """Say in ``err`` (a DatabaseUnavailable) what a timeout means for the call."""
    if not isinstance(err, DatabaseUnavailable):
        return err
    bound = f" within {seconds:g} s" if seconds else ""
    if not sent:
        what = f"the server accepted a connection but did not answer{bound} (read_timeout); nothing was sent"
    elif err.errno == 2006:
        what = f"the request could not be sent{bound} (write_timeout)"
    else:
        what = f"no reply{bound} (read_timeout): the connection is stalled or the server hangs"
    if sent and writes:
        what += "; the call may or may not have been applied (its outcome is unknown, as for a lost reply)"
    err.message = what
    err.args = (what,)
    err.fields["timed_out"] = True
    return err


def translate(exc: BaseException, **context: Any) -> BaseException:
    """The pyfsm error for a driver error, or the driver error itself if it has no pyfsm meaning.

    A refused login or an unknown database says where, and what to fix (:func:`_say_what_to_fix`).
    """
    if isinstance(exc, FsmError):
        return exc
    err = from_mysql_error(exc, **context)
    if err is None:
        return exc
    if isinstance(err, LoginFailed | UnknownDatabase):
        _say_what_to_fix(err, exc)
    return err


def _say_what_to_fix(err: LoginFailed | UnknownDatabase, exc: BaseException) -> None:
    """The message of a refusal of the DSN itself: the server that refused (the last one
    tried, :func:`open_connection`; the connection's, :func:`_tag_server`), what it said, and
    what to change. The server's text is kept whole; nothing is read from it."""
    tried: list[tuple[str, str]] = _found(exc, "pyfsm_tried") or []
    server = tried[-1][0] if tried else _found(exc, "pyfsm_server")
    at = f" at {server}" if server else ""
    said = err.message
    if isinstance(err, LoginFailed):
        err.message = (f"the MySQL server{at} refused the login ({said}): check the user name and password in the "
                       "DSN (--dsn or $PYFSM_DSN), and that this account may connect from this host")
    else:
        err.message = (f"the MySQL server{at} has no such database ({said}): check the database name in the DSN "
                       "(--dsn or $PYFSM_DSN), or create it: `pyfsm migrate` (or Store.migrate()) creates a "
                       "missing database when its account may")
    err.args = (err.message,)
    if server:
        err.fields["servers"] = [server]


def _cause(err: BaseException, exc: BaseException) -> BaseException | None:
    """What ``err`` is raised from: the driver's error, except under a refusal of the DSN
    (LoginFailed, UnknownDatabase), whose message says it all; there the driver's traceback
    is left out of what is printed (it stays in ``__context__``)."""
    return None if isinstance(err, LoginFailed | UnknownDatabase) else exc


#: The character set and collation of a database pyfsm creates: those of its tables and
#: routines (text compared byte for byte), and so of any parameter that names none.
DATABASE_CHARSET = "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
#: The database names pyfsm creates: nothing that could end the quoted identifier.
DATABASE_NAME = re.compile(r"[A-Za-z0-9_$-]{1,64}")


def create_database_sql(name: str) -> str:
    """The statement that creates database ``name`` as pyfsm wants it (InvalidArgument for a
    name pyfsm does not create: see :data:`DATABASE_NAME`)."""
    if not isinstance(name, str) or not DATABASE_NAME.fullmatch(name):
        raise InvalidArgument(f"pyfsm creates a database only under a name of 1 to 64 letters, digits, _, $ and -, "
                              f"got {name!r:.80}: create it yourself (CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)")
    return f"CREATE DATABASE IF NOT EXISTS `{name}` {DATABASE_CHARSET}"


def create_database(settings: Settings) -> bool:
    """Create the DSN's database if it does not exist (``CREATE DATABASE IF NOT EXISTS``,
    utf8mb4 / utf8mb4_bin); whether this call created it (False: it existed, or another
    process created it first). Logged on ``pyfsm.db``.

    An account that may not create it gets one AccessDenied (1044 or the server's number)
    naming the statement to run as one that may.
    """
    statement = create_database_sql(settings.database)
    conn = connect(settings, database=False, timeouts=True)
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(statement)
            except pymysql.err.MySQLError as exc:
                err = translate(exc)
                if not isinstance(err, AccessDenied):
                    raise
                raise AccessDenied(
                    f"database `{settings.database}` does not exist and the account {settings.user!r} may not "
                    f"create it ({err}). As an account that may, run: {statement}; then migrate again",
                    errno=err.errno) from None
            cur.execute("SHOW WARNINGS")  # 1007: it exists (another process created it meanwhile)
            created = not any(row[1] == 1007 for row in cur.fetchall())
    finally:
        conn.close()
    if created:
        log.info("pyfsm: created database `%s` (%s) on %s", settings.database, DATABASE_CHARSET,
                 where(*settings.in_use))
    return created


def connect_creating(settings: Settings) -> tuple[pymysql.connections.Connection, bool]:
    """:func:`connect` (unbounded, for DDL), creating the DSN's database first when the server
    has none of that name (:func:`create_database`); and whether it was created.

    What migrations use. An account that may not create the database, or that has no right
    on it at all (1044 at connect), gets one AccessDenied naming the statements to run.
    """
    try:
        return connect(settings), False
    except UnknownDatabase:
        pass  # created below, outside the handler: a failure there is not shown as one during this
    except AccessDenied as err:
        if err.errno != 1044:
            raise
        raise refused_database(err, settings) from None
    created = create_database(settings)
    return connect(settings), created


def refused_database(err: AccessDenied, settings: Settings) -> AccessDenied:
    """An AccessDenied at connect (1044: the account has no right at all on the DSN's
    database, which may also not exist; the server does not say which), saying what to do."""
    try:
        create = f"{create_database_sql(settings.database)}; (if it is missing) and "
    except InvalidArgument:
        create = ""
    return AccessDenied(
        f"{err}: the account {settings.user!r} has no right on database `{settings.database}`, or it does not "
        f"exist. As an account that may, run: {create}GRANT ALL ON `{settings.database}`.* TO the account; "
        "then migrate again", errno=err.errno)


def name_servers(err: DatabaseUnavailable, settings: Settings) -> DatabaseUnavailable:
    """Say in an outage's message which server is out, and what the driver saw (never an
    empty message); once. ``err.fields["servers"]``: the servers it is about.

    The server is the failed connection's (:func:`_tag_server`); for a new connection, the
    ones tried (``pyfsm_tried``, :func:`open_connection`): with several, "none of the MySQL
    servers h1:p1, h2:p2 answered" and what each said. Otherwise the server in use.
    errno 0 is PyMySQL finding its socket already closed (a pooled connection the server
    dropped, which DBUtils could not replace): reported as 2006, server gone away.
    """
    if getattr(err, "_named", False):
        return err
    seen = str(err) or "the connection was closed"
    tried: list[tuple[str, str]] = _found(err, "pyfsm_tried") or []
    if len(tried) > 1:
        servers = [server for server, _ in tried]
        said = "; ".join(f"{server}: {text}" for server, text in tried)
        err.message = f"none of the MySQL servers {', '.join(servers)} answered ({said})"
        if seen != tried[-1][1]:  # rewritten, e.g. to say what a timeout means for the call
            err.message += f": {seen}"
    else:
        servers = [tried[0][0] if tried else _found(err, "pyfsm_server") or where(*settings.in_use)]
        err.message = f"the MySQL server at {servers[0]} is unavailable: {seen}"
    err.args = (err.message,)
    err.fields["servers"] = servers
    if err.errno == 0:
        err.errno = 2006
    err._named = True  # type: ignore[attr-defined]
    return err


def _tag_server(exc: BaseException, conn: Any) -> None:
    """Mark a failure with the server of the connection it happened on (for :func:`name_servers`)."""
    with suppress(Exception):
        raw = _raw(conn)
        if not hasattr(exc, "pyfsm_server"):
            exc.pyfsm_server = where(raw.host, raw.port)  # type: ignore[attr-defined]


def _found(exc: BaseException | None, attribute: str) -> Any:
    """``attribute`` of ``exc`` or of the first exception it was made of that has it."""
    for _ in range(8):
        if exc is None:
            return None
        if hasattr(exc, attribute):
            return getattr(exc, attribute)
        exc = exc.__cause__ or exc.__context__
    return None


#: A connection idle longer than this gets a real ping on checkout: the server may have
#: closed it (wait_timeout), which the client only learns on its next read.
IDLE_PING_SECONDS = 10.0


#: How often a pooled connection to a member of a cluster (a Galera node, a Group Replication
#: member) checks, on checkout, that its server is still the writer: the writer changes with
#: the cluster's membership (a new primary), and a connection left on the old one would write
#: through a second server, or (Group Replication) be refused by it (see :func:`refuse_unless_writer`).
WRITER_RECHECK_SECONDS = 5.0


def _is_alive(conn: Any) -> bool:
    """DBUtils' checkout check: free for busy connections, one ping for idle ones; on a
    connection to a member of a cluster (Galera, Group Replication), every few seconds,
    whether the server is still the writer (a connection on one that no longer is, is
    replaced through the DSN's servers)."""
    if not conn.open:
        return False
    checked = getattr(conn, "pyfsm_writer_checked", None)
    if checked is not None and time.monotonic() - checked >= WRITER_RECHECK_SECONDS:
        try:
            with bounded(conn, conn.connect_timeout or 5.0), conn.cursor() as cur:
                writer = is_writer(cur)
        except pymysql.err.MySQLError:
            return False
        if not writer:
            # closed, not only reported: DBUtils hands out a connection it could not replace
            # (the reconnect failed) even after this check said no
            discard(conn)
            return False
        conn.pyfsm_writer_checked = conn.pyfsm_used = time.monotonic()
        return True
    used = getattr(conn, "pyfsm_used", None)
    if used is not None and time.monotonic() - used < IDLE_PING_SECONDS:
        return True
    try:
        with bounded(conn, conn.connect_timeout or 5.0):  # a round trip: no call's wait is in it
            conn.ping(reconnect=False)
    except pymysql.err.MySQLError:
        return False
    conn.pyfsm_used = time.monotonic()
    return True


def _connect(settings: Settings) -> Any:
    """The pool's creator, also when DBUtils replaces a dead connection: through the DSN's
    servers, session setup included (so a server that refuses it is passed over)."""
    return open_connection(settings)


def _never_fatal(_error: BaseException) -> bool:
    return False


class Database:
    """A pool of PyMySQL connections and the helpers that run pyfsm's procedures."""

    def __init__(self, settings: Settings, *, pool_size: int = 8) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or not 1 <= pool_size <= 1000:
            raise InvalidArgument(f"pool_size must be an integer from 1 to 1000, got {pool_size!r:.80}")
        self.settings = settings
        self._pool = PooledDB(
            creator=_connect, maxconnections=pool_size, maxcached=pool_size, blocking=True,
            reset=False, ping=(1, _is_alive), isfatal=_never_fatal, settings=settings,
        )

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection (autocommit, UTC, READ COMMITTED), returned to the pool after."""
        try:
            conn = self._pool.connection()
        except pymysql.err.MySQLError as exc:
            err = translate(exc)
            raise err from _cause(err, exc)
        try:
            yield conn
        except BaseException as exc:
            _tag_server(exc, conn)
            if not keeps_connection(exc):
                discard(conn)
            if isinstance(exc, struct.error):
                raise _lost_reply(exc, conn) from exc
            raise
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

        A socket timeout (``read_timeout`` / ``write_timeout``) is never retried, whatever
        the call: it already waited its bound. It is DatabaseUnavailable (2013 on a read,
        2006 on a write, retryable as a lost reply is) whose message says that a write's
        outcome is unknown, and ``fields["timed_out"]`` is True.
        """
        connection_delays = list(CONNECTION_RETRY_DELAYS)
        deadlock_delays = [0.002, 0.008]
        while True:
            try:
                if on is not None:
                    return _execute(on, sql, args, writes=writes, dedicated=True)
                return self._call_once(sql, args, writes=writes)
            except NotSent as failed:  # no connection: nothing reached the server, any call may retry
                err = failed.error
                if timed_out(err):
                    raise self.with_server(_timeout_error(err, sent=False, writes=writes,
                                                          seconds=self.settings.read_timeout)) from failed
                if _transient(err) and connection_delays:
                    _pause(connection_delays.pop(0))
                    continue
                raise self.with_server(err) from _cause(err, failed)
            except pymysql.err.MySQLError as exc:
                err = translate(exc, **context)
                if timed_out(exc):
                    seconds = getattr(exc, "pyfsm_timeout", None)
                    raise self.with_server(_timeout_error(err, sent=True, writes=writes, seconds=seconds)) from exc
                # errno 0: PyMySQL found the socket closed before sending, so the call never ran
                safe = on is None and (retry_connection or getattr(err, "errno", None) == 0)
                if _transient(err) and safe and connection_delays:
                    _pause(connection_delays.pop(0))
                    continue
                if isinstance(err, Deadlock) and err.errno == DEADLOCK and deadlock_delays:
                    time.sleep(deadlock_delays.pop(0) * random.uniform(0, 1))
                    continue
                raise self.with_server(err) from _cause(err, exc)

    def read(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn`` on a raw pooled connection, retrying a transient connection failure."""
        delays = list(CONNECTION_RETRY_DELAYS)
        while True:
            try:
                with self.connection() as pooled:
                    return fn(_raw(pooled))
            except UnicodeError as exc:  # the connection was discarded by connection()
                raise encoding_error(exc) from exc
            except pymysql.err.MySQLError as exc:
                err = translate(exc)
                if timed_out(exc):
                    seconds = getattr(exc, "pyfsm_timeout", self.settings.read_timeout)
                    raise self.with_server(_timeout_error(err, sent=True, writes=False, seconds=seconds)) from exc
                if not (_transient(err) and delays):
                    raise self.with_server(err) from _cause(err, exc)
            except DatabaseUnavailable as err:
                if timed_out(err):
                    raise self.with_server(_timeout_error(err, sent=False, writes=False,
                                                          seconds=self.settings.read_timeout)) from None
                if not (_transient(err) and delays):
                    raise self.with_server(err) from None
            _pause(delays.pop(0))

    def with_server(self, err: BaseException) -> BaseException:
        """An outage says which server is out, and what the driver saw (see :func:`name_servers`)."""
        if isinstance(err, DatabaseUnavailable):
            name_servers(err, self.settings)
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


def _execute(pooled: Any, sql: str, args: Sequence[Any], *, writes: bool, dedicated: bool = False) -> list[Row]:
    """Run one statement and drain its results; after a failure see :func:`keeps_connection`.

    ``dedicated``: a lock holder's connection, which cannot be replaced without losing its
    locks; after a server error it is kept but its transition context is cleared.
    """
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
    except UnicodeEncodeError as exc:  # raised while encoding the request: nothing was sent
        raise encoding_error(exc) from exc
    except BaseException as exc:
        if timed_out(exc):  # which bound ran out, for the message (PyMySQL has closed the connection)
            exc.pyfsm_timeout = raw._write_timeout if exc.args and exc.args[0] == 2006 else raw._read_timeout  # type: ignore[attr-defined]
        _tag_server(exc, raw)
        if not keeps_connection(exc):
            if dedicated and _server_error(exc):
                _clear_context(raw)
            else:
                discard(raw)
        if isinstance(exc, UnicodeError):
            raise encoding_error(exc) from exc
        if isinstance(exc, struct.error):
            raise _lost_reply(exc, raw) from exc
        raise
    finally:
        cur.close()
        raw.pyfsm_used = time.monotonic()


#: The session variables pyfsm's procedures set around a transition (the transition
#: context) and the history guard the triggers set; @fsm_lock_owner is a lock holder's own.
CONTEXT_VARIABLES = ("@fsm_event", "@fsm_metadata", "@fsm_handler", "@fsm_request_id", "@fsm_source",
                     "@fsm_count_later", "@fsm_guard")
CLEAR_CONTEXT_SQL = "SET " + ", ".join(f"{name} = NULL" for name in CONTEXT_VARIABLES)


def _lost_reply(exc: struct.error, conn: Any) -> pymysql.err.OperationalError:
    """A reply PyMySQL could not parse (seen from a Galera node whose applier aborted the call
    mid-reply) is lost, as with a cut connection (the caller has closed it): 2013, retried as one."""
    lost = pymysql.err.OperationalError(2013, f"Lost connection to MySQL server: its reply could not be read ({exc})")
    _tag_server(lost, conn)
    return lost


def keeps_connection(exc: BaseException) -> bool:
    """Whether a connection may be used again after ``exc``: only after one of pyfsm's own
    refusals (errno 31000-31999), which the server sends as a whole reply once the
    procedure's handlers have cleared the transition context."""
    errno = getattr(exc, "errno", None) if isinstance(exc, FsmError) else (
        exc.args[0] if isinstance(exc, pymysql.err.MySQLError) and exc.args else None)
    return isinstance(errno, int) and 31000 <= errno <= 31999


def _server_error(exc: BaseException) -> bool:
    """An error the server sent as a whole reply (an error packet), not a broken connection
    (PyMySQL's client errors are 0 and 2000-2999)."""
    errno = exc.args[0] if isinstance(exc, pymysql.err.MySQLError) and exc.args else None
    return isinstance(errno, int) and errno >= 1000 and not 2000 <= errno < 3000


def _clear_context(raw: Any) -> None:
    """Clear the transition context on a connection that must be kept (a lock holder's)."""
    try:
        with raw.cursor() as cur:
            cur.execute(CLEAR_CONTEXT_SQL)
    except Exception:  # it failed too: the connection cannot be trusted
        discard(raw)


def discard(conn: Any) -> None:
    """Close the socket so the pool replaces the connection instead of handing it out again.

    The pool checks ``open`` on checkout (see :func:`_is_alive`) and reconnects; the socket
    is closed without a goodbye, since the protocol may be out of step.
    """
    with suppress(Exception):  # (also a connection whose pool was closed meanwhile)
        _raw(conn)._force_close()


def encoding_error(exc: UnicodeError) -> InvalidEncoding:
    """The pyfsm error for text that is not valid UTF-8 on its way in or out."""
    if isinstance(exc, UnicodeEncodeError):
        return InvalidEncoding(f"an argument is not valid Unicode text (it holds a lone surrogate at position "
                               f"{exc.start}); nothing was sent")
    return InvalidEncoding("the server returned text that is not valid UTF-8 (for example an encoded surrogate, "
                           "bytes ED A0 80); it was written before pyfsm refused such text or by a client that "
                           "bypassed pyfsm's triggers. The connection was closed; find the row with "
                           "WHERE NOT fsm_valid_utf8_v1(col)")


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
