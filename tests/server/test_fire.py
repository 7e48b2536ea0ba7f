"""fsm_{type}_fire_v2 (revision 0028) and fire_v1 (revision 0023, deprecated), on the current trigger.

fire_v2(key, event) must answer exactly as send_v5(key, event, NULL x 7), and fire_v1 as
send_v4(key, event, NULL x 6): the same result row, the same refusal with the same number,
the same rows written (none on a refusal). Here each case runs through both, on twin
instances in the same state, and the answers are compared, for each of the two. Also
checked: what each leaves in the session, which procedure Store.send calls, and processes
racing each on new and existing keys.
"""

from __future__ import annotations

import itertools
import json
import traceback
from collections import Counter
from typing import Any

import pymysql
import pytest
from helpers.common import errno_of, fetch, order_machine, unique
from helpers.processes import run_processes
from pymysql.constants import SERVER_STATUS

from pyfsm import Machine, Store
from pyfsm.db import parse_dsn

#: the session variables of a transition's context
CONTEXT = (
    "SELECT @fsm_event AS e, @fsm_metadata AS m, @fsm_handler AS h, @fsm_request_id AS r, "
    "@fsm_source AS s, @fsm_guard AS g, @fsm_count_later AS c"
)
CLEAR = dict.fromkeys("emhrsgc")
#: each common call and the send procedure with every option NULL that it must answer as
FIRES = {
    "fire_v2": "CALL `fsm_{m}_send_v5`(%s, %s, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "fire_v1": "CALL `fsm_{m}_send_v4`(%s, %s, NULL, NULL, NULL, NULL, NULL, NULL)",
}
#: what a call of each, killed before its trigger ran, leaves in the session (event 'cancel')
KILLED = {"fire_v2": "SET @fsm_source = 'fire/cancel'", "fire_v1": "SET @fsm_event = 'cancel', @fsm_source = 'fire'"}
each_fire = pytest.mark.parametrize("fire", list(FIRES))


def answer(raw: Any, sql: str, args: tuple[Any, ...]) -> tuple[str, Any]:
    """('row', the result row without its ids) or ('errno', the error number) of one CALL."""
    try:
        (row,) = fetch(raw, sql, args)
    except pymysql.err.MySQLError as exc:
        return "errno", int(exc.args[0])
    return "row", {k: v for k, v in row.items() if k not in ("transition_id", "instance_id")}


def written(raw: Any, machine: str, key: str | None) -> list[tuple[Any, ...]]:
    """What a call may have written for ``key``: the instance, its run (waiting instances) and
    its history, ids left out."""
    if not isinstance(key, str):
        return []
    instance = fetch(
        raw,
        f"SELECT current_state, version, status, data, (SELECT COUNT(*) FROM fsm_runs r "
        f"WHERE r.machine = %s AND r.instance_id = i.id) AS runs FROM `fsm_{machine}` i "
        "WHERE instance_key = %s",
        (machine, key),
    )
    history = fetch(
        raw,
        f"SELECT t.sort_key, t.event, t.from_state, t.to_state, t.handler, t.metadata, t.source "
        f"FROM `fsm_{machine}_transitions` t JOIN `fsm_{machine}` i ON i.id = t.instance_id "
        "WHERE i.instance_key = %s ORDER BY t.sort_key",
        (key,),
    )
    return [tuple(r.values()) for r in instance + history]


def fire_and_send(raw: Any, machine: str, key: Any, event: Any, twin: Any, fire: str = "fire_v2") -> None:
    """``key`` through ``fire`` and ``twin`` (an instance in the same state, or another missing
    key) through the send procedure it answers as: the same answer, the same rows written and
    no context left."""
    by_fire = answer(raw, f"CALL `fsm_{machine}_{fire}`(%s, %s)", (key, event))
    assert fetch(raw, CONTEXT) == [CLEAR], (key, event)
    by_send = answer(raw, FIRES[fire].format(m=machine), (twin, event))
    assert fetch(raw, CONTEXT) == [CLEAR], (twin, event)
    assert by_fire == by_send, (key, event)
    assert written(raw, machine, key) == written(raw, machine, twin), (key, event)


