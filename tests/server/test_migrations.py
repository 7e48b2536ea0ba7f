"""Migrations: numbered without gaps, HEAD matches, and equal to the current schema."""

from __future__ import annotations

import re
from typing import Any

import pymysql
import pytest
from helpers.schemas import install_type_as_of, schema_of

from pyfsm import SchemaVersionMismatch, Store, UnknownMachine
from pyfsm.schema.install import (
    CURRENT_OBJECTS,
    HEAD_REVISION,
    MACHINE_OBJECTS_VERSION,
    current_revision,
    known_revisions,
)
from pyfsm.schema.resources import migrations_dir, sql_dir
from pyfsm.schema.views import DEPENDENT_VIEWS, UNION_VIEWS


def test_revisions_are_numbered_without_gaps_and_chained() -> None:
    files = sorted((migrations_dir() / "versions").glob("[0-9]*.py"))
    numbers = [int(f.name[:4]) for f in files]
    assert numbers == list(range(1, len(files) + 1))
    previous = None
    for f in files:
        text = f.read_text()
        assert re.search(rf'^revision = "{f.name[:4]}"$', text, re.M), f.name
        expected_down = "None" if previous is None else f'"{previous}"'
        assert re.search(rf"^down_revision = {re.escape(expected_down)}$", text, re.M), f.name
        previous = f.name[:4]
    assert known_revisions()[-1] == HEAD_REVISION == previous


def test_every_sql_file_is_current_and_installed() -> None:
    """sql/ holds the current schema only: every file there is created by a fresh install
    (globally or per type), by attaching a type to a table (pyfsm.schema.attached), and every
    file a fresh install names is there."""
    from pyfsm.schema.attached import ALL_OBJECTS as ATTACHED_OBJECTS
    from pyfsm.schema.install import MACHINE_OBJECTS, MACHINE_TIMER_OBJECTS

    installed = (
        set(CURRENT_OBJECTS)
        | set(MACHINE_OBJECTS)
        | set(MACHINE_TIMER_OBJECTS)
        | set(ATTACHED_OBJECTS)
        | set(UNION_VIEWS)
        | set(DEPENDENT_VIEWS)
    )
    queries = sql_dir() / "queries"  # the runtime queries, no objects (tests/unit/test_queries.py)
    on_disk = {p.relative_to(sql_dir()).as_posix() for p in sql_dir().rglob("*.sql") if p.parent != queries}
    assert on_disk - installed == set(), "files in sql/ that no fresh install creates"
    assert installed - on_disk == set(), "objects a fresh install names that sql/ lacks"
    assert len(CURRENT_OBJECTS) == len(set(CURRENT_OBJECTS)) and len(MACHINE_OBJECTS) == len(set(MACHINE_OBJECTS))


def test_every_frozen_file_is_applied_by_a_revision() -> None:
    """migrations/sql holds what the revisions apply, as they landed: the shared tree of 0001
    to 0010 (files named in their code, templates in the object sets they installed), then a
    folder per revision with exactly the files that revision names."""
    from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS

    frozen = migrations_dir() / "sql"
    versions = {f.name[:4]: f.read_text() for f in (migrations_dir() / "versions").glob("[0-9]*.py")}
    first = "".join(text for number, text in versions.items() if number <= "0010")
    templates = {name for names in MACHINE_TEMPLATE_SETS.values() for name in names} | {"history_left_at"}
    for path in (frozen / "0001-0010").rglob("*.sql"):
        rel = path.relative_to(frozen / "0001-0010").as_posix()
        used = f'"{rel}"' in first or (rel.startswith("templates/") and path.stem in templates)
        assert used, f"{rel} is frozen for revisions 0001-0010 but none of them applies it"
    folders = {p.name for p in frozen.iterdir() if p.is_dir()} - {"0001-0010"}
    assert folders <= set(versions), f"folders for revisions that do not exist: {folders - set(versions)}"
    for number in folders:
        for path in (frozen / number).rglob("*.sql"):
            rel = path.relative_to(frozen / number).as_posix()
            stem = rel.rsplit("/", 1)[-1][:-4]
            assert stem in versions[number] or rel in versions[number], f"revision {number} does not apply {rel}"


def test_sql_files_have_headers_and_no_delimiter_or_definer() -> None:
    """Every SQL file, current or frozen: one statement after a header that names the object
    and gives its errors and an example; no DELIMITER (not SQL), no DEFINER (the installer's)."""
    for path in [*sql_dir().rglob("*.sql"), *(migrations_dir() / "sql").rglob("*.sql")]:
        if path.parent == sql_dir() / "queries":  # runtime queries: their headers are tests/unit/test_queries.py's
            continue
        text = path.read_text()
        if path.is_relative_to(sql_dir()):  # the current schema creates; changes are the migrations' business
            assert re.search(r"^CREATE ", text, re.M) and not re.search(r"^ALTER ", text, re.M), path
        statement = re.search(r"^(CREATE|ALTER) ", text, re.M)
        assert statement, f"{path.name}: no CREATE or ALTER statement"
        header = text[: statement.start()]
        assert header.startswith(f"-- {path.stem.replace('_table', '')}") or header.startswith("-- fsm_"), path
        for word in ("Errors:", "Example:"):
            assert word in header, f"{path.name}: header lacks {word}"
        assert "DELIMITER" not in text.upper().replace("-- ", ""), path
        assert "DEFINER=" not in text.replace(" ", "").upper(), path
        assert all(line.startswith("--") for line in header.splitlines() if line), (
            f"{path.name}: code before the statement"
        )
        if path.parent.name == "changes":  # a change to an existing object: one ALTER TABLE
            assert text.count("\nALTER TABLE ") == 1 and "CREATE " not in text, path


