"""A guard (pyfsm.guards) as the SQL expression a transition trigger tests.

The expression reads the instance's data as it will be after the transition (``NEW.data``)
with JSON functions both servers have, and is 1 or 0, never NULL, so ``NOT`` and ``OR`` of
it mean what they say. What goes into the SQL is the guard checked again here
(:func:`pyfsm.guards.parse`): paths that match ``guards.PATH`` (safe between single quotes
as they are), numbers as float literals, and every string (a literal, a guard's name) as
hexadecimal bytes, ``X'...'``, which no text can break out of.
"""

from __future__ import annotations

from ..guards import UNARY, All, AnyOf, Condition, Literal, Not, Test, check_path

#: JSON_TYPE's names for numbers: MariaDB has the first and third, MySQL all four
NUMBER_TYPES = "('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL')"


def hex_bytes(text: str) -> str:
    """``text`` as a binary literal of its UTF-8 bytes."""
    return f"X'{text.encode('utf-8').hex()}'"


def text_literal(text: str) -> str:
    """``text`` as a utf8mb4 string expression (for messages)."""
    return f"CONVERT({hex_bytes(text)} USING utf8mb4)"


def _number(value: float | int) -> str:
    shown = repr(float(value))
    return shown if "e" in shown else shown + "e0"  # a float literal: compared as DOUBLE


def _unsafe(problem: str) -> ValueError:
    return ValueError(f"a stored guard {problem}: refused before it reaches SQL")


def _compare(found: str, op: str, value: Literal) -> str:
    """``found`` (a JSON_EXTRACT) ``op`` the literal ``value``, of the same JSON type only."""
    if value is None:
        return f"COALESCE(JSON_TYPE({found}) = 'NULL', 0)"
    if isinstance(value, bool):
        word = "true" if value else "false"
        return f"CASE WHEN JSON_TYPE({found}) = 'BOOLEAN' THEN JSON_UNQUOTE({found}) = '{word}' ELSE 0 END"
    if isinstance(value, int | float):
        # + 0e0: a number's text as a DOUBLE on every server (CAST ... AS DOUBLE needs MySQL 8.0.17)
        return (
            f"CASE WHEN JSON_TYPE({found}) IN {NUMBER_TYPES} "
            f"THEN JSON_UNQUOTE({found}) + 0e0 {op} {_number(value)} ELSE 0 END"
        )
    if isinstance(value, str):
        return (
            f"CASE WHEN JSON_TYPE({found}) = 'STRING' "
            f"THEN CAST(JSON_UNQUOTE({found}) AS BINARY) {op} {hex_bytes(value)} ELSE 0 END"
        )
    raise _unsafe(f"holds a literal {type(value).__name__}")


def condition_sql(condition: Condition, doc: str = "NEW.data") -> str:
    """``condition`` over the JSON document ``doc``, as 1 or 0."""
    if isinstance(condition, All | AnyOf):
        joiner = " AND " if isinstance(condition, All) else " OR "
        return "(" + joiner.join(condition_sql(item, doc) for item in condition.items) + ")"
    if isinstance(condition, Not):
        return f"(NOT {condition_sql(condition.item, doc)})"
    if not isinstance(condition, Test):
        raise _unsafe(f"is a {type(condition).__name__}")
    path = check_path(condition.path, _unsafe)
    found = f"JSON_EXTRACT({doc}, '{path}')"
    op = condition.op
    if op in UNARY:
        exists = f"COALESCE(JSON_CONTAINS_PATH({doc}, 'one', '{path}'), 0)"
        return {"exists": exists, "missing": f"(NOT {exists})", "is_null": f"COALESCE(JSON_TYPE({found}) = 'NULL', 0)"}[
            op
        ]
    if op == "in":
        return "(" + " OR ".join(_compare(found, "=", item) for item in condition.value) + ")"
    if op == "==":
        return _compare(found, "=", condition.value)
    if op == "!=":
        return f"(NOT {_compare(found, '=', condition.value)})"
    if (
        op in ("<", "<=", ">", ">=")
        and isinstance(condition.value, int | float | str)
        and not isinstance(condition.value, bool)
    ):
        return _compare(found, op, condition.value)
    raise _unsafe(f"has op {op!r:.20} with {type(condition.value).__name__}")
