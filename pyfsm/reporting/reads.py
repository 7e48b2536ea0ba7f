"""Reads through the reporting views (what a `pyfsm grant --reporting` account may do):
a machine's current definition, its counts per state and per edge, one instance's path.

`pyfsm graph` uses these, so it works with the reporting account as well as the owner's.
"""

from __future__ import annotations

import json
from typing import Any

import pymysql

from .. import db
from ..definition import Machine
from ..definition_file import parse_machines
from ..errors import SchemaVersionMismatch, UnknownInstance, UnknownMachine
from ..schema.resources import check_machine_name

#: The keys of a stored definition body a Machine is built from (a DBA's body may carry more).
BODY_KEYS = ("states", "start", "final", "transitions", "topic", "options", "timeouts")


def _rows(conn: Any, sql: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] == 1146:  # no such view: no pyfsm here, or a schema older than 0004
            raise SchemaVersionMismatch(
                f"this database has no pyfsm reporting views ({exc.args[1]}): run `pyfsm migrate` (revision 0004 "
                "adds them) or `pyfsm sync <machine>` for a type installed by an older pyfsm") from exc
        raise db.translate(exc) from exc


def current_machine(conn: Any, machine: str) -> Machine:
    """The machine type's current definition, read from fsm_v_definitions."""
    name = check_machine_name(machine)
    rows = _rows(conn, "SELECT body FROM fsm_v_definitions WHERE machine = %s AND is_current", (name,))
    if not rows:
        raise UnknownMachine(f"unknown machine {name}", machine=name)
    body = rows[0]["body"]
    body = json.loads(body) if isinstance(body, (str, bytes)) else body
    document = {"name": name, **{k: body[k] for k in BODY_KEYS if k in body}}
    return parse_machines(json.dumps(document), fmt="json", source=f"the stored definition of {name}")[0]


def state_counts(conn: Any, machine: str) -> dict[str, int]:
    """Instances per state (fsm_v_state_counts), states with none included."""
    name = check_machine_name(machine)
    return {r["state"]: int(r["instances"]) for r in _rows(
        conn, "SELECT state, instances FROM fsm_v_state_counts WHERE machine = %s", (name,))}


def edge_counts(conn: Any, machine: str) -> dict[tuple[str, str, str], int]:
    """How often each (from_state, event, to_state) was taken, from the whole history (a scan)."""
    name = check_machine_name(machine)
    rows = _rows(conn, f"SELECT from_state, event, to_state, COUNT(*) AS n FROM `fsm_v_{name}_transitions` "
                       "WHERE event IS NOT NULL GROUP BY from_state, event, to_state", ())
    return {(r["from_state"], r["event"], r["to_state"]): int(r["n"]) for r in rows}


def path(conn: Any, machine: str, key: str) -> list[str]:
    """The states one instance went through, in order (its creation's state first)."""
    name = check_machine_name(machine)
    rows = _rows(conn, f"SELECT to_state FROM `fsm_v_{name}_transitions` WHERE instance_key = %s ORDER BY sort_key",
                 (key,))
    if not rows:
        raise UnknownInstance(f"no {name} {key}", machine=name, key=key)
    return [r["to_state"] for r in rows]
