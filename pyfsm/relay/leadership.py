"""The relay's leadership: one publishing relay per database, on one server or a cluster.

Two locks, each for what the other cannot do:

* **A row of fsm_relay_leaders** (``fsm_relay_lead_v1``), with an expiry. Every server of a
  Galera cluster sees it (a GET_LOCK is local to one node), so relays started on several
  nodes still have one leader; two taking a free row at once conflict at commit, and one
  of them wins. A leader that stops resigns it (``fsm_relay_resign_v1``) for a standby to
  take over at once; one that died is replaced once its row expired (``lease`` seconds).
* **GET_LOCK(name)** on the leader's connection, local to its server, which the server
  frees the moment that connection dies. A standby on the same server that gets it may
  take the row at once: the procedure sees that the row's holder is on its own server and
  has lost its advisory lock. On one server (the common case) a killed leader is thus
  replaced within about a second, as before the row existed. Where the server refuses
  GET_LOCK (1235: some MariaDB releases on Galera, MDEV-30473) the row alone decides.

The leader renews the row every third of the lease (the relay calls :meth:`keep` before
each batch and while it waits for the broker), and keeps its own account of the expiry on
a monotonic clock, counted from the moment each renewal was sent: once that passed
without a renewal it no longer leads, whatever the database says later.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from .. import db
from ..db import queries
from ..db.driver import errors as pymysql_errors
from ..errors import Deadlock, FsmError
from ..schema import routines

log = logging.getLogger("pyfsm.relay")

#: GET_LOCK refused by the server: "This version of MariaDB doesn't yet support 'GET_LOCK in
#: cluster (WSREP_ON=ON)'" (ER_NOT_SUPPORTED_YET).
NOT_SUPPORTED_YET = 1235


class Leadership:
    """Take, keep and give up a relay's leadership (see the module documentation).

    ``name``: the relay lock name (one per database); ``relay``: the relay's name for logs
    (a random suffix makes the holder unique to this object); ``lease``: seconds the row
    stays the leader's without a renewal; ``standby_wait``: seconds a standby waits in
    GET_LOCK per attempt (0: it sleeps half a second instead).
    """

    def __init__(
        self,
        database: db.Database,
        name: str,
        relay: str,
        *,
        lease: float,
        standby_wait: int,
        sleep: Callable[[float], object],
    ) -> None:
        self._db = database
        self.name = name
        self.relay = relay
        self.holder = f"{relay[:110]}:{uuid.uuid4().hex[:12]}"
        self.lease = lease
        self.standby_wait = standby_wait
        self._sleep = sleep
        self.term: int | None = None
        self.terms = 0
        self._stack: ExitStack | None = None
        self._conn: Any = None
        self._advisory = True  # False once the server refused GET_LOCK: the row alone decides
        self._renewed = 0.0  # monotonic time the last successful renewal was sent
        self._standby_logged = False

    @property
    def held(self) -> bool:
        return self._conn is not None

    def ensure(self) -> bool:
        """Whether this relay leads now: keep the leadership it has, or try to take it."""
        if self._conn is not None:
            return self.keep()
        return self._take()

    def keep(self, *, force: bool = False, advisory: bool = True) -> bool:
        """Still the leader? Renews the row once a third of the lease has passed (or ``force``).

        Between renewals it asks the server whether the connection still holds the advisory
        lock (one round trip), unless ``advisory`` is False: a caller that asked a moment ago
        and wants only the lease's time checked (the relay right before producing)."""
        if self._conn is None:
            return False
        now = time.monotonic()
        if now - self._renewed >= self.lease:
            log.warning(
                "leadership lost: the lease of %s ran out before it could be renewed; events are kept", self.name
            )
            self.resign(broken=True)
            return False
        if not force and now - self._renewed < self.lease / 3:
            return self._still_advisory() if advisory else True
        try:
            # bounded by what is left of the lease: past it, this relay no longer leads anyway
            with db.bounded(self._conn, max(0.1, self.lease - (now - self._renewed))):
                row = self._lead(self._conn)
        except (pymysql_errors.MySQLError, FsmError) as exc:
            err = self._db.with_server(db.translate(exc))
            log.warning("leadership lost: the lock connection failed (%s); events are kept", err)
            self.resign(broken=True)
            return False
        if not row["leader"] or row["term"] != self.term:
            log.warning("leadership lost: %s is led by %s (term %s) now", self.name, row["holder"], row["term"])
            self.resign(broken=True)
            return False
        self._renewed = now
        return True

    def _still_advisory(self) -> bool:
        """Between renewals: the connection still holds the advisory lock (one round trip)."""
        if not self._advisory:
            return True
        try:
            with (
                db.bounded(self._conn, max(0.1, self.lease - (time.monotonic() - self._renewed))),
                self._conn.cursor() as cur,
            ):
                cur.execute(queries.sql("relay_holds_lock"), (self.name,))
                row = cur.fetchone()
        except pymysql_errors.MySQLError as exc:
            err = self._db.with_server(db.translate(exc))
            log.warning("leadership lost: the lock connection failed (%s); events are kept", err)
            self.resign(broken=True)
            return False
        if not row or row[0] != 1:
            log.warning("leadership lost: the server no longer reports %s as held by this relay", self.name)
            self.resign(broken=True)
            return False
        return True

    def _take(self) -> bool:
        stack = ExitStack()
        pooled = None
        try:
            pooled = stack.enter_context(self._db.connection())
            advisory = self._get_lock(pooled)
            sent = time.monotonic()
            row = self._lead(pooled) if advisory else None
            if row is not None and not row["leader"] and self._advisory:
                with pooled.cursor() as cur:  # another server's relay leads: free this server's lock
                    cur.execute(queries.sql("relay_release_lock"), (self.name,))
        except Deadlock:  # another server's relay took the free row at the same moment and won
            _hard_close(stack, pooled)  # (closing also frees this server's advisory lock)
            self._sleep(max(self.standby_wait, 0.5))
            return False
        except BaseException:
            _hard_close(stack, pooled)
            raise
        if row is None or not row["leader"]:
            stack.close()
            if not self._standby_logged:
                where = (
                    "held by another relay on this server"
                    if not (row and row["holder"])
                    else f"held by {row['holder']} on {row['server']} until {row['expires_at']}"
                )
                log.info("standby: relay lock %s is %s; waiting to take over", self.name, where)
                self._standby_logged = True
            if row is not None or self.standby_wait == 0:  # GET_LOCK did not wait: wait here
                self._sleep(max(self.standby_wait, 0.5))
            return False
        self._stack, self._conn = stack, pooled
        self.term, self._renewed = int(row["term"]), sent
        self._standby_logged = False
        self.terms += 1
        log.info(
            "leader: relay %s holds %s (term %s, as %s) and publishes", self.relay, self.name, self.term, self.holder
        )
        return True

    def _get_lock(self, pooled: Any) -> bool:
        """GET_LOCK(name, standby_wait); True when it was had (or the server refuses GET_LOCK)."""
        if not self._advisory:
            return True
        try:
            with pooled.cursor() as cur:
                cur.execute(queries.sql("relay_get_lock"), (self.name, self.standby_wait))
                return bool(cur.fetchone()[0] == 1)
        except pymysql_errors.MySQLError as exc:
            if exc.args and exc.args[0] == NOT_SUPPORTED_YET:
                log.warning(
                    "the server refuses GET_LOCK (%s): relay leadership rests on the row of "
                    "fsm_relay_leaders alone; a dead leader is replaced after its lease",
                    exc.args[1],
                )
                self._advisory = False
                return True
            raise

    def _lead(self, conn: Any) -> dict[str, Any]:
        rows = self._db.run(
            routines.RELAY_LEAD.call_sql(),
            (self.name, self.holder, self.lease),
            retry_connection=False,
            writes=True,
            on=conn,
        )
        return rows[0]

    def resign(self, *, broken: bool = False) -> None:
        """Give the leadership up: resign the row and RELEASE_LOCK, or close a connection that
        may be broken (the row then expires by itself)."""
        stack, conn = self._stack, self._conn
        self._stack = self._conn = None
        self.term = None
        if stack is None:
            return
        if not broken:
            try:
                self._db.run(
                    routines.RELAY_RESIGN.call_sql(),
                    (self.name, self.holder),
                    retry_connection=False,
                    writes=True,
                    on=conn,
                )
                if self._advisory:
                    with conn.cursor() as cur:
                        cur.execute(queries.sql("relay_release_lock"), (self.name,))
            except (pymysql_errors.MySQLError, FsmError):
                broken = True
        if broken:
            _hard_close(stack, conn)
        else:
            stack.close()


def _hard_close(stack: ExitStack, pooled: Any) -> None:
    """Close a lock connection's socket (the server frees its locks) and return it to the pool."""
    if pooled is not None:
        db.discard(pooled)
    stack.close()
