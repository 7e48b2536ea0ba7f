"""The initial pyfsm schema: definitions, outbox, helper functions, generic procedures.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Never edit a revision once it has landed: add the next number instead, applying new
versioned files (fsm_x_v2.sql beside fsm_x_v1.sql).
"""

from alembic import op

from pyfsm.schema.upgrades import apply_files

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_files(
        op.get_bind().connection.dbapi_connection,
        [
            "tables/fsm_machines.sql",
            "tables/fsm_definitions.sql",
            "tables/fsm_states.sql",
            "tables/fsm_rules.sql",
            "tables/fsm_outbox.sql",
            "functions/fsm_valid_name_v1.sql",
            "functions/fsm_is_object_v1.sql",
            "procedures/fsm_check_args_v1.sql",
            "procedures/fsm_require_machine_v1.sql",
            "procedures/fsm_define_v1.sql",
            "procedures/fsm_definition_v1.sql",
            "procedures/fsm_send_v1.sql",
            "procedures/fsm_create_v1.sql",
            "procedures/fsm_get_v1.sql",
            "procedures/fsm_history_v1.sql",
            "procedures/fsm_in_state_v1.sql",
            "procedures/fsm_counts_v1.sql",
        ],
    )


def downgrade() -> None:
    raise NotImplementedError("pyfsm migrations are forward-only")
