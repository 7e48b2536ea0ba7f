"""Machines on the application's own tables: attach a type to a table, adopt its existing
rows, detach it (Store.attach, Store.attach_plan, Store.adopt, Store.detach; `pyfsm attach`,
`pyfsm detach`; docs/own-tables.md).

The database decides: ``fsm_attach_v1`` checks the table, its key and its state column and
records the attachment (or, as a dry run, counts the table's rows per state value and writes
nothing), the same for a DBA's call as for this module's. This module then creates the
attached type's triggers and adoption procedure (:mod:`pyfsm.schema.attached`: MySQL cannot
create a trigger from a routine), and runs the adoption batch after batch
(``fsm_{type}_adopt_v1``: keyset over the table's key, each batch one transaction, so a run
killed at any moment is finished by running it again).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import db
from .checks import check_int, machine_name
from .db import queries
from .db.driver import errors as pymysql_errors
from .errors import (
    AccessDenied,
    Deadlock,
    InvalidArgument,
    NotAttached,
    StateColumnUnsupported,
    TableUnsupported,
)
from .schema import attached, routines

if TYPE_CHECKING:
    from .definition import Machine
    from .gateway import Gateway

#: Rows one adoption batch looks at (one transaction): small enough that the application's
#: writers to those rows wait briefly.
DEFAULT_BATCH = 1000
ON_DELETE = ("refuse", "allow")


@dataclass(frozen=True)
class Attachment:
    """A type attached to a table of the application's, as fsm_attachments records it.

    ``table``, ``key`` and ``state``: the table and its key and state columns. ``key_kind``:
    'integer', 'string' or 'binary', how a key is written as the instance key (Store.send's
    key: ``str(42)``, the string itself, lower-case hexadecimal). ``installed``: its triggers
    are in place (False after a DBA's fsm_attach_v1 until `pyfsm sync`, and after a detach).
    ``adopted``: an adoption finished with every row adopted. ``lookup``: the column whose
    value is each instance's lookup key (its locks'); ``columns``: the columns copied into each
    instance's data at every write of the row (what guards test, what outbox rows carry).
    """

    machine: str
    table: str
    key: str
    state: str
    key_kind: str
    on_delete: str
    installed: bool
    adopted: bool
    lookup: str | None = None
    columns: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Attachment:
        """A row of fsm_attachments, read by the one parser the renderer uses (attached.Facts)."""
        facts = attached.Facts.from_row(row)
        return cls(
            machine=facts.machine,
            table=facts.table,
            key=facts.key,
            state=facts.state,
            key_kind=facts.key_kind,
            on_delete=facts.on_delete,
            installed=row["installed_at"] is not None,
            adopted=row["adopted_at"] is not None,
            lookup=facts.lookup,
            columns=facts.columns,
        )


@dataclass(frozen=True)
class StateValue:
    """One value of the state column, byte for byte (None: NULL), its rows, and whether it is a
    state of the machine's current definition version."""

    state: str | None
    rows: int
    known: bool


@dataclass(frozen=True)
class AttachPlan:
    """What an attachment would find (Store.attach_plan, `pyfsm attach --dry-run`): the
    attachment as it would be recorded and the table's rows per state value. Nothing was
    written."""

    attachment: Attachment
    values: tuple[StateValue, ...]

    @property
    def rows(self) -> int:
        return sum(v.rows for v in self.values)

    @property
    def unknown(self) -> tuple[StateValue, ...]:
        """The values that are no state of the machine: their rows would not be adopted."""
        return tuple(v for v in self.values if not v.known)


@dataclass(frozen=True)
class AdoptionReport:
    """What an adoption did: rows looked at, adopted (an instance with its first history row
    each), and left in a state the machine lacks (``unknown``, the first one's key in
    ``first_unknown``); after a detach, rows whose state changed meanwhile, moved by the
    rules (``moved``) or left where the rules refuse the move (``refused``,
    ``first_refused``). ``done``: every row was looked at."""

    seen: int = 0
    adopted: int = 0
    unknown: int = 0
    first_unknown: str | None = None
    moved: int = 0
    refused: int = 0
    first_refused: str | None = None
    batches: int = 0
    done: bool = False


