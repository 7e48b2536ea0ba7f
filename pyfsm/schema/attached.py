"""A machine type attached to a table of the application's: its triggers and its adoption
procedure, rendered for that table, its key column and its state column.

Every type has an instance table, ``fsm_{type}``, whose triggers apply each transition (the
rules, locks, history, counters, outbox: ``sql/machine``). A type pyfsm owns keeps its
instances' state there and nowhere else. An attached type keeps it in the application's
own column too, and the difference between the two lives here and in ``sql/machine/attached``
only: triggers on the application's table hand every change of the state column to the
instance row (``fsm_{type}_sbu_v1``: a raw ``UPDATE fsm_{type} SET current_state``, checked
and recorded by the same trigger as any other), create an instance with each new row
(``sai``), give a NULL state the start state (``sbi``) and refuse deletes (``sbd``); triggers
on the instance table move the application's column after a transition pyfsm's procedures
applied (``au_subject``), refuse an instance without its row (``ai_subject``) and let adoption
create an instance in the state its row already has (``bi_adopt``, ``bi_adopted``). Nothing
in the procedures, the engine, the relay or the reporting knows whether a type is attached.

What is spliced into the SQL: the type's name (checked, as everywhere), the table's and
columns' names quoted as identifiers (backticks doubled; they may hold any character), and
the key column's type as the server reports it, checked against :data:`KEY_TYPE`. The
templates' header comments are not sent: a name could end a comment line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..db import queries
from .ddl import execute_ddl
from .resources import check_machine_name, read_sql

#: The attached type's triggers on the application's table, in creation order (the delete
#: trigger only with on_delete 'refuse').
SUBJECT_TRIGGERS = (
    "machine/attached/fsm_{type}_sbi_v1.sql",
    "machine/attached/fsm_{type}_sai_v1.sql",
    "machine/attached/fsm_{type}_sbu_v1.sql",
    "machine/attached/fsm_{type}_sbd_v1.sql",
)
#: Its triggers on its instance table and its adoption procedure, created before those.
INSTANCE_OBJECTS = (
    "machine/attached/fsm_{type}_bi_adopt_v1.sql",
    "machine/attached/fsm_{type}_bi_adopted_v1.sql",
    "machine/attached/fsm_{type}_ai_subject_v1.sql",
    "machine/attached/fsm_{type}_au_subject_v1.sql",
    "machine/attached/fsm_{type}_adopt_v1.sql",
)
ALL_OBJECTS = INSTANCE_OBJECTS + SUBJECT_TRIGGERS

#: A key column's type as information_schema.COLUMNS.COLUMN_TYPE gives it (fsm_attach_v1
#: adds a string's character set and collation).
KEY_TYPE = re.compile(
    r"(?:(?:tiny|small|medium|big)?int(?:\(\d+\))?(?: unsigned)?(?: zerofill)?"
    r"|(?:var)?char\(\d+\) CHARACTER SET \w+ COLLATE \w+"
    r"|(?:var)?binary\(\d+\))",
    re.I,
)
SLOT = re.compile(r"\{([a-z_]+)\}")
HEADER = re.compile(r"\A(?:--[^\n]*\n)+")


@dataclass(frozen=True)
class Facts:
    """What an attached type's objects are rendered from: a row of fsm_attachments."""

    machine: str
    table: str
    key: str
    state: str
    key_kind: str
    key_type: str
    on_delete: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Facts:
        return cls(
            machine=row["machine"],
            table=row["table_name"],
            key=row["key_column"],
            state=row["state_column"],
            key_kind=row["key_kind"],
            key_type=row["key_type"],
            on_delete=row["on_delete"],
        )


