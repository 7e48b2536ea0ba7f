"""pyfsm's exceptions: one base class, one subclass per kind of failure.

Every class has its own MySQL error number (``errno``). The stored procedures and triggers
SIGNAL these numbers (31001-31099, kept below 32768 because PyMySQL reads error numbers as
signed 16-bit), and :func:`from_mysql_error` maps a driver error to a class by its number
only, never by its message text. Errors that Python raises before any SQL runs use the same
classes and numbers, so a caller sees the same error whichever layer caught the problem.
"""

from __future__ import annotations

from typing import Any, ClassVar


class FsmError(Exception):
    """Base class of every pyfsm error.

    ``errno`` is the MySQL error number; the other attributes name what the error is about
    and are None where they do not apply.
    """

    errno: int = 31000
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        errno: int | None = None,
        machine: str | None = None,
        key: str | None = None,
        state: str | None = None,
        event: str | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(message)
        if errno is not None:
            self.errno = errno
        self.message = message
        self.machine = machine
        self.key = key
        self.state = state
        self.event = event
        self.fields = fields

    def __str__(self) -> str:
        return self.message


# --- definition time ---------------------------------------------------------------------


class InvalidDefinition(FsmError):
    """A machine definition is malformed (unknown state, duplicate edge, bad name, ...)."""

    errno = 31001


# --- run time ----------------------------------------------------------------------------


class UnknownMachine(FsmError):
    """No machine type of that name is defined, or its tables are not installed."""

    errno = 31002


class UnknownInstance(FsmError):
    """No instance has that key (and the event cannot create one)."""

    errno = 31003


class InstanceExists(FsmError):
    """An explicit create used a key that already has an instance."""

    errno = 31004


class TransitionNotAllowed(FsmError):
    """The definition has no transition for (current state, event)."""

    errno = 31005


class AmbiguousTransition(FsmError):
    """A raw UPDATE of current_state matches several events; set @fsm_event first."""

    errno = 31006


class Conflict(FsmError):
    """The instance's version is not the one the caller expected (optimistic check)."""

    errno = 31007
    retryable = True


class InvalidData(FsmError):
    """Data or metadata is not a JSON object, cannot be serialized, or is too large."""

    errno = 31008


class InvalidArgument(FsmError):
    """An identifier, key, number or option is invalid (the message says which)."""

    errno = 31009


class RequestIdReused(FsmError):
    """A request id was already used for a different transition."""

    errno = 31010


class InstancePaused(FsmError):
    """The instance is paused and accepts no events."""

    errno = 31011


class HistoryImmutable(FsmError):
    """History rows cannot be updated or deleted."""

    errno = 31012


class ImmutableColumn(FsmError):
    """An UPDATE tried to change an instance's id, machine, key, definition version or creation time."""

    errno = 31013


class LockNotAcquired(FsmError):
    """A lock could not be taken within its bound; ``holder`` names who has it."""

    errno = 31014
    retryable = True


class SchemaVersionMismatch(FsmError):
    """The database schema is older or newer than this pyfsm; the message names the fix."""

    errno = 31015


class TransactionOpen(FsmError):
    """A self-committing procedure was called on a connection inside a transaction."""

    errno = 31016


class DeleteRefused(FsmError):
    """Instances are not deleted (a DELETE or REPLACE on an instance table)."""

    errno = 31017


class LockHeld(FsmError):
    """A transition was refused: the instance's lock is held by another owner.

    Raised by the transition trigger for instances whose type uses the global or local
    lock, when the caller does not hold that lock (see :meth:`pyfsm.Store.lock`).
    """

    errno = 31018
    retryable = True


class LockLost(FsmError):
    """A lease can no longer be renewed or used: it expired, was released or taken over."""

    errno = 31019


class RunClaimed(FsmError):
    """Another worker or caller is running this instance right now (its claim is live)."""

    errno = 31020
    retryable = True


class ClaimLost(FsmError):
    """A step was not committed: the claim on the instance ran out and someone else has it.

    Nothing of the step was applied; the other claimer runs it again.
    """

    errno = 31021


class InvalidStatus(FsmError):
    """The instance's status does not allow this (pausing a completed one, resuming one
    that is not paused, retrying one that has not failed, queueing a completed one). For an
    idle instance (status running, and no handler runs it) `pyfsm retry` and `pyfsm resume`
    say so and name `pyfsm enqueue`; ``fields["status"]`` is then ``"idle"``."""

    errno = 31022


class GraphvizUnavailable(FsmError):
    """Graphviz's ``dot`` could not draw the image: it is not installed, failed or timed out.

    The message says which. Without Graphviz, print the diagram as DOT or Mermaid text
    instead (GitHub and many editors render Mermaid in Markdown).
    """

    errno = 31023