@pytest.fixture
def twins(store: Store, raw: Any) -> tuple[Machine, Any]:
    """Pairs f-* (for the fire call) and s-* (for the send call) in the same states, of definition version 1;
    then version 2 adds the event ``hold``, which version 1's instances do not have."""
    machine = order_machine()
    store.define(machine)
    for key in ("f-1", "s-1", "f-paused", "s-paused", "f-done", "s-done", "f-wait", "s-wait"):
        store.create(machine, key)
    for prefix in ("f", "s"):
        store.send(machine, f"{prefix}-done", "cancel")
        store.send(machine, f"{prefix}-paused", "pay")
        store.pause(machine, f"{prefix}-paused")
        # left waiting by the handler engine: a transition makes it run again (fsm_runs)
        raw.cursor().execute(
            f"UPDATE `fsm_{machine.name}` SET status = 'waiting' WHERE instance_key = %s", (f"{prefix}-wait",)
        )
    store.define(
        Machine(
            name=machine.name,
            states=[*machine.states, "held"],
            start=machine.start,
            final=machine.final,
            transitions=[*machine.transitions, ("hold", "new", "held")],
        )
    )
    return machine, raw


@each_fire
def test_fire_answers_every_call_as_send(twins: tuple[Machine, Any], fire: str) -> None:
    machine, raw = twins
    name = machine.name
    cases: list[tuple[Any, Any, Any]] = [
        ("f-1", "pay", "s-1"),  # a transition
        ("f-1", "pay", "s-1"),  # not allowed from paid (31005)
        ("f-1", "nope", "s-1"),  # not one of the type's events (31028)
        ("f-1", "pay ", "s-1"),  # a trailing space: not the rule's event, byte for byte (31009)
        ("F-1", "pay", "S-1"),  # another case: not f-1's instance (keys are binary): a new one, created
        ("f-1", "hold", "s-1"),  # an event of version 2 only: not the instance's version's (31028)
        ("f-1", "Ship", "s-1"),  # not a name (31009)
        ("f-1", "x" * 65, "s-1"),  # longer than a name (31009)
        ("f-1", None, "s-1"),  # no event (31009)
        ("f-1 ", "ship", "s-1 "),  # a key ending in a space: never another key's instance (31009)
        (None, "ship", None),
        ("", "ship", ""),
        ("k" * 192, "ship", "j" * 192),
        ("f-paused", "ship", "s-paused"),  # paused (31011)
        ("f-done", "pay", "s-done"),  # at a final state (31005)
        ("f-wait", "pay", "s-wait"),  # waiting: it runs again, and its run is due
        ("f-v2", "hold", "s-v2"),  # no instance: created under version 2, whose start allows hold
        ("f-new", "pay", "s-new"),  # no instance: created in the start state that allows pay
        ("f-none", "ship", "s-none"),  # no instance, and no start state allows ship (31003)
        ("f-nil", "nope", "s-nil"),  # no instance, not an event of the type (31028)
        ("f-1", "ship", "s-1"),  # the next transition
    ]
    for key, event, twin in cases:
        fire_and_send(raw, name, key, event, twin, fire)
    # what the cases were for: each refusal above, as the send call gives it (compared call by call)
    assert written(raw, name, "f-1")[0][:2] == ("shipped", 3)
    assert written(raw, name, "f-new")[0][:2] == ("paid", 2)
    assert written(raw, name, "f-none") == []
    wait = written(raw, name, "f-wait")[0]  # (state, version, status, data, runs)
    assert (wait[0], wait[2], wait[4]) == ("paid", "running", 1)
    assert written(raw, name, "f-v2")[0][:2] == ("held", 2)
    assert errno_of(raw, f"CALL `fsm_{name}_{fire}`('f-1', 'nope')") == 31028
    assert errno_of(raw, f"CALL `fsm_{name}_{fire}`('f-1', 'Ship')") == 31009
    assert errno_of(raw, f"CALL `fsm_{name}_{fire}`('f-paused', 'ship')") == 31011
    assert errno_of(raw, f"CALL `fsm_{name}_{fire}`('f-none', 'ship')") == 31003


@each_fire
def test_a_locked_instance_is_refused_alike(store: Store, order: Machine, raw: Any, fire: str) -> None:
    """An instance whose lock another owner holds: 31018 from both, nothing written."""
    for key in ("f-l", "s-l"):
        store.create(order, key, lookup_key=f"lk-{key}")
        store.set_locking(order, key, local_lock=True)
    leases = [store.lock(order, key, owner="other", heartbeat=False) for key in ("f-l", "s-l")]
    try:
        fire_and_send(raw, order.name, "f-l", "pay", "s-l", fire)
        assert errno_of(raw, f"CALL `fsm_{order.name}_{fire}`('f-l', 'pay')") == 31018
    finally:
        for lease in leases:
            lease.release()
    fire_and_send(raw, order.name, "f-l", "pay", "s-l", fire)  # released: applied by both
    assert store.get(order, "f-l").state == "paid"


