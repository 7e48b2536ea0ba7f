"""An index on fsm_locks for the locks held now.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25

fsm_locks keeps one row per lock scope and account that ever took a lock, so
fsm_held_locks_v1, which `pyfsm metrics` and the web console read, scanned all of them:
about 0.5 s at a million accounts. The index fsm_locks_held (unlocked_at, expires_at) makes
it one range over the locks held. Built online (ALGORITHM=INPLACE, LOCK=NONE): lock calls go
on meanwhile; it takes about as long as reading the table once. Before it starts, the ALTER
needs the table's metadata lock, which a long transaction that read fsm_locks (a transition
of a type with locks does) holds, and every later transition would queue behind the waiting
ALTER: it waits 2 s at a time and tries again (pyfsm.ddl.ddl_waiting_briefly). Run again
after an interruption, it finds the index built (1061) and goes on.

SQL frozen in migrations/sql/0016. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm.schema.ddl import ddl_waiting_briefly
from pyfsm.schema.resources import read_frozen

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    ddl_waiting_briefly(
        op.get_bind().connection.dbapi_connection, [read_frozen("changes/fsm_locks_held.sql", revisions="0016")]
    )


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
