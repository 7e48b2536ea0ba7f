"""The common call in fewer statements: fsm_<type>_fire_v2 and bu_v12 (issue 49, item 1).

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-29

Adds, for every type:
* fsm_<type>_bu_v12 in place of bu_v11, rendered for the type as bu_v11 is: it also takes the
  common call's context from one variable (@fsm_source 'fire/<event>') and leaves that call's
  result in one (@fsm_last), and moves the state counters with one UPDATE of their two rows
  (one INSERT, as before, when a row is not there yet). What it enforces and records is
  bu_v11's; fire_v1's context (@fsm_source 'fire' and @fsm_event) it still takes;
* fsm_<type>_fire_v2 beside fire_v1 (deprecated): the same answers as send_v5 with nothing
  else given, in five statements fewer than fire_v1 (bench/bench_statements.py counts them).
Every type at object set v17 gets the trigger swapped under LOCK TABLES as in 0023 and 0024
(no moment with neither version on the table), then fire_v2, and is marked v18.

SQL frozen in migrations/sql/0028. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.rendering import read_rules, record_rendered, render_transition_trigger
from pyfsm.schema.resources import read_frozen, render
from pyfsm.schema.upgrades import replace_machine_triggers, upgrade_machines

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def _upgrade_type(conn: object, machine: str) -> None:
    facts = read_rules(conn, machine)
    text = render_transition_trigger(read_frozen("templates/trigger_bu_v12.sql", "0028"), facts)
    replace_machine_triggers(
        conn,
        machine,
        [("trigger_bu_v11", "trigger_bu_v12")],
        None,
        also_lock=(f"fsm_{machine}_transitions",),
        texts={"trigger_bu_v12": text},
    )
    record_rendered(conn, facts, text)
    execute_ddl(conn, [render("fire_v2", machine)])


def upgrade() -> None:
    # per type, on a connection of its own with autocommit, as in 0004 to 0027
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(own, "v17", "v18", lambda machine: _upgrade_type(own, machine))
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
