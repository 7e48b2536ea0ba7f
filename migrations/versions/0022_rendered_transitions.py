"""A transition at a lower database cost: each type's transition trigger rendered for that type, and send_v4 (issue 36).

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27

Adds:
* fsm_machines.rendered_version and rendered_digest: what each type's transition trigger was
  rendered from (changes/fsm_machines_rendered.sql);
* fsm_<type>_bu_v9 in place of bu_v8 for every type, rendered for the type
  (pyfsm.schema.rendering): its rules inline for every definition version that holds
  instances and the current one (with fsm_rules as the fallback for any other), the event_data
  option per version, and on MySQL without the encoded-surrogate checks that its utf8mb4
  makes itself. What it enforces and records is bu_v8's;
* fsm_<type>_send_v4 beside send_v3 (deprecated): the same answers, with the transaction begun
  inline, the context set once, the result taken from what the trigger left, and the event's
  name checked on the error path; fsm_send_v4, the generic one, beside fsm_send_v3;
* fsm_rendered_ready_v1 and fsm_define_v7 (fsm_define_v6 deprecated): tables_ready is also 0
  while the trigger was rendered for an older current version.
Every type at object set v13 gets the trigger swapped under LOCK TABLES as in 0021 (no
moment with neither version on the table), then send_v4, and is marked v14.

SQL frozen in migrations/sql/0022. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import ddl_waiting_briefly, execute_ddl
from pyfsm.schema.rendering import read_rules, record_rendered, render_transition_trigger
from pyfsm.schema.resources import read_frozen, render
from pyfsm.schema.upgrades import apply_files, replace_machine_triggers, upgrade_machines

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

FILES = [
    "functions/fsm_rendered_ready_v1.sql",
    "procedures/fsm_define_v7.sql",
    "procedures/fsm_send_v4.sql",
]


def _upgrade_type(conn: object, machine: str) -> None:
    facts = read_rules(conn, machine)
    text = render_transition_trigger(read_frozen("templates/trigger_bu_v9.sql", "0022"), facts)
    replace_machine_triggers(
        conn,
        machine,
        [("trigger_bu_v8", "trigger_bu_v9")],
        None,
        also_lock=(f"fsm_{machine}_transitions",),
        texts={"trigger_bu_v9": text},
    )
    record_rendered(conn, facts, text)
    execute_ddl(conn, [render("send_v4", machine)])


def upgrade() -> None:
    raw = op.get_bind().connection.dbapi_connection
    ddl_waiting_briefly(raw, [read_frozen("changes/fsm_machines_rendered.sql", "0022")])
    apply_files(raw, FILES, revisions="0022")
    # per type, on a connection of its own with autocommit, as in 0004 to 0021
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(own, "v13", "v14", lambda machine: _upgrade_type(own, machine))
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
