"""The only place pyfsm reaches into PyMySQL's and DBUtils' private attributes.

Each reach is one small function below, saying why there is no public way. Nothing else in
pyfsm touches an attribute of theirs whose name starts with ``_``: when a new release of
either renames one, this module is the one to change.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

#: PyMySQL's error classes, as its connections raise them. Read from sys.modules, never as the
#: attribute ``pymysql.err``: an application that installs PyMySQL as MySQLdb for Django
#: (``pymysql.install_as_MySQLdb()``) gets a second copy of that module when Django imports
#: ``MySQLdb.err``, and the import sets ``pymysql.err`` to the copy, whose classes no
#: connection raises: ``except pymysql.err.MySQLError`` would then catch nothing.
__all__ = ["errors"]

if TYPE_CHECKING:
    import pymysql.err as errors
else:
    errors = importlib.import_module("pymysql.err")


def is_mariadb(conn: Any) -> bool:
    """Whether a PyMySQL connection's server is MariaDB (its handshake's version string says so)."""
    return "mariadb" in str(getattr(conn, "server_version", "") or "").lower()


def raw_connection(pooled: Any) -> Any:
    """The PyMySQL connection inside DBUtils' wrappers (or the connection itself, unpooled).

    DBUtils' pooled connection forwards attribute reads to its steady connection, which
    forwards them to PyMySQL's, but no attribute write: the socket bounds
    (:func:`set_timeouts`) and pyfsm's marks (:mod:`pyfsm.db.marks`) must be set on PyMySQL's
    connection itself. DBUtils 3.2 has a public ``dbapi_connection`` on the steady connection,
    but pyfsm supports DBUtils 3.1, which has none: so the wrappers' ``_con`` (pooled ->
    steady -> PyMySQL) it is.
    """
    return pooled._con._con if hasattr(pooled, "_con") else pooled


def get_timeouts(conn: Any) -> tuple[float | None, float | None]:
    """A connection's current (read, write) bounds on one socket read and write, in seconds.

    PyMySQL takes them as ``connect(read_timeout=, write_timeout=)`` and keeps them in private
    attributes only; it has no public getter.
    """
    raw = raw_connection(conn)
    return raw._read_timeout, raw._write_timeout


def set_timeouts(conn: Any, read: float | None, write: float | None) -> tuple[float | None, float | None]:
    """Change a connection's read and write bounds; returns the old ones.

    PyMySQL has no public setter: it reads these two attributes before every socket read and
    write (``_read_packet``, ``_write_bytes``), so changing them applies from the next one.
    """
    raw = raw_connection(conn)
    old = (raw._read_timeout, raw._write_timeout)
    raw._read_timeout, raw._write_timeout = read, write
    return old


@contextmanager
def bounded(conn: Any, seconds: float) -> Iterator[None]:
    """Reads and writes on ``conn`` bounded by ``seconds`` (at most its own bounds) meanwhile."""
    raw = raw_connection(conn)
    read, write = get_timeouts(raw)
    set_timeouts(raw, min(seconds, read or seconds), min(seconds, write or seconds))
    try:
        yield
    finally:
        set_timeouts(raw, read, write)


def force_close(conn: Any) -> None:
    """Close a connection's socket without a goodbye; ``open`` is False after it.

    PyMySQL's public ``close()`` first writes COM_QUIT: on a connection whose protocol is out
    of step (a reply read only in part) that goes into the middle of an exchange, and on a
    stalled socket it waits a whole write bound. Its ``_force_close`` (what it runs itself
    when a socket fails) only closes the socket; DBUtils then sees a dead connection on
    checkout and replaces it.
    """
    raw_connection(conn)._force_close()


def install_as_mysqldb() -> None:
    """Install PyMySQL as MySQLdb for Django's MySQL backend, its submodules included.

    ``pymysql.install_as_MySQLdb()`` alone registers the package only: when Django then imports
    ``MySQLdb.err`` or ``MySQLdb.constants``, Python loads PyMySQL's files a second time under
    those names and sets ``pymysql.err`` to the copy, whose classes no connection raises, so every
    ``except pymysql.err.MySQLError`` in the process (the application's, a test's) stops
    catching. Registering each loaded submodule under its MySQLdb name first avoids the copy
    (docs/own-tables.md#django).
    """
    import pymysql
    import pymysql.constants.CLIENT
    import pymysql.constants.ER
    import pymysql.constants.FIELD_TYPE
    import pymysql.constants.FLAG
    import pymysql.converters
    import pymysql.cursors
    import pymysql.times  # each loaded so that it is registered below

    pymysql.install_as_MySQLdb()
    for name, module in list(sys.modules.items()):
        if name.startswith("pymysql.") and module is not None:
            sys.modules.setdefault("MySQLdb." + name.removeprefix("pymysql."), module)
