"""pyfsm.schema.attached's rendering of sql/machine/attached for each key kind, with and
without a lookup column and copied columns: what reaches the server must be whole SQL (no
slot left), quote every name it splices, leave out what is not tracked, and refuse what it
cannot render safely rather than splice it."""

from __future__ import annotations

import re

import pytest

from pyfsm.errors import InvalidArgument
from pyfsm.schema import attached
from pyfsm.schema.attached import ALL_OBJECTS, Facts, render

KEYS = {
    "integer": "bigint(20) unsigned",
    "string": "varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
    "binary": "binary(16)",
}
#: a slot the renderer did not fill, or a span mark it did not remove
LEFT = re.compile(r"\{[a-z_]+\}|/\*\[\w+\*/|/\*\w+\]\*/")


def facts(kind: str, *, lookup: str | None = None, columns: tuple[str, ...] = ()) -> Facts:
    types = {c: "date" if c == "due" else "int" for c in ((lookup,) if lookup else ()) + columns}
    return Facts(
        machine="ticket",
        table="odd `table`",
        key="the`key",
        state="st`ate",
        key_kind=kind,
        key_type=KEYS[kind],
        on_delete="refuse",
        lookup=lookup,
        columns=columns,
        column_types=types,
    )


CASES = [
    pytest.param(kind, lookup, columns, id=f"{kind}-{'lookup' if lookup else 'nolookup'}-{len(columns)}cols")
    for kind in KEYS
    for lookup in (None, "account`id")
    for columns in ((), ("total", "due"))
]


@pytest.mark.parametrize("template", ALL_OBJECTS)
@pytest.mark.parametrize(("kind", "lookup", "columns"), CASES)
def test_every_template_renders_whole(template: str, kind: str, lookup: str | None, columns: tuple[str, ...]) -> None:
    sql = render(template, facts(kind, lookup=lookup, columns=columns))
    assert not LEFT.search(sql), LEFT.search(sql)
    # the header comment is not sent: a spliced name could end a comment line
    assert not sql.lstrip().startswith("--")
    assert attached.object_name(template, "ticket") in sql
    # names are spliced quoted with backticks doubled, never bare: once every quoted
    # occurrence is taken out, no trace of a name is left
    rest = sql
    for name in ("odd `table`", "the`key", "st`ate", "account`id"):
        rest = rest.replace(attached.quote(name), "")
    for trace in ("odd", "the`", "st`", "account`"):
        assert trace not in rest


@pytest.mark.parametrize("kind", KEYS)
def test_tracked_spans_are_removed_when_nothing_is_tracked(kind: str) -> None:
    template = "machine/attached/triggers/fsm_{type}_sbu_v1.sql"
    bare = render(template, facts(kind))
    tracked = render(template, facts(kind, lookup="account`id", columns=("total",)))
    assert "lookup_key" not in bare and "`account``id`" not in bare
    assert "`account``id`" in tracked and "'$.total'" in tracked
    assert len(bare) < len(tracked)


def test_the_table_name_is_quoted_with_backticks_doubled() -> None:
    sql = render("machine/attached/triggers/fsm_{type}_sai_v1.sql", facts("integer"))
    assert "`odd ``table```" in sql


@pytest.mark.parametrize(
    ("kind", "key_type"),
    [
        ("integer", "int; DROP TABLE x"),
        ("integer", "json"),
        ("string", "varchar(10)"),  # no character set and collation
        ("binary", "blob"),
        ("float", "float"),
    ],
)
def test_unexpected_key_types_are_refused(kind: str, key_type: str) -> None:
    bad = Facts(machine="ticket", table="t", key="id", state="s", key_kind=kind, key_type=key_type, on_delete="refuse")
    with pytest.raises(ValueError, match="unexpected key type"):
        render("machine/attached/triggers/fsm_{type}_sbu_v1.sql", bad)


@pytest.mark.parametrize("column", ["a b", "x')", "1st", "a.b", "x" * 65, ""])
def test_unexpected_copied_column_names_are_refused(column: str) -> None:
    with pytest.raises(ValueError, match="unexpected column name"):
        render("machine/attached/triggers/fsm_{type}_sbu_v1.sql", facts("integer", columns=(column,)))


def test_a_bad_type_name_is_refused() -> None:
    bad = Facts(
        machine="no such`type",
        table="t",
        key="id",
        state="s",
        key_kind="integer",
        key_type="int(11)",
        on_delete="refuse",
    )
    with pytest.raises(InvalidArgument):
        render("machine/attached/triggers/fsm_{type}_sbu_v1.sql", bad)
