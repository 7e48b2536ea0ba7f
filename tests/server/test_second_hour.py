"""What a user meets in the second hour (issue 46), on the server: timers that fire in the order
they fall due through every door, a merge patch of the data judged by the guards through every
door, one word per status (fsm_stats_v3, fsm_v_stuck), the counts of states a new version
renamed, and errors that say what would be right (Store and SQL).

Timers are global to a database, so this module has a database of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pymysql
import pytest
from helpers.cli import pyfsm
from helpers.common import errno_of, fetch, unique
from helpers.engine_fixtures import build
from helpers.patchers import patcher_main
from helpers.timer_firers import start

from pyfsm import (
    InvalidArgument,
    InvalidData,
    Machine,
    Store,
    TransitionNotAllowed,
    UnknownInstance,
    Worker,
    data,
    transition,
)
from pyfsm.aio import AsyncStore
from pyfsm.db import Settings


@pytest.fixture
def settings(module_db: tuple[Settings, Store]) -> Settings:
    return module_db[0]


@pytest.fixture
def hstore(module_db: tuple[Settings, Store]) -> Store:
    return module_db[1]


@pytest.fixture
def dba(module_dba: pymysql.connections.Connection) -> pymysql.connections.Connection:
    return module_dba


# -- timers fire in the order they fall due ------------------------------------------------------


def basket(name: str) -> Machine:
    """A basket cancels itself an hour after it is opened, unless paid first."""
    return Machine(
        name=name,
        states=["open", "paid", "cancelled"],
        start=["open"],
        final=["paid", "cancelled"],
        transitions=[("pay", "open", "paid"), ("cancel", "open", "cancelled")],
        timeouts={"open": {"after": "1h", "event": "cancel"}},
    )


def an_hour_later(dba: pymysql.connections.Connection, machine: str) -> None:
    """Two hours pass for the type's timers: each due time moves back by as much, their order kept."""
    with dba.cursor() as cur:
        cur.execute(
            "UPDATE fsm_timers SET due_at = due_at - INTERVAL 2 HOUR, fire_at = fire_at - INTERVAL 2 HOUR "
            "WHERE machine = %s",
            (machine,),
        )


def fire_through(door: str, store: Store, settings: Settings, dba: Any, machine: str) -> None:
    """Fire the due timers the way ``door`` does."""
    if door == "store":
        store.fire_timers(owner="t-store")
    elif door == "cli":
        result = pyfsm("timers", "run", "--until-idle", "--dsn", settings.dsn())
        assert result.returncode == 0, result.stderr
    elif door == "sql":
        with dba.cursor() as cur:
            cur.execute("CALL fsm_fire_timers_v3('dba-cron', 100, 30)")
            while cur.nextset():
                pass
    else:  # a worker's timer thread (of a process of another type)
        engine = unique("sh_engine")
        process = build("drain", engine)
        store.define(process.machine)
        worker = Worker(store, [process], idle_min=0.01, idle_max=0.05, timer_batch=5, timer_poll=0.05)
        thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False}, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while store.get(machine, "b-1").state == "open" and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            worker.stop()
            thread.join(30)


@pytest.mark.parametrize("door", ["store", "cli", "sql", "worker"])
def test_an_event_due_before_a_state_timeout_fires_first(
    door: str, hstore: Store, settings: Settings, dba: Any
) -> None:
    """The timeout (armed first, due later) used to fire first and the payment was dropped."""
    name = unique("sh_basket")
    hstore.define(basket(name))
    hstore.create(name, "b-1")  # arms the timeout: cancel, due in 1 h
    scheduled = hstore.send_at(name, "b-1", "pay", after=1800)  # due in 30 min: before the timeout
    [timeout] = [t for t in hstore.timers(name) if t.kind == "timeout"]
    assert timeout.timer_id < scheduled.timer_id  # armed first
    an_hour_later(dba, name)  # both overdue now

    fire_through(door, hstore, settings, dba, name)

    assert hstore.get(name, "b-1").state == "paid"
    log = fetch(dba, "SELECT id, kind, event, outcome FROM fsm_timer_log WHERE machine = %s ORDER BY id", (name,))
    assert [(r["kind"], r["event"], r["outcome"]) for r in log] == [("scheduled", "pay", "fired")]
    assert hstore.timers(name) == []  # the timeout went with the state it timed: never fired, never dropped


def test_timers_due_at_the_same_time_fire_in_the_order_they_were_armed(hstore: Store, dba: Any) -> None:
    name = unique("sh_tie")
    hstore.define(basket(name))
    hstore.create(name, "b-1")
    at = datetime.now(UTC).replace(tzinfo=None, microsecond=0) + timedelta(minutes=10)
    first = hstore.send_at(name, "b-1", "cancel", at=at)
    second = hstore.send_at(name, "b-1", "pay", at=at)
    an_hour_later(dba, name)
    outcomes = hstore.fire_timers(owner="t-tie")
    assert [(o.timer_id, o.outcome) for o in outcomes if o.kind == "scheduled"] == [
        (first.timer_id, "fired"),
        (second.timer_id, "dropped"),  # pay from cancelled: not allowed
    ]
    assert hstore.get(name, "b-1").state == "cancelled"


