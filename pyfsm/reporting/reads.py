"""Reads through the reporting views (what a `pyfsm grant --reporting` account may do):
a machine's current definition, its counts per state and per edge, one instance's path,
and the machine types.

`pyfsm graph` and `pyfsm types` use these, so they work with the reporting account as well
as the owner's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pymysql

from .. import db
from ..db.driver import errors as pymysql_errors
from ..definition import Machine
from ..definition_file import parse_machines
from ..errors import AccessDenied, SchemaVersionMismatch, UnknownInstance, UnknownMachine
from ..schema.install import MACHINE_OBJECTS_VERSION
from ..schema.resources import check_machine_name

#: The keys of a stored definition body a Machine is built from (a DBA's body may carry more).
BODY_KEYS = ("states", "start", "final", "transitions", "topic", "options", "timeouts")


def _rows(conn: Any, query: str, args: tuple[Any, ...], machine: str | None = None) -> list[dict[str, Any]]:
    """The rows of the named query ``query`` (sql/queries/reporting.sql), ``machine`` its type."""
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(db.queries.sql(query, type=machine), args)
            return list(cur.fetchall())
    except pymysql_errors.MySQLError as exc:
        if exc.args and exc.args[0] == 1146:  # no such view: no pyfsm here, or a schema older than 0004
            raise SchemaVersionMismatch(
                f"this database has no pyfsm reporting views ({exc.args[1]}): run `pyfsm migrate` (revision 0004 "
                "adds them) or `pyfsm sync <machine>` for a type installed by an older pyfsm"
            ) from exc
        raise db.translate(exc) from exc


def current_machine(conn: Any, machine: str, version: int | None = None) -> Machine:
    """The machine type's current definition (or its definition ``version``), read from fsm_v_definitions."""
    name = check_machine_name(machine)
    rows = (
        _rows(conn, "reporting_current_body", (name,))
        if version is None
        else _rows(conn, "reporting_version_body", (name, int(version)))
    )
    if not rows:
        raise UnknownMachine(f"unknown machine {name}", machine=name)
    body = rows[0]["body"]
    body = json.loads(body) if isinstance(body, (str, bytes)) else body
    document = {"name": name, **{k: body[k] for k in BODY_KEYS if k in body}}
    return parse_machines(json.dumps(document), fmt="json", source=f"the stored definition of {name}")[0]


def state_counts(conn: Any, machine: str) -> dict[str, int]:
    """Instances per state (fsm_v_state_counts): every state of the current definition (0 when
    empty) and any state of an older definition version that still holds instances."""
    name = check_machine_name(machine)
    return {r["state"]: int(r["instances"]) for r in _rows(conn, "reporting_state_counts", (name,))}


def edge_counts(conn: Any, machine: str) -> dict[tuple[str, str, str], int]:
    """How often each (from_state, event, to_state) was taken, from the whole history (a scan)."""
    name = check_machine_name(machine)
    rows = _rows(conn, "reporting_edge_counts", (), name)
    return {(r["from_state"], r["event"], r["to_state"]): int(r["n"]) for r in rows}


def path(conn: Any, machine: str, key: str) -> list[str]:
    """The states one instance went through, in order (its creation's state first)."""
    name = check_machine_name(machine)
    rows = _rows(conn, "reporting_path", (key,), name)
    if not rows:
        raise UnknownInstance(f"no {name} {key}", machine=name, key=key)
    return [r["to_state"] for r in rows]


@dataclass(frozen=True)
class InstancePath:
    """One instance's way through its type, for a diagram of the definition version it follows."""

    #: the definition version the instance follows (what `pyfsm upgrade` moved it to)
    definition_version: int
    #: its type's current definition version
    current_version: int
    #: the states its history rows entered, oldest first, each with whether the row is a move
    #: to a newer definition version (source 'upgrade'): what diagram.drawn_path reads
    visits: list[tuple[str, bool]]


def instance_path(conn: Any, machine: str, key: str) -> InstancePath:
    """The definition version one instance follows and the states it went through
    (UnknownInstance when there is no such instance)."""
    name = check_machine_name(machine)
    found = _rows(conn, "reporting_instance_version", (name, key), name)
    rows = _rows(conn, "reporting_path_moves", (key,), name) if found else []
    if not rows:
        raise UnknownInstance(f"no {name} {key}", machine=name, key=key)
    return InstancePath(
        definition_version=int(found[0]["definition_version"]),
        current_version=int(found[0]["current_version"]),
        visits=[(r["to_state"], r["source"] == "upgrade") for r in rows],
    )


def machine_types(conn: Any) -> list[dict[str, Any]]:
    """Every defined machine type, by name: its current definition version, how many states
    that definition has, its instances (the state counters), and whether its tables are
    ready (``tables_ready``: its tables, triggers and procedures are installed; where the
    account may read fsm_machines, as the schema owner may, they are also this pyfsm's set,
    a type with timeouts has its timer triggers, and its transition trigger was rendered for
    its current definition version: what `pyfsm sync` would otherwise do)."""
    instances = {r["machine"]: int(r["instances"] or 0) for r in _rows(conn, "reporting_instances_per_type", ())}
    try:
        objects = {r["machine"]: r for r in _rows(conn, "reporting_type_objects", ())}
    except AccessDenied:  # a reporting account reads the views only: whether the objects are installed
        objects = {}
    found = []
    for row in _rows(conn, "reporting_types", ()):
        body = row["body"]
        body = json.loads(body) if isinstance(body, (str, bytes)) else body
        ready = bool(row["installed"])
        more = objects.get(row["machine"])
        if ready and more is not None:
            ready = (
                more["objects_version"] == MACHINE_OBJECTS_VERSION
                and bool(more["timer_triggers"])
                and bool(more["rendered"])
            )
        found.append(
            {
                "machine": row["machine"],
                "current_version": int(row["version"]),
                "states": len(body.get("states") or ()),
                "instances": instances.get(row["machine"], 0),
                "tables_ready": ready,
            }
        )
    return found
