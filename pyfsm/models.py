"""What the Store returns: plain frozen dataclasses built from procedure result rows."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any, Self

from .guards import Guard, first_holding, guard

#: Every status an instance can have, in the order pages and metrics list them.
STATUSES = ("running", "waiting", "paused", "failed", "completed")


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


def _json(value: Any) -> Any:
    if value is None or isinstance(value, dict):
        return value
    return json.loads(value)


@dataclass(frozen=True)
class Instance:
    """One machine instance as stored (status: running, waiting, paused, completed, failed)."""

    id: int
    machine: str
    key: str
    lookup_key: str | None
    state: str
    status: str
    data: dict[str, Any]
    version: int
    definition_version: int
    kafka_topic: str | None
    save_after_step: bool
    uses_global_lock: bool
    uses_local_lock: bool
    resume_from_step: str | None
    created_at: datetime
    updated_at: datetime
    unlocked_at: datetime | None
    last_retry_at: datetime | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Instance:
        return cls(
            id=row["id"],
            machine=row["machine"],
            key=row["instance_key"],
            lookup_key=row["lookup_key"],
            state=row["current_state"],
            status=row["status"],
            data=_json(row["data"]),
            version=row["version"],
            definition_version=row["definition_version"],
            kafka_topic=row["kafka_topic"],
            save_after_step=bool(row["save_after_step"]),
            uses_global_lock=bool(row["uses_global_lock"]),
            uses_local_lock=bool(row["uses_local_lock"]),
            resume_from_step=row["resume_from_step"],
            created_at=_utc_time(row["created_at"]),
            updated_at=_utc_time(row["updated_at"]),
            unlocked_at=_utc(row["unlocked_at"]),
            last_retry_at=_utc(row["last_retry_at"]),
        )


@dataclass(frozen=True)
class AllowedEvent:
    """An event of an instance's current state, as :meth:`Store.allowed_events` finds it now.

    ``allowed``: its rules' guards let it through with the instance's data as it is (a send
    that also sets data is judged on that data); ``target`` is where it leads then (None when
    refused). ``targets``: every state its rules lead to from here, in the order they are
    tried. ``refused_by``: when refused, the guards that refuse it, by name (a guard without
    one by its text), as the error (GuardRefused, 31032) would name them. An instance that is
    paused or locked by another owner refuses every event whatever this says.
    """

    event: str
    allowed: bool
    target: str | None
    targets: tuple[str, ...]
    refused_by: tuple[str, ...] = ()


def evaluate_events(rules: Iterable[tuple[str, str, Guard | None]], doc: Mapping[str, Any]) -> list[AllowedEvent]:
    """AllowedEvents from a state's rules, (event, to_state, guard) in the order they are tried,
    each event's guards tested against the data ``doc`` as the transition trigger tests them."""
    by_event: dict[str, list[tuple[str, Guard | None]]] = {}
    for event, to_state, condition in rules:
        by_event.setdefault(event, []).append((to_state, condition))
    out = []
    for event, tried in by_event.items():
        target, refused = first_holding(tried, doc)
        out.append(
            AllowedEvent(
                event, target is not None, target, tuple(t for t, _ in tried), () if target is not None else refused
            )
        )
    return out


def allowed_events(rows: list[dict[str, Any]]) -> list[AllowedEvent]:
    """The rows of fsm_{type}_allowed_events_v1 (rules in the order they are tried, the
    instance's data on each) as AllowedEvents."""
    rules = [
        (r["event"], r["to_state"], None if r["guard"] is None else guard(_json(r["guard"]), r["guard_name"]))
        for r in rows
        if r["event"] is not None
    ]
    return evaluate_events(rules, (_json(rows[0]["data"]) or {}) if rows else {})


