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

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..db import queries
from ..db.driver import errors as pymysql_errors
from .ddl import ddl_session, execute_ddl, lock_wait
from .resources import check_machine_name, read_sql

#: The attached type's triggers on the application's table, in creation order (the delete
#: trigger only with on_delete 'refuse').
SUBJECT_TRIGGERS = (
    "machine/attached/triggers/fsm_{type}_sbi_v1.sql",
    "machine/attached/triggers/fsm_{type}_sai_v1.sql",
    "machine/attached/triggers/fsm_{type}_sbu_v1.sql",
    "machine/attached/triggers/fsm_{type}_sbd_v1.sql",
)
#: Its triggers on its instance table and its adoption procedure, created before those.
INSTANCE_OBJECTS = (
    "machine/attached/triggers/fsm_{type}_bi_adopt_v1.sql",
    "machine/attached/triggers/fsm_{type}_bi_adopted_v1.sql",
    "machine/attached/triggers/fsm_{type}_ai_subject_v1.sql",
    "machine/attached/triggers/fsm_{type}_au_subject_v1.sql",
    "machine/attached/triggers/fsm_{type}_bu_copy_v1.sql",
    "machine/attached/procedures/fsm_{type}_adopt_v1.sql",
)
#: created only for an attachment with copied columns (data_columns)
COPY_TRIGGER = "machine/attached/triggers/fsm_{type}_bu_copy_v1.sql"
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
SPAN = re.compile(r"/\*\[(\w+)\*/(.*?)/\*\1\]\*/", re.S)
#: a copied column's name as a JSON path key (fsm_attach_v1 checks the same)
PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
TEMPORAL = ("date", "datetime", "timestamp", "time")
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
    #: the column copied to the instance's lookup_key, and the columns copied into its data
    lookup: str | None = None
    columns: tuple[str, ...] = ()
    #: information_schema's DATA_TYPE of the lookup and copied columns (read when rendering)
    column_types: Mapping[str, str] = field(default_factory=dict)
    #: rows may lack their instance still (no adoption finished with every row adopted since
    #: the type was attached): the table's update trigger adopts such a row when it is written
    adopting: bool = True

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
            lookup=row.get("lookup_column"),
            columns=tuple(json.loads(row["data_columns"])) if row.get("data_columns") else (),
            adopting=row.get("adopted_at") is None,
        )

    @property
    def tracked(self) -> tuple[str, ...]:
        """The columns besides the state whose change reaches the instance row."""
        return ((self.lookup,) if self.lookup else ()) + self.columns


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


def _lookup_text(facts: Facts, row: str) -> str:
    """SQL for the lookup key (text) of the lookup column of ``row`` (NEW, OLD, s)."""
    value = f"{row}.{quote(facts.lookup or '')}"
    kind = facts.column_types.get(facts.lookup or "", "")
    text = f"LOWER(HEX({value}))" if kind in ("binary", "varbinary") else f"CAST({value} AS CHAR)"
    return f"CONVERT({text} USING utf8mb4)"


def _column_value(facts: Facts, row: str, column: str) -> str:
    """SQL for a copied column's value in the instance's data: dates and times as text (MySQL's
    JSON would keep a date type that no guard literal equals), anything else as it is."""
    if not PLAIN.fullmatch(column):
        raise ValueError(f"unexpected column name {column!r}")
    value = f"{row}.{quote(column)}"
    return f"CAST({value} AS CHAR)" if facts.column_types.get(column) in TEMPORAL else value


