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
No per-type object changes: an attached type's own triggers and adoption procedure
(sql/machine/attached) are created when it is attached.

SQL frozen in migrations/sql/0027. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

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
    apply_files(raw, FILES, revisions="0027")


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
