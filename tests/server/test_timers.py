"""Timers (docs/timers.md): state timeouts armed and disarmed by the database in each
transition's own transaction, scheduled events, firing, holding, cancelling, and the SQL
a DBA calls. The processes killed while firing are in test_timer_processes.py.

Timers are global to a database, so this module has a database of its own.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pymysql
import pytest
from helpers.common import errno_of, fetch, unique

from pyfsm import (
    InstancePaused,
    InvalidArgument,
    InvalidData,
    InvalidDefinition,
    Machine,
    Store,
    UnknownEvent,
    UnknownInstance,
    UnknownTimer,
)
from pyfsm.db import Settings, parse_dsn


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(module_db: tuple[Settings, Store]) -> Settings:
    return module_db[0]


@pytest.fixture
def tstore(module_db: tuple[Settings, Store]) -> Store:
    return module_db[1]


@pytest.fixture
def dba(module_dba: pymysql.connections.Connection) -> pymysql.connections.Connection:
    return module_dba


def ticket(name: str | None = None, timeouts: dict[str, Any] | None = None) -> Machine:
    """new --pay--> paid --ship--> shipped; cancel from new and paid; remind loops on new."""
    return Machine(
        name=name or unique("tk"),
        states=["new", "paid", "shipped", "cancelled"],
        start=["new"],
        final=["shipped", "cancelled"],
        transitions=[
            ("pay", "new", "paid"),
            ("ship", "paid", "shipped"),
            ("cancel", ["new", "paid"], "cancelled"),
            ("remind", "new", "new"),
        ],
        timeouts={"new": {"after": "1h", "event": "cancel"}, "paid": {"after": "2d", "event": "cancel"}}
        if timeouts is None
        else timeouts,
    )


def naive(when: datetime) -> datetime:
    """An aware UTC time from the Store as the naive UTC the tables hold."""
    return when.astimezone(UTC).replace(tzinfo=None)


def armed(conn: Any, machine: str, key: str | None = None) -> list[dict[str, Any]]:
    sql = "SELECT * FROM fsm_timers WHERE machine = %s" + (" AND instance_key = %s" if key else "") + " ORDER BY id"
    return fetch(conn, sql, (machine, key) if key else (machine,))


def fire_all(store: Store) -> list[Any]:
    return store.fire_timers(owner="test-timers", limit=1000)


def due_now(conn: Any, timer_ids: list[int]) -> None:
    """Make timers due at once (the test stands in for the clock)."""
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE fsm_timers SET due_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, "
            "fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id IN (" + ",".join(map(str, timer_ids)) + ")"
        )


def triggers_of(conn: Any, machine: str) -> dict[str, str]:
    rows = fetch(
        conn,
        "SELECT trigger_name AS n, action_statement AS s FROM information_schema.triggers "
        "WHERE trigger_schema = DATABASE() AND event_object_table = %s",
        (f"fsm_{machine}",),
    )
    return {r["n"]: r["s"] for r in rows}


# -- definition and the cost for types without timeouts -------------------------------------------------


def test_a_type_without_timeouts_has_no_timer_code(tstore: Store, dba: Any) -> None:
    plain = ticket(timeouts={})
    tstore.define(plain)
    found = triggers_of(dba, plain.name)
    assert found and not any("timer" in name for name in found)
    assert not any("fsm_timers" in body for body in found.values())
    timed = ticket()
    tstore.define(timed)
    names = set(triggers_of(dba, timed.name))
    assert {f"fsm_{timed.name}_ai_timer_v1", f"fsm_{timed.name}_au_timer_v1"} <= names


def test_the_database_checks_timeouts_as_python_does(tstore: Store, dba: Any) -> None:
    base = json.loads(ticket(timeouts={}).to_json())
    cases = {
        "unknown state": {"nope": {"after": 60, "event": "cancel"}},
        "event not allowed there": {"paid": {"after": 60, "event": "pay"}},
        "final state": {"shipped": {"after": 60, "event": "cancel"}},
        "zero": {"new": {"after": 0, "event": "cancel"}},
        "too long": {"new": {"after": 1_000_000_000, "event": "cancel"}},
        "bad unit": {"new": {"after": "30w", "event": "cancel"}},
        "fraction": {"new": {"after": 1.5, "event": "cancel"}},
        "extra key": {"new": {"after": 60, "event": "cancel", "x": 1}},
        "no event": {"new": {"after": 60}},
        "not an object": {"new": 60},
    }
    name = unique("tkbad")
    for problem, timeouts in cases.items():
        body = json.dumps({**base, "timeouts": timeouts})
        assert errno_of(dba, "CALL fsm_define_v6(%s, %s)", (name, body)) == 31001, problem
        with pytest.raises(InvalidDefinition):
            Machine(
                name=name,
                states=base["states"],
                start=base["start"],
                final=base["final"],
                transitions=[(t["event"], t["from"], t["to"]) for t in base["transitions"]],
                timeouts=timeouts,
            )
    assert fetch(dba, "SELECT * FROM fsm_machines WHERE machine = %s", (name,)) == []
    ok = json.dumps(
        {**base, "timeouts": {"new": {"after": "30m", "event": "cancel"}, "paid": {"after": 7, "event": "ship"}}}
    )
    assert (
        fetch(dba, "CALL fsm_define_v6(%s, %s)", (name, ok))[0]["tables_ready"] == 0
    )  # no tables, no timer triggers yet
    states = {
        r["state"]: (r["timeout_seconds"], r["timeout_event"])
        for r in fetch(dba, "SELECT state, timeout_seconds, timeout_event FROM fsm_states WHERE machine = %s", (name,))
    }
    assert states == {"new": (1800, "cancel"), "paid": (7, "ship"), "shipped": (None, None), "cancelled": (None, None)}


# -- arming and disarming, on every writer's path -----------------------------------------------------------


def test_entering_a_state_arms_its_timeout_and_leaving_disarms_it(tstore: Store, dba: Any) -> None:
    m = ticket()
    tstore.define(m)
    created = tstore.create(m.name, "k1")
    (t,) = armed(dba, m.name, "k1")
    assert (t["kind"], t["state"], t["event"], t["armed_version"]) == ("timeout", "new", "cancel", 1)
    assert t["due_at"] - naive(tstore.get(m.name, "k1").created_at) == timedelta(hours=1)
    tstore.send(m.name, "k1", "pay")
    (t2,) = armed(dba, m.name, "k1")
    assert (t2["state"], t2["event"]) == ("paid", "cancel") and t2["id"] != t["id"]
    assert t2["due_at"] - naive(tstore.get(m.name, "k1").updated_at) == timedelta(days=2)
    tstore.send(m.name, "k1", "ship")
    assert armed(dba, m.name, "k1") == []
    assert created.to_state == "new"


def test_re_entering_a_state_restarts_its_timeout_and_other_changes_do_not(tstore: Store, dba: Any) -> None:
    m = ticket()
    tstore.define(m)
    tstore.create(m.name, "k1")
    (first,) = armed(dba, m.name, "k1")
    tstore.send(m.name, "k1", "remind")  # new -> new
    (second,) = armed(dba, m.name, "k1")
    assert second["id"] != first["id"] and second["due_at"] > first["due_at"] and second["armed_version"] == 2
    with dba.cursor() as cur:  # data only: not a transition
        cur.execute(f"UPDATE `fsm_{m.name}` SET data = '{{\"a\": 1}}' WHERE instance_key = 'k1'")
    assert armed(dba, m.name, "k1") == [second]


def test_raw_writes_arm_and_disarm(tstore: Store, dba: Any) -> None:
    m = ticket()
    tstore.define(m)
    with dba.cursor() as cur:
        cur.execute(f"INSERT INTO `fsm_{m.name}` (instance_key) VALUES ('raw-1'), ('raw-2')")
    assert [t["state"] for t in armed(dba, m.name)] == ["new", "new"]
    with dba.cursor() as cur:
        cur.execute(f"UPDATE `fsm_{m.name}` SET current_state = 'paid' WHERE instance_key = 'raw-1'")
    assert [t["state"] for t in armed(dba, m.name, "raw-1")] == ["paid"]
    with dba.cursor() as cur:  # a DBA names the event, through the type's procedure
        cur.execute(f"CALL `fsm_{m.name}_send_v2`('raw-2', 'cancel', NULL, NULL, NULL, NULL, NULL, NULL)")
    assert armed(dba, m.name, "raw-2") == []
    with dba.cursor() as cur:  # a refused raw UPDATE changes no timer
        with pytest.raises(pymysql.err.OperationalError):
            cur.execute(f"UPDATE `fsm_{m.name}` SET current_state = 'new' WHERE instance_key = 'raw-1'")
    assert [t["state"] for t in armed(dba, m.name, "raw-1")] == ["paid"]


# -- firing ----------------------------------------------------------------------------------------------------


def test_a_due_timeout_fires_once_and_says_so_in_history(tstore: Store, dba: Any) -> None:
    m = ticket()
    tstore.define(m)
    tstore.create(m.name, "k1")
    (t,) = armed(dba, m.name, "k1")
    assert [o for o in fire_all(tstore) if o.machine == m.name] == []  # not due yet
    due_now(dba, [t["id"]])
    (out,) = [o for o in fire_all(tstore) if o.machine == m.name]
    assert (out.timer_id, out.outcome, out.event, out.kind, out.errno) == (t["id"], "fired", "cancel", "timeout", None)
    assert out.lag_seconds >= 1.0
    inst = tstore.get(m.name, "k1")
    assert inst.state == "cancelled"
    last = tstore.history(m.name, "k1")[-1]
    assert last.event == "cancel" and last.request_id == f"fsm:timer:{t['id']}"
    assert last.metadata["timer"]["id"] == t["id"] and last.metadata["timer"]["kind"] == "timeout"
    assert last.metadata["timer"]["state"] == "new"
    (logged,) = fetch(dba, "SELECT * FROM fsm_v_timer_log WHERE timer_id = %s", (t["id"],))
    assert (logged["outcome"], logged["transition_id"], logged["done_by"]) == (
        "fired",
        out.transition_id,
        "test-timers",
    )
    assert armed(dba, m.name, "k1") == [] and [o for o in fire_all(tstore) if o.machine == m.name] == []


def test_an_instance_moved_out_before_its_timeout_is_not_fired(tstore: Store, dba: Any) -> None:
    m = ticket()
    tstore.define(m)
    tstore.create(m.name, "k1")
    (t,) = armed(dba, m.name, "k1")
    due_now(dba, [t["id"]])
    tstore.send(m.name, "k1", "pay")  # moved out before any firer ran
    outcomes = [o for o in fire_all(tstore) if o.machine == m.name]
    assert [o.timer_id for o in outcomes] != [t["id"]]
    assert tstore.get(m.name, "k1").state == "paid"
    assert fetch(dba, "SELECT * FROM fsm_timer_log WHERE id = %s", (t["id"],)) == []


def test_a_paused_instance_holds_its_timers_until_resumed(tstore: Store, dba: Any) -> None:
    m = ticket()
    tstore.define(m)
    tstore.create(m.name, "k1")
    (t,) = armed(dba, m.name, "k1")
    tstore.pause(m.name, "k1")
    due_now(dba, [t["id"]])
    (out,) = [o for o in fire_all(tstore) if o.machine == m.name]
    assert (out.outcome, out.errno) == ("held", InstancePaused.errno)
    (held,) = armed(dba, m.name, "k1")
    assert held["holds"] == 1 and held["last_errno"] == 31011 and held["fire_at"] > held["due_at"]
    assert [o for o in fire_all(tstore) if o.machine == m.name] == []  # backing off
    (listed,) = tstore.timers(m.name, "k1", overdue=True)
    assert listed.holds == 1 and listed.overdue_seconds > 0
    tstore.resume(m.name, "k1")
    (out2,) = [o for o in fire_all(tstore) if o.machine == m.name]
    assert out2.outcome == "fired" and tstore.get(m.name, "k1").state == "cancelled"


# -- scheduled events -----------------------------------------------------------------------------------------


def test_send_at_schedules_an_event_that_fires_once(tstore: Store, dba: Any) -> None:
    m = ticket(timeouts={})
    tstore.define(m)
    tstore.create(m.name, "k1")
    at = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=3)  # naive means UTC
    later = tstore.send_at(m.name, "k1", "pay", at=at, metadata={"why": "nightly"})
    assert (later.kind, later.event, later.replayed) == ("scheduled", "pay", False)
    assert abs((naive(later.due_at) - at).total_seconds()) < 0.001 and later.due_at.tzinfo is UTC
    soon = tstore.send_at(m.name, "k1", "pay", after=timedelta(seconds=0), request_id="r-1")
    again = tstore.send_at(m.name, "k1", "pay", after=5, request_id="r-1")
    assert again.timer_id == soon.timer_id and again.replayed and again.due_at == soon.due_at
    (out,) = [o for o in fire_all(tstore) if o.machine == m.name]
    assert (out.timer_id, out.outcome) == (soon.timer_id, "fired")
    entry = tstore.history(m.name, "k1")[-1]
    assert entry.event == "pay" and entry.metadata["timer"]["kind"] == "scheduled"
    assert tstore.send_at(m.name, "k1", "pay", after=0, request_id="r-1").replayed  # after it fired too
    listed = tstore.timers(m.name, "k1")
    assert [x.timer_id for x in listed] == [later.timer_id] and listed[0].metadata == {"why": "nightly"}
    assert listed[0].overdue_seconds == 0.0


def test_a_scheduled_event_no_longer_allowed_is_dropped_and_recorded(tstore: Store, dba: Any) -> None:
    m = ticket(timeouts={})
    tstore.define(m)
    tstore.create(m.name, "k1")
    timer = tstore.send_at(m.name, "k1", "ship", after=0)  # ship is not allowed from new
    before = len(tstore.history(m.name, "k1"))
    (out,) = [o for o in fire_all(tstore) if o.machine == m.name]
    assert (out.outcome, out.errno, out.transition_id) == ("dropped", 31005, None)
    assert len(tstore.history(m.name, "k1")) == before
    (logged,) = fetch(dba, "SELECT outcome, errno, reason FROM fsm_timer_log WHERE id = %s", (timer.timer_id,))
    assert logged["outcome"] == "dropped" and logged["errno"] == 31005 and "not allowed" in logged["reason"]


def test_send_at_refuses_bad_input_and_arms_nothing(tstore: Store, dba: Any) -> None:
    m = ticket(timeouts={})
    tstore.define(m)
    tstore.create(m.name, "k1")
    bad: list[tuple[dict[str, Any], type[Exception]]] = [
        ({}, InvalidArgument),
        ({"at": datetime(2030, 1, 1), "after": 1}, InvalidArgument),
        ({"after": -1}, InvalidArgument),
        ({"after": float("nan")}, InvalidArgument),
        ({"after": 10**10}, InvalidArgument),
        ({"at": "2030-01-01"}, InvalidArgument),
        ({"after": 1, "metadata": {"x": float("inf")}}, InvalidData),
        ({"after": 1, "request_id": "x "}, InvalidArgument),
    ]
    for kwargs, error in bad:
        with pytest.raises(error):
            tstore.send_at(m.name, "k1", "pay", **kwargs)
    with pytest.raises(UnknownEvent):
        tstore.send_at(m.name, "k1", "pya", after=1)
    with pytest.raises(UnknownInstance):
        tstore.send_at(m.name, "nobody", "pay", after=1)
    tstore.send_at(m.name, "k1", "pay", after=60, request_id="once")
    with pytest.raises(Exception) as reused:
        tstore.send_at(m.name, "k1", "cancel", after=60, request_id="once")
    assert getattr(reused.value, "errno", None) == 31010
    assert len(armed(dba, m.name)) == 1
    sql_bad = {
        "CALL fsm_send_at_v1(%s, 'k1', 'pay', NULL, NULL, NULL, NULL)": 31009,
        "CALL fsm_send_at_v1(%s, 'k1', 'pay', UTC_TIMESTAMP(), 5, NULL, NULL)": 31009,
        "CALL fsm_send_at_v1(%s, 'k1', 'pay', NULL, -1, NULL, NULL)": 31009,
        "CALL fsm_send_at_v1(%s, 'k1', 'pay', NULL, 1, '[1]', NULL)": 31008,
        "CALL fsm_send_at_v1(%s, 'k1', 'nope', NULL, 1, NULL, NULL)": 31028,
        "CALL fsm_send_at_v1(%s, 'k9', 'pay', NULL, 1, NULL, NULL)": 31003,
        "CALL fsm_send_at_v1(%s, 'k1', 'Pay', NULL, 1, NULL, NULL)": 31009,
    }
    for sql, errno in sql_bad.items():
        assert errno_of(dba, sql, (m.name,)) == errno, sql
    assert errno_of(dba, "CALL fsm_send_at_v1('no_such_type', 'k1', 'pay', NULL, 1, NULL, NULL)") == 31002
    assert len(armed(dba, m.name)) == 1


def test_cancel_removes_a_timer_and_says_what_became_of_one_gone(tstore: Store, dba: Any) -> None:
    m = ticket()
    tstore.define(m)
    tstore.create(m.name, "k1")
    scheduled = tstore.send_at(m.name, "k1", "pay", after=3600)
    cancelled = tstore.cancel_timer(scheduled.timer_id, "customer called")
    assert (cancelled.timer_id, cancelled.event) == (scheduled.timer_id, "pay")
    with pytest.raises(UnknownTimer, match="cancelled"):
        tstore.cancel_timer(scheduled.timer_id)
    (timeout,) = armed(dba, m.name, "k1")
    due_now(dba, [timeout["id"]])
    fire_all(tstore)
    with pytest.raises(UnknownTimer, match="fired"):
        tstore.cancel_timer(timeout["id"])
    with pytest.raises(UnknownTimer, match="no armed timer"):
        tstore.cancel_timer(10**12)
    with pytest.raises(InvalidArgument):
        tstore.cancel_timer(0)
    (logged,) = fetch(dba, "SELECT outcome, reason FROM fsm_timer_log WHERE id = %s", (scheduled.timer_id,))
    assert logged == {"outcome": "cancelled", "reason": "customer called"}


# -- a DBA's SQL ----------------------------------------------------------------------------------------------


def test_timeouts_defined_in_sql_are_armed_for_existing_instances_by_sync(tstore: Store, dba: Any) -> None:
    plain = ticket(timeouts={})
    tstore.define(plain)
    tstore.create(plain.name, "old-1")
    tstore.send(plain.name, "old-2", "pay")
    body = json.loads(plain.to_json())
    body["timeouts"] = {"new": {"after": "5m", "event": "cancel"}}
    row = fetch(dba, "CALL fsm_define_v6(%s, %s)", (plain.name, json.dumps(body)))[0]
    assert (row["changed"], row["tables_ready"]) == (1, 0)  # the timer triggers are missing
    tstore.create(plain.name, "new-1")  # of the new version: armed once the triggers exist
    tstore.sync(plain.name)
    assert fetch(dba, "CALL fsm_define_v6(%s, %s)", (plain.name, json.dumps(body)))[0]["tables_ready"] == 1
    # old-1 follows version 1 (no timeouts); new-1 follows version 2
    (t,) = armed(dba, plain.name)
    assert (t["instance_key"], t["state"]) == ("new-1", "new")
    assert t["due_at"] - naive(tstore.get(plain.name, "new-1").updated_at) == timedelta(minutes=5)
    assert fetch(dba, "CALL fsm_arm_timeouts_v1(%s)", (plain.name,))[0]["armed"] == 0  # again: nothing new


def test_a_dba_fires_lists_and_cancels_in_sql(tstore: Store, dba: Any) -> None:
    m = ticket()
    tstore.define(m)
    tstore.create(m.name, "k1")
    (t,) = armed(dba, m.name, "k1")
    listed = fetch(dba, "CALL fsm_timers_v1(%s, 'k1', 0, 0, 10)", (m.name,))
    assert [r["timer_id"] for r in listed] == [t["id"]] and listed[0]["overdue_seconds"] == 0
    due_now(dba, [t["id"]])
    assert [r["timer_id"] for r in fetch(dba, "CALL fsm_timers_v1(%s, NULL, 1, 0, 10)", (m.name,))] == [t["id"]]
    rows = [r for r in fetch(dba, "CALL fsm_fire_timers_v1('dba', 1000, 30)") if r["machine"] == m.name]
    assert [(r["timer_id"], r["outcome"]) for r in rows] == [(t["id"], "fired")]
    for sql in (
        "CALL fsm_fire_timers_v1('bad owner', 10, 30)",
        "CALL fsm_fire_timers_v1('dba', 0, 30)",
        "CALL fsm_fire_timers_v1('dba', 10, 0)",
        "CALL fsm_timers_v1(NULL, 'k1', 0, 0, 10)",
        "CALL fsm_timers_v1(NULL, NULL, 2, 0, 10)",
        "CALL fsm_cancel_timer_v1(NULL, NULL)",
    ):
        assert errno_of(dba, sql) == 31009, sql
    assert errno_of(dba, "CALL fsm_cancel_timer_v1(%s, NULL)", (t["id"],)) == 31029


def test_firing_inside_an_open_transaction_is_refused(dba: Any, tstore: Store) -> None:
    with dba.cursor() as cur:
        cur.execute("START TRANSACTION")
        assert errno_of(dba, "CALL fsm_fire_timers_v1('dba', 10, 30)") == 31016
        cur.execute("ROLLBACK")


def test_send_many_arms_and_disarms_item_by_item(tstore: Store, dba: Any) -> None:
    m = ticket()
    tstore.define(m)
    outcomes = tstore.send_many(m.name, [("a", "remind"), ("b", "remind"), ("b", "pay"), ("a", "ship")])
    assert [type(o).__name__ for o in outcomes][:3] == ["TransitionResult"] * 3  # "a ship" is refused alone
    assert {t["instance_key"]: t["state"] for t in armed(dba, m.name)} == {"a": "new", "b": "paid"}


@pytest.mark.anyio
async def test_the_async_store_schedules_lists_fires_and_cancels(settings: Settings, tstore: Store) -> None:
    from pyfsm.aio import AsyncStore

    m = ticket(timeouts={})
    tstore.define(m)
    tstore.create(m.name, "k1")
    async with AsyncStore(settings.dsn()) as astore:
        later = await astore.send_at(m.name, "k1", "pay", after=3600)
        now = await astore.send_at(m.name, "k1", "pay", after=0)
        assert [t.timer_id for t in await astore.timers(m.name)] == [later.timer_id, now.timer_id]
        fired = [o for o in await astore.fire_timers(owner="aio") if o.machine == m.name]
        assert [(o.timer_id, o.outcome) for o in fired] == [(now.timer_id, "fired")]
        assert (await astore.cancel_timer(later.timer_id)).timer_id == later.timer_id
        assert await astore.timers(m.name) == []


def test_a_timeout_wakes_an_instance_the_engine_left_waiting(tstore: Store, dba: Any) -> None:
    from pyfsm import Process, Worker

    m = Machine(
        name=unique("hold"),
        states=["request", "awaiting", "expired", "approved", "closed"],
        start=["request"],
        final=["approved", "closed"],
        transitions=[
            ("submit", "request", "awaiting"),
            ("approve", "awaiting", "approved"),
            ("expire", "awaiting", "expired"),
            ("close", "expired", "closed"),
        ],
        timeouts={"awaiting": ("2d", "expire")},
    )
    tstore.define(m)
    process = Process(m)
    process.register("request", lambda ctx: ctx.fire("submit"))
    process.register("expired", lambda ctx: ctx.fire("close"))  # "awaiting" has no handler: it waits
    process.start(tstore, "h1")
    assert (tstore.get(m.name, "h1").state, tstore.get(m.name, "h1").status) == ("awaiting", "waiting")
    (t,) = armed(dba, m.name, "h1")
    due_now(dba, [t["id"]])
    worker = Worker(tstore, [process], idle_min=0.01, idle_max=0.05, timer_poll=0.05)
    running = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    running.start()  # its timer thread fires the timeout; its main loop runs what that woke
    try:
        deadline = time.monotonic() + 30
        while tstore.get(m.name, "h1").state != "closed" and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop()
        running.join(30)
    assert worker.stats.timers_fired == 1
    inst = tstore.get(m.name, "h1")
    assert (inst.state, inst.status) == ("closed", "completed")
    assert [h.event for h in tstore.history(m.name, "h1")] == [None, "submit", "expire", "close"]


def test_an_instance_locked_too_long_holds_its_timer_and_the_batch_goes_on(
    tstore: Store, dba: Any, settings: Settings
) -> None:
    m = ticket()
    tstore.define(m)
    for key in ("k1", "k2"):
        tstore.create(m.name, key)
    due_now(dba, [t["id"] for t in armed(dba, m.name)])
    blocker = pymysql.connect(**parse_dsn(settings.dsn()).connect_kwargs())
    try:
        with blocker.cursor() as cur:  # another client holds k1's row in an open transaction
            cur.execute("START TRANSACTION")
            cur.execute(f"SELECT id FROM `fsm_{m.name}` WHERE instance_key = 'k1' FOR UPDATE")
        with dba.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        rows = [r for r in fetch(dba, "CALL fsm_fire_timers_v1('dba', 100, 30)") if r["machine"] == m.name]
        assert {(r["instance_key"], r["outcome"], r["errno"]) for r in rows} == {
            ("k1", "held", 1205),
            ("k2", "fired", None),
        }
    finally:
        blocker.rollback()
        blocker.close()
    (held,) = armed(dba, m.name, "k1")
    assert held["holds"] == 1 and held["last_errno"] == 1205 and tstore.get(m.name, "k2").state == "cancelled"
    time.sleep(1.2)  # its first backoff
    assert [(o.instance_key, o.outcome) for o in fire_all(tstore) if o.machine == m.name] == [("k1", "fired")]
