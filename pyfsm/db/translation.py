"""The one place driver errors become pyfsm errors, and what a failure means for the connection.

* :func:`translate`: the pyfsm error for a driver error (:func:`pyfsm.errors.from_mysql_error`).
* A refused login (LoginFailed, 1045) and a database the server does not have
  (UnknownDatabase, 1049) are the DSN's errors, not outages: never retried, never passed
  over to the next server, and raised without the driver's traceback (:func:`cause`; their
  message names the server, what it said and what to fix). A missing database is created by
  :func:`pyfsm.db.connecting.create_database`.
* Socket timeouts (:func:`timed_out`, :func:`timeout_error`), text that is not UTF-8
  (:func:`encoding_error`), a reply that could not be parsed (:func:`lost_reply`).
* Whether a connection may be used again after a failure (:func:`keeps_connection`) and
  whether a failure is worth another attempt (:func:`transient`).
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import (
    TRANSIENT,
    DatabaseUnavailable,
    FsmError,
    InvalidEncoding,
    LoginFailed,
    UnknownDatabase,
    from_mysql_error,
)
from .driver import errors as pymysql_errors
from .marks import CHAIN_DEPTH, mark_server, read_server, read_tried

#: The server's error numbers that mean the whole transaction was rolled back for meeting
#: another one, so that making the same call again cannot apply anything twice: a deadlock
#: (1213, ER_LOCK_DEADLOCK) and, on MariaDB 11.6 and later with innodb_snapshot_isolation on
#: (11.8's default), a write or locking read of a row another transaction changed after the
#: transaction's read view (1020, ER_CHECKREAD; under READ COMMITTED too, within a statement
#: whose trigger read first). pyfsm's own sessions turn snapshot isolation off
#: (connecting.SNAPSHOT_ISOLATION_OFF); a raw writer's transaction, whose triggers do pyfsm's
#: work in it, may meet it (docs/errors.md#deadlock).
DEADLOCKS = frozenset({1213, 1020})
#: The numbers of pyfsm's own errors, the refusals its procedures SIGNAL (pyfsm.errors): the
#: server sends them as a whole reply, after the procedure's handlers ran.
FSM_ERRNO_FIRST, FSM_ERRNO_LAST = 31000, 31999


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
    tried, :func:`pyfsm.db.connecting.open_connection`; the connection's,
    :func:`pyfsm.db.marks.mark_server`), what it said, and what to change. The server's text
    is kept whole; nothing is read from it."""
    tried = read_tried(exc)
    server = tried[-1][0] if tried else read_server(exc)
    at = f" at {server}" if server else ""
    said = err.message
    if isinstance(err, LoginFailed):
        err.message = (
            f"the MySQL server{at} refused the login ({said}): check the user name and password in the "
            "DSN (--dsn or $PYFSM_DSN), and that this account may connect from this host"
        )
    else:
        err.message = (
            f"the MySQL server{at} has no such database ({said}): check the database name in the DSN "
            "(--dsn or $PYFSM_DSN), or create it: `pyfsm migrate` (or Store.migrate()) creates a "
            "missing database when its account may"
        )
    err.args = (err.message,)
    if server:
        err.fields["servers"] = [server]


def cause(err: BaseException, exc: BaseException) -> BaseException | None:
    """What ``err`` is raised from: the driver's error, except under a refusal of the DSN
    (LoginFailed, UnknownDatabase), whose message says it all; there the driver's traceback
    is left out of what is printed (it stays in ``__context__``)."""
    return None if isinstance(err, LoginFailed | UnknownDatabase) else exc


def timed_out(exc: BaseException | None) -> bool:
    """Whether a driver error (or the pyfsm error made of it) comes from a socket timeout.

    PyMySQL raises OperationalError 2013 (read) or 2006 (write) from inside its handler of
    the socket's TimeoutError, so the timeout is the error's ``__context__``; the number
    alone cannot tell a timeout from a cut connection.
    """
    seen = 0
    while exc is not None and seen < CHAIN_DEPTH:
        if isinstance(exc, TimeoutError):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def timeout_error(err: BaseException, *, sent: bool, writes: bool, seconds: float | None) -> BaseException:
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


def encoding_error(exc: UnicodeError) -> InvalidEncoding:
    """The pyfsm error for text that is not valid UTF-8 on its way in or out."""
    if isinstance(exc, UnicodeEncodeError):
        return InvalidEncoding(
            f"an argument is not valid Unicode text (it holds a lone surrogate at position "
            f"{exc.start}); nothing was sent"
        )
    return InvalidEncoding(
        "the server returned text that is not valid UTF-8 (for example an encoded surrogate, "
        "bytes ED A0 80); it was written before pyfsm refused such text or by a client that "
        "bypassed pyfsm's triggers. The connection was closed; find the row with "
        "WHERE NOT fsm_valid_utf8_v1(col)"
    )


def lost_reply(exc: struct.error, conn: Any) -> pymysql_errors.OperationalError:
    """A reply PyMySQL could not parse (seen from a Galera node whose applier aborted the call
    mid-reply) is lost, as with a cut connection (the caller has closed it): 2013, retried as one."""
    lost = pymysql_errors.OperationalError(
        2013, f"Lost connection to MySQL server: its reply could not be read ({exc})"
    )
    mark_server(lost, conn)
    return lost


def keeps_connection(exc: BaseException) -> bool:
    """Whether a connection may be used again after ``exc``: only after one of pyfsm's own
    refusals (errno 31000-31999), which the server sends as a whole reply once the
    procedure's handlers have cleared the transition context."""
    errno = (
        getattr(exc, "errno", None)
        if isinstance(exc, FsmError)
        else (exc.args[0] if isinstance(exc, pymysql_errors.MySQLError) and exc.args else None)
    )
    return isinstance(errno, int) and FSM_ERRNO_FIRST <= errno <= FSM_ERRNO_LAST


def is_server_error(exc: BaseException) -> bool:
    """An error the server sent as a whole reply (an error packet), not a broken connection
    (PyMySQL's client errors are 0 and 2000-2999)."""
    errno = exc.args[0] if isinstance(exc, pymysql_errors.MySQLError) and exc.args else None
    return isinstance(errno, int) and errno >= 1000 and not 2000 <= errno < 3000


def transient(err: BaseException) -> bool:
    """Whether a failure is an outage worth another attempt (:data:`pyfsm.errors.TRANSIENT`:
    refused, unreachable, lost, timed out, shutting down, a Galera node not ready, too many
    connections, not the writer); any other error would come again."""
    return isinstance(err, DatabaseUnavailable) and err.errno in TRANSIENT