@each_fire
def test_fire_inside_an_open_transaction_leaves_it_open(twins: tuple[Machine, Any], fire: str) -> None:
    """31016, the caller's transaction untouched (a bad name is told first, as the send call tells it)."""
    machine, raw = twins
    raw.begin()
    try:
        fetch(raw, f"SELECT version FROM `fsm_{machine.name}` WHERE instance_key = 'f-1' FOR UPDATE")
        # a bad key is told first too, also one the UPDATE alone would not notice ('' and 192 characters)
        for key, twin, event, errno in (
            ("f-1", "s-1", "pay", 31016),
            ("f-1", "s-1", "Pay", 31009),
            ("", "", "pay", 31009),
            ("k" * 192, "k" * 192, "pay", 31009),
        ):
            assert errno_of(raw, f"CALL `fsm_{machine.name}_{fire}`(%s, %s)", (key, event)) == errno
            assert errno_of(raw, FIRES[fire].format(m=machine.name), (twin, event)) == errno
            assert raw.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS
    finally:
        raw.rollback()
    assert written(raw, machine.name, "f-1")[0][:2] == ("new", 1)


@each_fire
def test_fire_leaves_a_dbas_context_alone(store: Store, order: Machine, raw: Any, fire: str) -> None:
    """fire_v2 sets @fsm_source only (fire_v1 @fsm_event and @fsm_source): a DBA's @fsm_metadata
    and @fsm_handler are neither recorded nor cleared by it (the send calls would clear them)."""
    store.create(order, "c-1")
    raw.cursor().execute("SET @fsm_metadata = '{\"by\": \"dba\"}', @fsm_handler = 'dba'")
    fetch(raw, f"CALL `fsm_{order.name}_{fire}`('c-1', 'pay')")
    (row,) = fetch(
        raw,
        f"SELECT handler, metadata, source FROM `fsm_{order.name}_transitions` WHERE most_recent = 1 "
        f"AND instance_id = (SELECT id FROM `fsm_{order.name}` WHERE instance_key = 'c-1')",
    )
    assert (row["handler"], row["source"]) == (None, "procedure") and json.loads(row["metadata"]) == {}
    assert fetch(raw, "SELECT @fsm_event AS e, @fsm_source AS s, @fsm_metadata AS m, @fsm_handler AS h") == [
        {"e": None, "s": None, "m": '{"by": "dba"}', "h": "dba"}
    ]
    raw.cursor().execute("SET @fsm_metadata = NULL, @fsm_handler = NULL")


@each_fire
def test_a_context_a_failed_call_left_is_never_read(store: Store, order: Machine, raw: Any, fire: str) -> None:
    """A call killed while it waited for the row lock runs no handler and leaves its context
    set. What a fire call leaves (@fsm_source 'fire/cancel', or 'fire' and @fsm_event) must not
    steer a later send_v4, and what send_v4 leaves (@fsm_source 'procedure' with metadata) must
    not steer a later fire call."""
    for key in ("x-1", "x-2"):
        store.create(order, key)
    raw.cursor().execute(KILLED[fire])  # as a killed call leaves it
    (row,) = fetch(raw, f"CALL `fsm_{order.name}_send_v4`('x-1', 'pay', NULL, '{{\"n\": 1}}', NULL, NULL, 'h', NULL)")
    assert (row["to_state"], store.history(order, "x-1")[-1].metadata) == ("paid", {"n": 1})
    assert fetch(raw, CONTEXT) == [CLEAR]
    raw.cursor().execute(
        "SET @fsm_event = 'cancel', @fsm_source = 'procedure', @fsm_metadata = '{\"stale\": 1}', "
        "@fsm_handler = 'stale', @fsm_request_id = 'stale-1'"
    )  # as a killed send_v4 leaves it
    (row,) = fetch(raw, f"CALL `fsm_{order.name}_{fire}`('x-2', 'pay')")
    last = store.history(order, "x-2")[-1]
    assert (row["to_state"], last.event, last.metadata, last.handler, last.request_id) == (
        "paid",
        "pay",
        {},
        None,
        None,
    )
    raw.cursor().execute("SET @fsm_metadata = NULL, @fsm_handler = NULL, @fsm_request_id = NULL")


