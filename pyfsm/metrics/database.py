"""What the database holds, as Prometheus metrics: the collector behind `pyfsm metrics` and
the console's /metrics.

Everything is read on each scrape, through what a reporting account (`pyfsm grant
--reporting`) may read, in four round trips on one connection:

1. ``CALL fsm_stats_v3()``: the installed types and their instances by status (running: a
   handler runs them or will; idle: not done, and no handler runs them; docs/reporting.md);
2. ``CALL fsm_outbox_lag_v1()``: the relay's backlog;
3. one ``SELECT`` of labelled samples (a ``UNION ALL``): the counters per state
   (fsm_v_state_counts), the locks held by kind (fsm_held_locks_v1), per type the
   highest history id and the queue (fsm_v_runs), and the timers (fsm_v_timers,
   fsm_v_timer_log: see metrics_snapshot_timers in sql/queries/metrics.sql);
4. only when a type has new history: one ``SELECT`` counting its new history rows per event.

Nothing counts instances or history: the counts per state are the triggers' counters, the
status counts read the (status, id) index of the instances that are not completed, the
highest history id is one index read (see metrics_max_transition_id in
sql/queries/metrics.sql), and the per-event counters read only the history rows written since
the previous scrape, at most ``max_event_rows`` per type and scrape (the rest on the next
one). The queue's counts read fsm_runs's index (machine, due_at, id): as many entries as runs
are due. The armed timers are counted by type and kind (every armed timer: fsm_timers has no
counters); the overdue ones, the firing lags and the outcome counters read ranges of the
indexes on due_at and done_at.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..checks import check_int
from ..db import queries
from ..errors import InvalidArgument
from ..schema import routines
from ..schema.resources import check_machine_name
from ..store import Store

log = logging.getLogger("pyfsm.metrics")

#: The firing lag's quantiles are those of the timers fired in the last TIMER_WINDOW_SECONDS,
#: the newest TIMER_LAG_ROWS of them at most.
TIMER_WINDOW_SECONDS = 300
#: The status columns of fsm_stats_v3, in its order: the statuses every reader of pyfsm shows.
STATS_STATUSES = ("running", "idle", "waiting", "paused", "failed", "completed")
TIMER_LAG_ROWS = 10_000
LAG_QUANTILES = (0.5, 0.99)
TIMER_KINDS = ("timeout", "scheduled")
TIMER_OUTCOMES = ("fired", "dropped", "cancelled")
#: The snapshot's rows that _timer_families reads (not per-type samples of _families).
_TIMER_ROWS = frozenset(
    (
        "timers_armed",
        "timers_overdue",
        "timers_held",
        "timers_oldest_overdue_seconds",
        "timer_lag",
        "timer_outcomes",
        "timer_log_upto",
    )
)
#: The timer log's cursor travels through the UNION's numeric column as microseconds since this.
_EPOCH = datetime(1970, 1, 1)


def _snapshot_sql(
    machines: list[str], stuck_after: float, after: datetime | None, settle_seconds: float
) -> tuple[str, tuple[Any, ...] | None]:
    """One SELECT of rows (what, machine, label, value): a row per sample, and its parameters.

    The parts (sql/queries/metrics.sql): metrics_snapshot, metrics_snapshot_type per installed
    type (names checked by the caller: [a-z][a-z0-9_]*), metrics_snapshot_timers and, from the
    second scrape on (``after``: where the previous one counted timer outcomes up to),
    metrics_snapshot_timer_outcomes, whose one parameter is ``after`` as text. Due and claimed
    runs come from fsm_stats_v3, read just before.
    """
    settle_us = int(settle_seconds * 1_000_000)
    parts = [
        queries.sql("metrics_snapshot"),
        *(queries.sql("metrics_snapshot_type", type=m, stuck_us=int(stuck_after * 1_000_000)) for m in machines),
        queries.sql(
            "metrics_snapshot_timers",
            window_seconds=TIMER_WINDOW_SECONDS,
            lag_rows=TIMER_LAG_ROWS,
            settle_us=settle_us,
        ),
    ]
    if after is None:  # the first scrape counts no timer outcomes: it only places the cursor
        return queries.union_all(parts), None
    parts.append(queries.sql("metrics_snapshot_timer_outcomes", settle_us=settle_us))
    # the text of the literal the statement always had (microseconds included), now a parameter
    return queries.union_all(parts), (f"{after:%Y-%m-%d %H:%M:%S.%f}",)


def quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated between the two nearest ranks (as
    numpy's default and PostgreSQL's percentile_cont do)."""
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _events_sql(ranges: dict[str, tuple[int, int]], limit: int) -> str:
    """Rows (machine, event, n, last_id): per type, the new history rows by event, the
    ``limit`` lowest ids of (after, upto] (metrics_events_type, a part per type)."""
    return queries.union_all(
        [
            queries.sql("metrics_events_type", type=m, after=int(after), upto=int(upto), limit=int(limit))
            for m, (after, upto) in ranges.items()
        ]
    )


