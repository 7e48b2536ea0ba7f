"""Alembic environment for pyfsm's own schema.

pyfsm records its revision in ``fsm_alembic_version`` so that it never collides with an
application's own Alembic history in the same database. Migrations run online only:
they execute SQL files from ``sql/`` and cannot be rendered offline.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from pyfsm import db
from pyfsm.schema.install import VERSION_TABLE

config = context.config


def _engine():  # type: ignore[no-untyped-def]
    settings = config.attributes.get("pyfsm_settings")
    if settings is None:
        settings = db.parse_dsn(config.get_main_option("sqlalchemy.url") or None)

    def connect():  # type: ignore[no-untyped-def]
        # through the DSN's servers like every pyfsm connection (the first that answers; on
        # Galera, the writer node), without a read bound: a migration's DDL takes its time
        conn = db.open_connection(settings, timeouts=False)
        conn.autocommit(False)  # SQLAlchemy manages the transactions, as PyMySQL's default
        return conn

    return create_engine("mysql+pymysql://", creator=connect, poolclass=NullPool)


if context.is_offline_mode():
    raise SystemExit("pyfsm migrations run online only: use `pyfsm migrate --dsn ...`")

engine = _engine()
with engine.connect() as connection:
    context.configure(connection=connection, version_table=VERSION_TABLE, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