@each_fire
def test_a_refused_fire_leaves_no_context(store: Store, order: Machine, raw: Any, dsn: str, fire: str) -> None:
    """Refused in the trigger (31005) or before it (a lock wait timeout, 1205: the trigger never
    ran, so the call's own handler must clear what it set)."""
    store.create(order, "w-1")
    assert errno_of(raw, f"CALL `fsm_{order.name}_{fire}`('w-1', 'ship')") == 31005
    assert fetch(raw, CONTEXT) == [CLEAR]
    holder = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        holder.begin()
        fetch(holder, f"SELECT id FROM `fsm_{order.name}` WHERE instance_key = 'w-1' FOR UPDATE")
        raw.cursor().execute("SET SESSION innodb_lock_wait_timeout = 1")
        assert errno_of(raw, f"CALL `fsm_{order.name}_{fire}`('w-1', 'pay')") == 1205
        assert fetch(raw, CONTEXT) == [CLEAR]
    finally:
        holder.rollback()
        holder.close()
        raw.cursor().execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")
    assert store.get(order, "w-1").state == "new"


@pytest.mark.parametrize("context", ["@fsm_source = 'fire/pay'", "@fsm_event = 'pay', @fsm_source = 'fire'"])
def test_a_raw_update_with_source_fire_takes_the_event_alone(
    store: Store, order: Machine, raw: Any, context: str
) -> None:
    """@fsm_source 'fire/<event>' (fire_v2's) and 'fire' with @fsm_event (fire_v1's) are part of
    the trigger's context for every writer: the event is then the whole context (source
    'procedure'; the metadata set beside it is not read), and what was set is cleared."""
    store.create(order, "r-1")
    raw.cursor().execute(f'SET {context}, @fsm_metadata = \'{{"by": "dba"}}\'')
    raw.cursor().execute(f"UPDATE `fsm_{order.name}` SET data = data WHERE instance_key = 'r-1'")
    last = store.history(order, "r-1")[-1]
    assert (last.event, last.to_state, last.metadata) == ("pay", "paid", {})
    assert fetch(raw, "SELECT @fsm_event AS e, @fsm_source AS s, @fsm_metadata AS m") == [
        {"e": None, "s": None, "m": '{"by": "dba"}'}
    ]
    raw.cursor().execute("SET @fsm_metadata = NULL")


def test_store_send_calls_fire_without_options_and_send_v5_with_any(store: Store, order: Machine, raw: Any) -> None:
    """Which procedure Store.send calls: without fire_v2 on the type, a send with nothing but key
    and event fails and one with any option goes through."""
    store.create(order, "p-1")
    raw.cursor().execute(f"DROP PROCEDURE `fsm_{order.name}_fire_v2`")
    try:
        with pytest.raises(Exception) as caught:
            store.send(order, "p-1", "pay")
        assert "fire_v2" in str(caught.value) or "sync" in str(caught.value), caught.value
        assert store.send(order, "p-1", "pay", metadata={"via": "send_v5"}).to_state == "paid"
        assert store.send(order, "p-1", "ship", handler="h").to_state == "shipped"
    finally:
        store.sync(order.name)
    assert store.send(order, "p-1", "deliver").to_state == "delivered"


def test_fire_v2_leaves_the_documented_results_set(store: Store, order: Machine, raw: Any) -> None:
    """After fire_v2, @fsm_last_transition_id and @fsm_last_status are those of its transition
    (docs/sql.md), as after any other; its result row is read from @fsm_last."""
    store.create(order, "l-1")
    (row,) = fetch(raw, f"CALL `fsm_{order.name}_fire_v2`('l-1', 'pay')")
    last = store.history(order, "l-1")[-1]
    assert (row["transition_id"], row["from_state"], row["to_state"], row["version"], row["status"]) == (
        last.id,
        "new",
        "paid",
        2,
        "running",
    )
    assert row["instance_id"] == store.get(order, "l-1").id
    assert fetch(raw, "SELECT @fsm_last_transition_id AS t, @fsm_last_status AS s") == [{"t": last.id, "s": "running"}]


