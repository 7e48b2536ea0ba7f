"""The operators' surface: what the web console and the metrics read, and its audit log.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25

* Views a reporting account may read (granted to the accounts `pyfsm grant` recorded, by
  migrate): fsm_v_runs (the engine's queue), fsm_v_errors (handler errors with their
  tracebacks), fsm_v_outbox (unpublished and parked events), fsm_v_operator_log.
* fsm_operator_log with fsm_operator_action_v1 / fsm_operator_outcome_v1: every action an
  operator takes through `pyfsm web --allow-actions`, recorded before it runs and finished
  with its outcome.
* fsm_unpark_v1: what `pyfsm relay --unpark` did with plain SQL, as a procedure, so that an
  account with EXECUTE only (the app role, the console) can release a parked event.

A machine type named operator_log would have the new table's name: the revision refuses to
run while one exists. Creates objects only: nothing is locked, no table changes.

SQL frozen in migrations/sql/0013. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm.errors import InvalidDefinition
from pyfsm.schema.upgrades import apply_files

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

ADDED = (
    "tables/fsm_operator_log.sql",
    "views/fsm_v_runs.sql",
    "views/fsm_v_errors.sql",
    "views/fsm_v_outbox.sql",
    "views/fsm_v_operator_log.sql",
    "procedures/fsm_operator_action_v1.sql",
    "procedures/fsm_operator_outcome_v1.sql",
    "procedures/fsm_unpark_v1.sql",
)


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM fsm_machines WHERE machine = 'operator_log'")
        if cur.fetchone()[0]:
            raise InvalidDefinition(
                "a machine type named operator_log has the name of pyfsm's new table "
                "fsm_operator_log: rename it before migrating to 0013",
                machine="operator_log",
            )
    apply_files(conn, ADDED, revisions="0013")


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
