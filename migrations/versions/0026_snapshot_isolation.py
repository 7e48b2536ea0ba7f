"""MariaDB 11.8's snapshot isolation off inside pyfsm's procedures (issue 47).

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28

Replaces fsm_begin_v1 in place (same name, parameters and errors): on MariaDB it now turns
innodb_snapshot_isolation off for the calling session, once per session, before it starts the
READ COMMITTED transaction of a self-committing procedure. MariaDB 11.6+ turns that check on
by default, and then a statement whose trigger read the rules and then moves a state counter
row another transaction committed since fails with 1020 and the whole transaction is rolled
back; the batch procedures (send_many, steps, fire_timers, upgrade) end a batch on 1213 and
1205 only, so a 1020 inside a batch called from a session with the check on (a DBA's) would
have been taken for one item's failure. pyfsm's own connections turn it off themselves
(pyfsm.db.connecting). fsm_begin_v1 is internal (every self-committing procedure calls it): a new name would
mean a new version of each. The DROP and CREATE are two statements: a procedure called in
between fails with 1305, which is why migrations run before a new version serves traffic
(docs/how-it-works.md). No per-type object changes.

SQL frozen in migrations/sql/0026. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import read_frozen

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    raw = op.get_bind().connection.dbapi_connection
    execute_ddl(
        raw,
        [
            "DROP PROCEDURE IF EXISTS `fsm_begin_v1`",
            read_frozen("internal/fsm_begin_v1.sql", "0026"),
        ],
    )


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
