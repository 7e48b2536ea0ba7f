"""Batched steps: fsm_<type>_steps_v1 and fsm_<type>_apply_step_v1.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

Every machine type at object set v5 gets fsm_<type>_steps_v1, which commits the steps of
several claimed instances in one transaction (a worker with batch > 1 runs the instances it
claimed side by side and commits each round of steps with one call), and the internal
fsm_<type>_apply_step_v1 it calls for each instance. Nothing is replaced: step_v2 and
every trigger stay as they are. A type is marked v6 once both procedures exist.

Never edit a revision once it has landed: add the next number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import check_machine_name, render
from pyfsm.schema.views import refresh_views

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Per type, on a connection of its own with autocommit, as in 0004 to 0006: an
    # interrupted run leaves finished types finished, and running it again goes over the rest.
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        while True:  # again until none is left: an older pyfsm may define a type meanwhile
            with own.cursor() as cur:
                cur.execute("SELECT machine FROM fsm_machines WHERE objects_version = 'v5' ORDER BY machine")
                machines = [check_machine_name(row[0]) for row in cur.fetchall()]
            if not machines:
                break
            for machine in machines:
                # apply_step_v1 first: steps_v1 calls it (execute_ddl skips what exists)
                execute_ddl(own, [render("apply_step_v1", machine), render("steps_v1", machine)])
                with own.cursor() as cur:
                    cur.execute("UPDATE fsm_machines SET objects_version = 'v6' WHERE machine = %s", (machine,))
        refresh_views(own)
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
