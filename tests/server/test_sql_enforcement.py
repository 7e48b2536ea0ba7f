"""The database enforces the machine for every writer: raw SQL and the DBA procedures."""

from __future__ import annotations

import json
from typing import Any

import pymysql
import pytest
from helpers.common import unique

from pyfsm import Machine, Store, TransitionNotAllowed, UnknownInstance
from pyfsm.db import parse_dsn
from pyfsm.errors import SIGNALLED, from_mysql_error


def run(raw: Any, sql: str, args: tuple[Any, ...] | None = None) -> list[dict[str, Any]]:
    """Execute like a DBA: one statement, all result sets drained, first one returned."""
    cur = raw.cursor(pymysql.cursors.DictCursor)
    cur.execute(sql, args)
    rows = list(cur.fetchall())
    while cur.nextset():
        pass
    return rows


def errno_of(raw: Any, sql: str, args: tuple[Any, ...] | None = None) -> int:
    with pytest.raises(pymysql.err.MySQLError) as info:
        run(raw, sql, args)
    return int(info.value.args[0])


def history(raw: Any, machine: str, key: str) -> list[dict[str, Any]]:
    return run(
        raw,
        f"SELECT h.* FROM `fsm_{machine}_transitions` h JOIN `fsm_{machine}` i ON i.id = h.instance_id "
        "WHERE i.instance_key = %s ORDER BY h.sort_key",
        (key,),
    )


def test_raw_update_allowed_is_recorded_like_a_call(store: Store, order: Machine, raw: Any) -> None:
    store.create(order, "u1")
    run(raw, f"UPDATE `fsm_{order.name}` SET current_state = 'paid' WHERE instance_key = 'u1'")
    inst = store.get(order, "u1")
    assert (inst.state, inst.version) == ("paid", 2)
    rows = history(raw, order.name, "u1")
    assert [(r["event"], r["from_state"], r["to_state"], r["most_recent"], r["source"]) for r in rows] == [
        (None, None, "new", None, "procedure"),
        ("pay", "new", "paid", 1, "update"),
    ]


def test_raw_update_not_allowed_is_rejected(store: Store, order: Machine, raw: Any) -> None:
    store.create(order, "u2")
    assert (
        errno_of(raw, f"UPDATE `fsm_{order.name}` SET current_state = 'delivered' WHERE instance_key = 'u2'") == 31005
    )
    assert errno_of(raw, f"UPDATE `fsm_{order.name}` SET current_state = 'nonsense' WHERE instance_key = 'u2'") == 31005
    assert store.get(order, "u2").state == "new" and len(history(raw, order.name, "u2")) == 1


def test_raw_update_with_ambiguous_event_needs_fsm_event(store: Store, raw: Any) -> None:
    machine = Machine(
        name=unique("ambig"),
        states=["a", "b"],
        start=["a"],
        transitions=[("go", "a", "b"), ("jump", "a", "b"), ("back", "b", "a")],
    )
    store.define(machine)
    store.create(machine, "k")
    sql = f"UPDATE `fsm_{machine.name}` SET current_state = 'b' WHERE instance_key = 'k'"
    assert errno_of(raw, sql) == 31006
    run(raw, "SET @fsm_event = 'jump', @fsm_metadata = '{\"ticket\": 42}'")
    run(raw, sql)
    run(raw, "SET @fsm_event = NULL, @fsm_metadata = NULL")
    last = history(raw, machine.name, "k")[-1]
    assert last["event"] == "jump" and json.loads(last["metadata"]) == {"ticket": 42}


def test_raw_update_of_other_columns_bumps_version_only(store: Store, order: Machine, raw: Any) -> None:
    store.create(order, "u3")
    run(raw, f"UPDATE `fsm_{order.name}` SET data = '{{\"note\": 1}}', version = 99 WHERE instance_key = 'u3'")
    inst = store.get(order, "u3")
    assert (inst.version, inst.data, inst.state) == (2, {"note": 1}, "new")
    assert len(history(raw, order.name, "u3")) == 1
    assert errno_of(raw, f"UPDATE `fsm_{order.name}` SET data = '[1]' WHERE instance_key = 'u3'") == 31008
    assert errno_of(raw, f"UPDATE `fsm_{order.name}` SET instance_key = 'x' WHERE instance_key = 'u3'") == 31013
    assert errno_of(raw, f"UPDATE `fsm_{order.name}` SET status = 'bogus' WHERE instance_key = 'u3'") == 31009


