"""Timers: state timeouts and scheduled events kept by the database (issue 28).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26

Adds:
* fsm_states.timeout_seconds and timeout_event: a state's timeout, stored by fsm_define_v6
  from the definition's "timeouts" (fsm_define_v5 stays, deprecated until 0.4.0: it
  ignores the key);
* the tables fsm_timers (armed timers) and fsm_timer_log (fired, dropped, cancelled), and
  the views fsm_v_timers and fsm_v_timer_log;
* the procedures fsm_send_at_v1, fsm_cancel_timer_v1, fsm_fire_timers_v1, fsm_timers_v1,
  fsm_arm_timeouts_v1 and fsm_resume_v2 (v1 stays, deprecated: it does not wake held timers);
* fsm_operator_action_v2: the web console's audit log takes the action cancel_timer (v1
  stays, deprecated);
* fsm_enqueue_v2, a fix found by the soak test: v1 read its result after its COMMIT, so a
  worker that ran the instance to its end in between left it no row (Store.enqueue raised
  IndexError); v2 reads it inside its transaction (v1 stays, deprecated);
* the functions fsm_reserved_name_v2 (timers and timer_log reserved for new types) and
  fsm_timer_triggers_ready_v1.
No type has timeouts before this revision, so no per-type object changes: a type gets its
timer triggers (fsm_<type>_ai_timer_v1, _au_timer_v1) when a definition with timeouts is
stored through Store.define() or `pyfsm sync`. A database holding a type named timers or
timer_log cannot take this revision (their tables would be fsm_timers, fsm_timer_log): it
stops with a message before changing anything.

SQL frozen in migrations/sql/0019. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm.schema.ddl import execute_ddl, has_column
from pyfsm.schema.upgrades import apply_files

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

FILES = [
    "tables/fsm_timers.sql",
    "tables/fsm_timer_log.sql",
    "functions/fsm_reserved_name_v2.sql",
    "functions/fsm_timer_triggers_ready_v1.sql",
    "views/fsm_v_timers.sql",
    "views/fsm_v_timer_log.sql",
    "procedures/fsm_define_v6.sql",
    "procedures/fsm_resume_v2.sql",
    "procedures/fsm_send_at_v1.sql",
    "procedures/fsm_cancel_timer_v1.sql",
    "procedures/fsm_fire_timers_v1.sql",
    "procedures/fsm_timers_v1.sql",
    "procedures/fsm_arm_timeouts_v1.sql",
    "procedures/fsm_operator_action_v2.sql",
    "procedures/fsm_enqueue_v2.sql",
]


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    with conn.cursor() as cur:
        cur.execute("SELECT machine FROM fsm_machines WHERE machine IN ('timers', 'timer_log')")
        taken = [row[0] for row in cur.fetchall()]
    if taken:
        raise RuntimeError(
            f"revision 0019 adds the tables fsm_timers and fsm_timer_log, and this database has a machine type "
            f"named {', '.join(taken)} whose instance table has that name; nothing was changed. Rename the type "
            f"(copy its instances to a type of another name) before upgrading."
        )
    if not has_column(conn, "fsm_states", "timeout_seconds"):
        execute_ddl(
            conn,
            [
                "ALTER TABLE fsm_states ADD COLUMN `timeout_seconds` INT UNSIGNED NULL, "
                "ADD COLUMN `timeout_event` VARCHAR(64) NULL"
            ],
        )
    apply_files(conn, FILES, revisions="0019")


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
