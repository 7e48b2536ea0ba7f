"""fsm_stats_v2: the queue's due and claimed runs counted as the metrics and the console count them.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25

A claim is a lease: a claimed run's due_at is when the claim runs out. fsm_stats_v1 counted a
run whose claim ran out (its worker died) as claimed and not due, while `pyfsm metrics` and
the web console's queue count it as due, which it is (any worker may take it). fsm_stats_v2
answers with the same columns, due counting every run whose due_at has passed and claimed
only the claims still running; fsm_stats_v1 stays, unchanged, deprecated until 0.4.0. The
reporting accounts `pyfsm grant` recorded get EXECUTE on it from migrate. Creates one
procedure: nothing is locked, no table changes.

SQL frozen in migrations/sql/0015. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm.schema.upgrades import apply_files

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_files(op.get_bind().connection.dbapi_connection, ["procedures/fsm_stats_v2.sql"], revisions="0015")


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
