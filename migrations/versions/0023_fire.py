"""The common call at a lower database cost: fsm_<type>_fire_v1 and the one-variable context of bu_v10 (issue 36).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27

Adds, for every type:
* fsm_<type>_bu_v10 in place of bu_v9, rendered for the type as bu_v9 is: it also takes the
  context of the common call from two variables (@fsm_source 'fire': @fsm_event is the whole
  context), read and cleared in place of six. What it enforces and records is bu_v9's;
* fsm_<type>_fire_v1 beside send_v4: (key, event), the same answers as send_v4 with nothing
  else given, at less cost (Store.send calls it when it has no option to pass).
Every type at object set v14 gets the trigger swapped under LOCK TABLES as in 0022 (no moment
with neither version on the table), then fire_v1, and is marked v15.

SQL frozen in migrations/sql/0023. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.rendering import read_rules, record_rendered, render_transition_trigger
from pyfsm.schema.resources import read_frozen, render
from pyfsm.schema.upgrades import replace_machine_triggers, upgrade_machines

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def _upgrade_type(conn: object, machine: str) -> None:
    facts = read_rules(conn, machine)
    text = render_transition_trigger(read_frozen("templates/trigger_bu_v10.sql", "0023"), facts)
    replace_machine_triggers(
        conn,
        machine,
        [("trigger_bu_v9", "trigger_bu_v10")],
        None,
        also_lock=(f"fsm_{machine}_transitions",),
        texts={"trigger_bu_v10": text},
    )
    record_rendered(conn, facts, text)
    execute_ddl(conn, [render("fire_v1", machine)])


def upgrade() -> None:
    # per type, on a connection of its own with autocommit, as in 0004 to 0022
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(own, "v14", "v15", lambda machine: _upgrade_type(own, machine))
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