def test_the_oldest_due_timer_is_claimed_first_across_instances(hstore: Store, dba: Any) -> None:
    """One timer per call: the one that fell due first goes first, whatever its instance or id."""
    name = unique("sh_oldest")
    hstore.define(basket(name))
    for key in ("b-1", "b-2", "b-3"):
        hstore.create(name, key)
    # armed in key order, due in the opposite order
    for key, minutes in (("b-1", 30), ("b-2", 20), ("b-3", 10)):
        hstore.send_at(name, key, "pay", after=minutes * 60)
    an_hour_later(dba, name)
    fired = [hstore.fire_timers(owner="t-one", limit=1) for _ in range(3)]
    assert [[o.instance_key for o in batch] for batch in fired] == [["b-3"], ["b-2"], ["b-1"]]


# -- a merge patch of the data, judged by the guards -------------------------------------------


def checkout(name: str) -> Machine:
    """A large order goes to review when paid; `note` changes data only."""
    return Machine(
        name=name,
        states=["new", "review", "paid"],
        start=["new"],
        final=["paid"],
        transitions=[
            transition("pay", "new", "review", guard=data("total") >= 1000, guard_name="large"),
            ("pay", "new", "paid"),
            ("approve", "review", "paid"),
            ("note", ["new", "review"], "new"),
        ],
    )


def test_a_patch_keeps_what_it_does_not_name_and_the_guard_judges_the_merged_data(hstore: Store) -> None:
    name = unique("sh_co")
    hstore.define(checkout(name))
    hstore.create(name, "B-3", data={"total": 5000, "gift": True, "address": {"city": "Oslo", "zip": "0150"}})
    moved = hstore.send(name, "B-3", "pay", data_patch={"card": "visa", "gift": None, "address": {"zip": "0151"}})
    assert moved.to_state == "review"  # total is still there for the guard
    assert hstore.get(name, "B-3").data == {"total": 5000, "card": "visa", "address": {"city": "Oslo", "zip": "0151"}}

    # the replacement, as before: the guard no longer sees total
    hstore.create(name, "B-4", data={"total": 5000})
    assert hstore.send(name, "B-4", "pay", data={"card": "visa"}).to_state == "paid"

    # a key with no instance yet: created in a start state, the patch merged into {}
    assert hstore.send(name, "B-5", "pay", data_patch={"total": 2000, "x": None}).to_state == "review"
    assert hstore.get(name, "B-5").data == {"total": 2000}


def test_bad_patches_are_refused_and_change_nothing(hstore: Store) -> None:
    name = unique("sh_bad")
    hstore.define(checkout(name))
    hstore.create(name, "B-1", data={"total": 1})
    with pytest.raises(InvalidArgument, match="not both"):
        hstore.send(name, "B-1", "pay", data={"a": 1}, data_patch={"b": 2})
    for bad in (["not", "an", "object"], "text", {"x": object()}):
        with pytest.raises(InvalidData):
            hstore.send(name, "B-1", "pay", data_patch=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="not both"):
        hstore.send_many(name, [{"key": "B-1", "event": "pay", "data": {}, "data_patch": {}}])
    instance = hstore.get(name, "B-1")
    assert (instance.state, instance.data, instance.version) == ("new", {"total": 1}, 1)


def test_send_many_applies_each_items_patch_in_order(hstore: Store) -> None:
    name = unique("sh_many")
    hstore.define(checkout(name))
    hstore.create(name, "M-1", data={"total": 5000, "n": 0})
    hstore.create(name, "M-2", data={"total": 10})
    out = hstore.send_many(
        name,
        [
            {"key": "M-1", "event": "note", "data_patch": {"n": 1}},
            {"key": "M-1", "event": "pay", "data_patch": {"card": "visa"}},
            {"key": "M-2", "event": "pay", "data_patch": {"total": 1500}},
            {"key": "M-2", "event": "pay", "data_patch": {"total": []}},  # refused alone: not allowed now
        ],
    )
    assert [getattr(o, "to_state", None) for o in out[:3]] == ["new", "review", "review"]
    assert isinstance(out[3], TransitionNotAllowed)
    assert hstore.get(name, "M-1").data == {"total": 5000, "n": 1, "card": "visa"}
    assert hstore.get(name, "M-2").data == {"total": 1500}  # the refused item wrote nothing


