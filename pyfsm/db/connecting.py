"""New connections: session setup, failover between the DSN's servers, creating the database.

* On MariaDB every session also runs with innodb_snapshot_isolation off
  (:data:`SNAPSHOT_ISOLATION_OFF`), as on 10.11 and MySQL: MariaDB 11.8 turns it on by default.
* Every session runs in UTC and READ COMMITTED (:data:`SESSION_SETUP`; set explicitly: the
  server default is REPEATABLE READ, whose gap locks deadlock unrelated instances). READ
  COMMITTED still takes InnoDB's duplicate-check locks on the history table's unique indexes,
  so two instances with neighbouring ids can rarely deadlock; the server then rolls the whole
  transaction back and :meth:`pyfsm.db.pool.Database.run` makes the call again.
* A DSN may name several servers (``mysql://u:p@h1:3306,h2:3306/db``). A new connection
  (the pool's, or :func:`connect`'s) goes to the first of them that accepts it and answers
  the session setup, starting from the one that answered last (see
  :meth:`pyfsm.db.settings.Settings.host_order`). The setup ends with ``DO 0``
  (:data:`READY_PROBE`), a statement a Galera node refuses (1047) until it is ready for
  use, so such a node is passed over like one that is down; so is a member of a cluster
  that is not its writer (:mod:`pyfsm.db.cluster`). Calls are never moved: a call whose
  connection died is retried (on a new connection, so on whichever server answers) only
  under the rules of :meth:`pyfsm.db.pool.Database.run`.
* An outage's message names the servers it is about (:func:`name_servers`).
* :func:`create_database` creates the DSN's database when the server has none of that name.
"""

from __future__ import annotations

import logging
import random
import time
from contextlib import suppress
from typing import Any

import pymysql

from ..errors import AccessDenied, DatabaseUnavailable, InvalidArgument, UnknownDatabase
from . import queries
from .cluster import refuse_unless_writer
from .driver import errors as pymysql_errors
from .driver import is_mariadb
from .hosts import where
from .marks import mark_named, mark_tried, mark_used, mark_writer_checked, read_named, read_server, read_tried
from .settings import Settings
from .translation import DEADLOCKS, cause, transient, translate

#: The logger of the package (documented: docs/python.md), on which :func:`create_database`
#: says that it created a database.
log = logging.getLogger("pyfsm.db")

#: Run first on every new connection: UTC, so that times read and written mean one thing
#: whatever the server's zone; READ COMMITTED, whatever the server's default (the module says why).
SESSION_SETUP = (queries.sql("session_time_zone"), queries.sql("session_read_committed"))
#: Run after SESSION_SETUP on every new connection: a Galera node that is not ready for use
#: (joining, or cut off from the primary component) still answers SET and table-less SELECTs
#: but refuses any other statement with 1047, and a server shutting down refuses it with
#: 1053; either way the next server of the DSN is tried. Elsewhere it does nothing.
READY_PROBE = queries.sql("session_ready_probe")
#: Run after SESSION_SETUP on MariaDB (1193 from one without the variable is ignored): see the
#: query's comment in sql/queries/connection.sql and docs/servers.md.
SNAPSHOT_ISOLATION_OFF = queries.sql("session_snapshot_isolation_off")
#: MariaDB's error for a system variable it does not have.
UNKNOWN_VARIABLE = 1193
#: MySQL 8's default sql_mode; MariaDB accepts it too. Routines keep the mode they were
#: created under, so DDL sessions use this strict one.
STRICT_SQL_MODE = (
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)
#: How often a new connection is made when its session setup hit a deadlock (see
#: :func:`_connect_to`).
SETUP_DEADLOCK_ATTEMPTS = 3
#: The pause (seconds, jittered by :func:`pause`) before that new connection: short, since
#: the retry needs only another server thread, not a conflicting transaction to end.
SETUP_DEADLOCK_PAUSE = 0.01
#: The character set and collation of a database pyfsm creates: those of its tables and
#: routines (text compared byte for byte), and so of any parameter that names none.
DATABASE_CHARSET = "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
#: The database names pyfsm creates: nothing that could end the quoted identifier.
DATABASE_NAME = queries.DATABASE_NAME
#: The driver's numbers for a new connection that reached no server: 2003, can't connect
#: (refused, unreachable, timed out; PyMySQL's for a host name that does not resolve too),
#: and 2005, unknown host (the C client's). Their message says what to try (:func:`name_servers`).
CANNOT_CONNECT = frozenset({2003, 2005})
#: What to try when no server answered a new connection (after "check that a MySQL server runs at ...").
CANNOT_CONNECT_ADVICE = (
    " and that this host can reach it, or point the DSN (--dsn or $PYFSM_DSN) at one that does "
    "(in pyfsm's own repository, `make mysql` starts the project's MySQL 9.7 on 127.0.0.1:3307)"
)


