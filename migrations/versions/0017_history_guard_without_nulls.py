"""History triggers that refuse a change when a NULL stands in the guard's comparison: fsm_<type>_hbu_v5 and _hbi_v3.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25

fsm_<type>_hbu_v4 compared the session's guard with `<=>`: on a connection with no @fsm_guard,
`UPDATE fsm_<type>_transitions SET most_recent = NULL WHERE most_recent = 1` left left_at
NULL, so both sides were NULL, `<=>` was true and the UPDATE was let through: the instance
was left without a most recent row, which every reader relies on. fsm_<type>_hbi_v2 had the
same hole for an INSERT whose created_at (or instance_id) was NULL when the trigger ran (a
multi-row INSERT under a non-strict sql_mode then stored a zero date). The new versions
refuse whenever any part of a test is NULL, and compare text and JSON columns as bytes. They
allow exactly what v4 and v2 allowed to pyfsm's own writes.

Every type at object set v9 gets them in place of hbu_v4 and hbi_v2, swapped under LOCK
TABLES as in 0010 (no moment with neither version on the table; it waits for running
transactions on the type's tables 2 s at a time), and is marked v10. No procedure or table
changes.

SQL frozen in migrations/sql/0017. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.upgrades import replace_machine_triggers, upgrade_machines

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

SWAPS = [("trigger_hbi_v2", "trigger_hbi_v3"), ("trigger_hbu_v4", "trigger_hbu_v5")]


def upgrade() -> None:
    # per type, on a connection of its own with autocommit, as in 0004 to 0010
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(
            own,
            "v9",
            "v10",
            lambda machine: replace_machine_triggers(
                own, machine, SWAPS, "v10", also_lock=(f"fsm_{machine}_transitions",)
            ),
        )
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
