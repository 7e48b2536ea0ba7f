"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

Never edit a revision once it has landed: add the next number instead, applying new
versioned files (fsm_x_v2.sql beside fsm_x_v1.sql).
"""

from alembic import op

from pyfsm.schema import apply_files

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_files(op.get_bind().connection.dbapi_connection, [
    ])


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