def connect(settings: Settings, *, database: bool = True, timeouts: bool = False) -> pymysql.connections.Connection:
    """One unpooled connection with pyfsm's session settings (for DDL and tools, and leases).

    Goes to the first of the DSN's servers that answers (:func:`open_connection`). Without
    ``timeouts`` it has no read or write bound: DDL (a migration's ALTER TABLE on a big
    table) takes as long as it takes. Leases ask for the bounds.
    """
    try:
        return open_connection(settings, database=database, timeouts=timeouts)
    except pymysql_errors.MySQLError as exc:
        err = translate(exc)
        if isinstance(err, DatabaseUnavailable):
            name_servers(err, settings)  # which of the servers were tried, what each said, and what to try
        if err is exc:
            raise
        raise err from cause(err, exc)


def snapshot_isolation_off(cur: Any) -> None:
    """Turn MariaDB's innodb_snapshot_isolation off for the session (:data:`SNAPSHOT_ISOLATION_OFF`);
    a MariaDB too old to have it has nothing to turn off."""
    try:
        cur.execute(SNAPSHOT_ISOLATION_OFF)
    except pymysql_errors.MySQLError as exc:
        if not (exc.args and exc.args[0] == UNKNOWN_VARIABLE):
            raise


def _connect_to(kwargs: dict[str, Any], settings: Settings) -> tuple[pymysql.connections.Connection, bool]:
    """A connection to the server ``kwargs`` name, its session set up; and whether it is a
    cluster member's (checked for being the writer: :func:`pyfsm.db.cluster.refuse_unless_writer`).

    A deadlock (1213) in the session setup is met again with a new connection, up to
    SETUP_DEADLOCK_ATTEMPTS in all: on a Galera node a new connection served by a cached
    server thread that a conflicting write set had aborted gets 1213 on its very first
    statement, and nothing of any call has been sent yet.
    """
    for attempt in range(1, SETUP_DEADLOCK_ATTEMPTS + 1):
        conn = pymysql.connect(**kwargs)
        try:
            with conn.cursor() as cur:
                for statement in SESSION_SETUP:
                    cur.execute(statement)
                if is_mariadb(conn):
                    snapshot_isolation_off(cur)
                cur.execute(READY_PROBE)
                return conn, settings.galera_writes == "one" and refuse_unless_writer(cur)
        except BaseException as exc:  # the connection died, timed out or was refused right after the handshake
            with suppress(Exception):
                conn.close()
            if not (
                isinstance(exc, pymysql_errors.MySQLError)
                and exc.args
                and exc.args[0] in DEADLOCKS
                and attempt < SETUP_DEADLOCK_ATTEMPTS
            ):
                raise
        pause(SETUP_DEADLOCK_PAUSE)
    raise AssertionError("unreachable: the last attempt returns or raises")


def open_connection(
    settings: Settings, *, database: bool = True, timeouts: bool = True
) -> pymysql.connections.Connection:
    """A new connection to the first of ``settings.host_order()`` that accepts it and answers
    the session setup (SESSION_SETUP, then READY_PROBE); that server is remembered.

    A server is passed over on a transient failure only (:data:`pyfsm.errors.TRANSIENT`:
    refused, unreachable, lost, timed out, shutting down, a Galera node not ready (1047),
    too many connections). Any other error (a refused login, LoginFailed; no such database,
    UnknownDatabase; a deadlock in the setup) is raised at once: another server of the same
    cluster would say the same, or the failure is not the server's. When every server
    failed, the last error is raised marked with the servers and what each said, in the order
    tried (:func:`pyfsm.db.marks.mark_tried`) (a refusal also carries it: its message names the server that refused).
    """
    kwargs = settings.connect_kwargs(database=database, timeouts=timeouts)
    order = settings.host_order()
    tried: list[tuple[str, str]] = []
    for n, (host, port) in enumerate(order, 1):
        try:
            conn, galera = _connect_to({**kwargs, "host": host, "port": port}, settings)
        except pymysql_errors.MySQLError as exc:
            tried.append((where(host, port), str(exc)))
            mark_tried(exc, tried)
            if not transient(translate(exc)):
                raise
            if n < len(order):
                continue
            settings.host_memory.forget(settings.hosts)  # none answered: next time from the first again
            # raised here, not after the loop: a raise outside this handler (inside DBUtils'
            # own) would replace the TimeoutError that timed_out() looks for in __context__
            raise
        settings.host_memory.remember(settings.hosts, (host, port))
        now = mark_used(conn)
        if galera:  # checked again on checkout every WRITER_RECHECK_SECONDS (pool.is_alive)
            mark_writer_checked(conn, now)
        return conn
    raise AssertionError("a DSN names at least one server")


