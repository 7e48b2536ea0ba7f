"""Hardening found by the fault and fuzz suites: exact names, lost claim replies.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

Adds the procedures fsm_define_v4 (refuses names that are not JSON strings),
fsm_force_unlock_v2 (refuses a lookup key ending in a space) and fsm_release_claims_v1 (a
worker gives back the claims a lost reply left it holding). Every existing machine type
gets the v4 transition trigger in place of v3 (names compared byte for byte, not with PAD
SPACE), swapped under LOCK TABLES so that no UPDATE runs unchecked in between; then the
views over every type are rebuilt.

Never edit a revision once it has landed: add the next number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema import apply_files, refresh_views, replace_machine_triggers

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SWAPS = [("trigger_bu_v3", "trigger_bu_v4")]


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    apply_files(conn, [
        "procedures/fsm_define_v4.sql",
        "procedures/fsm_force_unlock_v2.sql",
        "procedures/fsm_release_claims_v1.sql",
    ])
    # Per type, on a connection of its own with autocommit, as in 0004: an interrupted run
    # leaves finished types finished, and running it again goes over the rest (types
    # already marked v4 are gone over again: the swap keeps a v4 trigger already there).
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings)
    try:
        with own.cursor() as cur:
            cur.execute("SELECT machine FROM fsm_machines WHERE objects_version IN ('v3', 'v4') ORDER BY machine")
            machines = [row[0] for row in cur.fetchall()]
        for machine in machines:
            replace_machine_triggers(own, machine, SWAPS, "v4")
        # The views over every type take the types of the current objects version: run
        # with this library, 0004 built them before any type was at v4.
        refresh_views(own)
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
