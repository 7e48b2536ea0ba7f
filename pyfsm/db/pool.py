"""The pool (:class:`Database`): running pyfsm's procedures on pooled connections, and retrying.

Pool settings that matter for correctness:

* DBUtils' transparent failover is switched off (``isfatal`` always False). Left on, it
  re-executes a statement whose connection died, which for a write whose commit reached the
  server would apply the transition twice.
* Liveness is checked on checkout with ``connection.open``, a local flag PyMySQL clears
  when a socket fails, so no extra round trip is spent on a ping (:func:`is_alive`; a
  connection idle for a while, or to a member of a cluster, gets one).
* A connection goes back to the pool after a failure only when the server refused the call
  with one of pyfsm's own errors (31000-31999): the reply was read whole and the procedure's
  handlers ran (:func:`pyfsm.db.translation.keeps_connection`). Any other exception closes it
  (:func:`discard`): a reply read only in part (text that is not UTF-8, an interrupt) leaves
  the protocol out of step, and after a deadlock inside a trigger the server may end the
  CALL without running the procedure's handler, leaving its ``@fsm_*`` transition context
  set on the session.
* What is retried, and when, is :mod:`pyfsm.db.retrying`'s to say (:meth:`Database.run` and
  :meth:`Database.on_connection` ask it after each failure): a call that timed out never is;
  a deadlock, and a connection that failed before anything was sent, always are.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from dbutils.pooled_db import PooledDB
from pymysql.constants import SERVER_STATUS

from ..errors import DatabaseUnavailable, InvalidArgument, TransactionOpen
from . import queries
from .cluster import is_writer
from .connecting import name_servers, open_connection
from .driver import bounded, force_close, get_timeouts, raw_connection
from .driver import errors as pymysql_errors
from .marks import (
    mark_server,
    mark_timeout_bound,
    mark_used,
    mark_writer_checked,
    read_timeout_bound,
    read_used,
    read_writer_checked,
)
from .retrying import Retries
from .settings import CONNECT_TIMEOUT, Settings
from .translation import (
    cause,
    encoding_error,
    is_server_error,
    keeps_connection,
    lost_reply,
    timed_out,
    timeout_error,
    translate,
)

Row = dict[str, Any]
T = TypeVar("T")

#: A connection idle longer than this gets a real ping on checkout: the server may have
#: closed it (wait_timeout), which the client only learns on its next read. Read at each
#: checkout (a test may set it lower here, on pyfsm.db.pool).
IDLE_PING_SECONDS = 10.0
#: How often a pooled connection to a member of a cluster (a Galera node, a Group Replication
#: member) checks, on checkout, that its server is still the writer: the writer changes with
#: the cluster's membership (a new primary), and a connection left on the old one would write
#: through a second server, or (Group Replication) be refused by it (see
#: :func:`pyfsm.db.cluster.refuse_unless_writer`).
WRITER_RECHECK_SECONDS = 5.0
#: The session variables pyfsm's procedures set around a transition (the transition
#: context) and the history guard the triggers set; @fsm_lock_owner is a lock holder's own.
CONTEXT_VARIABLES = (
    "@fsm_event",
    "@fsm_metadata",
    "@fsm_handler",
    "@fsm_request_id",
    "@fsm_source",
    "@fsm_count_later",
    "@fsm_guard",
    "@fsm_upgrade",
)
CLEAR_CONTEXT_SQL = queries.sql("session_clear_context")


def is_alive(conn: Any) -> bool:
    """DBUtils' checkout check: free for busy connections, one ping for idle ones; on a
    connection to a member of a cluster (Galera, Group Replication), every few seconds,
    whether the server is still the writer (a connection on one that no longer is, is
    replaced through the DSN's servers)."""
    if not conn.open:
        return False
    checked = read_writer_checked(conn)
    if checked is not None and time.monotonic() - checked >= WRITER_RECHECK_SECONDS:
        try:
            with bounded(conn, conn.connect_timeout or CONNECT_TIMEOUT), conn.cursor() as cur:
                writer = is_writer(cur)
        except pymysql_errors.MySQLError:
            return False
        if not writer:
            # closed, not only reported: DBUtils hands out a connection it could not replace
            # (the reconnect failed) even after this check said no
            discard(conn)
            return False
        mark_writer_checked(conn, mark_used(conn))
        return True
    used = read_used(conn)
    if used is not None and time.monotonic() - used < IDLE_PING_SECONDS:
        return True
    try:
        with bounded(conn, conn.connect_timeout or CONNECT_TIMEOUT):  # a round trip: no call's wait is in it
            conn.ping(reconnect=False)
    except pymysql_errors.MySQLError:
        return False
    mark_used(conn)
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
            creator=_connect,
            maxconnections=pool_size,
            maxcached=pool_size,
            blocking=True,
            reset=False,
            ping=(1, is_alive),
            isfatal=_never_fatal,
            settings=settings,
        )

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection (autocommit, UTC, READ COMMITTED), returned to the pool after."""
        try:
            conn = self._pool.connection()
        except pymysql_errors.MySQLError as exc:
            err = translate(exc)
            raise err from cause(err, exc)
        try:
            yield conn
        except BaseException as exc:
            mark_server(exc, conn)
            if not keeps_connection(exc):
                discard(conn)
            if isinstance(exc, struct.error):
                raise lost_reply(exc, conn) from exc
            raise
        finally:
            conn.close()

    def run(
        self,
        sql: str,
        args: Sequence[Any],
        *,
        retry_connection: bool,
        writes: bool,
        on: Any = None,
        **context: Any,
    ) -> list[Row]:
        """Run one CALL and return the rows of its first result set, draining the rest.

        Every result set is drained so that an error raised after the first one (it arrives
        at nextset()) is reported here and not on the next, unrelated query.

        Failures are retried only where repeating cannot apply a change twice. A deadlock
        (1213, or 1020 on MariaDB 11.8: :data:`pyfsm.db.translation.DEADLOCKS`): the server
        has rolled the whole transaction back, so the call is made again, up to 3 times in
        all. No connection, or a socket found closed before sending: the
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
        retries: Retries | None = None  # made on the first failure: most calls never need one
        while True:
            try:
                if on is not None:
                    return _run_statement(on, sql, args, writes=writes, dedicated=True)
                return self._run_pooled(sql, args, writes=writes)
            except NotSent as failed:  # no connection: nothing reached the server, any call may retry
                err = failed.error
                if timed_out(err):
                    raise self.with_server(
                        timeout_error(err, sent=False, writes=writes, seconds=self.settings.read_timeout)
                    ) from failed
                retries = retries or Retries()
                retry = retries.next(err, sent=False, repeatable=retry_connection, deadlocks=False)
                if retry is None:
                    raise self.with_server(err) from cause(err, failed)
            except pymysql_errors.MySQLError as exc:
                err = translate(exc, **context)
                if timed_out(exc):
                    seconds = read_timeout_bound(exc)
                    raise self.with_server(timeout_error(err, sent=True, writes=writes, seconds=seconds)) from exc
                retries = retries or Retries()
                retry = retries.next(err, sent=True, repeatable=retry_connection, dedicated=on is not None)
                if retry is None:
                    raise self.with_server(err) from cause(err, exc)
            time.sleep(retry.seconds())

    def on_connection(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn`` on a raw pooled connection, retrying a transient connection failure (``fn``
        must be safe to repeat; a deadlock is its own to handle)."""
        retries = Retries()
        while True:
            try:
                with self.connection() as pooled:
                    return fn(raw_connection(pooled))
            except UnicodeError as exc:  # the connection was discarded by connection()
                raise encoding_error(exc) from exc
            except pymysql_errors.MySQLError as exc:
                err = translate(exc)
                if timed_out(exc):
                    seconds = read_timeout_bound(exc, self.settings.read_timeout)
                    raise self.with_server(timeout_error(err, sent=True, writes=False, seconds=seconds)) from exc
                retry = retries.next(err, sent=True, repeatable=True, deadlocks=False)
                if retry is None:
                    raise self.with_server(err) from cause(err, exc)
            except DatabaseUnavailable as err:
                if timed_out(err):
                    raise self.with_server(
                        timeout_error(err, sent=False, writes=False, seconds=self.settings.read_timeout)
                    ) from None
                retry = retries.next(err, sent=False, repeatable=True, deadlocks=False)
                if retry is None:
                    raise self.with_server(err) from None
            time.sleep(retry.seconds())

    def with_server(self, err: BaseException) -> BaseException:
        """An outage says which server is out, and what the driver saw (see :func:`name_servers`)."""
        if isinstance(err, DatabaseUnavailable):
            name_servers(err, self.settings)
        return err

    def _run_pooled(self, sql: str, args: Sequence[Any], *, writes: bool) -> list[Row]:
        try:
            pooled = self._pool.connection()
        except pymysql_errors.MySQLError as exc:  # no connection could be had: nothing was sent
            raise NotSent(translate(exc)) from exc
        try:
            return _run_statement(pooled, sql, args, writes=writes)
        finally:
            pooled.close()


def _run_statement(pooled: Any, sql: str, args: Sequence[Any], *, writes: bool, dedicated: bool = False) -> list[Row]:
    """Run one statement and drain its results; after a failure see :func:`keeps_connection`.

    ``dedicated``: a lock holder's connection, which cannot be replaced without losing its
    locks; after a server error it is kept but its transition context is cleared.
    """
    raw = raw_connection(pooled)
    if writes and raw.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS:
        raise TransactionOpen("this connection is inside a transaction; pyfsm's procedures commit their own")
    # PyMySQL's own cursor, not DBUtils' steady one: with failover off (isfatal) and no
    # maxusage, the steady cursor's wrapper around each method (execute, fetchall, each
    # nextset, close) decides nothing here, and it was a sixth of a call's client CPU
    # (bench/bench_layers.py). The checkout (liveness, the pool's bound) stays DBUtils'.
    cur = raw.cursor()
    try:
        cur.execute(sql, args)
        rows = _result_rows(cur)
        while cur.nextset():
            pass
        return rows
    except UnicodeEncodeError as exc:  # raised while encoding the request: nothing was sent
        raise encoding_error(exc) from exc
    except BaseException as exc:
        if timed_out(exc):  # which bound ran out, for the message (PyMySQL has closed the connection)
            read_bound, write_bound = get_timeouts(raw)
            mark_timeout_bound(exc, write_bound if exc.args and exc.args[0] == 2006 else read_bound)
        mark_server(exc, raw)
        if not keeps_connection(exc):
            if dedicated and is_server_error(exc):
                _clear_context(raw)
            else:
                discard(raw)
        if isinstance(exc, UnicodeError):
            raise encoding_error(exc) from exc
        if isinstance(exc, struct.error):
            raise lost_reply(exc, raw) from exc
        raise
    finally:
        cur.close()
        mark_used(raw)


def _clear_context(raw: Any) -> None:
    """Clear the transition context on a connection that must be kept (a lock holder's)."""
    try:
        with raw.cursor() as cur:
            cur.execute(CLEAR_CONTEXT_SQL)
    except Exception:  # it failed too: the connection cannot be trusted
        discard(raw)


def discard(conn: Any) -> None:
    """Close the socket so the pool replaces the connection instead of handing it out again.

    The pool checks ``open`` on checkout (see :func:`is_alive`) and reconnects; the socket
    is closed without a goodbye, since the protocol may be out of step.
    """
    with suppress(Exception):  # (also a connection whose pool was closed meanwhile)
        force_close(conn)


class NotSent(Exception):
    """A failure before anything was sent to the server (no connection could be had)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _result_rows(cur: Any) -> list[Row]:
    if cur.description is None:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
