"""The Python facade: a Store holds a connection pool and calls pyfsm's procedures.

Every method is one CALL (one round trip). Arguments are validated here first so that bad
input fails before any SQL runs; the procedures check again for callers that bypass Python.

Why over 500 lines: the Store is the public face, one documented method per procedure (about
30), each a few lines of argument checks and result shaping; what is not the facade lives
below it (argument checks in pyfsm.checks, calls in pyfsm.gateway, results in pyfsm.models).
Splitting the methods across modules would scatter one class's documentation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from . import attach as attaching
from . import attach_health, bulk, db, timers, versions
from .attach import AdoptionReport, Attachment, AttachPlan
from .checks import check_after, check_int, check_key, check_name, check_text, dump, machine_name, naive_utc
from .db.driver import errors as pymysql_errors
from .definition import Machine
from .errors import (
    AccessDenied,
    FsmError,
    InvalidArgument,
    TransitionNotAllowed,
    UnknownEvent,
    UnknownInstance,
    UnknownMachine,
)
from .gateway import Gateway
from .limits import (
    HANDLER_CHARS,
    KEY_CHARS,
    MAX_DATA_BYTES,
    MAX_DELAY_SECONDS,
    MAX_METADATA_BYTES,
    PAGE_ROWS,
    REASON_CHARS,
    REQUEST_ID_CHARS,
)
from .locks import HeldLock, Lease, LeaseConnections, acquire
from .models import (
    AccountHistoryEntry,
    AllowedEvent,
    AttemptError,
    CancelledTimer,
    DefineResult,
    FailedInstance,
    HistoryEntry,
    Instance,
    PauseResult,
    QueuedRun,
    RunInfo,
    ScheduledTimer,
    StatePeriod,
    StatusChange,
    StoredDefinition,
    Timer,
    TimerOutcome,
    TransitionResult,
    TypeStats,
    allowed_events,
)
from .schema import attached as attached_schema
from .schema import install as schema
from .schema import routines
from .schema.resources import check_machine_name
from .schema.routines import Routine
from .versions import UpgradeReport, VersionCount


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
        self,
        dsn: str | None = None,
        *,
        pool_size: int = 8,
        read_timeout: float | None = None,
        write_timeout: float | None = None,
        read_dsn: str | None = None,
    ) -> None:
        self.settings = db.parse_dsn(dsn).with_timeouts(read_timeout=read_timeout, write_timeout=write_timeout)
        if not self.settings.database:
            raise InvalidArgument("the DSN names no database: mysql://user:password@host:port/DATABASE")
        self.read_settings: db.Settings | None = None
        if read_dsn is not None:
            if not isinstance(read_dsn, str) or not read_dsn:
                raise InvalidArgument(f"read_dsn must be a mysql:// DSN, got {read_dsn!r:.80}")
            # reads may go to any node of a Galera cluster: only writes need its writer node
            self.read_settings = replace(
                db.parse_dsn(read_dsn).with_timeouts(read_timeout=read_timeout, write_timeout=write_timeout),
                galera_writes="any",
            )
            if not self.read_settings.database:
                raise InvalidArgument("the read DSN names no database: mysql://user:password@host:port/DATABASE")
        #: pyfsm's internal layer (pools, the schema check, calls by routine): the engine, locks,
        #: send_many, the console and the metrics use it; not a stable API for applications.
        self.gateway = Gateway(self.settings, self.read_settings, pool_size=pool_size)
        self._lease_connections = LeaseConnections(self.settings, keep=pool_size)

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        self.gateway.close()
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
        self.gateway.schema_changed()

    # -- definitions ----------------------------------------------------------------------

    def define(self, machine: Machine) -> DefineResult:
        """Store ``machine``'s definition and create its tables and triggers if missing (or
        bring them up to date when an older pyfsm installed them). For a type attached to a
        table whose state column cannot hold one of its states (an ENUM lacking it, a VARCHAR
        too short): StateColumnUnsupported (31036), nothing stored.

        An identical definition changes nothing; a changed one becomes a new version, used
        by instances created from now on, whose rules are then rendered into the type's
        transition trigger (what :meth:`sync` does).
        """
        if not isinstance(machine, Machine):
            raise InvalidArgument("define() takes a pyfsm.Machine")
        # an attached type's table must hold every state: refused before anything is stored
        attach_health.refuse_unholdable_states(self.gateway, machine.name, machine.states)
        row = self.gateway.call_one(
            routines.DEFINE, (machine.name, machine.to_json()), machine=machine.name, retry_connection=False
        )
        if not row["tables_ready"] or self._objects_outdated(machine.name):
            self.sync(machine.name)
        return DefineResult(machine.name, int(row["version"]), bool(row["changed"]))

    def _objects_outdated(self, name: str) -> bool:
        """Whether the type's tables, triggers and procedures are an older set than this pyfsm's
        (an older pyfsm installed it, say during a rolling upgrade): define() then brings them
        up to date. An account that may not read fsm_machines (`pyfsm grant`'s app role) cannot
        install them either; it learns of them when a call names the missing procedure."""

        try:
            found = self.gateway.query("type_objects_version", (name,))
        except AccessDenied:
            return False
        return bool(found) and found[0]["objects_version"] != schema.MACHINE_OBJECTS_VERSION

    def sync(self, machine: str) -> None:
        """Create the per-type tables, triggers and procedures of a stored definition.

        Needed after a DBA defined a new machine with ``CALL fsm_define_v8``, or gave a type
        its first state timeouts (its timer triggers, and timers for instances already in such a
        state): MySQL cannot create triggers from a procedure. After a DBA stored a new version of
        a type, it renders that version's rules into the type's transition trigger (the fast
        path; until then they are looked up in fsm_rules, and fsm_define_v8's tables_ready is 0).
        """
        name = check_machine_name(machine)
        self.definition(name)  # raises UnknownMachine if there is no stored definition
        conn = db.connect(self.settings)
        try:
            schema.install_machine_objects(conn, name)
            recorded = attached_schema.recorded(conn, name)
            if recorded is not None:  # a DBA's fsm_attach_v1: its triggers are created here
                attached_schema.install(conn, recorded)
        except pymysql_errors.MySQLError as exc:
            err = db.translate(exc)
            if isinstance(err, AccessDenied):
                raise AccessDenied(
                    f"installing {name}'s tables, triggers and views needs the schema owner's rights "
                    f"(CREATE, TRIGGER, CREATE ROUTINE, CREATE VIEW, GRANT): run `pyfsm sync {name}` as the owner "
                    f"({err})",
                    errno=err.errno,
                    machine=name,
                ) from exc
            if err is exc:
                raise
            raise err from exc
        finally:
            conn.close()

    def definition(self, machine: str | Machine, version: int | None = None) -> StoredDefinition:
        """A stored definition (current version by default): its body as a dict, its version."""
        name = machine_name(machine)
        if version is not None:
            check_int("version", version, minimum=1, maximum=2**31 - 1)
        row = self.gateway.call_one(routines.DEFINITION, (name, version), retry_connection=True, machine=name)
        return StoredDefinition.from_row(row)

    # -- writes ---------------------------------------------------------------------------

    def create(
        self,
        machine: str | Machine,
        key: str,
        *,
        state: str | None = None,
        data: Mapping[str, Any] | None = None,
        lookup_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> TransitionResult:
        """Create an instance in a start state (default: the first one)."""
        name = machine_name(machine)
        args = (
            check_key("key", key),
            check_name("state", state) if state is not None else None,
            dump("data", data, MAX_DATA_BYTES),
            dump("metadata", metadata, MAX_METADATA_BYTES),
            check_text("request_id", request_id, REQUEST_ID_CHARS),
            check_text("lookup_key", lookup_key, KEY_CHARS),
        )
        row = self.gateway.call_one(
            routines.CREATE,
            args,
            writes=True,
            retry_connection=request_id is not None,
            machine=name,
            key=key,
            state=state,
        )
        return TransitionResult.from_row(row)

    def send(
        self,
        machine: str | Machine,
        key: str,
        event: str,
        *,
        data: Mapping[str, Any] | None = None,
        data_patch: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        request_id: str | None = None,
        handler: str | None = None,
        lookup_key: str | None = None,
        lease: Lease | None = None,
    ) -> TransitionResult:
        """Apply ``event`` to the instance ``key`` in one transaction.

        ``data`` replaces the instance's data (None keeps it). ``data_patch`` changes part of
        it instead: a JSON merge patch (RFC 7396: a key set to None is removed, a nested
        mapping is merged key by key, any other value replaces) applied by the database in the
        transition's own transaction, so the guards judge the merged data and no concurrent
        change is lost. Give one of the two (both: InvalidArgument). A key with no instance is
        created when a start state allows the event (``lookup_key`` is used then), else
        UnknownInstance. An event the type does not have at all (a misspelling) is
        UnknownEvent, listing its events, whether the key has an instance or not.
        ``expected_version``: 0 means the instance must not exist yet; N means its version
        must be N, else Conflict. A call carrying ``request_id`` is safe to repeat: the
        repeat returns the original transition with ``replayed=True``, and a lost
        connection is retried for it.

        ``lease``: send as the holder of that :meth:`lock` (through its connection). For a
        type that uses locks, a transition while another owner holds the lock raises LockHeld.
        """
        name = machine_name(machine)
        routine: Routine
        call_args: tuple[Any, ...]
        if (
            data is None
            and data_patch is None
            and metadata is None
            and expected_version is None
            and request_id is None
            and handler is None
            and lookup_key is None
        ):
            # nothing but key and event: fire_v2, the same answers as send_v5 at a lower database
            # cost (and the fewest checks here: this is the call a worker makes most)
            _check_lease(lease)
            routine, call_args = routines.FIRE, (check_key("key", key), check_name("event", event))
        else:
            if expected_version is not None:
                check_int("expected_version", expected_version, minimum=0)
            _check_lease(lease)
            if data is not None and data_patch is not None:
                raise InvalidArgument("give data (it replaces the data) or data_patch (it is merged into it), not both")
            routine, call_args = (
                routines.SEND,
                (
                    check_key("key", key),
                    check_name("event", event),
                    dump("data", data, MAX_DATA_BYTES),
                    dump("metadata", metadata, MAX_METADATA_BYTES),
                    expected_version,
                    check_text("request_id", request_id, REQUEST_ID_CHARS),
                    check_text("handler", handler, HANDLER_CHARS),
                    check_text("lookup_key", lookup_key, KEY_CHARS),
                    dump("data_patch", data_patch, MAX_DATA_BYTES),
                ),
            )
        try:
            if lease is not None:
                row = lease.call(routine, call_args, writes=True, machine=name, key=key, event=event)[0]
            else:
                row = self.gateway.call_one(
                    routine,
                    call_args,
                    writes=True,
                    retry_connection=request_id is not None,
                    machine=name,
                    key=key,
                    event=event,
                )
        except TransitionNotAllowed as exc:
            instance = self._instance_or_none(name, key)
            exc.state = None if instance is None else instance.state
            events = _Events(self, name)
            if not isinstance(exc, UnknownEvent):  # send_v5 (or fire_v2) looked the event up: the type has it
                raise _explained(exc, events, instance) from exc.__cause__
            # 31028: the events in definition order, and the version the instance follows
            raise self._event_checked(exc, events, instance) from exc.__cause__
        except UnknownInstance as exc:
            raise _explained(exc, _Events(self, name), None) from exc.__cause__
        return TransitionResult.from_send_row(row, key, event)

    def send_many(
        self, machine: str | Machine, items: Iterable[Any], *, chunk_size: int = 100
    ) -> list[TransitionResult | FsmError]:
        """Send many events in chunks: one call, one transaction and one commit per chunk.

        ``items``: ``(key, event)`` pairs or mappings with ``key``, ``event`` and any of
        ``data``, ``data_patch``, ``metadata``, ``expected_version``, ``request_id``,
        ``handler``, ``lookup_key`` (as :meth:`send`). Every item is checked before anything is sent
        (InvalidArgument / InvalidData naming the item otherwise). Returns one outcome per
        item, in order: its TransitionResult, or the error that refused it (not raised). Each
        item is applied or refused alone, with every check :meth:`send` makes; items of one
        key are applied in the order given. A chunk the server rolled back as a whole (a
        deadlock that lasted through pyfsm's retries) gives each of its items that Deadlock.
        A lost connection raises DatabaseUnavailable (``fields["outcomes"]``: the chunks
        committed before it), except for a chunk whose items all carry request ids, which
        is repeated. ``chunk_size``: 1 to 1000 items per call (default 100).
        """
        name = machine_name(machine)
        check_int("chunk_size", chunk_size, minimum=1, maximum=bulk.MAX_CHUNK)

        def check(position: int, item: dict[str, Any]) -> dict[str, Any]:
            where = f"item {position}"
            if item.get("expected_version") is not None:
                check_int(f"{where}: expected_version", item["expected_version"], minimum=0)
            # checked as send checks them, and sent as the objects they are
            dump(f"{where}: data", item.get("data"), MAX_DATA_BYTES)
            dump(f"{where}: data_patch", item.get("data_patch"), MAX_DATA_BYTES)
            dump(f"{where}: metadata", item.get("metadata"), MAX_METADATA_BYTES)
            if item.get("data") is not None and item.get("data_patch") is not None:
                raise InvalidArgument(f"{where}: give data or data_patch, not both")
            return {
                "key": check_key(f"{where}: key", item["key"]),
                "event": check_name(f"{where}: event", item["event"]),
                "data": item.get("data"),
                "data_patch": item.get("data_patch"),
                "metadata": item.get("metadata"),
                "expected_version": item.get("expected_version"),
                "request_id": check_text(f"{where}: request_id", item.get("request_id"), REQUEST_ID_CHARS),
                "handler": check_text(f"{where}: handler", item.get("handler"), HANDLER_CHARS),
                "lookup_key": check_text(f"{where}: lookup_key", item.get("lookup_key"), KEY_CHARS),
            }

        checked = bulk.check_items(items, check)
        if not checked:
            return []
        outcomes = bulk.send_many(self.gateway, name, checked, chunk_size)
        events = _Events(self, name)  # read only for a refused event
        # send_many_v3 answers an event the type does not have with 31005 (a key with an
        # instance) or 31003 (a key without): UnknownEvent, as send_v5 answers send
        return [
            self._event_checked(o, events, find_instance=True)
            if type(o) is TransitionNotAllowed or type(o) is UnknownInstance
            else o
            for o in outcomes
        ]

    # -- locks ----------------------------------------------------------------------------

    def lock(
        self,
        machine: str | Machine,
        key: str,
        *,
        owner: str | None = None,
        lease_seconds: float | None = None,
        attempts: int = 5,
        backoff: float = 0.02,
        heartbeat: bool = True,
    ) -> Lease:
        """Take the locks instance ``key``'s type uses (global, then local) and return the Lease.

        Fails fast: ``attempts`` tries with ``backoff`` doubling (jittered) between them,
        about 0.6 s in all by default, then LockNotAcquired naming the holder
        (``err.fields["holders"]``). ``lease_seconds`` defaults to the definition's
        lock_lease_seconds; with ``heartbeat`` a thread renews the lease every third of it.
        The lease keeps one pooled connection until it is released (use ``with``).
        """
        name = machine_name(machine)
        if not isinstance(heartbeat, bool):
            raise InvalidArgument(f"heartbeat must be True or False, got {heartbeat!r:.80}")
        self.gateway.ensure_schema()
        try:
            return acquire(
                self.gateway,
                self._lease_connections,
                name,
                check_key("key", key),
                owner=owner,
                lease_seconds=lease_seconds,
                attempts=attempts,
                backoff=backoff,
                heartbeat=heartbeat,
                send=self.send,
            )
        except (UnknownMachine, AccessDenied) as exc:
            raise self.gateway.explained(exc) from exc.__cause__

    def locks(self, *, lookup_key: str | None = None) -> list[HeldLock]:
        """Every lock held now (fsm_held_locks_v1), oldest first; optionally of one lookup key."""
        check_text("lookup_key", lookup_key, KEY_CHARS)
        return [HeldLock.from_row(r) for r in self.gateway.call(routines.LOCKS, (lookup_key,))]

    def force_unlock(self, lookup_key: str, *, reason: str, scope: str | None = None) -> list[HeldLock]:
        """Release the held locks of ``lookup_key`` whatever their owner (``scope``: "*" for the
        global lock, a machine type for its local lock, None for both); recorded in fsm_lock_log.
        Returns what was released."""
        check_key("lookup_key", lookup_key)
        if scope is not None and scope != "*":
            check_machine_name(scope)
        check_text("reason", reason, REASON_CHARS, required=True)
        # a write: a lost reply is not repeated (the repeat would report nothing released)
        rows = self.gateway.call(routines.FORCE_UNLOCK, (scope, lookup_key, reason), writes=True)
        return [
            HeldLock.from_row(
                {
                    **r,
                    "kind": "global" if r["scope"] == "*" else "local",
                    "since": r["expires_at"],
                    "connection_id": None,
                }
            )
            for r in rows
        ]

    def set_locking(
        self, machine: str | Machine, key: str, *, global_lock: bool | None = None, local_lock: bool | None = None
    ) -> Instance:
        """Override, for one instance, whether it uses the global and the local lock (None keeps)."""
        name = machine_name(machine)
        for what, value in (("global_lock", global_lock), ("local_lock", local_lock)):
            if value is not None and not isinstance(value, bool):
                raise InvalidArgument(f"{what} must be True, False or None, got {value!r:.80}")
        self.gateway.call_one(
            routines.SET_LOCKING,
            (name, check_key("key", key), global_lock, local_lock),
            writes=True,
            machine=name,
            key=key,
        )
        return self.get(name, key)

    # -- the handler engine's controls (see pyfsm.Process and pyfsm.Worker) ----------------

    def pause(self, machine: str | Machine, key: str) -> PauseResult:
        """Pause an instance: at once if nobody runs it now, else at the next step boundary
        (``pending`` is True until then). A paused instance accepts no event but resume."""
        name = machine_name(machine)
        row = self.gateway.call_one(routines.PAUSE, (name, check_key("key", key)), writes=True, machine=name, key=key)
        return PauseResult(row["state"], row["status"], bool(row["pending"]))

    def resume(self, machine: str | Machine, key: str) -> StatusChange:
        """Resume a paused instance where it paused (InvalidStatus if it is not paused)."""
        name = machine_name(machine)
        row = self.gateway.call_one(routines.RESUME, (name, check_key("key", key)), writes=True, machine=name, key=key)
        return StatusChange(row["state"], row["status"])

    def retry(self, machine: str | Machine, key: str) -> StatusChange:
        """Run a failed instance again from the step that failed, with fresh attempts."""
        name = machine_name(machine)
        row = self.gateway.call_one(routines.RETRY, (name, check_key("key", key)), writes=True, machine=name, key=key)
        return StatusChange(row["state"], row["status"])

    def enqueue(
        self,
        machine: str | Machine,
        key: str,
        *,
        run_immediately: bool | None = None,
        delay_seconds: float | None = None,
    ) -> QueuedRun:
        """Make an instance due for the engine's workers (now, or after ``delay_seconds``);
        ``run_immediately`` overrides the process's setting for this instance."""
        name = machine_name(machine)
        if run_immediately is not None and not isinstance(run_immediately, bool):
            raise InvalidArgument(f"run_immediately must be True, False or None, got {run_immediately!r:.80}")
        if delay_seconds is not None and (
            isinstance(delay_seconds, bool)
            or not isinstance(delay_seconds, (int, float))
            or not 0 <= delay_seconds <= MAX_DELAY_SECONDS
        ):
            raise InvalidArgument(
                f"delay_seconds must be a number from 0 to {MAX_DELAY_SECONDS}, got {delay_seconds!r:.80}"
            )
        row = self.gateway.call_one(
            routines.ENQUEUE,
            (name, check_key("key", key), delay_seconds, run_immediately),
            writes=True,
            machine=name,
            key=key,
        )
        return QueuedRun.from_row(row)

    def failed(self, machine: str | Machine, *, after_id: int = 0, limit: int = 100) -> list[FailedInstance]:
        """Failed instances with their last error, in id order (pass the last id as ``after_id``)."""
        name = machine_name(machine)
        check_int("after_id", after_id, minimum=0)
        check_int("limit", limit, minimum=1, maximum=PAGE_ROWS)
        return [
            FailedInstance.from_row(r)
            for r in self.gateway.call(routines.FAILED, (name, after_id, limit), machine=name)
        ]

    def errors(self, machine: str | Machine, key: str) -> list[AttemptError]:
        """Every failed attempt recorded for an instance (fsm_errors), oldest first."""
        name = machine_name(machine)
        rows = self.gateway.call(routines.ERRORS, (name, check_key("key", key)), machine=name, key=key)
        return [AttemptError.from_row(r) for r in rows]

    def run_info(self, machine: str | Machine, key: str) -> RunInfo | None:
        """The instance's row in the engine's queue (due_at = its next run time, claimed_by,
        attempt, pause_requested, run_immediately), or None if the engine does not run it."""
        name = machine_name(machine)
        rows = self.gateway.call(routines.RUN_INFO, (name, check_key("key", key)), machine=name, key=key)
        return RunInfo.from_row(rows[0]) if rows else None

    # -- timers (docs/timers.md) ------------------------------------------------------------

    def send_at(
        self,
        machine: str | Machine,
        key: str,
        event: str,
        *,
        at: datetime | None = None,
        after: float | timedelta | None = None,
        metadata: dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> ScheduledTimer:
        """Schedule ``event`` for an existing instance at ``at`` (naive: UTC) or ``after``
        seconds. It fires once, through the workers or `pyfsm timers run`; if the event is
        not allowed from the instance's state then, it is dropped and logged, not sent.
        UnknownEvent now if the event is not in the instance's definition at all."""
        return timers.send_at(
            self.gateway, machine, key, event, at=at, after=after, metadata=metadata, request_id=request_id
        )

    def cancel_timer(self, timer_id: int, reason: str | None = None) -> CancelledTimer:
        """Cancel an armed timer (UnknownTimer if it fired, was dropped or cancelled before)."""
        return timers.cancel(self.gateway, timer_id, reason)

    def timers(
        self,
        machine: str | Machine | None = None,
        key: str | None = None,
        *,
        overdue: bool = False,
        after_id: int = 0,
        limit: int = 100,
    ) -> list[Timer]:
        """Armed timers (state timeouts and scheduled events) in id order, optionally of one
        type, one instance, or only those past due (pass the last timer_id as ``after_id``)."""
        return timers.armed(self.gateway, machine, key, overdue=overdue, after_id=after_id, limit=limit)

    def fire_timers(
        self, *, owner: str | None = None, limit: int = 100, claim_seconds: float = 30.0
    ) -> list[TimerOutcome]:
        """Fire up to ``limit`` due timers now (what workers and `pyfsm timers run` do in a loop)."""
        return timers.fire(self.gateway, owner or timers.default_owner(), limit=limit, claim_seconds=claim_seconds)

    # -- reads ----------------------------------------------------------------------------

    def get(self, machine: str | Machine, key: str) -> Instance:
        """One instance by key (UnknownInstance if there is none)."""
        name = machine_name(machine)
        try:
            row = self.gateway.call_one(
                routines.GET, (check_key("key", key),), retry_connection=True, machine=name, key=key
            )
        except UnknownInstance as exc:
            raise _explained(exc, _Events(self, name), None) from exc.__cause__
        return Instance.from_row(row)

    def allowed_events(self, machine: str | Machine, key: str) -> list[AllowedEvent]:
        """The events of the instance's current state (by name), each with whether its guards
        let it through with the instance's data as it is now, where it leads, and which guards
        refuse it (docs/guards.md). One read (fsm_{type}_allowed_events_v1), no lock: the
        transition trigger decides under the row lock, with the data the send leaves."""
        name = machine_name(machine)
        rows = self.gateway.call(routines.ALLOWED_EVENTS, (check_key("key", key),), machine=name, key=key)
        return allowed_events(rows)

    def history(self, machine: str | Machine, key: str) -> list[HistoryEntry]:
        """An instance's history, oldest first (its creation is the first entry)."""
        name = machine_name(machine)
        rows = self.gateway.call(routines.HISTORY, (check_key("key", key),), machine=name, key=key, stale=True)
        return [HistoryEntry.from_row(r) for r in rows]

    def in_state(self, machine: str | Machine, state: str, *, after_id: int = 0, limit: int = 100) -> list[Instance]:
        """Instances in ``state`` ordered by id; pass the last id as ``after_id`` for the next page."""
        name = machine_name(machine)
        check_int("after_id", after_id, minimum=0)
        check_int("limit", limit, minimum=1, maximum=PAGE_ROWS)
        rows = self.gateway.call(
            routines.IN_STATE, (check_name("state", state), after_id, limit), machine=name, state=state, stale=True
        )
        return [Instance.from_row(r) for r in rows]

    def instances_in_state(
        self, state: str, *, after: tuple[str, int] | None = None, limit: int = 100
    ) -> list[Instance]:
        """Instances of every machine type in ``state``, ordered by machine, then id
        (fsm_instances_in_state_v1: each type's index, never a sort of the whole state).

        A page at a time: pass the last instance's ``(instance.machine, instance.id)`` as
        ``after`` for the next page; a page shorter than ``limit`` (1 to pyfsm.limits.PAGE_ROWS, 10000) is the last.
        InvalidArgument if no machine type has the state.
        """
        check_name("state", state)
        after_machine, after_id = check_after("after", after, (str, int))
        if after_machine is not None:
            check_machine_name(after_machine)
            check_int("after: id", after_id, minimum=0)
        check_int("limit", limit, minimum=1, maximum=PAGE_ROWS)
        rows = self.gateway.call(
            routines.INSTANCES_IN_STATE, (state, after_machine, after_id, limit), state=state, stale=True
        )
        return [Instance.from_row(r) for r in rows]

    def account_history(
        self,
        lookup_key: str,
        *,
        newest_first: bool = True,
        after: tuple[datetime, str, int] | None = None,
        limit: int = 100,
    ) -> list[AccountHistoryEntry]:
        """The history of every instance of one account (``lookup_key``), all machine types,
        ordered by time (fsm_account_history_v1): newest first, or oldest first.

        A page at a time: pass the last entry's ``cursor`` (entered_at, machine, id) as
        ``after`` for the next page; a page shorter than ``limit`` (1 to pyfsm.limits.PAGE_ROWS, 10000) is the last.
        An account with no instance has no history (an empty list). Naive datetimes are UTC.
        """
        check_key("lookup_key", lookup_key)
        if not isinstance(newest_first, bool):
            raise InvalidArgument(f"newest_first must be True or False, got {newest_first!r:.80}")
        after_at, after_machine, after_id = check_after("after", after, (datetime, str, int))
        if after_at is not None:
            after_at = naive_utc("after: entered_at", after_at)
            check_machine_name(after_machine)
            check_int("after: id", after_id, minimum=0)
        check_int("limit", limit, minimum=1, maximum=PAGE_ROWS)
        rows = self.gateway.call(
            routines.ACCOUNT_HISTORY,
            (lookup_key, int(newest_first), after_at, after_machine, after_id, limit),
            stale=True,
        )
        return [AccountHistoryEntry.from_row(r) for r in rows]

    def counts(self, machine: str | Machine) -> dict[str, int]:
        """How many instances are in each state (states with none are left out)."""
        name = machine_name(machine)
        return {
            r["state"]: int(r["instances"])
            for r in self.gateway.call(routines.COUNTS, (name,), machine=name, stale=True)
        }

    def state_at(self, machine: str | Machine, key: str, at: datetime) -> StatePeriod | None:
        """The state instance ``key`` was in at ``at`` (naive datetimes are UTC): a
        :class:`~pyfsm.models.StatePeriod` with ``state``, ``sort_key`` and ``event`` (of the
        transition into it; None for the creation), ``entered_at`` and ``left_at`` (UTC-aware;
        ``left_at`` None: still there), or None if the instance did not exist yet then."""
        name = machine_name(machine)
        at = naive_utc("at", at)
        rows = self.gateway.call(
            routines.STATE_AT, (name, check_key("key", key), at), machine=name, key=key, stale=True
        )
        if not rows:
            return None
        return StatePeriod.from_row(rows[0])

    def stats(self) -> list[TypeStats]:
        """One :class:`~pyfsm.models.TypeStats` per installed machine type: instances, running
        (a handler runs them or will), idle (not done, and no handler runs them), waiting,
        paused, failed, completed, due and claimed runs, unpublished outbox events (fsm_stats_v3)."""
        return [TypeStats.from_row(r) for r in self.gateway.call(routines.STATS, (), stale=True)]

    # -- changing machines ----------------------------------------------------------------

    def upgrade_instances(
        self,
        machine: str | Machine,
        *,
        to_version: int | None = None,
        states: Mapping[str, str] | None = None,
        only: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        batch: int = versions.DEFAULT_BATCH,
        progress: Callable[[UpgradeReport], None] | None = None,
    ) -> UpgradeReport:
        """Move existing instances of ``machine`` to a newer definition version (by default
        the current one), each in a transaction of its own, recorded in its history (source
        'upgrade'). A state the target version has maps to itself; ``states`` maps states it
        renamed or dropped (``{"shipped": "sent"}``). ``only``: ``{"states": [...],
        "versions": [...]}``, the instances to move. ``dry_run``: say, per (from version,
        state), how many would move where and which must wait or cannot move; write nothing.
        Instances a worker is running or whose lock is held wait (run it again later); a run
        stopped at any moment is finished by running it again (docs/changing-machines.md).
        UpgradeRefused (31030) for a map or target the database refuses, nothing moved."""
        if dry_run:
            return versions.plan(self.gateway, machine, to_version=to_version, states=states, only=only)
        return versions.run(
            self.gateway, machine, to_version=to_version, states=states, only=only, batch=batch, progress=progress
        )

    # -- machines on the application's own tables (pyfsm/attach.py, docs/own-tables.md) ----

    def attach(
        self,
        machine: str | Machine,
        *,
        table: str,
        key: str,
        state: str,
        lookup: str | None = None,
        columns: Sequence[str] = (),
        on_delete: str = "refuse",
    ) -> Attachment:
        """Put the rows of the application's ``table`` under ``machine`` (a defined type with no
        instances of its own): ``key`` is its primary key or a NOT NULL unique key of one
        column, ``state`` the column holding each row's state. From then on every write of that
        column, by any writer, is checked by the machine's rules and recorded in its history;
        a new row is a new instance (a NULL state: the first start state). ``lookup``: the
        column whose value is each instance's lookup key (the key its locks are taken by);
        ``columns``: columns copied into each instance's data at every write of the row, so
        that guards test them (``data("total") >= 100``) and outbox rows carry them. ``on_delete``
        'refuse' keeps rows under the machine from being deleted ('allow': the row goes, its
        history stays). Refused with a numbered error naming the problem (TableUnsupported,
        KeyUnsupported, StateColumnUnsupported, TriggerNameTaken, AttachmentConflict) and
        nothing changed. Attaching again with the same table and columns changes nothing.
        Existing rows are adopted by :meth:`adopt`. Needs the schema owner's rights."""
        return attaching.attach(
            self.gateway,
            lambda: db.connect(self.settings),
            machine,
            table,
            key,
            state,
            lookup=lookup,
            columns=columns,
            on_delete=on_delete,
        )

    def attach_plan(
        self,
        machine: str | Machine,
        *,
        table: str,
        key: str,
        state: str,
        lookup: str | None = None,
        columns: Sequence[str] = (),
        on_delete: str = "refuse",
    ) -> AttachPlan:
        """The dry run of :meth:`attach`: the same checks, and the table's rows per state value
        with the values that are no state of the machine (``plan.unknown``). Writes nothing."""
        return attaching.plan(
            self.gateway, machine, table, key, state, lookup=lookup, columns=columns, on_delete=on_delete
        )

    def adopt(
        self,
        machine: str | Machine,
        *,
        batch: int = attaching.DEFAULT_BATCH,
        progress: Callable[[AdoptionReport], None] | None = None,
    ) -> AdoptionReport:
        """Give every existing row of an attached table its instance, in the state it is in, with
        a first history row (source 'adopt'), ``batch`` rows per transaction while the
        application goes on writing. Rows in a state the machine lacks are counted
        (``report.unknown``) and left alone. A run stopped at any moment is finished by running
        it again."""
        return attaching.adopt(
            self.gateway, machine, batch=batch, progress=progress, connect=lambda: db.connect(self.settings)
        )

    def detach(self, machine: str | Machine) -> Attachment | None:
        """Remove the machine's triggers from its attached table. The rows, the instances and
        their history stay; attaching again later continues the history."""
        return attaching.detach(self.gateway, lambda: db.connect(self.settings), machine)

    def attachment(self, machine: str | Machine) -> Attachment | None:
        """The table ``machine`` is attached to, as recorded (None: the type owns its table)."""
        return attaching.attachment(self.gateway, machine)

    def version_counts(self, machine: str | Machine) -> list[VersionCount]:
        """How many instances each definition version of ``machine`` holds (the current one
        marked), oldest first: what an upgrade would move. Reads the whole instance table."""
        return versions.version_counts(self.gateway, machine)

    # -- plumbing -------------------------------------------------------------------------

    def _instance_or_none(self, machine: str, key: str) -> Instance | None:
        try:
            return self.get(machine, key)
        except FsmError:  # the state is a courtesy on an error path; never mask the real error
            return None

    # -- clearer errors, read only when a call has failed -----------------------------------

    def _event_checked(
        self, err: FsmError, events: _Events, instance: Instance | None = None, *, find_instance: bool = False
    ) -> FsmError:
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
            machine=events.machine,
            key=err.key,
            event=event,
            state=err.state,
            events=known,
        )
        better.__cause__ = err.__cause__
        return better


class _Events:
    """A machine type's events per definition version, read on an error path only (through
    fsm_definition_v1, which an app account may call) and kept for the one call."""

    def __init__(self, store: Store, machine: str) -> None:
        self.store, self.machine = store, machine
        self.current_version: int | None = None
        self._by_version: dict[int | None, list[str] | None] = {}
        self._definitions: dict[int | None, dict[str, Any] | None] = {}

    def definition(self, version: int | None) -> dict[str, Any] | None:
        """The definition of ``version`` (None: the current one) as stored; None if unreadable."""
        if version not in self._definitions:
            try:
                found = self.store.definition(self.machine, version)
                self._definitions[version] = found.definition
                if found.is_current:
                    self.current_version = found.version
            except FsmError:
                self._definitions[version] = None
        return self._definitions[version]

    def of(self, version: int | None) -> list[str] | None:
        """The events of ``version`` (None: the current one) in definition order; None if unreadable."""
        if version not in self._by_version:
            try:
                transitions = (self.definition(version) or {})["transitions"]
                self._by_version[version] = _distinct(str(t["event"]) for t in transitions)
            except (KeyError, TypeError, AttributeError, ValueError):
                self._by_version[version] = None
        return self._by_version[version]

    def creating(self) -> list[str] | None:
        """The events of the current version that leave a start state, in definition order; None
        if the definition cannot be read."""
        try:
            found = self.definition(None) or {}
            starts = set(found["start"])
            return _distinct(str(t["event"]) for t in found["transitions"] if starts & set(t["from"]))
        except (KeyError, TypeError, AttributeError, ValueError):
            return None

    def leaving(self, version: int | None, state: str) -> tuple[list[str], bool] | None:
        """The events whose rules leave ``state`` in ``version``, in definition order, and whether
        the state is final there; None if the definition cannot be read or lacks the state."""
        try:
            found = self.definition(version) or {}
            if state not in found["states"]:
                return None
            events = _distinct(str(t["event"]) for t in found["transitions"] if state in t["from"])
            return events, state in found.get("final", [])
        except (KeyError, TypeError, AttributeError, ValueError):
            return None


def _explained(err: FsmError, events: _Events, instance: Instance | None) -> FsmError:
    """``err`` with what would be right added to its message, read on the error path only (a
    failure to read leaves it as it was): for a refused event (31005), the events the instance's
    state allows in the definition version it follows, or that the state is final; for an
    instance that does not exist (31003), the events that may create one, and how keys compare.
    The added facts are in ``err.fields`` too (``allowed_events`` and ``final``; ``creating_events``
    for a send)."""
    if isinstance(err, TransitionNotAllowed) and err.state is not None:
        version = instance.definition_version if instance is not None else None
        found = events.leaving(version, err.state)
        if found is None:
            return err
        allowed, final = found
        err.fields.update(allowed_events=allowed, final=final)
        if final and not allowed:
            more = f"{err.state} is a final state: no event leaves it"
        else:
            more = f"from {err.state} the definition allows {', '.join(allowed) or 'no event'}"
        return _with_message(err, f"{err.message}; {more}")
    if isinstance(err, UnknownInstance) and err.key is not None:
        how = "keys are compared exactly (case and spaces count)"
        if err.event is None:  # a read: nothing to look up
            return _with_message(err, f"{err.message}; {how}; `pyfsm list {events.machine}` lists its instances")
        creating = events.creating()
        if creating is None:
            return err
        err.fields.update(creating_events=creating)
        more = f"events that create one from a start state: {', '.join(creating) or 'none'}; {how}"
        return _with_message(err, f"{err.message}; {more}")
    return err


def _distinct(events: Iterable[str]) -> list[str]:
    """``events`` once each, in the order they first come (a definition's order)."""
    return list(dict.fromkeys(events))


def _with_message(err: FsmError, message: str) -> FsmError:
    err.message = message
    err.args = (message,)
    return err


def _check_lease(lease: object) -> None:
    if lease is not None and not isinstance(lease, Lease):
        raise InvalidArgument(f"lease must be a Lease from Store.lock() or None, got {type(lease).__name__}")
