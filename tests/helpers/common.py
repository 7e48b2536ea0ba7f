"""What tests of every kind use: queries on a plain connection, the server's flavour, unique
names, the order machine, accounts granted their roles, a database the server lacks."""

from __future__ import annotations

import contextlib
import itertools
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pymysql

from pyfsm import Machine, Store
from pyfsm.db import Settings, parse_dsn
from pyfsm.schema.grants import Account, grant


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


@contextlib.contextmanager
def granted_accounts(
    server: Settings, settings: Settings, roles: Sequence[str], prefix: str
) -> Iterator[dict[str, Settings]]:
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


def missing_database(make_database, server):  # type: ignore[no-untyped-def]
    """Settings naming a database the server does not have (dropped at the session's end if
    a test created it)."""
    settings = make_database("pyfsm_nodb")
    conn = admin(server)
    try:
        conn.cursor().execute(f"DROP DATABASE `{settings.database}`")
    finally:
        conn.close()
    return settings
