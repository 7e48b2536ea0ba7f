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
from pyfsm.resources import check_machine_name, render
from pyfsm.schema import execute_ddl, refresh_views

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Per type, on a connection of its own with autocommit, as in 0004 to 0008: an
    # interrupted run leaves finished types finished, and running it again goes over the rest.
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        while True:  # again until none is left: an older pyfsm may define a type meanwhile
            with own.cursor() as cur:
                cur.execute("SELECT machine FROM fsm_machines WHERE objects_version = 'v7' ORDER BY machine")
                machines = [check_machine_name(row[0]) for row in cur.fetchall()]
            if not machines:
                break
            for machine in machines:
                # apply_send_v1 first: send_many_v1 calls it (execute_ddl skips what exists)
                execute_ddl(own, [render("apply_send_v1", machine), render("send_many_v1", machine)])
                with own.cursor() as cur:
                    cur.execute("UPDATE fsm_machines SET objects_version = 'v8' WHERE machine = %s", (machine,))
        refresh_views(own)
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
