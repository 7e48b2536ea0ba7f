"""The DBA and analyst surface: state counters, time in state, reporting views, least privilege.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22

Adds fsm_state_counts (kept by the triggers), fsm_accounts (`pyfsm grant`), the views
fsm_v_state_counts and fsm_v_definitions, and the procedures fsm_define_v3, fsm_counts_v2, fsm_schema_version_v1,
fsm_locks_v1, fsm_lock_holders_v1, fsm_errors_v1, fsm_run_info_v1, fsm_state_at_v1 and
fsm_stats_v1. Every existing machine type gets the column left_at on its history table
(instant: a new last column), the v3 insert and update triggers and the v2 history update
trigger in place of the older ones, under LOCK TABLES, with its counts rebuilt before the
tables are unlocked; then the left_at of its older history rows is filled in, and it gets
the reporting views fsm_v_<type> and fsm_v_<type>_transitions. Last, the views over every
type (fsm_v_instances, fsm_v_history, fsm_v_failed, fsm_v_funnel, fsm_v_stuck).

Never edit a revision once it has landed: add the next number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.errors import SchemaVersionMismatch
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import render
from pyfsm.schema.upgrades import apply_files, fill_left_at, rebuild_state_counts, replace_machine_triggers
from pyfsm.schema.views import refresh_views

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SWAPS = [("trigger_ai_v2", "trigger_ai_v3"), ("trigger_bu_v2", "trigger_bu_v3"), ("trigger_hbu_v1", "trigger_hbu_v2")]


#: Names fsm_define_v3 reserves: a type of that name would collide with 0004's tables or views.
RESERVED = ("runs", "accounts", "state_counts", "held_locks_v1", "instances", "history", "failed", "funnel", "stuck")


def upgrade() -> None:
    conn = op.get_bind().connection.dbapi_connection
    with conn.cursor() as cur:
        cur.execute(
            "SELECT machine FROM fsm_machines WHERE machine IN (" + ", ".join(["%s"] * len(RESERVED)) + ")", RESERVED
        )
        clashing = [row[0] for row in cur.fetchall()]
    if clashing:  # before anything changes
        raise SchemaVersionMismatch(
            f"machine types named {', '.join(clashing)} would collide with revision 0004's tables and views "
            f"(fsm_<name>, fsm_v_<name>); rename them (a new type, instances moved over) before migrating"
        )
    apply_files(
        conn,
        [
            "tables/fsm_state_counts.sql",
            "tables/fsm_accounts.sql",
            "views/fsm_v_state_counts.sql",
            "views/fsm_v_definitions.sql",
            "procedures/fsm_define_v3.sql",
            "procedures/fsm_counts_v2.sql",
            "procedures/fsm_schema_version_v1.sql",
            "procedures/fsm_locks_v1.sql",
            "procedures/fsm_lock_holders_v1.sql",
            "procedures/fsm_errors_v1.sql",
            "procedures/fsm_run_info_v1.sql",
            "procedures/fsm_state_at_v1.sql",
            "procedures/fsm_stats_v1.sql",
        ],
    )
    # Per type, on a connection of its own with autocommit: each step commits as it goes (the
    # trigger swap is DDL anyway), so an interrupted run leaves finished steps finished and
    # running it again picks up where it stopped (types already marked v3 are gone over again:
    # every step is idempotent).
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings)
    try:
        with own.cursor() as cur:
            cur.execute("SELECT machine FROM fsm_machines WHERE objects_version IN ('v2', 'v3') ORDER BY machine")
            machines = [row[0] for row in cur.fetchall()]
        for machine in machines:
            execute_ddl(own, [render("history_left_at", machine)])
            replace_machine_triggers(
                own,
                machine,
                SWAPS,
                "v3",
                also_lock=(f"fsm_{machine}_transitions", "fsm_state_counts"),
                while_locked=lambda cur, m=machine: rebuild_state_counts(cur, m),
            )
            fill_left_at(own, machine)
            execute_ddl(own, [render("view_instances_v1", machine), render("view_history_v1", machine)])
        refresh_views(own)
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
