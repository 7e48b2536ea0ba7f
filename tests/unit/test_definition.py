"""Machine definitions are validated in Python before any database is involved."""

from __future__ import annotations

import warnings

import pytest

from pyfsm import InvalidDefinition, Machine, UnreachableStateWarning


def make(**overrides: object) -> Machine:
    spec: dict[str, object] = {
        "name": "order",
        "states": ["new", "paid", "done"],
        "start": ["new"],
        "final": ["done"],
        "transitions": [("pay", "new", "paid"), ("finish", ["new", "paid"], "done")],
    }
    spec.update(overrides)
    return Machine(**spec)  # type: ignore[arg-type]


def test_valid_machine_answers_queries() -> None:
    m = make()
    assert m.target("new", "pay") == "paid" and m.target("paid", "pay") is None
    assert m.events_from("new") == ["pay", "finish"]
    assert m.to_dict()["transitions"][1] == {"event": "finish", "from": ["new", "paid"], "to": "done"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "Order"}, "name"),
        ({"name": "x`; DROP TABLE t; --"}, "name"),
        ({"name": "machines"}, "name"),
        ({"states": []}, "states"),
        ({"states": ["new", "new", "paid", "done"]}, "states"),
        ({"states": ["new", "Paid", "done"]}, "states"),
        ({"start": []}, "start"),
        ({"start": ["nowhere"]}, "start"),
        ({"final": ["nowhere"]}, "final"),
        ({"transitions": [("pay", "new", "nowhere")]}, "transitions"),
        ({"transitions": [("pay", "nowhere", "paid")]}, "transitions"),
        ({"transitions": [("pay", "new", "paid"), ("pay", "new", "done")]}, "transitions"),
        ({"transitions": [("pay", "new", "paid"), ("back", "done", "new")]}, "transitions"),
        ({"transitions": [("Bad Event", "new", "paid")]}, "transitions"),
        ({"transitions": [("pay", [], "paid")]}, "transitions"),
        ({"topic": "has space"}, "topic"),
        ({"save_after_step": "yes"}, "save_after_step"),
    ],
)
def test_invalid_definitions_name_the_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidDefinition) as info:
        make(**overrides)
    assert info.value.errno == 31001
    assert info.value.fields["field"] == field


def test_unreachable_state_warns() -> None:
    with pytest.warns(UnreachableStateWarning, match="island") as caught:
        make(states=["new", "paid", "done", "island"])
    [warning] = caught.list
    # one self-contained line, reported at the caller's line (here), not pyfsm's own file
    assert str(warning.message) == (
        "machine 'order': state 'island' cannot be reached from its start state 'new': no instance will ever enter it"
    )
    assert warning.filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make()
