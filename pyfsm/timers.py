"""Timers: scheduled events and the firing of due timers (the Store's send_at, cancel_timer,
timers and fire_timers, and the loop `pyfsm timers run` and the workers use).

State timeouts are armed and disarmed by the database itself, in each transition's own
transaction (the type's timer triggers, docs/timers.md); this module schedules events,
lists and cancels timers, and fires the due ones through ``fsm_fire_timers_v3``, oldest due
first (one instance's in the order they fell due), which claims them with SKIP LOCKED and
sends each event in one transaction with its timer's removal, so none fires twice: a firer
process killed mid-call leaves the call to the server, which finishes and commits it; a
connection killed on the server rolls the firing back and leaves its timers armed for
another firer once their claim runs out.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .checks import check_int, check_key, check_name, check_text, dump, machine_name, naive_utc
from .errors import FsmError, InvalidArgument
from .limits import MAX_DELAY_SECONDS, MAX_METADATA_BYTES, PAGE_ROWS, REASON_CHARS, REQUEST_ID_CHARS
from .locks import check_owner
from .models import CancelledTimer, ScheduledTimer, Timer, TimerOutcome
from .schema import routines

if TYPE_CHECKING:
    from .definition import Machine
    from .gateway import Gateway

log = logging.getLogger("pyfsm.timers")

#: The request id of the transition a timer's firing writes: ``fsm:timer:<timer id>``.
REQUEST_ID_PREFIX = "fsm:timer:"
#: The metadata key under which a timer's firing records the timer (``{"id", "kind", "due_at",
#: "state"}``): send_at refuses metadata that has it already.
TIMER_KEY = "timer"
#: At most this many timers per fsm_fire_timers_v3 call, and how long its claim may last
#: (the procedure's own limits).
MAX_BATCH = 1000
CLAIM_SECONDS = (0.1, 86400.0)


def seconds(what: str, value: object) -> Decimal:
    """A delay as the procedures take it: seconds (int, float or timedelta), 0 to MAX_DELAY_SECONDS."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_DELAY_SECONDS
    ):
        raise InvalidArgument(
            f"{what} must be 0 to {MAX_DELAY_SECONDS} seconds (a number or a timedelta), got {value!r:.80}"
        )
    return Decimal(value).quantize(Decimal("0.000001"))