class InvalidEncoding(InvalidArgument):
    """Text that is not valid UTF-8: refused on its way in (an argument holding a lone
    surrogate, or bytes such as ED A0 80, an encoded surrogate, that MariaDB's utf8mb4 lets
    through), or found on its way out (text stored before pyfsm refused it)."""

    errno = 31024


class NotParked(InvalidArgument):
    """No parked outbox event has that id (fsm_unpark_v1): it was published, released or
    skipped already, or never parked. A subclass of InvalidArgument, which 0.3.0 raised."""

    errno = 31026


class ParkedBehind(InvalidArgument):
    """An event may be skipped only when it is the first parked event of its instance; this
    one waits behind an earlier parked event (fsm_unpark_v1): skip that one first, or release
    both without skipping. A subclass of InvalidArgument, which 0.3.0 raised."""

    errno = 31027


class UnknownEvent(TransitionNotAllowed):
    """The machine type has no event of that name (a misspelling, say): raised by Python in
    place of the server's TransitionNotAllowed, whose message would name only the instance's
    state; ``fields["events"]`` lists the type's events. A subclass of TransitionNotAllowed,
    which pyfsm raised before, so ``except TransitionNotAllowed`` still catches it."""

    errno = 31028


class UnknownTimer(FsmError):
    """No armed timer has that id: it fired, was dropped or cancelled (the message says
    which), or never existed (Store.cancel_timer, fsm_cancel_timer_v1)."""

    errno = 31029


class UpgradeRefused(InvalidArgument):
    """An upgrade of instances to a newer definition version cannot be done as asked
    (Store.upgrade_instances, fsm_upgrade_instances_v1, fsm_upgrade_plan_v1): the target
    version does not exist or is not newer, or the state map or ``only`` is not valid (a key
    that is no state of an older version, a value the target version lacks, a chain or cycle
    such as ``a -> b -> c``); the message says which. Nothing was moved. A subclass of
    InvalidArgument."""

    errno = 31030


class SyncNeeded(FsmError):
    """The type's database objects are behind its definitions: the target version of an
    upgrade has state timeouts and the type has no timer triggers yet, or a transition of a
    version with guards its transition trigger was not rendered with (a DBA stored the
    definition with fsm_define_v8). Run ``pyfsm sync <machine>`` (or Store.define) as the owner
    of pyfsm's schema, then upgrade or send again."""

    errno = 31031


class GuardRefused(TransitionNotAllowed):
    """The rules for (current state, event) have guards, and none of them holds for the
    instance's data as it would be after the transition (docs/guards.md). The message names
    the guards, the state and the event; nothing was written. A subclass of
    TransitionNotAllowed: the event is allowed from the state, the data is not as it must be.
    ``Store.allowed_events`` says beforehand which guard refuses which event."""

    errno = 31032


# --- machines on the application's own tables (docs/own-tables.md) -------------------------


class AttachedRowMissing(FsmError):
    """An instance of a type attached to a table of the application's has no row there: a
    Store.send or create for a key the table lacks (an attached type's instances are created
    by inserting rows into the table), or a transition of an instance whose row was deleted
    (on_delete 'allow'). Nothing was written."""

    errno = 31033


class TableUnsupported(FsmError):
    """The table cannot carry a machine: it is not an InnoDB base table of pyfsm's database (a
    view, a temporary or system-versioned table, another engine, another database, one of
    pyfsm's own), or its name is empty or too long; the message says which. Nothing changed."""

    errno = 31034


class KeyUnsupported(FsmError):
    """The key column cannot identify instances: missing, generated, nullable, not the primary
    key or a unique key of that one column (composite keys are not supported), or of a type
    other than an integer, a string of at most 191 characters or a binary id of at most 95
    bytes. Nothing changed."""

    errno = 31035


class StateColumnUnsupported(FsmError):
    """The state column cannot hold the machine's states: missing, the key, generated, not
    CHAR, VARCHAR or ENUM, too short for a state, or an ENUM lacking states (named). Nothing
    changed."""

    errno = 31036


class TriggerNameTaken(FsmError):
    """A trigger pyfsm did not install already has a name the attached type's triggers need
    (named). Nothing changed: rename or drop that trigger, or attach under another type name."""

    errno = 31037


class UnknownStateValue(InvalidArgument):
    """A row of an attached table is in a state its machine does not have (NULL included):
    adoption counts it and leaves it, and a write moving it to another unknown value is refused.
    An UPDATE setting it to one of the machine's states is allowed: the row is adopted at that
    state (history source 'adopt', metadata {"adopted_from": <old value or null>}). The dry run
    lists such values (Store.attach_plan, `pyfsm attach --dry-run`). A subclass of
    InvalidArgument."""

    errno = 31038


