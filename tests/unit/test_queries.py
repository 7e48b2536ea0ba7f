"""The runtime queries' home (sql/queries/*.sql, read by pyfsm/db/queries.py), without a server:
every block is named, headed and used; slots take only names, numbers and checked names; and
no SQL statement text is left in pyfsm/ outside that home, but for what the schema code
(pyfsm/schema/) builds from sql/'s files per object, per type and per account (its DDL and
GRANTs, the code it renders into the transition trigger, the registry's CALL builder) and the
few statements listed in SCHEMA_LEFT, each with its reason."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pyfsm
from pyfsm.db import CONTEXT_VARIABLES, STRICT_SQL_MODE, queries
from pyfsm.errors import InvalidArgument
from pyfsm.schema.install import VERSION_TABLE

PACKAGE = Path(pyfsm.__file__).parent
#: The schema code builds and installs sql/'s objects: its other statements (the DDL session's
#: setup, the information_schema reads that decide what to build, fsm_machines' bookkeeping)
#: are blocks of sql/queries/schema.sql, but what creates or changes an object or an account
#: is built there per object, per type and per account from sql/'s files, and stays.
SCHEMA_CODE = PACKAGE / "schema"
SCHEMA_DDL = re.compile(r"^\s*(CREATE|ALTER|DROP|GRANT|REVOKE|LOCK TABLES|UNLOCK TABLES)\b")
#: The code the schema code generates inside an object, by file: the transition trigger's body
#: (pyfsm.schema.rendering: assignments to its local variables v_to, v_final, v_n, v_event),
#: a rendered guard's conditions joined (pyfsm.schema.guard_sql), and the registry's CALL
#: builder (pyfsm.schema.routines: ``CALL `name`(%s, ...)``, the one statement that is no block).
SCHEMA_GENERATED = {
    "rendering.py": lambda text: text.startswith("SET v_"),
    "guard_sql.py": lambda text: text in (" AND ", " OR "),
    "routines.py": lambda text: text == "CALL `{}`({})",
    # an attached type's trigger code: the test of its tracked columns, rendered per table
    "attached.py": lambda text: text.startswith(" AND CAST(NEW.{} AS BINARY) <=> CAST(OLD.{} AS BINARY)"),
}
#: (file, text) of the strings of pyfsm/schema/ that look like statements and stay, with why.
SCHEMA_LEFT = {
    # the left_at backfill's UPDATE: one CASE arm and one IN mark per row of the batch, a
    # shape no block's slots can give (each batch is one statement, as it always was)
    ("upgrades.py", "UPDATE `{}` SET left_at = CASE id {} END WHERE id IN ({})"),
    # the joint between a union view's per-type branches, inside its CREATE VIEW (DDL built per type)
    ("views.py", "\nUNION ALL\n"),
    # RELAY_TABLE_PRIVILEGES: the privileges of the relay's GRANT on fsm_outbox, no statement
    ("grants.py", "SELECT, UPDATE, DELETE"),
    # an account's CREATE USER or ALTER USER (the verb is one of those two literals beside it),
    # as run and as shown by --dry-run with the password hidden: DDL built per account
    ("grants.py", "{} {} IDENTIFIED BY %s"),
    ("grants.py", "{} {} IDENTIFIED BY '***'"),
}
#: The home's own loader: it joins the conditions a caller chose with " AND ".
HOME_LOADER = PACKAGE / "db" / "queries.py"
#: What a statement starts with: a string constant (not a docstring) or an f-string starting so
#: is SQL text.
STATEMENT = re.compile(
    r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|CALL|SET|SHOW|CREATE|DROP|ALTER|GRANT|REVOKE|DO|WITH|"
    r"LOCK|UNLOCK|START TRANSACTION|COMMIT|ROLLBACK|KILL|FLUSH|EXPLAIN|ANALYZE|TRUNCATE|RENAME|XA|"
    r"FROM|WHERE|ORDER BY|GROUP BY|LIMIT|JOIN|LEFT JOIN|UNION|AND|OR|VALUES)\b"
)
#: A statement anywhere in a string (one built after a value, ``f"{verb} USER ..."``, or quoted
#: in a message): its clauses, as SQL writes them.
EMBEDDED = re.compile(
    r"\bSELECT\b.*\bFROM\b|\bINSERT (?:IGNORE )?INTO\b|\bREPLACE INTO\b|\bDELETE FROM\b|"
    r"\bUPDATE `?[\w{}]+`? SET\b|\bIDENTIFIED BY\b|\bCALL `?fsm_[\w{}]*`?\(",
    re.S,
)


def sql_text_in(path: Path) -> list[str]:
    """``line: text`` of every string of ``path`` that starts as a statement."""
    return [f"{path.relative_to(PACKAGE.parent)}:{line}: {text[:70]!r}" for line, text in sql_strings(path)]


def sql_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string of ``path`` that starts as a statement (an f-string's
    values written ``{}``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)  # judged as the whole f-string
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        else:
            continue
        if STATEMENT.match(text) or EMBEDDED.search(text):
            found.append((node.lineno, text))
    return sorted(found)


def schema_may_keep(path: Path, text: str) -> bool:
    """Whether a statement-like string of pyfsm/schema/ is one of what may stay there."""
    generated = SCHEMA_GENERATED.get(path.name)
    return (
        bool(SCHEMA_DDL.match(text)) or (generated is not None and generated(text)) or (path.name, text) in SCHEMA_LEFT
    )


def test_no_sql_text_is_left_outside_its_home() -> None:
    left = []
    kept: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME_LOADER:
            continue
        in_schema = SCHEMA_CODE in path.parents
        for line, text in sql_strings(path):
            if in_schema and schema_may_keep(path, text):
                kept.add((path.name, text))
            else:
                left.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text[:70]!r}")
    assert left == [], "move these into a block of sql/queries/*.sql (pyfsm/db/queries.py):\n" + "\n".join(left)
    assert SCHEMA_LEFT <= kept, f"listed in SCHEMA_LEFT but gone: {sorted(SCHEMA_LEFT - kept)}"


def test_what_the_schema_code_keeps_is_narrow() -> None:
    schema = SCHEMA_CODE / "install.py"
    for text in ("CREATE TABLE IF NOT EXISTS `{}` (a INT)", "ALTER TABLE `{}` COMMENT = ''", "LOCK TABLES ", "GRANT "):
        assert schema_may_keep(schema, text), text
    for text in ("SELECT 1", "UPDATE fsm_machines SET a = 1", "SET v_to = 1", " AND ", "CALL `{}`({})", "LOCK x"):
        assert not schema_may_keep(schema, text), text
    assert schema_may_keep(SCHEMA_CODE / "rendering.py", "SET v_final = NULL;")
    assert not schema_may_keep(SCHEMA_CODE / "rendering.py", "SET @fsm_event = NULL")
    assert not schema_may_keep(SCHEMA_CODE / "guard_sql.py", " AND x = 1")


def test_the_schema_blocks_say_what_the_code_names() -> None:
    """Two names the schema code keeps as constants are written out in sql/queries/schema.sql."""
    assert queries.sql("schema_ddl_sql_mode") == f"SET SESSION sql_mode = '{STRICT_SQL_MODE}'"
    assert queries.sql("schema_revision_table") == f"SELECT version_num FROM `{VERSION_TABLE}`"
    assert queries.sql("schema_set_lock_wait_timeout", seconds=2) == "SET SESSION lock_wait_timeout = 2"


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""SELECT in a docstring is prose."""\n'
        'A = "SELECT id FROM t"\n'
        'B = f"SELECT id FROM `fsm_v_{name}`"\n'
        'C = "the server said: SELECT denied"\n'
        'D = f"{verb} USER {account} IDENTIFIED BY %s"\n'
        'E = "run it as one that may: INSERT INTO fsm_accounts VALUES (1)"\n'
        'F = f"`{name}` rows: UPDATE `fsm_{name}` SET a = 1"\n'
        'G = "or run CALL fsm_retry_v1(...) as the app account"\n'
        'H = "update the settings, then select a server"\n',
        encoding="utf-8",
    )
    assert [line for line, _ in sql_strings(sample)] == [2, 3, 5, 6, 7, 8]


