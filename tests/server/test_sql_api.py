"""docs/sql-api.md: its examples run as one script, it documents every public procedure, and
each procedure, called through a plain PyMySQL connection as a DBA would, answers what the
tables hold and refuses bad input without changing anything."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pymysql
import pytest

from pyfsm import Store, db
from pyfsm.errors import SERVER, SIGNALLED
from pyfsm.schema import attached
from pyfsm.schema import install as schema

DOC = (Path(__file__).resolve().parents[2] / "docs" / "sql-api.md").read_text()
SECTION = re.compile(r"^### `(fsm_[\w{}]+)`[ \t]*$", re.M)
STATEMENT = re.compile(r"(?:'(?:[^'\\]|\\.)*'|--[^\n]*|[^;'-]|-)+")  # up to a ; outside strings and comments
STEP = re.compile(r"```sql\n(.*?)```|<!-- sync: (\w+) -->", re.S)
TICKET = re.search(r"SET @ticket = '(.*?)';", DOC, re.S).group(1)  # type: ignore[union-attr]
WRONG_ARGUMENT_COUNT = 1318  # the server's own error, for every procedure


#: Public procedures that run with the caller's rights (SQL SECURITY INVOKER), so that the
#: accounts granted EXECUTE on every public procedure cannot use them: fsm_attach_v1 reads the
#: definition of the caller's table and writes fsm_attachments (docs/sql-api.md#your-own-tables).
CALLERS_RIGHTS = {"fsm_attach_v1"}
#: Per-type procedures that only an attached type has (created with its triggers, not by
#: `pyfsm sync` of every type): the `dba` fixture's `legacy_ticket` is attached to a table of
#: its own, as the doc's example type of that name is, so that they are checked like the others.
ATTACHED_ONLY = {"fsm_{type}_adopt_v1"}


def generic(name: str) -> str:
    """A routine's name with its type written `{type}`, as the doc names the per-type ones."""
    return re.sub(r"^fsm_(?:legacy_ticket|ticket)_", "fsm_{type}_", name)


def specific(name: str) -> str:
    """The fixture's routine a documented name stands for."""
    return name.replace("{type}", "legacy_ticket" if name in ATTACHED_ONLY else "ticket")


