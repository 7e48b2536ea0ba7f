"""One current schema, and cross-type reporting in milliseconds.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25

fsm_define_v4 and fsm_force_unlock_v2 no longer call the versions they replace:
fsm_define_v4 called fsm_define_v3, which called fsm_define_v2; fsm_force_unlock_v2 called
fsm_force_unlock_v1. Each is replaced by one procedure that does the same checks in the same
order (the callers see no difference), so that the older versions can retire (deprecated in
0.3.0, dropped in 0.4.0: docs/sql-api.md, "Versions and retirement") and a fresh install
need not create them. MySQL has no CREATE OR REPLACE PROCEDURE: each is dropped and created
again, and for that moment a call fails with 1305; run migrations before a new version
serves traffic. DROP PROCEDURE revokes every grant on the routine: the grants found in
mysql.procs_priv (where the migrating account may read it) are given again right after,
and the accounts `pyfsm grant` recorded get theirs from migrate as always.

Adds fsm_instances_in_state_v1 (the instances in one state across every type, a page at a
time) and fsm_account_history_v1 (the history of one lookup key across every type), and
the internal functions that write the statement each runs (one branch per type, through
that type's own index). Nothing is locked and no table changes.

SQL frozen in migrations/sql/0011. Never edit a revision once it has landed: add the next
number instead.
"""

from typing import Any

import pymysql
from alembic import op

from pyfsm.schema.upgrades import apply_files

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

REPLACED = ("fsm_define_v4", "fsm_force_unlock_v2")


ADDED = (
    "functions/fsm_instances_in_state_sql.sql",
    "functions/fsm_account_history_sql.sql",
    "procedures/fsm_instances_in_state_v1.sql",
    "procedures/fsm_account_history_v1.sql",
)


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    for name in REPLACED:
        with conn.cursor() as cur:
            grants = grants_on(cur, name)
            cur.execute(f"DROP PROCEDURE IF EXISTS `{name}`")
        apply_files(conn, [f"procedures/{name}.sql"], revisions="0011")
        with conn.cursor() as cur:
            for statement, args in grants:
                cur.execute(statement, args)
    apply_files(conn, ADDED, revisions="0011")  # the functions first: the procedures call them


def grants_on(cur: Any, procedure: str) -> list[tuple[str, tuple[str, ...]]]:
    """GRANT statements that give back what accounts (and roles) hold on ``procedure`` now.

    From mysql.procs_priv (both servers keep routine grants there); an account that may not
    read it gets [] and only the accounts `pyfsm grant` recorded are granted again.
    """
    try:
        cur.execute("SELECT DATABASE()")
        (database,) = cur.fetchone()
        cur.execute(
            "SELECT User, Host, Proc_priv FROM mysql.procs_priv WHERE Db = %s AND Routine_name = %s "
            "AND Routine_type = 'PROCEDURE'",
            (database, procedure),
        )
        rows = cur.fetchall()
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] in (1142, 1044, 1146):  # no right to read it (or no such table)
            return []
        raise
    statements = []
    for user, host, privileges in rows:
        granted = {p.strip().lower() for p in str(privileges).split(",") if p.strip()}
        names = [p for p in ("execute", "alter routine") if p in granted]
        if not names:
            continue
        to = "%s" if host == "" else "%s@%s"  # a MariaDB role has no host
        statements.append(
            (
                f"GRANT {', '.join(n.upper() for n in names)} ON PROCEDURE `{database}`.`{procedure}` TO {to}"
                + (" WITH GRANT OPTION" if "grant" in granted else ""),
                (user,) if host == "" else (user, host),
            )
        )
    return statements


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
