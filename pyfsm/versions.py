"""Moving instances to a newer definition version of their type (Store.upgrade_instances,
`pyfsm upgrade`, docs/changing-machines.md).

A type's instances keep the definition version they were created under until they are
upgraded. The database does the moving, one instance per transaction, in batches
(``fsm_{type}_upgrade_v1``: keyset over id, so a run killed at any moment is finished by
running it again); this module checks the arguments' shapes, runs the dry run
(``fsm_{type}_upgrade_plan_v1``) or the batches, and adds up what each batch reports. What
the arguments may say (which states exist, a map without chains) is checked by the
database, for every caller alike (31030); their shapes and sizes are checked here first
(:func:`check_arguments`), so that both servers refuse the same input the same way: a name
too long for the procedures' parameters is 31030 from Python, never the server's own error
(MySQL answers 1406 where MariaDB answers 31030). A refused map onto states the target version
lacks is explained with the target's states (:func:`_refusal_explained`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pymysql

from .checks import check_int, machine_name
from .db import queries
from .db.driver import errors as pymysql_errors
from .db.driver import raw_connection
from .db.pool import discard
from .db.translation import translate
from .definition import NAME
from .errors import AccessDenied, Deadlock, FsmError, UnknownMachine, UpgradeRefused
from .limits import NAME_CHARS
from .models import StoredDefinition
from .schema import routines

if TYPE_CHECKING:
    from .definition import Machine
    from .gateway import Gateway

#: Instances one batch looks at (one CALL; each instance still moves in a transaction of its own).
DEFAULT_BATCH = 500
MAX_BATCH = 10000
#: What a batch may answer for an instance, and the dry run for a group: 'moved' (the dry run
#: says 'move'), 'claimed' and 'locked' (they wait: the next run moves them), 'unmapped'
#: (no counterpart in the target version and no map entry: cannot move).
WAITING = ("claimed", "locked")
#: How often a batch that a deadlock ended is called again before the run gives up.
DEADLOCK_RETRIES = 10
#: The most entries a state map, and each list of ``only``, may hold (fsm_upgrade_check_v1's bound).
MAX_MAP_ENTRIES = 1000
#: What a state name is, in the words of the errors.
_STATE_NAME = f"a state name ([a-z][a-z0-9_]*, at most {NAME_CHARS} characters)"


@dataclass(frozen=True)
class UpgradeGroup:
    """Instances of one (from_version, from_state) and where they go (to_state None:
    nowhere), with what happens to them: outcome 'move' (dry run) or 'moved', 'claimed',
    'locked' or 'unmapped'."""

    from_version: int
    from_state: str
    to_state: str | None
    outcome: str
    instances: int


@dataclass(frozen=True)
class UpgradeReport:
    """What an upgrade did (or, with ``dry_run``, would do) to a type's instances."""

    machine: str
    to_version: int
    dry_run: bool
    groups: list[UpgradeGroup] = field(default_factory=list)
    batches: int = 0

    def count(self, *outcomes: str) -> int:
        """Instances with any of these outcomes (none given: all)."""
        return sum(g.instances for g in self.groups if not outcomes or g.outcome in outcomes)

    @property
    def moved(self) -> int:
        """Instances moved (the dry run: that would move)."""
        return self.count("moved", "move")

    @property
    def waiting(self) -> int:
        """Instances left where they are for now ('claimed', 'locked'): run it again later."""
        return self.count(*WAITING)

    @property
    def unmapped(self) -> int:
        """Instances whose state the target version lacks, with no map entry: they cannot move."""
        return self.count("unmapped")

    def as_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "to_version": self.to_version,
            "dry_run": self.dry_run,
            "moved": self.moved,
            "waiting": self.waiting,
            "unmapped": self.unmapped,
            "batches": self.batches,
            "groups": [g.__dict__ for g in self.groups],
        }


@dataclass(frozen=True)
class VersionCount:
    """How many instances one definition version of a type holds (fsm_instances_per_version_v1)."""

    version: int
    instances: int
    is_current: bool
    defined_at: datetime | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> VersionCount:
        defined = row["defined_at"]
        return cls(
            int(row["version"]),
            int(row["instances"]),
            bool(row["is_current"]),
            None if defined is None else defined.replace(tzinfo=UTC),
        )