def sections() -> dict[str, str]:
    parts = SECTION.split(DOC)
    return {name: re.split(r"^## ", body, flags=re.M)[0] for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def tables(body: str) -> dict[str, list[list[str]]]:
    """The markdown tables of a section by their first header cell, rows without the header."""
    found = {}
    for block in re.findall(r"(?:^\|.*\n)+", body, re.M):
        rows = [[cell.strip().strip("`") for cell in line.strip().strip("|").split("|")] for line in block.splitlines()]
        found[rows[0][0]] = rows[2:]
    return found


def columns(name: str, docs: dict[str, str]) -> list[str]:
    same = re.search(r"same columns as `(fsm_[\w{}]+)`", docs[name])
    return (columns(same.group(1), docs) if same else []) + [r[0] for r in tables(docs[name]).get("column", [])]


def dry_run_only(name: str, docs: dict[str, str]) -> set[str]:
    """Columns documented as answered by a dry run only (fsm_attach_v1 with p_dry_run 1)."""
    return {r[0] for r in tables(docs[name]).get("column", []) if r[1].startswith("dry run only")}


def documented_errors(name: str, docs: dict[str, str]) -> set[int]:
    return {int(r[0]) for r in tables(docs[name]).get("errno", [])}


def procedure(sql: str) -> str | None:
    found = re.match(r"CALL\s+`?(\w+)`?\s*\(", sql)
    return generic(found.group(1)) if found else None


def plain(settings: db.Settings) -> pymysql.connections.Connection:
    return pymysql.connect(
        host=settings.host,
        port=settings.port,
        user=settings.user,
        password=settings.password,
        database=settings.database,
        charset="utf8mb4",
        autocommit=True,
    )


def execute(conn: Any, sql: str, args: Any = None) -> list[tuple[list[str], list[dict[str, Any]]]]:
    """Every result set of one statement that has columns, as (column names, rows)."""
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(sql, args)
        found = []
        while True:
            if cur.description:
                found.append(([d[0] for d in cur.description], list(cur.fetchall())))
            if not cur.nextset():
                return found


def q(conn: Any, sql: str, args: Any = None) -> list[dict[str, Any]]:
    """The rows of a statement that must answer with exactly one result set."""
    found = execute(conn, sql, args)
    assert len(found) == 1, f"{sql}: {len(found)} result sets"
    return found[0][1]


def errno_of(conn: Any, sql: str, args: Any = None) -> int:
    with pytest.raises(pymysql.err.MySQLError) as info:
        execute(conn, sql, args)
    return int(info.value.args[0])


def fingerprint(conn: Any) -> list[dict[str, Any]]:
    names = [
        r["t"]
        for r in q(
            conn,
            "SELECT table_name AS t FROM information_schema.tables "
            "WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY 1",
        )
    ]
    return q(conn, "CHECKSUM TABLE " + ", ".join(f"`{n}`" for n in names))


def install(settings: db.Settings, machine: str) -> None:
    """What `pyfsm sync <machine>` does: the type's objects, and a DBA's recorded attachment's."""
    conn = db.connect(settings)
    try:
        schema.install_machine_objects(conn, machine)
        recorded = attached.recorded(conn, machine)
        if recorded is not None:
            attached.install(conn, recorded)
    finally:
        conn.close()


def test_doc_examples_run_in_order_as_one_script(make_database) -> None:  # type: ignore[no-untyped-def]
    settings = make_database("pyfsm_sqldoc")
    schema.migrate(settings)
    docs, called, conn = sections(), set(), plain(settings)
    try:
        for block, machine in STEP.findall(DOC):
            if machine:
                install(settings, machine)
                continue
            statements = [
                s
                for s in (re.sub(r"^\s*--.*$", "", part, flags=re.M).strip() for part in STATEMENT.findall(block))
                if s
            ]
            expected = re.match(r"-- error: (\d+)\n", block)
            if expected:
                assert len(statements) == 1, block
                before = fingerprint(conn)
                assert errno_of(conn, statements[0]) == int(expected.group(1)), statements[0]
                assert fingerprint(conn) == before, f"{statements[0]} changed the database"
                name = procedure(statements[0])
                assert name is None or int(expected.group(1)) in documented_errors(name, docs), statements[0]
                continue
            for statement in statements:
                found = execute(conn, statement)
                name = procedure(statement)
                if name is None:
                    assert len(found) <= 1, statement
                    continue
                assert len(found) == 1, f"{statement}: {len(found)} result sets"
                missing = set(columns(name, docs)) - set(found[0][0])
                if not re.search(r",\s*1\s*\)\s*$", statement):  # not a dry run: no dry run's columns
                    missing -= dry_run_only(name, docs)
                assert not missing, f"{statement}: documented columns missing from the result: {missing}"
                called.add(name)
    finally:
        conn.close()
    assert called == set(docs), f"sections without a successful example: {set(docs) - called}"


@pytest.fixture(scope="module")
def dba(make_database) -> Any:  # type: ignore[no-untyped-def]
    """A migrated database with the doc's `ticket` type installed, and a DBA's connection to it."""
    settings = make_database("pyfsm_sqlapi")
    schema.migrate(settings)
    conn = plain(settings)
    assert q(conn, "CALL fsm_define_v3('ticket', %s)", (TICKET,))[0]["tables_ready"] == 0
    install(settings, "ticket")
    q(conn, "CALL fsm_define_v3('legacy_ticket', %s)", (TICKET,))
    install(settings, "legacy_ticket")
    execute(conn, "CREATE TABLE legacy_tickets (id INT NOT NULL PRIMARY KEY, status VARCHAR(32) NULL) ENGINE=InnoDB")
    q(conn, "CALL fsm_attach_v1('legacy_ticket', 'legacy_tickets', 'id', 'status', NULL, NULL, 'refuse', 0)")
    install(settings, "legacy_ticket")  # its triggers and adoption procedure, as `pyfsm sync` creates them
    yield conn
    conn.close()


def test_every_public_procedure_is_documented_and_nothing_else(dba: Any) -> None:
    docs = sections()
    routines = q(
        dba,
        "SELECT routine_name AS name, routine_type AS kind, security_type AS security "
        "FROM information_schema.routines WHERE routine_schema = DATABASE()",
    )
    public = {
        generic(r["name"])
        for r in routines
        if (r["security"] == "DEFINER" or r["name"] in CALLERS_RIGHTS) and r["kind"] == "PROCEDURE"
    }
    assert public == set(docs)
    internal = DOC.split("\n## Internal\n")[1]
    for r in routines:
        if r["security"] == "INVOKER" and r["name"] not in CALLERS_RIGHTS:
            name = generic(r["name"])
            assert f"`{name}`" in internal and name not in docs, name
    parameters = q(
        dba,
        "SELECT specific_name AS name, parameter_name AS p, data_type AS t FROM "
        "information_schema.parameters WHERE specific_schema = DATABASE() AND parameter_name IS NOT NULL "
        "ORDER BY specific_name, ordinal_position",
    )
    for name, body in docs.items():
        real = [(r["p"], r["t"]) for r in parameters if r["name"] == specific(name)]
        written = [(r[0], r[1].split("(")[0].split(" ")[0].lower()) for r in tables(body).get("parameter", [])]
        assert written == real, name
        for errno, cls, _when in tables(body).get("errno", []):
            assert (SIGNALLED.get(int(errno)) or SERVER[int(errno)]).__name__ == cls, (name, errno)
    overview = tables(DOC.split("\n## Store methods")[0])["errno"]
    assert [(int(r[0]), r[1]) for r in overview] == sorted((n, c.__name__) for n, c in SIGNALLED.items())
    store_methods = {m for m in vars(Store) if not m.startswith("_") and callable(getattr(Store, m))} - {"close"}
    assert store_methods <= set(re.findall(r"`Store\.(\w+)\(\)`", DOC))


def test_writes_and_reads_agree_with_the_tables(dba: Any) -> None:
    created = q(dba, "CALL fsm_create_v1('ticket', 'h-1', NULL, '{\"n\": 1}', '{\"by\": \"t\"}', 'h1-new', 'cust-h')")[
        0
    ]
    typed = q(dba, "CALL fsm_ticket_create_v1('h-2', 'open', NULL, NULL, NULL, NULL)")[0]
    sent = q(dba, "CALL fsm_send_v1('ticket', 'h-1', 'assign', '{\"n\": 2}', NULL, 1, 'h1-assign', 'tester', NULL)")[0]
    typed_send = q(dba, "CALL fsm_ticket_send_v1('h-1', 'resolve', NULL, '{\"why\": 1}', 2, NULL, NULL, NULL)")[0]
    results = [created, sent, typed_send]
    table = q(
        dba,
        "SELECT h.* FROM fsm_ticket_transitions h JOIN fsm_ticket i ON i.id = h.instance_id "
        "WHERE i.instance_key = 'h-1' ORDER BY h.sort_key",
    )
    assert [(r["id"], r["event"], r["from_state"], r["to_state"], r["sort_key"]) for r in table] == [
        (r["transition_id"], r["event"], r["from_state"], r["to_state"], r["sort_key"]) for r in results
    ]
    assert (table[1]["request_id"], table[1]["handler"], json.loads(table[1]["data_after"])) == (
        "h1-assign",
        "tester",
        {"n": 2},
    )
    assert json.loads(table[2]["metadata"]) == {"why": 1} and (typed["to_state"], typed["created"]) == ("open", 1)
    without_left_at = [{k: v for k, v in r.items() if k != "left_at"} for r in table]
    assert (
        q(dba, "CALL fsm_history_v1('ticket', 'h-1')") == q(dba, "CALL fsm_ticket_history_v1('h-1')") == without_left_at
    )
    instance = q(dba, "SELECT * FROM fsm_ticket WHERE instance_key = 'h-1'")
    assert q(dba, "CALL fsm_get_v1('ticket', 'h-1')") == q(dba, "CALL fsm_ticket_get_v1('h-1')") == instance
    assert (instance[0]["current_state"], instance[0]["version"]) == ("resolved", typed_send["version"])
    outbox = q(
        dba, "SELECT transition_id FROM fsm_outbox WHERE machine = 'ticket' AND instance_key = 'h-1' ORDER BY id"
    )
    assert [r["transition_id"] for r in outbox] == [r["id"] for r in table]
    by_state = {
        r["state"]: r["n"]
        for r in q(dba, "SELECT current_state AS state, COUNT(*) AS n FROM fsm_ticket GROUP BY current_state")
    }
    for sql in ("CALL fsm_counts_v2('ticket')", "CALL fsm_counts_v1('ticket')", "CALL fsm_ticket_counts_v1()"):
        assert {r["state"]: int(r["instances"]) for r in q(dba, sql)} == by_state, sql
    first = q(dba, "CALL fsm_in_state_v1('ticket', 'open', 0, 1)")
    rest = q(dba, "CALL fsm_ticket_in_state_v1('open', %s, 10000)", (first[-1]["id"],))
    assert first + rest == q(dba, "SELECT * FROM fsm_ticket WHERE current_state = 'open' ORDER BY id")


def test_state_at_a_moment_between_two_transitions_is_the_earlier_state(dba: Any) -> None:
    q(dba, "CALL fsm_create_v1('ticket', 's-1', NULL, NULL, NULL, NULL, NULL)")
    for event in ("assign", "resolve"):
        time.sleep(0.003)
        q(dba, "CALL fsm_send_v1('ticket', 's-1', %s, NULL, NULL, NULL, NULL, NULL, NULL)", (event,))
    rows = q(
        dba,
        "SELECT h.to_state, h.sort_key, h.created_at FROM fsm_ticket_transitions h JOIN fsm_ticket i "
        "ON i.id = h.instance_id WHERE i.instance_key = 's-1' ORDER BY h.sort_key",
    )
    for before, after in pairwise(rows):
        middle = before["created_at"] + (after["created_at"] - before["created_at"]) / 2
        [got] = q(dba, "CALL fsm_state_at_v1('ticket', 's-1', %s)", (middle,))
        assert (got["state"], got["sort_key"], got["left_at"]) == (
            before["to_state"],
            before["sort_key"],
            after["created_at"],
        )
    assert q(dba, "CALL fsm_state_at_v1('ticket', 's-1', %s)", (rows[0]["created_at"] - timedelta(seconds=1),)) == []
    [now] = q(dba, "CALL fsm_state_at_v1('ticket', 's-1', NULL)")
    assert (now["state"], now["entered_at"], now["left_at"]) == ("resolved", rows[-1]["created_at"], None)


def test_locks_agree_with_fsm_locks_and_force_unlock_writes_the_log(dba: Any) -> None:
    q(dba, "CALL fsm_create_v1('ticket', 'l-1', NULL, NULL, NULL, NULL, 'cust-l')")
    setting = q(dba, "CALL fsm_set_locking_v1('ticket', 'l-1', 1, 1)")
    assert (
        setting
        == q(
            dba,
            "SELECT instance_key, uses_global_lock, uses_local_lock, version FROM fsm_ticket "
            "WHERE instance_key = 'l-1'",
        )
        and setting[0]["version"] == 2
    )
    lock = q(dba, "CALL fsm_lock_v2('ticket', 'l-1', 't:owner', 30)")[0]
    held = "SELECT scope, owner, expires_at, unlocked_at FROM fsm_locks WHERE lookup_key = 'cust-l' ORDER BY scope"
    assert q(dba, held) == [
        {"scope": s, "owner": "t:owner", "expires_at": lock["expires_at"], "unlocked_at": None} for s in ("*", "ticket")
    ] and (lock["global_lock"], lock["local_lock"]) == (1, 1)
    view = q(dba, "SELECT * FROM fsm_held_locks_v1 WHERE lookup_key = 'cust-l' ORDER BY since, id")
    assert len(view) == 2 and q(dba, "CALL fsm_locks_v1('cust-l')") == view
    assert q(dba, "CALL fsm_lock_holders_v1('ticket', 'l-1')") == view
    renewed = q(dba, "CALL fsm_renew_lock_v1('t:owner', 120)")[0]
    assert renewed["renewed"] == 2 and {r["expires_at"] for r in q(dba, held)} == {renewed["expires_at"]}
    assert q(dba, "CALL fsm_unlock_v1('t:owner')") == [{"released": 2}]
    released = {r["unlocked_at"] for r in q(dba, held)}
    assert len(released) == 1 and None not in released
    assert q(dba, "SELECT unlocked_at FROM fsm_ticket WHERE instance_key = 'l-1'")[0]["unlocked_at"] in released
    q(dba, "CALL fsm_lock_v2('ticket', 'l-1', 't:stuck', 300)")
    forced = q(dba, "CALL fsm_force_unlock_v1(NULL, 'cust-l', 'test: holder lost')")
    log = q(
        dba,
        "SELECT scope, lookup_key, machine, instance_key, owner, expires_at, reason, released_by "
        "FROM fsm_lock_log WHERE lookup_key = 'cust-l' ORDER BY id",
    )
    assert [{k: r[k] for k in forced[0] if k != "advisory_connection"} for r in forced] == [
        {k: r[k] for k in forced[0] if k != "advisory_connection"} for r in log
    ]
    assert [(r["scope"], r["owner"], r["reason"]) for r in log] == [
        ("*", "t:stuck", "test: holder lost"),
        ("ticket", "t:stuck", "test: holder lost"),
    ]
    assert {r["released_by"] for r in log} == {q(dba, "SELECT USER() AS u")[0]["u"]}
    assert q(dba, "CALL fsm_locks_v1('cust-l')") == [] and None not in {r["unlocked_at"] for r in q(dba, held)}
    assert errno_of(dba, "CALL fsm_renew_lock_v1('t:stuck', 60)") == 31019
    assert q(dba, "CALL fsm_unlock_v1('t:stuck')") == [{"released": 0}]


def test_engine_controls_agree_with_fsm_runs_and_fsm_errors(dba: Any) -> None:
    q(dba, "CALL fsm_create_v1('ticket', 'e-1', NULL, NULL, NULL, NULL, NULL)")

    def run() -> list[dict[str, Any]]:
        return q(
            dba,
            "SELECT r.instance_id, r.due_at, r.claimed_by, r.attempt, r.pause_requested, r.run_immediately "
            "FROM fsm_runs r JOIN fsm_ticket i ON i.id = r.instance_id WHERE r.machine = 'ticket' "
            "AND i.instance_key = 'e-1'",
        )

    def instance() -> dict[str, Any]:
        return q(
            dba,
            "SELECT current_state AS state, status, version, resume_from_step FROM fsm_ticket "
            "WHERE instance_key = 'e-1'",
        )[0]

    queued = q(dba, "CALL fsm_enqueue_v2('ticket', 'e-1', NULL, 0)")[0]
    assert queued == {"instance_key": "e-1", **{k: run()[0][k] for k in ("due_at", "claimed_by", "run_immediately")}}
    assert q(dba, "CALL fsm_run_info_v1('ticket', 'e-1')") == run() and run()[0]["run_immediately"] == 0
    [claimed] = q(dba, "CALL fsm_claim_v1('ticket', 't:worker', 1, 60, 'e-1')")
    due = run()[0]["due_at"]
    assert (claimed["version"], run()[0]["claimed_by"]) == (1, "t:worker")
    assert q(dba, "CALL fsm_renew_claims_v1('t:worker', 'ticket', %s, 120)", (str(claimed["id"]),)) == [{"renewed": 1}]
    assert run()[0]["due_at"] > due
    failed = q(
        dba,
        "CALL fsm_step_failed_v1('ticket', 'e-1', 't:worker', 1, 'triage', 1, 'ValueError', 'boom', "
        "'trace', NULL, NULL)",
    )[0]
    assert run() == [] and {k: failed[k] for k in ("state", "status", "version")} == {
        k: instance()[k] for k in ("state", "status", "version")
    } == {"state": "open", "status": "failed", "version": 2}
    errors = q(
        dba,
        "SELECT id, state, handler, attempt, error_type, message, traceback, outcome, next_run_at, "
        "created_at FROM fsm_errors WHERE machine = 'ticket' AND instance_key = 'e-1' ORDER BY id",
    )
    assert q(dba, "CALL fsm_errors_v1('ticket', 'e-1')") == errors and errors[0]["outcome"] == "failed"
    listed = q(dba, "CALL fsm_failed_v1('ticket', 0, 10000)")
    assert [r["instance_key"] for r in listed] == [
        r["instance_key"] for r in q(dba, "SELECT instance_key FROM fsm_ticket WHERE status = 'failed' ORDER BY id")
    ]
    mine = next(r for r in listed if r["instance_key"] == "e-1")
    assert (mine["handler"], mine["error_type"], mine["failed_at"]) == ("triage", "ValueError", errors[0]["created_at"])
    assert q(dba, "CALL fsm_retry_v1('ticket', 'e-1')") == [
        {"instance_key": "e-1", "state": "open", "status": "running"}
    ]
    assert (run()[0]["attempt"], run()[0]["claimed_by"], instance()["status"]) == (0, None, "running")
    [claimed] = q(dba, "CALL fsm_claim_v1('ticket', 't:worker', 1, 60, 'e-1')")
    steps = '[{"event": "assign", "handler": "triage", "data": {"agent": "x"}}]'
    stepped = q(
        dba,
        "CALL fsm_step_v1('ticket', 'e-1', 't:worker', %s, %s, 'waiting', 0, 60, NULL, NULL)",
        (claimed["version"], steps),
    )[0]
    assert {k: stepped[k] for k in ("state", "status", "version")} == {
        k: instance()[k] for k in ("state", "status", "version")
    }
    last = q(
        dba,
        "SELECT h.event, h.handler, h.data_after FROM fsm_ticket_transitions h JOIN fsm_ticket i "
        "ON i.id = h.instance_id WHERE i.instance_key = 'e-1' AND h.most_recent = 1",
    )[0]
    assert (last["event"], last["handler"], json.loads(last["data_after"])) == ("assign", "triage", {"agent": "x"})
    assert (instance()["status"], run()[0]["claimed_by"], run()[0]["due_at"]) == ("waiting", None, None)
    paused = q(dba, "CALL fsm_pause_v1('ticket', 'e-1')")[0]
    assert (paused["status"], paused["pending"]) == ("paused", 0) and instance()["status"] == "paused"
    assert instance()["resume_from_step"] == "assigned" and run()[0]["due_at"] is None
    assert q(dba, "CALL fsm_resume_v1('ticket', 'e-1')")[0]["status"] == instance()["status"] == "running"
    assert run()[0]["due_at"] is not None and run()[0]["claimed_by"] is None


def test_definitions_stats_and_catalog_agree_with_the_tables(dba: Any) -> None:
    first = '{"states": ["in", "out"], "start": ["in"], "transitions": [{"event": "go", "from": ["in"], "to": "out"}]}'
    second = first.replace('"transitions"', '"final": ["out"], "transitions"')
    results = [
        q(dba, sql, (body,))[0]
        for sql, body in (
            ("CALL fsm_define_v1('desk', %s)", first),
            ("CALL fsm_define_v2('desk', %s)", second),
            ("CALL fsm_define_v3('desk', %s)", second),
        )
    ]
    assert [(r["version"], r["changed"], r["tables_ready"]) for r in results] == [(1, 1, 0), (2, 1, 0), (2, 0, 0)]
    stored = q(
        dba,
        "SELECT d.machine, d.version, d.version = m.current_version AS is_current, d.body, d.topic, "
        "d.save_after_step, d.uses_global_lock, d.uses_local_lock, d.created_at FROM fsm_definitions d "
        "JOIN fsm_machines m ON m.machine = d.machine WHERE d.machine = 'desk' ORDER BY d.version",
    )
    assert q(dba, "CALL fsm_definition_v1('desk', 1)") == stored[:1]
    assert q(dba, "CALL fsm_definition_v1('desk', NULL)") == stored[1:] and json.loads(stored[1]["body"])["final"]
    assert q(dba, "CALL fsm_schema_version_v1()") == q(dba, "SELECT version_num AS revision FROM fsm_alembic_version")
    lag = q(dba, "CALL fsm_outbox_lag_v1()")[0]
    pending = q(dba, "SELECT COUNT(*) AS n, MIN(id) AS oldest FROM fsm_outbox WHERE published_at IS NULL")[0]
    assert (lag["unpublished"], lag["oldest_id"], lag["parked"]) == (pending["n"], pending["oldest"], 0)
    for key in ("st-queued", "st-idle"):  # one handed to the engine, one that no handler runs
        q(dba, "CALL fsm_create_v1('ticket', %s, NULL, NULL, NULL, NULL, NULL)", (key,))
    q(dba, "CALL fsm_enqueue_v2('ticket', 'st-queued', NULL, NULL)")
    [stats] = [r for r in q(dba, "CALL fsm_stats_v3()") if r["machine"] == "ticket"]  # desk has no tables: not listed
    status = {r["status"]: r["n"] for r in q(dba, "SELECT status, COUNT(*) AS n FROM fsm_ticket GROUP BY status")}
    assert stats["instances"] == sum(status.values()) and stats["completed"] == status.get("completed", 0)
    assert all(stats[s] == status.get(s, 0) for s in ("waiting", "paused", "failed"))
    # running: the stored status running with a run that has a due time (a handler runs it or
    # will); idle: the rest of the stored status running (docs/reporting.md, "Status")
    [queued] = q(
        dba,
        "SELECT COUNT(*) AS n FROM fsm_ticket i JOIN fsm_runs r ON r.machine = 'ticket' AND r.instance_id = i.id "
        "WHERE i.status = 'running' AND r.due_at IS NOT NULL",
    )
    assert queued["n"] > 0 and status["running"] > queued["n"]  # st-queued is running, st-idle idle
    assert (stats["running"], stats["idle"]) == (queued["n"], status["running"] - queued["n"])
    [older] = [r for r in q(dba, "CALL fsm_stats_v2()") if r["machine"] == "ticket"]  # deprecated: idle counted running
    assert "idle" not in older and older["running"] == stats["running"] + stats["idle"]
    runs = q(
        dba,
        "SELECT SUM(due_at <= UTC_TIMESTAMP(6)) AS due, SUM(claimed_by IS NOT NULL AND due_at > "
        "UTC_TIMESTAMP(6)) AS claimed FROM fsm_runs WHERE machine = 'ticket'",
    )[0]
    assert (stats["due"], stats["claimed"]) == (int(runs["due"] or 0), int(runs["claimed"] or 0))
    assert (
        stats["unpublished"]
        == q(dba, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE machine = 'ticket' AND published_at IS NULL")[0]["n"]
    )


BAD_INPUT = (
    # a table the database does not have: nothing recorded
    ("CALL fsm_attach_v1('ticket', 'no_such_table', 'id', 'status', NULL, NULL, 'refuse', 0)", 31034),
    ("CALL fsm_legacy_ticket_adopt_v1(NULL, 0)", 31009),  # 1 to 10000 rows
    # a guard whose path is not one: refused whole (the hostile corpus: tests/server/test_guards.py)
    (
        'CALL fsm_define_v8(\'ticket\', \'{"states": ["a"], "start": ["a"], "transitions": [{"event": "e", '
        '"from": ["a"], "to": "a", "guard": {"path": "$.x; --", "op": "exists"}}]}\')',
        31001,
    ),
    ("CALL fsm_define_v7('Bad Name', '{}')", 31009),
    # data and a data patch at once: give one of them
    ("CALL fsm_ticket_send_v5('b-1', 'assign', '{\"a\": 1}', NULL, NULL, NULL, NULL, NULL, '{\"b\": 2}')", 31009),
    ("CALL fsm_ticket_send_v4('b-1', 'assign', '{\"a\": 1}', '[1]', NULL, NULL, NULL, NULL)", 31008),
    ("CALL fsm_ticket_fire_v1('b-1 ', 'assign')", 31009),  # a key ending in a space: never b-1's instance
    ("CALL fsm_ticket_fire_v2('b-1 ', 'assign')", 31009),  # the same, from the current version
    ("CALL fsm_send_v4('ticket', 'b-1', 'assign', NULL, NULL, 5, NULL, NULL, NULL)", 31007),
    (
        'CALL fsm_define_v6(\'ticket\', \'{"states": ["open", "closed"], "start": ["open"], "transitions": '
        '[{"event": "close", "from": ["open"], "to": "closed"}], '
        '"timeouts": {"open": {"after": 0, "event": "close"}}}\')',
        31001,
    ),  # a timeout of 0 seconds
    ('CALL fsm_define_v5(\'ticket\', \'{"states": ["open"], "start": [null], "transitions": []}\')', 31001),
    ('CALL fsm_define_v4(\'operator_log\', \'{"states": ["open"], "start": ["x"], "transitions": []}\')', 31001),
    ('CALL fsm_define_v3(\'ticket\', \'{"states": ["open"], "start": ["nope"], "transitions": []}\')', 31001),
    ("CALL fsm_define_v2('Bad Name', '{}')", 31009),
    ("CALL fsm_define_v1('ticket', '[1]')", 31001),
    ("CALL fsm_definition_v1('ticket', 99)", 31002),
    ("CALL fsm_ticket_create_v1('b-1', NULL, NULL, NULL, NULL, NULL)", 31004),
    ("CALL fsm_create_v1('ticket', 'b-new', NULL, '[1]', NULL, NULL, NULL)", 31008),
    ("CALL fsm_ticket_send_v1('b-1', 'resolve', NULL, NULL, NULL, NULL, NULL, NULL)", 31005),
    ("CALL fsm_send_v1('ticket', 'b-1', 'assign', NULL, NULL, 5, NULL, NULL, NULL)", 31007),
    ("CALL fsm_ticket_send_v2('b-1', 'assign', '{\"a\": 1}', '[1]', NULL, NULL, NULL, NULL)", 31008),
    ("CALL fsm_ticket_send_v3('b-1', 'asign', NULL, NULL, NULL, NULL, NULL, NULL)", 31028),  # misspelt
    ("CALL fsm_ticket_send_many_v3('[]')", 31009),  # 1 to 1000 items
    ('CALL fsm_ticket_send_many_v2(\'{"key": "b-1", "event": "assign"}\')', 31009),
    ('CALL fsm_ticket_send_many_v1(\'{"key": "b-1", "event": "assign"}\')', 31009),
    ("CALL fsm_send_v2('ticket', 'b-1', 'assign', NULL, NULL, 5, NULL, NULL, NULL)", 31007),
    ("CALL fsm_send_v3('ticket', 'b-404', 'asign', NULL, NULL, NULL, NULL, NULL, NULL)", 31028),  # no instance either
    ("CALL fsm_ticket_get_v1('b-1 ')", 31009),
    ("CALL fsm_ticket_allowed_events_v1('b-1 ')", 31009),
    ("CALL fsm_get_v1('ticket', 'b-404')", 31003),
    ("CALL fsm_ticket_history_v1('')", 31009),
    ("CALL fsm_history_v1('ticket', 'b-404')", 31003),
    ("CALL fsm_ticket_in_state_v1('open', 0, 0)", 31009),
    ("CALL fsm_in_state_v1('ticket', 'Open', 0, 10)", 31009),
    ("CALL fsm_ticket_counts_v1('x')", WRONG_ARGUMENT_COUNT),
    ("CALL fsm_counts_v1('nope')", 31002),
    ("CALL fsm_counts_v2(NULL)", 31009),
    ("CALL fsm_set_locking_v1('ticket', 'b-1', 2, NULL)", 31009),
    ("CALL fsm_lock_v2('ticket', 'b-2', 'b:other', NULL)", 31014),
    ("CALL fsm_lock_v1('ticket', 'b-2', 'bad owner!', NULL)", 31009),  # refused before any hash (MySQL 9.6+ too)
    ("CALL fsm_locks_v1('')", 31009),
    ("CALL fsm_lock_holders_v1('nope', 'b-2')", 31002),
    ("CALL fsm_renew_lock_v1('b:holder', 0)", 31009),
    ("CALL fsm_unlock_v1('')", 31009),
    ("CALL fsm_force_unlock_v1('*', 'cust-b', NULL)", 31009),
    ("CALL fsm_force_unlock_v2('*', 'cust-b ', 'padded')", 31009),
    ("CALL fsm_pause_v1('ticket', 'b-404')", 31003),
    ("CALL fsm_resume_v1('ticket', 'b-1')", 31022),
    ("CALL fsm_resume_v2('ticket', 'b-1')", 31022),
    ("CALL fsm_retry_v1('ticket', 'b-1')", 31022),
    ("CALL fsm_enqueue_v1('ticket', 'b-1', -1, NULL)", 31009),
    ("CALL fsm_enqueue_v2('ticket', 'b-1', -1, NULL)", 31009),
    ("CALL fsm_run_info_v1('ticket', NULL)", 31009),
    ("CALL fsm_claim_v1('ticket', 'b:other', 1, 60, 'b-1')", 31020),
    ("CALL fsm_renew_claims_v1('b:worker', 'ticket', '1;DROP', 60)", 31009),
    ("CALL fsm_release_claims_v1('b worker', 'ticket', NULL)", 31009),
    ("CALL fsm_step_failed_v1('ticket', 'b-1', 'b:worker', 1, 'h', 1, 'E', NULL, NULL, NULL, 'resolve')", 31005),
    (
        "CALL fsm_step_v1('ticket', 'b-1', 'b:worker', 1, '[{\"event\": \"assign\"}, {\"event\": \"assign\"}]', "
        "'running', 0, 60, NULL, NULL)",
        31005,
    ),
    (
        'CALL fsm_ticket_step_v2(\'b-1\', \'b:worker\', 1, \'[{"event": "assign"}, {"handler": "no event"}]\', '
        "'running', 0, 60, NULL, NULL)",
        31009,
    ),
    ("CALL fsm_ticket_steps_v1('b:worker', 60, '{\"key\": \"b-1\"}')", 31009),
    ("CALL fsm_failed_v1('ticket', NULL, 10)", 31009),
    ("CALL fsm_errors_v1('ticket', 'b-1 ')", 31009),
    ("CALL fsm_state_at_v1('ticket', 'b-404', NULL)", 31003),
    ("CALL fsm_instances_in_state_v1('open', 'ticket', NULL, 10)", 31009),
    ("CALL fsm_account_history_v1('cust-b', 1, NULL, NULL, NULL, 0)", 31009),
    ("CALL fsm_stats_v1(1)", WRONG_ARGUMENT_COUNT),
    ("CALL fsm_stats_v2(1)", WRONG_ARGUMENT_COUNT),
    ("CALL fsm_stats_v3(1)", WRONG_ARGUMENT_COUNT),
    ("CALL fsm_outbox_lag_v1(1)", WRONG_ARGUMENT_COUNT),
    ("CALL fsm_relay_lead_v1('pyfsm_relay_b', 'b:relay', 0)", 31009),
    ("CALL fsm_relay_resign_v1('pyfsm_relay_b', NULL)", 31009),
    ("CALL fsm_schema_version_v1(1)", WRONG_ARGUMENT_COUNT),
    ("CALL fsm_unpark_v1(NULL, 0)", 31009),
    ("CALL fsm_operator_action_v1('b', 'explode', 'ticket', 'b-1', '{}')", 31009),
    ("CALL fsm_operator_action_v3('b', 'explode', 'ticket', 'b-1', '{}')", 31009),
    ("CALL fsm_operator_action_v2('b', 'enqueue', 'ticket', 'b-1', '{}')", 31009),  # deprecated: no enqueue
    ("CALL fsm_operator_outcome_v1(1, 'maybe', NULL, NULL)", 31009),
    ("CALL fsm_send_at_v1('ticket', 'b-1', 'assign', UTC_TIMESTAMP(6), 60, NULL, NULL)", 31009),  # both at and after
    ("CALL fsm_send_at_v2('ticket', 'b-1', 'assign', NULL, 60, '{\"timer\": 1}', NULL)", 31009),  # pyfsm's key
    ("CALL fsm_cancel_timer_v1(0, NULL)", 31009),
    ("CALL fsm_fire_timers_v3('x', 1001, 30)", 31009),  # at most 1000 a call
    ("CALL fsm_fire_timers_v2('x', 0, 30)", 31009),
    ("CALL fsm_fire_timers_v1('x', 0, 30)", 31009),
    ("CALL fsm_timers_v1(NULL, 'b-1', 0, 0, 10)", 31009),  # a key without its machine
    ("CALL fsm_arm_timeouts_v1('no_such')", 31002),
    ("CALL fsm_instances_per_version_v1('no_such')", 31002),
    ("CALL fsm_upgrade_plan_v1('ticket', 99, NULL, NULL)", 31030),  # no such version
    ('CALL fsm_ticket_upgrade_plan_v1(NULL, NULL, \'{"states": "open"}\')', 31030),  # states not an array
    ("CALL fsm_upgrade_instances_v1('ticket', NULL, NULL, NULL, 0, 0)", 31009),  # p_limit 0
    (
        'CALL fsm_ticket_upgrade_v1(NULL, \'{"open": "nope"}\', NULL, 0, 10)',
        31030,
    ),  # ticket has no older version to map from
)


def test_bad_input_to_each_procedure_is_refused_and_changes_nothing(dba: Any) -> None:
    docs = sections()
    assert sorted(procedure(sql) or "" for sql, _ in BAD_INPUT) == sorted(docs)  # one call per public procedure
    q(dba, "CALL fsm_create_v1('ticket', 'b-1', NULL, NULL, NULL, NULL, 'cust-b')")
    q(dba, "CALL fsm_create_v1('ticket', 'b-2', NULL, NULL, NULL, NULL, 'cust-b')")
    q(dba, "CALL fsm_set_locking_v1('ticket', 'b-2', 1, NULL)")
    q(dba, "CALL fsm_lock_v2('ticket', 'b-2', 'b:holder', 60)")
    q(dba, "CALL fsm_claim_v1('ticket', 'b:worker', 1, 60, 'b-1')")  # the step procedures reach the trigger
    before = fingerprint(dba)
    try:
        for sql, errno in BAD_INPUT:
            assert errno_of(dba, sql) == errno, sql
            assert errno in documented_errors(procedure(sql) or "", docs) | {WRONG_ARGUMENT_COUNT}, sql
            assert fingerprint(dba) == before, f"{sql} changed the database"
        assert q(
            dba,
            "SELECT @fsm_event AS e, @fsm_metadata AS m, @fsm_request_id AS r, @fsm_handler AS h, "
            "@fsm_source AS s, @fsm_guard AS g, @fsm_upgrade AS u",
        ) == [dict.fromkeys("emrhsgu")]
    finally:
        q(dba, "CALL fsm_unlock_v1('b:holder')")
