"""MySQL 9.6+: fsm_lock_v2 hashes lock names with SHA2; fsm_<type>_send_many_v2 sorts items of any size.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25

Two procedures failed on MySQL and not on MariaDB:
* fsm_lock_v1 named its advisory locks with SHA1(), which MySQL 9.6 moved out of the server
  into a component that is not installed by default: there every lock failed with 1305
  ("FUNCTION <db>.SHA1 does not exist"). fsm_lock_v2 does the same with SHA2(..., 224),
  built into MySQL 8.0 to 9.x and MariaDB. Its advisory lock names differ from v1's, so a
  holder through v1 and a taker through v2 do not meet on the advisory lock during an
  upgrade; the lock row in fsm_locks decides who holds a lock, as it always did.
* fsm_<type>_send_many_v1 sorts its items with their text, and MySQL's filesort refuses a
  row larger than the session's sort buffer (256 KiB by default: 1038, out of sort memory),
  so one item of 400 kB failed the whole call. fsm_<type>_send_many_v2 raises the session's
  sort_buffer_size for that sort only.
The v1 procedures stay, unchanged, deprecated until 0.4.0 (a `_vN` never changes under its
callers); this pyfsm calls the v2 ones, so run the migration before it serves traffic. Every
type at object set v10 gets send_many_v2 and is marked v11 (nothing is replaced, no table is
locked); the accounts `pyfsm grant` recorded get EXECUTE on the new procedures from migrate.

SQL frozen in migrations/sql/0018. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm import db
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import render
from pyfsm.schema.upgrades import apply_files, upgrade_machines

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_files(op.get_bind().connection.dbapi_connection, ["procedures/fsm_lock_v2.sql"], revisions="0018")
    # per type, on a connection of its own with autocommit, as in 0004 to 0017
    settings = op.get_context().config.attributes.get("pyfsm_settings") or db.parse_dsn(None)
    own = db.connect(settings, timeouts=False)
    try:
        upgrade_machines(own, "v10", "v11", lambda machine: execute_ddl(own, [render("send_many_v2", machine)]))
    finally:
        own.close()


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
