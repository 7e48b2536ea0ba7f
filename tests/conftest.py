"""Test fixtures: a real MySQL/MariaDB server, databases created and dropped per session.

The server comes from $PYFSM_TEST_DSN (any database name; the tests create their own).
Without it, and with a Docker engine answering, MySQL 8.4 is started with testcontainers.
With neither, the run stops with a message saying what to set.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pymysql
import pytest
from galera_cluster import galera  # noqa: F401  (the three-node cluster, one per session, for the Galera tests)
from kafka_broker import kafka  # noqa: F401  (the tansu broker fixture for the relay tests)

from pyfsm import Machine, Store
from pyfsm.db import Settings, parse_dsn
from pyfsm.schema.grants import Account, grant

HELP = (
    "pyfsm's tests need a MySQL 8 or MariaDB 10.6+ server. Set PYFSM_TEST_DSN, e.g.\n"
    "  PYFSM_TEST_DSN=mysql://root@127.0.0.1:3306/test make test\n"
    "or run them where a Docker engine is available (testcontainers starts MySQL 8.4)."
)


def _docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def server() -> Iterator[Settings]:
    """Connection settings of the test server (database part ignored)."""
    dsn = os.environ.get("PYFSM_TEST_DSN")
    if dsn:
        yield parse_dsn(dsn)
        return
    if not _docker_available():
        pytest.exit(HELP, returncode=2)
    from testcontainers.mysql import MySqlContainer

    with MySqlContainer("mysql:8.4", username="root", password="test", dbname="test") as container:
        yield Settings(host=container.get_container_host_ip(), port=int(container.get_exposed_port(3306)),
                       user="root", password="test", database="test")


def errno_of(conn: pymysql.connections.Connection, sql: str, args: Any = None) -> int | None:
    """The MySQL error number a statement (every result set of it) fails with, or None."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            while cur.nextset():
                pass
    except pymysql.err.MySQLError as exc:
        return int(exc.args[0])
    return None


def fetch(conn: pymysql.connections.Connection, sql: str, args: Any = None) -> list[dict[str, Any]]:
    """Rows of one statement (a CALL's result set) as dicts, on a plain connection."""
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(sql, args)
        rows = list(cur.fetchall())
        while cur.nextset():
            pass
        return rows


def admin(settings: Settings) -> pymysql.connections.Connection:
    return pymysql.connect(**settings.connect_kwargs(database=False))


_mariadb: dict[tuple[str, int], bool] = {}


def is_mariadb(where: pymysql.connections.Connection | Settings | Store | str) -> bool:
    """Whether the server is MariaDB rather than MySQL (its version string says so), for the
    tests whose server answers differ: a connection, connection settings, a Store or a DSN."""
    if isinstance(where, pymysql.connections.Connection):
        return "mariadb" in str(where.get_server_info()).lower()
    settings = where.settings if isinstance(where, Store) else parse_dsn(where) if isinstance(where, str) else where
    found = _mariadb.get((settings.host, settings.port))
    if found is None:
        conn = admin(settings)
        try:
            found = _mariadb[(settings.host, settings.port)] = is_mariadb(conn)
        finally:
            conn.close()
    return found


def explain(conn: pymysql.connections.Connection, sql: str, args: Any = None) -> list[dict[str, Any]]:
    """The rows of EXPLAIN's classic table for ``sql``, by column name (MySQL 9's default
    explain_format is a tree: ask for the table there; MariaDB has no FORMAT=TRADITIONAL)."""
    return fetch(conn, ("EXPLAIN " if is_mariadb(conn) else "EXPLAIN FORMAT=TRADITIONAL ") + sql, args)


@pytest.fixture(scope="session")
def make_database(server: Settings) -> Iterator[object]:
    """A factory of empty databases, all dropped at the end of the session."""
    made: list[str] = []

    def make(prefix: str = "pyfsm_t") -> Settings:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        conn = admin(server)
        try:
            conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        finally:
            conn.close()
        made.append(name)
        return server.with_database(name)

    yield make

    def drop(names: list[str]) -> None:
        conn = admin(server)
        try:
            # a test that leaked an open transaction must fail the teardown, not hang it for a year
            conn.cursor().execute("SET SESSION lock_wait_timeout = 30")
            for name in names:
                conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            conn.close()

    # a hundred databases of many tables: dropping them four at a time takes a third as long
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(drop, made[i::4]) for i in range(4)]:
            done.result()


@pytest.fixture(scope="session")
def dsn(make_database) -> str:  # type: ignore[no-untyped-def]
    """A migrated database shared by the session; tests isolate themselves by machine name."""
    settings = make_database()
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


_names = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{next(_names)}"


def order_machine(name: str | None = None, **options: object) -> Machine:
    return Machine(
        name=name or unique("order"),
        states=["new", "paid", "shipped", "delivered", "cancelled"],
        start=["new"],
        final=["delivered", "cancelled"],
        transitions=[
            ("pay", "new", "paid"),
            ("ship", "paid", "shipped"),
            ("deliver", "shipped", "delivered"),
            ("cancel", ["new", "paid"], "cancelled"),
            ("refund", "paid", "new"),
        ],
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture
def order(store: Store) -> Machine:
    """A freshly defined order machine with a unique name."""
    machine = order_machine()
    store.define(machine)
    return machine


@contextlib.contextmanager
def granted_accounts(server: Settings, settings: Settings, roles: Sequence[str],
                     prefix: str) -> Iterator[dict[str, Settings]]:
    """Accounts ``<prefix><role[:3]>_<tag>@%`` granted their roles on ``settings``' database by
    `pyfsm grant` (with a password each); the settings of each, by role. Dropped afterwards."""
    password, tag = "Pw-" + uuid.uuid4().hex, uuid.uuid4().hex[:8]
    made = {role: Account.parse(f"{prefix}{role[:3]}_{tag}@%", role) for role in roles}
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        grant(conn, list(made.values()), passwords={f"{a.user}@{a.host}": password for a in made.values()})
    finally:
        conn.close()
    try:
        yield {role: replace(settings, user=a.user, password=password) for role, a in made.items()}
    finally:
        conn = admin(server)
        try:
            for account in made.values():
                conn.cursor().execute(f"DROP USER IF EXISTS {account.sql}")
        finally:
            conn.close()
