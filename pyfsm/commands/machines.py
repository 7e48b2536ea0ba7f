"""`pyfsm types` (also `pyfsm ls`): the machine types of the database, each with its current
definition version, its states, its instances and whether its tables are ready."""

from __future__ import annotations

import argparse

from .. import db
from ..reporting import reads as reporting
from ..schema import install as schema
from .common import Add, add_read_dsn, emit, read_dsn, table


def cmd_types(args: argparse.Namespace) -> None:
    settings = db.parse_dsn(read_dsn(args) or args.dsn)  # reads only: a replica will do
    conn = db.connect(settings, timeouts=True)
    try:
        schema.check(conn)
        types = reporting.machine_types(conn)
    finally:
        conn.close()
    rows = [
        {
            "machine": t["machine"],
            "version": t["current_version"],
            "states": t["states"],
            "instances": t["instances"],
            "tables": "ready" if t["tables_ready"] else f"not ready: run `pyfsm sync {t['machine']}`",
        }
        for t in types
    ]
    emit(
        args,
        types,
        table(rows, ["machine", "version", "states", "instances", "tables"])
        if rows
        else "no machine types defined: `pyfsm install FILE|module.path:attribute` defines one",
    )


def register(add: Add) -> None:
    add_read_dsn(
        add(
            "types",
            cmd_types,
            "list the machine types: current definition version, states, instances, whether their tables are ready",
            "pyfsm types\n  pyfsm ls --json",
            aliases=["ls"],
        )
    )
