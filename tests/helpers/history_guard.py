"""The history table's append-only promise, checked column by column through raw SQL.

Used by tests/server/test_sql_enforcement.py (a fresh install) and tests/server/test_migrations.py (a type
upgraded by revision 0017): every column of a history row, on the latest and on an older
row, changed with no guard, with a stale guard and with another instance's guard, must be
refused with 31012 and change nothing.
"""

from __future__ import annotations

from typing import Any

import pymysql

#: A changed value for every column of a history row: SQL for SET `column` = ..., given the
#: row as read (`row`), chosen so that it differs from the row's value in every case.
CHANGES: dict[str, Any] = {
    "id": lambda row: f"{row['id'] + 1000}",
    "instance_id": lambda row: f"{row['instance_id'] + 1000}",
    "sort_key": lambda row: f"{row['sort_key'] + 100}",
    "most_recent": lambda row: "NULL" if row["most_recent"] == 1 else "1",
    "event": lambda row: "'x'" if row["event"] is None else "CONCAT(event, ' ')",  # a trailing space is a change
    "from_state": lambda row: "'x'" if row["from_state"] is None else "NULL",
    "to_state": lambda row: "CONCAT(to_state, ' ')",
    "handler": lambda row: "'h'",
    "data_before": lambda row: "'{\"x\": 1}'",
    "data_after": lambda row: "'{\"x\": 2}'",
    "metadata": lambda row: '\'{"by": "someone else"}\'',
    "definition_version": lambda row: f"{row['definition_version'] + 1}",
    "request_id": lambda row: "'forged-request'",
    "source": lambda row: "'procedure'" if row["source"] != "procedure" else "'update'",
    "created_at": lambda row: "created_at - INTERVAL 1 DAY",
    "left_at": lambda row: "'2031-01-01 00:00:00.000000'" if row["left_at"] is None else "NULL",
}


def _rows(conn: Any, table: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:  # as text: JSON and times compared as the server keeps them
        cur.execute(
            f"SELECT id, instance_id, sort_key, most_recent, event, from_state, to_state, handler, "
            f"CAST(data_before AS CHAR), CAST(data_after AS CHAR), CAST(metadata AS CHAR), definition_version, "
            f"request_id, source, created_at, left_at FROM `{table}` ORDER BY id"
        )
        return list(cur.fetchall())


def _errno(conn: Any, sql: str, args: Any = None) -> int | None:
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
    except pymysql.err.MySQLError as exc:
        return int(exc.args[0])
    return None


def refused_updates(conn: Any, machine: str, instance_id: int, other_id: int) -> list[str]:
    """Try every change above on ``instance_id``'s latest and first history rows under each
    guard; return the attempts that were not refused with 31012 or that changed a row ([]
    when the promise holds). ``conn``: an owner's connection with autocommit; ``other_id``:
    another instance of the same type. The instance needs at least two history rows."""
    table = f"fsm_{machine}_transitions"
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"SELECT * FROM `{table}` WHERE instance_id = %s ORDER BY sort_key", (instance_id,))
        history = list(cur.fetchall())
    assert len(history) >= 2 and history[-1]["most_recent"] == 1, history
    latest, first = history[-1], history[0]
    time = str(latest["created_at"])  # microseconds are always printed: DATETIME(6)
    if "." not in time:
        time += ".000000"
    guards = {
        "no guard": None,
        # the guard that was set while the latest row was written, left behind (a deadlock can)
        "stale guard": f"{instance_id}/{time}",
        "another instance's guard": f"{other_id}/{time}",
    }
    before = _rows(conn, table)
    failures = []
    for guard_name, guard in guards.items():
        with conn.cursor() as cur:
            cur.execute("SET @fsm_guard = %s", (guard,))
        try:
            for row_name, row in (("latest", latest), ("older", first)):
                attempts = {column: f"SET `{column}` = {change(row)}" for column, change in CHANGES.items()}
                if row is latest:  # the flip pyfsm makes, without the guard that names it
                    attempts["most_recent and left_at"] = "SET most_recent = NULL, left_at = '2031-01-01 00:00:00'"
                for what, assignment in attempts.items():
                    sql = f"UPDATE `{table}` {assignment} WHERE id = %s"
                    errno = _errno(conn, sql, (row["id"],))
                    if errno != 31012:
                        failures.append(f"{guard_name}, {row_name} row, {what}: {errno}")
            # the report's own form: the latest row picked by its flag, as anyone would write it
            errno = _errno(
                conn,
                f"UPDATE `{table}` SET most_recent = NULL WHERE instance_id = %s AND most_recent = 1 LIMIT 1",
                (instance_id,),
            )
            if errno != 31012:
                failures.append(f"{guard_name}, most_recent = NULL WHERE most_recent = 1: {errno}")
        finally:
            with conn.cursor() as cur:
                cur.execute("SET @fsm_guard = NULL")
    if _rows(conn, table) != before:
        failures.append("the history changed")
    return failures
