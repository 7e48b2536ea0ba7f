"""The timers' metrics (issue 28) against the real server: the database collector's
pyfsm_timers_* and pyfsm_timer_* families equal what fsm_timers and fsm_timer_log hold for a
known set of timers, through a reporting account too; the outcome counters count each logged
timer once, after it settled; and a worker's own timer metrics (WorkerMetrics).

Timers are global to a database: each test has a database of its own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pymysql
import pytest
from helpers.common import fetch, granted_accounts
from prometheus_client.parser import text_string_to_metric_families

from pyfsm import Store
from pyfsm.db import Settings
from pyfsm.metrics.database import quantile
from pyfsm.metrics.server import DatabaseCollector, WorkerMetrics, exposition, registry_of

SHOP = {
    "states": ["new", "paid", "cancelled"],
    "start": ["new"],
    "final": ["cancelled"],
    "transitions": [
        {"event": "pay", "from": ["new"], "to": "paid"},
        {"event": "cancel", "from": ["new", "paid"], "to": "cancelled"},
    ],
    "timeouts": {"new": {"after": 3600, "event": "cancel"}},
}
DESK = {
    "states": ["open", "closed"],
    "start": ["open"],
    "final": ["closed"],
    "transitions": [{"event": "close", "from": ["open"], "to": "closed"}],
}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(registry: Any) -> Samples:
    body, _content_type = exposition(registry)
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode("utf-8"))
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def named(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def sql(settings: Settings, statement: str, args: Any = None) -> list[dict[str, Any]]:
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        return fetch(conn, statement, args)
    finally:
        conn.close()


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@pytest.fixture
def timed(make_database) -> Iterator[tuple[Settings, Store]]:  # type: ignore[no-untyped-def]
    """A database of the test's own with shop (a timeout on new) and desk (no timeout)."""
    settings = make_database("pyfsm_mtimers")
    with Store(settings.dsn()) as store:
        store.migrate()
        for name, definition in (("shop", SHOP), ("desk", DESK)):
            sql(settings, "CALL fsm_define_v6(%s, %s)", (name, json.dumps(definition)))
            store.sync(name)
        yield settings, store


def test_timer_metrics_equal_what_the_database_holds(timed, server) -> None:  # type: ignore[no-untyped-def]
    settings, store = timed
    store.create("desk", "d-0")  # fired before the exporter started: in no counter, and out of the window
    store.send_at("desk", "d-0", "close", after=0)
    assert [o.outcome for o in store.fire_timers()] == ["fired"]
    sql(
        settings,
        "UPDATE fsm_timer_log SET done_at = UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE, "
        "due_at = UTC_TIMESTAMP(6) - INTERVAL 1000 SECOND - INTERVAL 10 MINUTE",
    )
    registry = registry_of(DatabaseCollector(store, settle_seconds=0))
    first = scrape(registry)
    assert set(named(first, "pyfsm_timers_armed").values()) == {0.0}
    assert named(first, "pyfsm_timer_firing_lag_seconds") == {}  # none fired in the window
    assert set(named(first, "pyfsm_timer_outcomes_total").values()) == {0.0}
    assert len(named(first, "pyfsm_timer_outcomes_total")) == 6  # shop and desk, fired, dropped, cancelled

    for key in ("s-1", "s-2", "s-3", "f-1", "f-2", "f-3", "f-4", "x-1"):
        store.create("shop", key)  # each with its state timeout, due in an hour
    store.send_at("shop", "s-1", "pay", after=3600)
    for key in ("f-1", "f-2", "f-3", "f-4", "x-1"):
        store.send_at("shop", key, "pay", after=0)
    store.send("shop", "x-1", "cancel")  # its pay is not allowed any more: dropped
    store.create("desk", "d-2")
    store.send_at("desk", "d-2", "close", after=0)
    store.pause("desk", "d-2")  # its close is held
    fired = store.fire_timers()
    assert sorted((o.instance_key, o.outcome) for o in fired) == [
        ("d-2", "held"),
        ("f-1", "fired"),
        ("f-2", "fired"),
        ("f-3", "fired"),
        ("f-4", "fired"),
        ("x-1", "dropped"),
    ]
    [timeout] = store.timers("shop", "s-3")
    store.cancel_timer(timeout.timer_id, "not needed")
    for n in range(1, 5):  # firing lags of 1, 2, 3 and 4 seconds
        sql(
            settings,
            "UPDATE fsm_timer_log SET due_at = done_at - INTERVAL %s SECOND "
            "WHERE instance_key = %s AND outcome = 'fired'",
            (n, f"f-{n}"),
        )
    store.create("desk", "d-1")
    store.send_at("desk", "d-1", "close", at=now() - timedelta(seconds=120))  # overdue, nothing fires it

    got = scrape(registry)
    armed = {
        (m, k): n
        for m, k, n in (
            tuple(r.values())
            for r in sql(settings, "SELECT machine, kind, COUNT(*) AS n FROM fsm_timers GROUP BY machine, kind")
        )
    }
    assert armed == {("shop", "timeout"): 2, ("shop", "scheduled"): 1, ("desk", "scheduled"): 2}  # s-1, s-2
    for machine in ("shop", "desk"):
        for kind in ("timeout", "scheduled"):
            assert value(got, "pyfsm_timers_armed", machine=machine, kind=kind) == armed.get((machine, kind), 0)
    assert value(got, "pyfsm_timers_overdue", machine="desk") == 2  # d-1, and d-2 held
    assert value(got, "pyfsm_timers_overdue", machine="shop") == 0
    assert 120 <= value(got, "pyfsm_timers_oldest_overdue_seconds", machine="desk") < 180
    assert value(got, "pyfsm_timers_oldest_overdue_seconds", machine="shop") == 0
    assert value(got, "pyfsm_timers_held", machine="desk") == 1 and value(got, "pyfsm_timers_held", machine="shop") == 0
    assert value(got, "pyfsm_timer_firing_lag_seconds", machine="shop", quantile="0.5") == pytest.approx(2.5)
    assert value(got, "pyfsm_timer_firing_lag_seconds", machine="shop", quantile="0.99") == pytest.approx(3.97)
    assert ("pyfsm_timer_firing_lag_seconds", frozenset({("machine", "desk"), ("quantile", "0.5")})) not in got
    outcomes = {
        (dict(k)["machine"], dict(k)["outcome"]): v for k, v in named(got, "pyfsm_timer_outcomes_total").items()
    }
    assert outcomes == {
        ("shop", "fired"): 4,
        ("shop", "dropped"): 1,
        ("shop", "cancelled"): 1,
        ("desk", "fired"): 0,
        ("desk", "dropped"): 0,
        ("desk", "cancelled"): 0,
    }

    assert named(scrape(registry), "pyfsm_timer_outcomes_total") == named(got, "pyfsm_timer_outcomes_total")
    store.cancel_timer(store.timers("desk", "d-1")[0].timer_id)
    again = scrape(registry)  # each logged timer counted once
    assert value(again, "pyfsm_timer_outcomes_total", machine="desk", outcome="cancelled") == 1
    assert value(again, "pyfsm_timer_outcomes_total", machine="shop", outcome="fired") == 4
    assert value(again, "pyfsm_timers_overdue", machine="desk") == 1

    with (
        granted_accounts(server, settings, ("reporting",), "pyfsm_mt") as made,
        Store(made["reporting"].dsn()) as reader,
    ):
        seen = scrape(registry_of(DatabaseCollector(reader)))
    assert value(seen, "pyfsm_up") == 1
    assert value(seen, "pyfsm_timers_armed", machine="shop", kind="timeout") == 2
    assert value(seen, "pyfsm_timers_held", machine="desk") == 1
    assert value(seen, "pyfsm_timer_firing_lag_seconds", machine="shop", quantile="0.5") == pytest.approx(2.5)


