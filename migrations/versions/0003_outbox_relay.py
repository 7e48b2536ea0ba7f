"""The Kafka relay: outbox bookkeeping columns and indexes, and the lag procedure.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22

Every row already in fsm_outbox becomes unpublished: the first relay publishes it.
All SQL lives in its own files, so renumbering this revision touches only the ids below.
"""

from alembic import op

from pyfsm.schema.upgrades import apply_files

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_files(
        op.get_bind().connection.dbapi_connection,
        [
            "changes/fsm_outbox_relay_v1.sql",
            "procedures/fsm_outbox_lag_v1.sql",
        ],
    )


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