def test_every_block_is_headed_and_used() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    for name, query in queries.queries().items():
        assert query.header.splitlines()[0], f"{query.source}: {name} has no description"
        assert "Used by:" in query.header, f"{query.source}: {name}'s header says not who runs it"
        if "%s" in query.text:
            assert "Parameters:" in query.header, f"{query.source}: {name}'s header lists not its parameters"
        nested = any(f"{{{name}}}" in other.text for other in queries.queries().values())
        assert f'"{name}"' in source or nested, f"{query.source}: no code runs {name}"


def test_slots_take_names_numbers_and_checked_names_only() -> None:
    assert queries.sql("reporting_path", type="order") == (
        "SELECT to_state FROM `fsm_v_order_transitions` WHERE instance_key = %s ORDER BY sort_key"
    )
    with pytest.raises(InvalidArgument):
        queries.sql("reporting_path", type="order` WHERE 1; DROP TABLE x; -- ")
    with pytest.raises(InvalidArgument):
        queries.sql("reporting_path")  # {type} unfilled
    with pytest.raises(InvalidArgument):
        queries.sql("create_database", database="shop`; DROP DATABASE shop; -- ")
    assert queries.sql("create_database", database="shop-1").startswith("CREATE DATABASE IF NOT EXISTS `shop-1` ")


def test_a_block_of_the_home_parses_as_documented() -> None:
    text = (
        "-- the file's own comment\n\n"
        "-- name: one\n-- Reads one.\n-- Parameters: id.\n-- Used by: nobody.\n"
        "SELECT a FROM t\nWHERE id = %s AND {cond} LIMIT {limit};\n\n"
        "-- name: two\n-- A condition.\nb = %s\n"
    )
    one, two = queries.parse(text, "queries/sample.sql")
    assert (one.name, one.header.splitlines()[0], one.slots) == ("one", "Reads one.", frozenset({"cond", "limit"}))
    assert one.text == "SELECT a FROM t\nWHERE id = %s AND {cond} LIMIT {limit}" and two.text == "b = %s"
    with pytest.raises(ValueError, match="before the first"):
        queries.parse("SELECT 1\n-- name: x\nSELECT 2", "queries/bad.sql")
    with pytest.raises(ValueError, match="no statement"):
        queries.parse("-- name: x\n-- only a header\n", "queries/bad.sql")


def test_a_slot_the_caller_fills_takes_block_names_and_ints_only() -> None:
    name = next(n for n, q in sorted(queries.queries().items()) if {"limit", "where"} <= q.slots)
    with pytest.raises(KeyError):  # a caller's text is no block: refused, never spliced
        queries.statement(name, {"limit": 5, "where": "1 = 1 OR 1"}, type="order")
    with pytest.raises(TypeError):
        queries.statement(name, {"limit": 1.5, "where": []}, type="order")  # type: ignore[dict-item]
    with pytest.raises(KeyError):  # a slot left unfilled is a bug, not an empty text
        queries.statement(name, {"limit": 5}, type="order")


def test_the_context_cleared_is_the_context_pyfsm_sets() -> None:
    cleared = re.findall(r"(@\w+) = NULL", queries.sql("session_clear_context"))
    assert cleared == list(CONTEXT_VARIABLES)