def test_the_previous_history_row_is_the_last_by_sort_key_whatever_the_version_says(
    store: Store, order: Machine, raw: Any
) -> None:
    """The transition trigger finds the row whose most_recent it turns off through (instance_id,
    sort_key) (bu_v13): the instance's last row, which is not at sort_key = version once a write
    that is no transition has bumped the version. Each writer's transitions, a raw UPDATE's and
    Store.send's, between such writes: one most recent row, the last, and every earlier row
    closed when the next began."""
    store.create(order, "s1")
    steps = [
        ("data", '{"note": 1}'),
        ("send", "pay"),
        ("data", '{"note": 2}'),
        ("data", '{"note": 3}'),
        ("raw", "shipped"),
        ("data", '{"note": 4}'),
        ("send", "deliver"),
    ]
    for kind, value in steps:
        if kind == "data":
            run(raw, f"UPDATE `fsm_{order.name}` SET data = %s WHERE instance_key = 's1'", (value,))
        elif kind == "raw":
            run(raw, f"UPDATE `fsm_{order.name}` SET current_state = %s WHERE instance_key = 's1'", (value,))
        else:
            store.send(order, "s1", value)
    inst = store.get(order, "s1")
    assert (inst.state, inst.version) == ("delivered", 8)
    rows = history(raw, order.name, "s1")
    assert [(r["to_state"], r["sort_key"], r["most_recent"]) for r in rows] == [
        ("new", 1, None),
        ("paid", 3, None),
        ("shipped", 6, None),
        ("delivered", 8, 1),
    ]
    assert [r["left_at"] for r in rows[:-1]] == [r["created_at"] for r in rows[1:]]
    assert rows[-1]["left_at"] is None


def test_paused_instance_accepts_no_event(store: Store, order: Machine, raw: Any) -> None:
    store.create(order, "pz")
    run(raw, f"UPDATE `fsm_{order.name}` SET status = 'paused' WHERE instance_key = 'pz'")
    with pytest.raises(Exception) as info:
        store.send(order, "pz", "pay")
    assert type(info.value).__name__ == "InstancePaused" and info.value.errno == 31011  # type: ignore[attr-defined]
    assert store.get(order, "pz").state == "new"


def test_raw_insert_starts_in_a_start_state(store: Store, order: Machine, raw: Any) -> None:
    run(raw, f"INSERT INTO `fsm_{order.name}` (instance_key, lookup_key) VALUES ('ins1', 'acct')")
    inst = store.get(order, "ins1")
    assert (inst.state, inst.version, inst.data, inst.definition_version) == ("new", 1, {}, 1)
    assert (
        errno_of(raw, f"INSERT INTO `fsm_{order.name}` (instance_key, current_state) VALUES ('ins2', 'paid')") == 31005
    )


def test_history_cannot_be_updated_or_deleted(store: Store, order: Machine, raw: Any) -> None:
    store.send(order, "h1", "pay")
    table = f"fsm_{order.name}_transitions"
    for sql in (
        f"UPDATE `{table}` SET event = 'cancel'",
        f"UPDATE `{table}` SET most_recent = NULL",
        f"UPDATE `{table}` SET created_at = created_at - INTERVAL 1 DAY",
        f"DELETE FROM `{table}`",
    ):
        assert errno_of(raw, sql) == 31012, sql
    assert len(history(raw, order.name, "h1")) == 2


