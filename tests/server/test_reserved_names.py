"""Reserved machine names: the database (fsm_reserved_name_v1, asked by fsm_define_v5) and
Python (pyfsm.resources) reserve the same names, so a type a DBA defines in SQL can always be
synced, and no type's table, view or procedure can take the name of one of pyfsm's own."""

from __future__ import annotations

import json
import re
from typing import Any

import pymysql
import pytest
from helpers.common import errno_of, fetch

from pyfsm import InvalidArgument, Store
from pyfsm.schema import attached
from pyfsm.schema import install as schema
from pyfsm.schema.resources import (
    MACHINE_NAME,
    RESERVED_FOR_NEW_TYPES,
    RESERVED_MACHINE_NAMES,
    check_machine_name,
    read_sql,
)

DEFINITION = json.dumps(
    {"states": ["a", "b"], "start": ["a"], "transitions": [{"event": "go", "from": ["a"], "to": "b"}]}
)
SQL_RESERVED = RESERVED_MACHINE_NAMES | RESERVED_FOR_NEW_TYPES


def python_reserves(name: str) -> bool:
    try:
        check_machine_name(name)
    except InvalidArgument:
        return True
    return name in RESERVED_FOR_NEW_TYPES


def test_the_sql_list_is_the_python_lists() -> None:
    body = read_sql("functions/fsm_reserved_name_v2.sql").split("RETURN", 1)[1]
    listed = set(re.findall(r"'([a-z0-9_]+)'", body.split(" IN (", 1)[1].split(")", 1)[0]))
    assert listed == SQL_RESERVED, (listed - SQL_RESERVED, SQL_RESERVED - listed)
    assert not RESERVED_MACHINE_NAMES & RESERVED_FOR_NEW_TYPES


def test_no_type_can_spell_one_of_pyfsms_objects(raw: Any, order: Any) -> None:
    """Every name of a type's own objects (fsm_<m>, fsm_v_<m>, fsm_<m>_history_v1, its
    triggers...) that is also the name of a global object of pyfsm's of the same kind (tables
    and views share one namespace, procedures, functions and triggers each have their own)
    gives a reserved m."""
    everything = [
        (r["kind"], r["name"])
        for r in fetch(
            raw,
            "SELECT 'table' AS kind, table_name AS name FROM information_schema.tables "
            "WHERE table_schema = DATABASE() "
            "UNION SELECT LOWER(routine_type), routine_name FROM information_schema.routines "
            "WHERE routine_schema = DATABASE() "
            "UNION SELECT 'trigger', trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE()",
        )
    ]
    machines = [r["machine"] for r in fetch(raw, "SELECT machine FROM fsm_machines")]  # other tests' types too
    own = re.compile(rf"fsm_(v_)?{order.name}(_.*)?")
    patterns = {
        (kind, re.sub(rf"^fsm_(v_)?{order.name}", lambda m: f"fsm_{m.group(1) or ''}<m>", name))
        for kind, name in everything
        if own.fullmatch(name)
    }
    assert {
        ("table", "fsm_<m>"),
        ("table", "fsm_v_<m>"),
        ("table", "fsm_<m>_transitions"),
        ("procedure", "fsm_<m>_history_v1"),
        ("trigger", "fsm_<m>_bu_v13"),
    } <= patterns, patterns
    # an attached type's objects (pyfsm.schema.attached) exist only once it is attached: their
    # names are taken from the templates, so a global object they could spell is found too
    patterns |= {
        (
            "procedure" if "/procedures/" in t else "trigger",
            attached.object_name(t, "m").replace("fsm_m_", "fsm_<m>_", 1),
        )
        for t in attached.ALL_OBJECTS
    }
    global_ = [
        (kind, name)
        for kind, name in everything
        if not any(re.fullmatch(rf"fsm_(v_)?{re.escape(m)}(_.*)?", name) for m in machines)
    ]
    assert ("procedure", "fsm_account_history_v1") in global_ and ("table", "fsm_locks") in global_
    spelled = set()
    for kind, pattern in patterns:
        head, tail = pattern.split("<m>")
        for other_kind, name in global_:
            if (
                other_kind == kind
                and name.startswith(head)
                and name.endswith(tail)
                and len(name) > len(head) + len(tail)
            ):
                m = name[len(head) : len(name) - len(tail)]
                if MACHINE_NAME.fullmatch(m):
                    spelled.add(m)
                    assert python_reserves(m), (m, pattern, name)
                    assert fetch(raw, "SELECT fsm_reserved_name_v2(%s) AS r", (m,)) == [{"r": 1}], m
    assert {"account", "locks", "operator_log", "v_runs"} <= spelled, spelled


