"""Alembic environment for pyfsm's own schema.

pyfsm records its revision in ``fsm_alembic_version`` so that it never collides with an
application's own Alembic history in the same database. Migrations run online only:
they execute SQL files from ``sql/`` and cannot be rendered offline.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from pyfsm import db
from pyfsm.schema import VERSION_TABLE

config = context.config


def _engine():  # type: ignore[no-untyped-def]
    settings = config.attributes.get("pyfsm_settings")
    if settings is None:
        settings = db.parse_dsn(config.get_main_option("sqlalchemy.url") or None)
    url = URL.create(
        "mysql+pymysql", username=settings.user, password=settings.password or None,
        host=settings.host, port=settings.port, database=settings.database,
    )
    kwargs = settings.connect_kwargs()
    connect_args = {k: kwargs[k] for k in ("charset", "connect_timeout", "ssl", "ssl_disabled") if k in kwargs}
    return create_engine(url, poolclass=NullPool, connect_args=connect_args)


if context.is_offline_mode():
    raise SystemExit("pyfsm migrations run online only: use `pyfsm migrate --dsn ...`")

engine = _engine()
with engine.connect() as connection:
    context.configure(connection=connection, version_table=VERSION_TABLE, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
