"""What the console shows, read through the reporting views (a `pyfsm grant --reporting` account).

Every query reads one machine type's own view (``fsm_v_<machine>``,
``fsm_v_<machine>_transitions``) or a global view with the machine in its WHERE, through an
index that serves it: a page costs about the rows it shows, whatever the number of instances.
Listings are pages by keyset (``id < cursor``, newest first), never OFFSET. A filter that no
single index serves (updated before/after, state and status together) reads a window of at
most ``SCAN_WINDOW`` ids per page: the page may come back short, and says which ids it searched
so that the next page carries on below them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pymysql

from .. import db
from ..definition import NAME, Machine
from ..errors import AccessDenied, FsmError, UnknownMachine
from ..gateway import TYPES_SQL, unknown_type
from ..models import AllowedEvent
from ..reporting import reads as reporting
from ..schema import routines
from ..schema.resources import check_machine_name
from ..schema.routines import Routine

PAGE = 50
SCAN_WINDOW = 20_000
HISTORY_PAGE = 100
#: The recent timer outcomes the timers page shows.
TIMER_LOG_ROWS = 50
#: How old the status counts (fsm_stats_v2) a page shows may be, in seconds.
STATS_MAX_AGE = 5.0
#: How old the counts of instances per definition version may be, in seconds: counting them
#: reads every instance of the type (no index has the version), so not on every page view.
VERSION_COUNTS_MAX_AGE = 30.0
Row = dict[str, Any]


@dataclass
class Filters:
    """The instance listing's filters (each already checked by the caller)."""

    state: str | None = None
    status: str | None = None
    lookup_key: str | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    before_id: int | None = None

    @property
    def windowed(self) -> bool:
        """Whether no single index serves the filters (an account's instances are few: its
        index always does)."""
        if self.lookup_key is not None:
            return False
        return (
            self.updated_after is not None
            or self.updated_before is not None
            or (self.state is not None and self.status is not None)
        )


@dataclass
class Page:
    rows: list[Row]
    next_before: int | None  # the cursor of the next page, None on the last
    searched: tuple[int, int] | None = None  # a windowed page: the ids it searched (low, high)


@dataclass
class InstanceView:
    instance: Row
    history: list[Row]
    history_next: int | None
    errors: list[Row]
    run: Row | None
    locks: list[Row]
    outbox: list[Row]
    actions: list[Row]
    #: the events of its state: which its guards allow now, where each leads, which guard refuses
    events: list[AllowedEvent] = field(default_factory=list)
    timers: list[Row] = field(default_factory=list)


@dataclass
class TimerPage:
    """A page of armed timers by due time; ``next_after``: the (due_at, timer_id) the next page starts after."""

    rows: list[Row]
    next_after: tuple[datetime, int] | None


#: The columns of fsm_v_timers the console shows.
TIMER_COLUMNS = (
    "timer_id, machine, instance_key, instance_id, kind, state, event, due_at, fire_at, overdue, "
    "overdue_seconds, claimed_by, holds, last_errno, last_error, request_id"
)


