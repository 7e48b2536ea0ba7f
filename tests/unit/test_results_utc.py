"""Issue 46, item 5: every time a Store result holds is UTC-aware (the engine's queue, failures and
attempts were naive), and TypeStats reads fsm_stats_v3's idle column while a row of
fsm_stats_v2, which has none, still builds one (idle 0)."""

from __future__ import annotations

from datetime import UTC, datetime

from pyfsm.models import AttemptError, FailedInstance, QueuedRun, RunInfo, TypeStats

AT = datetime(2026, 11, 28, 12, 0, 0, 123456)  # naive, as the driver gives a DATETIME(6)

V2_ROW = {
    "machine": "order",
    "current_version": 2,
    "instances": 5,
    "running": 2,
    "waiting": 1,
    "paused": 0,
    "failed": 0,
    "completed": 2,
    "due": 1,
    "claimed": 0,
    "unpublished": 1,
    "oldest_unpublished_at": AT,
}


def test_the_engines_times_are_utc_aware() -> None:
    run = RunInfo.from_row(
        {
            "instance_id": 1,
            "due_at": AT,
            "claimed_by": None,
            "attempt": 0,
            "pause_requested": 0,
            "run_immediately": None,
        }
    )
    assert run.due_at == AT.replace(tzinfo=UTC) and run.due_at.tzinfo is UTC
    parked = RunInfo.from_row({**run.to_dict(), "due_at": None})
    assert parked.due_at is None
    queued = QueuedRun.from_row({"instance_key": "k", "due_at": AT, "claimed_by": None, "run_immediately": 1})
    assert queued.due_at == AT.replace(tzinfo=UTC)
    assert QueuedRun.from_row({**queued.to_dict(), "due_at": None}).due_at is None  # a paused one's run
    failed = FailedInstance.from_row(
        {
            "id": 1,
            "instance_key": "k",
            "lookup_key": None,
            "current_state": "charge",
            "updated_at": AT,
            "handler": "charge",
            "attempt": 3,
            "error_type": "builtins.ValueError",
            "message": "no",
            "failed_at": AT,
        }
    )
    assert failed.updated_at.tzinfo is UTC and failed.failed_at is not None and failed.failed_at.tzinfo is UTC
    attempt = AttemptError.from_row(
        {
            "id": 1,
            "state": "charge",
            "handler": "charge",
            "attempt": 1,
            "error_type": None,
            "message": None,
            "traceback": None,
            "outcome": "retry",
            "next_run_at": None,
            "created_at": AT,
        }
    )
    assert attempt.created_at == AT.replace(tzinfo=UTC) and attempt.next_run_at is None


def test_type_stats_read_the_idle_column_and_default_it_for_an_older_row() -> None:
    older = TypeStats.from_row(V2_ROW)
    assert (older.running, older.idle) == (2, 0)
    assert older.oldest_unpublished_at == AT.replace(tzinfo=UTC)
    current = TypeStats.from_row({**V2_ROW, "running": 1, "idle": 1})
    assert (current.running, current.idle) == (1, 1)
    assert current.to_dict()["idle"] == 1
