"""Hardening found by the fault and fuzz suites: exact names, lost claim replies.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

Adds the procedures fsm_define_v4 (refuses names that are not JSON strings),
fsm_force_unlock_v2 (refuses a lookup key ending in a space) and fsm_release_claims_v1 (a
worker gives back the claims a lost reply left it holding). Every existing machine type
gets the v4 transition trigger in place of v3 (names compared byte for byte, not with PAD
SPACE), swapped under LOCK TABLES so that no UPDATE runs unchecked in between, after the
instances whose state v3 stored with trailing spaces are trimmed; then the views over every
type are rebuilt.

Never edit a revision once it has landed: add the next number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.resources import check_machine_name
from pyfsm.schema.upgrades import apply_files, replace_machine_triggers
from pyfsm.schema.views import refresh_views

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SWAPS = [("trigger_bu_v3", "trigger_bu_v4")]


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    apply_files(
        conn,
        [
            "procedures/fsm_define_v4.sql",
            "procedures/fsm_force_unlock_v2.sql",
            "procedures/fsm_release_claims_v1.sql",
        ],
    )
    # Per type, on a connection of its own with autocommit, as in 0004: an interrupted run
    # leaves finished types finished, and running it again goes over the rest (types
    # already marked v4 are gone over again: the swap keeps a v4 trigger already there).
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings)
    try:
        with own.cursor() as cur:
            # objects_version becomes v4 only once a type's swap is done: a type still at v3 may
            # have been swapped by an interrupted run (the swap keeps a v4 trigger it finds)
            cur.execute("SELECT machine FROM fsm_machines WHERE objects_version = 'v3' ORDER BY machine")
            machines = [row[0] for row in cur.fetchall()]
        for machine in machines:
            table = f"fsm_{check_machine_name(machine)}"
            with own.cursor() as cur:
                # states the v3 trigger stored padded (a raw UPDATE to 'new  ' of an instance in
                # new): trimmed while v3 still fires, which sees no change of state in it and
                # writes nothing else; under v4 the trim would be a move. History stays as written.
                cur.execute(
                    f"UPDATE `{table}` SET current_state = TRIM(TRAILING ' ' FROM current_state) "
                    "WHERE current_state LIKE '% '"
                )
            replace_machine_triggers(own, machine, SWAPS, "v4")
        # The views over every type take the types of the current objects version: run
        # with this library, 0004 built them before any type was at v4.
        refresh_views(own)
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
