"""Instances move to a newer definition version of their type: fsm_upgrade_instances_v1 and its dry run (issue 35).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27

Adds:
* fsm_<type>_bu_v8 in place of bu_v7 for every type: what v7 does, and one more kind of
  UPDATE: definition_version may change when @fsm_upgrade names the row and its new version
  (as fsm_<type>_upgrade_v1 sets it; a raw UPDATE of definition_version is still 31013). The
  move is recorded as one history row (source 'upgrade'), with its counters, outbox row and
  status; a target version that is not newer, or a state it lacks, is 31030. The common path
  of a transition runs the same statements as v7's;
* fsm_<type>_upgrade_v1 (one batch: each instance in a transaction of its own, keyset over id)
  and fsm_<type>_upgrade_plan_v1 (the dry run), and the generic fsm_upgrade_instances_v1 and
  fsm_upgrade_plan_v1 that call them; fsm_upgrade_check_v1, their argument checks (internal);
* fsm_instances_per_version_v1: how many instances each definition version of a type holds;
* fsm_v_<type> (view_instances_v2): in_state_since and seconds_in_state count from the last
  history row that is not such a move, so an upgrade does not make a stuck instance look
  fresh; fsm_v_funnel (rebuilt from sql/ with the other views over every type) counts no
  move as an entry.
Every type at object set v12 gets the trigger swapped under LOCK TABLES as in 0010 and 0017
(no moment with neither version on the table; it waits for running transactions on the
type's tables 2 s at a time), then its two procedures and its view, and is marked v13. No
table changes.

SQL frozen in migrations/sql/0021. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import render
from pyfsm.schema.upgrades import apply_files, replace_machine_triggers, upgrade_machines

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

FILES = [
    "internal/fsm_upgrade_check_v1.sql",
    "procedures/fsm_upgrade_instances_v1.sql",
    "procedures/fsm_upgrade_plan_v1.sql",
    "procedures/fsm_instances_per_version_v1.sql",
]
SWAPS = [("trigger_bu_v7", "trigger_bu_v8")]


def _upgrade_type(conn: object, machine: str) -> None:
    replace_machine_triggers(conn, machine, SWAPS, None, also_lock=(f"fsm_{machine}_transitions",))
    execute_ddl(
        conn, [render("upgrade_v1", machine), render("upgrade_plan_v1", machine), render("view_instances_v2", machine)]
    )


def upgrade() -> None:
    apply_files(op.get_bind().connection.dbapi_connection, FILES, revisions="0021")
    # per type, on a connection of its own with autocommit, as in 0004 to 0020
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(own, "v12", "v13", lambda machine: _upgrade_type(own, machine))
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
