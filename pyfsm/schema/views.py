"""The views over every machine type (fsm_v_instances, ...), rebuilt whenever a type is installed."""

from __future__ import annotations

import re
from typing import Any

from ..db import queries
from ..errors import SchemaVersionMismatch
from .ddl import ddl_waiting_briefly
from .resources import check_machine_name, fill_type, read_sql

#: Views over every machine type (sql/views): the text after the CREATE line is one branch,
#: rendered per type and joined with UNION ALL. Landed migrations rebuild them too, from these
#: current files: a change to them must stay buildable over the per-type views of every
#: revision from 0004 on (the drift test in tests/server/test_migrations.py replays them all).
#: fsm_v_stuck read fsm_v_instances until revision 0025 (a view built on the others, after
#: them); it now has a branch per type of its own, from the type's runs.
UNION_VIEWS = (
    "views/fsm_v_instances.sql",
    "views/fsm_v_history.sql",
    "views/fsm_v_failed.sql",
    "views/fsm_v_funnel.sql",
    "views/fsm_v_stuck.sql",
)
#: Views built on the union views, rebuilt after them (none now).
DEPENDENT_VIEWS: tuple[str, ...] = ()
#: The object sets whose types have the reporting views the union views are built from.
VIEW_OBJECT_VERSIONS = (
    "v3",
    "v4",
    "v5",
    "v6",
    "v7",
    "v8",
    "v9",
    "v10",
    "v11",
    "v12",
    "v13",
    "v14",
    "v15",
    "v16",
    "v17",
    "v18",
    "v19",
)


def refresh_views(conn: Any) -> None:
    """(Re)create the views over every installed machine type (fsm_v_instances, ...).

    Each is a UNION ALL with one branch per type whose objects are installed; with no type
    installed yet they do not exist. Two installers at once are serialised, and each reads
    the installed types only once it holds the lock: the last one to rebuild sees every type
    installed before it (each marks its type installed before it asks for the lock).
    """
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_views_lock"))
        if cur.fetchone()[0] != 1:
            raise SchemaVersionMismatch("another process has been rebuilding pyfsm's views for 60 s; try again")
        try:
            # a type still at an object set before v3 (installed by an older pyfsm during a
            # rolling deploy) has no reporting views yet: left out until `pyfsm sync` upgrades
            # it. v3 and later have them (and a migration run by this library may stop at v3).
            cur.execute(queries.sql("schema_machines_with_views"), (VIEW_OBJECT_VERSIONS,))
            machines = [check_machine_name(row[0]) for row in cur.fetchall()]
            if not machines:
                return
            statements = []
            for view in UNION_VIEWS:
                head, create, branch = _split_view(read_sql(view))
                branches = "\nUNION ALL\n".join(fill_type(branch, m) for m in machines)
                statements.append(head + create + branches)
            ddl_waiting_briefly(conn, statements + [read_sql(view) for view in DEPENDENT_VIEWS])
        finally:
            cur.execute(queries.sql("schema_views_unlock"))


def _split_view(text: str) -> tuple[str, str, str]:
    """A union view file: (header comments, the CREATE ... AS line, the branch for one type)."""
    found = re.search(r"^CREATE [^\n]* AS\n", text, re.M)
    assert found, "a view file must have its CREATE ... AS on one line"
    return text[: found.start()], found.group(0), text[found.end() :]