class Reads:
    """The console's queries, on the reporting account's pool."""

    def __init__(
        self,
        database: db.Database,
        *,
        stats_max_age: float = STATS_MAX_AGE,
        version_counts_max_age: float = VERSION_COUNTS_MAX_AGE,
    ) -> None:
        self.db = database
        self.stats_max_age = stats_max_age
        self.version_counts_max_age = version_counts_max_age
        self._stats: tuple[float, list[Row]] | None = None
        self._stats_lock = threading.Lock()
        self._version_counts: dict[tuple[str, int], tuple[float, list[Row]]] = {}

    # -- plumbing ---------------------------------------------------------------------------

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        """A SELECT's rows; a missing view (1146) is UnknownMachine: a type not installed."""

        def run(conn: Any) -> list[Row]:
            with conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute(sql, tuple(args))
                return list(cur.fetchall())

        return self.db.on_connection(run)

    def call(self, routine: Routine) -> list[Row]:
        """The rows of a reading procedure without arguments (its result sets drained by Database.run)."""
        return self.db.run(routine.call_sql(), (), retry_connection=True, writes=False)

    # -- machine types ----------------------------------------------------------------------

    def stats_rows(self) -> list[Row]:
        """``CALL fsm_stats_v2()``, at most ``stats_max_age`` seconds old.

        Its status counts read the status index of every unfinished instance (about 45 ms at
        150,000 of them, bench/bench_console.py): one call serves every page for a few seconds
        instead of one per page view. The state counts next to them are always current.
        Each row's ``running`` is split into what a worker runs and ``idle`` (:func:`with_idle`).
        """
        with self._stats_lock:
            if self._stats is not None and time.monotonic() - self._stats[0] < self.stats_max_age:
                return self._stats[1]
        stats = self.call(routines.STATS)
        rows = [with_idle(r, queued) for r, queued in zip(stats, self.queued(stats), strict=True)]
        with self._stats_lock:
            self._stats = (time.monotonic(), rows)
        return rows

    def queued(self, stats: list[Row]) -> list[int]:
        """Per row of ``stats``: the runs of its type a worker runs or will run (due now, claimed,
        or due later: a backoff), read through the index (machine, due_at, id) of fsm_runs.
        A run waiting for an event or a resume has no due time and is not counted."""
        if not stats:
            return []
        sql = " UNION ALL ".join(
            f"SELECT {i} AS n, COUNT(*) AS queued FROM fsm_v_runs WHERE machine = %s AND due_at IS NOT NULL"
            for i in range(len(stats))
        )
        found = {int(r["n"]): int(r["queued"]) for r in self.rows(sql, [r["machine"] for r in stats])}
        return [found.get(i, 0) for i in range(len(stats))]

    def machines(self) -> list[Row]:
        """Installed types with their counts per state (the counters) and per status (fsm_stats_v2),
        the states in the order their current definition lists them (then any state of an older
        version that still holds instances)."""
        stats = {r["machine"]: r for r in self.stats_rows()}
        order = {
            r["machine"]: _definition_states(r["body"])
            for r in self.rows("SELECT machine, body FROM fsm_v_definitions WHERE is_current")
        }
        counts: dict[str, list[Row]] = {}
        for r in self.rows("SELECT machine, state, instances FROM fsm_v_state_counts ORDER BY machine, state"):
            counts.setdefault(r["machine"], []).append({"state": r["state"], "instances": int(r["instances"])})
        for name, states in counts.items():
            listed = order.get(name, {})
            states.sort(key=lambda c: listed.get(c["state"], len(listed)))  # stable: older states stay a-z
        return [{**s, "states": counts.get(name, [])} for name, s in sorted(stats.items())]

    def explained(self, err: UnknownMachine, name: str | None) -> UnknownMachine:
        """``err``, or, when no machine type ``name`` is defined, UnknownMachine naming the
        installed types (as the Store says it); ``err`` if that cannot be read."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            return err
        try:
            rows = self.rows(TYPES_SQL)
        except FsmError:
            return err
        if any(r["machine"] == name for r in rows):
            return err
        return unknown_type(name, [str(r["machine"]) for r in rows if r["installed"]])

    def machine(self, name: str, version: int | None = None) -> Machine:
        """The type's current definition, or its definition ``version``."""

        def read(conn: Any) -> Machine:
            return reporting.current_machine(conn, name, version)

        return self.db.on_connection(read)

    def state_counts(self, name: str) -> dict[str, int]:
        return self.db.on_connection(lambda conn: reporting.state_counts(conn, name))

    def stats(self, name: str) -> Row | None:
        return next((r for r in self.stats_rows() if r["machine"] == name), None)

    def current_version(self, name: str) -> int | None:
        """The type's current definition version (None: no such type), by the definitions' key."""
        found = self.rows(
            "SELECT version FROM fsm_v_definitions WHERE machine = %s AND is_current", (check_machine_name(name),)
        )
        return int(found[0]["version"]) if found else None

    def version_counts(self, name: str, current_version: int | None) -> list[Row]:
        """Instances per definition version (version, instances, is_current), oldest first:
        the versions that hold some, and the current one. Empty for a type defined only once
        (all its instances are of version 1: nothing to read), and for an account granted
        before revision 0021 (it may not call fsm_instances_per_version_v1: the page goes without).
        The call reads every instance of the type (no index has definition_version), so it
        is made at most once every ``version_counts_max_age`` seconds per type."""
        if current_version is None or current_version <= 1:
            return []
        name = check_machine_name(name)
        key = (name, current_version)  # a new definition makes another version the current one: counted again
        with self._stats_lock:
            cached = self._version_counts.get(key)
            if cached is not None and time.monotonic() - cached[0] < self.version_counts_max_age:
                return cached[1]
        try:
            rows = self.db.run(routines.VERSION_COUNTS.call_sql(), (name,), retry_connection=True, writes=False)
        except AccessDenied:
            return []
        counts = [
            {"version": int(r["version"]), "instances": int(r["instances"]), "is_current": bool(r["is_current"])}
            for r in rows
            if r["instances"] or r["is_current"]
        ]
        with self._stats_lock:
            self._version_counts[key] = (time.monotonic(), counts)
        return counts

    def current_state(self, name: str, key: str) -> str | None:
        """The instance's state (None: no such instance), by its unique key."""
        found = self.rows(
            f"SELECT current_state FROM `fsm_v_{check_machine_name(name)}` WHERE instance_key = %s", (key,)
        )
        return found[0]["current_state"] if found else None

    # -- instance listing -------------------------------------------------------------------

    def instances(self, name: str, f: Filters) -> Page:
        view = f"`fsm_v_{check_machine_name(name)}`"
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("current_state", f.state), ("status", f.status), ("lookup_key", f.lookup_key)):
            if value is not None:
                where.append(f"{column} = %s")
                args.append(value)
        if f.updated_after is not None:
            where.append("updated_at >= %s")
            args.append(f.updated_after)
        if f.updated_before is not None:
            where.append("updated_at < %s")
            args.append(f.updated_before)
        high = f.before_id
        low = None
        if f.windowed:
            if high is None:  # the newest id, by the primary key: one row
                top = self.rows(f"SELECT id FROM {view} ORDER BY id DESC LIMIT 1")
                high = int(top[0]["id"]) + 1 if top else 1
            low = max(high - SCAN_WINDOW, 1)
            where.append("id >= %s")
            args.append(low)
        if high is not None:
            where.append("id < %s")
            args.append(high)
        # queued: a worker runs it or will (its run has a due time), by the unique index (machine, instance_id)
        sql = (
            f"SELECT id, instance_key, lookup_key, current_state, status, version, updated_at, in_state_since, "
            f"status = 'running' AND EXISTS (SELECT 1 FROM fsm_v_runs r WHERE r.machine = %s "
            f"AND r.instance_id = i.id AND r.due_at IS NOT NULL) AS queued "
            f"FROM {view} i{' WHERE ' + ' AND '.join(where) if where else ''} ORDER BY id DESC LIMIT {PAGE + 1}"
        )
        rows = self.rows(sql, [name, *args])
        searched = (low, high - 1) if low is not None and high is not None else None
        if len(rows) > PAGE:
            return Page(rows[:PAGE], int(rows[PAGE - 1]["id"]), searched)
        if searched is not None:
            return Page(rows, searched[0] if searched[0] > 1 else None, searched)
        return Page(rows, None)

    # -- one instance -----------------------------------------------------------------------

    def instance(self, name: str, key: str, *, history_before: int | None = None) -> InstanceView | None:
        name = check_machine_name(name)
        found = self.rows(f"SELECT * FROM `fsm_v_{name}` WHERE instance_key = %s", (key,))
        if not found:
            return None
        inst = found[0]
        cursor = "" if history_before is None else " AND sort_key < %s"
        history = self.rows(
            f"SELECT transition_id, sort_key, event, from_state, to_state, handler, source, request_id, "
            f"definition_version, data_before, data_after, metadata, entered_at, left_at, seconds_in_state, is_current "
            f"FROM `fsm_v_{name}_transitions` WHERE instance_key = %s{cursor} ORDER BY sort_key DESC "
            f"LIMIT {HISTORY_PAGE + 1}",
            (key,) if history_before is None else (key, history_before),
        )
        more = len(history) > HISTORY_PAGE
        history = history[:HISTORY_PAGE]
        for h in history:
            h["diff"] = data_diff(h["data_before"], h["data_after"])
            h["metadata"] = _json(h["metadata"])
            h["label"] = history_label(h)
        errors = self.rows(
            "SELECT id, state, handler, attempt, error_type, message, traceback, outcome, next_run_at, "
            "created_at FROM fsm_v_errors WHERE machine = %s AND instance_id = %s "
            "ORDER BY id DESC LIMIT 20",
            (name, inst["id"]),
        )
        runs = self.rows(
            "SELECT due_at, claimed_by, attempt, pause_requested, overdue_seconds, updated_at "
            "FROM fsm_v_runs WHERE machine = %s AND instance_id = %s",
            (name, inst["id"]),
        )
        locks = (
            self.rows(
                "SELECT kind, scope, lookup_key, instance_key, owner, since, expires_at, advisory_connection "
                "FROM fsm_held_locks_v1 WHERE scope IN ('*', %s) AND lookup_key = %s ORDER BY id",
                (name, inst["lookup_key"]),
            )
            if inst["lookup_key"] is not None
            else []
        )
        outbox = self.rows(
            "SELECT id, event, from_state, topic, sort_key, attempts, last_error, parked_at, "
            "occurred_at FROM fsm_v_outbox WHERE machine = %s AND instance_id = %s ORDER BY id LIMIT 50",
            (name, inst["id"]),
        )
        actions = self.rows(
            "SELECT id, operator, account, action, detail, requested_at, outcome, errno, message "
            "FROM fsm_v_operator_log WHERE machine = %s AND instance_key = %s "
            "ORDER BY id DESC LIMIT 50",
            (name, key),
        )
        timers = self.rows(
            f"SELECT {TIMER_COLUMNS} FROM fsm_v_timers WHERE machine = %s AND instance_id = %s "
            "ORDER BY due_at, timer_id LIMIT 100",
            (name, inst["id"]),
        )  # index (machine, instance_id)
        inst["data"] = _json(inst["data"])
        return InstanceView(
            inst,
            history,
            int(history[-1]["sort_key"]) if more else None,
            errors,
            runs[0] if runs else None,
            locks,
            outbox,
            actions,
            timers=timers,
        )

    def operator_action(self, action_id: int) -> Row | None:
        found = self.rows(
            "SELECT id, operator, action, machine, instance_key, detail, outcome, errno, message "
            "FROM fsm_v_operator_log WHERE id = %s",
            (action_id,),
        )
        return found[0] if found else None

    # -- operations pages -------------------------------------------------------------------

    def failed(self, name: str, before_id: int | None = None) -> Page:
        """Failed instances of one type, newest first, each with its last error."""
        name = check_machine_name(name)
        cursor = "" if before_id is None else " AND i.id < %s"
        rows = self.rows(
            f"SELECT i.id, i.instance_key, i.lookup_key, i.current_state, i.updated_at, "
            f"e.handler, e.attempt, e.error_type, e.message, e.created_at AS failed_at "
            f"FROM `fsm_v_{name}` i LEFT JOIN fsm_v_errors e ON e.id = (SELECT MAX(x.id) FROM fsm_v_errors x "
            f"WHERE x.machine = %s AND x.instance_id = i.id) "
            f"WHERE i.status = 'failed'{cursor} ORDER BY i.id DESC LIMIT {PAGE + 1}",
            (name,) if before_id is None else (name, before_id),
        )
        return Page(rows[:PAGE], int(rows[PAGE - 1]["id"]) if len(rows) > PAGE else None)

    def stuck(self, name: str, stuck_after: float) -> list[Row]:
        """Runs due for longer than ``stuck_after`` seconds: nobody picks them up, or their
        claimer died (a claim is a lease: an expired one is due), oldest first."""
        return self.rows(
            "SELECT r.instance_key, r.due_at, r.claimed_by, r.attempt, r.overdue_seconds, "
            "i.current_state, i.status FROM fsm_v_runs r "
            f"JOIN `fsm_v_{check_machine_name(name)}` i ON i.id = r.instance_id "
            "WHERE r.machine = %s AND r.due_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND "
            f"ORDER BY r.due_at, r.id LIMIT {PAGE}",
            (name, int(stuck_after * 1_000_000)),
        )

    def queue(self, name: str) -> list[Row]:
        """The next runs of one type by due time (claimed ones show their lease's end)."""
        return self.rows(
            "SELECT instance_key, due_at, claimed_by, attempt, pause_requested, overdue_seconds "
            "FROM fsm_v_runs WHERE machine = %s AND due_at IS NOT NULL ORDER BY due_at, id "
            f"LIMIT {PAGE}",
            (check_machine_name(name),),
        )

    def claimers(self) -> list[Row]:
        """Who holds claims now, through the index on claimed_by."""
        return self.rows(
            "SELECT claimed_by, machine, COUNT(*) AS runs, MIN(due_at) AS first_lease_end "
            "FROM fsm_v_runs WHERE claimed_by IS NOT NULL GROUP BY claimed_by, machine "
            "ORDER BY claimed_by, machine LIMIT 200"
        )

    def locks(self) -> list[Row]:
        return self.rows(
            "SELECT kind, scope, lookup_key, machine, instance_key, owner, since, expires_at, "
            "advisory_connection FROM fsm_held_locks_v1 ORDER BY expires_at, id LIMIT 500"
        )

    # -- timers ------------------------------------------------------------------------------

    def timers(
        self, machine: str | None, *, overdue: bool = False, after: tuple[datetime, int] | None = None
    ) -> TimerPage:
        """Armed timers by due time (the most overdue first), a page at a time: the index on
        due_at serves the order, the overdue filter (a range of it) and the cursor."""
        where: list[str] = ["1 = 1"]
        args: list[Any] = []
        if machine is not None:
            where.append("machine = %s")
            args.append(check_machine_name(machine))
        if overdue:
            where.append("due_at <= UTC_TIMESTAMP(6)")
        if after is not None:  # (due_at, timer_id) > after, written so that it is a range of the index
            where.append("due_at >= %s AND (due_at > %s OR timer_id > %s)")
            args += [after[0], after[0], after[1]]
        rows = self.rows(
            f"SELECT {TIMER_COLUMNS} FROM fsm_v_timers WHERE {' AND '.join(where)} "
            f"ORDER BY due_at, timer_id LIMIT {PAGE + 1}",
            args,
        )
        if len(rows) > PAGE:
            last = rows[PAGE - 1]
            return TimerPage(rows[:PAGE], (last["due_at"], int(last["timer_id"])))
        return TimerPage(rows, None)

    def timer_summary(self, machine: str | None) -> Row:
        """Armed timers, how many are overdue and held, and the oldest overdue's lateness in
        seconds (0: none). Counting the armed ones reads every armed timer; the others read
        the overdue range of the due_at index."""
        only = "" if machine is None else " AND machine = %s"
        args = () if machine is None else (check_machine_name(machine),)
        row = self.rows(
            f"SELECT (SELECT COUNT(*) FROM fsm_v_timers WHERE 1 = 1{only}) AS armed, "
            "COUNT(*) AS overdue, COALESCE(SUM(holds > 0), 0) AS held, "
            "COALESCE(MAX(overdue_seconds), 0) AS oldest_overdue_seconds "
            f"FROM fsm_v_timers WHERE due_at <= UTC_TIMESTAMP(6){only}",
            args * 2,
        )[0]
        return {
            "armed": int(row["armed"]),
            "overdue": int(row["overdue"]),
            "held": int(row["held"]),
            "oldest_overdue_seconds": float(row["oldest_overdue_seconds"]),
        }

    def timer_log(self, machine: str | None) -> list[Row]:
        """The newest outcomes (fired, dropped, cancelled), through the index on done_at, or
        on (machine, done_at) for one machine."""
        columns = (
            "timer_id, machine, instance_key, kind, state, event, due_at, outcome, transition_id, errno, "
            "reason, done_by, done_at, lag_seconds"
        )
        newest = f"ORDER BY done_at DESC, timer_id DESC LIMIT {TIMER_LOG_ROWS}"
        if machine is None:
            return self.rows(f"SELECT {columns} FROM fsm_v_timer_log {newest}")
        return self.rows(
            f"SELECT {columns} FROM fsm_v_timer_log WHERE machine = %s {newest}", (check_machine_name(machine),)
        )

    def timer(self, timer_id: int) -> Row | None:
        found = self.rows(f"SELECT {TIMER_COLUMNS} FROM fsm_v_timers WHERE timer_id = %s", (timer_id,))
        return found[0] if found else None

    def outbox_lag(self) -> Row:
        return self.call(routines.OUTBOX_LAG)[0]

    def parked(self) -> list[Row]:
        return self.rows(
            "SELECT id, machine, instance_key, event, from_state, topic, sort_key, attempts, last_error, "
            "parked_at, occurred_at FROM fsm_v_outbox WHERE parked_at IS NOT NULL ORDER BY id LIMIT 200"
        )

    def oldest_unpublished(self) -> list[Row]:
        return self.rows(
            "SELECT id, machine, instance_key, event, from_state, topic, attempts, occurred_at, "
            "age_seconds FROM fsm_v_outbox WHERE parked_at IS NULL ORDER BY id LIMIT 20"
        )

    def outbox_row(self, outbox_id: int) -> Row | None:
        found = self.rows(
            "SELECT id, machine, instance_key, event, parked_at, last_error FROM fsm_v_outbox WHERE id = %s",
            (outbox_id,),
        )
        return found[0] if found else None


