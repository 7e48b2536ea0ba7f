"""Machines on the application's own tables, on both servers (issue 48, items 1, 2, 3, 5, 6
and 8; docs/own-tables.md): attach (its dry run, each key kind, its triggers, a second attach
changing nothing), the application's own triggers, a DBA's fsm_attach_v1 completed by
Store.sync, adoption in batches with its progress, interrupted (a killed connection, several
killed processes) and beside the application's writers, every raw SQL writer (inserts,
updates of one row and of several, an event named by @fsm_event, deletes under each policy, a
deadlock), Store.send moving the table's column, detach and attach again, the table changing
under pyfsm (added columns and indexes, a renamed state column, a definition or a DBA's
version the column cannot hold), two types on one table, a partitioned table, the
application's and a reporting account, and bad input with each its number.

Each test makes its tables in the session's database and reads the raw tables: the
application's, fsm_<type>, fsm_<type>_transitions, fsm_state_counts, fsm_attachments and
information_schema.TRIGGERS. pyfsm's features on an attached type are test_attach_features.py's,
the ORMs test_attach_orms.py's, the racing processes test_attach_processes.py's, the CLI
test_cli_attach.py's.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import uuid
from typing import Any

import pymysql
import pytest
from helpers.common import granted_accounts, order_machine, unique

from pyfsm import (
    AmbiguousTransition,
    AttachedRowMissing,
    AttachmentConflict,
    ColumnMissing,
    DeleteRefused,
    ImmutableColumn,
    InvalidArgument,
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
from pyfsm.db import Settings, parse_dsn


def q(cur: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    cur.execute(sql, args)
    return list(cur.fetchall())


def errno(cur: Any, sql: str, args: Any = None) -> int | None:
    """The error number ``sql`` fails with (None: it did not fail)."""
    try:
        cur.execute(sql, args)
    except pymysql.err.MySQLError as exc:
        return int(exc.args[0])
    return None


def history(cur: Any, machine: str, key: str) -> list[tuple[Any, ...]]:
    """(sort_key, event, from_state, to_state, source, metadata) of an instance, in order."""
    return q(
        cur,
        f"SELECT t.sort_key, t.event, t.from_state, t.to_state, t.source, REPLACE(t.metadata, ' ', '') "
        f"FROM `fsm_{machine}_transitions` t JOIN `fsm_{machine}` i ON i.id = t.instance_id "
        "WHERE i.instance_key = %s ORDER BY t.sort_key",
        (key,),
    )


def counts(cur: Any, machine: str) -> dict[str, int]:
    rows = q(cur, "SELECT state, SUM(instances) FROM fsm_state_counts WHERE machine = %s GROUP BY state", (machine,))
    return {state: int(n) for state, n in rows if int(n)}


def grouped(cur: Any, machine: str) -> dict[str, int]:
    return {s: int(n) for s, n in q(cur, f"SELECT current_state, COUNT(*) FROM `fsm_{machine}` GROUP BY 1")}


def triggers(cur: Any) -> list[tuple[Any, ...]]:
    return q(
        cur,
        "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER, ACTION_STATEMENT "
        "FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() ORDER BY 1",
    )


def snapshot(cur: Any, table: str) -> tuple[Any, ...]:
    """What a refused attach or a dry run must leave as it was."""
    return (
        triggers(cur),
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
        q(cur, "SELECT COUNT(*) FROM fsm_state_counts"),
    )


def consistent(cur: Any, machine: str, table: str, key: str = "id", state: str = "status") -> None:
    """Every instance whole (its history ends at its state, most_recent on its last row only),
    counted, and where its row is."""
    assert q(
        cur,
        f"SELECT COUNT(*) FROM `fsm_{machine}` i LEFT JOIN `fsm_{machine}_transitions` t "
        "ON t.instance_id = i.id AND t.most_recent = 1 WHERE NOT (t.to_state <=> i.current_state)",
    ) == [(0,)]
    assert q(
        cur,
        f"SELECT COUNT(*) FROM `fsm_{machine}_transitions` t WHERE (t.most_recent <=> 1) <> (t.sort_key = "
        f"(SELECT MAX(u.sort_key) FROM `fsm_{machine}_transitions` u WHERE u.instance_id = t.instance_id))",
    ) == [(0,)]
    assert counts(cur, machine) == grouped(cur, machine)
    assert q(
        cur,
        f"SELECT COUNT(*) FROM `{table}` s JOIN `fsm_{machine}` i ON i.instance_key = CAST(s.`{key}` AS CHAR) "
        f"WHERE NOT (CAST(i.current_state AS BINARY) <=> CAST(s.`{state}` AS BINARY))",
    ) == [(0,)]


@pytest.fixture
def cur(raw: pymysql.connections.Connection) -> Any:
    raw.autocommit(True)
    return raw.cursor()


@pytest.fixture
def machine(store: Store) -> str:
    m = order_machine()
    store.define(m)
    return str(m.name)


def fill(cur: Any, table: str, rows: int) -> None:
    """``rows`` rows (a multiple of 300) in 'new', 'paid' and 'shipped' in turn."""
    for _ in range(rows // 300):
        cur.execute(
            f"INSERT INTO `{table}` (status) WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            "WHERE i < 300) SELECT ELT(1 + i % 3, 'new', 'paid', 'shipped') FROM n"
        )


# -- item 1: attach -----------------------------------------------------------------------------

KEY_KINDS = [
    # (key column, its values as SQL, the instance keys pyfsm gives them, key_kind)
    ("INT NOT NULL AUTO_INCREMENT", ["NULL", "NULL", "NULL", "NULL"], ["1", "2", "3", "4"], "integer"),
    (
        "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT",
        ["18446744073709551000", "NULL", "NULL", "NULL"],
        ["18446744073709551000", "18446744073709551001", "18446744073709551002", "18446744073709551003"],
        "integer",
    ),
    (
        "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL",
        ["'A-1'", "'b-2'", "'Ä-3'", "'z 4'"],
        ["A-1", "b-2", "Ä-3", "z 4"],
        "string",
    ),
    (
        "VARCHAR(40) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL",
        ["'Müller'", "'muller-2'", "'x'", "'Y'"],
        ["Müller", "muller-2", "x", "Y"],
        "string",
    ),
    (
        "BINARY(16) NOT NULL",
        [f"UNHEX('{u}')" for u in ("0" * 31 + "1", "ab" * 16, "ff" * 16, "0123456789abcdef" * 2)],
        ["0" * 31 + "1", "ab" * 16, "ff" * 16, "0123456789abcdef" * 2],
        "binary",
    ),
]


@pytest.mark.parametrize("column, values, keys, kind", KEY_KINDS, ids=["int", "bigint", "utf8mb4", "latin1", "uuid"])
def test_each_key_kind_is_planned_attached_once_adopted_and_written(
    store: Store, cur: Any, machine: str, column: str, values: list[str], keys: list[str], kind: str
) -> None:
    table = f"{machine}_k"
    cur.execute(f"CREATE TABLE `{table}` (id {column} PRIMARY KEY, status VARCHAR(20) NULL) ENGINE=InnoDB")
    for value, status in zip(values, ["'new'", "'paid'", "NULL", "'lost'"], strict=True):
        cur.execute(f"INSERT INTO `{table}` (id, status) VALUES ({value}, {status})")
    before = snapshot(cur, table)
    plan = store.attach_plan(machine, table=table, key="id", state="status")
    assert snapshot(cur, table) == before  # the dry run wrote nothing
    assert [(v.state, v.rows, v.known) for v in plan.values] == [  # by state, NULL first
        (None, 1, False),
        ("lost", 1, False),
        ("new", 1, True),
        ("paid", 1, True),
    ]
    assert sorted(v.state or "" for v in plan.unknown) == ["", "lost"]
    assert plan.attachment.key_kind == kind and plan.rows == 4
    first = store.attach(machine, table=table, key="id", state="status")
    assert (first.table, first.key, first.state, first.key_kind, first.installed, first.adopted) == (
        table,
        "id",
        "status",
        kind,
        True,
        False,
    )
    assert {
        f"fsm_{machine}_{s}_v1"
        for s in ("sbi", "sai", "sbu", "sbd", "au_subject", "ai_subject", "bi_adopt", "bi_adopted")
    } <= {t[0] for t in triggers(cur)}
    installed = snapshot(cur, table)
    assert store.attach(machine, table=table, key="id", state="status") == first
    assert snapshot(cur, table) == installed  # same triggers, same ACTION_STATEMENT, same row
    report = store.adopt(machine)
    assert (report.seen, report.adopted, report.unknown) == (4, 2, 2)
    assert sorted(k for (k,) in q(cur, f"SELECT instance_key FROM `fsm_{machine}`")) == sorted(keys[:2])
    assert history(cur, machine, keys[0]) == [(1, None, None, "new", "adopt", "{}")]
    # a raw UPDATE, found by the key as the application writes it (any case for a _ci key)
    where = {"integer": keys[0], "string": values[0].lower(), "binary": values[0]}[kind]
    cur.execute(f"UPDATE `{table}` SET status = 'paid' WHERE id = {where}")
    assert history(cur, machine, keys[0])[-1] == (2, "pay", "new", "paid", "update", "{}")
    # Store.send by the instance key moves the column
    sent = store.send(machine, keys[1], "ship")
    assert (sent.from_state, sent.to_state) == ("paid", "shipped")
    where = {"integer": keys[1], "string": values[1], "binary": values[1]}[kind]
    assert q(cur, f"SELECT status FROM `{table}` WHERE id = {where}") == [("shipped",)]
    assert history(cur, machine, keys[1])[-1][:5] == (2, "ship", "paid", "shipped", "procedure")
    assert [e.event for e in store.allowed_events(machine, keys[1])] == ["deliver"]
    assert counts(cur, machine) == grouped(cur, machine) == {"paid": 1, "shipped": 1}
    consistent(cur, machine, table)


def test_the_applications_triggers_run_first_and_a_state_they_set_is_checked(
    store: Store, cur: Any, machine: str
) -> None:
    table = f"{machine}_a"
    cur.execute(
        f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20), note VARCHAR(40), "
        "touched INT NOT NULL DEFAULT 0) ENGINE=InnoDB"
    )
    cur.execute(f"CREATE TABLE `{table}_audit` (id INT, status VARCHAR(20)) ENGINE=InnoDB")
    cur.execute(
        f"CREATE TRIGGER `{table}_bi` BEFORE INSERT ON `{table}` FOR EACH ROW SET NEW.note = COALESCE(NEW.note, 'fresh')"
    )
    # the application's own BEFORE UPDATE: counts every write, and pays a row marked 'auto-pay'
    cur.execute(
        f"CREATE TRIGGER `{table}_bu` BEFORE UPDATE ON `{table}` FOR EACH ROW BEGIN "
        "SET NEW.touched = OLD.touched + 1; "
        "IF NEW.note = 'auto-pay' THEN SET NEW.status = 'paid'; END IF; "
        "IF NEW.note = 'auto-deliver' THEN SET NEW.status = 'delivered'; END IF; END"
    )
    cur.execute(
        f"CREATE TRIGGER `{table}_au` AFTER UPDATE ON `{table}` FOR EACH ROW "
        f"INSERT INTO `{table}_audit` VALUES (NEW.id, NEW.status)"
    )
    cur.execute(f"INSERT INTO `{table}` (id, status) VALUES (1, 'new'), (2, 'new')")
    store.attach(machine, table=table, key="id", state="status")
    store.adopt(machine)
    order = {name: (timing, event, position) for name, _, timing, event, position, _ in triggers(cur)}
    assert order[f"{table}_bu"][2] < order[f"fsm_{machine}_sbu_v1"][2]  # pyfsm's after the application's
    assert order[f"{table}_bi"][2] < order[f"fsm_{machine}_sbi_v1"][2]
    cur.execute(f"INSERT INTO `{table}` (id) VALUES (3)")
    assert q(cur, f"SELECT status, note FROM `{table}` WHERE id = 3") == [("new", "fresh")]
    cur.execute(f"UPDATE `{table}` SET note = 'hello' WHERE id = 1")
    assert q(cur, f"SELECT status, touched FROM `{table}` WHERE id = 1") == [("new", 1)]
    assert len(history(cur, machine, "1")) == 1
    cur.execute(f"UPDATE `{table}` SET note = 'auto-pay' WHERE id = 1")  # the state its trigger set: recorded
    assert q(cur, f"SELECT status, touched FROM `{table}` WHERE id = 1") == [("paid", 2)]
    assert history(cur, machine, "1")[-1][1:5] == ("pay", "new", "paid", "update")
    assert errno(cur, f"UPDATE `{table}` SET note = 'auto-deliver' WHERE id = 2") == TransitionNotAllowed.errno
    assert q(cur, f"SELECT status, note, touched FROM `{table}` WHERE id = 2") == [("new", "fresh", 0)]
    assert q(cur, f"SELECT id, status FROM `{table}_audit` ORDER BY id, status") == [(1, "new"), (1, "paid")]


def test_a_dbas_fsm_attach_v1_is_installed_by_store_sync(store: Store, cur: Any, machine: str) -> None:
    table = f"{machine}_d"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20)) ENGINE=InnoDB")
    cur.execute(f"INSERT INTO `{table}` VALUES (1, 'new')")
    cur.execute("CALL fsm_attach_v1(%s, %s, 'id', 'status', NULL, NULL, NULL, 0)", (machine, table))
    recorded = cur.fetchall()
    while cur.nextset():
        pass
    assert len(recorded) == 1
    found = store.attachment(machine)
    assert found is not None and (found.installed, found.on_delete) == (False, "refuse")
    assert not [t for t in triggers(cur) if t[0].startswith(f"fsm_{machine}_s")]
    assert errno(cur, f"UPDATE `{table}` SET status = 'delivered' WHERE id = 1") is None  # not installed: unchecked
    cur.execute(f"UPDATE `{table}` SET status = 'new' WHERE id = 1")
    store.sync(machine)
    assert store.attachment(machine).installed  # type: ignore[union-attr]
    assert {f"fsm_{machine}_{s}_v1" for s in ("sbi", "sai", "sbu", "sbd")} <= {t[0] for t in triggers(cur)}
    assert store.adopt(machine).adopted == 1
    assert errno(cur, f"UPDATE `{table}` SET status = 'delivered' WHERE id = 1") == TransitionNotAllowed.errno
    # a DBA's bad on_delete: 31009, nothing recorded
    other = order_machine()
    store.define(other)
    assert errno(cur, "CALL fsm_attach_v1(%s, %s, 'id', 'status', NULL, NULL, 'bogus', 0)", (other.name, table)) == (
        InvalidArgument.errno
    )
    assert store.attachment(other.name) is None


# -- item 2: existing rows ----------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_adoption_in_batches_leaves_unknown_values_alone(store: Store, cur: Any, machine: str, batch: int) -> None:
    table = f"{machine}_b"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20) NULL) ENGINE=InnoDB")
    states = ["new", "paid", None, "shipped", "bogus", "delivered", "cancelled", "new", "paid", None] * 3
    cur.executemany(f"INSERT INTO `{table}` VALUES (%s, %s)", list(enumerate(states, 1)))
    store.attach(machine, table=table, key="id", state="status")
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}`") == [(0,)]  # attaching adopts nothing by itself
    progress: list[Any] = []
    report = store.adopt(machine, batch=batch, progress=progress.append)
    assert (report.seen, report.adopted, report.unknown, report.done) == (30, 21, 9, True)
    assert report.batches == -(-30 // batch)
    assert [r.seen for r in progress] == [min(batch * i, 30) for i in range(1, report.batches + 1)]
    # the first unknown key of the first batch holding one (the first is 3; as text within its batch)
    first_batch_end = -(-3 // batch) * batch
    unknown_keys = {"3", "13", "23", "5", "15", "25", "10", "20", "30"}
    assert report.first_unknown in {k for k in unknown_keys if int(k) <= first_batch_end}
    assert {s: n for s, n in grouped(cur, machine).items()} == {
        "new": 6,
        "paid": 6,
        "shipped": 3,
        "delivered": 3,
        "cancelled": 3,
    }
    consistent(cur, machine, table)
    assert q(cur, f"SELECT DISTINCT source, sort_key FROM `fsm_{machine}_transitions`") == [("adopt", 1)]
    assert q(cur, f"SELECT DISTINCT status FROM `fsm_{machine}` WHERE current_state IN ('delivered', 'cancelled')") == [
        ("completed",)
    ]  # adopted in a final state: completed
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}` WHERE instance_key IN ('3', '5', '10')") == [(0,)]
    assert store.attachment(machine).adopted is False  # type: ignore[union-attr]
    # a row in an unknown value: another value the machine lacks is refused, nothing changed
    assert errno(cur, f"UPDATE `{table}` SET status = 'lost' WHERE id = 5") == UnknownStateValue.errno
    assert errno(cur, f"UPDATE `{table}` SET status = 'lost' WHERE id = 3") == UnknownStateValue.errno
    assert q(cur, f"SELECT status FROM `{table}` WHERE id IN (3, 5) ORDER BY id") == [(None,), ("bogus",)]
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}` WHERE instance_key IN ('3', '5')") == [(0,)]
    again = store.adopt(machine, batch=batch)
    assert (again.adopted, again.unknown) == (0, 9)  # nothing twice; still left, never adopted as they are
    # an UPDATE to one of the machine's states puts such a row right: adopted at the new value
    cur.execute(f"UPDATE `{table}` SET status = 'paid' WHERE id IN (3, 5)")
    assert history(cur, machine, "3") == [(1, None, None, "paid", "adopt", '{"adopted_from":null}')]
    assert history(cur, machine, "5") == [(1, None, None, "paid", "adopt", '{"adopted_from":"bogus"}')]
    consistent(cur, machine, table)
    # every row put right: nothing left, the attachment adopted
    cur.execute(f"UPDATE `{table}` SET status = 'new' WHERE status IS NULL OR status = 'bogus'")
    assert store.adopt(machine, batch=batch).unknown == 0
    assert store.attachment(machine).adopted is True  # type: ignore[union-attr]
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}`") == [(30,)]
    consistent(cur, machine, table)


def _adopt_in_child(dsn: str, name: str, batch: int) -> None:
    with Store(dsn) as store:
        store.adopt(name, batch=batch)


def _table_with_rows(store: Store, cur: Any, machine: str, rows: int) -> str:
    table = f"{machine}_r"
    cur.execute(
        f"CREATE TABLE `{table}` (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, status VARCHAR(20) NULL) ENGINE=InnoDB"
    )
    fill(cur, table, rows)
    store.attach(machine, table=table, key="id", state="status")
    return table


def _wait_for(cur: Any, machine: str, at_least: int, seconds: float = 60) -> int:
    deadline = time.monotonic() + seconds
    while True:
        n = int(q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}`")[0][0])
        if n >= at_least or time.monotonic() > deadline:
            return n
        time.sleep(0.005)


def test_an_adoption_whose_connection_is_killed_rolls_its_batch_back_and_a_new_run_finishes(
    store: Store, cur: Any, dsn: str, machine: str
) -> None:
    table = _table_with_rows(store, cur, machine, 6000)
    adopter = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    adopter_id = adopter.thread_id()  # type: ignore[no-untyped-call]
    failures: list[BaseException] = []

    def run() -> None:
        after = None
        try:
            while True:
                with adopter.cursor() as c:
                    c.execute(f"CALL `fsm_{machine}_adopt_v1`(%s, 500)", (after,))
                    row = c.fetchone()
                    while c.nextset():
                        pass
                assert row is not None
                if row[-1]:
                    return
                after = row[-2]
        except BaseException as exc:  # the kill
            failures.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    _wait_for(cur, machine, 1000)
    cur.execute(f"KILL {adopter_id}")
    worker.join()
    assert failures, "the adoption finished before the kill: make the table larger"
    adopted = int(q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}`")[0][0])
    assert 1000 <= adopted < 6000 and adopted % 500 == 0  # whole batches only: the killed one rolled back
    consistent(cur, machine, table)
    report = store.adopt(machine, batch=700)
    assert report.done and report.adopted == 6000 - adopted
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}`") == [(6000,)]
    consistent(cur, machine, table)


def test_several_adopting_processes_killed_with_sigkill_leave_rows_whole(
    store: Store, cur: Any, dsn: str, machine: str
) -> None:
    table = _table_with_rows(store, cur, machine, 6000)
    spawn = multiprocessing.get_context("spawn")
    children = [spawn.Process(target=_adopt_in_child, args=(dsn, machine, batch)) for batch in (40, 90, 150)]
    for child in children:
        child.start()
    _wait_for(cur, machine, 600)
    for child in children:
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
    for child in children:
        child.join()
    # the server finishes (and commits) a CALL whose client was killed, noticing the client only
    # when it answers: wait until no session of this database runs a statement any more
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and q(
        cur,
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID() "
        "AND COMMAND <> 'Sleep'",
    ) != [(0,)]:
        time.sleep(0.05)
    adopted = int(q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}`")[0][0])
    assert 600 <= adopted < 6000
    consistent(cur, machine, table)
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}_transitions`") == [(adopted,)]  # one row each, no double
    report = store.adopt(machine, batch=1000)
    assert report.done and report.adopted == 6000 - adopted and report.unknown == 0
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}`") == q(cur, f"SELECT COUNT(*) FROM `{table}`") == [(6000,)]
    consistent(cur, machine, table)
    assert store.attachment(machine).adopted  # type: ignore[union-attr]


def _write_while_adopting(dsn: str, table: str, stop_after: float) -> None:
    """The application meanwhile: new rows, and state changes on old rows (deadlocks made again).

    Nothing else may reach it: on MariaDB (innodb_autoinc_lock_mode 1) adoption's former
    INSERT ... SELECT held fsm_<type>'s AUTO-INC lock while a writer adopting its row itself
    held a gap that insert needed, and the writer got 1467, which no retry loop knows.
    """
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    end = time.monotonic() + stop_after
    i = 0
    while time.monotonic() < end:
        i += 1
        sql = (
            f"INSERT INTO `{table}` (status) VALUES (NULL)"
            if i % 3 == 0
            else f"UPDATE `{table}` SET status = IF(status = 'new', 'paid', 'shipped') "
            f"WHERE id = {1 + (i * 37) % 3000} AND status IN ('new', 'paid')"
        )
        try:
            conn.cursor().execute(sql)
        except pymysql.err.OperationalError as exc:
            # rolled back whole: a deadlock, a lock wait timeout, or on MariaDB 11.6+ (snapshot
            # isolation on by default) a raw writer's 1020 (docs/errors.md#deadlock)
            if exc.args[0] not in (1213, 1205, 1020):
                raise
    conn.close()


def test_adoption_beside_the_applications_writers(store: Store, cur: Any, dsn: str, machine: str) -> None:
    table = _table_with_rows(store, cur, machine, 3000)
    spawn = multiprocessing.get_context("spawn")
    writers = [spawn.Process(target=_write_while_adopting, args=(dsn, table, 4.0)) for _ in range(2)]
    for w in writers:
        w.start()
    time.sleep(1.0)  # the writers are at work
    reports = [store.adopt(machine, batch=100)]
    for w in writers:
        w.join()
        assert w.exitcode == 0
    reports.append(store.adopt(machine, batch=100))
    assert reports[-1].unknown == 0 and reports[-1].adopted == 0  # the writers' rows had their instances
    rows = int(q(cur, f"SELECT COUNT(*) FROM `{table}`")[0][0])
    assert rows > 3000  # the writers inserted rows meanwhile
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}`") == [(rows,)]
    consistent(cur, machine, table)
    # each instance began once: adopted in its state, or inserted in a start state
    assert q(
        cur,
        f"SELECT source, COUNT(*) FROM `fsm_{machine}_transitions` WHERE sort_key = 1 GROUP BY source ORDER BY 1",
    )[0][0] in ("adopt", "update")
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}_transitions` WHERE sort_key = 1") == [(rows,)]
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}_transitions` WHERE sort_key = 1 AND source = 'update'") == [
        (rows - 3000,)
    ]


# -- item 3: raw writers ------------------------------------------------------------------------


def two_ways_machine() -> Machine:
    """Two events from 'new' to 'cancelled': a raw UPDATE must say which."""
    return Machine(
        name=unique("twoway"),
        states=["new", "paid", "cancelled"],
        start=["new"],
        final=["cancelled"],
        transitions=[("pay", "new", "paid"), ("cancel", "new", "cancelled"), ("void", "new", "cancelled")],
    )


def test_raw_writers_on_a_state_with_two_events_and_writers_refused_change_nothing(store: Store, cur: Any) -> None:
    m = two_ways_machine()
    store.define(m)
    name, table = m.name, f"{m.name}_w"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20), note TEXT) ENGINE=InnoDB")
    store.attach(name, table=table, key="id", state="status")
    cur.execute(f"INSERT INTO `{table}` (id, status) VALUES (1, 'new'), (2, NULL), (3, 'new')")
    assert q(cur, f"SELECT status FROM `{table}` ORDER BY id") == [("new",), ("new",), ("new",)]
    assert history(cur, name, "2") == [(1, None, None, "new", "update", "{}")]
    assert errno(cur, f"INSERT INTO `{table}` (id, status) VALUES (4, 'paid')") == TransitionNotAllowed.errno
    assert q(cur, f"SELECT COUNT(*) FROM `{table}` WHERE id = 4") == [(0,)]
    before = (q(cur, f"SELECT * FROM `{table}` ORDER BY id"), q(cur, f"SELECT * FROM `fsm_{name}_transitions`"))
    assert errno(cur, f"UPDATE `{table}` SET status = 'cancelled' WHERE id = 1") == AmbiguousTransition.errno
    assert errno(cur, f"UPDATE `{table}` SET status = 'gone' WHERE id = 1") == TransitionNotAllowed.errno
    assert errno(cur, f"UPDATE `{table}` SET id = 10 WHERE id = 1") == ImmutableColumn.errno
    # several rows, the last refused: none moved, no history
    assert errno(cur, f"UPDATE `{table}` SET status = IF(id = 3, 'new2', 'paid') ORDER BY id") in (
        TransitionNotAllowed.errno,
    )
    assert (q(cur, f"SELECT * FROM `{table}` ORDER BY id"), q(cur, f"SELECT * FROM `fsm_{name}_transitions`")) == before
    cur.execute("SET @fsm_event = 'void'")
    cur.execute(f"UPDATE `{table}` SET status = 'cancelled' WHERE id = 1")
    cur.execute("SET @fsm_event = NULL")
    assert history(cur, name, "1")[-1][:5] == (2, "void", "new", "cancelled", "update")
    # a non-state column: no history, the instance untouched
    instance = q(cur, f"SELECT * FROM `fsm_{name}` WHERE instance_key = '2'")
    cur.execute(f"UPDATE `{table}` SET note = REPEAT('x', 1000) WHERE id = 2")
    assert q(cur, f"SELECT * FROM `fsm_{name}` WHERE instance_key = '2'") == instance
    assert len(history(cur, name, "2")) == 1
    # several rows, every one allowed: all moved, each with its history row
    cur.execute(f"UPDATE `{table}` SET status = 'paid' WHERE id IN (2, 3) ORDER BY id")
    assert q(cur, f"SELECT id, status FROM `{table}` ORDER BY id") == [(1, "cancelled"), (2, "paid"), (3, "paid")]
    assert [history(cur, name, k)[-1][:5] for k in ("2", "3")] == [(2, "pay", "new", "paid", "update")] * 2
    # pyfsm cannot make an instance the table lacks, by Store.create or by Store.send
    with pytest.raises(AttachedRowMissing):
        store.create(name, "99")
    with pytest.raises(AttachedRowMissing):
        store.send(name, "99", "pay")
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{name}` WHERE instance_key = '99'") == [(0,)]
    assert counts(cur, name) == grouped(cur, name) == {"paid": 2, "cancelled": 1}
    consistent(cur, name, table)


def test_a_write_that_failed_with_a_deadlock_leaves_the_sessions_next_writes_checked(
    store: Store, cur: Any, dsn: str, machine: str
) -> None:
    """A deadlock inside the table's trigger ends the statement with no handler run (MySQL
    9.7), so the session's variables stay as the trigger left them: the next write of that
    session must still be checked, and still be recorded."""
    table = f"{machine}_dl"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20), note TEXT) ENGINE=InnoDB")
    cur.execute(f"CREATE TABLE `{table}_weight` (id INT PRIMARY KEY) ENGINE=InnoDB")
    cur.execute(f"INSERT INTO `{table}` (id, status) VALUES (1, 'new'), (2, 'new'), (3, 'new'), (4, 'new')")
    store.attach(machine, table=table, key="id", state="status")
    store.adopt(machine)
    a, b = (pymysql.connect(**parse_dsn(dsn).connect_kwargs()) for _ in range(2))
    try:
        ca, cb = a.cursor(), b.cursor()
        ca.execute("BEGIN")
        # A weighs more (rows changed), so InnoDB makes B the victim
        ca.execute(
            f"INSERT INTO `{table}_weight` WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            "WHERE i < 200) SELECT i FROM n"
        )
        ca.execute(f"SELECT id FROM `fsm_{machine}` WHERE instance_key = '1' FOR UPDATE")
        cb.execute("BEGIN")
        cb.execute(f"UPDATE `{table}` SET note = 'b' WHERE id = 2")
        failed: list[int] = []

        def b_moves_1() -> None:
            failed.append(errno(cb, f"UPDATE `{table}` SET status = 'paid' WHERE id = 1") or 0)

        waiter = threading.Thread(target=b_moves_1)
        waiter.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and q(
            cur,
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = %s "
            "AND trx_state = 'LOCK WAIT'",
            (b.thread_id(),),  # type: ignore[no-untyped-call]
        ) != [(1,)]:
            time.sleep(0.01)
        a_failed = errno(ca, f"UPDATE `{table}` SET note = 'a' WHERE id = 2")  # waits for B: a deadlock
        waiter.join()
        assert (a_failed, failed) == (None, [1213])
        a.commit()
        b.rollback()
        # B's session: its next writes checked and recorded as ever
        assert errno(cb, f"UPDATE `{table}` SET status = 'delivered' WHERE id = 3") == TransitionNotAllowed.errno
        cb.execute(f"UPDATE `{table}` SET status = 'paid' WHERE id = 4")
        b.commit()
        assert errno(cb, f"INSERT INTO `{table}` (id, status) VALUES (5, 'shipped')") == TransitionNotAllowed.errno
        b.rollback()
    finally:
        a.close()
        b.close()
    assert history(cur, machine, "4")[-1][1:5] == ("pay", "new", "paid", "update")
    assert q(cur, f"SELECT id, status FROM `{table}` ORDER BY id") == [(1, "new"), (2, "new"), (3, "new"), (4, "paid")]
    consistent(cur, machine, table)


# -- item 5: detach and attach again --------------------------------------------------------------


def test_detach_keeps_everything_and_attaching_again_continues(store: Store, cur: Any, machine: str) -> None:
    table = f"{machine}_x"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20)) ENGINE=InnoDB")
    cur.execute(f"INSERT INTO `{table}` VALUES (1, 'new'), (2, 'new'), (3, 'paid'), (4, 'new')")
    store.attach(machine, table=table, key="id", state="status", on_delete="allow")
    store.adopt(machine)
    store.send(machine, "1", "pay")
    kept = (
        q(cur, f"SELECT * FROM `fsm_{machine}` ORDER BY id"),
        q(cur, f"SELECT * FROM `fsm_{machine}_transitions` ORDER BY id"),
        counts(cur, machine),
    )
    detached = store.detach(machine)
    assert detached is not None and not detached.installed
    assert (
        q(cur, f"SELECT * FROM `fsm_{machine}` ORDER BY id"),
        q(cur, f"SELECT * FROM `fsm_{machine}_transitions` ORDER BY id"),
        counts(cur, machine),
    ) == kept
    attached_objects = {f"fsm_{machine}_{s}_v1" for s in ("sbi", "sai", "sbu", "sbd", "au_subject", "ai_subject")}
    assert not attached_objects & {t[0] for t in triggers(cur)}
    assert not [t for t in triggers(cur) if t[1] == table]
    # unchecked while detached: anything goes
    cur.execute(f"UPDATE `{table}` SET status = 'shipped' WHERE id = 1")  # paid -> shipped: a rule
    cur.execute(f"UPDATE `{table}` SET status = 'delivered' WHERE id = 2")  # new -> delivered: none
    cur.execute(f"UPDATE `{table}` SET id = 40 WHERE id = 4")
    cur.execute(f"INSERT INTO `{table}` VALUES (5, 'paid')")
    cur.execute(f"DELETE FROM `{table}` WHERE id = 3")
    assert q(cur, f"SELECT COUNT(*) FROM `fsm_{machine}_transitions`") == [(len(kept[1]),)]
    store.attach(machine, table=table, key="id", state="status", on_delete="allow")
    report = store.adopt(machine)
    assert (report.adopted, report.moved, report.refused, report.first_refused) == (2, 1, 1, "2")
    assert history(cur, machine, "1")[-1] == (3, "ship", "paid", "shipped", "update", '{"reattached":true}')
    assert history(cur, machine, "2") == [(1, None, None, "new", "adopt", "{}")]  # left, counted as refused
    assert history(cur, machine, "5") == [(1, None, None, "paid", "adopt", "{}")]
    assert history(cur, machine, "40") == [(1, None, None, "new", "adopt", "{}")]
    assert q(cur, f"SELECT current_state FROM `fsm_{machine}` WHERE instance_key IN ('3', '4') ORDER BY 1") == [
        ("new",),
        ("paid",),
    ]  # their rows went or changed key: the instances stay
    assert counts(cur, machine) == grouped(cur, machine)
    cur.execute(f"UPDATE `{table}` SET status = 'delivered' WHERE id = 1")
    assert history(cur, machine, "1")[-1][:2] == (4, "deliver")  # checked again, the history goes on


# -- item 6: the table changes --------------------------------------------------------------------


def test_adopt_of_a_type_not_attached_raises_not_attached(store: Store, cur: Any, machine: str) -> None:
    with pytest.raises(NotAttached):
        store.adopt(machine)  # never attached
    assert store.detach(machine) is None  # detach stays idempotent (the CLI says "nothing to detach")
    table = f"{machine}_n"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20) NULL) ENGINE=InnoDB")
    cur.execute("CALL fsm_attach_v1(%s, %s, 'id', 'status', NULL, NULL, NULL, 0)", (machine, table))
    while cur.nextset():
        pass
    with pytest.raises(NotAttached, match="sync"):
        store.adopt(machine)  # recorded, triggers not installed
    assert not [t for t in triggers(cur) if t[0].startswith(f"fsm_{machine}_s")]
    store.sync(machine)
    store.detach(machine)
    with pytest.raises(NotAttached):
        store.adopt(machine)  # detached
    assert NotAttached.errno == 31040


def test_a_renamed_state_column_stops_every_write_until_renamed_back(store: Store, cur: Any, machine: str) -> None:
    table = f"{machine}_n"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20)) ENGINE=InnoDB")
    cur.execute(f"INSERT INTO `{table}` VALUES (1, 'new'), (2, 'new')")
    store.attach(machine, table=table, key="id", state="status")
    store.adopt(machine)
    cur.execute(f"ALTER TABLE `{table}` ADD COLUMN extra INT NULL, ADD INDEX by_status (status)")
    cur.execute(f"UPDATE `{table}` SET status = 'paid', extra = 1 WHERE id = 1")
    assert history(cur, machine, "1")[-1][1:4] == ("pay", "new", "paid")
    # both servers take the rename; pyfsm's triggers then name a column that is gone, so each
    # write of the table fails with 1054 (nothing written) rather than go unchecked
    cur.execute(f"ALTER TABLE `{table}` RENAME COLUMN status TO state")
    before = (q(cur, f"SELECT * FROM `{table}` ORDER BY id"), q(cur, f"SELECT * FROM `fsm_{machine}_transitions`"))
    for sql in (
        f"UPDATE `{table}` SET state = 'shipped' WHERE id = 1",
        f"UPDATE `{table}` SET extra = 2 WHERE id = 2",
        f"INSERT INTO `{table}` (id, state) VALUES (3, 'new')",
    ):
        assert errno(cur, sql) == 1054, sql
    with pytest.raises(ColumnMissing) as sent:
        store.send(machine, "2", "pay")
    assert sent.value.errno == 1054 and "pyfsm check" in str(sent.value)
    assert isinstance(sent.value.__cause__, pymysql.err.OperationalError)
    assert errno(cur, f"DELETE FROM `{table}` WHERE id = 2") == 31017  # the delete trigger names no state
    assert (
        q(cur, f"SELECT * FROM `{table}` ORDER BY id"),
        q(cur, f"SELECT * FROM `fsm_{machine}_transitions`"),
    ) == before
    cur.execute(f"ALTER TABLE `{table}` RENAME COLUMN state TO status")
    cur.execute(f"UPDATE `{table}` SET status = 'shipped' WHERE id = 1")
    store.send(machine, "2", "pay")
    consistent(cur, machine, table)


def test_a_state_too_long_for_the_column_is_refused_by_number_and_moves_nothing(store: Store, cur: Any) -> None:
    """A DBA's new version (fsm_define_v8, where nothing looks at the table) with a state longer
    than the VARCHAR: a send into it gets 31036 naming the state, not the server's 1406."""
    first = order_machine()
    store.define(first)
    name, table = first.name, f"{first.name}_v"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(9)) ENGINE=InnoDB")
    cur.execute(f"INSERT INTO `{table}` VALUES (1, 'new')")
    store.attach(name, table=table, key="id", state="status")
    store.adopt(name)
    longer = Machine(
        name=name,
        states=[*first.states, "returned_to_sender"],
        start=["new"],
        final=["delivered", "cancelled", "returned_to_sender"],
        transitions=[*first.transitions, ("bounce", "new", "returned_to_sender")],
    )
    cur.execute("CALL fsm_define_v8(%s, %s)", (name, longer.to_json()))
    while cur.nextset():
        pass
    store.sync(name)
    cur.execute(f"INSERT INTO `{table}` VALUES (2, 'new')")  # an instance of the new version
    before = (q(cur, f"SELECT * FROM `{table}`"), q(cur, f"SELECT current_state, version FROM `fsm_{name}`"))
    with pytest.raises(StateColumnUnsupported) as refused:
        store.send(name, "2", "bounce")
    assert refused.value.errno == 31036 and "returned_to_sender" in str(refused.value)
    assert (q(cur, f"SELECT * FROM `{table}`"), q(cur, f"SELECT current_state, version FROM `fsm_{name}`")) == before
    assert len(history(cur, name, "2")) == 1
    # the application's own UPDATE: the column refuses the value before any trigger runs
    assert errno(cur, f"UPDATE `{table}` SET status = 'returned_to_sender' WHERE id = 2") == 1406


