"""Reserved machine names: the database (fsm_reserved_name_v1, asked by fsm_define_v4) and
Python (pyfsm.resources.RESERVED_MACHINE_NAMES) refuse the same names, so a type a DBA
defines in SQL can always be synced, and none can take the name of pyfsm's own objects."""

from __future__ import annotations

import json
import re
from typing import Any

import pymysql
import pytest
from conftest import errno_of, fetch

from pyfsm import InvalidArgument, InvalidDefinition, schema
from pyfsm.resources import RESERVED_MACHINE_NAMES, check_machine_name, read_sql

DEFINITION = json.dumps({"states": ["a", "b"], "start": ["a"],
                         "transitions": [{"event": "go", "from": ["a"], "to": "b"}]})


def python_reserves(name: str) -> bool:
    try:
        check_machine_name(name)
    except InvalidArgument:
        return True
    return False


def test_the_sql_list_is_the_python_list() -> None:
    body = read_sql("functions/fsm_reserved_name.sql").split("RETURN", 1)[1]
    listed = set(re.findall(r"'([a-z0-9_]+)'", body.split(" IN (", 1)[1].split(")", 1)[0]))
    assert listed == RESERVED_MACHINE_NAMES, (listed - RESERVED_MACHINE_NAMES, RESERVED_MACHINE_NAMES - listed)


def test_every_table_and_view_of_pyfsm_has_a_reserved_name(raw: Any) -> None:
    """What a fresh install creates (fsm_<name>, fsm_v_<name>) is reserved in both places."""
    objects = [r["table_name"] for r in fetch(
        raw, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
             "AND table_name LIKE 'fsm\\_%'")]
    machines = {r["machine"] for r in fetch(raw, "SELECT machine FROM fsm_machines")}  # other tests' types
    own = {name[len("fsm_"):] for name in objects
           if not any(name in (f"fsm_{m}", f"fsm_{m}_transitions", f"fsm_v_{m}") for m in machines)}
    assert own, objects
    for name in own:
        assert python_reserves(name), name
        assert fetch(raw, "SELECT fsm_reserved_name_v1(%s) AS r", (name,)) == [{"r": 1}], name


@pytest.mark.parametrize("name", [*sorted(RESERVED_MACHINE_NAMES), "v_orders", "order_transitions"])
def test_fsm_define_v4_refuses_each_reserved_name_and_stores_nothing(raw: Any, name: str) -> None:
    before = fetch(raw, "SELECT COUNT(*) AS n FROM fsm_definitions")
    assert errno_of(raw, "CALL fsm_define_v4(%s, %s)", (name, DEFINITION)) == 31009
    assert fetch(raw, "SELECT COUNT(*) AS n FROM fsm_definitions") == before
    assert fetch(raw, "SELECT machine FROM fsm_machines WHERE machine = %s", (name,)) == []


@pytest.mark.parametrize("name", ["orders", "lock", "locks2", "relay_leader", "my_runs", "transitions",
                                  "v", "vx_orders", "order_transitions_log", "Locks", "V_orders", None])
def test_the_database_and_python_agree_on_other_names(raw: Any, name: str | None) -> None:
    (row,) = fetch(raw, "SELECT fsm_reserved_name_v1(%s) AS r", (name,))
    valid_but_reserved = name is not None and python_reserves(name) and re.fullmatch(r"[a-z][a-z0-9_]*", name)
    assert row["r"] == (1 if valid_but_reserved else 0), name


def test_0014_refuses_the_names_0013_let_through_and_keeps_grants(make_database, server) -> None:  # type: ignore[no-untyped-def]
    """At 0013 fsm_define_v4 took relay_leaders and operator_log; 0014 refuses them and gives
    back a grant made by hand on the procedure it replaces."""
    settings = make_database()
    schema.migrate(settings, revision="0013")
    user = f"res_hand_{settings.database[-8:]}"
    admin = pymysql.connect(**server.connect_kwargs(database=False))
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        cur = admin.cursor()
        cur.execute(f"CREATE USER '{user}'@'localhost' IDENTIFIED BY 'Pw-by-hand-1'")
        cur.execute(f"GRANT EXECUTE ON PROCEDURE `{settings.database}`.`fsm_define_v4` TO '{user}'@'localhost'")
        cur.execute(f"SHOW GRANTS FOR '{user}'@'localhost'")
        before = sorted(row[0] for row in cur.fetchall())
        # the defect: accepted at 0013; such a type blocks 0014, which says how to remove it
        assert errno_of(conn, "CALL fsm_define_v4('operator_log', %s)", (DEFINITION,)) is None
        with pytest.raises(InvalidDefinition, match="DELETE FROM fsm_rules") as refused:
            schema.migrate(settings)
        assert refused.value.errno == 31001 and refused.value.machine == "operator_log"
        assert schema.current_revision(conn) == "0013"
        assert fetch(conn, "SELECT COUNT(*) AS n FROM information_schema.routines WHERE routine_schema = DATABASE() "
                           "AND routine_name = 'fsm_reserved_name_v1'") == [{"n": 0}]
        for table in ("fsm_rules", "fsm_states", "fsm_definitions", "fsm_machines"):
            conn.cursor().execute(f"DELETE FROM {table} WHERE machine IN ('operator_log')")
        schema.migrate(settings)
        assert schema.current_revision(conn) == schema.HEAD_REVISION
        for name in ("operator_log", "relay_leaders"):
            assert errno_of(conn, "CALL fsm_define_v4(%s, %s)", (name, DEFINITION)) == 31009
        assert fetch(conn, "SELECT machine FROM fsm_machines") == []
        assert errno_of(conn, "CALL fsm_define_v4('ticket', %s)", (DEFINITION,)) is None
        cur.execute(f"SHOW GRANTS FOR '{user}'@'localhost'")
        assert sorted(row[0] for row in cur.fetchall()) == before
        assert any("`fsm_define_v4`" in g for g in before)
    finally:
        admin.cursor().execute(f"DROP USER IF EXISTS '{user}'@'localhost'")
        admin.close()
        conn.close()
