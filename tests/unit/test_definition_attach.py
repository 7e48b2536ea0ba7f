"""A definition file's ``attach`` section (issue 48, item 1), without a server: read into an
AttachSection beside its machine, each field's type and size checked with the file, the
field's path and the line in the message, as every other field of the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyfsm.definition_file import (
    AttachSection,
    Definition,
    load_definitions,
    load_machines,
    parse_definitions,
    parse_machines,
)
from pyfsm.errors import InvalidDefinition

MACHINE = {
    "name": "order",
    "states": ["new", "paid"],
    "start": ["new"],
    "transitions": [{"event": "pay", "from": "new", "to": "paid"}],
}
YAML = """name: order
states: [new, paid]
start: [new]
transitions:
  - {event: pay, from: new, to: paid}
attach:
  table: orders
  key: id
  state: status
"""


def test_the_section_is_read_beside_its_machine(tmp_path: Path) -> None:
    full = {
        **MACHINE,
        "attach": {
            "table": "orders",
            "key": "id",
            "state": "status",
            "lookup": "customer_id",
            "columns": ["total", "currency"],
            "on_delete": "allow",
            "adopt": False,
        },
    }
    [found] = parse_definitions(json.dumps(full), fmt="json")
    assert found.attach == AttachSection("orders", "id", "status", "customer_id", ("total", "currency"), "allow", False)
    assert found.machine == parse_machines(json.dumps(MACHINE), fmt="json")[0]  # the machine is the same without it
    (tmp_path / "order.yaml").write_text(YAML)
    assert load_definitions(tmp_path / "order.yaml") == [
        Definition(found.machine, AttachSection("orders", "id", "status"))  # the defaults: refuse, adopt
    ]
    assert load_machines(tmp_path / "order.yaml") == [found.machine]  # checked, left out
    assert parse_definitions(json.dumps(MACHINE), fmt="json") == [Definition(found.machine, None)]


@pytest.mark.parametrize(
    ("attach", "message"),
    [
        pytest.param("orders", "attach: must be an object (table, key, state, lookup, columns, on_delete, adopt), got string 'orders' (line 6)", id="not-an-object"),
        pytest.param("{table: orders, key: id}", "attach.state: required field is missing (line 6)", id="missing"),
        pytest.param("{table: orders, key: id, state: status, tabel: x}", "attach.tabel: unknown field; expected table, key, state, lookup, columns, on_delete, adopt (line 6)", id="unknown-field"),
        pytest.param("{table: 42, key: id, state: status}", "attach.table: must be a string, got 42 (YAML reads unquoted yes/no/on/off/null and numbers as non-strings: put it in quotes) (line 6)", id="number"),
        pytest.param("{table: '', key: id, state: status}", "attach.table: must be a name of 1 to 64 characters, got string '' (line 6)", id="empty"),
        pytest.param(f"{{table: orders, key: {'k' * 65}, state: status}}", f"attach.key: must be a name of 1 to 64 characters, got string '{'k' * 60}'... (line 6)", id="long"),
        pytest.param("{table: orders, key: id, state: status, lookup: [a]}", "attach.lookup: must be a string, got a list (line 6)", id="lookup"),
        pytest.param("{table: orders, key: id, state: status, columns: total}", "attach.columns: must be a list, got string 'total' (line 6)", id="columns"),
        pytest.param("{table: orders, key: id, state: status, columns: [total, 7]}", "attach.columns[1]: must be a string, got 7 (YAML reads unquoted yes/no/on/off/null and numbers as non-strings: put it in quotes) (line 6)", id="column"),
        pytest.param("{table: orders, key: id, state: status, columns: [total, total]}", "attach.columns[1]: 'total' is listed twice (first at columns[0]) (line 6)", id="twice"),
        pytest.param("{table: orders, key: id, state: status, on_delete: keep}", "attach.on_delete: must be 'refuse' or 'allow', got string 'keep' (line 6)", id="on-delete"),
        pytest.param("{table: orders, key: id, state: status, adopt: 'yes'}", "attach.adopt: must be true or false, got string 'yes' (line 6)", id="adopt"),
    ],
)  # fmt: skip
def test_a_bad_section_names_the_field(attach: str, message: str) -> None:
    text = YAML.split("attach:")[0] + f"attach: {attach}\n"
    with pytest.raises(InvalidDefinition) as caught:
        parse_definitions(text, fmt="yaml", source="order.yaml")
    assert str(caught.value) == f"order.yaml: {message}"
    assert caught.value.fields["field"] == message.split(":")[0]
    with pytest.raises(InvalidDefinition):  # the machines alone are refused the same
        parse_machines(text, fmt="yaml", source="order.yaml")


def test_too_many_columns_and_one_column_for_two_machines() -> None:
    many = {**MACHINE, "attach": {"table": "t", "key": "id", "state": "s", "columns": [f"c{i}" for i in range(33)]}}
    with pytest.raises(InvalidDefinition, match=r"attach.columns: lists 33 columns, at most 32"):
        parse_definitions(json.dumps(many), fmt="json")
    section = {"table": "orders", "key": "id", "state": "status"}
    two = {
        "machines": [
            {**MACHINE, "attach": section},
            {**MACHINE, "name": "refund", "attach": {**section, "key": "ref"}},
        ]
    }
    with pytest.raises(InvalidDefinition) as caught:
        parse_definitions(json.dumps(two), fmt="json", source="two.json")
    assert str(caught.value) == (
        "two.json: machines[1].attach.state: column 'status' of table 'orders' holds the state of machines[0] "
        "already: one column holds one machine's state"
    )
    other = {"machines": [two["machines"][0], {**two["machines"][1], "attach": {**section, "state": "refund_status"}}]}
    assert [d.attach.state for d in parse_definitions(json.dumps(other), fmt="json") if d.attach] == [
        "status",
        "refund_status",
    ]
