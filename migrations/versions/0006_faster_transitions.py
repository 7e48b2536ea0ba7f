"""Faster transitions: the v5 transition trigger, send_v2 and step_v2.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23

Adds the generic procedure fsm_send_v2. Every machine type at object set v4 gets the
per-type procedures fsm_<type>_send_v2 (one UPDATE on the common path; a shorter result row)
and fsm_<type>_step_v2 (the handler engine's step without dynamic SQL), and the v5
transition trigger in place of v4 (the same checks and writes in fewer statements; it also
leaves @fsm_last_status, @fsm_last_from, @fsm_last_to and @fsm_last_version for the v2
procedures). The trigger is swapped under LOCK TABLES so that no UPDATE runs unchecked in
between, and the procedures are created after it; send_v1 and fsm_step_v1 stay and keep
working. Counter rows whose state is spelled with trailing spaces are trimmed. Then the
views over every type are rebuilt.

Never edit a revision once it has landed: add the next number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import check_machine_name, render
from pyfsm.schema.upgrades import apply_files, replace_machine_triggers
from pyfsm.schema.views import refresh_views

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

SWAPS = [("trigger_bu_v4", "trigger_bu_v5")]


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    apply_files(conn, ["procedures/fsm_send_v2.sql"])
    # Per type, on a connection of its own with autocommit, as in 0004 and 0005: an
    # interrupted run leaves finished types finished, and running it again goes over the rest.
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        with own.cursor() as cur:
            # counter rows spelled with trailing spaces (rebuilt from states v3 stored padded,
            # which 0005 trimmed): the key ignores the spaces, the names should not have them
            cur.execute("UPDATE fsm_state_counts SET state = TRIM(TRAILING ' ' FROM state) WHERE state LIKE '% '")
        while True:  # again until none is left: an older pyfsm may define a type meanwhile
            with own.cursor() as cur:
                cur.execute("SELECT machine FROM fsm_machines WHERE objects_version = 'v4' ORDER BY machine")
                machines = [check_machine_name(row[0]) for row in cur.fetchall()]
            if not machines:
                break
            for machine in machines:
                # The trigger first, then the procedures that rely on it, then the mark: a type
                # is v5 only once all three are done (a run again keeps what it finds).
                replace_machine_triggers(own, machine, SWAPS, "v4")
                execute_ddl(own, [render("send_v2", machine), render("step_v2", machine)])
                with own.cursor() as cur:
                    cur.execute("UPDATE fsm_machines SET objects_version = 'v5' WHERE machine = %s", (machine,))
        refresh_views(own)
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