def check_arguments(
    to_version: int | None, states: Mapping[str, str] | None, only: Mapping[str, Iterable[Any]] | None
) -> tuple[int | None, str | None, str | None]:
    """The procedures' p_to_version, p_map and p_only, checked for shape and size (UpgradeRefused,
    31030, as the database would answer; InvalidArgument for to_version). Whether the names are
    states of the type, and a map without chains, the database checks."""
    if to_version is not None:
        check_int("to_version", to_version, minimum=1, maximum=2**32 - 1)
    if states is not None:
        _check_state_map(states)
    if only is not None:
        if not isinstance(only, Mapping) or not set(only) <= {"states", "versions"}:
            raise UpgradeRefused(f"only must be {{'states': [...], 'versions': [...]}}, got {only!r:.80}")
        only = {
            k: list(v) if isinstance(v, Iterable) and not isinstance(v, str | bytes) else v for k, v in only.items()
        }
        _check_only(only)
    try:
        return (
            to_version,
            None if states is None else json.dumps(dict(states)),
            None if only is None else json.dumps(only),
        )
    except (TypeError, ValueError) as exc:
        raise UpgradeRefused(f"only must hold state names and version numbers: {exc}") from None


def _check_state_map(states: object) -> None:
    """A map {old state: new state}: names on both sides, at most MAX_MAP_ENTRIES entries. A key
    written twice cannot reach here: a mapping holds one value per key (SQL callers, who pass
    JSON text, see docs/changing-machines.md)."""
    if not isinstance(states, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in states.items()):
        raise UpgradeRefused(f"states must map old state names to new ones ({{'shipped': 'sent'}}), got {states!r:.80}")
    if len(states) > MAX_MAP_ENTRIES:
        raise UpgradeRefused(f"the state map has more than {MAX_MAP_ENTRIES} entries ({len(states)})")
    for old, new in states.items():
        if not NAME.fullmatch(old):
            raise UpgradeRefused(f"a key of the state map is not {_STATE_NAME}: {old!r:.80}")
        if not NAME.fullmatch(new):
            raise UpgradeRefused(f"the state map maps {old} to something that is not {_STATE_NAME}: {new!r:.80}")


def _check_only(only: Mapping[str, Any]) -> None:
    """``only``'s lists: at most MAX_MAP_ENTRIES each, of state names and of version numbers."""
    for what, items in only.items():
        if not isinstance(items, list):
            raise UpgradeRefused(f"only must be {{'states': [...], 'versions': [...]}}, got {only!r:.80}")
        if len(items) > MAX_MAP_ENTRIES:
            raise UpgradeRefused(f"only lists more than {MAX_MAP_ENTRIES} {what} ({len(items)})")
    for state in only.get("states", []):
        if not isinstance(state, str) or not NAME.fullmatch(state):
            raise UpgradeRefused(f"only.states must list state names ([a-z][a-z0-9_]*), got {state!r:.80}")
    for version in only.get("versions", []):
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= 2**32 - 1:
            raise UpgradeRefused(f"only.versions must list definition versions (1 or more), got {version!r:.80}")


def _refusal_explained(
    gateway: Gateway, name: str, to_version: int | None, states: Mapping[str, str] | None, err: UpgradeRefused
) -> UpgradeRefused:
    """``err``, or, when the map sends instances to states the target version lacks, the same
    refusal naming the target version's states (as UnknownEvent names a type's events). The
    database's message is cut at 128 characters and names the first such entry only; its
    number says it refused the arguments, the target definition says which. Read only after
    the database refused; a failure to read keeps ``err``."""
    if not states or err.__cause__ is None:  # no map, or refused in Python before anything was sent
        return err
    try:
        target = StoredDefinition.from_row(
            gateway.call_one(routines.DEFINITION, (name, to_version), retry_connection=True, machine=name)
        )
        known = [str(s) for s in target.definition["states"]]
    except (FsmError, KeyError, TypeError):
        return err
    lacking = [(old, new) for old, new in states.items() if new not in known]
    if not lacking:
        return err
    maps = " and ".join(f"{old} to {new}" for old, new in lacking)
    better = UpgradeRefused(
        f"the state map maps {maps}, no state{'s' if len(lacking) > 1 else ''} of version {target.version}; "
        f"the states of {name} version {target.version}: {', '.join(known)}",
        machine=name,
        states=known,
        to_version=target.version,
    )
    better.__cause__ = err.__cause__
    return better


def _group(row: Mapping[str, Any]) -> UpgradeGroup:
    return UpgradeGroup(
        int(row["from_version"]),
        str(row["from_state"]),
        None if row["to_state"] is None else str(row["to_state"]),
        str(row["outcome"]),
        int(row["instances"]),
    )


def plan(
    gateway: Gateway,
    machine: str | Machine,
    *,
    to_version: int | None = None,
    states: Mapping[str, str] | None = None,
    only: Mapping[str, Iterable[Any]] | None = None,
) -> UpgradeReport:
    """The dry run: per (from version, state) where the instances go and which must wait or
    cannot move. Writes nothing."""
    name = machine_name(machine)
    args = check_arguments(to_version, states, only)
    try:
        rows = gateway.call(routines.UPGRADE_PLAN, args, machine=name)
    except UpgradeRefused as exc:
        raise _refusal_explained(gateway, name, to_version, states, exc) from exc.__cause__
    target = int(rows[0]["to_version"]) if rows else _target(gateway, name, to_version)
    return UpgradeReport(name, target, True, [_group(r) for r in rows])


