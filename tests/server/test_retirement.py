"""docs/sql-api.md, "Versions and retirement": its tables name every public procedure of a
fresh install once, each current one as current and each deprecated one as pyfsm.schema
says, with the releases that deprecate and remove it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from helpers.common import fetch

from pyfsm import Machine
from pyfsm.schema import install as schema

DOC = (Path(__file__).resolve().parents[2] / "docs" / "sql-api.md").read_text()
SECTION = DOC.split("\n## Versions and retirement\n", 1)[1].split("\n## ", 1)[0]


def table_rows(text: str, first_header: str) -> list[list[str]]:
    block = re.search(rf"^\| {re.escape(first_header)} \|.*\n\|[- |]+\|\n((?:\|.*\n)+)", text, re.M)
    assert block, first_header
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in block.group(1).splitlines()]


def names(cell: str) -> set[str]:
    return set(re.findall(r"`(fsm_[\w{}]+)`", cell))


def test_the_tables_name_every_public_procedure_once(raw: Any, order: Machine) -> None:
    current = [name for row in table_rows(SECTION, "operation") for cell in row[1:] for name in names(cell)]
    deprecated_rows = table_rows(SECTION, "deprecated")
    deprecated = {name: (row[1], row[2], row[3]) for row in deprecated_rows for name in names(row[0])}
    assert len(current) == len(set(current)), "a procedure is named twice"
    assert not set(current) & set(deprecated)
    assert deprecated == {d.name: (f"`{d.replaced_by}`", d.deprecated_in, d.removed_in) for d in schema.DEPRECATED}

    # what a fresh install has: the public procedures are SQL SECURITY DEFINER, the helpers INVOKER
    public = {
        r["routine_name"]
        for r in fetch(
            raw,
            "SELECT routine_name AS routine_name FROM information_schema.routines WHERE routine_schema = DATABASE() "
            "AND routine_type = 'PROCEDURE' AND security_type = 'DEFINER'",
        )
    }
    machines = [r["machine"] for r in fetch(raw, "SELECT machine FROM fsm_machines")]  # other tests' types too
    mine = {n for n in public if n.startswith(f"fsm_{order.name}_")}
    generic = {n for n in public if not any(n.startswith(f"fsm_{m}_") for m in machines)}
    documented = {n.replace("{type}", order.name) for n in [*current, *deprecated]}
    assert mine | generic == documented, (documented - (mine | generic), (mine | generic) - documented)


def test_the_deprecated_sections_say_so() -> None:
    for entry in schema.DEPRECATED:
        section = DOC.split(f"\n### `{entry.name}`\n", 1)[1].split("\n### ", 1)[0]
        assert section.lstrip().startswith(
            f"*Deprecated since {entry.deprecated_in}, removed in {entry.removed_in}: call `{entry.replaced_by}`*"
        ), entry.name
