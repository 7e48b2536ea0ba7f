"""Leases: the global and local locks of an instance, held by one owner for a while.

A :class:`Lease` comes from :meth:`pyfsm.Store.lock`. It keeps a connection of its own for
its whole life, outside the Store's pool (so leases never starve it, and a connection that
holds locks and ``@fsm_lock_owner`` is never handed to anyone else): ``fsm_lock_v2`` took
the advisory locks (GET_LOCK) on that connection and set ``@fsm_lock_owner`` there, so
transitions sent through the lease pass the trigger's lock check, and MySQL frees the
advisory locks at once if the process dies or the connection is closed. A lease that is
garbage-collected without being released has its connection closed. The lock rows
in ``fsm_locks`` expire after the lease unless renewed; a heartbeat thread renews them
every third of the lease.

The holder keeps its own account of the expiry on a monotonic clock, counted from the
moment each successful renewal was sent (the server's expiry is later): once it has passed
without a renewal the lease is lost, whatever the connection is doing, and stays lost. A
renewal that gets no answer gives up in time to try again before the expiry (its reads
and writes are bounded by the time left); a connection that died or timed out is replaced
by a new one on which the renewal proves the locks are still this owner's, then
``fsm_lock_v2`` binds them to it (advisory locks, ``@fsm_lock_owner``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pymysql

from . import db
from .db.driver import errors as pymysql_errors
from .errors import DatabaseUnavailable, FsmError, InvalidArgument, LockLost
from .schema import routines
from .schema.routines import Routine

if TYPE_CHECKING:
    from .gateway import Gateway
    from .models import TransitionResult

#: How a lease sends an event as its holder: the Store's send (machine, key, event, lease=..., ...).
Sender = Callable[..., "TransitionResult"]

log = logging.getLogger("pyfsm.locks")

OWNER = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def new_owner() -> str:
    """A unique owner token naming where it comes from: ``host:pid:random``."""
    host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:30] or "host"
    return f"{host}:{os.getpid()}:{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True)
class HeldLock:
    """One row of the view fsm_held_locks_v1."""

    kind: str
    scope: str
    lookup_key: str
    machine: str
    instance_key: str
    owner: str
    since: datetime
    expires_at: datetime
    connection_id: int | None
    advisory_connection: int | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> HeldLock:
        return cls(
            kind=row["kind"],
            scope=row["scope"],
            lookup_key=row["lookup_key"],
            machine=row["machine"],
            instance_key=row["instance_key"],
            owner=row["owner"],
            since=row["since"].replace(tzinfo=UTC),
            expires_at=row["expires_at"].replace(tzinfo=UTC),
            connection_id=row["connection_id"],
            advisory_connection=row["advisory_connection"],
        )


#: A renewal's reads and writes wait at least this long, or a third of the lease if longer,
#: at most RENEWAL_BOUND_MAX, and never past the lease's expiry (a release's too, minus the
#: expiry). fsm_renew_lock_v1 updates one or two rows (milliseconds): waiting longer only
#: delays moving to a new connection.
RENEWAL_BOUND = 1.0
RENEWAL_BOUND_MAX = 30.0


class Lease:
    """The locks one owner holds for one instance. Use it as a context manager.

    ``global_lock`` / ``local_lock`` say which locks were taken (neither when the instance
    uses no lock: then the lease is a no-op that still works the same way). ``lost`` turns
    True, for good, when a renewal finds the locks gone or when the lease's expiry (as this
    process counts it, on a monotonic clock from the last renewal that succeeded) passed
    without a renewal; from then on :meth:`send` and :meth:`renew` raise LockLost.
    """

    def __init__(
        self,
        gateway: Gateway,
        connections: LeaseConnections,
        conn: Any,
        row: dict[str, Any],
        lease_seconds: float,
        heartbeat: bool,
        *,
        send: Sender,
        taken_at: float | None = None,
    ) -> None:
        self._gateway = gateway
        self._connections = connections
        self._send = send
        self._conn: Any = conn
        self._use = threading.Lock()  # the heartbeat thread and the caller share the connection
        self._renewing = threading.Lock()  # held while a renewal (or a reconnection) is under way
        self.owner: str = row["owner"]
        self.machine: str = row["machine"]
        self.key: str = row["instance_key"]
        self.lookup_key: str | None = row["lookup_key"]
        self.global_lock = bool(row["global_lock"])
        self.local_lock = bool(row["local_lock"])
        self.lease_seconds = float(lease_seconds)
        expires = row["expires_at"]
        self.expires_at: datetime | None = None if expires is None else expires.replace(tzinfo=UTC)
        self._lost = False
        self._count = int(self.global_lock) + int(self.local_lock)
        #: time.monotonic() at which the lease runs out unless renewed (None: no locks)
        taken = time.monotonic() if taken_at is None else taken_at
        self._valid_until: float | None = taken + self.lease_seconds if self._count else None
        self._stop = threading.Event()
        self._closer = weakref.finalize(self, _close_quietly, conn)  # forgotten leases free their locks
        self._beat: threading.Thread | None = None
        if heartbeat and self._count:
            # the thread holds only a weak reference, so that a forgotten lease can still be collected
            self._beat = threading.Thread(
                target=_heartbeat,
                args=(weakref.ref(self), self._stop, max(self.lease_seconds / 3, 0.05)),
                name=f"pyfsm-lease-{self.owner}",
                daemon=True,
            )
            self._beat.start()

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return (
            f"Lease(owner={self.owner!r}, machine={self.machine!r}, key={self.key!r}, "
            f"global_lock={self.global_lock}, local_lock={self.local_lock}, lost={self.lost})"
        )

    @property
    def lost(self) -> bool:
        """True once the locks are gone or the lease ran out without a renewal; never turns back."""
        if self._lost:
            return True
        if not self._ran_out():
            return False
        with self._renewing:  # a renewal under way ends by the expiry (its bounds): its answer decides
            if self._ran_out():
                self._lost = True
        return self._lost

    def _ran_out(self) -> bool:
        return self._valid_until is not None and time.monotonic() >= self._valid_until

    def _lost_error(self) -> LockLost:
        if self._conn is None:
            return LockLost(f"lease {self.owner} was released", machine=self.machine, key=self.key)
        return LockLost(
            f"lease {self.owner} was lost: its locks expired or were taken over", machine=self.machine, key=self.key
        )

    # -- use ------------------------------------------------------------------------------

    def send(self, event: str, **kwargs: Any) -> TransitionResult:
        """Send ``event`` to the leased instance under this lease (see :meth:`Store.send`)."""
        return self._send(self.machine, self.key, event, lease=self, **kwargs)

    def call(self, routine: Routine, args: tuple[Any, ...], *, writes: bool, **context: Any) -> list[dict[str, Any]]:
        """Run one CALL on the lease's connection (used by Store for calls made under the lease).

        LockLost once the lease is released or lost. A connection that died is replaced first
        (see :meth:`renew`); a failure of the call itself is not retried.
        """
        if self._conn is None or self.lost:
            raise self._lost_error()
        with self._use:
            if self._conn is None or self.lost:
                raise self._lost_error()
            if not self._conn.open:
                with self._renewing:
                    self._keeping(self._reconnect)
            return self._gateway.call(routine, args, retry_connection=False, writes=writes, on=self._conn, **context)

    # -- keeping it -----------------------------------------------------------------------

    def renew(self) -> None:
        """Extend the locks by the lease from now; LockLost if any of them is gone or the lease ran out.

        DatabaseUnavailable if the server did not answer in time: the lease holds until its
        expiry, and the next renewal first replaces the connection (the heartbeat tries again
        soon). Nothing is renewed after the expiry: a lease that ran out stays lost.
        """
        if not self._count:
            return
        with self._use:
            if self._conn is None or self.lost:
                raise self._lost_error()
            with self._renewing:
                try:
                    self._keeping(lambda: self._renew_on(self._conn) if self._conn.open else self._reconnect())
                except DatabaseUnavailable:
                    _close_quietly(self._conn)  # whatever it was doing: the next renewal takes a new one
                    raise

    def _keeping(self, step: Callable[[], None]) -> None:
        """Run a renewal step; a LockLost from it loses the lease for good."""
        try:
            step()
        except LockLost:
            self._lost = True
            raise

    def _bound(self) -> float:
        """How long one step of a renewal may wait: never past the expiry (LockLost if it has passed)."""
        assert self._valid_until is not None
        left = self._valid_until - time.monotonic()
        if left <= 0:
            self._lost = True
            raise LockLost(
                f"lease {self.owner} ran out: not renewed within {self.lease_seconds:g} s",
                machine=self.machine,
                key=self.key,
            )
        return min(left, self._step_bound())

    def _step_bound(self) -> float:
        return max(RENEWAL_BOUND, min(self.lease_seconds / 3, RENEWAL_BOUND_MAX))

    def _renew_on(self, conn: Any) -> None:
        """fsm_renew_lock_v1 on ``conn``; on success the lease is valid for lease_seconds from its sending."""
        bound = self._bound()
        sent = time.monotonic()
        with db.bounded(conn, bound):
            rows = self._gateway.call(
                routines.RENEW_LOCK,
                (self.owner, self.lease_seconds),
                retry_connection=False,
                writes=True,
                on=conn,
                checked=False,
                machine=self.machine,
                key=self.key,
            )
        renewed = int(rows[0]["renewed"])
        if renewed < self._count:  # one of the two locks was taken over meanwhile
            raise LockLost(
                f"lease {self.owner}: {self._count - renewed} of its locks were taken over",
                machine=self.machine,
                key=self.key,
            )
        self.expires_at = rows[0]["expires_at"].replace(tzinfo=UTC)
        self._valid_until = sent + self.lease_seconds

    def _reconnect(self) -> None:
        """Replace a dead connection; for held locks, only while they are still this owner's.

        On the new connection a renewal first proves the lock rows are still held (it extends
        only rows of this owner that have not expired), then fsm_lock_v2 binds them to it: the
        advisory locks, ``@fsm_lock_owner``, the rows' connection_id.
        """
        settings = self._gateway.settings
        if self._count:
            bound = self._bound()
            settings = replace(
                settings,
                connect_timeout=min(settings.connect_timeout, bound),
                read_timeout=min(settings.read_timeout, bound),
                write_timeout=min(settings.write_timeout, bound),
            )
        conn = db.connect(settings, timeouts=True)
        try:
            if self._count:
                self._renew_on(conn)
                bound = self._bound()
                sent = time.monotonic()
                with db.bounded(conn, bound):
                    try:
                        rows = self._gateway.call(
                            routines.LOCK,
                            (self.machine, self.key, self.owner, self.lease_seconds),
                            retry_connection=False,
                            writes=True,
                            on=conn,
                            checked=False,
                            machine=self.machine,
                            key=self.key,
                        )
                    except FsmError as exc:
                        if exc.errno != 31014:
                            raise
                        raise LockLost(
                            f"lease {self.owner}: its locks could not be taken back on a new connection: {exc}",
                            machine=self.machine,
                            key=self.key,
                        ) from exc
                row = rows[0]
                if (bool(row["global_lock"]), bool(row["local_lock"])) != (self.global_lock, self.local_lock):
                    raise LockLost(
                        f"lease {self.owner}: the instance's locking changed", machine=self.machine, key=self.key
                    )
                self.expires_at = row["expires_at"].replace(tzinfo=UTC)
                self._valid_until = sent + self.lease_seconds
            db.set_timeouts(conn, self._gateway.settings.read_timeout, self._gateway.settings.write_timeout)
        except BaseException:
            _close_quietly(conn)
            raise
        old, self._conn = self._conn, conn
        self._closer.detach()
        self._closer = weakref.finalize(self, _close_quietly, conn)
        _close_quietly(old)
        log.info("pyfsm: lease %s moved to a new connection", self.owner)

    # -- giving it back -------------------------------------------------------------------

    def release(self) -> bool:
        """Release the locks. Never raises: a failure is logged and the rows expire on their own.

        Returns True when every lock this lease held was released by it.
        """
        self._stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join()
        lost = self.lost
        conn, self._conn = self._conn, None
        if conn is None:
            return False
        released = 0
        ok = False
        for attempt in range(3 if conn.open else 0):  # a dead connection: straight to another one
            try:
                with self._use, db.bounded(conn, self._step_bound()):  # a stalled connection: give up soon
                    rows = self._gateway.call(
                        routines.UNLOCK, (self.owner,), retry_connection=False, writes=True, on=conn, checked=False
                    )
                released, ok = int(rows[0]["released"]), True
                break
            except FsmError as exc:
                log.warning("pyfsm: releasing lease %s failed (attempt %d): %s", self.owner, attempt + 1, exc)
                if not conn.open:
                    break
                time.sleep(0.02 * (attempt + 1))
        if not ok:
            # The connection is broken: closing it frees its advisory locks; release the rows
            # from any other connection (the owner check makes that safe).
            self._closer()
            try:
                rows = self._gateway.call(
                    routines.UNLOCK, (self.owner,), retry_connection=True, writes=True, checked=False
                )
                released = int(rows[0]["released"])
            except FsmError as exc:
                log.warning("pyfsm: lease %s left to expire: %s", self.owner, exc)
        clean = ok and not lost and released == self._count
        if clean:  # every lock and @fsm_lock_owner given back: the connection may serve another lease
            self._closer.detach()
            self._connections.put(conn)
        else:
            self._closer()  # closing the connection frees whatever advisory lock is left on it
        return clean


def check_owner(owner: object) -> str:
    """``owner`` if it is a valid owner token (1-64 of [A-Za-z0-9._:-]); InvalidArgument if not."""
    if not isinstance(owner, str) or not OWNER.fullmatch(owner):
        raise InvalidArgument(f"owner must be 1 to 64 characters of [A-Za-z0-9._:-], got {owner!r:.80}")
    return owner


def acquire(
    gateway: Gateway,
    connections: LeaseConnections,
    machine: str,
    key: str,
    *,
    owner: str | None,
    lease_seconds: float | None,
    attempts: int,
    backoff: float,
    heartbeat: bool,
    send: Sender,
) -> Lease:
    """Take the locks of one instance: ``attempts`` tries, ``backoff`` doubling between them."""
    owner = new_owner() if owner is None else check_owner(owner)
    if lease_seconds is not None and (
        isinstance(lease_seconds, bool)
        or not isinstance(lease_seconds, int | float)
        or not 0.1 <= lease_seconds <= 86400
    ):
        raise InvalidArgument(f"lease_seconds must be between 0.1 and 86400, got {lease_seconds!r:.80}")
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 100:
        raise InvalidArgument(f"attempts must be an integer from 1 to 100, got {attempts!r:.80}")
    if not isinstance(backoff, int | float) or not 0 <= backoff <= 10:
        raise InvalidArgument(f"backoff must be between 0 and 10 seconds, got {backoff!r:.80}")
    conn = connections.get()
    try:
        for attempt in range(attempts):
            try:
                taken_at = time.monotonic()  # the lease counts from before the call: the server's is later
                rows = gateway.call(
                    routines.LOCK,
                    (machine, key, owner, lease_seconds),
                    retry_connection=False,
                    writes=True,
                    on=conn,
                    checked=False,
                    machine=machine,
                    key=key,
                )
                break
            except FsmError as exc:
                if exc.errno != 31014:
                    raise
                if attempt + 1 == attempts:
                    exc.fields["holders"] = _holders(conn, machine, key)
                    raise
                time.sleep(min(backoff * 2**attempt, 1.0) * random.uniform(0.5, 1.5))
        row = rows[0]
        return Lease(
            gateway, connections, conn, row, float(row["lease_seconds"]), heartbeat, send=send, taken_at=taken_at
        )
    except BaseException:
        _close_quietly(conn)
        raise


def _heartbeat(ref: weakref.ReferenceType[Lease], stop: threading.Event, interval: float) -> None:
    """Renew a lease every ``interval`` until it is released, lost or garbage-collected.

    After a failed renewal the next one comes sooner (from 0.1 s, doubling up to half
    ``interval``), on a new connection: the lease holds until its expiry, not longer.
    """
    delay, failures = interval, 0
    while not stop.wait(delay):
        lease = ref()
        if lease is None:
            return
        try:
            lease.renew()
        except LockLost as exc:
            log.warning("pyfsm: lease lost: %s", exc)
            return
        except Exception as exc:
            failures += 1
            if lease.lost:
                log.warning("pyfsm: lease %s lost: not renewed before its expiry (%s)", lease.owner, exc)
                return
            log.warning("pyfsm: lease %s not renewed (%s); retrying", lease.owner, exc)
            delay = min(interval / 2, 0.05 * 2**failures)
        else:
            delay, failures = interval, 0
        del lease


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):  # already closed or broken: the aim is only that it is gone
        conn.close()


def _holders(conn: Any, machine: str, key: str) -> list[HeldLock]:
    """Who holds the locks ``key`` needs (for the error), read on the lease's own connection."""
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(routines.LOCK_HOLDERS.call_sql(), (machine, key))
            holders = [HeldLock.from_row(r) for r in cur.fetchall()]
            while cur.nextset():
                pass
            return holders
    except pymysql_errors.MySQLError:
        return []


class LeaseConnections:
    """Connections for leases, outside the Store's pool, kept for reuse after a clean release.

    A lease's connection holds advisory locks and ``@fsm_lock_owner`` while it is out, so it
    never goes to the general pool; only a lease that released everything cleanly puts it
    back here (a lost, failed or forgotten lease closes it instead).
    """

    def __init__(self, settings: db.Settings, keep: int) -> None:
        self.settings, self.keep = settings, keep
        self._free: list[Any] = []
        self._mutex = threading.Lock()

    def get(self) -> Any:
        while True:
            with self._mutex:
                conn = self._free.pop() if self._free else None
            if conn is None:
                return db.connect(self.settings, timeouts=True)
            if db.is_alive(conn):
                return conn
            _close_quietly(conn)

    def put(self, conn: Any) -> None:
        db.mark_used(conn)
        with self._mutex:
            if len(self._free) < self.keep:
                self._free.append(conn)
                return
        _close_quietly(conn)

    def close(self) -> None:
        with self._mutex:
            free, self._free = self._free, []
        for conn in free:
            _close_quietly(conn)