def test_a_definition_whose_state_the_column_cannot_hold_is_refused_and_nothing_stored(
    store: Store, cur: Any, machine: str
) -> None:
    table = f"{machine}_e"
    cur.execute(
        f"CREATE TABLE `{table}` (id INT PRIMARY KEY, "
        "status ENUM('new', 'paid', 'shipped', 'delivered', 'cancelled')) ENGINE=InnoDB"
    )
    store.attach(machine, table=table, key="id", state="status")
    renamed = Machine(
        name=machine,
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
    assert store.definition(machine).version == 1  # nothing stored
    cur.execute(f"ALTER TABLE `{table}` MODIFY status ENUM('new', 'paid', 'shipped', 'sent', 'delivered', 'cancelled')")
    assert store.define(renamed).version == 2


def test_two_types_on_two_state_columns_of_one_table(store: Store, cur: Any) -> None:
    payment, shipping = order_machine(), order_machine()
    store.define(payment)
    store.define(shipping)
    table = f"{payment.name}_two"
    cur.execute(
        f"CREATE TABLE `{table}` (id INT PRIMARY KEY, payment_status VARCHAR(20), shipping_status VARCHAR(20)) "
        "ENGINE=InnoDB"
    )
    cur.execute(f"INSERT INTO `{table}` VALUES (1, 'new', 'new'), (2, 'paid', 'new')")
    store.attach(payment.name, table=table, key="id", state="payment_status")
    store.attach(shipping.name, table=table, key="id", state="shipping_status")
    assert store.adopt(payment.name).adopted == store.adopt(shipping.name).adopted == 2
    cur.execute(f"INSERT INTO `{table}` (id) VALUES (3)")
    assert q(cur, f"SELECT payment_status, shipping_status FROM `{table}` WHERE id = 3") == [("new", "new")]
    cur.execute(f"UPDATE `{table}` SET payment_status = 'paid' WHERE id = 1")
    store.send(shipping.name, "2", "pay")
    cur.execute(f"UPDATE `{table}` SET payment_status = 'shipped', shipping_status = 'cancelled' WHERE id = 2")
    assert q(cur, f"SELECT * FROM `{table}` ORDER BY id") == [
        (1, "paid", "new"),
        (2, "shipped", "cancelled"),
        (3, "new", "new"),
    ]
    assert [h[1] for h in history(cur, payment.name, "2")] == [None, "ship"]
    assert [h[1] for h in history(cur, shipping.name, "2")] == [None, "pay", "cancel"]
    assert errno(cur, f"UPDATE `{table}` SET shipping_status = 'delivered' WHERE id = 1") == TransitionNotAllowed.errno
    third = order_machine()
    store.define(third)
    before = snapshot(cur, table)
    with pytest.raises(AttachmentConflict) as refused:
        store.attach(third.name, table=table, key="id", state="payment_status")
    assert refused.value.errno == 31039 and snapshot(cur, table) == before


# -- item 8: bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, key, state, lookup",
    [
        ("o`r d'e\"r_ü_", "select", "Zustand `é`", "order"),
        ("Bestellungen_äöü_", "k`e y", "order", "from"),  # reserved words for the state and the lookup
        ('it\'s "quoted"_', "key", "st`ate with space", "l`o"),
    ],
    ids=["quotes", "reserved", "space"],
)
def test_odd_names_for_the_table_the_key_and_the_state(
    store: Store, cur: Any, machine: str, table: str, key: str, state: str, lookup: str
) -> None:
    table += machine
    t, k, s, lk = (n.replace("`", "``") for n in (table, key, state, lookup))
    cur.execute(f"CREATE TABLE `{t}` (`{k}` VARCHAR(30) PRIMARY KEY, `{s}` VARCHAR(20), `{lk}` INT) ENGINE=InnoDB")
    cur.execute(f"INSERT INTO `{t}` VALUES ('ä 1', 'new', 1)")
    store.attach(machine, table=table, key=key, state=state, lookup=lookup)
    assert store.adopt(machine).adopted == 1
    cur.execute(f"INSERT INTO `{t}` (`{k}`, `{lk}`) VALUES ('b`2', 2)")
    cur.execute(f"UPDATE `{t}` SET `{s}` = 'paid' WHERE `{k}` = 'ä 1'")
    store.send(machine, "b`2", "cancel")
    assert sorted(q(cur, f"SELECT `{k}`, `{s}` FROM `{t}`")) == [("b`2", "cancelled"), ("ä 1", "paid")]
    assert errno(cur, f"UPDATE `{t}` SET `{s}` = 'new' WHERE `{k}` = 'b`2'") == TransitionNotAllowed.errno
    assert sorted(q(cur, f"SELECT instance_key, lookup_key FROM `fsm_{machine}`")) == [("b`2", "2"), ("ä 1", "1")]


