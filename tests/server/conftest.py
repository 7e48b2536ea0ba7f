"""Fixtures of the tests in this folder that more than one module uses (the shared ones, the
server and its databases, are tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from pyfsm import Store
from pyfsm.db import Settings, parse_dsn


@pytest.fixture(scope="module", autouse=True)
def _drop_the_modules_databases(make_database) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Drop the databases a module's own fixtures made (module_db ...) when the module is done."""
    mark = make_database.mark()
    yield
    make_database.drop_since(mark)


@pytest.fixture(autouse=True)
def _drop_the_tests_databases(make_database) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Drop the databases a test made (fresh, make_database in its body) when it is done: set up
    before and torn down after the test's other fixtures, so their stores are closed by then."""
    mark = make_database.mark()
    yield
    make_database.drop_since(mark)


@pytest.fixture
def fresh(make_database) -> Iterator[tuple[Settings, Store]]:  # type: ignore[no-untyped-def]
    """A migrated database of its own (the relay lock and the outbox are per database)."""
    settings = make_database("pyfsm_relay")
    store = Store(settings.dsn())
    store.migrate()
    yield settings, store
    store.close()


@pytest.fixture(scope="module")
def module_db(make_database) -> Iterator[tuple[Settings, Store]]:  # type: ignore[no-untyped-def]
    """A migrated database for one module, with its Store: for what is global to a database
    (timers: a firing call fires every due timer of every type)."""
    settings = make_database("pyfsm_mod")
    store = Store(settings.dsn())
    store.migrate()
    yield settings, store
    store.close()


@pytest.fixture
def module_dba(module_db: tuple[Settings, Store]) -> Iterator[pymysql.connections.Connection]:
    """A plain autocommit connection to module_db's database, as a DBA's client."""
    conn = pymysql.connect(**parse_dsn(module_db[0].dsn()).connect_kwargs())
    yield conn
    conn.close()


@pytest.fixture
def side(dsn: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The side_effects table, and the DSN the handlers write it through."""
    monkeypatch.setenv("PYFSM_ENGINE_DSN", dsn)
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())  # autocommit, like pyfsm
    conn.cursor().execute(
        "CREATE TABLE IF NOT EXISTS side_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
        "machine VARCHAR(48), instance_key VARCHAR(191), state VARCHAR(64), what VARCHAR(64), "
        "pid INT, at DATETIME(6) DEFAULT (UTC_TIMESTAMP(6)))"
    )
    yield conn
    conn.close()
