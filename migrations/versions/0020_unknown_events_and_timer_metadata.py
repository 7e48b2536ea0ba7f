"""A misspelt event is 31028 from the send procedures too; send_at refuses metadata with its own "timer" key (issue 34).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27

Adds:
* fsm_<type>_send_v3 for every type, and the generic fsm_send_v3: what send_v2 does,
  except that an event the type does not have at all (in the instance's definition
  version, or the current one for a key with no instance) is 31028 (UnknownEvent) with
  the type's events in the message. send_v2 answers such an event with 31005 on an
  existing key and with 31003 (UnknownInstance, "cannot create one") on a missing key.
  The event is looked up only after the call failed with 31003 or 31005, in the error
  handler: the common path runs the same statements as v2's. Every other refusal keeps
  its number;
* fsm_send_at_v2: what fsm_send_at_v1 does, refusing (31009, nothing written) metadata
  whose top-level key "timer" the firing would replace with pyfsm's own timer object,
  which v1 let through and lost silently when the event fired.
fsm_send_v2, fsm_<type>_send_v2 and fsm_send_at_v1 stay, unchanged, deprecated until 0.4.0
(a `_vN` never changes under its callers); this pyfsm calls the new ones, so run the
migration before it serves traffic. Every type at object set v11 gets send_v3 and is
marked v12 (nothing is replaced, no table is locked); the accounts `pyfsm grant` recorded
get EXECUTE on the new procedures from migrate. No table changes: a timer fsm_send_at_v1
armed with a "timer" key of its own still has it replaced when it fires (docs/upgrading.md
shows how to find them).

SQL frozen in migrations/sql/0020. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import render
from pyfsm.schema.upgrades import apply_files, upgrade_machines

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

FILES = [
    "procedures/fsm_send_v3.sql",
    "procedures/fsm_send_at_v2.sql",
]


def upgrade() -> None:
    apply_files(op.get_bind().connection.dbapi_connection, FILES, revisions="0020")
    # per type, on a connection of its own with autocommit, as in 0004 to 0018
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(own, "v11", "v12", lambda machine: execute_ddl(own, [render("send_v3", machine)]))
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