def _rows(cur: Any, sql: str, args: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
    """Every row of a statement (a CALL's first result set), every result set drained."""
    cur.execute(sql, args)
    rows = list(cur.fetchall())
    while cur.nextset():
        pass
    return rows


def _number(value: Any) -> float:
    return 0.0 if value is None else float(value) if isinstance(value, (Decimal, int, float)) else float(str(value))


def _seconds(what: str, value: object, maximum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= maximum:
        raise InvalidArgument(f"{what} must be a number of seconds from 0 to {maximum:g}, got {value!r:.80}")
    return float(value)


class DatabaseCollector(Collector):
    """A prometheus_client collector that reads pyfsm's database on every scrape.

    ``store``: a pyfsm.Store (a reporting account is enough). ``stuck_after``: seconds a run
    may be overdue before it counts in ``pyfsm_stuck_runs``. ``max_event_rows``: history
    rows read per type and scrape for ``pyfsm_transitions_by_event_total``. ``settle_seconds``:
    a history row is counted by event once the collector saw a higher id at least that long
    ago, so that a transaction still open at a scrape (its row has an id below rows already
    committed, but is not visible yet) is counted once it commits, not skipped; the
    per-event counters lag by about one scrape. 0 counts up to the newest row at once.
    ``read_replica``: read the store's read replica (``Store(read_dsn=...)``) instead of the
    primary; every number then lags by the replica's delay, and those counted against the
    clock (stuck runs, the oldest due, locks held) see lease ends the primary has moved since.

    A scrape that cannot read the database answers all the same: ``pyfsm_up 0`` and the
    scrape's duration, and logs why (logger ``pyfsm.metrics``). Scrapes are serialised.
    """

    def __init__(
        self,
        store: Store,
        *,
        stuck_after: float = 300.0,
        max_event_rows: int = 100_000,
        settle_seconds: float = 5.0,
        read_replica: bool = False,
    ) -> None:
        self.store = store
        if read_replica and store.read_settings is None:
            raise InvalidArgument("read_replica=True needs a Store with read_dsn")
        self.read_replica = read_replica
        self.stuck_after = _seconds("stuck_after", stuck_after, 10**8)
        self.settle_seconds = _seconds("settle_seconds", settle_seconds, 3600)
        self.max_event_rows = check_int("max_event_rows", max_event_rows, minimum=1, maximum=10_000_000)
        self._mutex = threading.Lock()
        self._cursor: dict[str, int] | None = None  # type -> the highest history id counted by event
        self._seen: list[tuple[float, dict[str, int]]] = []  # (monotonic time, highest ids then)
        self._by_event: dict[tuple[str, str], int] = {}
        self._timer_log_after: datetime | None = None  # done_at up to which timer outcomes are counted
        self._timer_outcomes: dict[tuple[str, str], int] = {}
        #: Why the last scrape could not read the database (None: it could).
        self.last_error: Exception | None = None

    def describe(self) -> list[Metric]:
        return []  # registering must not read the database: families are known only when read

    def collect(self) -> Iterator[Metric]:
        with self._mutex:
            started = time.perf_counter()
            try:
                families = self._read()
                up, self.last_error = 1.0, None
            except Exception as exc:  # a scrape answers whatever happens; the reason goes to the log
                log.warning("pyfsm metrics: reading the database failed: %s: %s", type(exc).__name__, exc)
                families, up, self.last_error = [], 0.0, exc
            yield from families
            yield GaugeMetricFamily(
                "pyfsm_up", "1 if the last scrape read the database, 0 if not (see the log)", value=up
            )
            yield GaugeMetricFamily(
                "pyfsm_scrape_duration_seconds",
                "Seconds this scrape took to read the database",
                value=time.perf_counter() - started,
            )

    # -- reading --------------------------------------------------------------------------

    def _read(self) -> list[Metric]:
        # on a replica every number lags, and those counted against the clock (stuck runs, the
        # oldest due, locks held) read old lease ends as expired: only when asked for
        # (SchemaVersionMismatch names the fix when the schema is not this pyfsm's)
        database = (
            self.store.gateway.replica_or_primary() if self.read_replica else self.store.gateway.checked_primary()
        )
        return database.on_connection(self._read_on)

    def _read_on(self, conn: Any) -> list[Metric]:
        with conn.cursor() as cur:
            stats = _rows(cur, routines.STATS.call_sql())
            lag = _rows(cur, routines.OUTBOX_LAG.call_sql())
            machines = [check_machine_name(str(row[0])) for row in stats]
            snapshot = _rows(
                cur, *_snapshot_sql(machines, self.stuck_after, self._timer_log_after, self.settle_seconds)
            )
            self._count_timer_outcomes(snapshot)
            highest = {str(m): int(v or 0) for what, m, _label, v in snapshot if what == "max_transition_id"}
            self._count_events(cur, highest)
        return self._families(stats, lag[0] if lag else None, snapshot, machines)

    def _count_timer_outcomes(self, snapshot: list[tuple[Any, ...]]) -> None:
        """Add the timer outcomes logged since the last scrape, and move the cursor past them."""
        for what, machine, outcome, n in snapshot:
            if what == "timer_outcomes":
                key = (str(machine), str(outcome))
                self._timer_outcomes[key] = self._timer_outcomes.get(key, 0) + int(n)
            elif what == "timer_log_upto":
                upto = _EPOCH + timedelta(microseconds=int(n))
                self._timer_log_after = upto if self._timer_log_after is None else max(self._timer_log_after, upto)

    def _count_events(self, cur: Any, highest: dict[str, int]) -> None:
        """Add the history rows written since the last scrape to the per-event counters."""
        now = time.monotonic()
        if self._cursor is None:  # the first scrape: count from here on
            self._cursor = dict(highest)
        # up to the highest ids seen settle_seconds ago (or now, with no settling)
        settled = [seen for seen in self._seen if seen[0] <= now - self.settle_seconds]
        upto = highest if self.settle_seconds == 0 else settled[-1][1] if settled else {}
        ranges = {m: (self._cursor.get(m, 0), top) for m, top in upto.items() if top > self._cursor.get(m, 0)}
        if ranges:
            moved = dict.fromkeys(ranges, 0)
            last = {m: after for m, (after, _upto) in ranges.items()}
            for machine, event, n, last_id in _rows(cur, _events_sql(ranges, self.max_event_rows)):
                key = (str(machine), str(event))
                self._by_event[key] = self._by_event.get(key, 0) + int(n)
                moved[key[0]] += int(n)
                last[key[0]] = max(last[key[0]], int(last_id))
            for m, (_after, top) in ranges.items():  # a full page: the rest waits for the next scrape
                self._cursor[m] = last[m] if moved[m] >= self.max_event_rows else top
        # keep the newest observation old enough to settle on, and the ones after it
        self._seen = ([settled[-1]] if settled else []) + [s for s in self._seen if s[0] > now - self.settle_seconds]
        self._seen.append((now, dict(highest)))

    # -- the families -----------------------------------------------------------------------

    def _families(
        self,
        stats: list[tuple[Any, ...]],
        lag: tuple[Any, ...] | None,
        snapshot: list[tuple[Any, ...]],
        machines: list[str],
    ) -> list[Metric]:
        per: dict[str, dict[str, float]] = {}
        instances = GaugeMetricFamily(
            "pyfsm_instances", "Instances in each state (the triggers' counters)", labels=["machine", "state"]
        )
        locks = dict.fromkeys(("global", "local"), 0.0)
        for what, machine, label, value in snapshot:
            if what == "instances":
                instances.add_metric([str(machine), str(label)], _number(value))
            elif what == "locks":
                locks[str(label)] = _number(value)
            elif what not in _TIMER_ROWS:
                per.setdefault(str(machine), {})[str(what)] = _number(value)

        by_status = GaugeMetricFamily(
            "pyfsm_instances_by_status", "Instances of each type by status (fsm_stats_v3)", labels=["machine", "status"]
        )
        # fsm_stats_v3's columns: machine, current_version, instances, the statuses, due, claimed, ...
        for row in stats:
            for status, value in zip(STATS_STATUSES, row[3:9], strict=True):
                by_status.add_metric([str(row[0]), status], _number(value))
            per.setdefault(str(row[0]), {}).update(due=_number(row[9]), claimed=_number(row[10]))

        def per_type(
            name: str, kind: type[GaugeMetricFamily] | type[CounterMetricFamily], text: str, what: str
        ) -> Metric:
            family = kind(name, text, labels=["machine"])
            for m in machines:
                family.add_metric([m], per.get(m, {}).get(what, 0.0))
            return family

        by_event = CounterMetricFamily(
            "pyfsm_transitions_by_event",
            "History rows by event since this exporter started (creations: event '')",
            labels=["machine", "event"],
        )
        for (machine, event), n in sorted(self._by_event.items()):
            by_event.add_metric([machine, event], n)
        held = GaugeMetricFamily(
            "pyfsm_locks_held", "Locks held now, global and local (fsm_held_locks_v1)", labels=["kind"]
        )
        for kind, count in sorted(locks.items()):
            held.add_metric([kind], count)
        unpublished, parked, _oldest_id, _occurred, age = lag or (0, 0, None, None, None)
        return [
            instances,
            by_status,
            per_type(
                "pyfsm_transitions",
                CounterMetricFamily,
                "Highest history id of the type: rate() is transitions per second (ids may skip on rollbacks)",
                "max_transition_id",
            ),
            by_event,
            per_type("pyfsm_queue_due", GaugeMetricFamily, "Runs due now (an expired claim is due)", "due"),
            per_type("pyfsm_queue_claimed", GaugeMetricFamily, "Runs a worker's claim holds now", "claimed"),
            per_type(
                "pyfsm_queue_oldest_due_seconds",
                GaugeMetricFamily,
                "Seconds the longest-due run has been due (0: none due)",
                "oldest_due_seconds",
            ),
            per_type(
                "pyfsm_stuck_runs",
                GaugeMetricFamily,
                f"Runs due for more than {self.stuck_after:g} s: no worker picks them up",
                "stuck",
            ),
            GaugeMetricFamily(
                "pyfsm_outbox_unpublished",
                "Outbox events Kafka has not acknowledged (parked included)",
                value=_number(unpublished),
            ),
            GaugeMetricFamily("pyfsm_outbox_parked", "Outbox events the relay set aside", value=_number(parked)),
            GaugeMetricFamily(
                "pyfsm_outbox_lag_seconds", "Age of the oldest unpublished outbox event (0: none)", value=_number(age)
            ),
            held,
            *self._timer_families(snapshot, machines),
        ]

    def _timer_families(self, snapshot: list[tuple[Any, ...]], machines: list[str]) -> list[Metric]:
        """The timers' families: every installed type (and any other a timer names) gets its
        samples, 0 when it has none, but for the lag quantiles, which a type has only when
        timers of it fired in the window."""
        armed: dict[tuple[str, str], float] = {}
        overdue: dict[str, dict[str, float]] = {}
        lags: dict[str, list[float]] = {}
        for what, machine, label, value in snapshot:
            if what == "timers_armed":
                armed[(str(machine), str(label))] = _number(value)
            elif what in ("timers_overdue", "timers_held", "timers_oldest_overdue_seconds"):
                overdue.setdefault(str(machine), {})[str(what)] = _number(value)
            elif what == "timer_lag":
                lags.setdefault(str(machine), []).append(_number(value))
        names = sorted({*machines, *(m for m, _kind in armed), *overdue, *(m for m, _outcome in self._timer_outcomes)})
        by_kind = GaugeMetricFamily(
            "pyfsm_timers_armed", "Timers armed now: state timeouts and scheduled events", labels=["machine", "kind"]
        )
        for m in names:
            for kind in sorted({*TIMER_KINDS, *(k for n, k in armed if n == m)}):
                by_kind.add_metric([m, kind], armed.get((m, kind), 0.0))
        per_type = []
        for name, what, text in (
            ("pyfsm_timers_overdue", "timers_overdue", "Armed timers past their due time (held ones included)"),
            (
                "pyfsm_timers_oldest_overdue_seconds",
                "timers_oldest_overdue_seconds",
                "Seconds the most overdue armed timer is past its due time (0: none overdue)",
            ),
            (
                "pyfsm_timers_held",
                "timers_held",
                "Armed timers held back: their instance is paused or locked (fsm_v_timers.holds > 0)",
            ),
        ):
            family = GaugeMetricFamily(name, text, labels=["machine"])
            for m in names:
                family.add_metric([m], overdue.get(m, {}).get(what, 0.0))
            per_type.append(family)
        lag = GaugeMetricFamily(
            "pyfsm_timer_firing_lag_seconds",
            f"Seconds from due to fired, quantiles of the timers fired in the last {TIMER_WINDOW_SECONDS} s "
            f"(the newest {TIMER_LAG_ROWS:,}); none when none fired",
            labels=["machine", "quantile"],
        )
        for m, values in sorted(lags.items()):
            values.sort()
            for q in LAG_QUANTILES:
                lag.add_metric([m, f"{q:g}"], quantile(values, q))
        outcomes = CounterMetricFamily(
            "pyfsm_timer_outcomes",
            "Timers fired, dropped (their event not allowed then) or cancelled since this "
            "exporter started (fsm_timer_log)",
            labels=["machine", "outcome"],
        )
        for m in names:
            for outcome in sorted({*TIMER_OUTCOMES, *(o for n, o in self._timer_outcomes if n == m)}):
                outcomes.add_metric([m, outcome], self._timer_outcomes.get((m, outcome), 0))
        return [by_kind, *per_type, lag, outcomes]
