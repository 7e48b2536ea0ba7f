"""Transition context that cannot outlive a failed call, and text that must be UTF-8.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25

Every machine type at object set v6 gets the v6 transition trigger (fsm_<type>_bu_v6) in
place of v5, the v4 creation trigger (fsm_<type>_ai_v4) in place of v3, and the history
triggers hbi_v2 and hbu_v3 in place of hbi_v1 and hbu_v2. The writers take the
transition context that pyfsm's procedures set (@fsm_event, @fsm_metadata, @fsm_handler,
@fsm_request_id, @fsm_source) into local variables and clear it before their first write:
a deadlock inside a trigger can end the CALL without running any handler (seen on MariaDB
10.11), which left the context set on the connection, and the next call stamped a stale
request id. The history guard (@fsm_guard) names the instance and the time of the row being
written, not the instance alone, so a guard left behind the same way lets no later write
through. The writers also refuse text that is not valid UTF-8 (31024; MariaDB's utf8mb4
accepts encoded surrogates, which no client can decode), with the new function
fsm_valid_utf8_v1. The swap is made under LOCK TABLES, as in 0006, so that no write runs
unchecked in between; the procedures stay as they are. A type is marked v7 once all four
are swapped.

Never edit a revision once it has landed: add the next number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.upgrades import apply_files, replace_machine_triggers, upgrade_machines

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

SWAPS = [
    ("trigger_bu_v5", "trigger_bu_v6"),
    ("trigger_ai_v3", "trigger_ai_v4"),
    ("trigger_hbi_v1", "trigger_hbi_v2"),
    ("trigger_hbu_v2", "trigger_hbu_v3"),
]


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    apply_files(conn, ["functions/fsm_valid_utf8_v1.sql"])  # the new triggers call it
    # Per type, on a connection of its own with autocommit, as in 0004 to 0007
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        # the four together, both tables locked: the history triggers of v7 accept only the
        # guard the v7 writers set
        upgrade_machines(
            own,
            "v6",
            "v7",
            lambda machine: replace_machine_triggers(
                own, machine, SWAPS, "v7", also_lock=(f"fsm_{machine}_transitions",)
            ),
        )
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
