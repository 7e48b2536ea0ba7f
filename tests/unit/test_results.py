"""The Store's results are frozen dataclasses; those that were dicts before 0.3.0 still answer
``result["field"]`` and ``.get()`` with a DeprecationWarning, and ``to_dict()`` gives the old dict."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from pyfsm.models import PauseResult, StatePeriod, StoredDefinition, TransitionResult, TypeStats

STATS_ROW = {
    "machine": "order",
    "current_version": 2,
    "instances": 5,
    "running": 1,
    "idle": 0,
    "waiting": 1,
    "paused": 0,
    "failed": 1,
    "completed": 2,
    "due": 1,
    "claimed": 0,
    "unpublished": 3,
    "oldest_unpublished_at": None,
}


def test_a_result_is_typed_frozen_and_built_from_its_row() -> None:
    stats = TypeStats.from_row({**STATS_ROW, "an_extra_column": 1})  # a newer procedure may add columns
    assert (stats.machine, stats.instances, stats.failed) == ("order", 5, 1)
    assert stats.to_dict() == STATS_ROW
    older = {k: v for k, v in STATS_ROW.items() if k != "idle"}  # fsm_stats_v2's row: no idle column
    assert TypeStats.from_row(older).idle == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.instances = 6  # type: ignore[misc]


def test_a_send_result_made_without_init_is_the_same_as_one_made_by_it() -> None:
    """TransitionResult.from_send_row fills the fields in one step (the send path's cost):
    what it makes must be indistinguishable from ``__init__``'s result."""
    row = {"transition_id": 7, "instance_id": 3, "from_state": "a", "to_state": "b", "version": 4}
    made = TransitionResult.from_send_row({**row, "status": "idle", "created": 0, "replayed": 1}, "k1", "go")
    built = TransitionResult(
        transition_id=7,
        instance_id=3,
        key="k1",
        event="go",
        from_state="a",
        to_state="b",
        sort_key=4,
        version=4,
        status="idle",
        created=False,
        replayed=True,
    )
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert dataclasses.asdict(made) == dataclasses.asdict(built)
    assert list(vars(made)) == [f.name for f in dataclasses.fields(TransitionResult)]
    assert made.created is False and made.replayed is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.to_state = "c"  # type: ignore[misc]


def test_indexing_still_works_with_a_deprecation_warning() -> None:
    paused = PauseResult("charge", "running", True)
    with pytest.warns(DeprecationWarning, match=r"PauseResult\['status'\] is deprecated.*use \.status"):
        assert paused["status"] == "running"
    with pytest.warns(DeprecationWarning):
        assert paused.get("pending") is True
    assert paused.get("missing", "default") == "default"
    with pytest.warns(DeprecationWarning), pytest.raises(KeyError):
        paused["missing"]


def test_times_and_bodies_are_converted_as_before() -> None:
    entered = datetime(2026, 11, 25, 12, 0)
    period = StatePeriod.from_row(
        {"state": "paid", "sort_key": 2, "event": "pay", "entered_at": entered, "left_at": None}
    )
    assert period.entered_at == entered.replace(tzinfo=UTC) and period.left_at is None
    stored = StoredDefinition.from_row(
        {"machine": "order", "version": 3, "is_current": 1, "body": '{"states": ["new"]}'}
    )
    assert stored == StoredDefinition("order", 3, True, {"states": ["new"]})