def test_the_counters_moved_by_one_update_count_as_group_by(store: Store, order: Machine, raw: Any) -> None:
    """The transition trigger (bu_v12 and later) moves the two counter rows of a transition with one UPDATE; the first move into a
    state in a shard finds a row missing, undoes the UPDATE and inserts both. Instances spread
    over every shard, moved by fire_v2, send_v5 and a raw UPDATE: the counters stay exact."""
    keys = [f"g-{i}" for i in range(40)]
    for key in keys:
        store.create(order, key)
    for i, key in enumerate(keys):
        if i % 3 == 0:
            store.send(order, key, "pay")  # fire_v2
        elif i % 3 == 1:
            store.send(order, key, "pay", metadata={"i": i})  # send_v5
        else:
            raw.cursor().execute(
                f"UPDATE `fsm_{order.name}` SET current_state = 'paid' WHERE instance_key = %s", (key,)
            )
    for key in keys[::2]:
        store.send(order, key, "ship")
    by_group = fetch(
        raw,
        f"SELECT current_state AS state, id % 16 AS shard, COUNT(*) AS n FROM `fsm_{order.name}` "
        "GROUP BY current_state, id % 16",
    )
    counted = fetch(raw, "SELECT state, shard, instances AS n FROM fsm_state_counts WHERE machine = %s", (order.name,))
    assert {(r["state"], r["shard"]): r["n"] for r in by_group} == {
        (r["state"], r["shard"]): r["n"] for r in counted if r["n"]
    }
    assert len({r["shard"] for r in by_group}) == 16  # every shard's first moves took the INSERT
    assert store.counts(order) == {"paid": 20, "shipped": 20}


# -- processes -----------------------------------------------------------------------------


def fire_worker(dsn: str, machine: str, fire: str, keys: list[str], worker: int, barrier: Any, out: Any) -> None:
    """Every worker fires ``flip`` on each new key at the same moment (the first creates it),
    then 40 flips on the shared key ``hot``; with plain PyMySQL CALLs, one connection each."""
    report: dict[str, Any] = {"worker": worker, "rows": [], "refused": [], "error": None}
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        barrier.wait(timeout=60)
        for key in [*keys, *["hot"] * 40]:
            try:
                with conn.cursor(pymysql.cursors.DictCursor) as cur:
                    cur.execute(f"CALL `fsm_{machine}_{fire}`(%s, 'flip')", (key,))
                    row = cur.fetchone()
                    while cur.nextset():
                        pass
                report["rows"].append((key, row["version"], row["created"], row["from_state"], row["to_state"]))
            except pymysql.err.MySQLError as exc:
                report["refused"].append((key, int(exc.args[0])))
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        conn.close()
        out.put(report)


@each_fire
def test_processes_firing_new_and_shared_keys_keep_every_invariant(store: Store, dsn: str, raw: Any, fire: str) -> None:
    machine = Machine(
        name=unique("fire"), states=["a", "b"], start=["a"], transitions=[("flip", "a", "b"), ("flip", "b", "a")]
    )
    store.define(machine)
    store.create(machine, "hot")
    keys = [f"n-{i}" for i in range(5)]
    reports = run_processes(fire_worker, lambda w: (dsn, machine.name, fire, keys, w))
    rows = [row for r in reports for row in r["rows"]]
    refused = [row for r in reports for row in r["refused"]]
    assert {errno for _, errno in refused} <= {1213}, refused  # a deadlock is the only refusal (Store calls again)
    assert len(rows) + len(refused) == 8 * (len(keys) + 40)  # every call answered
    for key in [*keys, "hot"]:
        acks = [row for row in rows if row[0] == key]
        history = store.history(machine, key)
        # each acknowledged call is one history row with its own version, created once
        assert sorted(a[1] for a in acks) == list(range(2, 2 + len(acks))) == [h.sort_key for h in history[1:]]
        assert sum(a[2] for a in acks) == (1 if key != "hot" else 0), key
        assert [h.most_recent for h in history].count(True) == 1
        assert all(h.from_state == p.to_state for p, h in itertools.pairwise(history))
        assert store.get(machine, key).version == len(history)
    assert len(rows) > len(refused)  # the race was run: most calls went through
    counts = store.counts(machine)
    assert {s: n for s, n in counts.items() if n} == Counter(store.get(machine, k).state for k in [*keys, "hot"])