def with_idle(stats: Row, queued: int) -> Row:
    """A row of fsm_stats_v2 with ``running`` split by what the instances are: ``running``
    those a worker runs or will run (``queued``), ``idle`` the rest of status running, which
    no handler runs (a plain type's instances: they move when an event is sent).
    ``status_running`` keeps the status's own count."""
    running = int(stats["running"])
    busy = min(running, queued)  # the status counts may be a few seconds older than the runs
    return {**stats, "status_running": running, "running": busy, "idle": running - busy}


def history_label(h: Row) -> str:
    """What a history row shows where its event goes: the event; for a move to a newer
    definition version (source 'upgrade', no event) "upgrade v1 → v2", from the versions its
    metadata records; else "(created)", a creation being the other row without an event."""
    if h["event"] is not None:
        return str(h["event"])
    if h["source"] != "upgrade":
        return "(created)"
    moved = h["metadata"].get("upgrade") if isinstance(h["metadata"], dict) else None
    if isinstance(moved, dict) and moved.get("from_version") is not None:
        return f"upgrade v{moved['from_version']} → v{moved.get('to_version', h['definition_version'])}"
    return f"upgrade to v{h['definition_version']}"


def _definition_states(body: Any) -> dict[str, int]:
    """A stored definition's states, each with its place in the definition."""
    found = _json(body)
    states = found.get("states") if isinstance(found, dict) else None
    return {s: i for i, s in enumerate(states)} if isinstance(states, list) else {}


def _json(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def data_diff(before: Any, after: Any) -> list[tuple[str, str, Any, Any]]:
    """What a transition changed in the data, top-level key by key: (change, key, old, new),
    change one of added, removed, changed. A creation (no data before) shows every key added."""
    old, new = _json(before), _json(after)
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    out: list[tuple[str, str, Any, Any]] = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            out.append(("added", key, None, new[key]))
        elif key not in new:
            out.append(("removed", key, old[key], None))
        elif old[key] != new[key]:
            out.append(("changed", key, old[key], new[key]))
    return out


def parse_time(text: str | None, what: str) -> datetime | None:
    """A form's time (``YYYY-MM-DDTHH:MM[:SS]``, as <input type=datetime-local> sends it), UTC."""
    from ..errors import InvalidArgument

    if not text:
        return None
    try:
        return datetime.fromisoformat(text.strip().replace(" ", "T")).replace(tzinfo=None)
    except ValueError:
        raise InvalidArgument(f"{what} must be a time like 2026-11-25T14:30 (UTC), got {text!r:.40}") from None


def ago(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return str(timedelta(seconds=round(float(seconds))))
