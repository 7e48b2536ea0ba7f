"""What handlers and runs share: the Context a handler gets, the Outcome it returns, the
registered HandlerSpec, the RunResult of a run, and ProcessLike, what the runner reads of a
Process. Kept apart from process.py so that the runner, the worker's metrics and the Process
all import it and none of them imports another in a circle.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..db.jsondata import dump_object
from ..definition import Machine


@dataclass(frozen=True)
class RunResult:
    """Where a run left the instance. ``steps``: steps committed by this run."""

    key: str
    state: str
    status: str
    version: int
    steps: int
    error: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What a handler decided: fire an event, pause, complete, fail or wait."""

    kind: str
    event: str | None = None
    reason: str | None = None


class Context:
    """What a handler gets: the instance and the ways to say what happens next.

    ``data`` is the instance's data as a dict; change it in place (or assign a new dict):
    what the handler leaves there is written with the step and is what the next handler
    sees. It must stay JSON-serializable. ``attempt`` is 1 on a step's first run, 2 on its
    first retry, and so on. ``step_id`` (``machine:key:n``, n the sort_key of the transition
    that entered this state) is the same for every run, retry and resumption of this step
    and differs for every other step: use it as the idempotency key of outside calls.
    ``version`` is the instance's version, which also moves when its status changes.
    """

    def __init__(
        self,
        *,
        machine: str,
        key: str,
        lookup_key: str | None,
        state: str,
        data: dict[str, Any],
        attempt: int,
        version: int,
        step_id: str = "",
    ) -> None:
        self.machine = machine
        self.key = key
        self.lookup_key = lookup_key
        self.state = state
        self.data = data
        self.attempt = attempt
        self.version = version
        self.step_id = step_id

    def __repr__(self) -> str:
        return f"Context({self.machine} {self.key!r}, state={self.state!r}, attempt={self.attempt})"

    def _data_checked(self) -> None:
        """Refuse, in the handler, data that JSON cannot hold as it is (a key that is not a
        string, NaN, a set, ...): InvalidData, which fails the step without retrying it."""
        if isinstance(self.data, dict):  # anything else is refused by the engine
            dump_object("ctx.data", self.data)

    def fire(self, event: str) -> Outcome:
        """Move on with ``event`` (forward, or backward to an earlier state)."""
        self._data_checked()
        return Outcome("fire", event=event)

    def next(self) -> Outcome:
        """``fire("next")``: the forward event of :meth:`Process.linear`."""
        return self.fire("next")

    def back(self) -> Outcome:
        """``fire("back")``: the backward event of :meth:`Process.linear`."""
        return self.fire("back")

    def pause(self) -> Outcome:
        """Stop here; :meth:`pyfsm.Store.resume` continues with this state's handler."""
        self._data_checked()
        return Outcome("pause")

    def complete(self) -> Outcome:
        """The instance is done, in its current state."""
        self._data_checked()
        return Outcome("complete")

    def fail(self, reason: str = "") -> Outcome:
        """The instance failed (recorded in fsm_errors; :meth:`pyfsm.Store.retry` reruns this step)."""
        return Outcome("fail", reason=reason)

    def wait(self) -> Outcome:
        """Wait for an external event: the next transition (from anyone) wakes the instance."""
        self._data_checked()
        return Outcome("wait")


Handler = Callable[[Context], Outcome | None]


@dataclass(frozen=True)
class HandlerSpec:
    """A handler registered for a state, with its overrides of the process's settings."""

    state: str
    fn: Handler
    name: str
    max_attempts: int | None = None
    failure_event: str | None = None
    non_retryable: tuple[type[BaseException], ...] = ()


class ProcessLike(Protocol):
    """What the runner reads of a :class:`~pyfsm.Process` (the process module imports the runner)."""

    machine: Machine
    run_immediately: bool
    claim_seconds: float
    backoff: float
    max_backoff: float
    failure_event: str | None
    non_retryable: tuple[type[BaseException], ...]
    batch_steps: int

    @property
    def name(self) -> str: ...

    def handler_for(self, state: str) -> HandlerSpec | None: ...

    def attempts_for(self, spec: HandlerSpec) -> int: ...


def copy_data(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """A deep copy for a handler, so that a failed attempt leaves nothing behind."""
    return copy.deepcopy(dict(data or {}))