def _target(gateway: Gateway, name: str, to_version: int | None) -> int:
    if to_version is not None:
        return to_version
    rows = gateway.call(routines.VERSION_COUNTS, (name,), machine=name)
    return next(int(r["version"]) for r in rows if r["is_current"])


def run(
    gateway: Gateway,
    machine: str | Machine,
    *,
    to_version: int | None = None,
    states: Mapping[str, str] | None = None,
    only: Mapping[str, Iterable[Any]] | None = None,
    batch: int = DEFAULT_BATCH,
    progress: Callable[[UpgradeReport], None] | None = None,
) -> UpgradeReport:
    """Move the instances, batch after batch, on one connection, until none is left.

    A batch that a deadlock ended (inside the transition trigger, which no procedure can
    handle) has its progress read from the session (``@fsm_u_last``, ``@fsm_u_groups``) and
    goes on from there, so the report counts every instance moved. ``progress`` is called
    with the report so far after each batch."""
    name = machine_name(machine)
    args = check_arguments(to_version, states, only)
    check_int("batch", batch, minimum=1, maximum=MAX_BATCH)
    try:
        return _run(gateway, name, args, batch, progress)
    except UpgradeRefused as exc:  # the first batch refused the arguments: explained on a connection of its own
        raise _refusal_explained(gateway, name, to_version, states, exc) from exc.__cause__


def _run(
    gateway: Gateway,
    name: str,
    args: tuple[int | None, str | None, str | None],
    batch: int,
    progress: Callable[[UpgradeReport], None] | None,
) -> UpgradeReport:
    to_version = args[0]
    totals: dict[tuple[int, str, str | None, str], int] = {}
    target, batches, after, deadlocks = to_version, 0, 0, 0
    sql = routines.UPGRADE.call_sql(name)
    database = gateway.checked_primary()

    def add(groups: Iterable[UpgradeGroup]) -> None:
        for g in groups:
            key = (g.from_version, g.from_state, g.to_state, g.outcome)
            totals[key] = totals.get(key, 0) + g.instances

    def report() -> UpgradeReport:
        groups = [
            UpgradeGroup(*key, n) for key, n in sorted(totals.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][3]))
        ]
        return UpgradeReport(name, int(target or 0), False, groups, batches)

    while True:  # a connection per stretch of batches: one a deadlock ended is not used again
        with database.connection() as pooled:
            conn = raw_connection(pooled)
            while True:
                try:
                    rows = _batch(conn, sql, (*args, after, batch), name)
                except (UnknownMachine, AccessDenied) as exc:  # a misspelt type: name the installed ones
                    raise gateway.explained(exc, routines.UPGRADE) from exc.__cause__
                except Deadlock:
                    deadlocks += 1
                    last, done_groups = _progress(conn)
                    if deadlocks > DEADLOCK_RETRIES or last is None:
                        raise
                    add(done_groups)
                    after = last
                    discard(conn)  # as the pool does after a deadlock: a fresh session goes on
                    break
                batches += 1
                first = rows[0]
                target, after = int(first["to_version"]), int(first["last_id"])
                add(_group(r) for r in rows if r["from_version"] is not None)
                if progress is not None:
                    progress(report())
                if first["done"]:
                    return report()


def _batch(conn: Any, sql: str, args: tuple[Any, ...], name: str) -> list[dict[str, Any]]:
    """One CALL of fsm_{type}_upgrade_v1 on the run's own connection. Not through the pool's
    Database.run, which would call a deadlocked batch again at once: its progress must be read first."""
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(sql, args)
            rows = list(cur.fetchall())
            while cur.nextset():
                pass
            return rows
    except pymysql_errors.MySQLError as exc:
        raise translate(exc, machine=name) from exc


def _progress(conn: Any) -> tuple[int | None, list[UpgradeGroup]]:
    """What a batch that failed part way had done: its last id and counts (session variables)."""
    try:
        with conn.cursor() as cur:
            cur.execute(queries.sql("upgrade_batch_progress"))
            last, groups = cur.fetchone()
    except Exception:  # the connection went with the failure: the caller raises the deadlock
        return None, []
    items = json.loads(groups).values() if groups else []
    return (
        None if last is None else int(last),
        [UpgradeGroup(int(v), str(s), None if t is None else str(t), str(o), int(n)) for v, s, t, o, n in items],
    )


def version_counts(gateway: Gateway, machine: str | Machine) -> list[VersionCount]:
    """How many instances each definition version of ``machine`` holds, oldest first."""
    name = machine_name(machine)
    return [VersionCount.from_row(r) for r in gateway.call(routines.VERSION_COUNTS, (name,), machine=name, stale=True)]
