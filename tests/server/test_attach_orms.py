"""Attached tables written through the application's ORMs (issue 48 item 3): a Django model
and an SQLAlchemy model (ORM and Core) on an attached ``orders`` table. Every write goes through
the table's triggers, so what pyfsm promises for a raw UPDATE holds for each ORM's statements:
a created row gets its instance in a start state, a state change is checked and recorded
(source 'update', event inferred), a refused one reaches the ORM as its OperationalError
carrying pyfsm's number (from_database_error gives pyfsm's class), a multi-row UPDATE is all
or nothing, a delete is refused (31017) and a non-state write records nothing. Each check
reads the raw tables.

Django is configured in-process (settings.configure) with PyMySQL standing in for MySQLdb;
its models are unmanaged (the test creates the table).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers.common import order_machine, unique

import pyfsm
from pyfsm import Store
from pyfsm.db import parse_dsn
from pyfsm.db.driver import install_as_mysqldb

# PyMySQL as MySQLdb with its submodules: pymysql.install_as_MySQLdb() alone lets Django load a
# second pymysql.err, after which every later test's `except pymysql.err.MySQLError` catches nothing
install_as_mysqldb()

django = pytest.importorskip("django")
sqlalchemy = pytest.importorskip("sqlalchemy")


def q(raw: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    raw.commit()  # a fresh snapshot: the ORMs wrote on their own connections
    with raw.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def history(raw: Any, name: str, key: int) -> list[tuple[Any, ...]]:
    return q(
        raw,
        f"SELECT h.sort_key, h.event, h.from_state, h.to_state, h.source FROM `fsm_{name}_transitions` h "
        f"JOIN `fsm_{name}` i ON i.id = h.instance_id WHERE i.instance_key = %s ORDER BY h.sort_key",
        (str(key),),
    )


def state_of(raw: Any, name: str, table: str, key: int) -> tuple[Any, Any]:
    """(the table's status, the instance's current_state)."""
    row = q(
        raw,
        f"SELECT t.status, i.current_state FROM `{table}` t LEFT JOIN `fsm_{name}` i "
        "ON i.instance_key = CAST(t.id AS CHAR) WHERE t.id = %s",
        (key,),
    )
    return row[0]


@pytest.fixture
def attached(store: Store, raw: Any) -> Iterator[tuple[str, str]]:
    machine = order_machine()
    store.define(machine)
    table = unique("orm_orders")
    with raw.cursor() as cur:
        cur.execute(
            f"CREATE TABLE `{table}` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, status VARCHAR(32) NULL, "
            "total INT NOT NULL DEFAULT 0) ENGINE=InnoDB"
        )
    raw.commit()
    store.attach(machine.name, table=table, key="id", state="status")
    yield machine.name, table


_django_models: dict[str, Any] = {}


@pytest.fixture(scope="module")
def django_setup(dsn: str) -> Any:
    from django.conf import settings

    s = parse_dsn(dsn)
    if not settings.configured:
        settings.configure(
            DATABASES={
                "default": {
                    "ENGINE": "django.db.backends.mysql",
                    "NAME": s.database,
                    "USER": s.user,
                    "PASSWORD": s.password or "",
                    "HOST": s.host,
                    "PORT": str(s.port),
                    "OPTIONS": {"charset": "utf8mb4"},
                }
            },
            INSTALLED_APPS=[],
            USE_TZ=True,
        )
        django.setup()
    return settings


def django_model(table: str) -> Any:
    """An unmanaged model on ``table`` (one class per table: Django registers models by name)."""
    if table in _django_models:
        return _django_models[table]
    from django.db import models

    meta = type("Meta", (), {"app_label": "pyfsm_orm_tests", "managed": False, "db_table": table})
    model = type(
        "Order_" + table,
        (models.Model,),
        {
            "__module__": __name__,
            "id": models.BigAutoField(primary_key=True),
            "status": models.CharField(max_length=32, null=True),
            "total": models.IntegerField(default=0),
            "Meta": meta,
        },
    )
    _django_models[table] = model
    return model


def test_django_model(django_setup: Any, attached: tuple[str, str], raw: Any) -> None:
    from django.db import OperationalError, connection, transaction

    name, table = attached
    Order = django_model(table)

    # create: the NULL status becomes the first start state, the instance and its first row exist
    a = Order.objects.create(total=10)
    b = Order(status="new", total=20)
    b.save()
    assert state_of(raw, name, table, a.id) == ("new", "new")
    # the first row is the raw INSERT's (source 'update', no from_state), as for any writer of the table
    assert [r[2:] for r in history(raw, name, a.id)] == [(None, "new", "update")]
    assert Order.objects.get(pk=a.id).status == "new"

    # an allowed change of status: history row with the inferred event, source 'update'
    a.status = "paid"
    a.save()
    assert state_of(raw, name, table, a.id) == ("paid", "paid")
    assert history(raw, name, a.id)[-1][1:] == ("pay", "new", "paid", "update")

    # a non-state field: no history row
    rows = len(history(raw, name, a.id))
    a.total = 99
    a.save()
    assert len(history(raw, name, a.id)) == rows
    assert q(raw, f"SELECT total FROM `{table}` WHERE id = %s", (a.id,)) == [(99,)]

    # a refused change: Django's OperationalError with pyfsm's number; nothing moved
    a.status = "delivered"
    with pytest.raises(OperationalError) as info:
        with transaction.atomic():
            a.save()
    assert info.value.args[0] == 31005
    assert isinstance(pyfsm.from_database_error(info.value), pyfsm.TransitionNotAllowed)
    assert state_of(raw, name, table, a.id) == ("paid", "paid")
    assert len(history(raw, name, a.id)) == rows

    # QuerySet.update over several rows is all or nothing: a (paid) may ship, b (new) may not
    with pytest.raises(OperationalError) as info:
        with transaction.atomic():
            Order.objects.filter(pk__in=[a.id, b.id]).update(status="shipped")
    assert isinstance(pyfsm.from_database_error(info.value), pyfsm.TransitionNotAllowed)
    assert state_of(raw, name, table, a.id) == ("paid", "paid")
    assert state_of(raw, name, table, b.id) == ("new", "new")
    assert Order.objects.filter(pk__in=[a.id, b.id]).update(status="cancelled") == 2
    assert state_of(raw, name, table, a.id) == ("cancelled", "cancelled")
    assert history(raw, name, b.id)[-1][1:] == ("cancel", "new", "cancelled", "update")

    # bulk_update: allowed rows move, a refused one makes the whole statement fail
    c, d = Order.objects.create(), Order.objects.create()
    c.status, d.status = "paid", "paid"
    Order.objects.bulk_update([c, d], ["status"])
    assert state_of(raw, name, table, c.id) == ("paid", "paid")
    assert state_of(raw, name, table, d.id) == ("paid", "paid")
    c.status, d.status = "shipped", "delivered"
    with pytest.raises(OperationalError) as info:
        with transaction.atomic():
            Order.objects.bulk_update([c, d], ["status"])
    assert info.value.args[0] == 31005
    assert state_of(raw, name, table, c.id) == ("paid", "paid")
    assert state_of(raw, name, table, d.id) == ("paid", "paid")

    # delete: refused (31017), the row stays
    with pytest.raises(OperationalError) as info:
        with transaction.atomic():
            Order.objects.filter(pk=c.id).delete()
    assert info.value.args[0] == 31017
    assert q(raw, f"SELECT COUNT(*) FROM `{table}` WHERE id = %s", (c.id,)) == [(1,)]
    counts = dict(
        q(
            raw,
            "SELECT state, SUM(instances) FROM fsm_state_counts WHERE machine = %s GROUP BY state "
            "HAVING SUM(instances) <> 0",
            (name,),
        )
    )
    grouped = dict(q(raw, f"SELECT current_state, COUNT(*) FROM `fsm_{name}` GROUP BY current_state"))
    assert {k: int(v) for k, v in counts.items()} == {k: int(v) for k, v in grouped.items()}
    connection.close()


def sa_setup(dsn: str, table: str) -> tuple[Any, Any, Any]:
    from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine

    s = parse_dsn(dsn)
    engine = create_engine(
        f"mysql+pymysql://{s.user}:{s.password or ''}@{s.host}:{s.port}/{s.database}?charset=utf8mb4"
    )
    meta = MetaData()
    t = Table(
        table,
        meta,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("status", String(32), nullable=True),
        Column("total", Integer, nullable=False, default=0),
    )
    return engine, meta, t


def test_sqlalchemy_orm_and_core(dsn: str, attached: tuple[str, str], raw: Any) -> None:
    from sqlalchemy import exc, update
    from sqlalchemy.orm import Session, registry

    name, table = attached
    engine, meta, t = sa_setup(dsn, table)

    class Order:
        id: int
        status: str | None
        total: int

    registry(metadata=meta).map_imperatively(Order, t)
    try:
        with Session(engine) as session:
            a, b = Order(), Order()
            a.total, b.total, b.status = 1, 2, "new"
            session.add_all([a, b])
            session.commit()
            assert state_of(raw, name, table, a.id) == ("new", "new")
            assert [r[2:] for r in history(raw, name, b.id)] == [(None, "new", "update")]

            a.status = "paid"
            session.commit()
            assert history(raw, name, a.id)[-1][1:] == ("pay", "new", "paid", "update")

            rows = len(history(raw, name, a.id))
            a.total = 7
            session.commit()
            assert len(history(raw, name, a.id)) == rows

            a.status = "delivered"
            with pytest.raises(exc.OperationalError) as info:
                session.commit()
            session.rollback()
            assert info.value.orig.args[0] == 31005
            assert isinstance(pyfsm.from_database_error(info.value), pyfsm.TransitionNotAllowed)
            assert state_of(raw, name, table, a.id) == ("paid", "paid")
            assert len(history(raw, name, a.id)) == rows

            session.delete(session.get(Order, b.id))
            with pytest.raises(exc.OperationalError) as info:
                session.commit()
            session.rollback()
            assert info.value.orig.args[0] == 31017
            assert q(raw, f"SELECT COUNT(*) FROM `{table}` WHERE id = %s", (b.id,)) == [(1,)]
            a_id, b_id = a.id, b.id

        # Core: a multi-row UPDATE is all or nothing
        with pytest.raises(exc.OperationalError) as info:
            with engine.begin() as conn:
                conn.execute(update(t).where(t.c.id.in_([a_id, b_id])).values(status="shipped"))
        assert isinstance(pyfsm.from_database_error(info.value), pyfsm.TransitionNotAllowed)
        assert state_of(raw, name, table, a_id) == ("paid", "paid")
        assert state_of(raw, name, table, b_id) == ("new", "new")
        with engine.begin() as conn:
            assert conn.execute(update(t).where(t.c.id.in_([a_id, b_id])).values(status="cancelled")).rowcount == 2
        assert history(raw, name, a_id)[-1][1:] == ("cancel", "paid", "cancelled", "update")
        assert history(raw, name, b_id)[-1][1:] == ("cancel", "new", "cancelled", "update")
        with engine.begin() as conn:
            conn.execute(update(t).where(t.c.id == a_id).values(total=5))
        assert len(history(raw, name, a_id)) == rows + 1
    finally:
        engine.dispose()
