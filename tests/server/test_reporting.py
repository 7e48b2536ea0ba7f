"""Reporting views and the state counters, checked against the history the tests build."""

from __future__ import annotations

import collections
import itertools
import multiprocessing
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pymysql
from helpers.common import fetch, order_machine, unique
from helpers.engine_fixtures import checkout

from pyfsm import Context, Outcome, Store, TransitionNotAllowed, UnknownInstance, Worker, db
from pyfsm.schema import install as schema
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import render
from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS


def utc(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows read with plain SQL carry naive UTC datetimes; the facade's are aware."""
    return [{k: v.replace(tzinfo=UTC) if isinstance(v, datetime) else v for k, v in r.items()} for r in rows]


def build_history(store: Store, raw: pymysql.connections.Connection, name: str) -> dict[str, list[str]]:
    """A few instances with forward, backward, raw-SQL and non-transition updates; returns each path."""
    paths = {
        "a": ["pay", "ship", "deliver"],
        "b": ["pay", "refund", "pay", "cancel"],  # a backward move, then a state entered twice
        "c": ["pay"],
        "d": [],
        "e": ["cancel"],
    }
    for key, events in paths.items():
        store.create(name, key, data={"k": key}, lookup_key=f"acct-{key}")
        for event in events:
            time.sleep(0.002)  # distinct timestamps, so that time in state is never 0 by accident
            store.send(name, key, event)
    store.set_locking(name, "c", global_lock=True)  # bumps the version without a history row: a sort_key gap
    time.sleep(0.002)
    store.send(name, "c", "ship")
    raw.cursor().execute(f"UPDATE `fsm_{name}` SET current_state = 'delivered' WHERE instance_key = 'c'")  # a DBA
    return paths


def test_views_agree_with_history(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    machine = order_machine()
    name = machine.name
    store.define(machine)
    build_history(store, raw, name)
    keys = ["a", "b", "c", "d", "e"]

    # the current state of every instance, and since when
    rows = {r["instance_key"]: r for r in utc(fetch(raw, f"SELECT * FROM `fsm_v_{name}`"))}
    assert sorted(rows) == keys
    for key in keys:
        instance, history = store.get(name, key), store.history(name, key)
        row = rows[key]
        assert (row["current_state"], row["status"], row["version"]) == (
            instance.state,
            instance.status,
            instance.version,
        )
        assert row["in_state_since"] == history[-1].created_at
        assert row["seconds_in_state"] >= 0
    assert fetch(
        raw, "SELECT instance_key, current_state FROM fsm_v_instances WHERE machine = %s ORDER BY id", (name,)
    ) == [{"instance_key": k, "current_state": rows[k]["current_state"]} for k in keys]

    # history with the time spent in each state
    for key in keys:
        history = store.history(name, key)
        view = utc(
            fetch(raw, f"SELECT * FROM `fsm_v_{name}_transitions` WHERE instance_key = %s ORDER BY sort_key", (key,))
        )
        assert [(v["sort_key"], v["event"], v["from_state"], v["to_state"], v["entered_at"]) for v in view] == [
            (h.sort_key, h.event, h.from_state, h.to_state, h.created_at) for h in history
        ]
        for row, after in zip(view, history[1:], strict=False):
            assert row["left_at"] == after.created_at and not row["is_current"]
            spent = (row["left_at"] - row["entered_at"]) / timedelta(seconds=1)
            assert float(row["seconds_in_state"]) == round(spent, 6) > 0
        assert view[-1]["left_at"] is None and view[-1]["is_current"]
        assert utc(
            fetch(
                raw,
                "SELECT sort_key, to_state, left_at FROM fsm_v_history WHERE machine = %s "
                "AND instance_key = %s ORDER BY sort_key",
                (name, key),
            )
        ) == [{"sort_key": v["sort_key"], "to_state": v["to_state"], "left_at": v["left_at"]} for v in view]
    assert [h.sort_key for h in store.history(name, "c")] == [1, 2, 4, 5]  # the gap is no problem for left_at

    # counts per state: every state of the definition, 0 where empty
    states = collections.Counter(store.get(name, k).state for k in keys)
    counted = {
        r["state"]: int(r["instances"])
        for r in fetch(raw, "SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s", (name,))
    }
    assert counted == {s: states.get(s, 0) for s in machine.states}
    assert store.counts(name) == dict(states)
    assert store.counts(name) == {r["state"]: r["instances"] for r in fetch(raw, f"CALL `fsm_{name}_counts_v1`()")}

    # the funnel: instances that ever entered each state, and how often states were entered
    entered: dict[str, set[str]] = collections.defaultdict(set)
    entries: collections.Counter[str] = collections.Counter()
    for key in keys:
        for h in store.history(name, key):
            entered[h.to_state].add(key)
            entries[h.to_state] += 1
    funnel = fetch(
        raw,
        "SELECT state, position, instances, entries FROM fsm_v_funnel WHERE machine = %s ORDER BY position",
        (name,),
    )
    assert {f["state"]: (f["instances"], f["entries"]) for f in funnel} == {
        s: (len(entered[s]), entries[s]) for s in entered
    }
    assert [f["state"] for f in funnel] == [s for s in machine.states if s in entered]  # definition order

    # stuck: what a handler runs and is not done, filtered by time in state. d is not done, but no
    # handler runs it (idle: it moves when an event is sent), so it is not stuck until queued
    assert fetch(raw, "SELECT instance_key FROM fsm_v_stuck WHERE machine = %s", (name,)) == []
    store.enqueue(name, "d")
    stuck = fetch(raw, "SELECT instance_key, status, due_at FROM fsm_v_stuck WHERE machine = %s ORDER BY id", (name,))
    assert [(r["instance_key"], r["status"]) for r in stuck] == [("d", "running")]  # a, b, c, e reached final states
    assert stuck[0]["due_at"] is not None
    assert (
        fetch(raw, "SELECT instance_key FROM fsm_v_stuck WHERE machine = %s AND seconds_in_state > 3600", (name,)) == []
    )


def test_state_as_of_a_past_time(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    name = store.define(order_machine()).machine
    build_history(store, raw, name)
    history = store.history(name, "b")
    for before, after in itertools.pairwise(history):
        middle = before.created_at + (after.created_at - before.created_at) / 2
        got = store.state_at(name, "b", middle)
        assert got is not None and (got.state, got.sort_key) == (before.to_state, before.sort_key)
        assert got.left_at == after.created_at
        [view] = fetch(
            raw,
            f"SELECT to_state FROM `fsm_v_{name}_transitions` WHERE instance_key = 'b' "
            "AND entered_at <= %s AND (left_at > %s OR left_at IS NULL)",
            (middle.replace(tzinfo=None), middle.replace(tzinfo=None)),
        )
        assert view["to_state"] == before.to_state  # the documented query on the view agrees
    assert store.state_at(name, "b", history[0].created_at - timedelta(seconds=1)) is None  # not yet created
    now = store.state_at(name, "b", history[-1].created_at + timedelta(days=1))
    assert now is not None and now.state == "cancelled" and now.left_at is None


def test_failed_view_shows_the_last_error(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    process = checkout(unique("broken"), backoff=0.0, max_attempts=2)

    def charge(ctx: Context) -> Outcome:
        raise ConnectionError(f"card processor down for {ctx.key}")

    process.handlers.pop("charge")
    process.register("charge", charge)
    store.define(process.machine)
    process.start(store, "f-1")
    process.start(store, "f-2")
    Worker(store, [process], idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.3)
    failed = fetch(
        raw,
        "SELECT instance_key, current_state, attempt, error_type, message FROM fsm_v_failed "
        "WHERE machine = %s ORDER BY id",
        (process.name,),
    )
    assert failed == [
        {
            "instance_key": k,
            "current_state": "charge",
            "attempt": 2,
            "error_type": "builtins.ConnectionError",
            "message": f"card processor down for {k}",
        }
        for k in ("f-1", "f-2")
    ]
    assert [r.instance_key for r in store.failed(process.name)] == ["f-1", "f-2"]  # the procedure agrees
    [stats] = [s for s in store.stats() if s.machine == process.name]
    assert (stats.instances, stats.failed, stats.completed) == (2, 2, 0)


def test_failed_view_shows_the_reason_a_handler_gave_ctx_fail(store: Store, raw) -> None:  # type: ignore[no-untyped-def]
    """docs/reporting.md: an instance a handler failed on purpose has its row like any other,
    pyfsm.HandlerFailed and the reason given; only an instance with no error recorded at all
    (failed by an UPDATE in SQL) has NULL error columns."""
    process = checkout(unique("refused"), backoff=0.0)

    def charge(ctx: Context) -> Outcome:
        return ctx.fail("on purpose")

    process.handlers.pop("charge")
    process.register("charge", charge)
    store.define(process.machine)
    process.start(store, "p-1")  # runs at once: reserve, then charge fails it
    store.create(process.name, "s-1")
    raw.cursor().execute(f"UPDATE `fsm_{process.name}` SET status = 'failed' WHERE instance_key = 's-1'")  # a DBA
    failed = fetch(
        raw,
        "SELECT instance_key, current_state, handler, attempt, error_type, message, failed_at "
        "FROM fsm_v_failed WHERE machine = %s ORDER BY id",
        (process.name,),
    )
    assert [{k: v for k, v in r.items() if k != "failed_at"} for r in failed] == [
        {
            "instance_key": "p-1",
            "current_state": "charge",
            "handler": "charge",
            "attempt": 1,
            "error_type": "pyfsm.HandlerFailed",
            "message": "on purpose",
        },
        {
            "instance_key": "s-1",
            "current_state": "reserve",
            "handler": None,
            "attempt": None,
            "error_type": None,
            "message": None,
        },
    ]
    assert failed[0]["failed_at"] is not None and failed[1]["failed_at"] is None
    [listed] = [f for f in store.failed(process.name) if f.instance_key == "p-1"]  # the procedure agrees
    assert (listed.error_type, listed.message) == ("pyfsm.HandlerFailed", "on purpose")


def _random_sends(dsn: str, name: str, seed: int, rounds: int, out: Any) -> None:
    """One process: random events (most of them refused) on shared keys, some of them new."""
    rng = random.Random(seed)
    applied = 0
    with Store(dsn, pool_size=1) as store:
        for _ in range(rounds):
            key = f"k{rng.randrange(80)}"
            event = rng.choice(["pay", "pay", "refund", "ship", "cancel", "deliver"])
            try:
                store.send(name, key, event, lookup_key="acct")
                applied += 1
            except (TransitionNotAllowed, UnknownInstance):  # refused: the point is what was applied
                pass
            except Exception as exc:  # a deadlock is retryable: the counts must still add up
                if not getattr(exc, "retryable", False):
                    raise
    out.put(applied)


def test_counts_stay_exact_under_concurrent_processes(store: Store, dsn: str, raw) -> None:  # type: ignore[no-untyped-def]
    name = store.define(order_machine()).machine
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_random_sends, args=(dsn, name, seed, 150, out)) for seed in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    applied = [out.get(timeout=5) for _ in procs]
    assert sum(applied) > 100  # the processes really moved instances
    truth = {
        r["current_state"]: r["n"]
        for r in fetch(raw, f"SELECT current_state, COUNT(*) AS n FROM `fsm_{name}` GROUP BY current_state")
    }
    assert store.counts(name) == truth
    shards = fetch(raw, "SELECT state, shard, instances FROM fsm_state_counts WHERE machine = %s", (name,))
    assert all(s["instances"] >= 0 for s in shards)
    per_shard = {
        (r["current_state"], r["shard"]): r["n"]
        for r in fetch(
            raw, f"SELECT current_state, MOD(id, 16) AS shard, COUNT(*) AS n FROM `fsm_{name}` GROUP BY 1, 2"
        )
    }
    assert {(s["state"], s["shard"]): s["instances"] for s in shards if s["instances"]} == per_shard


def test_machines_installed_at_0003_get_counts_and_left_at(make_database) -> None:  # type: ignore[no-untyped-def]
    """Instances and history written before revision 0004 are counted and get their left_at."""
    settings = make_database()
    schema.migrate(settings, revision="0003")
    machine = order_machine("order")
    conn = db.connect(settings)
    try:
        with conn.cursor() as cur:  # what pyfsm 0.2 did: fsm_define_v2, then the v2 templates
            cur.execute("CALL fsm_define_v2('order', %s)", (machine.to_json(),))
            execute_ddl(conn, [render(t, "order") for t in MACHINE_TEMPLATE_SETS["v2"]])
            cur.execute("UPDATE fsm_machines SET objects_version = 'v2' WHERE machine = 'order'")
            for i in range(30):
                for event in ["pay", "refund", "pay", "ship", "deliver"][: i % 6]:
                    cur.execute("CALL fsm_order_send_v1(%s, %s, NULL, NULL, NULL, NULL, NULL, NULL)", (f"o-{i}", event))
                    cur.fetchall()
                    while cur.nextset():
                        pass
                if i % 6 == 0:
                    cur.execute("CALL fsm_order_create_v1(%s, NULL, NULL, NULL, NULL, NULL)", (f"o-{i}",))
    finally:
        conn.close()
    schema.migrate(settings)
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        truth = {
            r["current_state"]: r["n"]
            for r in fetch(raw, "SELECT current_state, COUNT(*) AS n FROM fsm_order GROUP BY current_state")
        }
        with Store(settings.dsn()) as store:
            assert store.counts("order") == truth and sum(truth.values()) == 30
            store.send("order", "o-1", "ship")  # counted by the new triggers from here on
            truth["paid"] -= 1
            truth["shipped"] = truth.get("shipped", 0) + 1
            assert store.counts("order") == {s: n for s, n in truth.items() if n}
        rows = fetch(
            raw,
            "SELECT instance_id, sort_key, created_at, left_at, most_recent FROM fsm_order_transitions "
            "ORDER BY instance_id, sort_key",
        )
        by_instance: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
        for r in rows:
            by_instance[r["instance_id"]].append(r)
        for history in by_instance.values():
            for row, after in itertools.pairwise(history):
                assert row["left_at"] == after["created_at"] and row["most_recent"] is None
            assert history[-1]["left_at"] is None and history[-1]["most_recent"] == 1
        assert sum(len(h) - 1 for h in by_instance.values()) > 40  # the fill really had rows to fill
    finally:
        raw.close()


def _define(dsn: str, name: str, barrier: Any) -> None:
    with Store(dsn, pool_size=1) as store:
        barrier.wait(timeout=60)  # all define at the same moment
        store.define(order_machine(name))
        store.create(name, "only")


def test_types_installed_at_once_all_appear_in_the_views(make_database) -> None:  # type: ignore[no-untyped-def]
    settings = make_database()
    with Store(settings.dsn()) as store:
        store.migrate()
    names = [f"kind{n}" for n in range(4)]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(names))
    procs = [ctx.Process(target=_define, args=(settings.dsn(), name, barrier)) for name in names]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        for view in ("fsm_v_instances", "fsm_v_history", "fsm_v_funnel"):
            assert [
                r["machine"] for r in fetch(raw, f"SELECT DISTINCT machine FROM {view} ORDER BY machine")
            ] == names, view
    finally:
        raw.close()
