"""Machines on the application's own tables (issue 48).

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28

Adds:
* fsm_attachments: which type is attached to which table of the application's, by which key
  and state column;
* fsm_quote_name_v1: a name as a quoted identifier, for the one statement fsm_attach_v1 builds;
* fsm_attach_v1: a DBA's attachment, checked and recorded (or a dry run: the table's rows per
  state value). The triggers an attachment needs are created by pyfsm (Store.attach,
  `pyfsm attach`, `pyfsm sync`): MySQL cannot create a trigger from a routine.
* fsm_reserved_name_v2 replaced in place (same name and answers, 'attachments' added): a new
  type may not be named so, its instance table would be fsm_attachments. A database with such
  a type already cannot take this revision: it stops before changing anything, saying so.
* fsm_require_machine_v1 replaced in place (same parameters and errors): an unknown type's
  31002 message lists the first twelve installed types, not every one, whose GROUP_CONCAT
  past 1,024 bytes (some forty types) raised MySQL's 1260 in place of 31002.
No per-type object changes: an attached type's own triggers and adoption procedure
(sql/machine/attached) are created when it is attached.

SQL frozen in migrations/sql/0027. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm.errors import SchemaVersionMismatch
from pyfsm.schema.ddl import execute_ddl
from pyfsm.schema.resources import read_frozen
from pyfsm.schema.upgrades import apply_files

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

FILES = [
    "tables/fsm_attachments.sql",
    "functions/fsm_quote_name_v1.sql",
    "procedures/fsm_attach_v1.sql",
]


def upgrade() -> None:
    raw = op.get_bind().connection.dbapi_connection
    with raw.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM fsm_machines WHERE machine = 'attachments'")
        (taken,) = cur.fetchone()
    if taken:
        raise SchemaVersionMismatch(
            "a machine type named 'attachments' exists: its table fsm_attachments is the name revision 0027 "
            "gives its catalogue of attached tables; rename the type (define it under another name and move "
            "its instances) before migrating"
        )
    apply_files(raw, FILES, revisions="0027")
    execute_ddl(
        raw,
        [
            "DROP FUNCTION IF EXISTS `fsm_reserved_name_v2`",
            read_frozen("functions/fsm_reserved_name_v2.sql", "0027"),
            "DROP PROCEDURE IF EXISTS `fsm_require_machine_v1`",
            read_frozen("internal/fsm_require_machine_v1.sql", "0027"),
        ],
    )


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