def quote(name: str) -> str:
    """``name`` as a quoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def _as_instance_key(facts: Facts, value: str) -> str:
    """SQL for the instance key (utf8mb4_bin text) of a key value ``value``."""
    text = {"integer": f"CAST({value} AS CHAR)", "string": value, "binary": f"LOWER(HEX({value}))"}[facts.key_kind]
    return f"CONVERT({text} USING utf8mb4) COLLATE utf8mb4_bin"


def _as_key(facts: Facts, text: str, *, checked: bool = False) -> str:
    """SQL for the key value of an instance key ``text`` (comparable with the key column, its index used)."""
    if facts.key_kind == "integer":
        cast = "UNSIGNED" if "unsigned" in facts.key_type.lower() else "SIGNED"
        value = f"CAST({text} AS {cast})"
        return f"IF({text} REGEXP '^-?[0-9]+$', {value}, NULL)" if checked else value
    if facts.key_kind == "binary":
        return f"IF({text} REGEXP '^([0-9a-f][0-9a-f])+$', UNHEX({text}), NULL)" if checked else f"UNHEX({text})"
    found = re.search(r"CHARACTER SET (\w+) COLLATE (\w+)", facts.key_type)
    assert found, facts.key_type
    return f"CONVERT({text} USING {found.group(1)}) COLLATE {found.group(2)}"


def slots(facts: Facts) -> dict[str, str]:
    """The values of the templates' slots for one attachment."""
    if facts.key_kind not in ("integer", "string", "binary") or not KEY_TYPE.fullmatch(facts.key_type):
        raise ValueError(f"unexpected key type {facts.key_kind} {facts.key_type!r}")
    key = quote(facts.key)
    same = (
        f"NEW.{key} <=> OLD.{key}"
        if facts.key_kind == "integer"
        else f"CAST(NEW.{key} AS BINARY) <=> CAST(OLD.{key} AS BINARY)"
    )
    return {
        "type": check_machine_name(facts.machine),
        "subject": quote(facts.table),
        "key": key,
        "state": quote(facts.state),
        "key_type": facts.key_type,
        "same_key": same,
        "old_instance_key": _as_instance_key(facts, f"OLD.{key}"),
        "new_instance_key": _as_instance_key(facts, f"NEW.{key}"),
        "instance_key_s": _as_instance_key(facts, f"s.{key}"),
        "last_key_text": _as_instance_key(facts, "v_last"),
        "subject_key": _as_key(facts, "NEW.instance_key"),
        "subject_key_checked": _as_key(facts, "NEW.instance_key", checked=True),
        "after_key": _as_key(facts, "p_after"),
    }


def render(template: str, facts: Facts) -> str:
    """One file of sql/machine/attached for one attachment, without its header comment."""
    values = slots(facts)
    body = HEADER.sub("", read_sql(template))
    return SLOT.sub(lambda m: values[m.group(1)], body)


def object_name(template: str, machine: str) -> str:
    """``fsm_<machine>_sbu_v1`` for ``machine/attached/fsm_{type}_sbu_v1.sql``."""
    return template.rsplit("/", 1)[1].removesuffix(".sql").replace("{type}", check_machine_name(machine))


def install(conn: Any, facts: Facts) -> None:
    """Create the attached type's objects where missing, then record them installed.

    The instance table's triggers and the adoption procedure first, then the table's
    triggers (after the table's own, which therefore run before them). The delete trigger
    only with on_delete 'refuse'; with 'allow' one left from before is dropped. Creating what
    exists already is skipped, so a second call changes nothing.
    """
    templates = INSTANCE_OBJECTS + tuple(t for t in SUBJECT_TRIGGERS if facts.on_delete == "refuse" or "_sbd_" not in t)
    execute_ddl(conn, [render(t, facts) for t in templates])
    if facts.on_delete != "refuse":
        drop(conn, facts.machine, ("machine/attached/fsm_{type}_sbd_v1.sql",))
    with conn.cursor() as cur:
        cur.execute(queries.sql("attach_installed"), (facts.machine,))
    conn.commit()


def drop(conn: Any, machine: str, templates: tuple[str, ...] = ALL_OBJECTS) -> None:
    """Drop the attached type's objects of ``templates`` where present (the table's triggers first)."""
    statements = []
    for template in sorted(templates, key=lambda t: t not in SUBJECT_TRIGGERS):
        kind = "PROCEDURE" if template.endswith("/fsm_{type}_adopt_v1.sql") else "TRIGGER"
        statements.append(f"DROP {kind} IF EXISTS {quote(object_name(template, machine))}")
    execute_ddl(conn, statements)


def detach(conn: Any, machine: str) -> None:
    """Remove every object of the attachment and record it detached (its rows, instances and history stay)."""
    drop(conn, machine)
    with conn.cursor() as cur:
        cur.execute(queries.sql("attach_detached"), (machine,))
    conn.commit()


def recorded(conn: Any, machine: str) -> Facts | None:
    """The attachment fsm_attachments records for ``machine`` and not detached, if any."""
    import pymysql

    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(queries.sql("attach_row"), (machine,))
        row = cur.fetchone()
    return Facts.from_row(row) if row and row["detached_at"] is None else None
