"""What pyfsm notes on objects it does not own: PyMySQL connections and the errors raised on them.

Every such note is an attribute named ``pyfsm_*``, written by one ``mark_*`` and read by one
``read_*`` below, and nowhere else (a test may set one to stage a case, under the same name).

On a connection (PyMySQL's own, :func:`pyfsm.db.driver.raw_connection`):

* ``pyfsm_used``: when it was last used (``time.monotonic()``); a connection idle longer
  than IDLE_PING_SECONDS gets a ping on checkout (:func:`pyfsm.db.pool.is_alive`).
* ``pyfsm_writer_checked``: on a connection to a member of a cluster only, when its server
  was last found to be the writer; checked again on checkout every WRITER_RECHECK_SECONDS.
* ``pyfsm_cluster``: which kind of cluster its server is a member of, ``"galera"`` or
  ``"group"`` (Group Replication), for :func:`pyfsm.db.cluster.is_writer`.

On an error (the driver's, or pyfsm's made of it):

* ``pyfsm_tried``: for a new connection, the servers tried and what each said, in order.
* ``pyfsm_server``: the server of the connection the error happened on.
* ``pyfsm_timeout``: the bound (seconds) that ran out, when a socket read or write timed out.
* ``pyfsm_named``: on an outage whose message :func:`pyfsm.db.connecting.name_servers` wrote.

Why attributes and not a wrapper or a side table: the connection is the one PyMySQL made,
handed around by DBUtils (which replaces it on its own when it dies) and by lock leases; an
error travels up through DBUtils' and PyMySQL's frames and is raised again from pyfsm's. An
attribute goes wherever the object goes and dies with it.
"""

from __future__ import annotations

import time
from contextlib import suppress
from typing import Any

from .driver import raw_connection
from .hosts import where

#: How far down an error's ``__cause__`` / ``__context__`` chain a mark is looked for: a pyfsm
#: error made of a driver error raised inside DBUtils' handlers is a few links from it; the
#: bound ends a loop should a chain ever be circular.
CHAIN_DEPTH = 8


# --- connections ---------------------------------------------------------------------------


def mark_used(conn: Any, when: float | None = None) -> float:
    """Note that ``conn`` was used now (or at ``when``, a ``time.monotonic()``); returns when."""
    conn.pyfsm_used = time.monotonic() if when is None else when
    return float(conn.pyfsm_used)


def read_used(conn: Any) -> float | None:
    """When ``conn`` was last used (:func:`mark_used`), or None if never noted."""
    return getattr(conn, "pyfsm_used", None)


def mark_writer_checked(conn: Any, when: float) -> None:
    """Note that ``conn``'s server was found to be its cluster's writer at ``when``."""
    conn.pyfsm_writer_checked = when


def read_writer_checked(conn: Any) -> float | None:
    """When ``conn``'s server was last found to be the writer; None on a server of no cluster."""
    return getattr(conn, "pyfsm_writer_checked", None)


def mark_cluster(conn: Any, kind: str) -> None:
    """Note which kind of cluster ``conn``'s server is a member of: ``galera`` or ``group``."""
    conn.pyfsm_cluster = kind


def read_cluster(conn: Any) -> str | None:
    """The kind of cluster noted by :func:`mark_cluster`, or None."""
    return getattr(conn, "pyfsm_cluster", None)


# --- errors --------------------------------------------------------------------------------


def mark_tried(exc: BaseException, tried: list[tuple[str, str]]) -> None:
    """Note on a failed new connection's error the servers tried and what each said (a copy)."""
    exc.pyfsm_tried = list(tried)  # type: ignore[attr-defined]


def read_tried(exc: BaseException | None) -> list[tuple[str, str]]:
    """The servers tried (:func:`mark_tried`) noted on ``exc`` or on what it was made of; or []."""
    return _found(exc, "pyfsm_tried") or []


def mark_server(exc: BaseException, conn: Any) -> None:
    """Note on a failure the server of the connection it happened on, unless one is noted."""
    with suppress(Exception):
        raw = raw_connection(conn)
        if not hasattr(exc, "pyfsm_server"):
            exc.pyfsm_server = where(raw.host, raw.port)  # type: ignore[attr-defined]


def read_server(exc: BaseException | None) -> str | None:
    """The server noted by :func:`mark_server` on ``exc`` or on what it was made of; or None."""
    found = _found(exc, "pyfsm_server")
    return found if isinstance(found, str) else None


def mark_timeout_bound(exc: BaseException, seconds: float | None) -> None:
    """Note on a socket timeout which bound (seconds) ran out."""
    exc.pyfsm_timeout = seconds  # type: ignore[attr-defined]


def read_timeout_bound(exc: BaseException, default: float | None = None) -> float | None:
    """The bound noted by :func:`mark_timeout_bound` on ``exc`` itself, else ``default``."""
    return getattr(exc, "pyfsm_timeout", default)


def mark_named(err: BaseException) -> None:
    """Note that an outage's message names its servers already."""
    err.pyfsm_named = True  # type: ignore[attr-defined]


def read_named(err: BaseException) -> bool:
    """Whether :func:`mark_named` was called on ``err``."""
    return bool(getattr(err, "pyfsm_named", False))


def _found(exc: BaseException | None, attribute: str) -> Any:
    """``attribute`` of ``exc`` or of the first exception it was made of that has it."""
    for _ in range(CHAIN_DEPTH):
        if exc is None:
            return None
        if hasattr(exc, attribute):
            return getattr(exc, attribute)
        exc = exc.__cause__ or exc.__context__
    return None
