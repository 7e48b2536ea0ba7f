"""What the console shows, read through the reporting views (a `pyfsm grant --reporting` account).

The statements are the ``console_*`` blocks of ``sql/queries/console.sql``, run by name
through the Store's Gateway (:meth:`Gateway.query <pyfsm.gateway.Gateway.query>`).

Every query reads one machine type's own view (``fsm_v_{type}``, ``fsm_v_{type}_transitions``)
or a global view with the machine in its WHERE, through an index that serves it: a page costs
about the rows it shows, whatever the number of instances. Listings are pages by keyset
(``id < cursor``, newest first), never OFFSET. A filter that no single index serves (updated
before/after, state and status together) reads a window of at most ``SCAN_WINDOW`` ids per
page: the page may come back short, and says which ids it searched so that the next page
carries on below them.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..definition import NAME, Machine
from ..errors import AccessDenied, FsmError, UnknownMachine
from ..gateway import Gateway, unknown_type
from ..models import AllowedEvent
from ..reporting import reads as reporting
from ..schema import routines
from ..schema.resources import check_machine_name

PAGE = 50
SCAN_WINDOW = 20_000
HISTORY_PAGE = 100
#: The recent timer outcomes the timers page shows.
TIMER_LOG_ROWS = 50
#: How old the status counts (fsm_stats_v3) a page shows may be, in seconds.
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


class Reads:
    """The console's queries, through the Gateway of the reporting account's Store (its
    primary's pool, unchecked: the console checks the schema where it says so)."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        stats_max_age: float = STATS_MAX_AGE,
        version_counts_max_age: float = VERSION_COUNTS_MAX_AGE,
    ) -> None:
        self.gateway = gateway
        self.stats_max_age = stats_max_age
        self.version_counts_max_age = version_counts_max_age
        self._stats: tuple[float, list[Row]] | None = None
        self._stats_lock = threading.Lock()
        self._version_counts: dict[tuple[str, int], tuple[float, list[Row]]] = {}

    # Queries run as self.gateway.query("console_...", args, type=..., slot=...) and procedures
    # as self.gateway.call(routine, args, checked=False): on the primary, the schema unchecked
    # (as the console always read), a lost connection retried; a missing view (1146) is
    # UnknownMachine.

    # -- machine types ----------------------------------------------------------------------

    def stats_rows(self) -> list[Row]:
        """``CALL fsm_stats_v3()``, at most ``stats_max_age`` seconds old.

        Its status counts read the status index of every unfinished instance (about 45 ms at
        150,000 of them, bench/bench_console.py): one call serves every page for a few seconds
        instead of one per page view. The state counts next to them are always current.
        Its ``running`` counts the instances a handler runs or will (a run with a due time),
        ``idle`` those of stored status running that no handler runs (docs/reporting.md).
        """
        with self._stats_lock:
            if self._stats is not None and time.monotonic() - self._stats[0] < self.stats_max_age:
                return self._stats[1]
        rows = self.gateway.call(routines.STATS, (), checked=False)
        with self._stats_lock:
            self._stats = (time.monotonic(), rows)
        return rows

    def machines(self) -> list[Row]:
        """Installed types with their counts per state (the counters) and per status (fsm_stats_v3),
        the states in the order their current definition lists them (then any state of an older
        version that still holds instances)."""
        stats = {r["machine"]: r for r in self.stats_rows()}
        order = {r["machine"]: _definition_states(r["body"]) for r in self.gateway.query("console_current_definitions")}
        counts: dict[str, list[Row]] = {}
        for r in self.gateway.query("console_state_counts"):
            counts.setdefault(r["machine"], []).append({"state": r["state"], "instances": int(r["instances"])})
        for name, states in counts.items():
            listed = order.get(name, {})
            states.sort(key=lambda c: listed.get(c["state"], len(listed)))  # stable: older states stay a-z
            for c in states:  # a state of an older version, listed while it holds instances
                c["current"] = c["state"] in listed
        return [{**s, "states": counts.get(name, [])} for name, s in sorted(stats.items())]

    def explained(self, err: UnknownMachine, name: str | None) -> UnknownMachine:
        """``err``, or, when no machine type ``name`` is defined, UnknownMachine naming the
        installed types (as the Store says it); ``err`` if that cannot be read."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            return err
        try:
            rows = self.gateway.query("types_defined")
        except FsmError:
            return err
        if any(r["machine"] == name for r in rows):
            return err
        return unknown_type(name, [str(r["machine"]) for r in rows if r["installed"]])

    def machine(self, name: str, version: int | None = None) -> Machine:
        """The type's current definition, or its definition ``version``."""

        def read(conn: Any) -> Machine:
            return reporting.current_machine(conn, name, version)

        return self.gateway.on_primary(read)

    def state_counts(self, name: str) -> dict[str, int]:
        return self.gateway.on_primary(lambda conn: reporting.state_counts(conn, name))

    def stats(self, name: str) -> Row | None:
        return next((r for r in self.stats_rows() if r["machine"] == name), None)

    def current_version(self, name: str) -> int | None:
        """The type's current definition version (None: no such type), by the definitions' key."""
        found = self.gateway.query("console_current_version", (check_machine_name(name),))
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
            rows = self.gateway.call(routines.VERSION_COUNTS, (name,), checked=False)
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
        found = self.gateway.query("console_current_state", (key,), type=check_machine_name(name))
        return found[0]["current_state"] if found else None

    # -- instance listing -------------------------------------------------------------------

    def instances(self, name: str, f: Filters) -> Page:
        name = check_machine_name(name)
        where: list[str] = []  # blocks of console.sql
        args: list[Any] = []
        for block, value in (
            ("console_filter_state", f.state),
            ("console_filter_status", f.status),
            ("console_filter_lookup_key", f.lookup_key),
            ("console_filter_updated_after", f.updated_after),
            ("console_filter_updated_before", f.updated_before),
        ):
            if value is not None:
                where.append(block)
                args.append(value)
        high = f.before_id
        low = None
        if f.windowed:
            if high is None:  # the newest id, by the primary key: one row
                top = self.gateway.query("console_newest_id", type=name)
                high = int(top[0]["id"]) + 1 if top else 1
            low = max(high - SCAN_WINDOW, 1)
            where.append("console_filter_id_from")
            args.append(low)
        if high is not None:
            where.append("console_filter_id_below")
            args.append(high)
        rows = self.gateway.query(
            "console_instances", [name, *args], type=name, where=where or "console_filter_true", limit=PAGE + 1
        )
        searched = (low, high - 1) if low is not None and high is not None else None
        if len(rows) > PAGE:
            return Page(rows[:PAGE], int(rows[PAGE - 1]["id"]), searched)
        if searched is not None:
            return Page(rows, searched[0] if searched[0] > 1 else None, searched)
        return Page(rows, None)

    # -- one instance -----------------------------------------------------------------------

    def instance(self, name: str, key: str, *, history_before: int | None = None) -> InstanceView | None:
        name = check_machine_name(name)
        found = self.gateway.query("console_instance", (key,), type=name)
        if not found:
            return None
        inst = found[0]
        history = self.gateway.query(
            "console_history",
            (key,) if history_before is None else (key, history_before),
            type=name,
            where=["console_filter_instance_key"]
            + ([] if history_before is None else ["console_filter_sort_key_below"]),
            limit=HISTORY_PAGE + 1,
        )
        more = len(history) > HISTORY_PAGE
        history = history[:HISTORY_PAGE]
        for h in history:
            h["diff"] = data_diff(h["data_before"], h["data_after"])
            h["metadata"] = _json(h["metadata"])
            h["label"] = history_label(h)
        errors = self.gateway.query("console_instance_errors", (name, inst["id"]))
        runs = self.gateway.query("console_instance_run", (name, inst["id"]))
        locks = (
            self.gateway.query("console_instance_locks", (name, inst["lookup_key"]))
            if inst["lookup_key"] is not None
            else []
        )
        outbox = self.gateway.query("console_instance_outbox", (name, inst["id"]))
        actions = self.gateway.query("console_instance_actions", (name, key))
        timers = self.gateway.query("console_instance_timers", (name, inst["id"]))  # index (machine, instance_id)
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
        found = self.gateway.query("console_operator_action", (action_id,))
        return found[0] if found else None

    # -- operations pages -------------------------------------------------------------------

    def failed(self, name: str, before_id: int | None = None) -> Page:
        """Failed instances of one type, newest first, each with its last error."""
        name = check_machine_name(name)
        rows = self.gateway.query(
            "console_failed",
            (name,) if before_id is None else (name, before_id),
            type=name,
            where=["console_filter_failed"] + ([] if before_id is None else ["console_filter_failed_id_below"]),
            limit=PAGE + 1,
        )
        return Page(rows[:PAGE], int(rows[PAGE - 1]["id"]) if len(rows) > PAGE else None)

    def stuck(self, name: str, stuck_after: float) -> list[Row]:
        """Runs due for longer than ``stuck_after`` seconds: nobody picks them up, or their
        claimer died (a claim is a lease: an expired one is due), oldest first."""
        return self.gateway.query(
            "console_stuck", (name, int(stuck_after * 1_000_000)), type=check_machine_name(name), limit=PAGE
        )

    def queue(self, name: str) -> list[Row]:
        """The next runs of one type by due time (claimed ones show their lease's end)."""
        return self.gateway.query("console_queue", (check_machine_name(name),), limit=PAGE)

    def claimers(self) -> list[Row]:
        """Who holds claims now, through the index on claimed_by."""
        return self.gateway.query("console_claimers")

    def locks(self) -> list[Row]:
        return self.gateway.query("console_locks")

    # -- timers ------------------------------------------------------------------------------

    def timers(
        self, machine: str | None, *, overdue: bool = False, after: tuple[datetime, int] | None = None
    ) -> TimerPage:
        """Armed timers by due time (the most overdue first), a page at a time: the index on
        due_at serves the order, the overdue filter (a range of it) and the cursor."""
        where: list[str] = ["console_filter_true"]  # blocks of console.sql
        args: list[Any] = []
        if machine is not None:
            where.append("console_filter_machine")
            args.append(check_machine_name(machine))
        if overdue:
            where.append("console_filter_due_now")
        if after is not None:  # (due_at, timer_id) > after, written so that it is a range of the index
            where.append("console_filter_timer_after")
            args += [after[0], after[0], after[1]]
        rows = self.gateway.query("console_timers", args, where=where, limit=PAGE + 1)
        if len(rows) > PAGE:
            last = rows[PAGE - 1]
            return TimerPage(rows[:PAGE], (last["due_at"], int(last["timer_id"])))
        return TimerPage(rows, None)

    def timer_summary(self, machine: str | None) -> Row:
        """Armed timers, how many are overdue and held, and the oldest overdue's lateness in
        seconds (0: none). Counting the armed ones reads every armed timer; the others read
        the overdue range of the due_at index."""
        only = [] if machine is None else ["console_filter_machine"]
        args = () if machine is None else (check_machine_name(machine),)
        row = self.gateway.query(
            "console_timer_summary",
            args * 2,
            where=["console_filter_true", *only],
            where_overdue=["console_filter_due_now", *only],
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
        if machine is None:
            return self.gateway.query("console_timer_log", where="console_filter_true", limit=TIMER_LOG_ROWS)
        return self.gateway.query(
            "console_timer_log", (check_machine_name(machine),), where="console_filter_machine", limit=TIMER_LOG_ROWS
        )

    def timer(self, timer_id: int) -> Row | None:
        found = self.gateway.query("console_timer", (timer_id,))
        return found[0] if found else None

    def outbox_lag(self) -> Row:
        return self.gateway.call_one(routines.OUTBOX_LAG, (), checked=False)

    def parked(self) -> list[Row]:
        return self.gateway.query("console_outbox_parked")

    def oldest_unpublished(self) -> list[Row]:
        return self.gateway.query("console_outbox_oldest")

    def outbox_row(self, outbox_id: int) -> Row | None:
        found = self.gateway.query("console_outbox_row", (outbox_id,))
        return found[0] if found else None


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