def _tracked(facts: Facts, row: str) -> dict[str, str]:
    """The tracked columns' parts for ``row``: the SET list, the column list and the values."""
    sets, columns, values = [], [], []
    if facts.lookup:
        sets.append(f"lookup_key = {_lookup_text(facts, row)}")
        columns.append("lookup_key")
        values.append(_lookup_text(facts, row))
    if facts.columns:
        pairs = ", ".join(f"'$.{c}', {_column_value(facts, row, c)}" for c in facts.columns)
        objects = ", ".join(f"'{c}', {_column_value(facts, row, c)}" for c in facts.columns)
        sets.append(f"data = JSON_SET(COALESCE(data, '{{}}'), {pairs})")
        columns.append("data")
        values.append(f"JSON_OBJECT({objects})")
    return {
        "set": ", ".join(sets),
        "columns": "".join(f", {c}" for c in columns),
        "values": "".join(f", {v}" for v in values),
    }


def slots(facts: Facts) -> dict[str, str]:
    """The values of the templates' slots for one attachment."""
    if facts.key_kind not in ("integer", "string", "binary") or not KEY_TYPE.fullmatch(facts.key_type):
        raise ValueError(f"unexpected key type {facts.key_kind} {facts.key_type!r}")
    key = quote(facts.key)
    new, old = _tracked(facts, "NEW"), _tracked(facts, "OLD")
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
        "copy_pairs": ", ".join(f"'$.{c}', {_column_value(facts, 's', c)}" for c in facts.columns),
        "same_tracked": "".join(
            f" AND CAST(NEW.{quote(c)} AS BINARY) <=> CAST(OLD.{quote(c)} AS BINARY)" for c in facts.tracked
        ),
        "tracked_set": new["set"],
        "tracked_comma_set": f", {new['set']}" if new["set"] else "",
        "tracked_columns": new["columns"],
        "new_tracked_values": new["values"],
        "old_tracked_values": old["values"],
        # adoption's single-row inserts: the lookup key and the data of row s, or NULL
        "s_lookup_value": _lookup_text(facts, "s") if facts.lookup else "NULL",
        "s_data_value": (
            "JSON_OBJECT(" + ", ".join(f"'{c}', {_column_value(facts, 's', c)}" for c in facts.columns) + ")"
            if facts.columns
            else "NULL"
        ),
        # adoption's move of a row whose state changed while detached: from the cursor's values
        "drift_tracked_set": (", lookup_key = v_lookup" if facts.lookup else "")
        + (", data = JSON_MERGE_PATCH(COALESCE(data, '{}'), v_data)" if facts.columns else ""),
    }


def render(template: str, facts: Facts) -> str:
    """One file of sql/machine/attached for one attachment, without its header comment."""
    values = slots(facts)
    body = HEADER.sub("", read_sql(template))
    # the spans, kept (without their marks) when the attachment needs them: the tracked
    # columns' when there are any, the adoption of a row without its instance while adopting
    keep = {"tracked": bool(facts.tracked), "adopting": facts.adopting}
    body = SPAN.sub(lambda m: m.group(2) if keep[m.group(1)] else "", body)
    return SLOT.sub(lambda m: values[m.group(1)], body)


def object_name(template: str, machine: str) -> str:
    """``fsm_<machine>_sbu_v1`` for ``machine/attached/fsm_{type}_sbu_v1.sql``."""
    return template.rsplit("/", 1)[1].removesuffix(".sql").replace("{type}", check_machine_name(machine))