def _first_difference(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> str:
    """The first row that differs, and where in it (a drift is one long definition apart)."""
    for x, y in zip(a, b, strict=False):
        if x != y:
            at = next((n for n, (p, q) in enumerate(zip(str(x), str(y), strict=False)) if p != q), 0)
            return f"{x[0]}: ...{str(x)[max(0, at - 80) : at + 80]}... != ...{str(y)[max(0, at - 80) : at + 80]}..."
    return f"{len(a)} rows against {len(b)}"


def contents_of(conn: Any) -> dict[str, Any]:
    """What the schema holds about machine types: definitions (their body is compared by
    meaning elsewhere: fsm_define_v1 stored no options), rules, states, counters, accounts."""
    from helpers.common import fetch

    return {
        "machines": fetch(conn, "SELECT machine, current_version, objects_version FROM fsm_machines ORDER BY machine"),
        "definitions": fetch(
            conn,
            "SELECT machine, version, topic, save_after_step, uses_global_lock, "
            "uses_local_lock, lock_lease_seconds, event_data FROM fsm_definitions "
            "ORDER BY machine, version",
        ),
        "states": fetch(conn, "SELECT * FROM fsm_states ORDER BY 1, 2, 3"),
        "rules": fetch(conn, "SELECT * FROM fsm_rules ORDER BY 1, 2, 3, 4"),
        "counts": fetch(
            conn,
            "SELECT machine, state, SUM(instances) AS n FROM fsm_state_counts "
            "GROUP BY machine, state HAVING n <> 0 ORDER BY machine, state",
        ),
        "accounts": fetch(conn, "SELECT role FROM fsm_accounts ORDER BY role"),
    }


def grants_of(conn: Any, users: list[str], database: str) -> list[list[str]]:
    out = []
    for user in users:
        cur = conn.cursor()
        cur.execute(f"SHOW GRANTS FOR '{user}'@'localhost'")
        out.append(sorted(row[0].replace(database, "DB").replace(user, "USER") for row in cur.fetchall()))
    return out


#: Where the drift test defines a type as the pyfsm of that time did: (revision, the
#: per-type object set it installed, the define procedure it called).
DEFINED_AT = (
    ("0001", "v1", "fsm_define_v1"),
    ("0002", "v2", "fsm_define_v2"),
    ("0004", "v3", "fsm_define_v3"),
    ("0005", "v4", "fsm_define_v4"),
    ("0006", "v5", "fsm_define_v4"),
    ("0008", "v7", "fsm_define_v4"),
    ("0010", "v9", "fsm_define_v4"),
)


def define_as_of(conn: Any, machine: Any, objects_version: str, define: str) -> None:
    """Define a type as an older pyfsm did (its define procedure, then its per-type templates),
    create two instances and move one."""
    from pyfsm.schema.ddl import execute_ddl
    from pyfsm.schema.resources import render
    from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS
    from pyfsm.schema.views import VIEW_OBJECT_VERSIONS, refresh_views

    definition = machine.to_json()
    if define == "fsm_define_v1":  # 0.1's definitions had no lock lease or event_data options
        definition = definition.replace(',"lock_lease_seconds":60,"event_data":true', "")
    with conn.cursor() as cur:
        cur.execute(f"CALL {define}(%s, %s)", (machine.name, definition))
        execute_ddl(conn, [render(t, machine.name) for t in MACHINE_TEMPLATE_SETS[objects_version]])
        cur.execute("UPDATE fsm_machines SET objects_version = %s WHERE machine = %s", (objects_version, machine.name))
        for key in ("a", "b"):
            cur.execute(f"CALL fsm_{machine.name}_create_v1(%s, NULL, NULL, NULL, NULL, NULL)", (key,))
        cur.execute(f"CALL fsm_{machine.name}_send_v1('a', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)")
    if objects_version in VIEW_OBJECT_VERSIONS:  # the views over every type, as its define rebuilt them
        refresh_views(conn)


def test_an_upgraded_database_equals_a_fresh_one(make_database, server) -> None:  # type: ignore[no-untyped-def]
    """The drift test: a database migrated from 0001 one revision at a time, with types defined
    along the way by the pyfsm of each time, equals a fresh install of the current schema
    with the same types: tables, columns, indexes, checks, triggers and routines by body,
    views, definitions, counters and grants; the DEPRECATED procedures are in both (a fresh
    install creates them from their frozen files until their removal release)."""
    from helpers.common import order_machine

    from pyfsm import db
    from pyfsm.schema import install as schema
    from pyfsm.schema.grants import Account, grant

    old, fresh = make_database(), make_database()
    machines = [order_machine(f"t{revision}") for revision, _, _ in DEFINED_AT]
    suffix = old.database[-8:]
    users = {role: f"drift_{role}_{suffix}" for role in ("app", "reporting", "relay")}
    accounts = [Account.parse(f"{user}@localhost", role) for role, user in users.items()]
    passwords = {f"{a.user}@{a.host}": "drift-Secret-1" for a in accounts}
    conn = db.connect(old)
    try:
        for (revision, objects_version, define), machine in zip(DEFINED_AT, machines, strict=True):
            schema.migrate(old, revision=revision)
            define_as_of(conn, machine, objects_version, define)
            if revision == "0004":  # the first revision with `pyfsm grant`: accounts made then get what comes later
                grant(conn, accounts, passwords=passwords)
        schema.migrate(old)
        assert schema.current_revision(conn) == schema.HEAD_REVISION
        deprecated = {name for name, _, _ in schema.deprecated_present(conn)}
    finally:
        conn.close()
    with Store(fresh.dsn()) as store:
        store.migrate()
        for machine in machines:
            store.define(machine)
            store.create(machine.name, "a")
            store.create(machine.name, "b")
            store.send(machine.name, "a", "pay")
    conn = db.connect(fresh)
    try:
        fresh_accounts = [Account.parse(f"{a.user}_f@localhost", a.role) for a in accounts]
        grant(conn, fresh_accounts, passwords={f"{a.user}@{a.host}": "drift-Secret-1" for a in fresh_accounts})
        fresh_deprecated = {name for name, _, _ in schema.deprecated_present(conn)}
    finally:
        conn.close()
    with Store(old.dsn()) as store:  # every definition stored by an older define means what it means today
        assert not any(store.define(machine).changed for machine in machines)

    admin = pymysql.connect(**server.connect_kwargs(database=False))
    try:
        a, b = schema_of(admin, old.database), schema_of(admin, fresh.database)
        for label in a:
            assert a[label] == b[label], (label, _first_difference(a[label], b[label]))
        expected = {entry.name for entry in schema.DEPRECATED if "{type}" not in entry.name} | {
            entry.name.replace("{type}", m.name)
            for entry in schema.DEPRECATED
            if "{type}" in entry.name
            for m in machines
        }
        assert deprecated == fresh_deprecated == expected
        assert contents_of(pymysql.connect(**old.connect_kwargs())) == contents_of(
            pymysql.connect(**fresh.connect_kwargs())
        )
        assert grants_of(admin, list(users.values()), old.database) == grants_of(
            admin, [f"{u}_f" for u in users.values()], fresh.database
        )
    finally:
        for user in [*users.values(), *(f"{u}_f" for u in users.values())]:
            admin.cursor().execute(f"DROP USER IF EXISTS '{user}'@'localhost'")
        admin.close()
    assert any(r[0] == "fsm_send_v4" for r in b["routines"]) and any(r[0] == "fsm_t0001_bu_v13" for r in b["triggers"])
    assert {
        "fsm_t0001_send_v3",
        "fsm_t0001_send_v4",
        "fsm_t0001_fire_v1",
        "fsm_t0001_fire_v2",
        "fsm_t0001_allowed_events_v1",
        "fsm_define_v8",
        "fsm_fire_timers_v2",
        "fsm_check_guard_v1",
    } <= {r[0] for r in b["routines"]}
    assert {
        "fsm_v_t0001",
        "fsm_v_t0010_transitions",
        "fsm_v_instances",
        "fsm_v_history",
        "fsm_v_stuck",
        "fsm_v_state_counts",
    } <= {r[0] for r in b["views"]}


def test_a_fresh_install_creates_the_current_schema_directly(make_database) -> None:  # type: ignore[no-untyped-def]
    """Store.migrate() on an empty database runs no revision: it creates sql/ and records the
    head. One interrupted is run again; pyfsm's tables without a version table are refused."""
    from pyfsm import db
    from pyfsm.schema import install as schema

    settings = make_database()
    conn = db.connect(settings)
    try:
        schema.install_fresh(conn)  # as if the run stopped after the objects, before the stamp
        assert schema.current_revision(conn) is None
        schema.migrate(settings)
        assert schema.current_revision(conn) == schema.HEAD_REVISION
        assert len(schema.deprecated_present(conn)) == len(schema.DEPRECATED_FILES)  # no type, no per-type one
        with conn.cursor() as cur:
            cur.execute("DROP TABLE fsm_alembic_version")
        with pytest.raises(SchemaVersionMismatch, match="no record of their revision"):
            schema.migrate(settings)
    finally:
        conn.close()


def test_migrate_twice_is_a_no_op_and_newer_schema_is_refused(make_database) -> None:  # type: ignore[no-untyped-def]
    settings = make_database()
    with Store(settings.dsn()) as store:
        store.migrate()
        store.migrate()
        with pytest.raises(UnknownMachine):  # the schema check passed; the machine just does not exist
            store.definition("nothing_defined")
    conn = pymysql.connect(**settings.connect_kwargs())
    assert current_revision(conn) == HEAD_REVISION
    conn.close()
    conn = pymysql.connect(**settings.connect_kwargs())
    conn.cursor().execute("UPDATE fsm_alembic_version SET version_num = '0999'")
    conn.close()
    with Store(settings.dsn()) as store, pytest.raises(SchemaVersionMismatch, match="upgrade pyfsm"):
        store.counts("order")


def test_every_older_object_set_is_frozen() -> None:
    from pyfsm.schema.install import MACHINE_OBJECTS, MACHINE_OBJECTS_VERSION
    from pyfsm.schema.resources import read_frozen, template_revisions
    from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS

    for names in MACHINE_TEMPLATE_SETS.values():
        for name in names:
            assert read_frozen(f"templates/{name}.sql", template_revisions(name)).startswith("--"), name
    assert list(MACHINE_TEMPLATE_SETS)[-1] == MACHINE_OBJECTS_VERSION
    # the current set is the last frozen one, without what is deprecated, with left_at in the table
    # send_v1, send_v2, send_v3, send_v4, send_many_v1, send_many_v2, fire_v1, history_left_at
    assert len(MACHINE_OBJECTS) == len(MACHINE_TEMPLATE_SETS[MACHINE_OBJECTS_VERSION]) - 8


def test_no_deprecated_procedure_outlives_its_removal_release() -> None:
    """A release that reaches an entry's removed_in must drop it in a migration and remove the
    entry (and stop a fresh install from creating it): this fails until it does."""
    from importlib.metadata import version

    from pyfsm.schema.install import DEPRECATED, DEPRECATED_FILES, DEPRECATED_TEMPLATES
    from pyfsm.schema.resources import read_frozen, template_revisions

    release = tuple(int(p) for p in version("pyfsm-mysql").split(".")[:2])
    for entry in DEPRECATED:
        assert release < tuple(int(p) for p in entry.removed_in.split(".")[:2]), entry
        assert entry.deprecated_in <= entry.removed_in, entry
    for name, revisions in DEPRECATED_FILES:
        assert read_frozen(name, revisions).startswith("-- fsm_"), name
    for name in DEPRECATED_TEMPLATES:
        assert read_frozen(f"templates/{name}.sql", template_revisions(name)).startswith("-- fsm_"), name


def test_machines_defined_before_0002_are_upgraded_in_place(make_database, server) -> None:  # type: ignore[no-untyped-def]
    """A machine defined at revision 0001 (v1 trigger) and migrated equals one defined at head,
    keeps its instances and history, and is checked by the v2 trigger from then on."""
    from helpers.common import order_machine

    from pyfsm import db
    from pyfsm.schema import install as schema
    from pyfsm.schema.ddl import execute_ddl
    from pyfsm.schema.resources import render
    from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS

    old, fresh = make_database(), make_database()
    schema.migrate(old, revision="0001")
    conn = db.connect(old)
    try:
        with conn.cursor() as cur:  # what pyfsm 0.1 did: fsm_define_v1, then the v1 templates
            cur.execute(
                "CALL fsm_define_v1('order', %s)",
                (order_machine("order").to_json().replace(',"lock_lease_seconds":60,"event_data":true', ""),),
            )
            execute_ddl(conn, [render(name, "order") for name in MACHINE_TEMPLATE_SETS["v1"]])
            cur.execute("UPDATE fsm_machines SET objects_version = 'v1' WHERE machine = 'order'")
            cur.execute("CALL fsm_order_send_v1('o-1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)")
    finally:
        conn.close()
    schema.migrate(old)
    with Store(fresh.dsn()) as store:
        store.migrate()
        store.define(order_machine("order"))
    with Store(old.dsn()) as store:
        assert not store.define(order_machine("order")).changed  # the new options have their defaults
        assert store.send("order", "o-1", "ship").version == 3
        assert [h.event for h in store.history("order", "o-1")] == [None, "pay", "ship"]
    admin = pymysql.connect(**server.connect_kwargs(database=False))
    try:  # the drift test compares everything; here: the type's own triggers are the current ones
        a, b = schema_of(admin, old.database), schema_of(admin, fresh.database)
    finally:
        admin.close()
    assert a["triggers"] == b["triggers"]
    assert [r[0] for r in a["triggers"] if r[1] == "fsm_order" and r[3] == "UPDATE"] == ["fsm_order_bu_v13"]


def test_a_failed_trigger_swap_puts_the_old_trigger_back(make_database) -> None:  # type: ignore[no-untyped-def]
    from pyfsm import db
    from pyfsm.schema import install as schema
    from pyfsm.schema.ddl import execute_ddl
    from pyfsm.schema.resources import render
    from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS, replace_machine_triggers

    settings = make_database()
    schema.migrate(settings)
    conn = db.connect(settings)

    def fail(cur: Any) -> None:  # what a failed recount (or CREATE) under the lock looks like
        cur.execute("SELECT * FROM no_such_table")

    try:
        execute_ddl(conn, [render(name, "door") for name in MACHINE_TEMPLATE_SETS["v1"]])
        with pytest.raises(pymysql.err.MySQLError):
            replace_machine_triggers(conn, "door", [("trigger_bu_v1", "trigger_bu_v2")], "v2", while_locked=fail)
        with conn.cursor() as cur:
            cur.execute(
                "SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
                "AND event_object_table = 'fsm_door' AND event_manipulation = 'UPDATE'"
            )
            assert [r[0] for r in cur.fetchall()] == ["fsm_door_bu_v1"]  # not left without a transition trigger
            cur.execute("SELECT @@SESSION.lock_wait_timeout")
            assert cur.fetchone()[0] > 2  # the session's own setting is back
    finally:
        conn.close()


def test_an_interrupted_0004_migration_can_be_run_again(make_database, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Killed after the trigger swap (here: the left_at fill fails), the migration is run again
    and finishes: one trigger per kind, inserts and transitions work, counts are exact."""
    from helpers.common import fetch, order_machine

    from pyfsm import db
    from pyfsm.schema import install as schema
    from pyfsm.schema import upgrades
    from pyfsm.schema.ddl import execute_ddl
    from pyfsm.schema.resources import render
    from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS

    settings = make_database()
    schema.migrate(settings, revision="0003")
    conn = db.connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute("CALL fsm_define_v2('order', %s)", (order_machine("order").to_json(),))
            execute_ddl(conn, [render(t, "order") for t in MACHINE_TEMPLATE_SETS["v2"]])
            cur.execute("UPDATE fsm_machines SET objects_version = 'v2' WHERE machine = 'order'")
            for key in ("o-1", "o-2"):
                cur.execute("CALL fsm_order_send_v1(%s, 'pay', NULL, NULL, NULL, NULL, NULL, NULL)", (key,))
    finally:
        conn.close()

    def interrupted(*args: Any, **kwargs: Any) -> int:
        raise pymysql.err.OperationalError(2013, "Lost connection to server during query")

    monkeypatch.setattr(upgrades, "fill_left_at", interrupted)  # revision 0004 imports it from there
    monkeypatch.setattr(schema, "fill_left_at", interrupted)  # and the installer's own upgrade of a type
    with pytest.raises(Exception):  # noqa: B017 - whatever the interruption raised
        schema.migrate(settings)
    monkeypatch.undo()
    schema.migrate(settings)
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        triggers = fetch(
            raw,
            "SELECT trigger_name AS trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
            "AND event_object_table = 'fsm_order' ORDER BY trigger_name",
        )
        assert [t["trigger_name"] for t in triggers] == [
            "fsm_order_ai_v4",
            "fsm_order_bd_v1",
            "fsm_order_bi_v1",
            "fsm_order_bu_v13",
        ]  # and 0021's, 0022's, 0023's, 0024's, 0028's and 0029's swaps
        with Store(settings.dsn()) as store:
            store.create("order", "o-3")
            store.send("order", "o-1", "ship")
            assert store.counts("order") == {"new": 1, "paid": 1, "shipped": 1}
        rows = fetch(
            raw, "SELECT COUNT(*) AS n FROM fsm_order_transitions WHERE most_recent IS NULL AND left_at IS NULL"
        )
        assert rows[0]["n"] == 0  # every earlier state has its end
    finally:
        raw.close()


def test_0005_swaps_the_transition_trigger_of_existing_types(make_database) -> None:  # type: ignore[no-untyped-def]
    """A type installed at 0004 gets the v4 transition trigger: its history and instances stay,
    transitions go on, and the padded names v3 let through are refused from then on."""
    from helpers.common import fetch, order_machine

    from pyfsm import db
    from pyfsm.schema import install as schema
    from pyfsm.schema.ddl import execute_ddl
    from pyfsm.schema.resources import render
    from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS

    settings = make_database()
    schema.migrate(settings, revision="0004")
    conn = db.connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute("CALL fsm_define_v3('order', %s)", (order_machine("order").to_json(),))
            execute_ddl(conn, [render(t, "order") for t in MACHINE_TEMPLATE_SETS["v3"]])
            cur.execute("UPDATE fsm_machines SET objects_version = 'v3' WHERE machine = 'order'")
            cur.execute("CALL fsm_order_send_v1('o-1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)")
            cur.execute("CALL fsm_order_create_v1('o-2', NULL, NULL, NULL, NULL, NULL)")
            cur.execute("UPDATE fsm_order SET current_state = 'new  ' WHERE instance_key = 'o-2'")  # v3 stores it
            cur.execute("SELECT CONCAT('[', current_state, ']') FROM fsm_order WHERE instance_key = 'o-2'")
            assert cur.fetchone()[0] == "[new  ]"
    finally:
        conn.close()
    schema.migrate(settings, revision="0005")
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        triggers = fetch(
            raw,
            "SELECT trigger_name AS trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
            "AND event_object_table = 'fsm_order' AND event_manipulation = 'UPDATE'",
        )
        assert [t["trigger_name"] for t in triggers] == ["fsm_order_bu_v4"]
        # the padded state v3 stored was trimmed before the swap, as no transition
        assert fetch(
            raw, "SELECT CONCAT('[', current_state, ']') AS s, version FROM fsm_order WHERE instance_key = 'o-2'"
        ) == [{"s": "[new]", "version": 1}]
        assert fetch(
            raw,
            "SELECT COUNT(*) AS n FROM fsm_order_transitions t JOIN fsm_order i ON i.id = t.instance_id "
            "WHERE i.instance_key = 'o-2'",
        ) == [{"n": 1}]
        assert fetch(raw, "SELECT COUNT(*) AS n FROM fsm_v_instances WHERE machine = 'order'") == [{"n": 2}]
        assert fetch(raw, "SELECT objects_version FROM fsm_machines")[0]["objects_version"] == "v4"
        raw.cursor().execute("SET @fsm_event = 'ship '")
        with pytest.raises(pymysql.err.MySQLError) as info:
            raw.cursor().execute("UPDATE fsm_order SET current_state = 'shipped' WHERE instance_key = 'o-1'")
        assert info.value.args[0] == 31005
        raw.cursor().execute("SET @fsm_event = NULL")
        raw.cursor().execute("CALL fsm_order_send_v1('o-1', 'ship', NULL, NULL, NULL, NULL, NULL, NULL)")
        assert [
            r["event"]
            for r in fetch(
                raw,
                "SELECT event FROM fsm_order_transitions t JOIN fsm_order i "
                "ON i.id = t.instance_id WHERE i.instance_key = 'o-1' "
                "ORDER BY sort_key",
            )
        ] == [None, "pay", "ship"]
    finally:
        raw.close()


def test_0006_gives_existing_types_send_v2_and_the_v5_trigger(make_database) -> None:  # type: ignore[no-untyped-def]
    """A type installed at 0005 gets fsm_{type}_send_v2 and the v5 transition trigger: its history,
    instances and counters stay, Store.send (send_v2) and send_v1 both go on, and raw UPDATEs
    are still checked."""
    from helpers.common import fetch, order_machine

    from pyfsm import db
    from pyfsm.schema import install as schema
    from pyfsm.schema.ddl import execute_ddl
    from pyfsm.schema.resources import render
    from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS

    settings = make_database()
    schema.migrate(settings, revision="0005")
    conn = db.connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute("CALL fsm_define_v4('order', %s)", (order_machine("order").to_json(),))
            execute_ddl(conn, [render(t, "order") for t in MACHINE_TEMPLATE_SETS["v4"]])
            cur.execute("UPDATE fsm_machines SET objects_version = 'v4' WHERE machine = 'order'")
            for key in ("o-1", "o-2", "o-3"):
                cur.execute("CALL fsm_order_send_v1(%s, 'pay', NULL, NULL, NULL, NULL, NULL, NULL)", (key,))
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = DATABASE() "
                "AND routine_name = 'fsm_order_send_v2'"
            )
            assert cur.fetchone()[0] == 0
            # a counter row as a rebuild from states v3 stored padded could spell it (the key ignores it)
            cur.execute(
                "UPDATE fsm_state_counts SET state = 'paid  ' WHERE machine = 'order' AND state = 'paid' LIMIT 1"
            )
            assert cur.rowcount == 1
    finally:
        conn.close()
    schema.migrate(settings)
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        triggers = fetch(
            raw,
            "SELECT trigger_name AS trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
            "AND event_object_table = 'fsm_order' AND event_manipulation = 'UPDATE'",
        )
        assert [t["trigger_name"] for t in triggers] == [
            "fsm_order_bu_v13"
        ]  # and 0010's, 0021's, 0022's, 0023's, 0024's, 0028's and 0029's swaps
        assert (
            fetch(raw, "SELECT objects_version FROM fsm_machines")[0]["objects_version"] == MACHINE_OBJECTS_VERSION
        )  # 0007 to the head
        with Store(settings.dsn()) as store:
            sent = store.send("order", "o-1", "ship", metadata={"by": "test"})
            assert (sent.key, sent.event, sent.from_state, sent.to_state, sent.version, sent.sort_key) == (
                "o-1",
                "ship",
                "paid",
                "shipped",
                3,
                3,
            )
            assert [h.event for h in store.history("order", "o-1")] == [None, "pay", "ship"]
            assert store.history("order", "o-1")[-1].metadata == {"by": "test"}
            assert store.counts("order") == {"paid": 2, "shipped": 1}
        raw.cursor().execute("CALL fsm_order_send_v1('o-2', 'ship', NULL, NULL, NULL, NULL, NULL, NULL)")
        with pytest.raises(pymysql.err.MySQLError) as info:
            raw.cursor().execute("UPDATE fsm_order SET current_state = 'delivered' WHERE instance_key = 'o-3'")
        assert info.value.args[0] == 31005
        assert fetch(raw, "SELECT COUNT(*) AS n FROM fsm_v_instances WHERE machine = 'order'") == [{"n": 3}]
    finally:
        raw.close()


def test_a_clock_stepped_back_does_not_break_transitions(store, order, raw) -> None:  # type: ignore[no-untyped-def]
    from helpers.common import fetch

    store.create(order, "clock-1")
    raw.cursor().execute("SET TIMESTAMP = UNIX_TIMESTAMP() - 5")  # this session's clock, 5 s in the past
    raw.cursor().execute(f"CALL `fsm_{order.name}_send_v2`('clock-1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)")
    raw.cursor().execute("SET TIMESTAMP = DEFAULT")
    [first, second] = fetch(
        raw,
        f"SELECT created_at, left_at FROM `fsm_{order.name}_transitions` "
        "WHERE instance_id = (SELECT id FROM `fsm_" + order.name + "` "
        "WHERE instance_key = 'clock-1') ORDER BY sort_key",
    )
    assert first["left_at"] >= first["created_at"] and second["left_at"] is None


def test_0007_gives_existing_types_steps_v1(make_database) -> None:  # type: ignore[no-untyped-def]
    """A type installed at 0006 (object set v5) gets fsm_{type}_steps_v1 and its internal
    apply_step_v1, is marked v6, and a Worker with a batch commits its steps through them."""
    from helpers.common import fetch, order_machine

    from pyfsm import Process, Worker
    from pyfsm.schema import install as schema

    settings = make_database()
    schema.migrate(settings, revision="0006")
    process = Process.linear("lin", ["a", "b", "c"])
    for state in ("a", "b", "c"):
        process.register(state, lambda ctx: ctx.next())
    for machine in (order_machine("order"), process.machine):
        install_type_as_of(settings, machine, "v5")
    schema.migrate(settings)
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        assert {r["objects_version"] for r in fetch(raw, "SELECT objects_version FROM fsm_machines")} == {
            MACHINE_OBJECTS_VERSION
        }
        routines = {
            r["routine_name"]: r["security_type"]
            for r in fetch(
                raw,
                "SELECT routine_name AS routine_name, security_type AS security_type FROM information_schema.routines "
                "WHERE routine_schema = DATABASE() AND routine_name LIKE 'fsm_lin_%step%'",
            )
        }
        assert routines == {
            "fsm_lin_step_v2": "DEFINER",
            "fsm_lin_apply_step_v1": "INVOKER",
            "fsm_lin_steps_v1": "DEFINER",
        }
        with Store(settings.dsn()) as store:
            for n in range(6):
                store.create("lin", f"k{n}")
                store.enqueue("lin", f"k{n}")
            worker = Worker(store, [process], batch=6)
            assert worker.run_once() == 6
            worker.close()
            assert store.counts("lin") == {"done": 6}
        history = fetch(raw, "SELECT instance_id, COUNT(*) AS n FROM fsm_lin_transitions GROUP BY instance_id")
        assert [int(h["n"]) for h in history] == [4] * 6  # created, then a, b, c: each step once
    finally:
        raw.close()


def test_0008_swaps_the_writers_and_history_triggers_of_existing_types(make_database) -> None:  # type: ignore[no-untyped-def]
    """A type installed at 0007 (object set v6) gets bu_v6, ai_v4, hbi_v2 and hbu_v3 in place
    of bu_v5, ai_v3, hbi_v1 and hbu_v2, is marked v7, keeps its instances and history, and
    from then on a guard of the old form (the instance id alone) lets no history write in."""
    from helpers.common import errno_of, fetch, order_machine

    from pyfsm.schema import install as schema

    settings = make_database()
    schema.migrate(settings, revision="0007")
    install_type_as_of(
        settings,
        order_machine("order"),
        "v6",
        "CALL fsm_order_send_v2('o-1', 'pay', NULL, NULL, NULL, 'r-1', NULL, NULL)",
    )
    schema.migrate(settings)
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        triggers = fetch(
            raw,
            "SELECT trigger_name AS trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
            "AND event_object_table LIKE 'fsm\\_order%%' ORDER BY trigger_name",
        )
        assert [t["trigger_name"] for t in triggers] == [
            "fsm_order_ai_v4",
            "fsm_order_bd_v1",
            "fsm_order_bi_v1",
            "fsm_order_bu_v13",
            "fsm_order_hbd_v1",
            "fsm_order_hbi_v3",
            "fsm_order_hbu_v5",
        ]  # and 0010's, 0017's, 0021's, 0022's, 0023's, 0024's, 0028's and 0029's swaps
        assert fetch(raw, "SELECT objects_version FROM fsm_machines") == [{"objects_version": MACHINE_OBJECTS_VERSION}]
        assert fetch(raw, "SELECT fsm_valid_utf8_v1(0xED959C) AS ok, fsm_valid_utf8_v1(0xEDA080) AS bad") == [
            {"ok": 1, "bad": 0}
        ]
        with Store(settings.dsn()) as store:
            assert store.send("order", "o-1", "ship", request_id="r-2").version == 3
            assert [(h.event, h.request_id) for h in store.history("order", "o-1")] == [
                (None, None),
                ("pay", "r-1"),
                ("ship", "r-2"),
            ]
            instance_id = store.get("order", "o-1").id
        raw.cursor().execute("SET @fsm_guard = %s", (instance_id,))
        assert (
            errno_of(
                raw,
                "INSERT INTO fsm_order_transitions (instance_id, sort_key, to_state, data_after, "
                "metadata, definition_version, source, created_at) "
                "VALUES (%s, 9, 'paid', '{}', '{}', 1, 'hand', UTC_TIMESTAMP(6))",
                (instance_id,),
            )
            == 31012
        )
    finally:
        raw.close()


def test_0009_gives_existing_types_send_many_v1(make_database) -> None:  # type: ignore[no-untyped-def]
    """A type installed at 0008 (object set v7) gets fsm_{type}_send_many_v1 and its internal
    apply_send_v1, is marked v8, and Store.send_many goes through them."""
    from helpers.common import fetch, order_machine

    from pyfsm import TransitionResult
    from pyfsm.schema import install as schema

    settings = make_database()
    schema.migrate(settings, revision="0008")
    install_type_as_of(
        settings,
        order_machine("order"),
        "v7",
        "CALL fsm_order_send_v2('o-1', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    schema.migrate(settings)
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        # 0010 and later revisions too
        assert fetch(raw, "SELECT objects_version FROM fsm_machines") == [{"objects_version": MACHINE_OBJECTS_VERSION}]
        routines = {
            r["routine_name"]: r["security_type"]
            for r in fetch(
                raw,
                "SELECT routine_name AS routine_name, security_type AS security_type FROM information_schema.routines "
                "WHERE routine_schema = DATABASE() AND routine_name LIKE 'fsm_order_%send%'",
            )
        }
        assert routines == {
            "fsm_order_send_v1": "DEFINER",
            "fsm_order_send_v2": "DEFINER",
            "fsm_order_apply_send_v1": "INVOKER",
            "fsm_order_send_many_v1": "DEFINER",
            "fsm_order_send_many_v2": "DEFINER",  # 0018's
            "fsm_order_send_v3": "DEFINER",
            "fsm_order_send_v4": "DEFINER",
            "fsm_order_send_v5": "DEFINER",
            "fsm_order_send_many_v3": "DEFINER",
        }  # 0020's, 0022's, 0025's
        with Store(settings.dsn()) as store:
            out = store.send_many("order", [("o-1", "ship"), ("o-2", "pay")])
            assert [(o.key, o.to_state) for o in out if isinstance(o, TransitionResult)] == [
                ("o-1", "shipped"),
                ("o-2", "paid"),
            ]
    finally:
        raw.close()


def test_0010_swaps_the_transition_and_history_update_triggers(make_database) -> None:  # type: ignore[no-untyped-def]
    """A type installed at 0009 (object set v8) gets bu_v7 and hbu_v4 in place of bu_v6 and
    hbu_v3, is marked v9 (then v10 and hbu_v5 by 0017, v13 and bu_v8 by 0021, v14 and bu_v9 by 0022, v15 and bu_v10 by 0023, v16 and bu_v11 by 0024, v18 and bu_v12 by 0028, v19 and bu_v13 by 0029), keeps its
    instances, history and counters, and its history still refuses every change pyfsm does not
    make, with or without a guard left behind."""
    from helpers.common import errno_of, fetch, order_machine

    from pyfsm.schema import install as schema

    settings = make_database()
    schema.migrate(settings, revision="0009")
    install_type_as_of(
        settings,
        order_machine("order"),
        "v8",
        "CALL fsm_order_send_v2('o-1', 'pay', NULL, NULL, NULL, 'r-1', NULL, NULL)",
        "CALL fsm_order_send_v2('o-2', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    schema.migrate(settings)
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        triggers = fetch(
            raw,
            "SELECT trigger_name AS trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
            "AND event_manipulation = 'UPDATE' ORDER BY trigger_name",
        )
        assert [t["trigger_name"] for t in triggers] == ["fsm_order_bu_v13", "fsm_order_hbu_v5"]
        assert fetch(raw, "SELECT objects_version FROM fsm_machines") == [{"objects_version": MACHINE_OBJECTS_VERSION}]
        with Store(settings.dsn()) as store:
            assert store.send("order", "o-1", "ship", request_id="r-2").version == 3
            assert [(h.event, h.request_id, h.most_recent) for h in store.history("order", "o-1")] == [
                (None, None, False),
                ("pay", "r-1", False),
                ("ship", "r-2", True),
            ]
            assert store.counts("order") == {"paid": 1, "shipped": 1}
            instance_id = store.get("order", "o-1").id
        # the flip's fast path needs the guard of that very write; a change without one, or
        # with another instance's or time's, is refused as before
        update = (
            "UPDATE fsm_order_transitions SET most_recent = NULL, left_at = %s "
            "WHERE instance_id = %s AND most_recent = 1"
        )
        assert errno_of(raw, update, ("2030-01-01 00:00:00.000000", instance_id)) == 31012
        raw.cursor().execute("SET @fsm_guard = %s", (f"{instance_id + 1}/2030-01-01 00:00:00.000000",))
        assert errno_of(raw, update, ("2030-01-01 00:00:00.000000", instance_id)) == 31012
        raw.cursor().execute("SET @fsm_guard = NULL")
        assert (
            errno_of(raw, "UPDATE fsm_order_transitions SET event = 'x' WHERE instance_id = %s", (instance_id,))
            == 31012
        )
        # no guard and left_at left NULL: NULL <=> NULL must not open the fast path (review)
        assert (
            errno_of(
                raw,
                "UPDATE fsm_order_transitions SET most_recent = NULL, to_state = 'new', "
                "data_after = '{\"x\": 1}' WHERE instance_id = %s AND most_recent = 1",
                (instance_id,),
            )
            == 31012
        )
        assert fetch(
            raw, "SELECT to_state FROM fsm_order_transitions WHERE instance_id = %s AND most_recent = 1", (instance_id,)
        ) == [{"to_state": "shipped"}]
    finally:
        raw.close()


def test_0011_gives_back_the_grants_on_the_procedures_it_replaces(make_database, server) -> None:  # type: ignore[no-untyped-def]
    """0011 drops and creates fsm_define_v4 and fsm_force_unlock_v2, which revokes every grant
    on them: grants made by hand, not by `pyfsm grant`, are given back too."""
    from pyfsm.schema import install as schema

    settings = make_database()
    schema.migrate(settings, revision="0010")
    user = f"by_hand_{settings.database[-8:]}"
    admin = pymysql.connect(**server.connect_kwargs(database=False))
    try:
        cur = admin.cursor()
        cur.execute(f"CREATE USER '{user}'@'localhost' IDENTIFIED BY 'Pw-by-hand-1'")
        cur.execute(f"GRANT EXECUTE ON PROCEDURE `{settings.database}`.`fsm_force_unlock_v2` TO '{user}'@'localhost'")
        cur.execute(
            f"GRANT EXECUTE, ALTER ROUTINE ON PROCEDURE `{settings.database}`.`fsm_define_v4` "
            f"TO '{user}'@'localhost' WITH GRANT OPTION"
        )
        cur.execute(f"SHOW GRANTS FOR '{user}'@'localhost'")
        before = sorted(row[0] for row in cur.fetchall())
        schema.migrate(settings)
        cur.execute(f"SHOW GRANTS FOR '{user}'@'localhost'")
        assert sorted(row[0] for row in cur.fetchall()) == before
        assert any("`fsm_define_v4`" in g and "GRANT OPTION" in g for g in before)
    finally:
        admin.cursor().execute(f"DROP USER IF EXISTS '{user}'@'localhost'")
        admin.close()


def test_an_interrupted_first_replay_is_resumed_by_the_revisions(make_database) -> None:  # type: ignore[no-untyped-def]
    """A first migration by the revisions (an older pyfsm's, or migrate(revision=...)) that
    stopped inside 0001 leaves pyfsm's tables and an empty version table without the fresh
    install's mark: the next migrate resumes it by the revisions, not by a fresh install."""
    from helpers.common import order_machine

    from pyfsm import db
    from pyfsm.schema import install as schema

    settings = make_database()
    schema.migrate(settings, revision="0001")
    conn = db.connect(settings)
    try:
        with conn.cursor() as cur:  # as if stopped before 0001 recorded itself, one routine short
            cur.execute("DELETE FROM fsm_alembic_version")
            cur.execute("DROP PROCEDURE fsm_counts_v1")
        assert schema.current_revision(conn) is None
        schema.migrate(settings)
        assert schema.current_revision(conn) == schema.HEAD_REVISION
    finally:
        conn.close()
    with Store(settings.dsn()) as store:
        store.define(order_machine("order"))
        assert store.send("order", "o-1", "pay").to_state == "paid"


def test_an_interrupted_fresh_install_is_finished_and_unmarked(make_database) -> None:  # type: ignore[no-untyped-def]
    from pyfsm import db
    from pyfsm.schema import install as schema

    settings = make_database()
    conn = db.connect(settings)
    try:
        assert schema.install_fresh(conn)  # stopped before the head was recorded
        comment = (
            "SELECT table_comment FROM information_schema.tables WHERE table_schema = DATABASE() "
            "AND table_name = 'fsm_alembic_version'"
        )
        with conn.cursor() as cur:
            cur.execute(comment)
            assert cur.fetchone()[0] == schema.FRESH_MARK
            cur.execute("DROP PROCEDURE fsm_send_v2")  # stopped halfway, even
        schema.migrate(settings)
        with conn.cursor() as cur:
            cur.execute(comment)
            assert cur.fetchone()[0] == ""
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = DATABASE() "
                "AND routine_name = 'fsm_send_v2'"
            )
            assert cur.fetchone()[0] == 1
        assert schema.current_revision(conn) == schema.HEAD_REVISION
    finally:
        conn.close()


def test_sync_leaves_the_owners_own_triggers_alone(make_database) -> None:  # type: ignore[no-untyped-def]
    """A trigger the database's owners put on a type's table (an audit trigger) is not pyfsm's:
    upgrading the type's own triggers keeps it, and it keeps firing."""
    from helpers.common import fetch, order_machine

    from pyfsm.schema import install as schema

    settings = make_database()
    schema.migrate(settings)
    install_type_as_of(
        settings,
        order_machine("order"),
        "v8",
        "CREATE TABLE audit (instance_key VARCHAR(191), state VARCHAR(64))",
        "CREATE TRIGGER app_audit AFTER UPDATE ON fsm_order FOR EACH ROW "
        "INSERT INTO audit VALUES (NEW.instance_key, NEW.current_state)",
    )
    with Store(settings.dsn()) as store:
        store.sync("order")
        store.send("order", "o-1", "pay")
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        triggers = {
            t["trigger_name"]
            for t in fetch(
                raw,
                "SELECT trigger_name AS trigger_name FROM information_schema.triggers "
                "WHERE trigger_schema = DATABASE()",
            )
        }
        assert {"app_audit", "fsm_order_bu_v13", "fsm_order_hbu_v5"} <= triggers
        assert not {"fsm_order_bu_v6", "fsm_order_bu_v7", "fsm_order_bu_v8"} & triggers
        assert fetch(raw, "SELECT * FROM audit") == [{"instance_key": "o-1", "state": "paid"}]
    finally:
        raw.close()


def test_an_interrupted_upgrade_of_a_type_is_finished_by_the_next_define(make_database, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A type an older pyfsm installed stays marked at its old set until all of its upgrade is
    done: one that stopped after the trigger swap is finished by the next Store.define."""
    from helpers.common import fetch, order_machine

    from pyfsm.schema import install as schema

    settings = make_database()
    schema.migrate(settings)
    machine = order_machine("order")
    install_type_as_of(settings, machine, "v4")  # no send_v2 yet, transition trigger bu_v4

    def stop(*args: Any, **kwargs: Any) -> int:
        raise pymysql.err.OperationalError(2013, "lost connection (test)")

    monkeypatch.setattr(schema, "fill_left_at", stop)  # right after the swap, before the procedures
    with Store(settings.dsn()) as store, pytest.raises(Exception, match="lost connection"):
        store.sync("order")
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        assert fetch(raw, "SELECT objects_version FROM fsm_machines") == [{"objects_version": "v4"}]
        monkeypatch.undo()
        with Store(settings.dsn()) as store:
            store.define(machine)  # the same definition: only the objects are brought up to date
            assert store.send("order", "o-1", "pay").to_state == "paid"
        assert fetch(raw, "SELECT objects_version FROM fsm_machines") == [{"objects_version": MACHINE_OBJECTS_VERSION}]
    finally:
        raw.close()


def test_0017_swaps_the_history_triggers_that_let_a_null_guard_through(make_database) -> None:  # type: ignore[no-untyped-def]
    """A type installed at 0016 (object set v9) lets `SET most_recent = NULL` through with no
    guard (hbu_v4); after 0017 it has hbi_v3 and hbu_v5, is marked v10, keeps its history and
    counters, refuses every change of every column of its history, and still transitions."""
    from helpers.common import errno_of, fetch, order_machine
    from helpers.history_guard import refused_updates

    from pyfsm.schema import install as schema

    settings = make_database()
    schema.migrate(settings, revision="0016")
    install_type_as_of(
        settings,
        order_machine("order"),
        "v9",
        "CALL fsm_order_send_v2('o-1', 'pay', NULL, NULL, NULL, 'r-1', NULL, NULL)",
        "CALL fsm_order_send_v2('o-2', 'pay', NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    raw = pymysql.connect(**settings.connect_kwargs())
    try:
        ids = {r["instance_key"]: r["id"] for r in fetch(raw, "SELECT id, instance_key FROM fsm_order")}
        flip = "UPDATE fsm_order_transitions SET most_recent = NULL WHERE instance_id = %s AND most_recent = 1"
        raw.autocommit(False)
        assert errno_of(raw, flip, (ids["o-1"],)) is None  # the defect 0017 mends: accepted by hbu_v4
        raw.rollback()
        raw.autocommit(True)
        schema.migrate(settings)
        triggers = fetch(
            raw,
            "SELECT trigger_name AS name FROM information_schema.triggers "
            "WHERE trigger_schema = DATABASE() AND event_object_table = 'fsm_order_transitions' "
            "ORDER BY trigger_name",
        )
        assert [t["name"] for t in triggers] == ["fsm_order_hbd_v1", "fsm_order_hbi_v3", "fsm_order_hbu_v5"]
        assert fetch(raw, "SELECT objects_version FROM fsm_machines") == [{"objects_version": MACHINE_OBJECTS_VERSION}]
        assert errno_of(raw, flip, (ids["o-1"],)) == 31012
        assert refused_updates(raw, "order", ids["o-1"], ids["o-2"]) == []
        with Store(settings.dsn()) as store:
            assert store.send("order", "o-1", "ship", request_id="r-2").version == 3
            assert [(h.event, h.request_id, h.most_recent) for h in store.history("order", "o-1")] == [
                (None, None, False),
                ("pay", "r-1", False),
                ("ship", "r-2", True),
            ]
            assert store.counts("order") == {"paid": 1, "shipped": 1}
    finally:
        raw.close()


def test_0016_finds_its_index_built_by_an_interrupted_run(make_database) -> None:  # type: ignore[no-untyped-def]
    """An ALTER that built fsm_locks_held before the revision was recorded (a lost connection):
    running the migration again goes on instead of failing with 1061."""
    from helpers.common import fetch

    from pyfsm.schema import install as schema
    from pyfsm.schema.resources import read_frozen

    settings = make_database()
    schema.migrate(settings, revision="0015")
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        conn.cursor().execute(read_frozen("changes/fsm_locks_held.sql", revisions="0016"))
        schema.migrate(settings)
        assert schema.current_revision(conn) == HEAD_REVISION
        assert fetch(
            conn,
            "SELECT column_name AS column_name FROM information_schema.statistics WHERE table_schema = DATABASE() "
            "AND table_name = 'fsm_locks' AND index_name = 'fsm_locks_held' ORDER BY seq_in_index",
        ) == [{"column_name": "unlocked_at"}, {"column_name": "expires_at"}]
    finally:
        conn.close()
