"""A database's schema, comparable across databases (migrated against fresh, node against
node), and a type installed as an older pyfsm left it."""

from __future__ import annotations

from typing import Any

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import render
from pyfsm.schema.upgrades import MACHINE_TEMPLATE_SETS


def schema_of(conn: Any, database: str) -> dict[str, Any]:
    """Everything about a database's schema that a migration could get wrong, comparable
    across databases: tables and their options, columns in order, indexes, checks, routines
    and triggers by body, parameters, views by definition."""
    cur = conn.cursor()
    queries = {
        "tables": "SELECT table_name, table_type, engine, table_collation, create_options "
        "FROM information_schema.tables WHERE table_schema = %s",
        "columns": "SELECT table_name, column_name, ordinal_position, column_type, is_nullable, column_default, "
        "collation_name, extra FROM information_schema.columns WHERE table_schema = %s",
        "indexes": "SELECT table_name, index_name, seq_in_index, column_name, non_unique "
        "FROM information_schema.statistics WHERE table_schema = %s",
        # check_constraints has no table_name on MySQL (a MariaDB extension), and MariaDB's check
        # names repeat across tables (a JSON column's check is named after the column): the
        # natural join matches on every column the two views share, which is exact on both
        "checks": "SELECT table_name, constraint_name, check_clause FROM information_schema.table_constraints "
        "NATURAL JOIN information_schema.check_constraints WHERE constraint_schema = %s "
        "AND constraint_type = 'CHECK'",
        "routines": "SELECT routine_name, routine_type, routine_definition, sql_mode, security_type, sql_data_access "
        "FROM information_schema.routines WHERE routine_schema = %s",
        "triggers": "SELECT trigger_name, event_object_table, action_timing, event_manipulation, action_statement, "
        "action_order, sql_mode FROM information_schema.triggers WHERE trigger_schema = %s",
        "params": "SELECT specific_name, ordinal_position, parameter_name, dtd_identifier "
        "FROM information_schema.parameters WHERE specific_schema = %s",
        "views": "SELECT table_name, view_definition, security_type, check_option "
        "FROM information_schema.views WHERE table_schema = %s",
    }
    out = {}
    for label, sql in queries.items():
        cur.execute(sql, (database,))
        # a view's definition names its database: compare it without
        out[label] = sorted(tuple(str(v).replace(f"`{database}`.", "") for v in row) for row in cur.fetchall())
    return out


def install_type_as_of(settings: Any, machine: Any, objects_version: str, *statements: str) -> None:
    """Define ``machine`` with the per-type object set an older pyfsm installed (fsm_define_v4,
    so from revision 0005 on), then run ``statements`` on it."""
    conn = db.connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute("CALL fsm_define_v4(%s, %s)", (machine.name, machine.to_json()))
            execute_ddl(conn, [render(t, machine.name) for t in MACHINE_TEMPLATE_SETS[objects_version]])
            cur.execute(
                "UPDATE fsm_machines SET objects_version = %s WHERE machine = %s", (objects_version, machine.name)
            )
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()