def install(conn: Any, facts: Facts) -> None:
    """Create the attached type's objects where missing, replace its triggers rendered
    differently, then record them installed.

    The instance table's triggers and the adoption procedure first, then the table's
    triggers (after the table's own, which therefore run before them). The delete trigger
    only with on_delete 'refuse'; with 'allow' one left from before is dropped. A trigger
    whose body differs from this rendering (a newer pyfsm's, or the update trigger once every
    row is adopted) is replaced while its table is locked (:func:`replace_trigger`), so no
    write of the table runs between; what exists as rendered is left, so a second call
    changes nothing.
    """
    facts = with_column_types(conn, facts)
    templates = tuple(t for t in INSTANCE_OBJECTS if facts.columns or t != COPY_TRIGGER) + tuple(
        t for t in SUBJECT_TRIGGERS if facts.on_delete == "refuse" or "_sbd_" not in t
    )
    rendered = {t: render(t, facts) for t in templates}
    execute_ddl(conn, [rendered[t] for t in templates])
    triggers = {object_name(t, facts.machine): t for t in templates if t.startswith("machine/attached/triggers/")}
    with conn.cursor() as cur:
        cur.execute(queries.sql("attach_triggers"), (tuple(triggers),))
        bodies = {name: (table, body) for name, table, body in cur.fetchall()}
    for name, template in triggers.items():
        table, body = bodies.get(name, ("", ""))
        new_body = rendered_body(template, facts, rendered[template])
        if body and body.rstrip() != new_body.rstrip():  # the servers keep no trailing newline
            # the same header (name, timing, event, table, order), the body it has now
            before = rendered[template][: len(rendered[template]) - len(new_body)] + body
            replace_trigger(conn, table, name, rendered[template], before)
    if facts.on_delete != "refuse":
        drop(conn, facts.machine, ("machine/attached/triggers/fsm_{type}_sbd_v1.sql",))
    if not facts.columns:
        drop(conn, facts.machine, (COPY_TRIGGER,))
    with conn.cursor() as cur:
        cur.execute(queries.sql("attach_installed"), (facts.machine,))
    conn.commit()


def rendered_body(template: str, facts: Facts, statement: str) -> str:
    """The body of ``statement``, the rendering of a trigger's template (what
    information_schema.TRIGGERS.ACTION_STATEMENT holds): from the BEGIN that ends the template's
    header, found in the template, where no name spliced in can fake it."""
    head = HEADER.sub("", read_sql(template)).partition("\nBEGIN\n")[0]
    values = slots(facts)
    return statement[len(SLOT.sub(lambda m: values[m.group(1)], head)) + 1 :]


#: How long replacing a trigger waits for the table's lock (writers of the table wait behind
#: it meanwhile): a table busy longer keeps the trigger it has until the next `pyfsm sync`.
REPLACE_LOCK_WAIT = 3


def replace_trigger(conn: Any, table: str, name: str, statement: str, before: str) -> bool:
    """Drop trigger ``name`` of ``table`` and create it as ``statement`` while the session holds
    the table's write lock (LOCK TABLES), so that no write of the table runs between without
    it; if the new one cannot be created, it is created again as ``before``. False when the
    lock was not had within :data:`REPLACE_LOCK_WAIT` seconds (nothing changed)."""
    with conn.cursor() as cur:
        ddl_session(cur)
        with lock_wait(cur, REPLACE_LOCK_WAIT):
            try:
                cur.execute(f"LOCK TABLES {quote(table)} WRITE")
            except pymysql_errors.OperationalError as exc:
                if exc.args and exc.args[0] == 1205:  # lock wait timeout: a long transaction holds the table
                    return False
                raise
            try:
                cur.execute(f"DROP TRIGGER IF EXISTS {quote(name)}")
                try:
                    cur.execute(statement)
                except pymysql_errors.MySQLError:
                    cur.execute(before)
                    raise
            finally:
                cur.execute("UNLOCK TABLES")
    return True


def with_column_types(conn: Any, facts: Facts) -> Facts:
    """``facts`` with the types of its lookup and copied columns, as the table has them now."""
    if not facts.tracked:
        return facts
    with conn.cursor() as cur:
        cur.execute(queries.sql("attach_column_types"), (facts.table,))
        types = {name: kind for name, kind in cur.fetchall()}
    return replace(facts, column_types={c: types.get(c, "") for c in facts.tracked})


def drop(conn: Any, machine: str, templates: tuple[str, ...] = ALL_OBJECTS) -> None:
    """Drop the attached type's objects of ``templates`` where present (the table's triggers first)."""
    statements = []
    for template in sorted(templates, key=lambda t: t not in SUBJECT_TRIGGERS):
        kind = "PROCEDURE" if template.startswith("machine/attached/procedures/") else "TRIGGER"
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