def send_at(
    gateway: Gateway,
    machine: str | Machine,
    key: str,
    event: str,
    *,
    at: datetime | None = None,
    after: float | timedelta | None = None,
    metadata: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> ScheduledTimer:
    name = machine_name(machine)
    if (at is None) == (after is None):
        raise InvalidArgument("send_at needs exactly one of at= (a datetime) and after= (seconds or a timedelta)")
    args = (
        name,
        check_key("key", key),
        check_name("event", event),
        None if at is None else naive_utc("at", at),
        None if after is None else seconds("after", after),
        dump("metadata", metadata, MAX_METADATA_BYTES),
        check_text("request_id", request_id, REQUEST_ID_CHARS),
    )
    if metadata is not None and TIMER_KEY in metadata:  # a mapping: dump() refused anything else
        # fsm_send_at_v2 refuses it too: the firing would replace it with pyfsm's own
        raise InvalidArgument(
            f'metadata must not have a key "{TIMER_KEY}": the history row of the firing records the '
            "timer there (id, kind, due_at, state); give yours another name",
            machine=name,
            key=key,
            event=event,
        )
    row = gateway.call_one(
        routines.SEND_AT, args, machine=name, writes=True, retry_connection=request_id is not None, key=key, event=event
    )
    return ScheduledTimer.from_row(row)


def cancel(gateway: Gateway, timer_id: int, reason: str | None = None) -> CancelledTimer:
    args = (check_int("timer_id", timer_id, minimum=1), check_text("reason", reason, REASON_CHARS))
    return CancelledTimer.from_row(gateway.call_one(routines.CANCEL_TIMER, args, writes=True))


def armed(
    gateway: Gateway,
    machine: str | Machine | None = None,
    key: str | None = None,
    *,
    overdue: bool = False,
    after_id: int = 0,
    limit: int = 100,
) -> list[Timer]:
    name = None if machine is None else machine_name(machine)
    if key is not None and name is None:
        raise InvalidArgument("a key needs its machine")
    args = (
        name,
        None if key is None else check_key("key", key),
        int(bool(overdue)),
        check_int("after_id", after_id, minimum=0),
        check_int("limit", limit, minimum=1, maximum=PAGE_ROWS),
    )
    return [Timer.from_row(r) for r in gateway.call(routines.TIMERS, args, machine=name, retry_connection=True)]


def fire(gateway: Gateway, owner: str, *, limit: int = 100, claim_seconds: float = 30.0) -> list[TimerOutcome]:
    owner = check_owner(owner)
    check_int("limit", limit, minimum=1, maximum=MAX_BATCH)
    check_claim_seconds("claim_seconds", claim_seconds)
    rows = gateway.call(routines.FIRE_TIMERS, (owner, limit, claim_seconds), writes=True, retry_connection=True)
    return [TimerOutcome.from_row(r) for r in rows]


def check_claim_seconds(what: str, value: object) -> float:
    """``value`` if it is a claim's length fsm_fire_timers_v3 takes; InvalidArgument if not."""
    low, high = CLAIM_SECONDS
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:  # NaN fails
        raise InvalidArgument(f"{what} must be {low} to {high:.0f} seconds, got {value!r:.80}")
    return float(value)


def default_owner() -> str:
    """``<host>:<pid>`` cut to the owner's characters: who fired a timer, in fsm_timer_log.done_by."""
    host = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in socket.gethostname())
    return f"{host[:40] or 'host'}:{os.getpid()}"


class TimerLoop:
    """Fire due timers until stopped: a batch, then again at once while batches come back
    full, else after ``poll_seconds``. What `pyfsm timers run` and the handler engine's
    workers run (a thread of their own in a worker). A failed batch, whatever the error, is
    logged and tried again after ``poll_seconds``: its timers stay armed (claimed until their
    claim ends), and the loop goes on."""

    def __init__(
        self,
        fire_batch: Callable[[], list[TimerOutcome]],
        *,
        limit: int,
        poll_seconds: float = 1.0,
        on_outcomes: Callable[[list[TimerOutcome]], None] | None = None,
    ) -> None:
        self.fire_batch, self.limit, self.poll_seconds = fire_batch, limit, poll_seconds
        self.on_outcomes = on_outcomes
        self.stopping = threading.Event()
        self.fired = self.dropped = self.held = 0

    def run(self, *, until_idle: bool = False) -> None:
        """Fire until stop(); with ``until_idle``, return once a batch comes back not full
        (every timer due now was handled: for a cron job)."""
        while not self.stopping.is_set():
            try:
                outcomes = self.fire_batch()
            except FsmError as exc:
                log.warning("firing timers failed (they stay armed): %s", exc)
                outcomes = []
            except Exception:  # a driver error pyfsm has no class for: the loop must outlive it too
                log.exception("firing timers failed (they stay armed)")
                outcomes = []
            for o in outcomes:
                if o.outcome == "fired":
                    self.fired += 1
                elif o.outcome == "dropped":
                    self.dropped += 1
                    log.info(
                        "timer %s dropped: %s of %s %s not allowed (errno %s)",
                        o.timer_id,
                        o.event,
                        o.machine,
                        o.instance_key,
                        o.errno,
                    )
                else:
                    self.held += 1
            if self.on_outcomes is not None and outcomes:
                self.on_outcomes(outcomes)
            if len(outcomes) < self.limit:
                if until_idle:
                    return
                self.stopping.wait(self.poll_seconds)

    def stop(self) -> None:
        self.stopping.set()
