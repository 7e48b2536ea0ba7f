"""Connections to MySQL / MariaDB: where to connect, connecting, the one place driver errors
become pyfsm errors, and the pool.

* :mod:`~pyfsm.db.settings`: :class:`Settings` and :func:`parse_dsn` (a DSN, its options and
  timeouts); :mod:`~pyfsm.db.hosts`: a DSN's list of servers and which one answered last.
* :mod:`~pyfsm.db.connecting`: a new connection (session setup, failover between the DSN's
  servers, naming the servers in an outage), creating a missing database.
* :mod:`~pyfsm.db.cluster`: Galera and Group Replication, which member pyfsm writes through.
* :mod:`~pyfsm.db.translation`: driver errors as pyfsm errors; timeouts, bad text, what a
  failure means for the connection.
* :mod:`~pyfsm.db.pool`: :class:`Database`, the pool that runs pyfsm's procedures and
  retries what may be retried (the CALL text comes from :mod:`pyfsm.schema.routines`).
* :mod:`~pyfsm.db.driver`: every reach into PyMySQL's and DBUtils' private attributes
  (socket bounds: :func:`bounded`, :func:`set_timeouts`); :mod:`~pyfsm.db.marks`: what pyfsm
  notes on their connections and errors.
* :mod:`~pyfsm.db.jsondata`: instance data and metadata as JSON text.

The names below are the ones the rest of pyfsm (and its tests, benchmarks and migrations)
use as ``db.NAME`` (``_raw`` and ``_is_alive`` are the old names of :func:`raw_connection
<pyfsm.db.driver.raw_connection>` and :func:`is_alive`). Tunables read at each use stay in
their module: set ``pyfsm.db.pool.IDLE_PING_SECONDS``, not a copy here.
"""

from __future__ import annotations

from . import queries
from .cluster import refuse_unless_writer
from .connecting import (
    DATABASE_CHARSET,
    STRICT_SQL_MODE,
    connect,
    connect_creating,
    create_database,
    open_connection,
)
from .driver import bounded, set_timeouts
from .driver import raw_connection as _raw
from .hosts import where
from .marks import mark_used
from .pool import CLEAR_CONTEXT_SQL, CONTEXT_VARIABLES, Database, discard, is_alive
from .pool import is_alive as _is_alive
from .settings import READ_TIMEOUT, WRITE_TIMEOUT, Settings, parse_dsn
from .translation import translate

__all__ = [
    "CLEAR_CONTEXT_SQL",
    "CONTEXT_VARIABLES",
    "DATABASE_CHARSET",
    "READ_TIMEOUT",
    "STRICT_SQL_MODE",
    "WRITE_TIMEOUT",
    "Database",
    "Settings",
    "_is_alive",
    "_raw",
    "bounded",
    "connect",
    "connect_creating",
    "create_database",
    "discard",
    "is_alive",
    "mark_used",
    "open_connection",
    "parse_dsn",
    "queries",
    "refuse_unless_writer",
    "set_timeouts",
    "translate",
    "where",
]