BAD = [
    # pytest.param(DDL making `{t}`, the table to attach, key, state, error, a text its message names)
    pytest.param(
        "CREATE VIEW `{t}` AS SELECT 1 AS id, 'new' AS status", "{t}", "id", "status", TableUnsupported, None, id="view"
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(20)) ENGINE=MyISAM",
        "{t}",
        "id",
        "status",
        TableUnsupported,
        None,
        id="myisam",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (a INT, b INT, status VARCHAR(20), PRIMARY KEY (a, b))",
        "{t}",
        "a",
        "status",
        KeyUnsupported,
        None,
        id="composite",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, j JSON, status VARCHAR(20))",
        "{t}",
        "j",
        "status",
        KeyUnsupported,
        None,
        id="json-key",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id FLOAT PRIMARY KEY, status VARCHAR(20))",
        "{t}",
        "id",
        "status",
        KeyUnsupported,
        None,
        id="float-key",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id VARCHAR(20) PRIMARY KEY)",
        "{t}",
        "id",
        "id",
        StateColumnUnsupported,
        None,
        id="state-is-key",
    ),
    pytest.param(
        "CREATE TEMPORARY TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(20))",
        "{t}",
        "id",
        "status",
        TableUnsupported,
        None,
        id="temporary",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(20))",
        "otherdb.{t}",
        "id",
        "status",
        TableUnsupported,
        None,
        id="otherdb",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT NULL, status VARCHAR(20), UNIQUE KEY (id))",
        "{t}",
        "id",
        "status",
        KeyUnsupported,
        None,
        id="nullable-unique",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id DOUBLE PRIMARY KEY, status VARCHAR(20))",
        "{t}",
        "id",
        "status",
        KeyUnsupported,
        None,
        id="double-key",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT NOT NULL, status VARCHAR(20), KEY (id))",
        "{t}",
        "id",
        "status",
        KeyUnsupported,
        None,
        id="non-unique",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(20) AS (CONCAT('n', 'ew')) VIRTUAL)",
        "{t}",
        "id",
        "status",
        StateColumnUnsupported,
        None,
        id="virtual-state",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status ENUM('new', 'paid', 'shipped', 'delivered'))",
        "{t}",
        "id",
        "status",
        StateColumnUnsupported,
        "cannot hold cancelled",
        id="enum-lacking",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(8))",
        "{t}",
        "id",
        "status",
        StateColumnUnsupported,
        None,
        id="short",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(20))",
        "{t}",
        "id",
        "nope",
        StateColumnUnsupported,
        None,
        id="no-state",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status VARCHAR(20))",
        "{t}",
        "nope",
        "status",
        KeyUnsupported,
        None,
        id="no-key",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status TEXT)",
        "{t}",
        "id",
        "status",
        StateColumnUnsupported,
        None,
        id="text-state",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT, status VARCHAR(20))", "{t}", "id", "status", KeyUnsupported, None, id="unindexed"
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, s VARCHAR(20), status VARCHAR(20) AS (s) STORED)",
        "{t}",
        "id",
        "status",
        StateColumnUnsupported,
        None,
        id="stored-state",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status ENUM('new', 'paid'))",
        "{t}",
        "id",
        "status",
        StateColumnUnsupported,
        "cancelled, delivered, shipped",
        id="enum-lacking-three",
    ),
    pytest.param(
        "CREATE TABLE `{t}` (id INT PRIMARY KEY, status INT)",
        "{t}",
        "id",
        "status",
        StateColumnUnsupported,
        None,
        id="int-state",
    ),
]


