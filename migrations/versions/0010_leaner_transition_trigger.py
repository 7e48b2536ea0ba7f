"""A transition that costs the server fewer instructions: fsm_<type>_bu_v7 and _hbu_v4.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25

Every machine type at object set v8 gets the v7 transition trigger (fsm_<type>_bu_v7) in
place of v6 and the v4 history update trigger (fsm_<type>_hbu_v4) in place of v3. They do
what the ones they replace did: v7 runs fewer instructions on the common path (one test
for the checks every update passes and one for those every transition passes, half the
local variables), and v4 lets v7's own most_recent flip through on the guard alone instead
of comparing every column of the history row on each transition (BENCHMARKS.md has the
measurements). The swap is made under LOCK TABLES, as in 0006 and 0008, so that no write
runs unchecked in between; the procedures stay as they are. A type is marked v9 once both
are swapped.

Never edit a revision once it has landed: add the next number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.upgrades import replace_machine_triggers, upgrade_machines

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

SWAPS = [("trigger_bu_v6", "trigger_bu_v7"), ("trigger_hbu_v3", "trigger_hbu_v4")]


def upgrade() -> None:
    # Per type, on a connection of its own with autocommit, as in 0004 to 0009
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        # both tables locked: hbu_v4 is on the history table
        upgrade_machines(
            own,
            "v8",
            "v9",
            lambda machine: replace_machine_triggers(
                own, machine, SWAPS, "v9", also_lock=(f"fsm_{machine}_transitions",)
            ),
        )
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
