"""One publishing relay per database on every server of a cluster.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25

The relay's leadership was a GET_LOCK, which is local to one server: relays started on two
nodes of a Galera cluster both led. It is now a row of fsm_relay_leaders with an expiry,
taken, renewed and given up through fsm_relay_lead_v1 and fsm_relay_resign_v1; the relay
still takes GET_LOCK beside it, so that on one server a standby takes over from a dead
leader at once instead of after the expiry. The relay accounts `pyfsm grant` recorded get
EXECUTE on both from migrate. Creates objects only: nothing is locked, no table changes.

SQL frozen in migrations/sql/0012. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm.schema.upgrades import apply_files

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

ADDED = (
    "tables/fsm_relay_leaders.sql",
    "procedures/fsm_relay_lead_v1.sql",
    "procedures/fsm_relay_resign_v1.sql",
)


def upgrade() -> None:
    apply_files(op.get_bind().connection.dbapi_connection, ADDED, revisions="0012")


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
