"""The previous history row found through sort_key: fsm_<type>_bu_v13 (issue 49, item 5).

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-29

Adds, for every type, fsm_<type>_bu_v13 in place of bu_v12, rendered for the type as bu_v12 is:
it finds the instance's previous history row, whose most_recent it turns off, through the
unique key (instance_id, sort_key) instead of (instance_id, most_recent). Every transition
delete-marks an entry of the latter; until the server purges them, a lookup there meets every
marked entry of the instance and reads its row, so a busy instance's transitions cost more the
further the purge lags (on MariaDB 10.11, 1,000-1,600 buffer pool page reads per transition of
one busy instance, about 700 through sort_key). What it enforces and records is bu_v12's. Every
type at object set v18 gets the trigger swapped under LOCK TABLES as in 0023, 0024 and 0028 (no
moment with neither version on the table), and is marked v19.

SQL frozen in migrations/sql/0029. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.rendering import read_rules, record_rendered, render_transition_trigger
from pyfsm.schema.resources import read_frozen
from pyfsm.schema.upgrades import replace_machine_triggers, upgrade_machines

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def _upgrade_type(conn: object, machine: str) -> None:
    facts = read_rules(conn, machine)
    text = render_transition_trigger(read_frozen("templates/trigger_bu_v13.sql", "0029"), facts)
    replace_machine_triggers(
        conn,
        machine,
        [("trigger_bu_v12", "trigger_bu_v13")],
        None,
        also_lock=(f"fsm_{machine}_transitions",),
        texts={"trigger_bu_v13": text},
    )
    record_rendered(conn, facts, text)


def upgrade() -> None:
    # per type, on a connection of its own with autocommit, as in 0004 to 0028
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(own, "v18", "v19", lambda machine: _upgrade_type(own, machine))
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