@pytest.mark.parametrize("ddl, table, key, state, error, named", BAD)
def test_refused_attachments_change_nothing(
    store: Store,
    cur: Any,
    machine: str,
    ddl: str,
    table: str,
    key: str,
    state: str,
    error: type[Exception],
    named: str | None,
) -> None:
    t = f"bad_{machine}"
    cur.execute(ddl.format(t=t))
    before = snapshot(cur, t)
    with pytest.raises(error) as refused:
        store.attach(machine, table=table.format(t=t), key=key, state=state)
    assert refused.value.errno == error.errno  # type: ignore[attr-defined]
    with pytest.raises(error):
        store.attach_plan(machine, table=table.format(t=t), key=key, state=state)
    assert snapshot(cur, t) == before
    assert store.attachment(machine) is None
    if named is not None:
        assert named in str(refused.value)  # the states it lacks, named
    if "TEMPORARY" in ddl:  # the DBA's own session does not see its temporary table either
        assert (
            errno(cur, "CALL fsm_attach_v1(%s, %s, 'id', 'status', NULL, NULL, NULL, 0)", (machine, t))
            == TableUnsupported.errno
        )


def test_a_taken_trigger_name_a_type_with_instances_and_deletes(store: Store, cur: Any, machine: str) -> None:
    table = f"{machine}_t"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20), note TEXT) ENGINE=InnoDB")
    cur.execute(f"INSERT INTO `{table}` VALUES (1, 'new', NULL), (2, 'paid', NULL)")
    cur.execute(f"CREATE TRIGGER `fsm_{machine}_sbu_v1` BEFORE UPDATE ON `{table}` FOR EACH ROW SET NEW.note = 'mine'")
    before = snapshot(cur, table)
    with pytest.raises(TriggerNameTaken) as taken:
        store.attach(machine, table=table, key="id", state="status")
    assert taken.value.errno == 31037 and f"fsm_{machine}_sbu_v1" in str(taken.value)
    assert snapshot(cur, table) == before
    cur.execute(f"DROP TRIGGER `fsm_{machine}_sbu_v1`")
    used = order_machine()
    store.define(used)
    store.create(used.name, "1")
    before = snapshot(cur, table)
    with pytest.raises(AttachmentConflict) as conflict:
        store.attach(used.name, table=table, key="id", state="status")
    assert conflict.value.errno == 31039 and snapshot(cur, table) == before
    with pytest.raises(InvalidArgument):
        store.attach(machine, table=table, key="id", state="status", on_delete="bogus")
    assert snapshot(cur, table) == before
    # deletes: refused under the machine (31017, nothing changed), then allowed
    store.attach(machine, table=table, key="id", state="status")
    store.adopt(machine)
    assert errno(cur, f"DELETE FROM `{table}` WHERE id IN (1, 2)") == DeleteRefused.errno == 31017
    assert q(cur, f"SELECT COUNT(*) FROM `{table}`") == [(2,)]
    store.attach(machine, table=table, key="id", state="status", on_delete="allow")
    assert f"fsm_{machine}_sbd_v1" not in {t[0] for t in triggers(cur)}
    cur.execute(f"DELETE FROM `{table}` WHERE id = 2")
    assert history(cur, machine, "2") == [(1, None, None, "paid", "adopt", "{}")]
    with pytest.raises(AttachedRowMissing):
        store.send(machine, "2", "ship")
    assert q(cur, f"SELECT current_state FROM `fsm_{machine}` WHERE instance_key = '2'") == [("paid",)]
    assert counts(cur, machine) == grouped(cur, machine) == {"new": 1, "paid": 1}


