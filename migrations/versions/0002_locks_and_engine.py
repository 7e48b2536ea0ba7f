"""Locks, the handler engine's queue, and two definition options.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

Adds fsm_locks, fsm_lock_log, the view fsm_held_locks_v1, the procedures fsm_define_v2, fsm_mark_unlocked_v1,
fsm_lock_v1, fsm_renew_lock_v1, fsm_unlock_v1, fsm_force_unlock_v1 and fsm_set_locking_v1,
the options lock_lease_seconds and event_data, and a NULL-able fsm_outbox.data. For the
handler engine: fsm_runs (the hot queue), fsm_errors, and the procedures fsm_claim_v1,
fsm_step_v1, fsm_step_failed_v1, fsm_enqueue_v1, fsm_pause_v1, fsm_resume_v1, fsm_retry_v1,
fsm_failed_v1 with their helpers fsm_lock_instance_v1 and fsm_update_instance_v1. Every
existing machine type gets the v2 insert and update triggers in place of v1, under LOCK
TABLES so that no write runs between the two (its procedures and tables are unchanged).

Never edit a revision once it has landed: add the next number instead.
"""

from alembic import op

from pyfsm.schema.upgrades import apply_files, replace_machine_triggers

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    apply_files(
        conn,
        [
            "changes/0002_definition_options.sql",
            "changes/0002_outbox_data_nullable.sql",
            "tables/fsm_locks.sql",
            "tables/fsm_lock_log.sql",
            "tables/fsm_runs.sql",
            "tables/fsm_errors.sql",
            "views/fsm_held_locks_v1.sql",
            "procedures/fsm_define_v2.sql",
            "procedures/fsm_begin_v1.sql",
            "procedures/fsm_check_claim_v1.sql",
            "procedures/fsm_mark_unlocked_v1.sql",
            "procedures/fsm_mark_released_v1.sql",
            "procedures/fsm_lock_v1.sql",
            "procedures/fsm_renew_lock_v1.sql",
            "procedures/fsm_unlock_v1.sql",
            "procedures/fsm_force_unlock_v1.sql",
            "procedures/fsm_set_locking_v1.sql",
            "procedures/fsm_lock_instance_v1.sql",
            "procedures/fsm_update_instance_v1.sql",
            "procedures/fsm_claim_v1.sql",
            "procedures/fsm_renew_claims_v1.sql",
            "procedures/fsm_step_v1.sql",
            "procedures/fsm_step_failed_v1.sql",
            "procedures/fsm_enqueue_v1.sql",
            "procedures/fsm_pause_v1.sql",
            "procedures/fsm_resume_v1.sql",
            "procedures/fsm_retry_v1.sql",
            "procedures/fsm_failed_v1.sql",
        ],
    )
    with conn.cursor() as cur:
        cur.execute("SELECT machine FROM fsm_machines WHERE objects_version = 'v1' ORDER BY machine")
        machines = [row[0] for row in cur.fetchall()]
    for machine in machines:
        replace_machine_triggers(
            conn, machine, [("trigger_ai_v1", "trigger_ai_v2"), ("trigger_bu_v1", "trigger_bu_v2")], "v2"
        )


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
