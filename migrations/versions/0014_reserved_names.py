"""fsm_define_v4 refuses every machine name pyfsm keeps for its own tables and views.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25

fsm_define_v4 kept its own two lists of reserved names, which revisions 0012 and 0013 did
not extend: a DBA could define a type named relay_leaders or operator_log, whose table
would be pyfsm's own, and `pyfsm sync` then refused it. The names now live in one function,
fsm_reserved_name_v1, equal to pyfsm.resources.RESERVED_MACHINE_NAMES (a test compares
them), and fsm_define_v4 asks it; every other check, its order and its answers are
unchanged. fsm_define_v4 is dropped and created again (for that moment a call fails with
1305: run migrations before a new version serves traffic); the grants on it, which DROP
PROCEDURE revokes, are given back. Nothing is locked and no table changes.

A type already defined under one of the two names can never have tables: the revision
refuses to run while one exists and says how to remove it.

SQL frozen in migrations/sql/0014. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm.errors import InvalidDefinition
from pyfsm.upgrades import apply_files, replace_procedures

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


#: The reserved names fsm_define_v4 accepted before this revision.
NEWLY_REFUSED = ("relay_leaders", "operator_log")


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    with conn.cursor() as cur:
        cur.execute("SELECT machine FROM fsm_machines WHERE machine IN %s ORDER BY machine", (NEWLY_REFUSED,))
        found = [row[0] for row in cur.fetchall()]
    if found:
        names = ", ".join(f"'{name}'" for name in found)
        raise InvalidDefinition(
            f"machine types {names} have names reserved for pyfsm's own tables and can never get tables of "
            f"their own: remove them before migrating to 0014 (DELETE FROM fsm_rules, fsm_states, "
            f"fsm_definitions and then fsm_machines WHERE machine IN ({names}))", machine=found[0])
    apply_files(conn, ["functions/fsm_reserved_name.sql"], revisions="0014")  # before the procedure calling it
    replace_procedures(conn, ["fsm_define_v4"], revisions="0014")


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
