"""Test fixtures: a real MySQL/MariaDB server, and databases the tests create and drop.

The server comes from $PYFSM_TEST_DSN (any database name; the tests create their own).
Without it, the same choice as `make test` (scripts/dev_server.py): a server answering at
127.0.0.1:3306, else the project's own MySQL (scripts/mysql-server), else MySQL 8.4 in Docker
(testcontainers); with none of them the run stops with one line saying what to set.
"""

from __future__ import annotations

import concurrent.futures
import os
import uuid
from collections.abc import Iterator

import dev_server  # scripts/dev_server.py (pyproject's pythonpath)
import pymysql
import pytest
from helpers.common import admin, order_machine
from helpers.galera_cluster import galera  # noqa: F401  (the three-node cluster, one per session, for the Galera tests)
from helpers.kafka_broker import kafka  # noqa: F401  (the tansu broker fixture for the relay tests)

from pyfsm import Machine, Store
from pyfsm.db import Settings, parse_dsn


@pytest.fixture(scope="session")
def server() -> Iterator[Settings]:
    """Connection settings of the test server (database part ignored)."""
    try:
        with dev_server.server_dsn("PYFSM_TEST_DSN", "test") as dsn:
            # the helpers that ask which server this pass runs on read the variable
            os.environ["PYFSM_TEST_DSN"] = dsn
            yield parse_dsn(dsn)
    except dev_server.NoServer as exc:
        pytest.exit(str(exc), returncode=2)


class TestDatabases:
    """A factory of empty databases on the test server: ``make_database(prefix)``.

    Each takes the server's default utf8mb4 collation, as a user's database does (MariaDB 11.8
    utf8mb4_uca1400_ai_ci, 10.11 utf8mb4_general_ci, MySQL utf8mb4_0900_ai_ci): pyfsm's routines
    are created in it, so a comparison they leave to the database's collation would show.
    (`pyfsm migrate` makes a missing database utf8mb4_bin; test_collation.py has the
    look-alike keys.)

    A database is dropped when what made it is done (tests/server/conftest.py: the test's, the
    module's), the rest at the end of the session. Why not all at the end: a pass makes some
    hundreds of migrated databases, and a server holding all of them at once answered ever more
    slowly (its table cache and trigger parsing over tens of thousands of tables) and kept
    gigabytes it had freed.
    """

    def __init__(self, server: Settings) -> None:
        self.server = server
        self.made: list[str] = []
        self.kept: list[str] = []  # the session fixtures': dropped only at the session's end

    def __call__(self, prefix: str = "pyfsm_t") -> Settings:
        name = self._create(prefix)
        self.made.append(name)
        return self.server.with_database(name)

    def for_session(self, prefix: str = "pyfsm_t") -> Settings:
        """A database a session-scoped fixture keeps to the end, whichever test first asked for it."""
        name = self._create(prefix)
        self.kept.append(name)
        return self.server.with_database(name)

    def _create(self, prefix: str) -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        conn = admin(self.server)
        try:
            conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        finally:
            conn.close()
        return name

    def mark(self) -> int:
        """Where the list stands now: ``drop_since(mark)`` drops what was made after."""
        return len(self.made)

    def drop_since(self, mark: int) -> None:
        """Drop the databases made since ``mark``; one that cannot be dropped within a few
        seconds (a connection a test left open holds a lock on it) waits for the session's end."""
        names, self.made[mark:] = self.made[mark:], []
        self.made += self._drop(names, wait=5)

    def drop_all(self) -> None:
        """Drop every database left, four at a time (a third as long as one by one)."""
        made, self.made, self.kept = self.made + self.kept, [], []
        # a test that leaked an open transaction must fail the teardown, not hang it for a year
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            left = [name for part in pool.map(lambda i: self._drop(made[i::4], wait=30), range(4)) for name in part]
        assert not left, f"databases a lock kept from being dropped for 30 s: {left}"

    def _drop(self, names: list[str], *, wait: int) -> list[str]:
        """Drop ``names`` on one connection; return those a lock held longer than ``wait`` seconds."""
        left: list[str] = []
        if not names:
            return left
        conn = admin(self.server)
        try:
            conn.cursor().execute(f"SET SESSION lock_wait_timeout = {wait}")
            for name in names:
                try:
                    conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
                except pymysql.err.OperationalError:
                    left.append(name)
        finally:
            conn.close()
        return left


@pytest.fixture(scope="session")
def make_database(server: Settings) -> Iterator[TestDatabases]:
    """The session's TestDatabases; whatever is left of them is dropped at its end."""
    databases = TestDatabases(server)
    yield databases
    databases.drop_all()


@pytest.fixture(scope="session")
def dsn(make_database) -> str:  # type: ignore[no-untyped-def]
    """A migrated database shared by the session; tests isolate themselves by machine name."""
    settings = make_database.for_session()
    store = Store(settings.dsn())
    store.migrate()
    store.close()
    return settings.dsn()


@pytest.fixture(scope="session")
def store(dsn: str) -> Iterator[Store]:
    s = Store(dsn)
    yield s
    s.close()


@pytest.fixture
def raw(dsn: str) -> Iterator[pymysql.connections.Connection]:
    """A plain PyMySQL connection to the test database, as a DBA would use it."""
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    conn.cursor().execute("SET time_zone = '+00:00'")
    yield conn
    conn.close()


@pytest.fixture
def order(store: Store) -> Machine:
    """A freshly defined order machine with a unique name."""
    machine = order_machine()
    store.define(machine)
    return machine
