"""Diagrams after a new definition version renamed or dropped a state (issue 46, item 3):
one instance's history drawn in the terms of the version it follows, a type's counts split into
the drawn states and the others, and Graphviz said missing only when it is."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pyfsm.definition import Machine
from pyfsm.errors import InvalidArgument
from pyfsm.reporting.diagram import (
    GraphvizUnavailable,
    dot,
    drawn_counts,
    drawn_path,
    graphviz_missing,
    mermaid,
    render,
)

V2 = Machine(
    name="shop_order",
    states=["new", "paid", "boxed", "shipped"],
    start=["new"],
    final=["shipped"],
    transitions=[("pay", "new", "paid"), ("pack", "paid", "boxed"), ("ship", "boxed", "shipped")],
)


def test_a_move_to_a_newer_version_is_no_step_and_takes_the_new_name() -> None:
    # created, pay, pack (v1's packed), moved to v2 as boxed, ship
    visits = [("new", False), ("paid", False), ("packed", False), ("boxed", True), ("shipped", False)]
    assert drawn_path(V2, visits) == ["new", "paid", "boxed", "shipped"]
    text = mermaid(V2, path=drawn_path(V2, visits))
    assert "    s_paid --> s_boxed: pack ★ step 2" in text.splitlines()
    assert "    s_boxed --> s_shipped: ship ★ step 3" in text.splitlines()


def test_a_state_the_version_lacks_is_a_gap_no_step_crosses() -> None:
    # v1 had review between new and paid; v2 dropped it: new -> paid is not what happened
    visits = [("new", False), ("review", False), ("paid", False)]
    path = drawn_path(V2, visits)
    assert path == ["new", None, "paid"]
    lines = mermaid(V2, path=path).splitlines()
    assert "    s_new --> s_paid: pay" in lines  # not marked
    assert "    class s_new,s_paid onpath" in lines
    assert "step" not in dot(V2, path=path)
    # the steps keep their numbers across the gap
    after = mermaid(V2, path=[*path, "boxed"]).splitlines()
    assert "    s_paid --> s_boxed: pack ★ step 3" in after


def test_a_state_neither_version_has_is_still_refused_as_a_path() -> None:
    with pytest.raises(InvalidArgument, match="path names 'packed', not a state of machine 'shop_order'"):
        mermaid(V2, path=["new", "packed"])


def test_counts_split_into_the_drawn_states_and_the_others() -> None:
    drawn, others = drawn_counts(V2, {"packed": 2, "shipped": 5, "boxed": 3, "gone": 0, "new": 0})
    assert list(drawn.items()) == [("new", 0), ("boxed", 3), ("shipped", 5)]  # definition order
    assert others == {"packed": 2}  # an empty state of no version is left out
    assert "boxed\\n(3)" in dot(V2, state_counts=drawn)


def test_graphviz_is_said_missing_only_when_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\necho 'Error: <stdin>: syntax error in line 1' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert graphviz_missing() is None
    with pytest.raises(GraphvizUnavailable) as failed:  # installed, and it failed: its own words
        render(dot(V2), "svg")
    assert "not installed" not in str(failed.value) and "syntax error in line 1" in str(failed.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    missing = graphviz_missing()
    assert missing is not None and missing.startswith("Graphviz is not installed (no 'dot' program found)")
    with pytest.raises(GraphvizUnavailable, match="Graphviz is not installed"):
        render(dot(V2), "svg")
    monkeypatch.setenv("PATH", os.devnull)  # a file where a folder should be: still not installed
    with pytest.raises(GraphvizUnavailable, match="Graphviz is not installed"):
        render(dot(V2), "svg")
