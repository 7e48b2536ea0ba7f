"""Database.run's loop without a server: the flags it passes Retries.next for each kind of
failure, seen from the outside as how many times a call is made. The pool's connections are
in-memory ones whose statements fail as PyMySQL's do; the pauses are not slept."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from pyfsm import db
from pyfsm.db import pool
from pyfsm.db.retrying import CONNECTION_RETRY_DELAYS, DEADLOCK_RETRY_DELAYS
from pyfsm.errors import DatabaseUnavailable, Deadlock

LOST = (2013, "Lost connection to MySQL server during query")
DEADLOCK = (1213, "Deadlock found when trying to get lock; try restarting transaction")
REFUSED = (2003, "Can't connect to MySQL server on '127.0.0.1'")


class Cursor:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.description = None

    def execute(self, sql: str, args: Any) -> None:
        self.conn.attempts += 1
        if self.conn.failures:
            raise pymysql.err.OperationalError(*self.conn.failures.pop(0))

    def nextset(self) -> bool:
        return False

    def close(self) -> None:
        pass


class Connection:
    """A connection whose first statements fail with ``failures`` (errno, text), in turn."""

    host, port, server_status, open = "127.0.0.1", 3306, 0, True

    def __init__(self, failures: list[tuple[int, str]]) -> None:
        self.failures = list(failures)
        self.attempts = 0

    def cursor(self) -> Cursor:
        return Cursor(self)

    def close(self) -> None:
        pass

    def _force_close(self) -> None:
        self.open = False


@pytest.fixture
def database(monkeypatch: pytest.MonkeyPatch) -> pool.Database:
    monkeypatch.setattr(pool.time, "sleep", lambda _seconds: None)
    found = pool.Database(db.parse_dsn("mysql://app@127.0.0.1:1/shop"), pool_size=1)  # never connects
    yield found
    found.close()


def serve(monkeypatch: pytest.MonkeyPatch, database: pool.Database, conn: Connection, refusals: int = 0) -> list[int]:
    """The pool hands out ``conn`` after ``refusals`` failed connects; returns the checkouts made."""
    checkouts = [0]

    def connection() -> Connection:
        checkouts[0] += 1
        if checkouts[0] <= refusals:
            raise pymysql.err.OperationalError(*REFUSED)
        return conn

    monkeypatch.setattr(database._pool, "connection", connection)
    return checkouts


def test_a_deadlock_is_made_again_up_to_three_times_even_on_a_lock_holders_connection(
    database: pool.Database,
) -> None:
    holder = Connection([DEADLOCK] * 5)
    with pytest.raises(Deadlock):
        database.run("CALL fsm_x_v1()", (), retry_connection=False, writes=True, on=holder)
    assert holder.attempts == 1 + len(DEADLOCK_RETRY_DELAYS)
    twice = Connection([DEADLOCK])
    assert database.run("CALL fsm_x_v1()", (), retry_connection=False, writes=True, on=twice) == []
    assert twice.attempts == 2


def test_a_lost_reply_on_a_lock_holders_connection_is_never_made_again(database: pool.Database) -> None:
    holder = Connection([LOST])
    with pytest.raises(DatabaseUnavailable):
        database.run("CALL fsm_x_v1()", (), retry_connection=True, writes=False, on=holder)
    assert holder.attempts == 1


def test_a_lost_reply_is_made_again_only_when_a_repeat_is_safe(
    database: pool.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = Connection([LOST])
    serve(monkeypatch, database, write)
    with pytest.raises(DatabaseUnavailable):
        database.run("CALL fsm_x_v1()", (), retry_connection=False, writes=True)
    assert write.attempts == 1
    read = Connection([LOST, LOST])
    serve(monkeypatch, database, read)
    assert database.run("CALL fsm_x_v1()", (), retry_connection=True, writes=False) == []
    assert read.attempts == 3


def test_no_connection_is_retried_for_any_call_about_a_second(
    database: pool.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = Connection([])
    checkouts = serve(monkeypatch, database, conn, refusals=2)
    assert database.run("CALL fsm_x_v1()", (), retry_connection=False, writes=True) == []
    assert (checkouts[0], conn.attempts) == (3, 1)  # a write: nothing had been sent
    never = serve(monkeypatch, database, conn, refusals=100)
    with pytest.raises(DatabaseUnavailable) as caught:
        database.run("CALL fsm_x_v1()", (), retry_connection=False, writes=True)
    assert never[0] == 1 + len(CONNECTION_RETRY_DELAYS) and caught.value.errno == 2003


def test_on_connection_retries_an_outage_but_not_a_deadlock(
    database: pool.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = Connection([])
    serve(monkeypatch, database, conn)
    failures = [LOST, DEADLOCK]
    calls = []

    def fn(raw: Any) -> str:
        calls.append(raw)
        if failures:
            raise pymysql.err.OperationalError(*failures.pop(0))
        return "done"

    monkeypatch.setattr(pool, "raw_connection", lambda pooled: pooled)
    with pytest.raises(Deadlock):  # the lost connection was retried, the deadlock is fn's own
        database.on_connection(fn)
    assert len(calls) == 2
    assert database.on_connection(fn) == "done"
