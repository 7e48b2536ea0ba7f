"""The runtime queries' home (sql/queries/*.sql, read by pyfsm/db/queries.py), without a server:
every block is named, headed and used; slots take only names, numbers and checked names; and
no SQL statement text is left in pyfsm/ outside that home."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pyfsm
from pyfsm.db import CONTEXT_VARIABLES, queries
from pyfsm.errors import InvalidArgument

PACKAGE = Path(pyfsm.__file__).parent
#: The schema code builds and installs sql/'s objects (DDL per object, per type and per account,
#: and the information_schema reads that decide it); its statements are made from sql/'s files.
SCHEMA_CODE = PACKAGE / "schema"
#: The home's own loader: it joins the conditions a caller chose with " AND ".
HOME_LOADER = PACKAGE / "db" / "queries.py"
#: What a statement starts with: a string constant (not a docstring) or an f-string starting so
#: is SQL text.
STATEMENT = re.compile(
    r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|CALL|SET|SHOW|CREATE|DROP|ALTER|GRANT|REVOKE|DO|WITH|"
    r"LOCK|UNLOCK|START TRANSACTION|COMMIT|ROLLBACK|KILL|FLUSH|EXPLAIN|ANALYZE|TRUNCATE|RENAME|XA|"
    r"FROM|WHERE|ORDER BY|GROUP BY|LIMIT|JOIN|LEFT JOIN|UNION|AND|OR|VALUES)\b"
)


def sql_text_in(path: Path) -> list[str]:
    """``line: text`` of every string of ``path`` that starts as a statement."""
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
        if STATEMENT.match(text):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {text[:70]!r}")
    return found


def test_no_sql_text_is_left_outside_its_home() -> None:
    left = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if SCHEMA_CODE not in path.parents and path != HOME_LOADER
        for hit in sql_text_in(path)
    ]
    assert left == [], "move these into a block of sql/queries/*.sql (pyfsm/db/queries.py):\n" + "\n".join(left)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = PACKAGE / "_scan_sample.py"
    try:
        sample.write_text(
            '"""SELECT in a docstring is prose."""\n'
            'A = "SELECT id FROM t"\n'
            'B = f"SELECT id FROM `fsm_v_{name}`"\n'
            'C = "the server said: SELECT denied"\n',
            encoding="utf-8",
        )
        assert [hit.split(":")[1] for hit in sql_text_in(sample)] == ["2", "3"]
    finally:
        sample.unlink()


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