@pytest.mark.parametrize("name", [*sorted(SQL_RESERVED), "v_orders", "order_transitions"])
def test_fsm_define_v6_refuses_each_reserved_name_and_stores_nothing(raw: Any, name: str) -> None:
    before = fetch(raw, "SELECT COUNT(*) AS n FROM fsm_definitions")
    assert errno_of(raw, "CALL fsm_define_v6(%s, %s)", (name, DEFINITION)) == 31009
    assert fetch(raw, "SELECT COUNT(*) AS n FROM fsm_definitions") == before
    assert fetch(raw, "SELECT machine FROM fsm_machines WHERE machine = %s", (name,)) == []


@pytest.mark.parametrize(
    "name",
    [
        "orders",
        "lock",
        "locks2",
        "relay_leader",
        "my_runs",
        "transitions",
        "accounts2",
        "v",
        "vx_orders",
        "order_transitions_log",
        "Locks",
        "V_orders",
        None,
    ],
)
def test_the_database_and_python_agree_on_other_names(raw: Any, name: str | None) -> None:
    (row,) = fetch(raw, "SELECT fsm_reserved_name_v2(%s) AS r", (name,))
    valid_but_reserved = name is not None and python_reserves(name) and re.fullmatch(r"[a-z][a-z0-9_]*", name)
    assert row["r"] == (1 if valid_but_reserved else 0), name


def test_an_invalid_name_is_refused_as_invalid_not_as_reserved(raw: Any) -> None:
    with raw.cursor() as cur:
        for name in ("v_Orders", "x" * 40 + "_transitions"):
            with pytest.raises(pymysql.err.OperationalError) as refused:
                cur.execute("CALL fsm_define_v5(%s, %s)", (name, DEFINITION))
            assert refused.value.args[0] == 31009 and "must match" in refused.value.args[1], name


def test_a_type_defined_before_its_name_was_reserved_keeps_it(make_database) -> None:  # type: ignore[no-untyped-def]
    """At 0013 a DBA could define operator_log and account with fsm_define_v4 (which, deprecated,
    still accepts them). After 0014 fsm_define_v5 refuses both for a new type, gives an
    existing one a new version, and account's type works but for its history procedure."""
    settings = make_database()
    schema.migrate(settings, revision="0013")
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        for name in ("operator_log", "account"):
            assert errno_of(conn, "CALL fsm_define_v4(%s, %s)", (name, DEFINITION)) is None
        schema.migrate(settings)
        assert errno_of(conn, "CALL fsm_define_v5('relay_leaders', %s)", (DEFINITION,)) == 31009
        assert errno_of(conn, "CALL fsm_define_v4('relay_leaders', %s)", (DEFINITION,)) is None  # unchanged
        changed = DEFINITION.replace('"b"]', '"b", "c"]')
        assert fetch(conn, "CALL fsm_define_v5('account', %s)", (changed,))[0]["version"] == 2
        with Store(settings.dsn()) as store:
            store.sync("account")
            assert store.send("account", "a-1", "go").to_state == "b"
            with pytest.raises(InvalidArgument, match="reserved"):
                store.sync("operator_log")
    finally:
        conn.close()
