"""The Python facade: a Store holds a connection pool and calls pyfsm's procedures.

Every method is one CALL (one round trip). Arguments are validated here first so that bad
input fails before any SQL runs; the procedures check again for callers that bypass Python.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pymysql

from . import bulk, db
from .db.jsondata import dump_object
from .definition import NAME, Machine
from .errors import (
    AccessDenied,
    FsmError,
    InvalidArgument,
    InvalidEncoding,
    SchemaVersionMismatch,
    TransitionNotAllowed,
    UnknownEvent,
    UnknownMachine,
)
from .locks import HeldLock, Lease, LeaseConnections, acquire
from .models import AccountHistoryEntry, DefineResult, HistoryEntry, Instance, TransitionResult, _utc
from .schema import install as schema
from .schema.resources import check_machine_name

MAX_DATA_BYTES = 1024 * 1024
MAX_METADATA_BYTES = 64 * 1024
MAX_BIGINT = 2**63 - 1
#: fsm_enqueue_v1 takes DECIMAL(12,3) seconds: at most about 31 years.
MAX_DELAY_SECONDS = 999_999_999


class Store:
    """pyfsm's entry point.

    ``Store("mysql://user:password@host:3306/db")``, or ``Store()`` to read $PYFSM_DSN.
    Connections are pooled (``pool_size``), autocommit, UTC and READ COMMITTED; TLS is off
    unless the DSN says ``?tls=true``. The first call checks that the database's pyfsm
    schema matches this library and raises SchemaVersionMismatch naming the fix if not.

    Every socket read and write of a call is bounded: ``read_timeout`` (default 300 s)
    and ``write_timeout`` (default 60 s), here or as DSN options of the same names (these
    arguments win). 300 s is well above the longest legitimate wait of a call (a row-lock
    wait, which the server ends after innodb_lock_wait_timeout, 50 s by default; the
    relay's standby GET_LOCK, at most 60 s; a long reporting query): raise it above your
    longest call if that is longer. A call that runs out of time fails with
    DatabaseUnavailable (2013, retryable) at once, never retried by pyfsm since it already
    waited its bound; for a write the outcome is then unknown, as for any lost reply
    (repeat it with the same request id). The connection is closed and the pool replaces
    it. DDL (:meth:`migrate`, :meth:`sync`) runs unbounded. Bad arguments raise
    InvalidArgument before anything connects.

    ``read_dsn``: a read replica (its own pool of ``pool_size``). The reads that may be a
    little stale go there: :meth:`history`, :meth:`in_state`, :meth:`instances_in_state`,
    :meth:`account_history`, :meth:`counts`, :meth:`state_at` and :meth:`stats` (the
    replica answers as of the last transaction it applied). Everything else stays on the
    primary: every write, and the reads a caller acts on (:meth:`get`, :meth:`definition`,
    locks, the engine's queue, :meth:`failed`, :meth:`errors`, :meth:`run_info`). Nothing is
    ever written through ``read_dsn``; give the replica ``read_only=ON``.
    """

    def __init__(
        self, dsn: str | None = None, *, pool_size: int = 8, read_timeout: float | None = None,
        write_timeout: float | None = None, read_dsn: str | None = None,
    ) -> None:
        self.settings = db.parse_dsn(dsn).with_timeouts(read_timeout=read_timeout, write_timeout=write_timeout)
        if not self.settings.database:
            raise InvalidArgument("the DSN names no database: mysql://user:password@host:port/DATABASE")
        self.read_settings: db.Settings | None = None
        if read_dsn is not None:
            if not isinstance(read_dsn, str) or not read_dsn:
                raise InvalidArgument(f"read_dsn must be a mysql:// DSN, got {read_dsn!r:.80}")
            # reads may go to any node of a Galera cluster: only writes need its writer node
            self.read_settings = replace(db.parse_dsn(read_dsn).with_timeouts(
                read_timeout=read_timeout, write_timeout=write_timeout), galera_writes="any")
            if not self.read_settings.database:
                raise InvalidArgument("the read DSN names no database: mysql://user:password@host:port/DATABASE")
        self._db = db.Database(self.settings, pool_size=pool_size)
        self._replica = None if self.read_settings is None else db.Database(self.read_settings, pool_size=pool_size)
        self._replica_schema_ok = False
        self._lease_connections = LeaseConnections(self.settings, keep=pool_size)
        self._schema_ok = False
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()
        if self._replica is not None:
            self._replica.close()
        self._lease_connections.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def migrate(self) -> None:
        """Install or upgrade pyfsm's schema (the same as `pyfsm migrate`).

        Creates the DSN's database first when the server has none of that name and the
        account may (utf8mb4 / utf8mb4_bin; logged at INFO on ``pyfsm.db``); an account
        that may not gets AccessDenied naming the ``CREATE DATABASE`` statement to run.
        """
        schema.migrate(self.settings)
        self._schema_ok = False

    def _ensure_schema(self) -> None:
        if self._schema_ok:
            return
        with self._lock:
            self._db.read(lambda conn: schema.check(conn, dsn_hint=_dsn_hint(self.settings)))
            self._schema_ok = True

    # -- definitions ----------------------------------------------------------------------

    def define(self, machine: Machine) -> DefineResult:
        """Store ``machine``'s definition and create its tables and triggers if missing (or
        bring them up to date when an older pyfsm installed them).

        An identical definition changes nothing; a changed one becomes a new version, used
        by instances created from now on.
        """
        if not isinstance(machine, Machine):
            raise InvalidArgument("define() takes a pyfsm.Machine")
        self._ensure_schema()
        row = self._call("fsm_define_v5", (machine.name, machine.to_json()), machine=machine.name)
        if not row["tables_ready"] or self._objects_outdated(machine.name):
            self.sync(machine.name)
        return DefineResult(machine.name, int(row["version"]), bool(row["changed"]))

    def _objects_outdated(self, name: str) -> bool:
        """Whether the type's tables, triggers and procedures are an older set than this pyfsm's
        (an older pyfsm installed it, say during a rolling upgrade): define() then brings them
        up to date. An account that may not read fsm_machines (`pyfsm grant`'s app role) cannot
        install them either; it learns of them when a call names the missing procedure."""
        def read(conn: Any) -> Any:
            with conn.cursor() as cur:
                cur.execute("SELECT objects_version FROM fsm_machines WHERE machine = %s", (name,))
                return cur.fetchone()
        try:
            found = self._db.read(read)
        except AccessDenied:
            return False
        return found is not None and found[0] != schema.MACHINE_OBJECTS_VERSION

    def sync(self, machine: str) -> None:
        """Create the per-type tables, triggers and procedures of a stored definition.

        Needed after a DBA defined a new machine with ``CALL fsm_define_v5``: MySQL cannot
        create triggers from a procedure.
        """
        name = check_machine_name(machine)
        self._ensure_schema()
        self.definition(name)  # raises UnknownMachine if there is no stored definition
        conn = db.connect(self.settings)
        try:
            schema.install_machine_objects(conn, name)
        except pymysql.err.MySQLError as exc:
            err = db.translate(exc)
            if isinstance(err, AccessDenied):
                raise AccessDenied(
                    f"installing {name}'s tables, triggers and views needs the schema owner's rights "
                    f"(CREATE, TRIGGER, CREATE ROUTINE, CREATE VIEW, GRANT): run `pyfsm sync {name}` as the owner "
                    f"({err})", errno=err.errno, machine=name) from exc
            if err is exc:
                raise
            raise err from exc
        finally:
            conn.close()

    def definition(self, machine: str | Machine, version: int | None = None) -> dict[str, Any]:
        """A stored definition (current version by default) as a dict with its version."""
        name = _machine_name(machine)
        if version is not None:
            _check_int("version", version, minimum=1, maximum=2**31 - 1)
        row = self._call("fsm_definition_v1", (name, version), read=True, machine=name)
        return {"machine": row["machine"], "version": row["version"], "is_current": bool(row["is_current"]),
                "definition": json.loads(row["body"]) if isinstance(row["body"], str) else row["body"]}

    # -- writes ---------------------------------------------------------------------------

    def create(
        self, machine: str | Machine, key: str, *, state: str | None = None,
        data: Mapping[str, Any] | None = None, lookup_key: str | None = None,
        metadata: Mapping[str, Any] | None = None, request_id: str | None = None,
    ) -> TransitionResult:
        """Create an instance in a start state (default: the first one)."""
        name = _machine_name(machine)
        args = (
            _check_key("key", key), _check_name("state", state) if state is not None else None,
            _dump("data", data, MAX_DATA_BYTES), _dump("metadata", metadata, MAX_METADATA_BYTES),
            _check_text("request_id", request_id, 64), _check_text("lookup_key", lookup_key, 191),
        )
        row = self._call(f"fsm_{name}_create_v1", args, writes=True, retry_connection=request_id is not None,
                         machine=name, key=key, state=state)
        return TransitionResult.from_row(row)

    def send(
        self, machine: str | Machine, key: str, event: str, *, data: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None, expected_version: int | None = None,
        request_id: str | None = None, handler: str | None = None, lookup_key: str | None = None,
        lease: Lease | None = None,
    ) -> TransitionResult:
        """Apply ``event`` to the instance ``key`` in one transaction.

        ``data`` replaces the instance's data (None keeps it). A key with no instance is
        created when a start state allows the event (``lookup_key`` is used then).
        ``expected_version``: 0 means the instance must not exist yet; N means its version
        must be N, else Conflict. A call carrying ``request_id`` is safe to repeat: the
        repeat returns the original transition with ``replayed=True``, and a lost
        connection is retried for it.

        ``lease``: send as the holder of that :meth:`lock` (through its connection). For a
        type that uses locks, a transition while another owner holds the lock raises LockHeld.
        """
        name = _machine_name(machine)
        if expected_version is not None:
            _check_int("expected_version", expected_version, minimum=0)
        if lease is not None and not isinstance(lease, Lease):
            raise InvalidArgument(f"lease must be a Lease from Store.lock() or None, got {type(lease).__name__}")
        args = (
            _check_key("key", key), _check_name("event", event),
            _dump("data", data, MAX_DATA_BYTES), _dump("metadata", metadata, MAX_METADATA_BYTES),
            expected_version, _check_text("request_id", request_id, 64),
            _check_text("handler", handler, 128), _check_text("lookup_key", lookup_key, 191),
        )
        try:
            if lease is not None:
                self._ensure_schema()
                try:
                    row = lease.call(db.call_sql(f"fsm_{name}_send_v2", len(args)), args, writes=True,
                                     machine=name, key=key, event=event)[0]
                except (UnknownMachine, AccessDenied) as exc:
                    raise self._explained(exc, f"fsm_{name}_send_v2") from exc.__cause__
            else:
                row = self._call(f"fsm_{name}_send_v2", args, writes=True, retry_connection=request_id is not None,
                                 machine=name, key=key, event=event)
        except TransitionNotAllowed as exc:
            instance = self._instance_or_none(name, key)
            exc.state = None if instance is None else instance.state
            raise self._event_checked(exc, _Events(self, name), instance) from exc.__cause__
        return TransitionResult.from_send_row(row, key, event)

    def send_many(self, machine: str | Machine, items: Iterable[Any], *,
                  chunk_size: int = 100) -> list[TransitionResult | FsmError]:
        """Send many events in chunks: one call, one transaction and one commit per chunk.

        ``items``: ``(key, event)`` pairs or mappings with ``key``, ``event`` and any of
        ``data``, ``metadata``, ``expected_version``, ``request_id``, ``handler``,
        ``lookup_key`` (as :meth:`send`). Every item is checked before anything is sent
        (InvalidArgument / InvalidData naming the item otherwise). Returns one outcome per
        item, in order: its TransitionResult, or the error that refused it (not raised). Each
        item is applied or refused alone, with every check :meth:`send` makes; items of one
        key are applied in the order given. A chunk the server rolled back as a whole (a
        deadlock that lasted through pyfsm's retries) gives each of its items that Deadlock.
        A lost connection raises DatabaseUnavailable (``fields["outcomes"]``: the chunks
        committed before it), except for a chunk whose items all carry request ids, which
        is repeated. ``chunk_size``: 1 to 1000 items per call (default 100).
        """
        name = _machine_name(machine)
        _check_int("chunk_size", chunk_size, minimum=1, maximum=bulk.MAX_CHUNK)

        def check(position: int, item: dict[str, Any]) -> dict[str, Any]:
            where = f"item {position}"
            if item.get("expected_version") is not None:
                _check_int(f"{where}: expected_version", item["expected_version"], minimum=0)
            # checked as send checks them, and sent as the objects they are
            _dump(f"{where}: data", item.get("data"), MAX_DATA_BYTES)
            _dump(f"{where}: metadata", item.get("metadata"), MAX_METADATA_BYTES)
            return {
                "key": _check_key(f"{where}: key", item["key"]), "event": _check_name(f"{where}: event", item["event"]),
                "data": item.get("data"), "metadata": item.get("metadata"),
                "expected_version": item.get("expected_version"),
                "request_id": _check_text(f"{where}: request_id", item.get("request_id"), 64),
                "handler": _check_text(f"{where}: handler", item.get("handler"), 128),
                "lookup_key": _check_text(f"{where}: lookup_key", item.get("lookup_key"), 191),
            }
        checked = bulk.check_items(items, check)
        if not checked:
            return []
        try:
            outcomes = bulk.send_many(self, name, checked, chunk_size)
        except (UnknownMachine, AccessDenied) as exc:
            raise self._explained(exc, f"fsm_{name}_send_many_v2") from exc.__cause__
        events = _Events(self, name)  # read only for a refused event
        return [self._event_checked(o, events, find_instance=True) if type(o) is TransitionNotAllowed else o
                for o in outcomes]

    # -- locks ----------------------------------------------------------------------------

    def lock(
        self, machine: str | Machine, key: str, *, owner: str | None = None, lease_seconds: float | None = None,
        attempts: int = 5, backoff: float = 0.02, heartbeat: bool = True,
    ) -> Lease:
        """Take the locks instance ``key``'s type uses (global, then local) and return the Lease.

        Fails fast: ``attempts`` tries with ``backoff`` doubling (jittered) between them,
        about 0.6 s in all by default, then LockNotAcquired naming the holder
        (``err.fields["holders"]``). ``lease_seconds`` defaults to the definition's
        lock_lease_seconds; with ``heartbeat`` a thread renews the lease every third of it.
        The lease keeps one pooled connection until it is released (use ``with``).
        """
        name = _machine_name(machine)
        if not isinstance(heartbeat, bool):
            raise InvalidArgument(f"heartbeat must be True or False, got {heartbeat!r:.80}")
        self._ensure_schema()
        try:
            return acquire(self, name, _check_key("key", key), owner=owner, lease_seconds=lease_seconds,
                           attempts=attempts, backoff=backoff, heartbeat=heartbeat)
        except (UnknownMachine, AccessDenied) as exc:
            raise self._explained(exc) from exc.__cause__

    def locks(self, *, lookup_key: str | None = None) -> list[HeldLock]:
        """Every lock held now (fsm_held_locks_v1), oldest first; optionally of one lookup key."""
        _check_text("lookup_key", lookup_key, 191)
        return [HeldLock.from_row(r) for r in self._rows("fsm_locks_v1", (lookup_key,))]

    def force_unlock(self, lookup_key: str, *, reason: str, scope: str | None = None) -> list[HeldLock]:
        """Release the held locks of ``lookup_key`` whatever their owner (``scope``: "*" for the
        global lock, a machine type for its local lock, None for both); recorded in fsm_lock_log.
        Returns what was released."""
        _check_key("lookup_key", lookup_key)
        if scope is not None and scope != "*":
            check_machine_name(scope)
        _check_text("reason", reason, 255, required=True)
        # a write: a lost reply is not repeated (the repeat would report nothing released)
        rows = self._rows("fsm_force_unlock_v2", (scope, lookup_key, reason), writes=True)
        return [HeldLock.from_row({**r, "kind": "global" if r["scope"] == "*" else "local", "since": r["expires_at"],
                                   "connection_id": None}) for r in rows]

    def set_locking(self, machine: str | Machine, key: str, *, global_lock: bool | None = None,
                    local_lock: bool | None = None) -> Instance:
        """Override, for one instance, whether it uses the global and the local lock (None keeps)."""
        name = _machine_name(machine)
        for what, value in (("global_lock", global_lock), ("local_lock", local_lock)):
            if value is not None and not isinstance(value, bool):
                raise InvalidArgument(f"{what} must be True, False or None, got {value!r:.80}")
        self._call("fsm_set_locking_v1", (name, _check_key("key", key), global_lock, local_lock), writes=True,
                   machine=name, key=key)
        return self.get(name, key)

    # -- the handler engine's controls (see pyfsm.Process and pyfsm.Worker) ----------------

    def pause(self, machine: str | Machine, key: str) -> dict[str, Any]:
        """Pause an instance: at once if nobody runs it now, else at the next step boundary
        (``pending`` is True until then). A paused instance accepts no event but resume."""
        name = _machine_name(machine)
        row = self._call("fsm_pause_v1", (name, _check_key("key", key)), writes=True, machine=name, key=key)
        return {"state": row["state"], "status": row["status"], "pending": bool(row["pending"])}

    def resume(self, machine: str | Machine, key: str) -> dict[str, Any]:
        """Resume a paused instance where it paused (InvalidStatus if it is not paused)."""
        name = _machine_name(machine)
        row = self._call("fsm_resume_v1", (name, _check_key("key", key)), writes=True, machine=name, key=key)
        return {"state": row["state"], "status": row["status"]}

    def retry(self, machine: str | Machine, key: str) -> dict[str, Any]:
        """Run a failed instance again from the step that failed, with fresh attempts."""
        name = _machine_name(machine)
        row = self._call("fsm_retry_v1", (name, _check_key("key", key)), writes=True, machine=name, key=key)
        return {"state": row["state"], "status": row["status"]}

    def enqueue(self, machine: str | Machine, key: str, *, run_immediately: bool | None = None,
                delay_seconds: float | None = None) -> dict[str, Any]:
        """Make an instance due for the engine's workers (now, or after ``delay_seconds``);
        ``run_immediately`` overrides the process's setting for this instance."""
        name = _machine_name(machine)
        if run_immediately is not None and not isinstance(run_immediately, bool):
            raise InvalidArgument(f"run_immediately must be True, False or None, got {run_immediately!r:.80}")
        if delay_seconds is not None and (isinstance(delay_seconds, bool) or not isinstance(delay_seconds, (int, float))
                                          or not 0 <= delay_seconds <= MAX_DELAY_SECONDS):
            raise InvalidArgument(
                f"delay_seconds must be a number from 0 to {MAX_DELAY_SECONDS}, got {delay_seconds!r:.80}")
        return self._call("fsm_enqueue_v1", (name, _check_key("key", key), delay_seconds, run_immediately),
                          writes=True, machine=name, key=key)

    def failed(self, machine: str | Machine, *, after_id: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        """Failed instances with their last error, in id order (pass the last id as ``after_id``)."""
        name = _machine_name(machine)
        _check_int("after_id", after_id, minimum=0)
        _check_int("limit", limit, minimum=1, maximum=10000)
        return self._rows("fsm_failed_v1", (name, after_id, limit), machine=name)

    def errors(self, machine: str | Machine, key: str) -> list[dict[str, Any]]:
        """Every failed attempt recorded for an instance (fsm_errors), oldest first."""
        name = _machine_name(machine)
        return self._rows("fsm_errors_v1", (name, _check_key("key", key)), machine=name, key=key)

    def run_info(self, machine: str | Machine, key: str) -> dict[str, Any] | None:
        """The instance's row in the engine's queue (due_at = its next run time, claimed_by,
        attempt, pause_requested, run_immediately), or None if the engine does not run it."""
        name = _machine_name(machine)
        rows = self._rows("fsm_run_info_v1", (name, _check_key("key", key)), machine=name, key=key)
        return rows[0] if rows else None

    # -- reads ----------------------------------------------------------------------------

    def get(self, machine: str | Machine, key: str) -> Instance:
        """One instance by key (UnknownInstance if there is none)."""
        name = _machine_name(machine)
        row = self._call(f"fsm_{name}_get_v1", (_check_key("key", key),), read=True, machine=name, key=key)
        return Instance.from_row(row)

    def history(self, machine: str | Machine, key: str) -> list[HistoryEntry]:
        """An instance's history, oldest first (its creation is the first entry)."""
        name = _machine_name(machine)
        rows = self._stale_rows(f"fsm_{name}_history_v1", (_check_key("key", key),), machine=name, key=key)
        return [HistoryEntry.from_row(r) for r in rows]

    def in_state(self, machine: str | Machine, state: str, *, after_id: int = 0, limit: int = 100) -> list[Instance]:
        """Instances in ``state`` ordered by id; pass the last id as ``after_id`` for the next page."""
        name = _machine_name(machine)
        _check_int("after_id", after_id, minimum=0)
        _check_int("limit", limit, minimum=1, maximum=10000)
        rows = self._stale_rows(f"fsm_{name}_in_state_v1", (_check_name("state", state), after_id, limit),
                                machine=name, state=state)
        return [Instance.from_row(r) for r in rows]

    def instances_in_state(self, state: str, *, after: tuple[str, int] | None = None,
                           limit: int = 100) -> list[Instance]:
        """Instances of every machine type in ``state``, ordered by machine, then id
        (fsm_instances_in_state_v1: each type's index, never a sort of the whole state).

        A page at a time: pass the last instance's ``(instance.machine, instance.id)`` as
        ``after`` for the next page; a page shorter than ``limit`` (1-10000) is the last.
        InvalidArgument if no machine type has the state.
        """
        _check_name("state", state)
        after_machine, after_id = _check_after("after", after, (str, int))
        if after_machine is not None:
            check_machine_name(after_machine)
            _check_int("after: id", after_id, minimum=0)
        _check_int("limit", limit, minimum=1, maximum=10000)
        rows = self._stale_rows("fsm_instances_in_state_v1", (state, after_machine, after_id, limit), state=state)
        return [Instance.from_row(r) for r in rows]

    def account_history(self, lookup_key: str, *, newest_first: bool = True,
                        after: tuple[datetime, str, int] | None = None, limit: int = 100) -> list[AccountHistoryEntry]:
        """The history of every instance of one account (``lookup_key``), all machine types,
        ordered by time (fsm_account_history_v1): newest first, or oldest first.

        A page at a time: pass the last entry's ``cursor`` (entered_at, machine, id) as
        ``after`` for the next page; a page shorter than ``limit`` (1-10000) is the last.
        An account with no instance has no history (an empty list). Naive datetimes are UTC.
        """
        _check_key("lookup_key", lookup_key)
        if not isinstance(newest_first, bool):
            raise InvalidArgument(f"newest_first must be True or False, got {newest_first!r:.80}")
        after_at, after_machine, after_id = _check_after("after", after, (datetime, str, int))
        if after_at is not None:
            after_at = _naive_utc("after: entered_at", after_at)
            check_machine_name(after_machine)
            _check_int("after: id", after_id, minimum=0)
        _check_int("limit", limit, minimum=1, maximum=10000)
        rows = self._stale_rows("fsm_account_history_v1",
                                (lookup_key, int(newest_first), after_at, after_machine, after_id, limit))
        return [AccountHistoryEntry.from_row(r) for r in rows]

    def counts(self, machine: str | Machine) -> dict[str, int]:
        """How many instances are in each state (states with none are left out)."""
        name = _machine_name(machine)
        return {r["state"]: int(r["instances"]) for r in self._stale_rows("fsm_counts_v2", (name,), machine=name)}

    def state_at(self, machine: str | Machine, key: str, at: datetime) -> dict[str, Any] | None:
        """The state instance ``key`` was in at ``at`` (naive datetimes are UTC): a dict with
        state, sort_key, event, entered_at and left_at (None: still there), or None if the
        instance did not exist yet then."""
        name = _machine_name(machine)
        at = _naive_utc("at", at)
        rows = self._stale_rows("fsm_state_at_v1", (name, _check_key("key", key), at), machine=name, key=key)
        if not rows:
            return None
        return {**rows[0], "entered_at": _utc(rows[0]["entered_at"]), "left_at": _utc(rows[0]["left_at"])}

    def stats(self) -> list[dict[str, Any]]:
        """One dict per installed machine type: instances, running, waiting, paused, failed,
        completed, due and claimed runs, unpublished outbox events (fsm_stats_v2)."""
        return self._stale_rows("fsm_stats_v2", ())

    # -- plumbing -------------------------------------------------------------------------

    def _rows(self, procedure: str, args: tuple[Any, ...], *, writes: bool = False,
              **context: Any) -> list[dict[str, Any]]:
        """Every row of a CALL; a read retries a lost connection, a write does not."""
        self._ensure_schema()
        try:
            return self._db.call(db.call_sql(procedure, len(args)), args, retry_connection=not writes,
                                 writes=writes, **context)
        except (UnknownMachine, AccessDenied) as exc:
            raise self._explained(exc, procedure) from exc.__cause__

    def _stale_rows(self, procedure: str, args: tuple[Any, ...], **context: Any) -> list[dict[str, Any]]:
        """Every row of a read that may lag the primary: on the replica when there is one."""
        try:
            return self._stale_db().call(db.call_sql(procedure, len(args)), args, retry_connection=True,
                                         writes=False, **context)
        except (UnknownMachine, AccessDenied) as exc:
            raise self._explained(exc, procedure) from exc.__cause__

    def _primary_db(self) -> db.Database:
        """The primary's pool, once it is known to have this pyfsm's schema."""
        self._ensure_schema()
        return self._db

    def _stale_db(self) -> db.Database:
        """Where reads that may lag the primary go: the replica, once it is known to have this
        pyfsm's schema (SchemaVersionMismatch otherwise), or the primary when there is none."""
        if self._replica is None:
            return self._primary_db()
        if not self._replica_schema_ok:
            with self._lock:  # the replica must have caught up with the primary's migration
                found = self._replica.read(schema.current_revision)
                if found != schema.HEAD_REVISION:
                    replica = self._replica.settings
                    raise SchemaVersionMismatch(
                        f"the read replica at {replica.host}:{replica.port} has pyfsm schema {found or 'none'}, "
                        f"this pyfsm needs {schema.HEAD_REVISION}: migrate the primary and let the replica catch up",
                        found=found, expected=schema.HEAD_REVISION)
                self._replica_schema_ok = True
        return self._replica

    def _call(
        self, procedure: str, args: tuple[Any, ...], *, read: bool = False, writes: bool = False,
        retry_connection: bool = False, **context: Any,
    ) -> dict[str, Any]:
        self._ensure_schema()
        try:
            rows = self._db.call(db.call_sql(procedure, len(args)), args,
                                 retry_connection=read or retry_connection, writes=writes, **context)
        except (UnknownMachine, AccessDenied) as exc:
            raise self._explained(exc, procedure) from exc.__cause__
        return rows[0]

    def _instance_or_none(self, machine: str, key: str) -> Instance | None:
        try:
            return self.get(machine, key)
        except FsmError:  # the state is a courtesy on an error path; never mask the real error
            return None

    # -- clearer errors, read only when a call has failed -----------------------------------

    def _explained(self, err: FsmError, procedure: str | None = None) -> FsmError:
        """``err``, or, when no machine type of its name is defined at all, UnknownMachine
        (31002) naming the installed types instead. The server's answers cannot tell a
        misspelt type from one whose objects are missing or older than this pyfsm, which
        `pyfsm sync` fixes (and ``err`` says so): 1305 (no such procedure), 31002 (from the
        generic procedures), and, for an account with EXECUTE rights only, 1370 on a
        per-type ``procedure`` (EXECUTE denied: it has no right on a routine that does not
        exist). Read only after a call failed; a failure to read keeps ``err``."""
        name = err.machine
        if name is None or "installed" in err.fields:
            return err
        per_type = procedure is not None and procedure.startswith(f"fsm_{name}_") \
            and procedure[len(name) + 5:] in PER_TYPE_PROCEDURES
        if isinstance(err, AccessDenied) and (err.errno != 1370 or not per_type):
            return err  # e.g. an app account may not call fsm_define_v5: that stays AccessDenied
        try:
            defined, installed = self._types(name)
        except FsmError:
            return err
        context: dict[str, Any] = {"key": err.key, "event": err.event, "state": err.state}
        if not defined:
            return unknown_type(name, installed, **context)
        if isinstance(err, AccessDenied) and name not in installed:  # what 1305 says to the owner
            return UnknownMachine(f"machine type {name!r} is defined but not installed: run `pyfsm sync {name}` "
                                  "(or Store.sync) as the owner of pyfsm's schema", machine=name,
                                  installed=installed, **context)
        return err

    def _types(self, name: str) -> tuple[bool, list[str]]:
        """Whether a machine type ``name`` is defined, and the installed types. The owner and
        reporting accounts read fsm_v_definitions; an app account (EXECUTE only) asks
        fsm_definition_v1, and fsm_stats_v2 for the installed types."""
        def read(conn: Any) -> Any:
            with conn.cursor() as cur:
                cur.execute(TYPES_SQL)
                return cur.fetchall()
        try:
            rows = self._db.read(read)
        except AccessDenied:
            try:
                self._db.call(db.call_sql("fsm_definition_v1", 2), (name, None), retry_connection=True, writes=False)
                defined = True
            except UnknownMachine:
                defined = False
            stats = self._db.call(db.call_sql("fsm_stats_v2", 0), (), retry_connection=True, writes=False)
            return defined, [str(r["machine"]) for r in stats]
        return any(machine == name for machine, _installed in rows), [str(m) for m, installed in rows if installed]

    def _event_checked(self, err: TransitionNotAllowed, events: _Events, instance: Instance | None = None, *,
                       find_instance: bool = False) -> TransitionNotAllowed:
        """``err``, or UnknownEvent when the definition the instance follows has no event
        ``err.event`` at all (the current definition when there is no instance). Read only
        after the server refused an event; a failure to read keeps ``err``. ``events``: the
        definitions read so far, shared by the refusals of one send_many. ``find_instance``:
        read the instance when the current definition lacks the event and is not the first
        version (an older instance may follow another)."""
        event = err.event
        if err.machine != events.machine or event is None:
            return err
        known = events.of(None if instance is None else instance.definition_version)
        if find_instance and known is not None and event not in known and events.current_version != 1:
            instance = self._instance_or_none(events.machine, err.key) if err.key is not None else None
            if instance is not None:
                known = events.of(instance.definition_version)
        if known is None or event in known:
            return err
        older = instance is not None and instance.definition_version != events.current_version
        which = f" (version {instance.definition_version}, which {err.key} follows)" if older and instance else ""
        better = UnknownEvent(
            f"machine type {events.machine!r}{which} has no event {event!r}; its events: {', '.join(known) or 'none'}",
            machine=events.machine, key=err.key, event=event, state=err.state, events=known)
        better.__cause__ = err.__cause__
        return better


class _Events:
    """A machine type's events per definition version, read on an error path only (through
    fsm_definition_v1, which an app account may call) and kept for the one call."""

    def __init__(self, store: Store, machine: str) -> None:
        self.store, self.machine = store, machine
        self.current_version: int | None = None
        self._by_version: dict[int | None, list[str] | None] = {}

    def of(self, version: int | None) -> list[str] | None:
        """The events of ``version`` (None: the current one) in definition order; None if unreadable."""
        if version not in self._by_version:
            try:
                found = self.store.definition(self.machine, version)
                transitions = found["definition"].get("transitions", [])
                self._by_version[version] = list(dict.fromkeys(str(t["event"]) for t in transitions))
                if found["is_current"]:
                    self.current_version = int(found["version"])
            except (FsmError, KeyError, TypeError, AttributeError, ValueError):
                self._by_version[version] = None
        return self._by_version[version]


#: The per-type procedures the Store calls, fsm_<type>_...: an account with EXECUTE rights only
#: is denied one that does not exist (1370), as it is denied any routine it has no right on.
PER_TYPE_PROCEDURES = frozenset({"create_v1", "send_v2", "send_many_v2", "get_v1", "history_v1", "in_state_v1"})

#: The defined machine types and whether their objects are installed, for UnknownMachine's message.
TYPES_SQL = "SELECT machine, installed FROM fsm_v_definitions WHERE is_current ORDER BY machine"


def unknown_type(name: str, installed: Iterable[str], **context: Any) -> UnknownMachine:
    """UnknownMachine (31002) for a machine type that is not defined, naming the installed ones."""
    listed = sorted(installed)
    return UnknownMachine(f"no machine type {name!r}; installed: {', '.join(listed) or 'none'}",
                          machine=name, installed=listed, **context)


def _dsn_hint(settings: db.Settings) -> str:
    servers = ",".join(db.where(host, port) for host, port in settings.hosts)
    return "$PYFSM_DSN" if not settings.database else f"mysql://...@{servers}/{settings.database}"


def _machine_name(machine: str | Machine) -> str:
    return check_machine_name(machine.name if isinstance(machine, Machine) else machine)


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise InvalidArgument(f"{what} must match [a-z][a-z0-9_]* and have at most 64 characters, got {value!r:.80}")
    return value


def _check_key(what: str, value: object) -> str:
    return _check_text(what, value, 191, required=True)  # type: ignore[return-value]


def _check_text(what: str, value: object, maximum: int, *, required: bool = False) -> str | None:
    """Keys, request ids and the like: 1..maximum characters of valid Unicode, no trailing space.

    A trailing space is refused because utf8mb4_bin pads: 'k ' and 'k' are the same key.
    """
    if value is None and not required:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= maximum or value.endswith(" "):
        raise InvalidArgument(
            f"{what} must be a string of 1 to {maximum} characters not ending in a space, got {value!r:.80}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidEncoding(f"{what} is not valid Unicode (lone surrogate): {value!r:.80}") from None
    return value


def _check_int(what: str, value: object, *, minimum: int, maximum: int = MAX_BIGINT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidArgument(f"{what} must be an integer from {minimum} to {maximum}, got {value!r:.80}")
    return value


def _naive_utc(what: str, value: object) -> datetime:
    """A datetime as the naive UTC time the procedures take (a naive one is UTC already)."""
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        return value
    try:
        return value.astimezone(UTC).replace(tzinfo=None)
    except (OverflowError, ValueError, TypeError) as exc:  # the calendar's edge, or a broken tzinfo
        raise InvalidArgument(f"{what} {value!r:.80} has no UTC time a datetime can hold: {exc}") from None


def _check_after(what: str, value: object, kinds: tuple[type, ...]) -> tuple[Any, ...]:
    """A page cursor: None (the first page), or a tuple (or list) of those kinds: the last row's."""
    if value is None:
        return (None,) * len(kinds)
    if (not isinstance(value, (tuple, list)) or len(value) != len(kinds)
            or any(isinstance(v, bool) or not isinstance(v, k) for v, k in zip(value, kinds, strict=False))):
        names = ", ".join(k.__name__ for k in kinds)
        raise InvalidArgument(f"{what} must be None or the last row's cursor ({names}), got {value!r:.80}")
    return tuple(value)


def _dump(what: str, value: Mapping[str, Any] | None, limit: int) -> str | None:
    """Serialize a JSON object before any SQL runs; refuse what JSON cannot hold."""
    return None if value is None else dump_object(what, value, limit)
