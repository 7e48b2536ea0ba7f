"""The runtime queries: every SQL statement pyfsm's Python runs that is not a CALL of a
routine of the registry (:mod:`pyfsm.schema.routines`), by name.

They live in ``sql/queries/*.sql`` (one file per part of pyfsm: ``console.sql``,
``relay.sql``, ...), each a block that starts with ``-- name: <name>`` followed by a header
of comment lines (what it reads or writes, its parameters in ``%s`` order, who runs it) and
the statement::

    -- name: console_current_version
    -- The type's current definition version, by the definitions' key.
    -- Parameters: machine.
    -- Used by: the console (pyfsm.web.reads).
    SELECT version FROM fsm_v_definitions WHERE machine = %s AND is_current

A statement may have slots, filled by :func:`sql` and nothing else:

* ``{type}``: the machine type (checked: ``[a-z][a-z0-9_]*``), as in every per-type file of
  ``sql/`` (``fsm_v_{type}``);
* ``{database}``: a database name (checked: letters, digits, ``_``, ``$``, ``-``);
* ``{other_name}``: the text of the block ``other_name`` (a shared column list);
* any other ``{slot}``: what the caller passes, an ``int`` (a LIMIT) or the names of blocks
  joined by `` AND `` (the conditions a filter chose). No text of a caller's ever reaches a
  statement: only names of blocks, numbers and checked type names.

``tests/unit/test_queries.py`` fails on SQL statement text anywhere in ``pyfsm/`` outside
this home, but for what ``pyfsm/schema/`` builds per object, per type and per account (the
statements that create or change objects and accounts, the rendered trigger code, the
registry's ``CALL``) and the few statements that test lists with their reasons.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

from ..errors import InvalidArgument

#: A block's first line, and a slot in its statement.
NAME_LINE = re.compile(r"^-- name: ([a-z][a-z0-9_]*)\s*$")
SLOT = re.compile(r"\{([a-z][a-z0-9_]*)\}")
#: What ``{type}`` may be replaced with (pyfsm.schema.resources checks the reserved names too).
TYPE_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")
#: What ``{database}`` may be replaced with: nothing that could end the quoted identifier.
DATABASE_NAME = re.compile(r"[A-Za-z0-9_$-]{1,64}")


def package_folder(name: str) -> Path:
    """``name`` inside the installed package (a wheel), else the source checkout's top-level folder."""
    packaged = Path(str(files("pyfsm"))) / name
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / name


@cache
def sql_dir() -> Path:
    """``sql/``: the schema's objects, and the runtime queries in ``sql/queries/``."""
    return package_folder("sql")


@dataclass(frozen=True)
class Query:
    """One named statement: ``header`` its comment lines, ``text`` the statement with its slots."""

    name: str
    header: str
    text: str
    source: str  # the file it came from, under sql/

    @property
    def slots(self) -> frozenset[str]:
        return frozenset(SLOT.findall(self.text))


def parse(text: str, source: str) -> list[Query]:
    """The blocks of one queries file (see the module's docstring)."""
    found: list[Query] = []
    name: str | None = None
    header: list[str] = []
    body: list[str] = []

    def close() -> None:
        if name is None:
            return
        statement = "\n".join(body).strip().rstrip(";").strip()
        if not statement:
            raise ValueError(f"{source}: query {name} has no statement")
        found.append(Query(name, "\n".join(header), statement, source))

    for line in text.splitlines():
        named = NAME_LINE.match(line)
        if named:
            close()
            name, header, body = named.group(1), [], []
        elif name is None:
            if line.strip() and not line.startswith("--"):
                raise ValueError(f"{source}: a statement before the first '-- name:' line")
        elif line.startswith("--") and not body:
            header.append(line[2:].strip())
        else:
            body.append(line)
    close()
    return found


@cache
def queries() -> Mapping[str, Query]:
    """Every query of ``sql/queries/*.sql`` by name (a name is unique across the files)."""
    found: dict[str, Query] = {}
    for path in sorted((sql_dir() / "queries").glob("*.sql")):
        for query in parse(path.read_text(encoding="utf-8"), f"queries/{path.name}"):
            if query.name in found:
                raise ValueError(f"query {query.name} is in {found[query.name].source} and {query.source}")
            found[query.name] = query
    return found


def sql(name: str, *, type: str | None = None, database: str | None = None, **slots: int | str | Sequence[str]) -> str:
    """The statement of query ``name`` with its slots filled (see the module's docstring).

    A missing query or slot, or a slot given a value it cannot take, is a bug in pyfsm
    (KeyError, TypeError); a type name that is not a name is the caller's (InvalidArgument).
    """
    return _fill(queries()[name], {"type": type, "database": database}, slots, depth=0)


def statement(name: str, slots: Mapping[str, int | str | Sequence[str]], *, type: str | None = None) -> str:
    """:func:`sql` with the run-time slots as a mapping (for callers that pass them on)."""
    return _fill(queries()[name], {"type": type, "database": None}, slots, depth=0)


def union_all(parts: Sequence[str]) -> str:
    """One statement of ``parts`` (filled blocks, e.g. one per machine type) joined by UNION ALL:
    for a statement whose number of parts only the run knows (the slots join with AND only)."""
    return "\nUNION ALL\n".join(parts)


def _fill(query: Query, names: Mapping[str, str | None], slots: Mapping[str, object], *, depth: int) -> str:
    if depth > 4:
        raise ValueError(f"query {query.name}: blocks include each other too deeply")

    def value(match: re.Match[str]) -> str:
        slot = match.group(1)
        if slot == "type":
            type_name = names["type"]
            if type_name is None or not TYPE_NAME.fullmatch(type_name):
                raise InvalidArgument(f"machine name must match [a-z][a-z0-9_]*, got {type_name!r:.80}")
            return type_name
        if slot == "database":
            database = names["database"]
            if database is None or not DATABASE_NAME.fullmatch(database):
                raise InvalidArgument(f"a database name of 1 to 64 letters, digits, _, $ and -, got {database!r:.80}")
            return database
        if slot in slots:
            given = slots[slot]
            if isinstance(given, bool) or not isinstance(given, int | str | list | tuple):
                raise TypeError(f"query {query.name}: slot {slot} takes an int or block names, got {given!r:.80}")
            if isinstance(given, int):
                return str(given)
            blocks = [given] if isinstance(given, str) else list(given)
            return " AND ".join(_fill(queries()[n], names, slots, depth=depth + 1) for n in blocks)
        if slot in queries():
            return _fill(queries()[slot], names, slots, depth=depth + 1)
        raise KeyError(f"query {query.name}: nothing fills slot {{{slot}}}")

    return SLOT.sub(value, query.text)
