"""State timeouts in machine definitions (issue 28): the forms accepted, the refusals and
their messages, the JSON body, and definition files. Pure tests: no database.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pyfsm import InvalidDefinition, Machine, Timeout
from pyfsm.definition_file import dump_machines, load_machines, machine_document, parse_machines
from pyfsm.limits import MAX_DELAY_SECONDS, MAX_TIMEOUT_SECONDS
from pyfsm.reporting.reads import BODY_KEYS

SPEC: dict[str, Any] = {
    "name": "order",
    "states": ["new", "paid", "shipped", "cancelled"],
    "start": ["new"],
    "final": ["shipped", "cancelled"],
    "transitions": [("pay", "new", "paid"), ("ship", "paid", "shipped"), ("cancel", ["new", "paid"], "cancelled")],
}


def make(timeouts: Any) -> Machine:
    return Machine(**SPEC, timeouts=timeouts)


# --- accepted forms --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "seconds"),
    [
        (1, 1),
        (1800, 1800),
        (MAX_TIMEOUT_SECONDS, 999_999_999),
        ("45s", 45),
        ("30m", 1800),
        ("12h", 43200),
        ("2d", 172800),
        ("1s", 1),
        ("007m", 420),
        ("999999999s", MAX_TIMEOUT_SECONDS),
        ("11574d", 11574 * 86400),
        (timedelta(minutes=30), 1800),
        (timedelta(days=2, seconds=5), 172805),
        (timedelta(seconds=1), 1),
    ],
)
def test_every_duration_form_becomes_int_seconds(after: Any, seconds: int) -> None:
    assert MAX_TIMEOUT_SECONDS == MAX_DELAY_SECONDS
    timeout = Timeout(after, "cancel")
    assert timeout.after == timeout.seconds == seconds and type(timeout.after) is int
    for given in (
        timeout,
        Timeout(after=after, event="cancel"),
        {"after": after, "event": "cancel"},
        (after, "cancel"),
        [after, "cancel"],
    ):
        machine = make({"new": given})
        assert machine.timeout("new") == Timeout(seconds, "cancel")
        assert machine.timeouts == {"new": Timeout(seconds, "cancel")}


def test_timeouts_are_kept_in_the_order_of_states_and_are_read_only() -> None:
    machine = make({"paid": ("2d", "ship"), "new": Timeout("30m", "cancel")})
    assert list(machine.timeouts) == ["new", "paid"]
    assert machine.timeout("paid") == Timeout(172800, "ship")
    assert machine.timeout("shipped") is None and machine.timeout("nowhere") is None
    assert machine.timeout(["new"]) is None  # type: ignore[arg-type]  # unhashable: None, never a TypeError
    with pytest.raises(TypeError):
        machine.timeouts["shipped"] = Timeout(1, "x")  # type: ignore[index]
    assert Timeout("30m", "cancel") == Timeout(1800, "cancel") == Timeout(timedelta(minutes=30), "cancel")


def test_no_timeouts_by_default() -> None:
    machine = Machine(**SPEC)
    assert machine.timeouts == {} and machine.timeout("new") is None
    assert machine == make({})


def test_a_machine_with_timeouts_stays_a_value() -> None:
    machine = make({"new": ("30m", "cancel")})
    assert machine != Machine(**SPEC) and machine != make({"new": ("31m", "cancel")})
    assert machine == make({"new": {"after": 1800, "event": "cancel"}})
    assert hash(machine) == hash(make({"new": Timeout(1800, "cancel")}))
    assert pickle.loads(pickle.dumps(machine)) == machine  # noqa: S301  # our own bytes
    assert copy.deepcopy(machine) == machine
    moved = dataclasses.replace(machine, topic="orders")  # passes the checked timeouts back in
    assert moved.timeout("new") == Timeout(1800, "cancel") and moved.topic == "orders"
    assert repr(machine).endswith("timeouts={'new': Timeout(after=1800, event='cancel')})")


# --- refusals --------------------------------------------------------------------------------

PREFIX = "invalid definition of 'order': "

REFUSED = [
    # (timeouts, message after PREFIX, state, part)
    pytest.param(
        {"nowhere": (60, "cancel")}, "timeouts names unknown state 'nowhere'", "nowhere", None, id="unknown-state"
    ),
    pytest.param(
        {5: (60, "cancel")}, "timeouts names 5, which is not a state name (a string)", "5", None, id="state-not-string"
    ),
    pytest.param(
        {"shipped": (60, "cancel")},
        "final state 'shipped' cannot have a timeout: no event leaves a final state",
        "shipped",
        None,
        id="final-state",
    ),
    pytest.param(
        {"new": (60, "ship")},
        "timeout of state 'new': event 'ship' is not allowed from 'new' (its events: pay, cancel)",
        "new",
        "event",
        id="event-not-allowed",
    ),
    pytest.param(
        {"new": (60, "Cancel")},
        "timeout of state 'new': event 'Cancel' is not allowed from 'new' (its events: pay, cancel)",
        "new",
        "event",
        id="event-bad-name",
    ),
    pytest.param(
        {"new": (60, 5)},
        "timeout of state 'new': event must be an event name (a string), got 5",
        "new",
        "event",
        id="event-not-string",
    ),
    pytest.param(
        {"new": (0, "cancel")},
        "timeout of state 'new': after must be from 1 second to 999999999 seconds (about 31 years), got 0",
        "new",
        "after",
        id="zero",
    ),
    pytest.param(
        {"new": (-60, "cancel")},
        "timeout of state 'new': after must be from 1 second to 999999999 seconds (about 31 years), got -60",
        "new",
        "after",
        id="negative",
    ),
    pytest.param(
        {"new": (1_000_000_000, "cancel")},
        "timeout of state 'new': after must be from 1 second to 999999999 seconds (about 31 years), got 1000000000",
        "new",
        "after",
        id="too-large",
    ),
    pytest.param(
        {"new": ("11575d", "cancel")},
        "timeout of state 'new': after must be from 1 second to 999999999 seconds (about 31 years), got '11575d'",
        "new",
        "after",
        id="too-large-days",
    ),
    pytest.param(
        {"new": ("1" * 5000 + "d", "cancel")},
        "timeout of state 'new': after must be from 1 second to 999999999 seconds (about 31 years), "
        f"got '{'1' * 79}...",
        "new",
        "after",
        id="huge-digit-string",
    ),
    pytest.param(
        {"new": ("0m", "cancel")},
        "timeout of state 'new': after must be from 1 second to 999999999 seconds (about 31 years), got '0m'",
        "new",
        "after",
        id="zero-minutes",
    ),
    pytest.param(
        {"new": (timedelta(0), "cancel")},
        "timeout of state 'new': after must be from 1 second to 999999999 seconds (about 31 years), "
        "got datetime.timedelta(0)",
        "new",
        "after",
        id="zero-timedelta",
    ),
    pytest.param(
        {"new": (timedelta(seconds=-1), "cancel")},
        "timeout of state 'new': after must be from 1 second to 999999999 seconds (about 31 years), "
        "got datetime.timedelta(days=-1, seconds=86399)",
        "new",
        "after",
        id="negative-timedelta",
    ),
    pytest.param(
        {"new": (timedelta(seconds=1.5), "cancel")},
        "timeout of state 'new': after must be whole seconds, without a fraction of a second, "
        "got datetime.timedelta(seconds=1, microseconds=500000)",
        "new",
        "after",
        id="fractional-timedelta",
    ),
    *(
        pytest.param(
            {"new": (text, "cancel")},
            "timeout of state 'new': after must be a whole number and a unit s, m, h or d, without spaces "
            f"(e.g. '45s', '30m', '12h', '2d'), got {text!r}",
            "new",
            "after",
            id=f"bad-duration-{text}",
        )
        for text in ("30x", "30 m", " 30m", "30M", "1800", "-5m", "1.5h", "m", "", "30m5s", "3\u0660m")
    ),
    *(
        pytest.param(
            {"new": (value, "cancel")},
            "timeout of state 'new': after must be whole seconds: an integer, a string such as '30m' "
            f"(units s, m, h, d) or a timedelta, got {value!r}",
            "new",
            "after",
            id=f"bad-type-{value!r}",
        )
        for value in (1.5, 1800.0, True, None, [1800])
    ),
    pytest.param(
        {"new": {"after": 60, "event": "cancel", "when": "later"}},
        "timeout of state 'new': unknown key 'when'; expected after, event",
        "new",
        "when",
        id="unknown-key",
    ),
    pytest.param(
        {"new": {"event": "cancel"}}, "timeout of state 'new': after is missing", "new", "after", id="missing-after"
    ),
    pytest.param(
        {"new": {"after": 60}}, "timeout of state 'new': event is missing", "new", "event", id="missing-event"
    ),
    pytest.param(
        {"new": 60},
        "timeout of state 'new' must be a Timeout, {'after': ..., 'event': ...} or (after, event), got 60",
        "new",
        None,
        id="not-a-timeout",
    ),
    pytest.param(
        {"new": (60, "cancel", "again")},
        "timeout of state 'new' must be a Timeout, {'after': ..., "
        "'event': ...} or (after, event), got (60, 'cancel', 'again')",
        "new",
        None,
        id="three-items",
    ),
    pytest.param(
        [("new", (60, "cancel"))],
        "timeouts must be a mapping of state name to timeout, got list",
        None,
        None,
        id="not-a-mapping",
    ),
    pytest.param(None, "timeouts must be a mapping of state name to timeout, got NoneType", None, None, id="none"),
]


@pytest.mark.parametrize(("timeouts", "message", "state", "part"), REFUSED)
def test_refusals_name_the_state_and_the_problem(
    timeouts: Any, message: str, state: str | None, part: str | None
) -> None:
    with pytest.raises(InvalidDefinition) as caught:
        make(timeouts)
    assert caught.value.errno == 31001
    assert str(caught.value) == PREFIX + message
    assert caught.value.machine == "order" and caught.value.state == state
    assert caught.value.fields["field"] == "timeouts" and caught.value.fields.get("part") == part


def test_a_state_without_events_cannot_have_a_timeout() -> None:
    with pytest.raises(InvalidDefinition) as caught:
        Machine(
            name="door",
            states=["shut", "stuck"],
            start=["shut"],
            transitions=[("jam", "shut", "stuck")],
            timeouts={"stuck": ("1h", "jam")},
        )
    assert str(caught.value) == (
        "invalid definition of 'door': timeout of state 'stuck': event 'jam' is not "
        "allowed from 'stuck' (no event leaves it)"
    )


@pytest.mark.parametrize(
    ("after", "event", "message"),
    [
        (
            "30x",
            "cancel",
            "after must be a whole number and a unit s, m, h or d, without spaces "
            "(e.g. '45s', '30m', '12h', '2d'), got '30x'",
        ),
        (0, "cancel", "after must be from 1 second to 999999999 seconds (about 31 years), got 0"),
        (
            timedelta(milliseconds=1),
            "cancel",
            "after must be whole seconds, without a fraction of a second, got datetime.timedelta(microseconds=1000)",
        ),
        (60, None, "event must be an event name (a string), got None"),
    ],
)
def test_a_bad_timeout_is_refused_when_it_is_built(after: Any, event: Any, message: str) -> None:
    with pytest.raises(InvalidDefinition) as caught:
        Timeout(after, event)
    assert str(caught.value) == message and caught.value.errno == 31001


# --- the JSON body ---------------------------------------------------------------------------


def test_to_dict_without_timeouts_is_the_body_of_today() -> None:
    machine = Machine(name="door", states=["shut", "open"], start=["shut"], transitions=[("push", "shut", "open")])
    assert "timeouts" not in machine.to_dict()
    assert "timeouts" not in make({}).to_dict()
    # The body before timeouts existed, byte for byte: defining it again changes no version.
    assert machine.to_json() == (
        '{"states":["shut","open"],"start":["shut"],"final":[],"transitions":[{"event":"push","from":["shut"],'
        '"to":"open"}],"topic":null,"options":{"save_after_step":true,"uses_global_lock":false,'
        '"uses_local_lock":false,"lock_lease_seconds":60,"event_data":true}}'
    )


def test_to_dict_with_timeouts_gives_int_seconds_in_the_order_of_states() -> None:
    machine = make({"paid": {"after": "2d", "event": "ship"}, "new": (timedelta(minutes=30), "cancel")})
    body = machine.to_dict()
    assert list(body) == ["states", "start", "final", "transitions", "topic", "options", "timeouts"]
    assert json.dumps(body["timeouts"]) == (
        '{"new": {"after": 1800, "event": "cancel"}, "paid": {"after": 172800, "event": "ship"}}'
    )
    assert {k: v for k, v in body.items() if k != "timeouts"} == Machine(**SPEC).to_dict()


def test_a_stored_body_reads_back_as_the_same_machine() -> None:
    machine = make({"paid": ("2d", "ship"), "new": ("30m", "cancel")})
    body = json.loads(machine.to_json())  # what fsm_define stores and fsm_definition_v1 returns
    [again] = parse_machines(json.dumps({"name": "order", **body}), fmt="json", source="the stored definition")
    assert again == machine and again.to_json() == machine.to_json()
    assert again.timeout("paid") == Timeout(172800, "ship")


def test_the_reporting_read_keeps_every_key_of_the_body() -> None:
    body = make({"new": ("30m", "cancel")}).to_dict()
    assert set(body) <= set(BODY_KEYS)


# --- definition files ------------------------------------------------------------------------

#: Line numbers matter: the expected YAML messages end with "(line N)".
BASE_YAML = """\
name: order
states: [new, paid, shipped, cancelled]
start: [new]
final: [shipped, cancelled]
transitions:
  - {event: pay, from: new, to: paid}
  - {event: ship, from: paid, to: shipped}
  - {event: cancel, from: [new, paid], to: cancelled}
