"""Machines on the application's own tables (issue 48, docs/own-tables.md): attach, adopt, every
raw SQL writer, detach and attach again, the table changing under pyfsm, and bad input.

Each test makes its own table in the session's database and checks the raw tables: the
application's, the type's instance table and history, fsm_state_counts, fsm_attachments and
information_schema.TRIGGERS. The ORMs are driven in test_attach_orms.py, the CLI in
test_cli_attach.py.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any

import pymysql
import pytest
from helpers.common import order_machine, unique

from pyfsm import (
    AttachedRowMissing,
    AttachmentConflict,
    DeleteRefused,
    ImmutableColumn,
    KeyUnsupported,
    Machine,
    NotAttached,
    StateColumnUnsupported,
    Store,
    TableUnsupported,
    TransitionNotAllowed,
    TriggerNameTaken,
    UnknownStateValue,
)
from pyfsm.db import parse_dsn


def q(cur: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    cur.execute(sql, args)
    return list(cur.fetchall())


def history(cur: Any, machine: str, key: str) -> list[tuple[Any, ...]]:
    """(sort_key, most_recent, event, from_state, to_state, source) of an instance, in order."""
    return q(
        cur,
        f"SELECT t.sort_key, t.most_recent, t.event, t.from_state, t.to_state, t.source "
        f"FROM `fsm_{machine}_transitions` t JOIN `fsm_{machine}` i ON i.id = t.instance_id "
        f"WHERE i.instance_key = %s ORDER BY t.sort_key",
        (key,),
    )


def counts(cur: Any, machine: str) -> dict[str, int]:
    rows = q(cur, "SELECT state, SUM(instances) FROM fsm_state_counts WHERE machine = %s GROUP BY state", (machine,))
    return {state: int(n) for state, n in rows if int(n)}


def grouped(cur: Any, machine: str) -> dict[str, int]:
    return {s: int(n) for s, n in q(cur, f"SELECT current_state, COUNT(*) FROM `fsm_{machine}` GROUP BY 1")}


def snapshot(cur: Any, table: str) -> tuple[Any, ...]:
    """What a refused attach must leave as it was: the triggers, the catalogue, the table."""
    return (
        q(
            cur,
            "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_STATEMENT FROM information_schema.TRIGGERS "
            "WHERE TRIGGER_SCHEMA = DATABASE() ORDER BY 1",
        ),
        q(cur, "SELECT * FROM fsm_attachments ORDER BY machine"),
        q(
            cur,
            "SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() "
            "AND ROUTINE_NAME LIKE '%%adopt%%' ORDER BY 1",
        ),
        q(
            cur,
            "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (table,),
        ),
    )


@pytest.fixture
def cur(raw: pymysql.connections.Connection) -> Any:
    raw.autocommit(True)
    return raw.cursor()


@pytest.fixture
def orders(store: Store, cur: Any) -> tuple[str, str]:
    """A defined type and a table `<type>_t` of its own with rows in 'new', 'paid' and 'shipped'."""
    machine = order_machine()
    store.define(machine)
    table = f"{machine.name}_t"
    cur.execute(
        f"CREATE TABLE `{table}` (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, status VARCHAR(32) NULL, "
        "note VARCHAR(40) NULL) ENGINE=InnoDB"
    )
    cur.execute(f"INSERT INTO `{table}` (status) VALUES ('new'), ('paid'), ('shipped')")
    return machine.name, table


def attached(store: Store, orders: tuple[str, str], **options: Any) -> tuple[str, str]:
    name, table = orders
    store.attach(name, table=table, key="id", state="status", **options)
    store.adopt(name)
    return name, table


# -- item 1: attach ---------------------------------------------------------------------------


def test_attach_is_checked_recorded_and_a_second_attach_changes_nothing(store: Store, cur: Any, orders) -> None:  # type: ignore[no-untyped-def]
    name, table = orders
    before = snapshot(cur, table)
    plan = store.attach_plan(name, table=table, key="id", state="status")
    assert snapshot(cur, table) == before  # the dry run wrote nothing
    assert [(v.state, v.rows, v.known) for v in plan.values] == [
        ("new", 1, True),
        ("paid", 1, True),
        ("shipped", 1, True),
    ]
    first = store.attach(name, table=table, key="id", state="status")
    assert (first.table, first.key, first.state, first.key_kind, first.installed) == (
        table,
        "id",
        "status",
        "integer",
        True,
    )
    triggers = {t for (t, _, _) in snapshot(cur, table)[0] if t.startswith(f"fsm_{name}_")}
    assert {
        f"fsm_{name}_{s}_v1" for s in ("sbi", "sai", "sbu", "sbd", "au_subject", "ai_subject", "bi_adopt", "bi_adopted")
    } <= triggers
    after = snapshot(cur, table)
    assert store.attach(name, table=table, key="id", state="status") == first
    assert snapshot(cur, table) == after  # the second attach changed nothing


def test_existing_rows_are_adopted_in_batches_with_a_first_history_row(store: Store, cur: Any, orders) -> None:  # type: ignore[no-untyped-def]
    name, table = orders
    cur.execute(f"INSERT INTO `{table}` (status) VALUES ('new'), ('bogus'), (NULL), ('delivered'), ('paid')")
    store.attach(name, table=table, key="id", state="status")
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{name}`") == [(0,)]  # attaching adopts nothing by itself
    seen = []
    report = store.adopt(name, batch=2, progress=seen.append)
    assert (report.seen, report.adopted, report.unknown, report.first_unknown, report.batches, report.done) == (
        8,
        6,
        2,
        "5",
        4,
        True,
    )
    assert [r.seen for r in seen] == [2, 4, 6, 8]
    assert history(cur, name, "4") == [(1, 1, None, None, "new", "adopt")]
    assert q(cur, f"SELECT status FROM `fsm_{name}` WHERE instance_key = '7'") == [("completed",)]  # a final state
    assert counts(cur, name) == grouped(cur, name) == {"new": 2, "paid": 2, "shipped": 1, "delivered": 1}
    again = store.adopt(name, batch=3)
    assert (again.adopted, again.unknown) == (0, 2)  # nothing twice; the unknown rows stay unknown
    assert store.attachment(name).adopted is False  # two rows are left
    with pytest.raises(pymysql.err.OperationalError) as unknown:
        cur.execute(f"UPDATE `{table}` SET status = 'other' WHERE id = 5")
    assert unknown.value.args[0] == UnknownStateValue.errno
    cur.execute(f"UPDATE `{table}` SET status = 'paid' WHERE id = 5")  # put right: adopted there
    assert (
        q(
            cur,
            f"SELECT metadata FROM `fsm_{name}_transitions` t JOIN `fsm_{name}` i ON i.id = t.instance_id "
            "WHERE i.instance_key = '5'",
        )[0][0].replace(" ", "")
        == '{"adopted_from":"bogus"}'
    )
    cur.execute(f"UPDATE `{table}` SET status = 'new' WHERE id = 6")
    assert store.adopt(name).unknown == 0 and store.attachment(name).adopted is True


def _adopt_in_child(dsn: str, name: str) -> None:
    with Store(dsn) as store:
        store.adopt(name, batch=50)


def test_an_adoption_killed_part_way_leaves_rows_whole_and_a_new_run_finishes(
    store: Store, cur: Any, dsn: str, orders
) -> None:  # type: ignore[no-untyped-def]
    name, table = orders
    # 3000 rows: ten times 300 (MySQL stops a recursive CTE at 1000 levels by default)
    for _ in range(10):
        cur.execute(
            f"INSERT INTO `{table}` (status) WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            "WHERE i < 300) SELECT ELT(1 + i % 3, 'new', 'paid', 'shipped') FROM n"
        )
    store.attach(name, table=table, key="id", state="status")
    child = multiprocessing.get_context("spawn").Process(target=_adopt_in_child, args=(dsn, name))
    child.start()
    deadline = time.monotonic() + 60
    while q(cur, f"SELECT COUNT(*) FROM `fsm_{name}`")[0][0] < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    killed_at = q(cur, f"SELECT COUNT(*) FROM `fsm_{name}`")[0][0]
    assert 0 < killed_at < 3003  # killed part way
    # every adopted row whole: an instance, its one history row, counted
    assert q(
        cur,
        f"SELECT COUNT(*) FROM `fsm_{name}` i LEFT JOIN `fsm_{name}_transitions` t ON t.instance_id = i.id "
        "WHERE t.id IS NULL",
    ) == [(0,)]
    assert counts(cur, name) == grouped(cur, name)
    report = store.adopt(name, batch=500)
    assert report.done and report.unknown == 0
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{name}`") == q(cur, f"SELECT COUNT(*) FROM `{table}`") == [(3003,)]
    assert counts(cur, name) == grouped(cur, name)
    assert q(
        cur,
        f"SELECT COUNT(*) FROM `{table}` s JOIN `fsm_{name}` i ON i.instance_key = s.id "
        "WHERE NOT (i.current_state <=> s.status)",
    ) == [(0,)]


# -- item 3: every raw SQL writer -------------------------------------------------------------


def test_raw_updates_are_checked_and_recorded(store: Store, cur: Any, orders) -> None:  # type: ignore[no-untyped-def]
    name, table = attached(store, orders)
    cur.execute(f"UPDATE `{table}` SET status = 'paid' WHERE id = 1")
    assert history(cur, name, "1")[-1] == (2, 1, "pay", "new", "paid", "update")
    with pytest.raises(pymysql.err.OperationalError) as refused:
        cur.execute(f"UPDATE `{table}` SET status = 'delivered' WHERE id = 1")
    assert refused.value.args[0] == TransitionNotAllowed.errno
    assert q(cur, f"SELECT status FROM `{table}` WHERE id = 1") == [("paid",)]
    assert len(history(cur, name, "1")) == 2
    # an UPDATE that leaves the state alone is no transition: no history, the instance untouched
    version = q(cur, f"SELECT version FROM `fsm_{name}` WHERE instance_key = '1'")
    cur.execute(f"UPDATE `{table}` SET note = 'gift' WHERE id = 1")
    assert len(history(cur, name, "1")) == 2
    assert q(cur, f"SELECT version FROM `fsm_{name}` WHERE instance_key = '1'") == version
    # @fsm_event names the event
    cur.execute("SET @fsm_event = 'cancel'")
    cur.execute(f"UPDATE `{table}` SET status = 'cancelled' WHERE id = 1")
    cur.execute("SET @fsm_event = NULL")
    assert history(cur, name, "1")[-1][2:5] == ("cancel", "paid", "cancelled")
    # the key cannot change
    with pytest.raises(pymysql.err.OperationalError) as key_changed:
        cur.execute(f"UPDATE `{table}` SET id = 99 WHERE id = 2")
    assert key_changed.value.args[0] == ImmutableColumn.errno


def test_a_multi_row_update_is_all_or_nothing(store: Store, cur: Any, orders) -> None:  # type: ignore[no-untyped-def]
    name, table = attached(store, orders)
    before = q(cur, f"SELECT COUNT(*) FROM `fsm_{name}_transitions`")
    with pytest.raises(pymysql.err.OperationalError) as refused:
        cur.execute(f"UPDATE `{table}` SET status = 'cancelled' ORDER BY id")  # 'shipped' cannot be cancelled
    assert refused.value.args[0] == TransitionNotAllowed.errno
    assert q(cur, f"SELECT status FROM `{table}` ORDER BY id") == [("new",), ("paid",), ("shipped",)]
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{name}_transitions`") == before
    cur.execute(f"UPDATE `{table}` SET status = 'cancelled' WHERE id IN (1, 2)")
    assert q(cur, f"SELECT status FROM `{table}` ORDER BY id") == [("cancelled",), ("cancelled",), ("shipped",)]
    assert counts(cur, name) == grouped(cur, name)


def test_inserts_enter_a_start_state_and_deletes_follow_the_policy(store: Store, cur: Any, orders) -> None:  # type: ignore[no-untyped-def]
    name, table = attached(store, orders)
    cur.execute(f"INSERT INTO `{table}` (status) VALUES (NULL)")  # NULL: the first start state
    new_id = cur.lastrowid
    assert q(cur, f"SELECT status FROM `{table}` WHERE id = %s", (new_id,)) == [("new",)]
    assert history(cur, name, str(new_id)) == [(1, 1, None, None, "new", "update")]
    with pytest.raises(pymysql.err.OperationalError) as refused:
        cur.execute(f"INSERT INTO `{table}` (status) VALUES ('paid')")
    assert refused.value.args[0] == TransitionNotAllowed.errno
    assert q(cur, f"SELECT COUNT(*) FROM `{table}`") == [(4,)]
    with pytest.raises(pymysql.err.OperationalError) as kept:
        cur.execute(f"DELETE FROM `{table}` WHERE id = 1")
    assert kept.value.args[0] == DeleteRefused.errno
    # on_delete 'allow': the row goes, its instance and history stay; pyfsm cannot move it any more
    store.attach(name, table=table, key="id", state="status", on_delete="allow")
    cur.execute(f"DELETE FROM `{table}` WHERE id = 1")
    assert len(history(cur, name, "1")) == 1
    with pytest.raises(AttachedRowMissing):
        store.send(name, "1", "pay")
    # Store.send cannot create an instance the table lacks
    with pytest.raises(AttachedRowMissing):
        store.send(name, "12345", "pay")
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{name}` WHERE instance_key = '12345'") == [(0,)]


def test_store_send_moves_the_tables_column(store: Store, cur: Any, orders) -> None:  # type: ignore[no-untyped-def]
    name, table = attached(store, orders)
    result = store.send(name, "2", "ship")
    assert (result.from_state, result.to_state) == ("paid", "shipped")
    assert q(cur, f"SELECT status FROM `{table}` WHERE id = 2") == [("shipped",)]
    assert history(cur, name, "2")[-1] == (2, 1, "ship", "paid", "shipped", "procedure")
    assert [e.event for e in store.allowed_events(name, "2")] == ["deliver"]


# -- item 5: detach, attach again ---------------------------------------------------------------


def test_detach_keeps_everything_and_attaching_again_continues_the_history(store: Store, cur: Any, orders) -> None:  # type: ignore[no-untyped-def]
    name, table = attached(store, orders)
    store.send(name, "1", "pay")
    detached = store.detach(name)
    assert detached is not None and not detached.installed
    assert not [t for (t, _, _) in snapshot(cur, table)[0] if t.startswith(f"fsm_{name}_s")]
    cur.execute(f"UPDATE `{table}` SET status = 'new' WHERE id = 1")  # unchecked while detached (refund is allowed)
    cur.execute(f"UPDATE `{table}` SET status = 'cancelled' WHERE id = 3")  # shipped -> cancelled: no rule
    with pytest.raises(NotAttached):
        store.adopt(name)
    store.attach(name, table=table, key="id", state="status")
    report = store.adopt(name)
    assert (report.moved, report.refused, report.first_refused) == (1, 1, "3")
    assert history(cur, name, "1")[-1] == (3, 1, "refund", "paid", "new", "update")
    assert history(cur, name, "3") == [(1, 1, None, None, "shipped", "adopt")]  # where its history ends


# -- item 6: the table changes under pyfsm ------------------------------------------------------


def test_added_columns_and_indexes_keep_it_working_and_two_types_share_a_table(store: Store, cur: Any, orders) -> None:  # type: ignore[no-untyped-def]
    name, table = attached(store, orders)
    cur.execute(f"ALTER TABLE `{table}` ADD COLUMN shipping VARCHAR(32) NULL, ADD INDEX by_note (note)")
    cur.execute(f"UPDATE `{table}` SET status = 'paid', note = 'x' WHERE id = 1")
    assert history(cur, name, "1")[-1][2:5] == ("pay", "new", "paid")
    # a second type on the second state column
    other = order_machine()
    store.define(other)
    cur.execute(f"UPDATE `{table}` SET shipping = 'new'")
    store.attach(other.name, table=table, key="id", state="shipping")
    assert store.adopt(other.name).adopted == 3
    cur.execute(f"UPDATE `{table}` SET shipping = 'paid' WHERE id = 2")
    store.send(name, "2", "ship")
    assert q(cur, f"SELECT status, shipping FROM `{table}` WHERE id = 2") == [("shipped", "paid")]
    assert history(cur, other.name, "2")[-1][2:5] == ("pay", "new", "paid")
    third = order_machine()
    store.define(third)
    with pytest.raises(AttachmentConflict):
        store.attach(third.name, table=table, key="id", state="shipping")


# -- item 8: bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, column",
    [
        ("odd `name`", "st`ate"),
        ('it\'s "quoted"', "with space"),
        ("select", "order"),
        ("Bestellungen_äöü", "Zustand_é"),
    ],
)
def test_any_names_are_attached_and_work(store: Store, cur: Any, table: str, column: str) -> None:
    machine = order_machine()
    store.define(machine)
    t, c = table.replace("`", "``"), column.replace("`", "``")
    cur.execute(f"CREATE TABLE `{t}_{machine.name}` (`k` INT PRIMARY KEY, `{c}` VARCHAR(20)) ENGINE=InnoDB")
    full = f"{table}_{machine.name}"
    cur.execute(f"INSERT INTO `{t}_{machine.name}` VALUES (1, 'new')")
    store.attach(machine.name, table=full, key="k", state=column)
    assert store.adopt(machine.name).adopted == 1
    cur.execute(f"UPDATE `{t}_{machine.name}` SET `{c}` = 'paid' WHERE k = 1")
    store.send(machine.name, "1", "ship")
    assert q(cur, f"SELECT `{c}` FROM `{t}_{machine.name}`") == [("shipped",)]


BAD_TABLES = [
    # (DDL making the table, table, key, state, the error)
    ("CREATE VIEW `{t}` AS SELECT 1 AS id, 'new' AS status", "{t}", "id", "status", TableUnsupported),
    (
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(20)) ENGINE=MyISAM",
        "{t}",
        "id",
        "status",
        TableUnsupported,
    ),
    ("CREATE TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(20))", "otherdb.{t}", "id", "status", TableUnsupported),
    ("CREATE TABLE `{t}` (id INT, status VARCHAR(20))", "{t}", "id", "status", KeyUnsupported),
    ("CREATE TABLE `{t}` (id INT NULL UNIQUE, status VARCHAR(20))", "{t}", "id", "status", KeyUnsupported),
    ("CREATE TABLE `{t}` (a INT, b INT, status VARCHAR(20), PRIMARY KEY (a, b))", "{t}", "a", "status", KeyUnsupported),
    ("CREATE TABLE `{t}` (id FLOAT PRIMARY KEY, status VARCHAR(20))", "{t}", "id", "status", KeyUnsupported),
    ("CREATE TABLE `{t}` (id INT PRIMARY KEY, j JSON, status VARCHAR(20))", "{t}", "j", "status", KeyUnsupported),
    (
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, s VARCHAR(20), status VARCHAR(20) AS (s) STORED)",
        "{t}",
        "id",
        "status",
        StateColumnUnsupported,
    ),
    (
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status ENUM('new', 'paid'))",
        "{t}",
        "id",
        "status",
        StateColumnUnsupported,
    ),
    ("CREATE TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(4))", "{t}", "id", "status", StateColumnUnsupported),
    ("CREATE TABLE `{t}` (id INT PRIMARY KEY, status INT)", "{t}", "id", "status", StateColumnUnsupported),
    ("CREATE TABLE `{t}` (id VARCHAR(20) PRIMARY KEY)", "{t}", "id", "id", StateColumnUnsupported),
]


@pytest.mark.parametrize("ddl, table, key, state, error", BAD_TABLES)
def test_a_refused_attach_names_the_problem_and_changes_nothing(
    store: Store, cur: Any, ddl, table, key, state, error
) -> None:  # type: ignore[no-untyped-def]
    machine = order_machine()
    store.define(machine)
    t = f"bad_{machine.name}"
    cur.execute(ddl.format(t=t))
    before = snapshot(cur, t)
    with pytest.raises(error) as refused:
        store.attach(machine.name, table=table.format(t=t), key=key, state=state)
    assert refused.value.errno == error.errno
    assert snapshot(cur, t) == before
    if error is StateColumnUnsupported and "ENUM" in ddl:
        assert "cancelled, delivered, shipped" in str(refused.value)  # the states it lacks, named


def test_a_taken_trigger_name_and_a_type_with_instances_are_refused(store: Store, cur: Any, orders) -> None:  # type: ignore[no-untyped-def]
    name, table = orders
    cur.execute(f"CREATE TRIGGER `fsm_{name}_sbu_v1` BEFORE UPDATE ON `{table}` FOR EACH ROW SET NEW.note = 'mine'")
    before = snapshot(cur, table)
    with pytest.raises(TriggerNameTaken):
        store.attach(name, table=table, key="id", state="status")
    assert snapshot(cur, table) == before
    used = order_machine()
    store.define(used)
    store.create(used.name, "k-1")
    with pytest.raises(AttachmentConflict):
        store.attach(used.name, table=table, key="id", state="status")
    with pytest.raises(pyfsm_invalid_argument()):
        store.attach(name, table=table, key="id", state="status", on_delete="bogus")


def pyfsm_invalid_argument() -> type[Exception]:
    from pyfsm import InvalidArgument

    return InvalidArgument


def test_the_applications_account_keeps_its_privileges_and_its_writes_are_checked(
    store: Store, cur: Any, dsn: str, orders
) -> None:  # type: ignore[no-untyped-def]
    name, table = orders
    settings = parse_dsn(dsn)
    user = unique("app")[:30]
    cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'Pw-app-1'")
    try:
        cur.execute(f"GRANT SELECT, INSERT, UPDATE ON `{settings.database}`.`{table}` TO '{user}'@'%'")
        grants = q(cur, f"SHOW GRANTS FOR '{user}'@'%'")
        store.attach(name, table=table, key="id", state="status")
        store.adopt(name)
        assert q(cur, f"SHOW GRANTS FOR '{user}'@'%'") == grants
        app = pymysql.connect(
            host=settings.host,
            port=settings.port,
            user=user,
            password="Pw-app-1",
            database=settings.database,
            autocommit=True,
        )
        try:
            app.cursor().execute(f"UPDATE `{table}` SET status = 'paid' WHERE id = 1")
            with pytest.raises(pymysql.err.OperationalError) as refused:
                app.cursor().execute(f"UPDATE `{table}` SET status = 'delivered' WHERE id = 1")
            assert refused.value.args[0] == TransitionNotAllowed.errno
        finally:
            app.close()
        assert history(cur, name, "1")[-1][2:6] == ("pay", "new", "paid", "update")
    finally:
        cur.execute(f"DROP USER '{user}'@'%'")


def test_a_definition_whose_state_the_column_cannot_hold_is_refused_and_nothing_stored(store: Store, cur: Any) -> None:
    machine = order_machine()
    store.define(machine)
    table = f"{machine.name}_e"
    cur.execute(
        f"CREATE TABLE `{table}` (id INT PRIMARY KEY, "
        "status ENUM('new', 'paid', 'shipped', 'delivered', 'cancelled')) ENGINE=InnoDB"
    )
    store.attach(machine.name, table=table, key="id", state="status")
    renamed = Machine(
        name=machine.name,
        states=["new", "paid", "sent", "delivered", "cancelled"],
        start=["new"],
        final=["delivered", "cancelled"],
        transitions=[
            ("pay", "new", "paid"),
            ("ship", "paid", "sent"),
            ("deliver", "sent", "delivered"),
            ("cancel", ["new", "paid"], "cancelled"),
        ],
    )
    with pytest.raises(StateColumnUnsupported) as refused:
        store.define(renamed)
    assert "lacks sent" in str(refused.value)
    assert store.definition(machine.name).version == 1  # nothing stored
    cur.execute(f"ALTER TABLE `{table}` MODIFY status ENUM('new', 'paid', 'shipped', 'sent', 'delivered', 'cancelled')")
    assert store.define(renamed).version == 2