def test_sql_callers_patch_through_send_v5_send_many_v3_and_a_raw_update(hstore: Store, dba: Any) -> None:
    name = unique("sh_sql")
    hstore.define(checkout(name))
    hstore.create(name, "S-1", data={"total": 5000})
    hstore.create(name, "S-2", data={"total": 5000})
    hstore.create(name, "S-3", data={"total": 5000})
    rows = fetch(
        dba, f"CALL `fsm_{name}_send_v5`('S-1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL, '{{\"card\": \"visa\"}}')"
    )
    assert rows[0]["to_state"] == "review"
    rows = fetch(
        dba,
        f"CALL `fsm_{name}_send_many_v3`(%s)",
        (json.dumps([{"key": "S-2", "event": "pay", "data_patch": {"card": "amex"}}]),),
    )
    assert rows[0]["to_state"] == "review" and rows[0]["errno"] is None
    with dba.cursor() as cur:  # a DBA's raw UPDATE: the trigger checks it as any transition
        cur.execute("SET @fsm_event = 'pay'")
        cur.execute(
            f"UPDATE `fsm_{name}` SET data = JSON_MERGE_PATCH(data, '{{\"card\": \"cash\"}}') WHERE instance_key = 'S-3'"
        )
        cur.execute("SET @fsm_event = NULL")
    assert {k: (i.state, i.data) for k in ("S-1", "S-2", "S-3") for i in [hstore.get(name, k)]} == {
        "S-1": ("review", {"total": 5000, "card": "visa"}),
        "S-2": ("review", {"total": 5000, "card": "amex"}),
        "S-3": ("review", {"total": 5000, "card": "cash"}),
    }
    hstore.create(name, "S-4", data={"total": 1})
    call = f"CALL `fsm_{name}_send_v5`('S-4', 'pay', %s, NULL, NULL, NULL, NULL, NULL, %s)"
    assert errno_of(dba, call, ('{"a": 1}', '{"b": 1}')) == 31009  # both
    assert errno_of(dba, call, (None, "[1]")) == 31008  # not an object
    assert errno_of(dba, call, (None, "{nope")) == 31008  # not JSON
    assert hstore.get(name, "S-4").state == "new"


