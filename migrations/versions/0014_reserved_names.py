"""fsm_define_v5: a new machine type may not take a name pyfsm keeps for its own objects.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25

fsm_define_v4 kept its own lists of reserved names, which revisions 0012 and 0013 did not
extend: a DBA could define a type named relay_leaders or operator_log, whose table would be
pyfsm's own, and `pyfsm sync` then refused it. And a type named account gets no history
procedure: fsm_<account>_history_v1 is the global fsm_account_history_v1. The names now
live in one internal function, fsm_reserved_name_v1, equal to Python's lists (a test
compares them and checks that no other name can spell one of pyfsm's objects), and
fsm_define_v5 refuses them for a new type; a type defined before keeps its name.
fsm_define_v4 stays as it was, deprecated until 0.4.0. The app role has no right to define;
accounts that may (the schema owner) get fsm_define_v5 like any new procedure. Creates
objects only: nothing is locked, no table changes, no call fails meanwhile.

SQL frozen in migrations/sql/0014. Never edit a revision once it has landed: add the next
number instead.
"""

from alembic import op

from pyfsm.schema.upgrades import apply_files

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_files(
        op.get_bind().connection.dbapi_connection,
        ["functions/fsm_reserved_name.sql", "procedures/fsm_define_v5.sql"],  # the function first
        revisions="0014",
    )


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