@dataclass(frozen=True)
class TransitionResult:
    """What a send or create did. ``replayed`` is True when a request id matched an earlier call."""

    transition_id: int
    instance_id: int
    key: str
    event: str | None
    from_state: str | None
    to_state: str
    sort_key: int
    version: int
    status: str
    created: bool
    replayed: bool

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TransitionResult:
        return cls(
            transition_id=row["transition_id"],
            instance_id=row["instance_id"],
            key=row["instance_key"],
            event=row["event"],
            from_state=row["from_state"],
            to_state=row["to_state"],
            sort_key=int(row["sort_key"]),
            version=int(row["version"]),
            status=row["status"],
            created=bool(row["created"]),
            replayed=bool(row["replayed"]),
        )

    @classmethod
    def from_send_row(cls, row: dict[str, Any], key: str, event: str) -> TransitionResult:
        """From the row of ``fsm_{type}_send_v5`` or ``_fire_v2`` (fire_v1, send_v4, v3, v2): without the key and event.

        Every Store.send ends here, so the fields are filled in one step: a frozen dataclass's
        ``__init__`` sets each of the eleven through ``object.__setattr__``, which was a tenth of
        what pyfsm's Python adds to a send (bench/bench_layers.py). The result is the same
        object, equal to one made by ``__init__``.
        """
        version = int(row["version"])
        made = object.__new__(cls)
        object.__setattr__(
            made,
            "__dict__",
            {
                "transition_id": row["transition_id"],
                "instance_id": row["instance_id"],
                "key": key,
                "event": event,
                "from_state": row["from_state"],
                "to_state": row["to_state"],
                "sort_key": version,
                "version": version,
                "status": row["status"],
                "created": bool(row["created"]),
                "replayed": bool(row["replayed"]),
            },
        )
        return made


