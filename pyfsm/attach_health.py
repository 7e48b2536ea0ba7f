"""`pyfsm check` on the attached types: whether each attachment fsm_attachments records still
fits its table (pyfsm.attach; docs/own-tables.md).

An attached type's triggers name the table, its key, state, lookup and copied columns; they
were rendered when it was attached. The application's own DDL can break them afterwards
without the database saying a word until the next write: a renamed or dropped column makes
every write of the table fail (1054), a renamed table every transition of the type's; a
dropped trigger of pyfsm's leaves a part of the table's writes unchecked; a state a newer
definition version added that the ENUM (or the VARCHAR's length) cannot hold makes each
transition into it fail; a BEFORE UPDATE trigger of the application's that runs after
pyfsm's may change the state after pyfsm checked the change. This module reads
information_schema and fsm_attachments and names each of those, with what to do.

Levels: ``error``, something fails or goes unchecked now (`pyfsm check` exits 1);
``warning``, a risk or a step left to do (a DBA's fsm_attach_v1 awaiting `pyfsm sync`, a
trigger ordered after pyfsm's that may not touch the state): reported, exit 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pymysql

from . import db
from .attach import Attachment
from .db import queries
from .db.driver import errors as pymysql_errors
from .errors import AccessDenied, StateColumnUnsupported
from .schema import attached

if TYPE_CHECKING:
    from .gateway import Gateway

#: What each of pyfsm's triggers of an attached type does, said when it is missing.
TRIGGER_ROLES = {
    "sbi": "a new row with a NULL state no longer gets the first start state",
    "sai": "a new row gets no instance",
    "sbu": "changes of the state column are no longer checked by the rules nor recorded",
    "sbd": "rows under the machine can be deleted",
    "bi_adopt": "adoption fails",
    "bi_adopted": "adoption fails",
    "ai_subject": "an instance can be created for a key the table lacks",
    "au_subject": "pyfsm's transitions (Store.send, workers, timers) no longer move the state column",
    "bu_copy": "data written by pyfsm's calls can replace the copied columns, which guards then judge",
}
ROLE = re.compile(r"/fsm_\{type\}_(\w+)_v\d+\.sql$")
ENUM_VALUE = re.compile(r"'((?:[^']|'')*)'")
STATE_TYPES = ("char", "varchar", "enum")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an attachment: ``level`` 'error' or 'warning', ``kind`` (one of
    not_installed, table_missing, column_missing, state_column, trigger_missing,
    procedure_missing, trigger_order, triggers_hidden) and the ``message``, which says what
    to do."""

    level: str
    kind: str
    message: str


@dataclass(frozen=True)
class AttachmentHealth:
    """An attachment as recorded, its ``status`` ('installed'; 'recorded': a DBA's
    fsm_attach_v1 awaiting `pyfsm sync`; 'detached') and its problems."""

    attachment: Attachment
    status: str
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """No error (warnings allowed)."""
        return not any(p.level == "error" for p in self.problems)


def check(conn: Any) -> list[AttachmentHealth] | None:
    """Every attachment of the database, by machine, with its problems; None when the account
    may not read fsm_attachments (the application's and reporting accounts may not)."""
    try:
        rows = _rows(conn, "attach_health_attachments", ())
    except AccessDenied:
        return None
    found = []
    for row in rows:
        attachment = Attachment.from_row(row)
        status = "detached" if row["detached_at"] is not None else "installed" if attachment.installed else "recorded"
        problems = () if status == "detached" else tuple(_problems(conn, attachment, status, rows))
        found.append(AttachmentHealth(attachment, status, problems))
    return found


