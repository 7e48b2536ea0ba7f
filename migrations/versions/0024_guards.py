"""Guards the database enforces, and branching by them (issue 37).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27

Adds:
* fsm_rules.position, guard and guard_name, with position in the primary key: a (state,
  event) may have several rules, tried in order (changes/fsm_rules_guards.sql);
* fsm_check_guard_v1 (internal) and fsm_define_v8 (fsm_define_v7 deprecated): definitions
  with guards, checked whole, and branching;
* fsm_definitions_bi_v1: a body with guards is stored only with its rules' guards (the
  define procedures before v8 ignore keys they do not know);
* fsm_fire_timers_v2 (fsm_fire_timers_v1 deprecated): a timer whose event its guards refuse
  is dropped and logged, as one its state's rules refuse;
* fsm_<type>_bu_v11 in place of bu_v10 for every type, rendered for the type with its guards
  inline (pyfsm.schema.rendering, guard_sql); a type without guards gets bu_v10's code;
* fsm_<type>_allowed_events_v1: the rules an instance may take now, its guards and its data.
Every type at object set v15 gets the trigger swapped under LOCK TABLES as in 0023, and is
marked v16. The procedures come after the swap: until every type has bu_v11 no definition
has a guard or a second rule for a (state, event).

SQL frozen in migrations/sql/0024. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import ddl_waiting_briefly, execute_ddl
from pyfsm.schema.rendering import read_rules, record_rendered, render_transition_trigger
from pyfsm.schema.resources import read_frozen, render
from pyfsm.schema.upgrades import apply_files, replace_machine_triggers, upgrade_machines

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

FILES = [
    "triggers/fsm_definitions_bi_v1.sql",
    "internal/fsm_check_guard_v1.sql",
    "procedures/fsm_define_v8.sql",
    "procedures/fsm_fire_timers_v2.sql",
]


def _upgrade_type(conn: object, machine: str) -> None:
    facts = read_rules(conn, machine)
    text = render_transition_trigger(read_frozen("templates/trigger_bu_v11.sql", "0024"), facts)
    replace_machine_triggers(
        conn,
        machine,
        [("trigger_bu_v10", "trigger_bu_v11")],
        None,
        also_lock=(f"fsm_{machine}_transitions",),
        texts={"trigger_bu_v11": text},
    )
    record_rendered(conn, facts, text)
    execute_ddl(conn, [render("allowed_events_v1", machine)])


def upgrade() -> None:
    raw = op.get_bind().connection.dbapi_connection
    ddl_waiting_briefly(raw, [read_frozen("changes/fsm_rules_guards.sql", "0024")])
    # per type, on a connection of its own with autocommit, as in 0004 to 0023
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(own, "v15", "v16", lambda machine: _upgrade_type(own, machine))
    finally:
        own.close()
    apply_files(raw, FILES, revisions="0024")


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