class NotAttached(FsmError):
    """The type is not attached to a table now, so there is nothing to adopt: never attached,
    detached, or recorded by a DBA's fsm_attach_v1 and not installed yet (the message says which
    and what to run: ``pyfsm attach ...`` or ``pyfsm sync``)."""

    errno = 31040


class ColumnMissing(FsmError):
    """A column pyfsm's triggers or procedures name is not there: the server's 1054. The one
    way it happens is a DBA's ``ALTER TABLE`` renaming or dropping the state, key, lookup or a
    copied column of a table a type is attached to; every write of that table and every
    transition of the type fails this way, and nothing is written, until the column is put
    back or the type is detached and attached again (``pyfsm check`` says which)."""

    errno = 1054


class AttachmentConflict(FsmError):
    """The attachment asked for clashes with one that exists: the type is (or was) attached to
    another table or column, another type holds that state column, or the type already has
    instances of its own. Nothing changed."""

    errno = 31039


class AccessDenied(FsmError):
    """The account lacks a right the call needs (errno is the server's: 1142 table, 1370 routine, ...).

    A least-privilege account (`pyfsm grant`) meets it when it does what only the schema
    owner may: DDL such as ``pyfsm sync``, or reading a table instead of a view.
    """

    errno = 1142


class DatabaseUnavailable(FsmError):
    """The server could not be reached or the connection was lost (errno is the driver's)."""

    errno = 2003
    retryable = True


class NotWriterNode(DatabaseUnavailable):
    """A server that is not its cluster's writer was asked to take pyfsm's writes.

    pyfsm writes through one server of a cluster at a time: of a Galera cluster, the node
    Galera lists first in the current view (``wsrep_local_index`` 0); of a MySQL Group
    Replication group (InnoDB Cluster), the primary. A new connection passes over any other
    member to the next server of the DSN, so a DSN that lists every member finds the writer
    (docs/scaling.md); one naming only other members gets this error (errno 31025). A write
    the server itself refused because it is read-only (a secondary's super_read_only, a
    replica's read_only) has the server's number (1290, 1836, 4049). Retryable: the writer
    changes when the cluster's membership does (a new primary is elected)."""

    errno = 31025


class LoginFailed(FsmError):
    """The server refused the DSN's account: a wrong user name or password, or no such account
    for the host the client connects from (errno is the server's: 1045, or 1698 for an
    account that logs in without a password only over the server's socket).

    Not retryable, and not a DatabaseUnavailable (which 0.3.0 raised): the server answered,
    and will refuse the same login again until the DSN or the account is fixed."""

    errno = 1045


class UnknownDatabase(FsmError):
    """The DSN names a database the server does not have (1049). ``pyfsm migrate`` (or
    Store.migrate()) creates it when the account may.

    Not retryable, and not a DatabaseUnavailable (which 0.3.0 raised): the server answered."""

    errno = 1049


class Deadlock(FsmError):
    """The server aborted the transaction (deadlock or lock wait timeout); retry it."""

    errno = 1213
    retryable = True


#: Error numbers SIGNALled by pyfsm's SQL, and the class each one maps to.
SIGNALLED: dict[int, type[FsmError]] = {
    cls.errno: cls
    for cls in (
        InvalidDefinition,
        UnknownMachine,
        UnknownInstance,
        InstanceExists,
        TransitionNotAllowed,
        AmbiguousTransition,
        Conflict,
        InvalidData,
        InvalidArgument,
        RequestIdReused,
        InstancePaused,
        HistoryImmutable,
        ImmutableColumn,
        LockNotAcquired,
        SchemaVersionMismatch,
        TransactionOpen,
        DeleteRefused,
        LockHeld,
        LockLost,
        RunClaimed,
        ClaimLost,
        InvalidStatus,
        GraphvizUnavailable,
        InvalidEncoding,
        NotWriterNode,
        NotParked,
        ParkedBehind,
        UnknownEvent,
        UnknownTimer,
        UpgradeRefused,
        SyncNeeded,
        GuardRefused,
        AttachedRowMissing,
        TableUnsupported,
        KeyUnsupported,
        StateColumnUnsupported,
        TriggerNameTaken,
        UnknownStateValue,
        AttachmentConflict,
        NotAttached,
    )
}

