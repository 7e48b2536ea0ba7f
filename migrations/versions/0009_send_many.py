"""Many events in one call: fsm_<type>_send_many_v1 and fsm_<type>_apply_send_v1.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

Every machine type at object set v7 gets fsm_<type>_send_many_v1, which applies up to 1000
events in one call and one transaction, each item checked, recorded and refused alone
(a savepoint per item), and the internal fsm_<type>_apply_send_v1 it calls for each item
(send_v2's work without its transaction). Nothing is replaced and no table is locked. A
type is marked v8 once both procedures exist.

Never edit a revision once it has landed: add the next number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import render
from pyfsm.schema.upgrades import upgrade_machines

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Per type, on a connection of its own with autocommit, as in 0004 to 0008
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        # apply_send_v1 first: send_many_v1 calls it (execute_ddl skips what exists)
        upgrade_machines(
            own,
            "v7",
            "v8",
            lambda machine: execute_ddl(own, [render("apply_send_v1", machine), render("send_many_v1", machine)]),
        )
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
