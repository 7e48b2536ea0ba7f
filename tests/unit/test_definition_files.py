"""Machines written in YAML or JSON files: loading, writing back, and errors that name the field.

Pure tests: no database.
"""

from __future__ import annotations

import json
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from pyfsm import InvalidArgument, InvalidDefinition, Machine, UnreachableStateWarning
from pyfsm.definition_file import (
    MAX_FILE_BYTES,
    dump_machines,
    load_machines,
    machine_document,
    parse_machines,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order.yaml"

#: The machine of examples/order.yaml, written out by hand in JSON.
ORDER_JSON = """
{
  "name": "order",
  "states": ["new", "paid", "shipped", "delivered", "cancelled", "refunded"],
  "start": ["new"],
  "final": ["delivered", "cancelled", "refunded"],
  "transitions": [
    {"event": "pay", "from": "new", "to": "paid"},
    {"event": "unpay", "from": ["paid"], "to": "new"},
    {"event": "ship", "from": "paid", "to": "shipped"},
    {"event": "deliver", "from": "shipped", "to": "delivered"},
    {"event": "cancel", "from": ["new", "paid"], "to": "cancelled"},
    {"event": "refund", "from": "shipped", "to": "refunded"}
  ],
  "topic": null
}
"""

#: A small valid machine the bad-input cases below break one field at a time. Line numbers
#: matter: the expected YAML messages end with "(line N)".
BASE_YAML = """\
name: order
states: [new, paid, shipped, cancelled]
start: [new]
final: [shipped, cancelled]
transitions:
  - {event: pay, from: new, to: paid}
  - {event: unpay, from: paid, to: new}
  - {event: ship, from: paid, to: shipped}
  - {event: cancel, from: [new, paid], to: cancelled}
options:
  lock_lease_seconds: 60
"""

BASE_STATES = ["new", "paid", "shipped", "cancelled"]
BASE_TRANSITIONS: list[dict[str, str | list[str]]] = [
    {"event": "pay", "from": "new", "to": "paid"},
    {"event": "unpay", "from": "paid", "to": "new"},
    {"event": "ship", "from": "paid", "to": "shipped"},
    {"event": "cancel", "from": ["new", "paid"], "to": "cancelled"},
]
#: BASE_YAML as JSON.
BASE: dict[str, object] = {
    "name": "order",
    "states": BASE_STATES,
    "start": ["new"],
    "final": ["shipped", "cancelled"],
    "transitions": BASE_TRANSITIONS,
    "options": {"lock_lease_seconds": 60},
}

YAML_HINT = " (YAML reads unquoted yes/no/on/off/null and numbers as non-strings: put it in quotes)"


def yaml_with(old: str, new: str) -> str:
    assert BASE_YAML.count(old) == 1, old
    return BASE_YAML.replace(old, new)


def json_with(**changes: object) -> str:
    return json.dumps({**BASE, **changes})


def transitions_with(index: int, **changes: str | list[str]) -> list[dict[str, str | list[str]]]:
    edges = [dict(edge) for edge in BASE_TRANSITIONS]
    edges[index].update(changes)
    return edges


# --- good files ---------------------------------------------------------------------------


def test_example_file_is_the_order_machine() -> None:
    [order] = load_machines(EXAMPLE)
    assert order.name == "order" and order.topic is None
    assert order.states == ("new", "paid", "shipped", "delivered", "cancelled", "refunded")
    assert order.target("paid", "unpay") == "new"  # the backward move
    assert order.target("new", "cancel") == order.target("paid", "cancel") == "cancelled"  # multi-source
    assert order.target("shipped", "cancel") is None
    assert (order.save_after_step, order.uses_global_lock, order.uses_local_lock) == (True, False, False)
    assert (order.lock_lease_seconds, order.event_data) == (60, True)


def test_yaml_and_json_files_of_one_machine_give_equal_machines(tmp_path: Path) -> None:
    (tmp_path / "order.json").write_text(ORDER_JSON)
    from_json = load_machines(tmp_path / "order.json")
    from_yaml = load_machines(EXAMPLE)
    assert from_json == from_yaml
    assert from_json[0].to_dict() == from_yaml[0].to_dict()


def test_suffix_picks_the_format(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text(EXAMPLE.read_text())
    (tmp_path / "b.YAML").write_text(EXAMPLE.read_text())
    (tmp_path / "c.JSON").write_text(ORDER_JSON)
    assert (
        load_machines(str(tmp_path / "a.yml"))
        == load_machines(tmp_path / "b.YAML")
        == load_machines(tmp_path / "c.JSON")
    )


def test_multi_machine_file(tmp_path: Path) -> None:
    path = tmp_path / "machines.yaml"
    path.write_text(
        textwrap.dedent("""\
        machines:
          - name: door
            states: [shut, open, locked]
            start: [shut]
            transitions:
              - {event: push, from: shut, to: open}
              - {event: pull, from: open, to: shut}
              - {event: lock, from: shut, to: locked}
              - {event: unlock, from: locked, to: shut}
          - name: ticket
            states: [open, closed]
            start: [open]
            final: [closed]
            transitions:
              - event: close
                from: [open]
                to: closed
            topic: tickets.events
            options: {uses_local_lock: true, lock_lease_seconds: 300}
        """)
    )
    door, ticket = load_machines(path)
    assert door.name == "door" and door.final == () and door.topic is None
    assert door.events_from("shut") == ["push", "lock"]
    assert ticket.name == "ticket" and ticket.topic == "tickets.events"
    assert (ticket.uses_local_lock, ticket.lock_lease_seconds, ticket.save_after_step) == (True, 300, True)


def test_optional_fields_may_be_left_out_or_null() -> None:
    left_out = parse_machines(json.dumps({k: BASE[k] for k in ("name", "states", "start", "transitions")}), fmt="json")
    nulls = parse_machines(json_with(final=None, topic=None, options=None), fmt="json")
    defaults = Machine(
        name="order",
        states=BASE_STATES,
        start=["new"],
        transitions=[(str(e["event"]), e["from"], str(e["to"])) for e in BASE_TRANSITIONS],
    )
    assert left_out == [defaults]
    assert nulls == [defaults]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_round_trip_dump_then_load(tmp_path: Path, fmt: str) -> None:
    job = Machine(
        name="job",
        states=["queued", "running", "done"],
        start=["queued"],
        final=["done"],
        transitions=[
            ("run", "queued", "running"),
            ("requeue", "running", "queued"),
            ("finish", ["queued", "running"], "done"),
        ],
        topic="jobs",
        save_after_step=False,
        uses_global_lock=True,
        lock_lease_seconds=900,
        event_data=False,
    )
    machines = [*load_machines(EXAMPLE), job]
    text = dump_machines(machines, fmt)
    path = tmp_path / f"machines.{fmt}"
    path.write_text(text)
    loaded = load_machines(path)
    assert loaded == machines
    for before, after in zip(machines, loaded, strict=True):
        assert before.to_dict() == after.to_dict()
        assert before.edges == after.edges
    # One machine is written as a bare object, and reads back the same way.
    single = dump_machines(machines[:1], fmt)
    assert "machines" not in (json.loads(single) if fmt == "json" else single.splitlines()[0])
    assert parse_machines(single, fmt=fmt) == machines[:1]
    assert dump_machines(machines, fmt) == text  # deterministic


def test_machine_document_is_to_dict_plus_name() -> None:
    [order] = load_machines(EXAMPLE)
    document = machine_document(order)
    assert next(iter(document)) == "name"
    assert document == {"name": "order", **order.to_dict()}
    assert document["transitions"][4] == {"event": "cancel", "from": ["new", "paid"], "to": "cancelled"}


def test_yaml_aliases_and_comments_are_plain_data() -> None:
    text = BASE_YAML.replace("from: [new, paid]", "from: *active").replace(
        "states: [new, paid, shipped, cancelled]",
        "states: [new, paid, shipped, cancelled]  # four\nactive: &active [new, paid]",
    )
    with pytest.raises(InvalidDefinition, match=r"^order.yaml: active: unknown field"):
        parse_machines(text, fmt="yaml", source="order.yaml")
    text = BASE_YAML.replace("start: [new]", "start: &first [new]").replace(
        "from: new, to: paid", "from: *first, to: paid"
    )
    [machine] = parse_machines(text, fmt="yaml")
    assert machine.target("new", "pay") == "paid"


def test_unreachable_state_is_a_warning_not_an_error(tmp_path: Path) -> None:
    text = yaml_with("states: [new, paid, shipped, cancelled]", "states: [new, paid, shipped, cancelled, limbo, void]")
    with pytest.warns(UnreachableStateWarning, match="limbo"):
        [machine] = parse_machines(text, fmt="yaml")
    assert "limbo" in machine.states
    path = tmp_path / "order.yaml"
    path.write_text(text)
    with pytest.warns(UnreachableStateWarning) as caught:
        load_machines(path)
    [warning] = caught.list
    # one line naming the file, reported at the caller's line (here), not at pyfsm's file and source line
    assert str(warning.message) == (
        f"{path}: machine 'order': states 'limbo', 'void' cannot be reached from its "
        "start state 'new': no instance will ever enter them"
    )
    assert warning.filename == __file__


def test_a_file_without_warnings_gives_none() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_machines(EXAMPLE)


# --- bad files: each error names the field --------------------------------------------------

BAD_INPUT = [
    # (fmt, document, expected fields["field"], expected message after "order.<fmt>: ")
    pytest.param(
        "yaml",
        yaml_with("to: shipped}", "to: shiped}"),
        "transitions[2].to",
        "transitions[2].to: event 'ship' goes to unknown state 'shiped' (line 8)",
        id="unknown-target",
    ),
    pytest.param(
        "json",
        json_with(transitions=transitions_with(2, to="shiped")),
        "transitions[2].to",
        "transitions[2].to: event 'ship' goes to unknown state 'shiped'",
        id="unknown-target-json",
    ),
    pytest.param(
        "yaml",
        yaml_with("from: new, to: paid", "from: nwe, to: paid"),
        "transitions[0].from",
        "transitions[0].from: event 'pay' comes from unknown state 'nwe' (line 6)",
        id="unknown-source",
    ),
    pytest.param(
        "yaml",
        yaml_with("from: [new, paid]", "from: [new, piad]"),
        "transitions[3].from[1]",
        "transitions[3].from[1]: event 'cancel' comes from unknown state 'piad' (line 9)",
        id="unknown-source-in-list",
    ),
    pytest.param(
        "json",
        json_with(options={"lock_lease_seconds": 0}),
        "options.lock_lease_seconds",
        "options.lock_lease_seconds: must be a whole number from 1 to 86400, got 0",
        id="lease-zero",
    ),
    pytest.param(
        "yaml",
        yaml_with("lock_lease_seconds: 60", "lock_lease_seconds: 60.5"),
        "options.lock_lease_seconds",
        "options.lock_lease_seconds: must be a whole number from 1 to 86400, got 60.5 (line 11)",
        id="lease-fraction",
    ),
    pytest.param(
        "json",
        json_with(options={"lock_lease_seconds": True}),
        "options.lock_lease_seconds",
        "options.lock_lease_seconds: must be a whole number from 1 to 86400, got true",
        id="lease-boolean",
    ),
    pytest.param(
        "yaml",
        yaml_with("shipped, cancelled]\nstart", "shipped, 7]\nstart"),
        "states[3]",
        f"states[3]: must be a string, got 7{YAML_HINT} (line 2)",
        id="state-not-string",
    ),
    pytest.param(
        "yaml",
        yaml_with("shipped, cancelled]\nstart", "shipped, no]\nstart"),
        "states[3]",
        f"states[3]: must be a string, got false{YAML_HINT} (line 2)",
        id="yaml-no-is-false",
    ),
    pytest.param(
        "yaml",
        yaml_with("shipped, cancelled]\nstart", "shipped, 2024-01-31]\nstart"),
        "states[3]",
        "states[3]: must be a string, got a date (line 2)",
        id="yaml-date",
    ),
    pytest.param(
        "yaml",
        yaml_with("{event: pay, from: new", "{event: pay, form: new"),
        "transitions[0].form",
        "transitions[0].form: unknown field; expected event, from, to, guard, guard_name (line 6)",
        id="unknown-field",
    ),
    pytest.param(
        "json",
        json_with(colour="red"),
        "colour",
        "colour: unknown field; expected name, states, start, final, transitions, topic, options, timeouts, attach",
        id="unknown-machine-field",
    ),
    pytest.param(
        "yaml",
        yaml_with("lock_lease_seconds: 60", "lease: 60"),
        "options.lease",
        "options.lease: unknown field; expected save_after_step, uses_global_lock, uses_local_lock, "
        "lock_lease_seconds, event_data (line 11)",
        id="unknown-option",
    ),
    pytest.param(
        "yaml",
        yaml_with("start: [new]", "start: new"),
        "start",
        "start: must be a list, got string 'new' (line 3)",
        id="list-expected",
    ),
    pytest.param(
        "json",
        json_with(transitions={"pay": "new"}),
        "transitions",
        "transitions: must be a list, got an object",
        id="list-expected-json",
    ),
    pytest.param(
        "yaml",
        yaml_with("- {event: pay, from: new, to: paid}", "- pay"),
        "transitions[0]",
        "transitions[0]: must be an object (a transition), got string 'pay' (line 6)",
        id="object-expected",
    ),
    pytest.param(
        "json",
        json.dumps({k: v for k, v in BASE.items() if k != "name"}),
        "name",
        "name: required field is missing",
        id="missing-name",
    ),
    pytest.param(
        "yaml",
        yaml_with("transitions:\n", "moves:\n"),
        "moves",
        "moves: unknown field; expected name, states, start, final, transitions, topic, options, timeouts, attach (line 5)",
        id="misspelt-required-field",
    ),
    pytest.param(
        "yaml",
        yaml_with("{event: cancel, from: [new, paid], to: cancelled}", "{event: cancel, from: [new, paid]}"),
        "transitions[3].to",
        "transitions[3].to: required field is missing (line 9)",
        id="missing-to",
    ),
    pytest.param(
        "yaml",
        yaml_with("from: [new, paid]", "from: []"),
        "transitions[3].from",
        "transitions[3].from: must name at least one state (line 9)",
        id="empty-from",
    ),
    pytest.param(
        "yaml",
        yaml_with("start: [new]", "start: [new"),
        "",
        "line 4, column 6: invalid YAML: while parsing a flow sequence, expected ',' or ']', but got ':'",
        id="yaml-syntax",
    ),
    pytest.param(
        "json",
        '{"name": "order",\n  "states": ["new",]\n}',
        "",
        "line 2, column 20: invalid JSON: Expecting value",
        id="json-syntax",
    ),
    pytest.param("yaml", "# only a comment\n", "", "the file is empty", id="empty-yaml"),
    pytest.param("json", " \n", "", "the file is empty", id="empty-json"),
    pytest.param(
        "json",
        "[]",
        "",
        'the top level must be an object: one machine, or {"machines": [...]}, got a list',
        id="top-level-list",
    ),
    pytest.param(
        "yaml",
        "just words\n",
        "",
        "the top level must be an object: one machine, or {\"machines\": [...]}, got string 'just words'",
        id="top-level-string",
    ),
    pytest.param(
        "yaml",
        "!!python/object/apply:os.system ['echo owned']\n",
        "",
        "line 1, column 1: invalid YAML: the tag 'tag:yaml.org,2002:python/object/apply:os.system' is "
        "not allowed: definition files hold plain data only",
        id="python-tag",
    ),
    pytest.param(
        "yaml",
        yaml_with("lock_lease_seconds: 60", "lock_lease_seconds: !!python/name:os.getpid"),
        "",
        "line 11, column 23: invalid YAML: the tag 'tag:yaml.org,2002:python/name:os.getpid' is not "
        "allowed: definition files hold plain data only",
        id="python-tag-nested",
    ),
    pytest.param(
        "yaml",
        yaml_with("options:\n", "on: true\noptions:\n"),
        "",
        f"field names must be strings, got true{YAML_HINT}",
        id="yaml-on-key",
    ),
    pytest.param(
        "yaml",
        yaml_with("final: [shipped, cancelled]", "final: [shipped, cancelled]\nname: other"),
        "name",
        "name: field is given twice, first on line 1 (line 5)",
        id="duplicate-key-yaml",
    ),
    pytest.param(
        "json",
        json.dumps(BASE)[:-1] + ', "options": {"event_data": true}}',
        "options",
        "options: field is given twice",
        id="duplicate-key-json",
    ),
    pytest.param(
        "yaml",
        yaml_with("final: [shipped, cancelled]", "final: [shipped, cancelled, paid]"),
        "transitions[1].from",
        "transitions[1].from: final state 'paid' has outgoing event 'unpay' (line 7)",
        id="final-with-outgoing",
    ),
    pytest.param(
        "yaml",
        yaml_with("options:\n", "  - {event: cancel, from: [paid], to: new}\noptions:\n"),
        "transitions[4].from[0]",
        "transitions[4].from[0]: event 'cancel' from 'paid' is defined twice (first at transitions[3]) (line 10)",
        id="duplicate-edge",
    ),
    pytest.param(
        "yaml",
        yaml_with("start: [new]", "start: [new, old]"),
        "start[1]",
        "start[1]: start names unknown state 'old' (line 3)",
        id="unknown-start",
    ),
    pytest.param(
        "json",
        json_with(final=["shipped", "canceled"]),
        "final[1]",
        "final[1]: final names unknown state 'canceled'",
        id="unknown-final",
    ),
    pytest.param(
        "yaml",
        yaml_with("states: [new, paid,", "states: [new, paid, paid,"),
        "states[2]",
        "states[2]: state 'paid' listed twice (line 2)",
        id="duplicate-state",
    ),
    pytest.param(
        "json",
        json_with(states=["new", "paid", "Shipped", "cancelled"]),
        "states[2]",
        "states[2]: bad state name 'Shipped'",
        id="bad-state-name",
    ),
    pytest.param("json", json_with(states=[]), "states", "states: must not be empty", id="no-states"),
    pytest.param(
        "yaml",
        yaml_with("event: ship", "event: Ship"),
        "transitions[2].event",
        "transitions[2].event: bad event name 'Ship' (line 8)",
        id="bad-event-name",
    ),
    pytest.param(
        "yaml",
        yaml_with("name: order", "name: Order"),
        "name",
        "name: machine name must match [a-z][a-z0-9_]* and have at most 48 characters, got 'Order' (line 1)",
        id="bad-machine-name",
    ),
    pytest.param(
        "json",
        json_with(topic="has spaces"),
        "topic",
        "topic: must be 1-249 characters of [a-zA-Z0-9._-], got string 'has spaces'",
        id="bad-topic",
    ),
    pytest.param("json", json_with(topic=5), "topic", "topic: must be a string, got 5", id="topic-not-string"),
    pytest.param(
        "json",
        json_with(options={"event_data": "yes"}),
        "options.event_data",
        "options.event_data: must be true or false, got string 'yes'",
        id="option-not-boolean",
    ),
    pytest.param(
        "json",
        json_with(options=[]),
        "options",
        "options: must be an object of options, got a list",
        id="options-not-object",
    ),
    pytest.param(
        "json",
        json.dumps({"machines": [BASE, {**BASE, "name": "refund"}, BASE]}),
        "machines[2].name",
        "machines[2].name: machine 'order' is already defined at machines[0]",
        id="duplicate-machine",
    ),
    pytest.param(
        "yaml",
        "machines:\n  - "
        + BASE_YAML.replace("\n", "\n    ").rstrip()
        + "\n  - "
        + BASE_YAML.replace("name: order", "name: refund")
        .replace("to: shipped", "to: shiped")
        .replace("\n", "\n    ")
        .rstrip()
        + "\n",
        "machines[1].transitions[2].to",
        "machines[1].transitions[2].to: event 'ship' goes to unknown state 'shiped' (line 20)",
        id="field-in-second-machine",
    ),
    pytest.param(
        "json",
        json.dumps({"machines": [BASE, "refund"]}),
        "machines[1]",
        "machines[1]: must be an object (a machine), got string 'refund'",
        id="machine-not-object",
    ),
    pytest.param(
        "json", json.dumps({"machines": []}), "machines", "machines: must list at least one machine", id="no-machines"
    ),
    pytest.param(
        "json",
        json.dumps({"machines": [BASE], "version": 2}),
        "version",
        "version: unknown field; a file with 'machines' holds nothing else",
        id="beside-machines",
    ),
    pytest.param("json", "[" * 200_000 + "]" * 200_000, "", "invalid JSON: nested too deeply", id="deep-json"),
    pytest.param("yaml", "[" * 200_000 + "]" * 200_000, "", "invalid YAML: nested too deeply", id="deep-yaml"),
    pytest.param(
        "yaml",
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{b}: &{b} [{', '.join(['*' + a] * 10)}]\n" for a, b in zip("abcdef", "bcdefg", strict=True)),
        "",
        "aliases expand to more than 1,000,000 values; write the definition out instead",
        id="alias-bomb",
    ),
    pytest.param(
        "yaml",
        "a: &a [*a]\n",
        "",
        "line 1: an alias refers to a node that contains it (a recursive document)",
        id="recursive-alias",
    ),
]


@pytest.mark.parametrize(("fmt", "text", "field", "message"), BAD_INPUT)
def test_bad_input_names_the_field(fmt: str, text: str, field: str, message: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableStateWarning)
        with pytest.raises(InvalidDefinition) as caught:
            parse_machines(text, fmt=fmt, source=f"order.{fmt}")
    assert str(caught.value) == f"order.{fmt}: {message}"
    assert caught.value.fields["field"] == field
    assert caught.value.errno == 31001


def test_machine_errors_carry_the_machine_and_line() -> None:
    with pytest.raises(InvalidDefinition) as caught:
        parse_machines(yaml_with("to: shipped}", "to: shiped}"), fmt="yaml", source="order.yaml")
    assert caught.value.machine == "order"
    assert caught.value.fields == {"field": "transitions[2].to", "source": "order.yaml", "line": 8}
    assert isinstance(caught.value.__cause__, InvalidDefinition)  # Machine's own error, kept for debugging


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "order.yaml"
    path.write_text(yaml_with("to: shipped}", "to: shiped}"))
    with pytest.raises(InvalidDefinition, match=r"^.*order\.yaml: transitions\[2\]\.to: ") as caught:
        load_machines(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_file_larger_than_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    with pytest.raises(InvalidDefinition) as caught:
        load_machines(path)
    assert (
        str(caught.value) == f"{path}: the file is larger than 1,048,576 bytes (1 MiB), the limit for definition files"
    )
    path.write_bytes(json.dumps(BASE).encode().ljust(MAX_FILE_BYTES))  # exactly at the limit is fine
    assert load_machines(path)[0].name == "order"
    with pytest.raises(InvalidDefinition, match="larger than"):
        parse_machines("é" * (MAX_FILE_BYTES // 2 + 1), fmt="yaml")  # counted in UTF-8 bytes, not characters


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(BASE_YAML.replace("name: order", "name: caf\xe9").encode("latin-1"))
    with pytest.raises(InvalidDefinition) as caught:
        load_machines(path)
    assert str(caught.value) == f"{path}: not UTF-8 text (bad byte at offset 9)"


def test_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(BASE).encode())
    assert load_machines(path)[0].name == "order"


def test_suffix_and_unreadable_files_are_argument_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"order\.txt: definition files must end in \.json, \.yaml or \.yml"):
        load_machines(tmp_path / "order.txt")
    with pytest.raises(InvalidArgument, match="cannot read definition file: No such file or directory"):
        load_machines(tmp_path / "missing.yaml")
    with pytest.raises(InvalidArgument, match="format must be 'json' or 'yaml', got 'xml'"):
        parse_machines("{}", fmt="xml")
    with pytest.raises(InvalidArgument, match="given twice"):
        dump_machines(load_machines(EXAMPLE) * 2, "json")
    with pytest.raises(InvalidArgument, match="no machines"):
        dump_machines([], "yaml")


def test_yaml_without_pyyaml_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # makes `import yaml` raise ImportError
    with pytest.raises(InvalidDefinition) as caught:
        load_machines(EXAMPLE)
    assert str(caught.value) == f"{EXAMPLE}: YAML definition files need PyYAML: pip install 'pyfsm-mysql[yaml]'"
    assert parse_machines(ORDER_JSON, fmt="json")[0].name == "order"  # JSON needs nothing extra
