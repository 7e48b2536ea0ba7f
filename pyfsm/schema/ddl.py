"""Running pyfsm's DDL: a strict sql_mode, objects created concurrently, metadata-lock waits."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ..db import queries
from ..db.driver import errors as pymysql_errors
from .resources import render

_ALREADY_EXISTS = {1050, 1060, 1061, 1304, 1359}  # table, column, index, routine, trigger already exists


def execute_ddl(conn: Any, statements: Iterable[str]) -> None:
    """Run DDL statements on a raw PyMySQL connection under a strict sql_mode.

    Statements are sent without arguments so that PyMySQL never treats a ``%`` as a
    format marker; routines keep the sql_mode they were created under.
    """
    with conn.cursor() as cur:
        ddl_session(cur)
        for statement in statements:
            try:
                cur.execute(statement)
            except pymysql_errors.MySQLError as exc:
                if exc.args and exc.args[0] in _ALREADY_EXISTS:
                    continue  # created concurrently by another installer
                raise


def ddl_session(cur: Any) -> None:
    """Set up a session for DDL: the strict sql_mode (routines keep the mode they were created
    under) and UTC, as on every connection pyfsm makes."""
    cur.execute(queries.sql("schema_ddl_sql_mode"))
    cur.execute(queries.sql("session_time_zone"))


@contextmanager
def lock_wait(cur: Any, seconds: int) -> Iterator[None]:
    """The session's lock_wait_timeout at ``seconds`` for the block, then back to what it was."""
    cur.execute(queries.sql("schema_lock_wait_timeout"))
    (previous,) = cur.fetchone()
    cur.execute(queries.sql("schema_set_lock_wait_timeout", seconds=int(seconds)))
    try:
        yield
    finally:
        cur.execute(queries.sql("schema_set_lock_wait_timeout", seconds=int(previous)))


def ddl_waiting_briefly(conn: Any, statements: list[str], *, wait_seconds: int = 2, attempts: int = 15) -> None:
    """DDL on objects readers may be using (views): a statement waiting for a metadata lock
    makes every later reader queue behind it, so it waits at most ``wait_seconds`` at a time
    and tries again a second later, ``attempts`` times, instead of lock_wait_timeout's day."""
    with conn.cursor() as cur, lock_wait(cur, wait_seconds):
        for statement in statements:
            for attempt in range(attempts):
                try:
                    execute_ddl(conn, [statement])
                    break
                except pymysql_errors.OperationalError as exc:
                    if exc.args[0] != 1205 or attempt + 1 == attempts:  # 1205: lock wait timeout
                        raise
                    time.sleep(1.0)


def has_column(conn: Any, table: str, column: str) -> bool:
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_has_column"), (table, column))
        return bool(cur.fetchone()[0])


def machine_triggers(conn: Any, machine: str) -> set[str]:
    """The names of the triggers on ``machine``'s instance and history tables."""
    with conn.cursor() as cur:
        cur.execute(queries.sql("schema_machine_triggers"), (f"fsm_{machine}", f"fsm_{machine}_transitions"))
        return {row[0] for row in cur.fetchall()}


def object_name(template: str, machine: str) -> str:
    """The name a per-type file creates: the first backticked name of its CREATE statement."""
    found = re.search(r"^CREATE [A-Z ]+?`([^`]+)`", render(template, machine), re.M)
    assert found, template
    return found.group(1)
