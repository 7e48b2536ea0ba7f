"""Every writer's context in one variable: send, send_many, steps and timers (issue 49, item 4).

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29

Adds, for every type:

* fsm_<type>_bu_v14 in place of bu_v13, rendered for the type as bu_v13 is: it also takes a
  procedure's whole context (event, handler, request id, metadata, whether the counters are
  left to the caller) from one variable, @fsm_source 'ctx/...', and leaves that call's result in
  @fsm_last, as it does for fire_v2. What it enforces and records is bu_v13's; every older
  context it still takes;
* fsm_<type>_send_v6 beside send_v5, fsm_<type>_apply_send_v2 beside apply_send_v1,
  fsm_<type>_send_many_v4 beside send_many_v3, fsm_<type>_step_v3 beside step_v2,
  fsm_<type>_apply_step_v2 beside apply_step_v1 and fsm_<type>_steps_v2 beside steps_v1 (the
  older ones deprecated): the same answers, each transition in a dozen to twenty statements
  fewer (bench/bench_statements.py counts them).

Every type at object set v19 gets the trigger swapped under LOCK TABLES as in 0023, 0024, 0028
and 0029 (no moment with neither version on the table), then the new procedures, and is marked
v20. Then fsm_fire_timers_v4 beside fsm_fire_timers_v3 (deprecated): the timers fired with the
same one-variable context.

SQL frozen in migrations/sql/0030. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.rendering import read_rules, record_rendered, render_transition_trigger
from pyfsm.schema.resources import read_frozen, render
from pyfsm.schema.upgrades import apply_files, replace_machine_triggers, upgrade_machines

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def _upgrade_type(conn: object, machine: str) -> None:
    facts = read_rules(conn, machine)
    text = render_transition_trigger(read_frozen("templates/trigger_bu_v14.sql", "0030"), facts)
    replace_machine_triggers(
        conn,
        machine,
        [("trigger_bu_v13", "trigger_bu_v14")],
        None,
        also_lock=(f"fsm_{machine}_transitions",),
        texts={"trigger_bu_v14": text},
    )
    record_rendered(conn, facts, text)
    execute_ddl(
        conn,
        [
            render(name, machine)
            for name in ("send_v6", "apply_send_v2", "send_many_v4", "step_v3", "apply_step_v2", "steps_v2")
        ],
    )


def upgrade() -> None:
    # per type, on a connection of its own with autocommit, as in 0004 to 0029
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(own, "v19", "v20", lambda machine: _upgrade_type(own, machine))
    finally:
        own.close()
    # after the types: fire_timers_v4's context is bu_v14's (a type still behind holds its timers)
    apply_files(op.get_bind().connection.dbapi_connection, ["procedures/fsm_fire_timers_v4.sql"], revisions="0030")


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
