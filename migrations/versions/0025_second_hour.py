"""The second hour: merge patches of data, one word per status, timers in the order they fall due (issue 46).

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28

Adds:
* fsm_<type>_send_v5 beside send_v4 and fsm_<type>_send_many_v3 beside send_many_v2, for
  every type: a JSON merge patch of the data (p_data_patch, an item's "data_patch") applied
  inside the transition's transaction, before the guards judge the data;
* fsm_fire_timers_v3 (fsm_fire_timers_v2 deprecated): the timers of one instance fire in the
  order they fell due (due_at, then id), not the order they were armed;
* fsm_operator_action_v3 (fsm_operator_action_v2 deprecated): the action enqueue, the web
  console's Queue action on an idle instance;
* fsm_stats_v3 (fsm_stats_v2 deprecated): running counts only the instances a handler runs
  (a run with a due time), idle the rest of stored status 'running';
* fsm_v_stuck rebuilt as a view over every type's runs: only what a handler runs (running,
  waiting, paused), never an idle instance (pyfsm.schema.views, from the current file, as
  every revision rebuilds the union views);
* fsm_v_state_counts without the empty counter rows of states the current definition no
  longer has (a state renamed or dropped by a new version);
* fsm_require_machine_v1 replaced in place: an unknown machine's 31002 message lists the
  installed types. Its parameters and errors are unchanged, and it is internal (called by
  the generic procedures): a new name would mean a new version of each of its 25 callers.
  The DROP and CREATE are two statements: a generic procedure called in between fails with
  1305, which is why migrations run before a new version serves traffic (docs/how-it-works.md).
Every type at object set v16 gets the two procedures and is marked v17.

SQL frozen in migrations/sql/0025. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import read_frozen, render
from pyfsm.schema.upgrades import apply_files, upgrade_machines

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

FILES = [
    "procedures/fsm_fire_timers_v3.sql",
    "procedures/fsm_stats_v3.sql",
    "procedures/fsm_operator_action_v3.sql",
    "views/fsm_v_state_counts.sql",
]


def upgrade() -> None:
    raw = op.get_bind().connection.dbapi_connection
    execute_ddl(
        raw,
        [
            "DROP PROCEDURE IF EXISTS `fsm_require_machine_v1`",
            read_frozen("internal/fsm_require_machine_v1.sql", "0025"),
        ],
    )
    apply_files(raw, FILES, revisions="0025")
    # per type, on a connection of its own with autocommit, as in 0004 to 0024
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(
            own,
            "v16",
            "v17",
            lambda machine: execute_ddl(own, [render("send_v5", machine), render("send_many_v3", machine)]),
        )
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
