"""The internal layer between the facade and the database: every CALL pyfsm makes goes through
a Gateway.

The Store (the public face) validates arguments and shapes results; the engine, locks,
send_many, the relay's reads, the console and the metrics collector call procedures through
``store.gateway`` and never touch a Store's private parts. A Gateway knows:

* where a call goes: the primary's pool, or, for reads that may lag, the read replica's;
* that the database has this pyfsm's schema (checked once, on the first call);
* which procedure to call: a :class:`~pyfsm.schema.routines.Routine` of the registry;
* how to explain a failure whose cause is a machine type that does not exist
  (:meth:`Gateway.explained`).

Layers: store.py → gateway.py → db/ (pool, connecting, error translation) and schema/.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import pymysql

from . import db
from .errors import AccessDenied, FsmError, SchemaVersionMismatch, UnknownMachine
from .schema import install as schema
from .schema import routines
from .schema.routines import Routine

T = TypeVar("T")
Row = dict[str, Any]


class Gateway:
    """The pools of one Store and the calls made through them (internal: pyfsm's own layers use it)."""

    def __init__(self, settings: db.Settings, read_settings: db.Settings | None, *, pool_size: int) -> None:
        self.settings = settings
        self.read_settings = read_settings
        self.primary = db.Database(settings, pool_size=pool_size)
        self._replica = None if read_settings is None else db.Database(read_settings, pool_size=pool_size)
        self._schema_ok = False
        self._replica_schema_ok = False
        self._lock = threading.Lock()

    def close(self) -> None:
        self.primary.close()
        if self._replica is not None:
            self._replica.close()

    # -- where calls go ------------------------------------------------------------------------

    def schema_changed(self) -> None:
        """Check the schema again on the next call (after a migration)."""
        self._schema_ok = False

    def ensure_schema(self) -> None:
        """Raise SchemaVersionMismatch (naming the fix) unless the primary has this pyfsm's schema."""
        if self._schema_ok:
            return
        with self._lock:
            self.primary.on_connection(lambda conn: schema.check(conn, dsn_hint=dsn_hint(self.settings)))
            self._schema_ok = True

    def checked_primary(self) -> db.Database:
        """The primary's pool, once it is known to have this pyfsm's schema."""
        self.ensure_schema()
        return self.primary

    def replica_or_primary(self) -> db.Database:
        """Where reads that may lag the primary go: the replica, once it is known to have this
        pyfsm's schema (SchemaVersionMismatch otherwise), or the primary when there is none."""
        if self._replica is None:
            return self.checked_primary()
        if not self._replica_schema_ok:
            with self._lock:  # the replica must have caught up with the primary's migration
                found = self._replica.on_connection(schema.current_revision)
                if found != schema.HEAD_REVISION:
                    replica = self._replica.settings
                    raise SchemaVersionMismatch(
                        f"the read replica at {replica.host}:{replica.port} has pyfsm schema {found or 'none'}, "
                        f"this pyfsm needs {schema.HEAD_REVISION}: migrate the primary and let the replica catch up",
                        found=found,
                        expected=schema.HEAD_REVISION,
                    )
                self._replica_schema_ok = True
        return self._replica

    def on_primary(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(connection)`` on a pooled primary connection, unchecked (a lost connection is retried:
        ``fn`` must be safe to repeat)."""
        return self.primary.on_connection(fn)

    # -- calls ---------------------------------------------------------------------------------

    def call(
        self,
        routine: Routine,
        args: tuple[Any, ...],
        *,
        machine: str | None = None,
        writes: bool = False,
        retry_connection: bool | None = None,
        stale: bool = False,
        on: Any = None,
        checked: bool = True,
        **context: Any,
    ) -> list[Row]:
        """Every row of ``CALL routine(args)``.

        ``writes``: the call changes data (never retried after its reply was lost unless
        ``retry_connection`` says it is safe, e.g. a request id). A read retries a lost
        connection. ``stale``: the read may go to the replica. ``on``: a connection of the
        caller's (a lease's). ``machine``: the type of a per-type routine, and the context
        errors carry. ``checked``: check the schema first (the default).
        """
        _check_arity(routine, args)
        retry = (not writes) if retry_connection is None else retry_connection
        if machine is not None:
            context["machine"] = machine
        try:
            target = self.replica_or_primary() if stale else (self.checked_primary() if checked else self.primary)
            return target.run(routine.call_sql(machine), args, retry_connection=retry, writes=writes, on=on, **context)
        except (UnknownMachine, AccessDenied) as exc:
            raise self.explained(exc, routine) from exc.__cause__

    def query(
        self,
        name: str,
        args: Sequence[Any] = (),
        *,
        type: str | None = None,
        stale: bool = False,
        checked: bool = False,
        **slots: int | str | Sequence[str],
    ) -> list[Row]:
        """Every row, as dicts, of the runtime query ``name`` of ``sql/queries/``
        (:mod:`pyfsm.db.queries`: ``type`` and ``slots`` fill its slots) on a pooled
        connection; a lost connection is retried, so only for reads. ``stale``: the read may
        go to the replica. ``checked``: check the schema first."""
        statement = db.queries.statement(name, slots, type=type)

        def run(conn: Any) -> list[Row]:
            with conn.cursor(pymysql.cursors.DictCursor) as cur:
                # no arguments: None, so that a % of the statement (a LIKE pattern) is not a placeholder
                cur.execute(statement, tuple(args) or None)
                return list(cur.fetchall())

        target = self.replica_or_primary() if stale else (self.checked_primary() if checked else self.primary)
        return target.on_connection(run)

    def call_one(self, routine: Routine, args: tuple[Any, ...], **options: Any) -> Row:
        """The first row of ``CALL routine(args)`` (see :meth:`call`)."""
        return self.call(routine, args, **options)[0]

    # -- clearer errors, read only when a call has failed -----------------------------------------

    def explained(self, err: FsmError, routine: Routine | None = None) -> FsmError:
        """``err``, or, when no machine type of its name is defined at all, UnknownMachine
        (31002) naming the installed types instead. The server's answers cannot tell a
        misspelt type from one whose objects are missing or older than this pyfsm, which
        `pyfsm sync` fixes (and ``err`` says so): 1305 (no such procedure), 31002 (from the
        generic procedures), and, for an account with EXECUTE rights only, 1370 on a
        per-type ``routine`` (EXECUTE denied: it has no right on a routine that does not
        exist). Read only after a call failed; a failure to read keeps ``err``."""
        name = err.machine
        if name is None or "installed" in err.fields:
            return err
        per_type = routine is not None and routine.per_type and routine.suffix in routines.PER_TYPE_SUFFIXES
        if isinstance(err, AccessDenied) and (err.errno != 1370 or not per_type):
            return err  # e.g. an app account may not call fsm_define_v8: that stays AccessDenied
        try:
            defined, installed = self.types(name)
        except FsmError:
            return err
        context: dict[str, Any] = {"key": err.key, "event": err.event, "state": err.state}
        if not defined:
            return unknown_type(name, installed, **context)
        if isinstance(err, AccessDenied) and name not in installed:  # what 1305 says to the owner
            return UnknownMachine(
                f"machine type {name!r} is defined but not installed: run `pyfsm sync {name}` "
                "(or Store.sync) as the owner of pyfsm's schema",
                machine=name,
                installed=installed,
                **context,
            )
        return err

    def types(self, name: str) -> tuple[bool, list[str]]:
        """Whether a machine type ``name`` is defined, and the installed types. The owner and
        reporting accounts read fsm_v_definitions; an app account (EXECUTE only) asks
        fsm_definition_v1, and fsm_stats_v3 for the installed types."""

        try:
            found = self.query("types_defined")
        except AccessDenied:
            try:
                self.primary.run(routines.DEFINITION.call_sql(), (name, None), retry_connection=True, writes=False)
                defined = True
            except UnknownMachine:
                defined = False
            stats = self.primary.run(routines.STATS.call_sql(), (), retry_connection=True, writes=False)
            return defined, [str(r["machine"]) for r in stats]
        installed = [str(r["machine"]) for r in found if r["installed"]]
        return any(r["machine"] == name for r in found), installed


def _check_arity(routine: Routine, args: tuple[Any, ...]) -> None:
    if len(args) != len(routine.params):  # a bug in pyfsm, never the caller's input
        raise TypeError(f"{routine.name} takes {len(routine.params)} arguments, pyfsm passed {len(args)}")


def unknown_type(name: str, installed: Iterable[str], **context: Any) -> UnknownMachine:
    """UnknownMachine (31002) for a machine type that is not defined, naming the installed ones."""
    listed = sorted(installed)
    return UnknownMachine(
        f"no machine type {name!r}; installed: {', '.join(listed) or 'none'}", machine=name, installed=listed, **context
    )


def dsn_hint(settings: db.Settings) -> str:
    """How messages name the database: the servers and the database, never the password."""
    servers = ",".join(db.where(host, port) for host, port in settings.hosts)
    return "$PYFSM_DSN" if not settings.database else f"mysql://...@{servers}/{settings.database}"