def test_no_column_of_a_history_row_changes_without_pyfsm(store: Store, order: Machine, raw: Any) -> None:
    """Every column of the latest and of an older history row, changed by a raw UPDATE with no
    guard, with a guard left behind by an earlier transition and with another instance's: each
    refused with 31012, nothing changed. (hbu_v4 let `SET most_recent = NULL WHERE most_recent =
    1` through with no guard: NULL <=> NULL.) Transitions still flip the flag afterwards."""
    from helpers.history_guard import refused_updates

    store.send(order, "g1", "pay")
    store.send(order, "g1", "ship")
    other = store.send(order, "g2", "pay")
    mine = store.get(order, "g1")
    assert refused_updates(raw, order.name, mine.id, other.instance_id) == []
    assert store.send(order, "g1", "deliver").sort_key == 4
    assert [(h["sort_key"], h["most_recent"]) for h in history(raw, order.name, "g1")] == [
        (1, None),
        (2, None),
        (3, None),
        (4, 1),
    ]


def test_history_rows_with_nulls_cannot_be_forged(store: Store, order: Machine, raw: Any) -> None:
    """With no guard, a row whose created_at or instance_id is NULL when the trigger runs is
    refused too (hbi_v2 compared NULL <=> NULL): under a non-strict sql_mode a multi-row INSERT
    would store it with a zero date."""
    table = f"fsm_{order.name}_transitions"
    inst = store.send(order, "n1", "pay")
    run(raw, "SET SESSION sql_mode = ''")
    for instance_id, created_at in ((inst.instance_id, "NULL"), ("NULL", "NOW()"), ("NULL", "NULL")):
        rows = ", ".join(f"({instance_id}, {9 + n}, 'x', '{{}}', '{{}}', 1, 'x', {created_at})" for n in range(2))
        assert (
            errno_of(
                raw,
                f"INSERT INTO `{table}` (instance_id, sort_key, to_state, data_after, metadata, "
                f"definition_version, source, created_at) VALUES {rows}",
            )
            == 31012
        ), (instance_id, created_at)
    assert len(run(raw, f"SELECT id FROM `{table}` WHERE sort_key >= 9")) == 0
    assert store.send(order, "n1", "ship").sort_key == 3


def test_topic_writes_outbox_rows_and_no_topic_writes_none(store: Store, raw: Any) -> None:
    with_topic = Machine(
        name=unique("evt"), states=["a", "b"], start=["a"], transitions=[("go", "a", "b")], topic="pyfsm.events"
    )
    without = Machine(name=unique("quiet"), states=["a", "b"], start=["a"], transitions=[("go", "a", "b")])
    store.define(with_topic)
    store.define(without)
    sent = store.send(with_topic, "e1", "go", metadata={"m": 1})
    store.send(without, "q1", "go")
    rows = run(raw, "SELECT * FROM fsm_outbox WHERE machine IN (%s, %s) ORDER BY id", (with_topic.name, without.name))
    assert [(r["machine"], r["event"], r["to_state"], r["topic"]) for r in rows] == [
        (with_topic.name, None, "a", "pyfsm.events"),
        (with_topic.name, "go", "b", "pyfsm.events"),
    ]
    assert rows[1]["transition_id"] == sent.transition_id and json.loads(rows[1]["metadata"]) == {"m": 1}