@dataclass(frozen=True)
class HistoryEntry:
    """One history row. The creation of an instance has ``event`` and ``from_state`` None."""

    id: int
    instance_id: int
    sort_key: int
    most_recent: bool
    event: str | None
    from_state: str | None
    to_state: str
    handler: str | None
    data_before: dict[str, Any] | None
    data_after: dict[str, Any]
    metadata: dict[str, Any]
    definition_version: int
    request_id: str | None
    source: str
    created_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> HistoryEntry:
        return cls(
            id=row["id"],
            instance_id=row["instance_id"],
            sort_key=row["sort_key"],
            most_recent=bool(row["most_recent"]),
            event=row["event"],
            from_state=row["from_state"],
            to_state=row["to_state"],
            handler=row["handler"],
            data_before=_json(row["data_before"]),
            data_after=_json(row["data_after"]),
            metadata=_json(row["metadata"]),
            definition_version=row["definition_version"],
            request_id=row["request_id"],
            source=row["source"],
            created_at=_utc(row["created_at"]),  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class AccountHistoryEntry:
    """One history row of an account's history across machine types (:meth:`Store.account_history`).

    ``machine`` and ``key`` name the instance; ``id`` is the history row's id in its type's
    table (ids of different types may be equal). ``entered_at`` is when the instance entered
    ``to_state``, ``left_at`` when it left it (None while it is still there). Pass ``cursor``
    as ``after`` to get the next page.
    """

    machine: str
    key: str
    lookup_key: str
    id: int
    instance_id: int
    sort_key: int
    event: str | None
    from_state: str | None
    to_state: str
    handler: str | None
    source: str
    request_id: str | None
    definition_version: int
    data_before: dict[str, Any] | None
    data_after: dict[str, Any]
    metadata: dict[str, Any]
    entered_at: datetime
    left_at: datetime | None
    is_current: bool

    @property
    def cursor(self) -> tuple[datetime, str, int]:
        """(entered_at, machine, id): where the next page starts."""
        return (self.entered_at, self.machine, self.id)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> AccountHistoryEntry:
        return cls(
            machine=row["machine"],
            key=row["instance_key"],
            lookup_key=row["lookup_key"],
            id=row["transition_id"],
            instance_id=row["instance_id"],
            sort_key=row["sort_key"],
            event=row["event"],
            from_state=row["from_state"],
            to_state=row["to_state"],
            handler=row["handler"],
            source=row["source"],
            request_id=row["request_id"],
            definition_version=row["definition_version"],
            data_before=_json(row["data_before"]),
            data_after=_json(row["data_after"]),
            metadata=_json(row["metadata"]),
            entered_at=_utc(row["entered_at"]),  # type: ignore[arg-type]
            left_at=_utc(row["left_at"]),
            is_current=bool(row["is_current"]),
        )


@dataclass(frozen=True)
class DefineResult:
    """What :meth:`Store.define` stored: the current version and whether it is new."""

    machine: str
    version: int
    changed: bool


class _Fields:
    """The results below were dicts before 0.3.0; indexing them still works, with a
    DeprecationWarning, until 0.4.0. Their field names are the procedures' column names."""

    def __getitem__(self, name: str) -> Any:
        warnings.warn(
            f"{type(self).__name__}[{name!r}] is deprecated since pyfsm 0.3.0 and goes in 0.4.0: use .{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        if name not in {f.name for f in fields(self)}:  # type: ignore[arg-type]
            raise KeyError(name)
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        """Deprecated like indexing: use the attribute."""
        return self[name] if name in {f.name for f in fields(self)} else default  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (the shape the method returned before 0.3.0)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Self:
        """The result from a procedure's row: each field from the column of its name (a field
        with a default may be missing from the row: an older procedure's, which lacks it). A
        time is UTC-aware, as every time a Store result holds (the driver gives it naive)."""
        values = {
            f.name: row[f.name]
            for f in fields(cls)  # type: ignore[arg-type]
            if f.name in row or f.default is MISSING
        }
        for f in fields(cls):  # type: ignore[arg-type]
            if "datetime" in str(f.type) and values.get(f.name) is not None:
                values[f.name] = _utc_time(values[f.name])
        return cls(**values)


@dataclass(frozen=True)
class StoredDefinition(_Fields):
    """A stored definition (Store.definition): ``definition`` is its JSON body as a dict."""

    machine: str
    version: int
    is_current: bool
    definition: dict[str, Any]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StoredDefinition:
        body = row["body"]
        return cls(
            row["machine"],
            int(row["version"]),
            bool(row["is_current"]),
            json.loads(body) if isinstance(body, str | bytes) else body,
        )


@dataclass(frozen=True)
class PauseResult(_Fields):
    """Store.pause: ``pending`` is True while the pause waits for the step in progress to end."""

    state: str
    status: str
    pending: bool


@dataclass(frozen=True)
class StatusChange(_Fields):
    """Store.resume and Store.retry: where the instance is now and its status."""

    state: str
    status: str


@dataclass(frozen=True)
class QueuedRun(_Fields):
    """Store.enqueue: when the instance is due for the engine's workers (UTC-aware; None while
    it waits or is paused: its run is kept, and is due when it is woken or resumed)."""

    instance_key: str
    due_at: datetime | None
    claimed_by: str | None
    run_immediately: int | None


@dataclass(frozen=True)
class FailedInstance(_Fields):
    """Store.failed: a failed instance with its last error (times UTC-aware)."""

    id: int
    instance_key: str
    lookup_key: str | None
    current_state: str
    updated_at: datetime
    handler: str | None
    attempt: int | None
    error_type: str | None
    message: str | None
    failed_at: datetime | None


@dataclass(frozen=True)
class AttemptError(_Fields):
    """Store.errors: one failed attempt of a step (fsm_errors; times UTC-aware)."""

    id: int
    state: str
    handler: str | None
    attempt: int
    error_type: str | None
    message: str | None
    traceback: str | None
    outcome: str | None
    next_run_at: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class RunInfo(_Fields):
    """Store.run_info: the instance's row in the engine's queue (due_at: its next run time, or
    while ``claimed_by`` is set, when the claim expires; UTC-aware. None: no run is due, the
    instance waits or is paused: no handler runs it until it is woken or resumed)."""

    instance_id: int
    due_at: datetime | None
    claimed_by: str | None
    attempt: int
    pause_requested: int
    run_immediately: int | None


@dataclass(frozen=True)
class StatePeriod(_Fields):
    """Store.state_at: the state an instance was in at a moment, when it entered it and when it
    left it (None: still there); times are UTC-aware."""

    state: str
    sort_key: int
    event: str | None
    entered_at: datetime
    left_at: datetime | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StatePeriod:
        return cls(
            row["state"],
            row["sort_key"],
            row["event"],
            _utc(row["entered_at"]),  # type: ignore[arg-type]
            _utc(row["left_at"]),
        )


@dataclass(frozen=True)
class TypeStats(_Fields):
    """Store.stats: one installed machine type's instances by status, its engine queue and its
    unpublished outbox events (fsm_stats_v3). ``running``: instances a handler runs or will
    (a run with a due time); ``idle``: status running in the table, but no handler runs them
    (they move when an event is sent). fsm_stats_v2, which has no idle column, counted both as
    running (``idle`` is 0 when built from its row)."""

    machine: str
    current_version: int | None
    instances: int
    running: int
    waiting: int
    paused: int
    failed: int
    completed: int
    due: int
    claimed: int
    unpublished: int
    oldest_unpublished_at: datetime | None
    idle: int = 0


# -- timers (pyfsm.timers, docs/timers.md) ---------------------------------------------------


def _utc_time(value: Any) -> datetime:
    """A time of a timer, UTC-aware as the Instance's are (a procedure may give it as text)."""
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class _TimerRef:
    """Which timer: its id, instance, kind, event and due time."""

    timer_id: int
    machine: str
    instance_key: str
    kind: str
    event: str
    due_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Self:
        values = {f.name: row[f.name] for f in fields(cls)}
        values.update(timer_id=int(row["timer_id"]), due_at=_utc_time(row["due_at"]))
        return cls(**values)


@dataclass(frozen=True)
class CancelledTimer(_TimerRef):
    """A timer Store.cancel_timer removed before it fired."""


@dataclass(frozen=True)
class ScheduledTimer(_TimerRef):
    """What Store.send_at armed (``replayed``: a repeat of a call with the same request id)."""

    replayed: bool

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Self:
        return replace(super().from_row(row), replayed=bool(row["replayed"]))


@dataclass(frozen=True)
class Timer:
    """An armed timer (Store.timers, the view fsm_v_timers): kind 'timeout' (``state``'s
    timeout) or 'scheduled' (Store.send_at). ``overdue_seconds`` is 0 until due; ``holds``
    and ``last_errno`` tell why a due timer waits (31011: its instance is paused)."""

    timer_id: int
    machine: str
    instance_key: str
    kind: str
    state: str | None
    event: str
    due_at: datetime
    fire_at: datetime
    armed_at: datetime
    overdue_seconds: float
    claimed_by: str | None
    holds: int
    last_errno: int | None
    last_error: str | None
    request_id: str | None
    metadata: dict[str, Any] | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Timer:
        values = {f.name: row[f.name] for f in fields(cls)}
        values.update(
            timer_id=int(row["timer_id"]),
            overdue_seconds=float(row["overdue_seconds"]),
            holds=int(row["holds"]),
            metadata=_json(row["metadata"]),
            due_at=_utc_time(row["due_at"]),
            fire_at=_utc_time(row["fire_at"]),
            armed_at=_utc_time(row["armed_at"]),
        )
        return cls(**values)


@dataclass(frozen=True)
class TimerOutcome:
    """One timer a firing call handled: ``outcome`` 'fired' (``transition_id`` is the history
    row), 'dropped' (its event was not allowed then: ``errno``) or 'held' (the instance is
    paused or locked: it stays armed); ``lag_seconds`` from due to handled."""

    timer_id: int
    machine: str
    instance_key: str
    kind: str
    event: str
    due_at: datetime
    outcome: str
    transition_id: int | None
    errno: int | None
    lag_seconds: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TimerOutcome:
        return cls(
            int(row["timer_id"]),
            row["machine"],
            row["instance_key"],
            row["kind"],
            row["event"],
            _utc_time(row["due_at"]),
            row["outcome"],
            None if row["transition_id"] is None else int(row["transition_id"]),
            None if row["errno"] is None else int(row["errno"]),
            float(row["lag_seconds"]),
        )