def pause(delay: float) -> None:
    """Sleep about ``delay`` seconds (0.5 to 1.5 times it) before another attempt: jittered,
    so that clients that failed together do not all try again at the same instant."""
    time.sleep(delay * random.uniform(0.5, 1.5))


def name_servers(err: DatabaseUnavailable, settings: Settings) -> DatabaseUnavailable:
    """Say in an outage's message which server is out, and what the driver saw (never an
    empty message); once. ``err.fields["servers"]``: the servers it is about.

    The server is the failed connection's (:func:`pyfsm.db.marks.mark_server`); for a new
    connection, the ones tried (:func:`open_connection`): with several, "none of the MySQL
    servers h1:p1, h2:p2 answered" and what each said. Otherwise the server in use.
    errno 0 is PyMySQL finding its socket already closed (a pooled connection the server
    dropped, which DBUtils could not replace): reported as 2006, server gone away. A new
    connection that reached no server (:data:`CANNOT_CONNECT`) also says what to try: is a
    server running there, or should the DSN name another (:data:`CANNOT_CONNECT_ADVICE`).
    """
    if read_named(err):
        return err
    seen = str(err) or "the connection was closed"
    tried = read_tried(err)
    if len(tried) > 1:
        servers = [server for server, _ in tried]
        said = "; ".join(f"{server}: {text}" for server, text in tried)
        err.message = f"none of the MySQL servers {', '.join(servers)} answered ({said})"
        if seen != tried[-1][1]:  # rewritten, e.g. to say what a timeout means for the call
            err.message += f": {seen}"
    else:
        servers = [tried[0][0] if tried else read_server(err) or where(*settings.in_use)]
        err.message = f"the MySQL server at {servers[0]} is unavailable: {seen}"
    if tried and err.errno in CANNOT_CONNECT:
        where_to = servers[0] if len(servers) == 1 else f"one of {', '.join(servers)}"
        err.message += f": check that a MySQL server runs at {where_to}{CANNOT_CONNECT_ADVICE}"
    err.args = (err.message,)
    err.fields["servers"] = servers
    if err.errno == 0:
        err.errno = 2006
    mark_named(err)
    return err


def create_database_sql(name: str) -> str:
    """The statement that creates database ``name`` as pyfsm wants it (InvalidArgument for a
    name pyfsm does not create: see :data:`DATABASE_NAME`)."""
    if not isinstance(name, str) or not DATABASE_NAME.fullmatch(name):
        raise InvalidArgument(
            f"pyfsm creates a database only under a name of 1 to 64 letters, digits, _, $ and -, "
            f"got {name!r:.80}: create it yourself (CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)"
        )
    return queries.sql("create_database", database=name)


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
            except pymysql_errors.MySQLError as exc:
                err = translate(exc)
                if not isinstance(err, AccessDenied):
                    raise
                raise AccessDenied(
                    f"database `{settings.database}` does not exist and the account {settings.user!r} may not "
                    f"create it ({err}). As an account that may, run: {statement}; then migrate again",
                    errno=err.errno,
                ) from None
            cur.execute(queries.sql("show_warnings"))  # 1007: it exists (another process created it meanwhile)
            created = not any(row[1] == 1007 for row in cur.fetchall())
    finally:
        conn.close()
    if created:
        log.info(
            "pyfsm: created database `%s` (%s) on %s", settings.database, DATABASE_CHARSET, where(*settings.in_use)
        )
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
        "then migrate again",
        errno=err.errno,
    )
