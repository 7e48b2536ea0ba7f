"""Instances moved to a newer definition version (Store.upgrade_instances, fsm_{type}_upgrade_v1).

Checked against the raw tables, on MariaDB and MySQL alike: the dry run's counts; renamed,
dropped and added states; completed instances whose state gained a way out; timers that
follow the target version; history, counters and outbox as the triggers keep them; raw
writers still refused; hostile maps refused with nothing moved; a DBA's batches; sender
processes racing an upgrade; the upgrading process SIGKILLed part way and run again.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pymysql
import pytest
from helpers.common import errno_of, unique
from helpers.fuzz_strategies import INJECTIONS
from helpers.histories import check_upgraded_chains
from helpers.processes import SPAWN, run_processes
from helpers.relay import query

from pyfsm import Machine, Store, SyncNeeded, TransitionNotAllowed, UpgradeRefused
from pyfsm.db import Settings

V1_STATES = ["new", "paid", "shipped", "delivered", "cancelled"]


def v1(name: str, **options: Any) -> Machine:
    return Machine(
        name=name,
        states=V1_STATES,
        start=["new"],
        final=["delivered", "cancelled"],
        transitions=[
            ("pay", "new", "paid"),
            ("ship", "paid", "shipped"),
            ("deliver", "shipped", "delivered"),
            ("cancel", ["new", "paid"], "cancelled"),
        ],
        **options,
    )


def v2(name: str, **options: Any) -> Machine:
    """shipped renamed sent; delivered gains refund (no longer final); refunded added."""
    return Machine(
        name=name,
        states=["new", "paid", "sent", "delivered", "refunded", "cancelled"],
        start=["new"],
        final=["refunded", "cancelled"],
        transitions=[
            ("pay", "new", "paid"),
            ("ship", "paid", "sent"),
            ("deliver", "sent", "delivered"),
            ("refund", "delivered", "refunded"),
            ("cancel", ["new", "paid"], "cancelled"),
        ],
        **options,
    )


MAP = {"shipped": "sent"}
PATHS = {
    "new": [],
    "paid": ["pay"],
    "shipped": ["pay", "ship"],
    "delivered": ["pay", "ship", "deliver"],
    "cancelled": ["cancel"],
}


@pytest.fixture
def settings(make_database: Any) -> Settings:
    return make_database("pyfsm_upgrade")  # type: ignore[no-any-return]


@pytest.fixture
def store(settings: Settings) -> Any:
    with Store(settings.dsn()) as s:
        s.migrate()
        yield s


def populate(store: Store, machine: Machine, per_state: dict[str, int]) -> list[str]:
    store.define(machine)
    keys = []
    for state, n in per_state.items():
        for i in range(n):
            key = f"{state}-{i}"
            store.create(machine, key)
            for event in PATHS[state]:
                store.send(machine, key, event)
            keys.append(key)
    return keys


def raw_groups(settings: Settings, name: str) -> dict[tuple[int, str], int]:
    return {
        (int(r["definition_version"]), r["current_state"]): int(r["n"])
        for r in query(
            settings,
            f"SELECT definition_version, current_state, COUNT(*) AS n FROM `fsm_{name}` "
            "GROUP BY definition_version, current_state",
        )
    }


def snapshot(settings: Settings, name: str) -> tuple[Any, ...]:
    """Everything an upgrade may write, to prove that something wrote nothing."""
    return (
        query(settings, f"SELECT id, current_state, definition_version, version, status FROM `fsm_{name}` ORDER BY id"),
        query(settings, f"SELECT COUNT(*) AS n, MAX(id) AS last FROM `fsm_{name}_transitions`"),
        query(
            settings,
            "SELECT state, shard, instances FROM fsm_state_counts WHERE machine = %s ORDER BY state, shard",
            (name,),
        ),
        query(settings, "SELECT COUNT(*) AS n FROM fsm_outbox"),
        query(settings, "SELECT id, due_at FROM fsm_timers ORDER BY id"),
    )


def check_history(
    settings: Settings, name: str, before: Machine, after: Machine, *, all_moved: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """tests/helpers/histories.py's invariants of an upgraded type, with this module's map."""
    return check_upgraded_chains(settings, name, before, after, MAP, all_moved=all_moved)


# -- the dry run and the move -------------------------------------------------------------------


def test_dry_run_counts_equal_the_raw_tables_and_write_nothing(store: Store, settings: Settings) -> None:
    name = unique("up")
    populate(store, v1(name), {"new": 3, "paid": 2, "shipped": 2, "delivered": 1, "cancelled": 1})
    store.define(v2(name))
    before = snapshot(settings, name)
    plan = store.upgrade_instances(name, dry_run=True)
    assert plan.dry_run and plan.to_version == 2 and plan.batches == 0
    assert {(g.from_version, g.from_state): g.instances for g in plan.groups} == raw_groups(settings, name)
    assert {g.from_state: (g.to_state, g.outcome) for g in plan.groups} == {
        "new": ("new", "move"),
        "paid": ("paid", "move"),
        "shipped": (None, "unmapped"),
        "delivered": ("delivered", "move"),
        "cancelled": ("cancelled", "move"),
    }
    assert (plan.moved, plan.waiting, plan.unmapped) == (7, 0, 2)
    mapped = store.upgrade_instances(name, states={"shipped": "sent"}, dry_run=True)
    assert {g.from_state: g.to_state for g in mapped.groups}["shipped"] == "sent" and mapped.unmapped == 0
    assert snapshot(settings, name) == before, "a dry run wrote something"
    # the DBA's dry run answers the same
    conn = pymysql.connect(**settings.connect_kwargs(), cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute("CALL fsm_upgrade_plan_v1(%s, NULL, %s, NULL)", (name, '{"shipped": "sent"}'))
            rows = cur.fetchall()
    finally:
        conn.close()
    assert [(r["from_state"], r["to_state"], r["outcome"], r["instances"]) for r in rows] == [
        (g.from_state, g.to_state, g.outcome, g.instances) for g in mapped.groups
    ]


def test_an_upgrade_without_a_map_moves_what_can_move_and_says_what_cannot(store: Store, settings: Settings) -> None:
    name = unique("up")
    populate(store, v1(name), {"new": 2, "shipped": 2})
    store.define(v2(name))
    report = store.upgrade_instances(name)
    assert (report.moved, report.unmapped, report.waiting) == (2, 2, 0)
    assert raw_groups(settings, name) == {(2, "new"): 2, (1, "shipped"): 2}
    again = store.upgrade_instances(name, states={"shipped": "sent"})
    assert (again.moved, again.unmapped) == (2, 0)
    assert raw_groups(settings, name) == {(2, "new"): 2, (2, "sent"): 2}
    check_history(settings, name, v1(name), v2(name), all_moved=True)


def test_upgrade_records_history_counters_status_and_outbox(store: Store, settings: Settings) -> None:
    name = unique("up")
    topic = f"t_{name}"
    per_state = {"new": 2, "paid": 1, "shipped": 2, "delivered": 2, "cancelled": 1}
    populate(store, v1(name, topic=topic), per_state)
    store.define(v2(name, topic=topic))
    outbox_before = query(settings, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE machine = %s", (name,))[0]["n"]
    report = store.upgrade_instances(name, states={"shipped": "sent"}, batch=3)
    assert report.moved == sum(per_state.values()) and report.batches >= 3
    assert {(g.from_state, g.to_state): g.instances for g in report.groups} == {
        ("new", "new"): 2,
        ("paid", "paid"): 1,
        ("shipped", "sent"): 2,
        ("delivered", "delivered"): 2,
        ("cancelled", "cancelled"): 1,
    }
    assert raw_groups(settings, name) == {
        (2, "new"): 2,
        (2, "paid"): 1,
        (2, "sent"): 2,
        (2, "delivered"): 2,
        (2, "cancelled"): 1,
    }
    check_history(settings, name, v1(name), v2(name), all_moved=True)
    # one outbox row per move, no event, the move in its metadata
    moves = query(
        settings,
        "SELECT instance_key, event, from_state, to_state, metadata FROM fsm_outbox "
        "WHERE machine = %s AND event IS NULL AND from_state IS NOT NULL ORDER BY id",
        (name,),
    )
    assert len(moves) == report.moved
    assert (
        query(settings, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE machine = %s", (name,))[0]["n"]
        == outbox_before + report.moved
    )
    assert all(json.loads(m["metadata"])["upgrade"]["to_version"] == 2 for m in moves)
    # status follows the new version: delivered is no longer final, so it runs again and may be refunded
    delivered = store.get(name, "delivered-0")
    assert (delivered.state, delivered.status, delivered.definition_version) == ("delivered", "running", 2)
    assert store.send(name, "delivered-0", "refund").status == "completed"
    assert store.get(name, "cancelled-0").status == "completed"
    # the history readers show the move
    moved = [h for h in store.history(name, "shipped-0") if h.source == "upgrade"]
    assert len(moved) == 1 and (moved[0].from_state, moved[0].to_state) == ("shipped", "sent")
    # running it again changes nothing
    before = snapshot(settings, name)
    assert store.upgrade_instances(name, states={"shipped": "sent"}).moved == 0
    assert snapshot(settings, name) == before
    assert [(c.version, c.instances, c.is_current) for c in store.version_counts(name)] == [(1, 0, False), (2, 8, True)]


def test_a_state_mapped_onto_a_final_state_completes_the_instance_and_ends_its_run(
    store: Store, settings: Settings
) -> None:
    name = unique("up")
    populate(store, v1(name), {"shipped": 1, "paid": 1})
    store.enqueue(name, "shipped-0")
    assert query(settings, "SELECT COUNT(*) AS n FROM fsm_runs WHERE machine = %s", (name,))[0]["n"] == 1
    store.define(
        Machine(
            name=name,
            states=["new", "paid", "done"],
            start=["new"],
            final=["done"],
            transitions=[("pay", "new", "paid"), ("finish", "paid", "done")],
        )
    )
    report = store.upgrade_instances(name, states={"shipped": "done"})
    assert report.moved == 2
    got = store.get(name, "shipped-0")
    assert (got.state, got.status) == ("done", "completed")
    assert query(settings, "SELECT COUNT(*) AS n FROM fsm_runs WHERE machine = %s", (name,))[0]["n"] == 0


def test_only_moves_the_subset_asked_for(store: Store, settings: Settings) -> None:
    name = unique("up")
    populate(store, v1(name), {"new": 2, "paid": 2, "delivered": 1})
    store.define(v2(name))
    report = store.upgrade_instances(name, only={"states": ["paid", "delivered"]})
    assert report.moved == 3
    assert raw_groups(settings, name) == {(1, "new"): 2, (2, "paid"): 2, (2, "delivered"): 1}
    # a third version: only the instances still at version 1
    store.define(v2(name, event_data=False))
    third = store.upgrade_instances(name, only={"versions": [1]}, dry_run=True)
    assert {(g.from_version, g.from_state) for g in third.groups} == {(1, "new")} and third.to_version == 3
    store.upgrade_instances(name, to_version=2, only={"versions": [1]})
    assert raw_groups(settings, name) == {(2, "new"): 2, (2, "paid"): 2, (2, "delivered"): 1}


def test_timeouts_follow_the_target_version(store: Store, settings: Settings) -> None:
    """Unchanged timeout (seconds and event): keeps its due time. Changed: re-armed from the
    move. Dropped: disarmed. Added: armed from the move."""
    name = unique("up")
    states = ["new", "paid", "held", "done", "cancelled"]
    rules = [
        ("pay", "new", "paid"),
        ("hold", "paid", "held"),
        ("finish", ["paid", "held"], "done"),
        ("cancel", ["new", "paid", "held"], "cancelled"),
    ]
    first = Machine(
        name=name,
        states=states,
        start=["new"],
        final=["done", "cancelled"],
        transitions=rules,
        timeouts={"new": ("30m", "cancel"), "paid": ("1h", "cancel"), "held": ("2h", "cancel")},
    )
    store.define(first)
    for key, path in (("n", []), ("p", ["pay"]), ("h", ["pay", "hold"])):
        store.create(name, key)
        for event in path:
            store.send(name, key, event)
    armed = {t.instance_key: t for t in store.timers(name)}
    assert set(armed) == {"n", "p", "h"}
    time.sleep(0.05)  # the move's time differs from the arming's
    store.define(
        Machine(
            name=name,
            states=states,
            start=["new"],
            final=["done", "cancelled"],
            transitions=rules,
            timeouts={"new": ("30m", "cancel"), "paid": ("2h", "cancel")},
        )
    )  # paid changed, held dropped
    assert store.upgrade_instances(name).moved == 3
    after = {t.instance_key: t for t in store.timers(name)}
    assert set(after) == {"n", "p"}
    assert (after["n"].due_at, after["n"].armed_at) == (armed["n"].due_at, armed["n"].armed_at)
    moved_at = {
        r["instance_key"]: r["created_at"]
        for r in query(
            settings,
            f"SELECT i.instance_key, t.created_at FROM `fsm_{name}_transitions` t JOIN `fsm_{name}` i "
            "ON i.id = t.instance_id WHERE t.source = 'upgrade'",
        )
    }
    assert after["p"].armed_at.replace(tzinfo=None) == moved_at["p"]
    assert after["p"].due_at - after["p"].armed_at == timedelta(hours=2)
    # a timeout the new version adds is armed from the move
    store.define(
        Machine(
            name=name,
            states=states,
            start=["new"],
            final=["done", "cancelled"],
            transitions=rules,
            timeouts={"new": ("30m", "cancel"), "paid": ("2h", "cancel"), "held": ("5m", "finish")},
        )
    )
    assert store.upgrade_instances(name).moved == 3
    held = {t.instance_key: t for t in store.timers(name)}["h"]
    assert (held.event, held.due_at - held.armed_at) == ("finish", timedelta(minutes=5))


def test_a_target_with_timeouts_needs_the_timer_triggers_first(store: Store, settings: Settings) -> None:
    name = unique("up")
    populate(store, v1(name), {"new": 1})
    conn = pymysql.connect(**settings.connect_kwargs())
    try:  # a DBA stores a version with a timeout; the timer triggers come only from a client
        with conn.cursor() as cur:
            body = {
                "states": V1_STATES,
                "start": ["new"],
                "final": ["delivered", "cancelled"],
                "transitions": [
                    {"event": "pay", "from": ["new"], "to": "paid"},
                    {"event": "ship", "from": ["paid"], "to": "shipped"},
                    {"event": "deliver", "from": ["shipped"], "to": "delivered"},
                    {"event": "cancel", "from": ["new", "paid"], "to": "cancelled"},
                ],
                "timeouts": {"new": {"after": 60, "event": "cancel"}},
            }
            cur.execute("CALL fsm_define_v6(%s, %s)", (name, json.dumps(body)))
    finally:
        conn.close()
    before = snapshot(settings, name)
    with pytest.raises(SyncNeeded, match="pyfsm sync") as info:
        store.upgrade_instances(name)
    assert info.value.errno == 31031
    assert snapshot(settings, name) == before
    store.sync(name)
    assert store.upgrade_instances(name).moved == 1
    assert [t.instance_key for t in store.timers(name)] == ["new-0"]


# -- what the triggers still refuse ---------------------------------------------------------------


def test_raw_writers_still_cannot_change_the_definition_version(store: Store, settings: Settings) -> None:
    name = unique("up")
    populate(store, v1(name), {"new": 1, "shipped": 1})
    store.define(v2(name))
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        table = f"`fsm_{name}`"
        ids = {r["instance_key"]: r["id"] for r in query(settings, f"SELECT id, instance_key FROM {table}")}
        assert errno_of(conn, f"UPDATE {table} SET definition_version = 2") == 31013
        with conn.cursor() as cur:  # a guard naming another row or another version does not open it
            cur.execute("SET @fsm_upgrade = %s", (f"{ids['shipped-0']}/2",))
        assert errno_of(conn, f"UPDATE {table} SET definition_version = 2 WHERE id = %s", (ids["new-0"],)) == 31013
        with conn.cursor() as cur:
            cur.execute("SET @fsm_upgrade = %s", (f"{ids['new-0']}/3",))
        assert errno_of(conn, f"UPDATE {table} SET definition_version = 2 WHERE id = %s", (ids["new-0"],)) == 31013
        # the right guard, but a state the target lacks, or more than the version and state
        with conn.cursor() as cur:
            cur.execute("SET @fsm_upgrade = %s", (f"{ids['shipped-0']}/2",))
        assert errno_of(conn, f"UPDATE {table} SET definition_version = 2 WHERE id = %s", (ids["shipped-0"],)) == 31030
        with conn.cursor() as cur:
            cur.execute("SET @fsm_upgrade = %s", (f"{ids['new-0']}/2",))
        assert (
            errno_of(
                conn, f"UPDATE {table} SET definition_version = 2, data = '{{\"x\": 1}}' WHERE id = %s", (ids["new-0"],)
            )
            == 31013
        )
        with conn.cursor() as cur:  # a failed statement leaves no guard behind
            cur.execute("SELECT @fsm_upgrade")
            assert cur.fetchone()[0] is None
    finally:
        conn.close()
    assert raw_groups(settings, name) == {(1, "new"): 1, (1, "shipped"): 1}


HOSTILE_MAPS: list[Any] = [
    {"nosuch": "new"},  # not a state of an older version
    {"shipped": "nosuch"},  # not a state of the target
    {"shipped": "paid", "paid": "new"},  # a chain
    {"paid": "new", "new": "paid"},  # a cycle
    {"shipped": 1},
    {"shipped": None},
    {"Shipped": "sent"},
    {"shipped": "sent ", "new": "new"},
    *({text: "sent"} for text in INJECTIONS[:4]),
    *({"shipped": text} for text in INJECTIONS[4:]),
]


def test_hostile_maps_are_refused_and_nothing_moves(store: Store, settings: Settings) -> None:
    """Each map, from Python (dry run and real) and through the DBA's CALLs: 31030, nothing
    written. One type for all of them: each refusal must leave it exactly as it was."""
    name = unique("up")
    populate(store, v1(name), {"new": 1, "paid": 1, "shipped": 1})
    store.define(v2(name))
    before = snapshot(settings, name)
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        for states in HOSTILE_MAPS:
            for dry_run in (True, False):
                with pytest.raises(UpgradeRefused) as info:
                    store.upgrade_instances(name, states=states, dry_run=dry_run)
                assert info.value.errno == 31030, states
            text = json.dumps(states)  # the DBA's CALL, with the map as raw JSON text
            assert errno_of(conn, "CALL fsm_upgrade_instances_v1(%s, NULL, %s, NULL, 0, 100)", (name, text)) == 31030
            assert errno_of(conn, "CALL fsm_upgrade_plan_v1(%s, NULL, %s, NULL)", (name, text)) == 31030
            assert snapshot(settings, name) == before, states
    finally:
        conn.close()
    assert query(settings, "SHOW TABLES LIKE 'fsm_machines'"), "a table went"


BAD_CALLS: list[tuple[str, Any]] = [
    ("no such version", lambda s, n: s.upgrade_instances(n, to_version=9)),
    ("hostile only.states", lambda s, n: s.upgrade_instances(n, only={"states": ["x'; DROP TABLE fsm_rules; --"]})),
    ("only the target version", lambda s, n: s.upgrade_instances(n, only={"versions": [2]})),
    ("only with an unknown key", lambda s, n: s.upgrade_instances(n, only={"kinds": ["x"]})),
    ("only a version as text", lambda s, n: s.upgrade_instances(n, only={"versions": ["1"]})),
    ("a map that is no dict", lambda s, n: s.upgrade_instances(n, states=["shipped", "sent"])),
]


def test_bad_targets_and_subsets_are_refused(store: Store, settings: Settings) -> None:
    name = unique("up")
    populate(store, v1(name), {"new": 1})
    store.define(v2(name))
    before = snapshot(settings, name)
    for what, call in BAD_CALLS:
        with pytest.raises(UpgradeRefused) as info:
            call(store, name)
        assert info.value.errno == 31030, what
        assert snapshot(settings, name) == before, what
    # upgrading to version 1 finds nothing older than it: a no-op, never a move
    report = store.upgrade_instances(name, to_version=1)
    assert (report.to_version, report.moved) == (1, 0)
    assert snapshot(settings, name) == before


# -- a DBA's batches, concurrency, interruption ----------------------------------------------------


def test_a_dba_moves_everything_in_keyset_batches(store: Store, settings: Settings) -> None:
    name = unique("up")
    populate(store, v1(name), {"new": 4, "paid": 3, "shipped": 3})
    store.define(v2(name))
    conn = pymysql.connect(**settings.connect_kwargs(), cursorclass=pymysql.cursors.DictCursor)
    moved: Counter[str] = Counter()
    after, calls = 0, 0
    try:
        with conn.cursor() as cur:
            while True:
                cur.execute(
                    "CALL fsm_upgrade_instances_v1(%s, NULL, %s, NULL, %s, 3)", (name, '{"shipped": "sent"}', after)
                )
                rows = cur.fetchall()
                while cur.nextset():
                    pass
                calls += 1
                for r in rows:
                    if r["from_version"] is not None:
                        moved[f"{r['from_state']}>{r['to_state']}:{r['outcome']}"] += r["instances"]
                after = rows[0]["last_id"]
                if rows[0]["done"]:
                    break
            cur.execute("CALL fsm_instances_per_version_v1(%s)", (name,))
            counts = [(r["version"], r["instances"], r["is_current"]) for r in cur.fetchall()]
    finally:
        conn.close()
    assert moved == {"new>new:moved": 4, "paid>paid:moved": 3, "shipped>sent:moved": 3}
    assert calls == 4  # 10 instances, 3 at a time: the fourth call moves the last one and says done
    assert counts == [(1, 0, 0), (2, 10, 1)]
    check_history(settings, name, v1(name), v2(name), all_moved=True)


def test_claimed_and_locked_instances_wait_for_the_next_run(store: Store, settings: Settings) -> None:
    name = unique("up")
    store.define(v1(name, uses_global_lock=True))
    for key in ("free", "claimed", "locked"):
        store.create(name, key, lookup_key=f"acct-{key}")
    store.enqueue(name, "claimed")
    store.enqueue(name, "free")  # queued, not claimed: it moves, and its run stays due
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("CALL fsm_claim_v1(%s, 'test-worker', 1, 60, %s)", (name, "claimed"))
            while cur.nextset():
                pass
        store.define(v2(name, uses_global_lock=True))
        with store.lock(name, "locked", heartbeat=False):
            plan = store.upgrade_instances(name, dry_run=True)
            assert {g.outcome: g.instances for g in plan.groups} == {"move": 1, "claimed": 1, "locked": 1}
            report = store.upgrade_instances(name)
            assert (report.moved, report.waiting, report.unmapped) == (1, 2, 0)
            assert {g.outcome for g in report.groups} == {"moved", "claimed", "locked"}
        with conn.cursor() as cur:
            cur.execute("CALL fsm_release_claims_v1('test-worker', %s, '')", (name,))
            while cur.nextset():
                pass
    finally:
        conn.close()
    assert store.upgrade_instances(name).moved == 2
    assert raw_groups(settings, name) == {(2, "new"): 3}
    runs = query(
        settings,
        f"SELECT i.instance_key, r.claimed_by FROM fsm_runs r JOIN `fsm_{name}` i "
        "ON i.id = r.instance_id WHERE r.machine = %s ORDER BY 1",
        (name,),
    )
    assert runs == [{"instance_key": "claimed", "claimed_by": None}, {"instance_key": "free", "claimed_by": None}]
    info = store.run_info(name, "free")
    assert info is not None and info.claimed_by is None and info.attempt == 0


def sender(dsn: str, name: str, keys: list[str], worker: int, barrier: Any, out: Any) -> None:
    """Sends pay/ship/deliver/cancel/refund at random until told to stop; counts what it did."""
    import random
    import traceback

    report: dict[str, Any] = {"worker": worker, "sent": 0, "refused": 0, "error": None}
    rng = random.Random(worker)
    try:
        with Store(dsn, pool_size=1) as store:
            store.get(name, keys[0])
            barrier.wait(timeout=60)
            deadline = time.monotonic() + 4.0
            while time.monotonic() < deadline:
                key = rng.choice(keys)
                try:
                    store.send(name, key, rng.choice(["pay", "ship", "deliver", "cancel", "refund"]))
                    report["sent"] += 1
                except TransitionNotAllowed:
                    report["refused"] += 1
    except Exception:
        report["error"] = traceback.format_exc()
    out.put(report)


def upgrader(dsn: str, name: str, keys: list[str], worker: int, barrier: Any, out: Any) -> None:
    import traceback

    report: dict[str, Any] = {"worker": worker, "moved": 0, "runs": 0, "error": None}
    try:
        with Store(dsn, pool_size=1) as store:
            barrier.wait(timeout=60)
            time.sleep(0.3)  # the senders are under way
            while True:  # until nothing is left of version 1 (senders may hold rows: runs meet them)
                result = store.upgrade_instances(name, states={"shipped": "sent"}, batch=7)
                report["moved"] += result.moved
                report["runs"] += 1
                if not [c for c in store.version_counts(name) if c.version == 1 and c.instances]:
                    break
    except Exception:
        report["error"] = traceback.format_exc()
    out.put(report)


def racer(dsn: str, name: str, keys: list[str], worker: int, barrier: Any, out: Any) -> None:
    (upgrader if worker == 0 else sender)(dsn, name, keys, worker, barrier, out)


def test_senders_racing_an_upgrade_lose_nothing_and_nothing_is_half_moved(store: Store, settings: Settings) -> None:
    name = unique("up")
    keys = populate(store, v1(name), {"new": 60, "paid": 30, "shipped": 30})
    store.define(v2(name))
    reports = run_processes(racer, lambda w: (settings.dsn(), name, keys, w), n=4)
    upgrade = next(r for r in reports if r["worker"] == 0)
    assert upgrade["moved"] == len(keys), upgrade
    assert sum(r["sent"] for r in reports if r["worker"] != 0) > 0
    assert {v for v, _state in raw_groups(settings, name)} == {2}
    history = check_history(settings, name, v1(name), v2(name), all_moved=True)
    transitions = sum(1 for h in history.values() for r in h if r["source"] != "upgrade" and r["sort_key"] > 1)
    assert transitions == sum(r["sent"] for r in reports if r["worker"] != 0) + sum(
        len(PATHS[k.split("-")[0]]) for k in keys
    ), "a send was lost or doubled"


def slow_upgrade(dsn: str, name: str, out: Any) -> None:
    with Store(dsn, pool_size=1) as store:
        out.put("started")
        store.upgrade_instances(name, states={"shipped": "sent"}, batch=1)


def test_sigkill_mid_upgrade_leaves_every_instance_wholly_old_or_new_and_a_rerun_finishes(
    store: Store, settings: Settings
) -> None:
    name = unique("up")
    total = 1500
    store.define(v1(name))
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:  # many instances quickly: a raw multi-row INSERT, as a DBA may
            for start in range(0, total, 500):
                cur.execute(
                    f"INSERT INTO `fsm_{name}` (instance_key) VALUES "
                    + ", ".join(f"('k{i}')" for i in range(start, min(total, start + 500)))
                )
    finally:
        conn.close()
    for i in range(0, total, 3):
        store.send(name, f"k{i}", "pay")
    store.define(v2(name))
    out = SPAWN.Queue()
    proc = SPAWN.Process(target=slow_upgrade, args=(settings.dsn(), name, out), daemon=True)
    proc.start()
    assert out.get(timeout=60) == "started"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        moved = raw_groups(settings, name)
        if sum(n for (v, _s), n in moved.items() if v == 2) >= 50:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    time.sleep(0.5)  # the server rolls back the killed connection's open transaction
    groups = raw_groups(settings, name)
    done = sum(n for (v, _s), n in groups.items() if v == 2)
    assert 50 <= done < total, groups
    check_history(settings, name, v1(name), v2(name))  # each instance wholly old or wholly new
    report = store.upgrade_instances(name, states={"shipped": "sent"})
    assert report.moved == total - done
    assert {v for v, _s in raw_groups(settings, name)} == {2}
    check_history(settings, name, v1(name), v2(name), all_moved=True)


def test_reports_count_time_in_state_and_funnel_entries_across_a_move(store: Store, settings: Settings) -> None:
    """An upgrade is not an entry into a state: fsm_v_{type}.in_state_since stays when the
    instance entered its state (so fsm_v_stuck still finds a stuck one) and fsm_v_funnel counts
    no move as an entry; fsm_v_history shows the move with its source."""
    name = unique("up")
    populate(store, v1(name), {"new": 1, "shipped": 1})
    store.define(v2(name))
    since = {
        r["instance_key"]: r["in_state_since"]
        for r in query(settings, f"SELECT instance_key, in_state_since FROM `fsm_v_{name}`")
    }
    funnel = query(
        settings, "SELECT state, instances, entries FROM fsm_v_funnel WHERE machine = %s ORDER BY state", (name,)
    )
    time.sleep(0.05)
    assert store.upgrade_instances(name, states={"shipped": "sent"}).moved == 2
    assert {
        r["instance_key"]: r["in_state_since"]
        for r in query(settings, f"SELECT instance_key, in_state_since FROM `fsm_v_{name}`")
    } == since
    # fsm_v_stuck lists what a handler runs: queued now, new-0 is there with the same time in state
    store.enqueue(name, "new-0")
    assert {
        r["instance_key"]: r["in_state_since"]
        for r in query(settings, "SELECT instance_key, in_state_since FROM fsm_v_stuck WHERE machine = %s", (name,))
    } == {"new-0": since["new-0"]}
    assert (
        query(settings, "SELECT state, instances, entries FROM fsm_v_funnel WHERE machine = %s ORDER BY state", (name,))
        == funnel
    )
    moves = query(
        settings,
        "SELECT instance_key, from_state, to_state, event FROM fsm_v_history "
        "WHERE machine = %s AND source = 'upgrade' ORDER BY instance_key",
        (name,),
    )
    assert moves == [
        {"instance_key": "new-0", "from_state": "new", "to_state": "new", "event": None},
        {"instance_key": "shipped-0", "from_state": "shipped", "to_state": "sent", "event": None},
    ]
    # the next real transition counts from then on
    store.send(name, "new-0", "pay")
    row = query(settings, f"SELECT in_state_since FROM `fsm_v_{name}` WHERE instance_key = 'new-0'")[0]
    assert row["in_state_since"] > since["new-0"]


def test_a_batch_a_deadlock_ends_is_counted_and_carried_on(store: Store, settings: Settings) -> None:
    """A deadlock inside the trigger ends the batch's CALL (no procedure can handle it): the
    run reads what the batch had done from the session, and goes on on a new connection, so
    the report counts every instance once. The deadlock is made by a trigger of the test's
    own that fails the move of one instance the first time only: an AUTO_INCREMENT value is
    not given back by a rollback, so the first try takes 1 and the next 2."""
    name = unique("up")
    populate(store, v1(name), {"new": 10})
    store.define(v2(name))
    victim = int(query(settings, f"SELECT id FROM `fsm_{name}` ORDER BY id LIMIT 1 OFFSET 5")[0]["id"])
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE test_boom (n BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB")
            cur.execute(
                f"CREATE TRIGGER test_boom_ai AFTER INSERT ON `fsm_{name}_transitions` FOR EACH ROW "
                f"BEGIN IF NEW.source = 'upgrade' AND NEW.instance_id = {victim} THEN "
                "INSERT INTO test_boom () VALUES (); "
                "IF LAST_INSERT_ID() = 1 THEN "
                "SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'test: a deadlock', MYSQL_ERRNO = 1213; "
                "END IF; END IF; END"
            )
        report = store.upgrade_instances(name, batch=4)
        assert (report.moved, report.batches) == (10, 3), report  # 4, then (1 before the deadlock) 4, then 1
        with conn.cursor() as cur:
            cur.execute("SELECT n FROM test_boom")
            assert cur.fetchall() == ((2,),), "the first move of the victim did not fail"
            cur.execute("DROP TRIGGER test_boom_ai")
            cur.execute("DROP TABLE test_boom")
    finally:
        conn.close()
    assert raw_groups(settings, name) == {(2, "new"): 10}
    check_history(settings, name, v1(name), v2(name), all_moved=True)


def test_inside_an_open_transaction_an_upgrade_is_refused_at_once(store: Store, settings: Settings) -> None:
    name = unique("up")
    populate(store, v1(name), {"new": 1})  # nothing older than version 1 to move: refused all the same
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
        assert errno_of(conn, "CALL fsm_upgrade_instances_v1(%s, NULL, NULL, NULL, 0, 10)", (name,)) == 31016
    finally:
        conn.close()