def _rows(conn: Any, query: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(queries.sql(query), args)
            return list(cur.fetchall())
    except pymysql_errors.MySQLError as exc:
        raise db.translate(exc) from exc


def _problems(conn: Any, a: Attachment, status: str, everyone: Sequence[dict[str, Any]]) -> list[Problem]:
    found: list[Problem] = []
    name, table = a.machine, attached.quote(a.table)
    if status == "recorded":
        found.append(
            Problem(
                "warning",
                "not_installed",
                f"{name} is recorded on {table} (fsm_attach_v1) but its triggers are not installed yet: the "
                f"table's writes are not checked; run `pyfsm sync {name}` as the schema owner",
            )
        )
    columns = {r["name"]: r for r in _rows(conn, "attach_health_columns", (a.table,))}
    prefix = f"fsm_{name}_"
    triggers = _rows(conn, "attach_health_triggers", (a.table, f"fsm_{name}", prefix, prefix))
    if not columns:
        found.append(_table_missing(a, triggers, status))
        return found
    found += _columns(a, columns, status)
    found += _state_capacity(a, columns.get(a.state), _rows(conn, "attach_health_states", (name,)))
    if status == "installed":
        found += _triggers(conn, a, triggers, everyone)
    return found


def _table_missing(a: Attachment, triggers: list[dict[str, Any]], status: str) -> Problem:
    sbu = attached.object_name("machine/attached/triggers/fsm_{type}_sbu_v1.sql", a.machine)
    moved = sorted({t["table_name"] for t in triggers if t["name"] == sbu and t["table_name"] != a.table})
    now = f"; its triggers are on {attached.quote(moved[0])} now" if moved else ""
    fails = (
        f"every transition of {a.machine} fails writing its state column"
        if status == "installed"
        else f"`pyfsm sync {a.machine}` cannot install its triggers"
    )
    return Problem(
        "error",
        "table_missing",
        f"{a.machine}: table {attached.quote(a.table)} is gone (renamed or dropped){now}: {fails}; rename the table "
        f"back, or `pyfsm detach {a.machine}` and attach the table by its new name",
    )


def _columns(a: Attachment, columns: dict[str, dict[str, Any]], status: str) -> list[Problem]:
    named = [("key", a.key), ("state", a.state)] + ([("lookup", a.lookup)] if a.lookup else [])
    named += [("copied", c) for c in a.columns]
    table = attached.quote(a.table)
    fails = (
        f"pyfsm's triggers name it, so writes of {table} and transitions of {a.machine} fail (1054)"
        if status == "installed"
        else f"the triggers `pyfsm sync {a.machine}` installs name it, so writes of {table} would fail (1054)"
    )
    return [
        Problem(
            "error",
            "column_missing",
            f"{a.machine}: {table} has no {what} column {attached.quote(column)} any more (renamed or dropped): "
            f"{fails}; rename it back (ALTER TABLE {table} RENAME COLUMN ... TO {attached.quote(column)}), or "
            f"`pyfsm detach {a.machine}` and attach it again with the new name",
        )
        for what, column in named
        if column not in columns
    ]


def _state_capacity(a: Attachment, column: dict[str, Any] | None, states: list[dict[str, Any]]) -> list[Problem]:
    """The state column must hold every state of every definition version (fsm_attach_v1's
    rule, checked again: a version defined since may add one, an ALTER TABLE may narrow it)."""
    if column is None:
        return []  # reported missing
    where = f"state column {attached.quote(a.state)} of {attached.quote(a.table)} ({column['column_type']})"
    if column["data_type"] not in STATE_TYPES:
        return [
            Problem(
                "error",
                "state_column",
                f"{a.machine}: {where} is no longer CHAR, VARCHAR or ENUM: ALTER it back to one that holds "
                f"every state of {a.machine}",
            )
        ]
    if column["data_type"] == "enum":
        values = {v.replace("''", "'") for v in ENUM_VALUE.findall(str(column["column_type"]))}
        lacking = [s for s in states if s["state"] not in values]
        problem = "lacks"
        fix = f"add {'it' if len(lacking) == 1 else 'them'} to the ENUM (ALTER TABLE ... MODIFY)"
    else:
        length = int(column["length"] or 0)
        lacking = [s for s in states if len(s["state"]) > length]
        problem = "is too short for"
        fix = "make it longer (ALTER TABLE ... MODIFY)"
    if not lacking:
        return []
    named = ", ".join(f"{s['state']} (version {s['version']})" for s in lacking)
    return [
        Problem(
            "error",
            "state_column",
            f"{a.machine}: {where} {problem} {named}: a transition into "
            f"{'it' if len(lacking) == 1 else 'them'} fails; {fix}",
        )
    ]


def _triggers(
    conn: Any, a: Attachment, triggers: list[dict[str, Any]], everyone: Sequence[dict[str, Any]]
) -> list[Problem]:
    instance_table = f"fsm_{a.machine}"
    if not any(t["table_name"] == instance_table for t in triggers):
        # fsm_<type> always has triggers of its own: none seen is an account that may not see
        # them (MySQL shows triggers to accounts with the TRIGGER privilege only)
        return [
            Problem(
                "warning",
                "triggers_hidden",
                f"{a.machine}: its triggers were not checked: this account sees no trigger of {instance_table} "
                "(MySQL shows triggers to accounts with the TRIGGER privilege): run `pyfsm check` as the schema owner",
            )
        ]
    by_name = {t["name"]: t for t in triggers}
    found: list[Problem] = []
    for template in attached.ALL_OBJECTS:
        role = ROLE.search(template)
        if (
            role is None
            or role.group(1) not in TRIGGER_ROLES
            or (role.group(1) == "sbd" and a.on_delete != "refuse")
            or (role.group(1) == "bu_copy" and not a.columns)
        ):
            continue
        name = attached.object_name(template, a.machine)
        on = a.table if template in attached.SUBJECT_TRIGGERS else instance_table
        if name in by_name and by_name[name]["table_name"] == on:
            continue
        found.append(
            Problem(
                "error",
                "trigger_missing",
                f"{a.machine}: trigger {name} on {attached.quote(on)} is missing: {TRIGGER_ROLES[role.group(1)]}; "
                f"run `pyfsm sync {a.machine}` as the schema owner to create it again",
            )
        )
    procedure = attached.object_name("machine/attached/procedures/fsm_{type}_adopt_v1.sql", a.machine)
    if not _rows(conn, "attach_health_procedure", (procedure,)):
        found.append(
            Problem(
                "error",
                "procedure_missing",
                f"{a.machine}: procedure {procedure} is missing: `pyfsm adopt {a.machine}` fails; run "
                f"`pyfsm sync {a.machine}` as the schema owner to create it again",
            )
        )
    return found + _order(a, triggers, everyone)


def _order(a: Attachment, triggers: list[dict[str, Any]], everyone: Sequence[dict[str, Any]]) -> list[Problem]:
    """The application's BEFORE UPDATE triggers on the table that run after pyfsm's: what they
    set NEW.<state> to is what the row keeps, after pyfsm checked the change."""
    sbu = attached.object_name("machine/attached/triggers/fsm_{type}_sbu_v1.sql", a.machine)
    ours = next((t for t in triggers if t["name"] == sbu and t["table_name"] == a.table), None)
    if ours is None:
        return []  # reported missing
    # the other attached types' triggers on the same table each check a column of their own
    pyfsm = {
        attached.object_name(t, row["machine"])
        for row in everyone
        if row["table_name"] == a.table
        for t in attached.SUBJECT_TRIGGERS
    }
    later = [
        t
        for t in triggers
        if t["table_name"] == a.table
        and f"{t['timing']} {t['event']}" == "BEFORE UPDATE"
        and int(t["action_order"]) > int(ours["action_order"])
        and t["name"] not in pyfsm
    ]
    return [
        Problem(
            "warning",
            "trigger_order",
            f"{a.machine}: trigger {attached.quote(t['name'])} (BEFORE UPDATE on {attached.quote(a.table)}) runs "
            f"after pyfsm's {sbu}: a change it makes to {attached.quote(a.state)} escapes {a.machine}'s rules and "
            f"history; if it may set that column, create it again with PRECEDES {sbu}",
        )
        for t in sorted(later, key=lambda t: int(t["action_order"]))
    ]


def refuse_unholdable_states(gateway: Gateway, machine: str, states: Sequence[str]) -> None:
    """Before a new definition of an attached type is stored: StateColumnUnsupported (31036),
    nothing stored, when its table's state column cannot hold one of its ``states`` (an ENUM
    lacking it, a VARCHAR too short); a transition into it would fail with the server's own
    1265 otherwise, and an upgrade into it would move nothing. A type that is not attached, or
    an account that may not read fsm_attachments, passes: the database still refuses the write."""
    try:
        found = gateway.query("attach_row", (machine,))
    except AccessDenied:
        return
    if not found or found[0]["detached_at"] is not None:
        return
    a = Attachment.from_row(found[0])
    columns = {c["name"]: c for c in gateway.query("attach_health_columns", (a.table,))}
    problems = _state_capacity(a, columns.get(a.state), [{"state": s, "version": "new"} for s in states])
    if problems:
        raise StateColumnUnsupported(
            f"{problems[0].message.replace('(version new)', '(the new definition)')}; nothing was stored",
            machine=machine,
        )