def _check(
    machine: str | Machine,
    table: object,
    key: object,
    state: object,
    lookup: object,
    columns: object,
    on_delete: object,
) -> tuple[str, str | None]:
    """The machine's name and the columns as JSON, the arguments' shapes checked."""
    name = machine_name(machine)
    for what, value in (("table", table), ("key", key), ("state", state)):
        if not isinstance(value, str) or not 1 <= len(value) <= 64:
            raise TableUnsupported(f"{what} must be a name of 1 to 64 characters, got {value!r:.80}", machine=name)
    if lookup is not None and (not isinstance(lookup, str) or not 1 <= len(lookup) <= 64):
        raise StateColumnUnsupported(f"lookup must be a column name or None, got {lookup!r:.80}", machine=name)
    if isinstance(columns, str) or not isinstance(columns, Sequence) or len(columns) > 32:
        raise StateColumnUnsupported(
            f"columns must be a list of at most 32 column names, got {columns!r:.80}", machine=name
        )
    for column in columns:
        if not isinstance(column, str) or not 1 <= len(column) <= 64:
            raise StateColumnUnsupported(f"columns must be column names, got {column!r:.80}", machine=name)
    if on_delete not in ON_DELETE:
        raise InvalidArgument(f"on_delete must be 'refuse' or 'allow', got {on_delete!r:.40}", machine=name)
    return name, (json.dumps(list(columns)) if columns else None)


def plan(
    gateway: Gateway,
    machine: str | Machine,
    table: str,
    key: str,
    state: str,
    *,
    lookup: str | None = None,
    columns: Sequence[str] = (),
    on_delete: str = "refuse",
) -> AttachPlan:
    """The dry run of :func:`attach`: the checks, and the table's rows per state value."""
    name, columns_json = _check(machine, table, key, state, lookup, columns, on_delete)
    rows = gateway.call(routines.ATTACH, (name, table, key, state, lookup, columns_json, on_delete, 1), machine=name)
    values = tuple(
        StateValue(state=row["state"], rows=int(row["rows"]), known=bool(row["known"]))
        for row in rows
        if row["rows"] is not None
    )
    return AttachPlan(attachment=Attachment.from_row(rows[0]), values=values)


def attach(
    gateway: Gateway,
    connect: Callable[[], Any],
    machine: str | Machine,
    table: str,
    key: str,
    state: str,
    *,
    lookup: str | None = None,
    columns: Sequence[str] = (),
    on_delete: str = "refuse",
) -> Attachment:
    """Check and record the attachment (fsm_attach_v1), then create its triggers and adoption
    procedure on a connection of ``connect()``'s (the schema owner's). Attaching again with the
    same table and columns changes nothing. Existing rows are not adopted here: :func:`adopt`."""
    name, columns_json = _check(machine, table, key, state, lookup, columns, on_delete)
    row = gateway.call_one(
        routines.ATTACH,
        (name, table, key, state, lookup, columns_json, on_delete, 0),
        machine=name,
        writes=True,
        retry_connection=True,
    )
    install(connect, attached.Facts.from_row(row))
    found = attachment(gateway, name)
    assert found is not None  # recorded by fsm_attach_v1 above
    return found


def install(connect: Callable[[], Any], facts: attached.Facts) -> None:
    """Create a recorded attachment's objects (also what `pyfsm sync` does after a DBA's fsm_attach_v1)."""
    conn = connect()
    try:
        attached.install(conn, facts)
    except pymysql_errors.MySQLError as exc:
        raise _owner_needed(exc, facts.machine, "attach") from exc
    finally:
        conn.close()


def attachment(gateway: Gateway, machine: str | Machine) -> Attachment | None:
    """The type's attachment, as recorded (None: the type owns its table)."""
    rows = gateway.query("attach_row", (machine_name(machine),))
    return Attachment.from_row(rows[0]) if rows else None