#: What a 1020 adds to the server's message: MariaDB 11.6+ (innodb_snapshot_isolation, on by
#: default) ends a transaction that writes a row changed after its read view (a REPEATABLE READ
#: transaction's snapshot, or under READ COMMITTED the read its statement's trigger made
#: first), where other servers wait. pyfsm's own sessions turn it off; a raw writer's
#: transaction, whose triggers move the state counters, can meet it (docs/errors.md#deadlock).
SNAPSHOT_CHANGED_HINT = (
    "MariaDB snapshot isolation: the transaction wrote a row another transaction changed after "
    "its read view, and was rolled back whole; run the transaction again, or SET SESSION "
    "innodb_snapshot_isolation = OFF as pyfsm's sessions do"
)

#: Server and client error numbers that are not pyfsm's own but have a pyfsm meaning.
SERVER: dict[int, type[FsmError]] = {
    1213: Deadlock,  # deadlock found
    1205: Deadlock,  # lock wait timeout
    1020: Deadlock,  # record changed since last read (MariaDB snapshot isolation)
    3058: Deadlock,  # MySQL 8: deadlock while waiting for a user lock
    1305: UnknownMachine,  # procedure does not exist: a machine without its routines
    1146: UnknownMachine,  # table or view does not exist: a type not installed (or by an older pyfsm: `pyfsm sync`)
    1054: ColumnMissing,  # unknown column: an attached table's column renamed or dropped under its triggers
    1568: TransactionOpen,  # transaction characteristics can't change inside a transaction
    1046: InvalidArgument,  # no database selected: the DSN lacks /database
    1406: InvalidArgument,  # data too long for a column (raw SQL past the checks)
    1264: InvalidArgument,  # out of range value for a procedure's parameter (raw SQL past the checks)
    1292: InvalidArgument,  # a value that is not a number or a DATETIME where one is needed
    1366: InvalidArgument,  # incorrect integer/decimal value for a parameter
    1265: InvalidArgument,  # data truncated: text with a numeric prefix for a numeric parameter
    3140: InvalidData,  # MySQL: invalid JSON text for a JSON column
    3144: InvalidData,  # MySQL: a JSON value from a binary string (bytes sent where JSON text is wanted)
    3157: InvalidData,  # MySQL: JSON nested deeper than 100 levels
    4025: InvalidData,  # MariaDB: CHECK constraint (JSON_VALID) failed
    1040: DatabaseUnavailable,  # too many connections
    1047: DatabaseUnavailable,  # Galera: "WSREP has not yet prepared node for application use" (joining, non-primary)
    1053: DatabaseUnavailable,  # server shutdown in progress
    1927: DatabaseUnavailable,  # MariaDB: connection was killed
    2003: DatabaseUnavailable,  # can't connect (PyMySQL: refused, unreachable, and a host name that does not resolve)
    2005: DatabaseUnavailable,  # unknown host (the C client's number for a name that does not resolve)
    2006: DatabaseUnavailable,  # server has gone away
    2013: DatabaseUnavailable,  # lost connection during query
    2055: DatabaseUnavailable,  # lost connection (system error)
    0: DatabaseUnavailable,  # PyMySQL InterfaceError on a closed connection
    1045: LoginFailed,  # access denied for user (wrong user or password)
    1698: LoginFailed,  # access denied for user, no password (an account that logs in by socket only)
    1049: UnknownDatabase,  # unknown database
    1317: DatabaseUnavailable,  # query execution was interrupted (KILL QUERY)
    4031: DatabaseUnavailable,  # MySQL 8.0.24+: the server closed an idle connection
    1142: AccessDenied,  # command denied on a table (SELECT, UPDATE, CREATE, TRIGGER, ...)
    1143: AccessDenied,  # command denied on a column
    1370: AccessDenied,  # EXECUTE (or ALTER ROUTINE) denied on a routine
    1044: AccessDenied,  # access denied to the database
    1227: AccessDenied,  # needs a global privilege (SUPER, ...)
    # MySQL Group Replication (InnoDB Cluster) and read-only servers. NotWriterNode: the
    # statement was refused before it ran. DatabaseUnavailable: the member could not run or
    # commit it; after 3100 the group may have committed what the member rolled back, so, as
    # after a lost reply, only reads and writes with a request id are repeated. The repeat
    # runs on a new connection, which passes over a member that is not the primary.
    1290: NotWriterNode,  # --super-read-only / --read-only: a GR secondary, a demoted primary, a replica
    1836: NotWriterNode,  # running in read-only mode
    4049: NotWriterNode,  # MySQL: "cannot be performed on a Group Replication secondary member"
    3032: DatabaseUnavailable,  # MySQL: server in offline mode (a GR member that left its group, exit_state_action)
    3100: DatabaseUnavailable,  # MySQL: replication hook 'before_commit' failed (GR member not ONLINE, leaving
    #                             the group, or cut off from its majority): the transaction was rolled back
    3101: Deadlock,  # MySQL: GR rolled the transaction back at commit (lost certification to another member's)
    3781: DatabaseUnavailable,  # MySQL: a statement held while a new GR primary applied its backlog timed out
    3782: DatabaseUnavailable,  # MySQL: a held statement aborted during an election (GR stopping, thread killed)
    3783: DatabaseUnavailable,  # MySQL: a held statement was aborted: the member went into ERROR during an election
    3796: DatabaseUnavailable,  # MySQL: group_replication_consistency not usable in the member's state (not ONLINE)
    3797: DatabaseUnavailable,  # MySQL: waiting for the group's commits (consistency BEFORE) failed: member leaving
    3798: DatabaseUnavailable,  # MySQL: waiting for transactions with consistency AFTER failed: member leaving
    3799: DatabaseUnavailable,  # MySQL: GR is stopping, new transactions are not allowed
    4094: DatabaseUnavailable,  # MySQL: statements blocked while group_replication_set_as_primary() changes the primary
    6141: DatabaseUnavailable,  # MySQL 9: GR connection handoff busy ("retry the connection")
}