def test_failed_transition_writes_no_outbox_row(store: Store, raw: Any) -> None:
    machine = Machine(name=unique("evt"), states=["a", "b"], start=["a"], transitions=[("go", "a", "b")], topic="t")
    store.define(machine)
    store.send(machine, "f1", "go")
    before = run(raw, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE machine = %s", (machine.name,))[0]["n"]
    with pytest.raises(Exception, match="not allowed"):
        store.send(machine, "f1", "go")
    assert run(raw, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE machine = %s", (machine.name,))[0]["n"] == before


def test_dba_procedures_give_the_same_checks(store: Store, raw: Any) -> None:
    name = unique("door")
    definition = json.dumps(
        {
            "states": ["open", "closed"],
            "start": ["open"],
            "transitions": [
                {"event": "close", "from": ["open"], "to": "closed"},
                {"event": "open", "from": ["closed"], "to": "open"},
            ],
        }
    )
    first = run(raw, "CALL fsm_define_v1(%s, %s)", (name, definition))[0]
    assert (first["version"], first["changed"], first["tables_ready"]) == (1, 1, 0)
    assert run(raw, "CALL fsm_define_v1(%s, %s)", (name, definition))[0]["changed"] == 0
    assert errno_of(raw, "CALL fsm_send_v1(%s, 'd1', 'close', NULL, NULL, NULL, NULL, NULL, NULL)", (name,)) == 31002
    store.sync(name)
    sent = run(
        raw, "CALL fsm_send_v1(%s, 'd1', 'close', NULL, '{\"by\": \"dba\"}', NULL, 'dba-1', NULL, NULL)", (name,)
    )
    assert (sent[0]["to_state"], sent[0]["created"]) == ("closed", 1)
    assert errno_of(raw, "CALL fsm_send_v1(%s, 'd1', 'close', NULL, NULL, NULL, NULL, NULL, NULL)", (name,)) == 31005
    assert run(raw, "CALL fsm_get_v1(%s, 'd1')", (name,))[0]["current_state"] == "closed"
    assert [r["to_state"] for r in run(raw, "CALL fsm_history_v1(%s, 'd1')", (name,))] == ["open", "closed"]
    assert run(raw, "CALL fsm_counts_v1(%s)", (name,)) == [{"state": "closed", "instances": 1}]
    assert [r["instance_key"] for r in run(raw, "CALL fsm_in_state_v1(%s, 'closed', 0, 10)", (name,))] == ["d1"]
    created = run(raw, "CALL fsm_create_v1(%s, 'd2', NULL, NULL, NULL, NULL, 'acct')", (name,))
    assert created[0]["to_state"] == "open"
    assert run(raw, "CALL fsm_definition_v1(%s, NULL)", (name,))[0]["version"] == 1
    assert errno_of(raw, "CALL fsm_get_v1(%s, 'nope')", (name,)) == 31003
    # every user variable the procedures use is cleared again
    assert run(raw, "SELECT @fsm_event AS e, @fsm_metadata AS m, @fsm_request_id AS r, @fsm_guard AS f") == [
        {"e": None, "m": None, "r": None, "f": None}
    ]


def test_dba_define_rejects_bad_definitions(raw: Any) -> None:
    bad = {
        "not json": "{oops",
        "no states": '{"states": [], "start": ["a"], "transitions": []}',
        "unknown start": '{"states": ["a"], "start": ["b"], "transitions": []}',
        "unknown target": '{"states": ["a"], "start": ["a"], "transitions": [{"event": "e", "from": ["a"], "to": "z"}]}',
        "duplicate edge": '{"states": ["a", "b"], "start": ["a"], "transitions": ['
        '{"event": "e", "from": ["a"], "to": "b"}, {"event": "e", "from": ["a"], "to": "a"}]}',
        "bad state name": '{"states": ["A`; DROP TABLE x; --"], "start": ["a"], "transitions": []}',
        "final with exit": '{"states": ["a", "b"], "start": ["a"], "final": ["b"], '
        '"transitions": [{"event": "e", "from": ["b"], "to": "a"}]}',
        "long name": '{"states": ["' + "a" * 300 + '"], "start": ["a"], "transitions": []}',
        "bad topic": '{"states": ["a"], "start": ["a"], "transitions": [], "topic": "no spaces"}',
    }
    name = unique("baddef")
    for label, definition in bad.items():
        assert errno_of(raw, "CALL fsm_define_v1(%s, %s)", (name, definition)) == 31001, label
    assert run(raw, "SELECT COUNT(*) AS n FROM fsm_machines WHERE machine = %s", (name,))[0]["n"] == 0
    assert errno_of(raw, "CALL fsm_define_v1(%s, %s)", ("x`; DROP TABLE fsm_rules; --", "{}")) == 31009
    assert errno_of(raw, "CALL fsm_define_v1('machines', '{}')") == 31009
    assert run(raw, "SHOW TABLES LIKE 'fsm_rules'")


def test_signalled_errors_map_to_classes(store: Store, order: Machine, raw: Any) -> None:
    with pytest.raises(pymysql.err.MySQLError) as info:
        run(raw, f"CALL `fsm_{order.name}_send_v1`('z', 'ship', NULL, NULL, NULL, NULL, NULL, NULL)")
    err = from_mysql_error(info.value)
    assert err is not None and type(err) is SIGNALLED[31003]


def test_raw_update_writes_outbox_like_a_call(store: Store, raw: Any) -> None:
    machine = Machine(name=unique("evt"), states=["a", "b"], start=["a"], transitions=[("go", "a", "b")], topic="t")
    store.define(machine)
    run(raw, f"INSERT INTO `fsm_{machine.name}` (instance_key) VALUES ('raw1')")
    run(raw, f"UPDATE `fsm_{machine.name}` SET current_state = 'b' WHERE instance_key = 'raw1'")
    rows = run(
        raw,
        "SELECT event, from_state, to_state, sort_key, instance_key, transition_id FROM fsm_outbox "
        "WHERE machine = %s ORDER BY id",
        (machine.name,),
    )
    assert [(r["event"], r["from_state"], r["to_state"], r["sort_key"]) for r in rows] == [
        (None, None, "a", 1),
        ("go", "a", "b", 2),
    ]
    last = history(raw, machine.name, "raw1")[-1]
    assert rows[-1]["transition_id"] == last["id"] and last["source"] == "update"


def test_instances_cannot_be_deleted_or_replaced(store: Store, order: Machine, raw: Any) -> None:
    store.send(order, "del1", "pay")
    assert errno_of(raw, f"DELETE FROM `fsm_{order.name}` WHERE instance_key = 'del1'") == 31017
    assert errno_of(raw, f"REPLACE INTO `fsm_{order.name}` (instance_key) VALUES ('del1')") == 31017
    inst = store.get(order, "del1")
    assert (inst.state, inst.version) == ("paid", 2) and len(store.history(order, "del1")) == 2


def test_history_cannot_be_forged(store: Store, order: Machine, raw: Any) -> None:
    store.create(order, "forge")
    inst = store.get(order, "forge")
    table = f"fsm_{order.name}_transitions"
    forged = (
        f"INSERT INTO `{table}` (instance_id, sort_key, event, from_state, to_state, data_after, metadata, "
        "definition_version, source, created_at) VALUES (%s, %s, 'pay', 'new', 'paid', '{}', '{}', 1, 'x', NOW())"
    )
    assert errno_of(raw, forged, (inst.id, inst.version + 1)) == 31012
    assert errno_of(raw, f"REPLACE INTO `{table}` SELECT * FROM `{table}` WHERE instance_id = %s", (inst.id,)) == 31012
    assert store.send(order, "forge", "pay").sort_key == 2  # the instance is not blocked


def test_trailing_spaces_cannot_sneak_past_padding(store: Store, order: Machine, raw: Any) -> None:
    store.create(order, "pad")
    run(raw, f"UPDATE `fsm_{order.name}` SET current_state = 'paid   ' WHERE instance_key = 'pad'")
    assert store.get(order, "pad").state == "paid"  # the rule's spelling is stored
    assert history(raw, order.name, "pad")[-1]["to_state"] == "paid"
    assert errno_of(raw, f"UPDATE `fsm_{order.name}` SET instance_key = 'pad  ' WHERE instance_key = 'pad'") == 31013
    assert errno_of(raw, f"INSERT INTO `fsm_{order.name}` (instance_key) VALUES ('spaced ')") == 31009
    assert errno_of(raw, f"CALL `fsm_{order.name}_get_v1`('pad ')") == 31009
    spaced = '{"states": ["open", "closed"], "start": ["open "], "transitions": []}'
    assert errno_of(raw, "CALL fsm_define_v1(%s, %s)", (unique("pad"), spaced)) == 31001


def test_kafka_topic_cannot_be_switched_off(store: Store, raw: Any) -> None:
    machine = Machine(name=unique("evt"), states=["a", "b"], start=["a"], transitions=[("go", "a", "b")], topic="t")
    store.define(machine)
    store.create(machine, "kt")
    assert errno_of(raw, f"UPDATE `fsm_{machine.name}` SET kafka_topic = NULL WHERE instance_key = 'kt'") == 31013


def test_call_inside_an_open_transaction_leaves_it_alone(store: Store, order: Machine, dsn: str) -> None:
    conn = pymysql.connect(**{**parse_dsn(dsn).connect_kwargs(), "autocommit": False})
    try:
        cur = conn.cursor()
        cur.execute("CREATE TABLE IF NOT EXISTS caller_work (id INT PRIMARY KEY) ENGINE=InnoDB")
        conn.commit()
        cur.execute("INSERT INTO caller_work VALUES (1)")  # the caller's uncommitted work
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute(f"CALL `fsm_{order.name}_send_v1`('tx1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)")
        assert info.value.args[0] == 31016
        cur.execute("SELECT COUNT(*) FROM caller_work")
        assert cur.fetchone() == (1,)  # still there: nothing was rolled back
        conn.rollback()
    finally:
        conn.close()
    with pytest.raises(UnknownInstance):
        store.get(order, "tx1")


def test_errors_stay_readable_in_a_latin1_database(make_database) -> None:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_latin1")
    conn = pymysql.connect(**settings.connect_kwargs())
    conn.cursor().execute(f"ALTER DATABASE `{settings.database}` CHARACTER SET latin1 COLLATE latin1_swedish_ci")
    conn.close()
    with Store(settings.dsn()) as store:
        store.migrate()
        store.define(
            Machine(name="door", states=["open", "shut"], start=["open"], transitions=[("shut", "open", "shut")])
        )
        with pytest.raises(UnknownInstance, match="ключ"):
            store.get("door", "ключ 🙂")
        store.send("door", "ключ", "shut")
        with pytest.raises(TransitionNotAllowed):
            store.send("door", "ключ", "shut")


@pytest.mark.parametrize("waiter", ["send", "raw"])
def test_a_transition_that_waited_for_the_row_is_stamped_after_the_one_it_waited_for(  # type: ignore[no-untyped-def]
    store, order, dsn, waiter: str
) -> None:
    """A statement's UTC_TIMESTAMP() is when it began, before its wait for the row lock: the
    transition that waited must still not be stamped before the one that held the row, for a
    Store.send (one UPDATE) and a raw UPDATE alike, so history's times follow sort_key."""
    import threading
    import time

    from helpers.common import fetch

    key = f"wait-{waiter}"
    store.create(order, key)
    holder = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    other = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        holder.cursor().execute("SET time_zone = '+00:00'")
        holder.begin()
        holder.cursor().execute(f"SELECT id FROM `fsm_{order.name}` WHERE instance_key = %s FOR UPDATE", (key,))

        def wait() -> None:
            if waiter == "send":
                store.send(order, key, "ship")  # blocks on the row until the holder commits
            else:
                with other.cursor() as cur:
                    cur.execute("SET time_zone = '+00:00'")
                    cur.execute("SET @fsm_event = 'ship'")
                    cur.execute(f"UPDATE `fsm_{order.name}` SET data = data WHERE instance_key = %s", (key,))
                    cur.execute("SET @fsm_event = NULL")

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.3)  # the waiter's statement has begun and waits for the row
        holder.cursor().execute("SET @fsm_event = 'pay'")
        holder.cursor().execute(f"UPDATE `fsm_{order.name}` SET data = data WHERE instance_key = %s", (key,))
        holder.commit()
        thread.join(timeout=30)
        assert not thread.is_alive()
        rows = fetch(
            holder,
            f"SELECT event, created_at, left_at FROM `fsm_{order.name}_transitions` "
            f"WHERE instance_id = (SELECT id FROM `fsm_{order.name}` WHERE instance_key = %s) "
            "ORDER BY sort_key",
            (key,),
        )
    finally:
        holder.close()
        other.close()
    assert [r["event"] for r in rows] == [None, "pay", "ship"]
    assert rows[1]["created_at"] <= rows[2]["created_at"], rows
    assert rows[1]["left_at"] == rows[2]["created_at"], rows