timeouts:
  new: {after: 30m, event: cancel}
  paid:
    after: 172800
    event: ship
"""

BASE_JSON: dict[str, Any] = {
    "name": "order",
    "states": SPEC["states"],
    "start": ["new"],
    "final": ["shipped", "cancelled"],
    "transitions": [
        {"event": "pay", "from": "new", "to": "paid"},
        {"event": "ship", "from": "paid", "to": "shipped"},
        {"event": "cancel", "from": ["new", "paid"], "to": "cancelled"},
    ],
    "timeouts": {"new": {"after": "30m", "event": "cancel"}, "paid": {"after": 172800, "event": "ship"}},
}

EXPECTED = make({"new": ("30m", "cancel"), "paid": ("2d", "ship")})


def yaml_with(old: str, new: str) -> str:
    assert BASE_YAML.count(old) == 1, old
    return BASE_YAML.replace(old, new)


def json_with(**timeouts: Any) -> str:
    return json.dumps({**BASE_JSON, "timeouts": timeouts})


def test_yaml_and_json_files_with_timeouts(tmp_path: Path) -> None:
    (tmp_path / "order.yaml").write_text(BASE_YAML)
    (tmp_path / "order.json").write_text(json.dumps(BASE_JSON))
    assert load_machines(tmp_path / "order.yaml") == load_machines(tmp_path / "order.json") == [EXPECTED]
    [machine] = parse_machines(yaml_with("after: 30m", 'after: "45s"'), fmt="yaml")
    assert machine.timeout("new") == Timeout(45, "cancel")


@pytest.mark.parametrize("empty", ["timeouts: null\n", "timeouts: {}\n", ""])
def test_a_file_without_timeouts(empty: str) -> None:
    text = BASE_YAML[: BASE_YAML.index("timeouts:")] + empty
    [machine] = parse_machines(text, fmt="yaml")
    assert machine == Machine(**SPEC) and "timeouts" not in machine.to_dict()
    assert "timeouts" not in machine_document(machine)


def test_several_machines_with_timeouts() -> None:
    text = (
        "machines:\n  - "
        + BASE_YAML.replace("\n", "\n    ").rstrip()
        + "\n  - "
        + BASE_YAML.replace("name: order", "name: refund")
        .replace("event: ship\n", "event: cancel\n")
        .replace("\n", "\n    ")
        .rstrip()
    )
    order, refund = parse_machines(text + "\n", fmt="yaml")
    assert order == EXPECTED and refund.timeout("paid") == Timeout(172800, "cancel")
    head, tail = text.rsplit("after: 172800", 1)  # the second machine's
    with pytest.raises(InvalidDefinition) as caught:
        parse_machines(f"{head}after: 0{tail}\n", fmt="yaml", source="m.yaml")
    assert str(caught.value) == (
        "m.yaml: machines[1].timeouts.paid.after: must be from 1 second to 999999999 "
        "seconds (about 31 years), got 0 (line 26)"
    )
    assert caught.value.fields["field"] == "machines[1].timeouts.paid.after" and caught.value.machine == "refund"


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_dump_then_load_keeps_the_timeouts(tmp_path: Path, fmt: str) -> None:
    other = Machine(
        name="ticket",
        states=["open", "closed"],
        start=["open"],
        final=["closed"],
        transitions=[("close", "open", "closed")],
    )
    text = dump_machines([EXPECTED, other], fmt)
    path = tmp_path / f"machines.{fmt}"
    path.write_text(text)
    assert load_machines(path) == [EXPECTED, other]
    if fmt == "yaml":
        lines = [line.strip() for line in text.splitlines()]
        start = lines.index("timeouts:")  # one short line per state
        assert lines[start + 1 : start + 3] == [
            "new: {after: 1800, event: cancel}",
            "paid: {after: 172800, event: ship}",
        ]
        assert text.count("timeouts:") == 1  # the machine without any writes no section


YAML_HINT = " (YAML reads unquoted yes/no/on/off/null and numbers as non-strings: put it in quotes)"
RANGE = "must be from 1 second to 999999999 seconds (about 31 years)"
FORMAT = "must be a whole number and a unit s, m, h or d, without spaces (e.g. '45s', '30m', '12h', '2d')"
TYPE = "must be whole seconds (an integer) or a number and a unit s, m, h or d (e.g. 30m)"


def with_timeouts(section: str) -> str:
    """BASE_YAML with its timeouts section (from line 9 on) replaced."""
    return BASE_YAML[: BASE_YAML.index("timeouts:")] + textwrap.dedent(section)


def json_raw(timeouts: str) -> str:
    return json.dumps({k: v for k, v in BASE_JSON.items() if k != "timeouts"})[:-1] + f', "timeouts": {timeouts}}}'


BAD_FILES = [
    # (fmt, document, expected fields["field"], expected message after "order.<fmt>: ")
    pytest.param(
        "yaml",
        with_timeouts("timeouts: [new]\n"),
        "timeouts",
        "timeouts: must be an object of timeouts by state, e.g. {new: {after: 30m, event: cancel}}, "
        "got a list (line 9)",
        id="not-an-object",
    ),
    pytest.param(
        "json",
        json.dumps({**BASE_JSON, "timeouts": "30m"}),
        "timeouts",
        "timeouts: must be an object of timeouts by state, e.g. {new: {after: 30m, event: cancel}}, got string '30m'",
        id="not-an-object-json",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  no: {after: 30m, event: cancel}\n"),
        "timeouts",
        f"timeouts: field names must be strings, got false{YAML_HINT} (line 9)",
        id="state-not-string",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  nwe: {after: 30m, event: cancel}\n"),
        "timeouts.nwe",
        "timeouts.nwe: timeouts names unknown state 'nwe' (line 10)",
        id="unknown-state",
    ),
    pytest.param(
        "json",
        json_with(**{"Bad State": {"after": 60, "event": "cancel"}}),
        "timeouts['Bad State']",
        "timeouts['Bad State']: timeouts names unknown state 'Bad State'",
        id="unknown-odd-state-json",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  shipped: {after: 30m, event: cancel}\n"),
        "timeouts.shipped",
        "timeouts.shipped: final state 'shipped' cannot have a timeout: no event leaves a final state (line 10)",
        id="final-state",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: 30m\n"),
        "timeouts.new",
        "timeouts.new: must be an object (a timeout: after, event), got string '30m' (line 10)",
        id="entry-not-object",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: 30m, event: cancel, when: later}\n"),
        "timeouts.new.when",
        "timeouts.new.when: unknown field; expected after, event (line 10)",
        id="unknown-field",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {event: cancel}\n"),
        "timeouts.new.after",
        "timeouts.new.after: required field is missing (line 10)",
        id="missing-after",
    ),
    pytest.param(
        "json",
        json_with(new={"after": 60}),
        "timeouts.new.event",
        "timeouts.new.event: required field is missing",
        id="missing-event-json",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: 1.5, event: cancel}\n"),
        "timeouts.new.after",
        f"timeouts.new.after: {TYPE}, got 1.5 (line 10)",
        id="after-fraction",
    ),
    pytest.param(
        "json",
        json_with(new={"after": 1800.0, "event": "cancel"}),
        "timeouts.new.after",
        f"timeouts.new.after: {TYPE}, got 1800.0",
        id="after-float-json",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: yes, event: cancel}\n"),
        "timeouts.new.after",
        f"timeouts.new.after: {TYPE}, got true (line 10)",
        id="after-boolean",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: null, event: cancel}\n"),
        "timeouts.new.after",
        f"timeouts.new.after: {TYPE}, got null (line 10)",
        id="after-null",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: 30x, event: cancel}\n"),
        "timeouts.new.after",
        f"timeouts.new.after: {FORMAT}, got string '30x' (line 10)",
        id="after-bad-unit",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: 30 m, event: cancel}\n"),
        "timeouts.new.after",
        f"timeouts.new.after: {FORMAT}, got string '30 m' (line 10)",
        id="after-with-space",
    ),
    pytest.param(
        "json",
        json_with(new={"after": "1800", "event": "cancel"}),
        "timeouts.new.after",
        f"timeouts.new.after: {FORMAT}, got string '1800'",
        id="after-digits-as-string-json",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: 0, event: cancel}\n"),
        "timeouts.new.after",
        f"timeouts.new.after: {RANGE}, got 0 (line 10)",
        id="after-zero",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: -5, event: cancel}\n"),
        "timeouts.new.after",
        f"timeouts.new.after: {RANGE}, got -5 (line 10)",
        id="after-negative",
    ),
    pytest.param(
        "json",
        json_with(new={"after": 1_000_000_000, "event": "cancel"}),
        "timeouts.new.after",
        f"timeouts.new.after: {RANGE}, got 1000000000",
        id="after-too-large-json",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: 11575d, event: cancel}\n"),
        "timeouts.new.after",
        f"timeouts.new.after: {RANGE}, got string '11575d' (line 10)",
        id="after-too-many-days",
    ),
    pytest.param(
        "yaml",
        yaml_with("after: 172800", "after: 0"),
        "timeouts.paid.after",
        f"timeouts.paid.after: {RANGE}, got 0 (line 12)",
        id="after-in-block-style",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: 30m, event: 5}\n"),
        "timeouts.new.event",
        f"timeouts.new.event: must be a string, got 5{YAML_HINT} (line 10)",
        id="event-not-string",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: 30m, event: ship}\n"),
        "timeouts.new.event",
        "timeouts.new.event: event 'ship' is not allowed from 'new' (its events: pay, cancel) (line 10)",
        id="event-not-allowed",
    ),
    pytest.param(
        "yaml",
        yaml_with("event: ship\n", "event: pay\n"),
        "timeouts.paid.event",
        "timeouts.paid.event: event 'pay' is not allowed from 'paid' (its events: ship, cancel) (line 13)",
        id="event-not-allowed-block-style",
    ),
    pytest.param(
        "yaml",
        with_timeouts("timeouts:\n  new: {after: 30m, event: cancel}\n  new: {after: 1h, event: cancel}\n"),
        "timeouts.new",
        "timeouts.new: field is given twice, first on line 10 (line 11)",
        id="state-twice-yaml",
    ),
    pytest.param(
        "json",
        json_raw('{"new": {"after": 60, "event": "cancel"}, "new": {"after": 61, "event": "cancel"}}'),
        "timeouts.new",
        "timeouts.new: field is given twice",
        id="state-twice-json",
    ),
    pytest.param(
        "json",
        json_raw('{"new": {"after": 60, "after": 61, "event": "cancel"}}'),
        "timeouts.new.after",
        "timeouts.new.after: field is given twice",
        id="after-twice-json",
    ),
]


@pytest.mark.parametrize(("fmt", "text", "field", "message"), BAD_FILES)
def test_bad_timeouts_in_a_file_name_the_field(fmt: str, text: str, field: str, message: str) -> None:
    with pytest.raises(InvalidDefinition) as caught:
        parse_machines(text, fmt=fmt, source=f"order.{fmt}")
    assert str(caught.value) == f"order.{fmt}: {message}"
    assert caught.value.fields["field"] == field
    assert caught.value.errno == 31001


def test_a_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "order.yaml"
    path.write_text(with_timeouts("timeouts:\n  new: {after: 2 days, event: cancel}\n"))
    with pytest.raises(InvalidDefinition) as caught:
        load_machines(path)
    assert str(caught.value) == f"{path}: timeouts.new.after: {FORMAT}, got string '2 days' (line 10)"
    assert caught.value.fields == {"field": "timeouts.new.after", "source": str(path), "line": 10}
    assert isinstance(caught.value.__cause__, InvalidDefinition)  # Machine's own error, kept for debugging
