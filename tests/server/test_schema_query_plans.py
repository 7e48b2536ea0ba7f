"""pyfsm's reads of information_schema look up the one database they need, on a server with many.

On MariaDB, information_schema.TRIGGERS (and TABLES, COLUMNS, VIEWS) is built by reading the
table definitions and trigger files of the databases the filter names; a filter it cannot use
as a lookup reads every database of the server. `TRIGGER_SCHEMA = DATABASE()` was such a filter
(`EVENT_OBJECT_SCHEMA`, the table's schema and always the trigger's too, is one it uses): `pyfsm
check`, attach and define read every trigger of every database, which in the MariaDB CI pass
(many test databases at once) made one `pyfsm check` test take 24 s against 5 s alone. Each named
query that reads information_schema is EXPLAINed here and must not scan all databases.

MySQL's information_schema is a set of views over its data dictionary's indexed tables, where
no such plan exists; this check is MariaDB's (its "Scanned N databases" note).
"""

from __future__ import annotations

import re

import pymysql
import pytest
from helpers.common import is_mariadb

from pyfsm.db import Settings, queries

#: The named queries that read information_schema, and sample arguments (a list for `IN %s`).
INFORMATION_SCHEMA_QUERIES: dict[str, tuple[object, ...]] = {
    "schema_has_column": ("fsm_x", "data"),
    "schema_machine_triggers": ("fsm_x", "fsm_x_transitions"),
    "schema_reporting_views": (),
    "schema_fresh_install_tables": ("fsm_schema_version",),
    "schema_rules_have_guards": (),
    "attach_triggers": (("fsm_x_sbu_v1", "fsm_x_sai_v1"),),
    "attach_column_types": ("orders",),
    "attach_health_columns": ("orders",),
    "attach_health_triggers": ("orders", "fsm_x", "fsm_x_", "fsm_x_"),
}


def test_every_information_schema_query_is_listed_here() -> None:
    """Every named query reading information_schema's tables built from the databases' files
    is EXPLAINed below (ROUTINES is read from mysql.proc: no such scan)."""
    texts = {name: q.text.lower() for name, q in queries.queries().items()}
    listed = {n for n, t in texts.items() if re.search(r"information_schema\.(?!routines\b)\w+", t)}
    assert listed == set(INFORMATION_SCHEMA_QUERIES)


def test_no_information_schema_query_reads_every_database(server: Settings) -> None:
    if not is_mariadb(server):
        pytest.skip("MySQL's information_schema is views over its indexed data dictionary: no such plan")
    conn = pymysql.connect(**server.with_database("test").connect_kwargs())
    try:
        with conn.cursor() as cur:
            for name, args in INFORMATION_SCHEMA_QUERIES.items():
                sql = queries.sql(name)
                assert sql.count("%s") == len(args), name
                cur.execute("EXPLAIN " + sql, args or None)
                notes = [str(row[-1]) for row in cur.fetchall()]
                assert not any("Scanned all databases" in n for n in notes), (name, notes)
                assert any(re.search(r"Scanned [01] databases?", n) for n in notes), (name, notes)
    finally:
        conn.close()