@pytest.mark.anyio
async def test_async_send_takes_a_patch(hstore: Store, settings: Settings) -> None:
    name = unique("sh_aio")
    hstore.define(checkout(name))
    hstore.create(name, "A-1", data={"total": 2000})
    async with AsyncStore(settings.dsn()) as astore:
        moved = await astore.send(name, "A-1", "pay", data_patch={"card": "visa"})
    assert moved.to_state == "review"
    assert hstore.get(name, "A-1").data == {"total": 2000, "card": "visa"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_patches_from_racing_processes_lose_nothing(hstore: Store, settings: Settings) -> None:
    """Each writer merges a key of its own, many times, into one instance at once: every key
    is there at the end with its last value (a read-modify-write in the client would lose some)."""
    name = unique("sh_race")
    hstore.define(checkout(name))
    hstore.create(name, "R-1", data={"total": 1})
    writers, rounds = 4, 25
    procs = [start(patcher_main, settings.dsn(), name, "R-1", w, rounds) for w in range(writers)]
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    instance = hstore.get(name, "R-1")
    assert {k: v for k, v in instance.data.items() if k.startswith("w")} == {
        f"w{w}": rounds - 1 for w in range(writers)
    }
    assert instance.data["total"] == 1 and instance.version == 1 + writers * rounds


def test_the_cli_sends_a_patch(hstore: Store, settings: Settings) -> None:
    name = unique("sh_cli")
    hstore.define(checkout(name))
    created = pyfsm("create", name, "C-1", "--data", '{"total": 5000}', "--dsn", settings.dsn())
    assert created.returncode == 0, created.stderr
    sent = pyfsm("send", name, "C-1", "pay", "--patch", '{"card": "visa"}', "--json", "--dsn", settings.dsn())
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["to_state"] == "review"
    assert hstore.get(name, "C-1").data == {"total": 5000, "card": "visa"}
    both = pyfsm("send", name, "C-1", "approve", "--data", "{}", "--patch", "{}", "--dsn", settings.dsn())
    assert both.returncode != 0 and hstore.get(name, "C-1").state == "review"


# -- one word per status -------------------------------------------------------------------------


def test_stats_tell_idle_from_running_and_stuck_lists_only_what_a_handler_runs(hstore: Store, dba: Any) -> None:
    name = unique("sh_st")
    hstore.define(checkout(name))
    for key in ("I-1", "I-2", "I-3"):
        hstore.create(name, key)
    hstore.enqueue(name, "I-3")  # a handler runs it (or will)
    [row] = [r for r in fetch(dba, "CALL fsm_stats_v3()") if r["machine"] == name]
    assert (row["instances"], row["running"], row["idle"], row["completed"]) == (3, 1, 2, 0)
    [stats] = [s for s in hstore.stats() if s.machine == name]
    assert (stats.running, getattr(stats, "idle", None)) == (1, 2)
    stuck = fetch(dba, "SELECT instance_key, status FROM fsm_v_stuck WHERE machine = %s", (name,))
    assert stuck == [{"instance_key": "I-3", "status": "running"}]
    # the deprecated v2 still answers as it did: every not-done instance running
    [old] = [r for r in fetch(dba, "CALL fsm_stats_v2()") if r["machine"] == name]
    assert old["running"] == 3


# -- a state renamed by a new version ---------------------------------------------------------------


def test_state_counts_leave_out_a_renamed_state_once_empty(hstore: Store, dba: Any) -> None:
    name = unique("sh_ren")
    v1 = Machine(
        name=name,
        states=["new", "packed", "sent"],
        start=["new"],
        final=["sent"],
        transitions=[("pack", "new", "packed"), ("send", "packed", "sent")],
    )
    v2 = Machine(
        name=name,
        states=["new", "boxed", "sent"],
        start=["new"],
        final=["sent"],
        transitions=[("pack", "new", "boxed"), ("send", "boxed", "sent")],
    )
    hstore.define(v1)
    for key in ("P-1", "P-2"):
        hstore.create(name, key)
        hstore.send(name, key, "pack")
    hstore.define(v2)

    def counts() -> dict[str, int]:
        rows = fetch(dba, "SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s", (name,))
        return {r["state"]: int(r["instances"]) for r in rows}

    assert counts() == {"new": 0, "boxed": 0, "sent": 0, "packed": 2}  # still holds instances
    hstore.upgrade_instances(name, states={"packed": "boxed"}, only={"states": ["packed"]}, batch=1)
    assert counts() == {"new": 0, "boxed": 2, "sent": 0}  # packed: empty, and not in the current version


# -- errors that say what would be right ------------------------------------------------------------


def test_store_errors_name_what_would_be_right(hstore: Store) -> None:
    name = unique("sh_err")
    hstore.define(checkout(name))
    hstore.create(name, "E-1")
    with pytest.raises(TransitionNotAllowed) as refused:
        hstore.send(name, "E-1", "approve")
    assert refused.value.errno == 31005
    assert "from new the definition allows pay, note" in str(refused.value)
    assert refused.value.fields["allowed_events"] == ["pay", "note"] and refused.value.fields["final"] is False
    hstore.send(name, "E-1", "pay")  # paid: final
    with pytest.raises(TransitionNotAllowed, match="paid is a final state: no event leaves it"):
        hstore.send(name, "E-1", "note")
    with pytest.raises(UnknownInstance, match=r"keys are compared exactly") as missing:
        hstore.get(name, "e-1")
    assert missing.value.errno == 31003
    with pytest.raises(UnknownInstance, match="events that create one from a start state: pay, note"):
        hstore.send(name, "NOPE", "approve")


def test_sql_names_the_installed_types_for_an_unknown_one(hstore: Store, dba: Any) -> None:
    name = unique("sh_known")
    hstore.define(checkout(name))
    with dba.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as failed:
        cur.execute("CALL fsm_get_v1(%s, 'k')", (name + "x",))
    errno, message = failed.value.args
    assert errno == 31002
    assert message.startswith(f"fsm: unknown machine {name}x; installed: ")
    assert len(message) <= 128
    listed = message.split("; installed: ", 1)[1]
    assert name in listed or listed.endswith("...")  # cut at the 128 characters a message holds


def test_send_many_on_the_command_line_takes_a_patch_per_item(hstore: Store, settings: Settings) -> None:
    name = unique("sh_clim")
    hstore.define(checkout(name))
    hstore.create(name, "L-1", data={"total": 5000})
    lines = json.dumps({"key": "L-1", "event": "pay", "data_patch": {"card": "visa"}}) + "\n"
    result = subprocess.run(
        [sys.executable, "-m", "pyfsm", "send-many", name, "--dsn", settings.dsn()],
        input=lines,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    instance = hstore.get(name, "L-1")
    assert (instance.state, instance.data) == ("review", {"total": 5000, "card": "visa"})


def test_list_says_idle_or_running(hstore: Store, settings: Settings) -> None:
    name = unique("sh_list")
    hstore.define(checkout(name))
    hstore.create(name, "Q-1")
    hstore.create(name, "Q-2")
    hstore.enqueue(name, "Q-2")
    listed = pyfsm("list", name, "new", "--dsn", settings.dsn())
    assert listed.returncode == 0, listed.stderr
    status = {
        line.split()[1]: line.split()[2]
        for line in listed.stdout.splitlines()
        if line.split()[1:2] in (["Q-1"], ["Q-2"])
    }
    assert status == {"Q-1": "idle", "Q-2": "running"}