def test_a_partitioned_table_works(store: Store, cur: Any, machine: str) -> None:
    table = f"{machine}_p"
    cur.execute(
        f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20)) ENGINE=InnoDB PARTITION BY HASH (id) PARTITIONS 4"
    )
    cur.execute(f"INSERT INTO `{table}` VALUES (1, 'new'), (2, 'paid'), (3, NULL)")
    store.attach(machine, table=table, key="id", state="status")
    assert store.adopt(machine, batch=2).adopted == 2
    cur.execute(f"UPDATE `{table}` SET status = 'paid' WHERE id = 1")
    store.send(machine, "2", "ship")
    cur.execute(f"INSERT INTO `{table}` VALUES (4, NULL)")
    assert errno(cur, f"UPDATE `{table}` SET status = 'delivered' WHERE id = 4") == TransitionNotAllowed.errno
    assert q(cur, f"SELECT status FROM `{table}` ORDER BY id") == [("paid",), ("shipped",), (None,), ("new",)]


def test_the_applications_account_and_a_reporting_account(
    store: Store, cur: Any, dsn: str, server: Settings, machine: str
) -> None:
    settings = parse_dsn(dsn)
    table = f"{machine}_g"
    cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, status VARCHAR(20)) ENGINE=InnoDB")
    cur.execute(f"INSERT INTO `{table}` VALUES (1, 'new')")
    user = "app_" + uuid.uuid4().hex[:10]
    cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'Pw-app-1'")
    try:
        cur.execute(f"GRANT SELECT, INSERT, UPDATE ON `{settings.database}`.`{table}` TO '{user}'@'%'")
        grants = q(cur, f"SHOW GRANTS FOR '{user}'@'%'")
        store.attach(machine, table=table, key="id", state="status")
        store.adopt(machine)
        assert q(cur, f"SHOW GRANTS FOR '{user}'@'%'") == grants
        app = pymysql.connect(
            host=settings.host, port=settings.port, user=user, password="Pw-app-1", database=settings.database
        )
        try:
            app.autocommit(True)
            c = app.cursor()
            c.execute(f"INSERT INTO `{table}` (id) VALUES (2)")
            c.execute(f"UPDATE `{table}` SET status = 'paid' WHERE id = 2")
            assert errno(c, f"UPDATE `{table}` SET status = 'delivered' WHERE id = 1") == TransitionNotAllowed.errno
            assert errno(c, f"SELECT * FROM `fsm_{machine}`") in (1142, 1143)  # its privileges, no more
        finally:
            app.close()
    finally:
        cur.execute(f"DROP USER '{user}'@'%'")
    assert history(cur, machine, "2")[-1][1:5] == ("pay", "new", "paid", "update")
    with granted_accounts(server, settings, ["reporting"], "h1") as accounts:
        reporter = pymysql.connect(**accounts["reporting"].connect_kwargs())
        try:
            rows = q(reporter.cursor(), f"SELECT instance_key, current_state FROM `fsm_v_{machine}` ORDER BY 1")
        finally:
            reporter.close()
    assert rows == [("1", "new"), ("2", "paid")]