#: The DatabaseUnavailable numbers worth retrying: the server may answer a moment later.
TRANSIENT = frozenset(
    {
        0,
        1040,
        1047,
        1053,
        1927,
        2003,
        2005,
        2006,
        2013,
        2055,
        4031,
        NotWriterNode.errno,
        # MySQL Group Replication and read-only servers (see SERVER)
        1290,
        1836,
        4049,
        3032,
        3100,
        3781,
        3782,
        3783,
        3796,
        3797,
        3798,
        3799,
        4094,
        6141,
    }
)


def from_database_error(exc: BaseException) -> FsmError | None:
    """pyfsm's exception for an error a database layer of the application's raised, or None.

    A write to an attached table that the machine refuses reaches the application as its
    driver's error, wrapped by its ORM: Django's ``django.db.utils.OperationalError`` (the
    PyMySQL error in ``__cause__`` and the same ``args``), SQLAlchemy's
    ``sqlalchemy.exc.OperationalError`` (in ``.orig``). This looks through those wrappers for
    the error number and turns it into pyfsm's class (``TransitionNotAllowed`` for 31005, ...)
    by the number alone, as pyfsm does with its own calls::

        try:
            order.save()
        except django.db.utils.OperationalError as exc:
            err = pyfsm.from_database_error(exc)
            if isinstance(err, pyfsm.TransitionNotAllowed):
                ...
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, FsmError):
            return current
        translated = from_mysql_error(current)
        if translated is not None:
            return translated
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    return None


def from_mysql_error(
    exc: BaseException,
    *,
    machine: str | None = None,
    key: str | None = None,
    event: str | None = None,
    state: str | None = None,
) -> FsmError | None:
    """Translate a PyMySQL error into a pyfsm error by its number, or None if it has no meaning here."""
    args = getattr(exc, "args", ())
    if not args or not isinstance(args[0], int):
        return None
    text = str(args[1]) if len(args) > 1 else str(exc)
    err = error_for(args[0], text, machine=machine, key=key, event=event, state=state)
    if err is not None:
        err.__cause__ = exc
    return err


def error_for(
    errno: int,
    text: str,
    *,
    machine: str | None = None,
    key: str | None = None,
    event: str | None = None,
    state: str | None = None,
) -> FsmError | None:
    """The pyfsm error for a MySQL error number and message (also one a procedure reported in
    a result row rather than raised), or None if the number has no meaning here."""
    cls = SIGNALLED.get(errno) or SERVER.get(errno)
    if cls is None:
        return None
    if errno == 1305 and machine is not None:  # no such procedure: the type's are missing or older
        text = (
            f"{text}: machine type {machine!r} is not installed, or its procedures are older than this "
            f"pyfsm: run `pyfsm sync {machine}` (or Store.sync) as the owner of pyfsm's schema"
        )
    if errno == 1054 and machine is not None:  # an attached table's column renamed or dropped
        text = (
            f"{text}: a column machine type {machine!r} is attached by is gone (renamed or dropped); "
            "nothing was written: run `pyfsm check` to see which, and rename it back"
        )
    if errno == 1020 and SNAPSHOT_CHANGED_HINT not in text:  # MariaDB 11.6+: say why, and what to do
        text = f"{text} ({SNAPSHOT_CHANGED_HINT})"
    return cls(text, errno=errno, machine=machine, key=key, event=event, state=state)