def installed(gateway: Gateway, machine: str) -> Attachment:
    """The type's attachment, installed; else NotAttached (31040) saying what to run."""
    found = attachment(gateway, machine)
    if found is None:
        raise NotAttached(
            f"{machine} is not attached to a table, so there is nothing to adopt: "
            f"`pyfsm attach {machine} --table T --key K --state S` attaches it",
            machine=machine,
        )
    if not found.installed:
        raise NotAttached(
            f"{machine}'s attachment to `{found.table}` is not installed, so there is nothing to adopt: after a "
            f"detach, Store.attach (`pyfsm attach`) installs it again; after a DBA's fsm_attach_v1, `pyfsm sync "
            f"{machine}` installs it",
            machine=machine,
        )
    return found


def adopt(
    gateway: Gateway,
    machine: str | Machine,
    *,
    batch: int = DEFAULT_BATCH,
    progress: Callable[[AdoptionReport], None] | None = None,
    connect: Callable[[], Any] | None = None,
) -> AdoptionReport:
    """Give every row of the attached table without an instance yet its instance, in the state
    the row is in, batch after batch (each one transaction). Rows in a state the machine lacks
    are counted and left alone. Safe to run while the application writes, and again after an
    interruption.

    When every row has its instance, that is recorded (fsm_attachments.adopted_at) and, on a
    connection of ``connect()``'s, the table's update trigger is created again without the part
    that adopts a row on its first write, which each UPDATE of the table paid for in tables
    opened and locked (docs/own-tables.md). Without the rights to create triggers (an
    application's account) the trigger stays as it was, correct, until `pyfsm sync` as the
    owner."""
    name = machine_name(machine)
    check_int("batch", batch, minimum=1, maximum=10000)
    installed(gateway, name)
    report = AdoptionReport()
    after: str | None = None
    while True:
        try:
            row = gateway.call_one(routines.ADOPT, (after, batch), machine=name, writes=True, retry_connection=True)
        except Deadlock:
            continue  # the batch was rolled back whole: the same batch again
        report = AdoptionReport(
            seen=report.seen + int(row["seen"]),
            adopted=report.adopted + int(row["adopted"]),
            unknown=report.unknown + int(row["unknown"]),
            first_unknown=report.first_unknown or row["first_unknown"],
            moved=report.moved + int(row["moved"]),
            refused=report.refused + int(row["refused"]),
            first_refused=report.first_refused or row["first_refused"],
            batches=report.batches + 1,
            done=bool(row["done"]),
        )
        if progress is not None:
            progress(report)
        if report.done:
            break
        after = row["last_key"]
    if report.unknown == 0 and report.refused == 0:
        gateway.primary.run(queries.sql("attach_adopted"), (name,), writes=True, retry_connection=True)
        if connect is not None:
            _install_adopted(connect, name)
    return report


def _install_adopted(connect: Callable[[], Any], machine: str) -> None:
    """The attachment's objects as rendered for an adopted table (the leaner update trigger);
    left as they are where the account may not create triggers."""
    conn = connect()
    try:
        facts = attached.recorded(conn, machine)
        if facts is not None and not facts.adopting:
            attached.install(conn, facts)
    except pymysql_errors.MySQLError as exc:
        if not isinstance(db.translate(exc), AccessDenied):
            raise _owner_needed(exc, machine, "adopt") from exc
    finally:
        conn.close()


def detach(gateway: Gateway, connect: Callable[[], Any], machine: str | Machine) -> Attachment | None:
    """Remove the attached type's triggers and adoption procedure. The table's rows, the
    instances and their history stay; attaching again continues the history."""
    name = machine_name(machine)
    conn = connect()
    try:
        attached.detach(conn, name)
    except pymysql_errors.MySQLError as exc:
        raise _owner_needed(exc, name, "detach") from exc
    finally:
        conn.close()
    return attachment(gateway, name)


def _owner_needed(exc: pymysql_errors.MySQLError, machine: str, verb: str) -> BaseException:
    err = db.translate(exc)
    if isinstance(err, AccessDenied):
        return AccessDenied(
            f"to {verb} {machine}, pyfsm creates triggers on the table and its instance table: that needs the "
            f"schema owner's rights (TRIGGER, CREATE ROUTINE): run `pyfsm {verb} {machine}` as the owner ({err})",
            errno=err.errno,
            machine=machine,
        )
    return err