def test_outcomes_are_counted_once_they_settled(timed) -> None:  # type: ignore[no-untyped-def]
    """A firing call's log rows carry its start as done_at and commit later: a scrape counts
    rows only up to settle_seconds ago, from where the previous scrape stopped, each once."""
    _settings, store = timed
    registry = registry_of(DatabaseCollector(store, settle_seconds=0.5))
    scrape(registry)
    store.create("desk", "d-1")
    timer = store.send_at("desk", "d-1", "close", after=60).timer_id
    store.cancel_timer(timer)
    assert value(scrape(registry), "pyfsm_timer_outcomes_total", machine="desk", outcome="cancelled") == 0
    time.sleep(0.6)
    assert value(scrape(registry), "pyfsm_timer_outcomes_total", machine="desk", outcome="cancelled") == 1
    assert value(scrape(registry), "pyfsm_timer_outcomes_total", machine="desk", outcome="cancelled") == 1


def test_a_worker_counts_its_timer_outcomes(timed) -> None:  # type: ignore[no-untyped-def]
    _settings, store = timed
    for key in ("s-1", "s-2", "x-1"):
        store.create("shop", key)
        store.send_at("shop", key, "pay", after=0)
    store.send("shop", "x-1", "cancel")
    store.create("desk", "d-1")
    store.send_at("desk", "d-1", "close", after=0)
    store.pause("desk", "d-1")
    outcomes = store.fire_timers()
    kept = WorkerMetrics()
    kept.observe_timer_outcomes(outcomes)
    kept.observe_timer_outcomes([])
    got = scrape(kept.registry)
    assert value(got, "pyfsm_worker_timers_total", machine="shop", outcome="fired") == 2
    assert value(got, "pyfsm_worker_timers_total", machine="shop", outcome="dropped") == 1
    assert value(got, "pyfsm_worker_timers_total", machine="desk", outcome="held") == 1
    assert value(got, "pyfsm_worker_timer_firing_lag_seconds_count", machine="shop") == 2
    lags = sum(o.lag_seconds for o in outcomes if o.outcome == "fired")
    assert value(got, "pyfsm_worker_timer_firing_lag_seconds_sum", machine="shop") == pytest.approx(lags)
    assert ("pyfsm_worker_timer_firing_lag_seconds_count", frozenset({("machine", "desk")})) not in got  # held


def test_quantiles_interpolate_between_ranks() -> None:
    assert quantile([7.0], 0.99) == 7.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([float(n) for n in range(1, 101)], 0.99) == pytest.approx(99.01)
    assert quantile([1.0, 2.0, 3.0, 4.0], 1.0) == 4.0
