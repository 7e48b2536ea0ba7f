"""The routine registry (pyfsm.schema.routines) against what a fresh install creates: every
procedure the Python calls exists, with exactly the registry's parameters in order, and
every call site takes its routine from the registry."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pymysql
from helpers.common import fetch

from pyfsm import Machine, Store
from pyfsm.schema import routines

PYFSM = Path(__file__).resolve().parents[2] / "pyfsm"


def procedures(raw: pymysql.connections.Connection) -> dict[str, list[str]]:
    """Every procedure of the database with its IN/OUT parameters in order (two reads of
    information_schema in all: one per routine took seconds on MariaDB, which parses each
    routine's body to answer)."""
    found: dict[str, list[str]] = {
        str(r["name"]): []
        for r in fetch(
            raw,
            "SELECT routine_name AS name FROM information_schema.routines "
            "WHERE routine_schema = DATABASE() AND routine_type = 'PROCEDURE'",
        )
    }
    for r in fetch(
        raw,
        "SELECT specific_name AS routine, parameter_name AS name FROM information_schema.parameters "
        "WHERE specific_schema = DATABASE() AND routine_type = 'PROCEDURE' AND ordinal_position > 0 "
        "ORDER BY specific_name, ordinal_position",
    ):
        found.setdefault(str(r["routine"]), []).append(str(r["name"]))
    return found


def test_every_registered_routine_exists_with_its_parameters(store: Store, order: Machine, raw: Any) -> None:
    assert len(routines.ALL) >= 40 and len(routines.BY_NAME) == len(routines.ALL)  # no name twice
    # the type attached to a table, so that the procedures created per attachment are there too
    raw.cursor().execute(f"CREATE TABLE `{order.name}_t` (id INT PRIMARY KEY, status VARCHAR(32)) ENGINE=InnoDB")
    store.attach(order.name, table=f"{order.name}_t", key="id", state="status")
    wrong = {}
    installed = procedures(raw)
    for routine in routines.ALL:
        name = routine.name_for(order.name)
        found = installed.get(name)
        if found != list(routine.params):
            wrong[name] = (found, routine.params)
    assert wrong == {}, f"the registry disagrees with the installed schema: {wrong}"


def test_a_per_type_routine_needs_its_type_and_quotes_its_name() -> None:
    assert routines.SEND.per_type and not routines.PAUSE.per_type
    assert routines.SEND.call_sql("order") == "CALL `fsm_order_send_v5`(%s, %s, %s, %s, %s, %s, %s, %s, %s)"
    assert routines.STATS.call_sql() == "CALL `fsm_stats_v3`()"
    try:
        routines.SEND.call_sql()
    except ValueError as exc:
        assert "per-type" in str(exc)
    else:
        raise AssertionError("a per-type routine without its type was named")


def test_no_call_site_writes_a_procedure_name_of_its_own() -> None:
    """A version bump is one line in the registry: no module of pyfsm/ outside the schema
    package writes a versioned procedure name into a CALL."""
    pattern = re.compile(r"""(CALL\s+`?fsm_|call_sql\(\s*f?["']fsm_|["']fsm_\{?[a-z_.]*\}?_?[a-z_]+_v\d+["'])""")
    offenders = []
    for path in sorted(PYFSM.rglob("*.py")):
        if path.parent.name == "schema":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and not line.lstrip().startswith("#") and '"""' not in line and "``" not in line:
                offenders.append(f"{path.relative_to(PYFSM.parent)}:{number}: {line.strip()}")
    assert offenders == [], "\n".join(offenders)
