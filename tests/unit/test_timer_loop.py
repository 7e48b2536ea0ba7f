"""pyfsm.timers.TimerLoop without a server: what it does with full and short batches and with errors."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from pyfsm import DatabaseUnavailable, TimerOutcome
from pyfsm.timers import TimerLoop


def outcome(outcome: str) -> TimerOutcome:
    return TimerOutcome(1, "m", "k", "timeout", "e", datetime.now(UTC), outcome, None, None, 0.5)


def test_full_batches_are_fired_back_to_back_and_a_short_one_ends_until_idle() -> None:
    batches = [[outcome("fired"), outcome("dropped")], [outcome("held")], [outcome("fired")]]
    seen: list[list[TimerOutcome]] = []
    loop = TimerLoop(lambda: batches.pop(0), limit=2, poll_seconds=30, on_outcomes=seen.append)
    loop.run(until_idle=True)  # 2 (full: at once), then 1 (short: idle, returns)
    assert (loop.fired, loop.dropped, loop.held) == (1, 1, 1) and len(seen) == 2 and len(batches) == 1


def test_any_error_is_logged_and_the_loop_goes_on_until_stopped() -> None:
    calls: list[int] = []

    def fire() -> list[TimerOutcome]:
        calls.append(1)
        if len(calls) == 1:
            raise DatabaseUnavailable("gone")
        if len(calls) == 2:
            raise RuntimeError("a driver error pyfsm has no class for")
        if len(calls) >= 4:
            loop.stop()
        return [outcome("fired")]

    loop = TimerLoop(fire, limit=10, poll_seconds=0.01)
    runner = threading.Thread(target=loop.run)
    runner.start()
    runner.join(10)
    assert not runner.is_alive() and len(calls) >= 4 and loop.fired >= 2
