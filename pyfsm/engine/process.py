"""Processes: handlers attached to a machine's states, and the settings for running them.

A :class:`Process` is plain configuration, like :class:`~pyfsm.Machine`: it holds no
connection. :mod:`pyfsm.engine` runs it (``process.run(store, key)``, ``process.start(...)``)
and :class:`pyfsm.Worker` drains its queue. An instance is the engine's once it is started
(``process.start``, ``Store.enqueue``, `pyfsm enqueue`, ``CALL fsm_enqueue_v2``); one made
otherwise (``Store.create``, a send, SQL) is idle, whatever its state's handler: no worker
runs it until it is handed over so, and its transitions do not queue it.

>>> from pyfsm import Process
>>> shipping = Process.linear("shipping", ["pack", "label", "hand_over"])
>>> shipping.machine.states
('pack', 'label', 'hand_over', 'done')
>>> shipping.machine.target("label", "next"), shipping.machine.target("label", "back")
('hand_over', 'pack')
>>> @shipping.handler("pack")
... def pack(ctx):
...     ctx.data["boxes"] = 2
...     return ctx.next()
>>> shipping.handlers["pack"].name
'pack'
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..definition import Machine
from ..errors import InvalidArgument, InvalidDefinition
from .context import Context, Handler, HandlerSpec, Outcome, RunResult, copy_data
from .runner import run_key, start

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["Context", "Handler", "HandlerSpec", "Outcome", "Process", "copy_data"]

#: What Process.linear's machine_options may set.
MACHINE_OPTIONS = frozenset(
    {"save_after_step", "uses_global_lock", "uses_local_lock", "lock_lease_seconds", "event_data"}
)


@dataclass
class Process:
    """Handlers for a machine's states and how to run them.

    - ``run_immediately``: after a step, run the next one at once in the same caller or
      worker (True), or queue the instance for any worker (False). Per instance, pass
      ``run_immediately`` to :meth:`start`.
    - ``max_attempts``: attempts per step (1 = no retry); a handler may override it.
    - ``backoff``/``max_backoff``: the delay before retry n is ``backoff * 2**(n-1)``
      seconds, at most ``max_backoff``, with +-50% jitter.
    - ``non_retryable``: exception types that fail a step at once.
    - ``failure_event``: fired when a step's last attempt failed (a backward or compensating
      move) instead of marking the instance failed; a handler may override it.
    - ``claim_seconds``: how long a worker's claim on an instance lasts; if the worker dies
      the instance is due again after that. Keep it above your slowest handler.
    - ``batch_steps``: with the machine's save_after_step off, at most this many steps run
      before one commit.
    """

    machine: Machine
    run_immediately: bool = True
    max_attempts: int = 3
    backoff: float = 1.0
    max_backoff: float = 300.0
    non_retryable: tuple[type[BaseException], ...] = ()
    failure_event: str | None = None
    claim_seconds: float = 60.0
    batch_steps: int = 50
    handlers: dict[str, HandlerSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.machine, Machine):
            raise InvalidArgument("Process(machine) takes a pyfsm.Machine")
        if not isinstance(self.run_immediately, bool):
            raise InvalidArgument(f"run_immediately must be True or False, got {self.run_immediately!r:.80}")
        if self.failure_event is not None and not isinstance(self.failure_event, str):
            raise InvalidArgument(f"failure_event must be an event name or None, got {self.failure_event!r:.80}")
        _check_attempts(self.max_attempts)
        for what, value, low, high in (
            ("backoff", self.backoff, 0, 86400),
            ("max_backoff", self.max_backoff, 0, 86400),
            ("claim_seconds", self.claim_seconds, 0.1, 86400),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise InvalidArgument(f"{what} must be a number from {low} to {high}, got {value!r:.80}")
        steps = self.batch_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 1000:
            raise InvalidArgument(f"batch_steps must be an integer from 1 to 1000, got {self.batch_steps!r:.80}")
        self.non_retryable = _exception_types(self.non_retryable)

    @property
    def name(self) -> str:
        return self.machine.name

    # -- registering handlers -------------------------------------------------------------

    def register(
        self,
        state: str,
        fn: Handler,
        *,
        name: str | None = None,
        max_attempts: int | None = None,
        failure_event: str | None = None,
        non_retryable: Sequence[type[BaseException]] = (),
    ) -> Handler:
        """Attach ``fn`` to ``state``; history records it under ``name`` (default: its name)."""
        if state not in self.machine.states:
            raise InvalidDefinition(
                f"{self.name}: no state {state!r} to attach a handler to",
                machine=self.name,
                state=str(state)[:80],
                field="handlers",
            )
        if state in self.machine.final:
            raise InvalidDefinition(
                f"{self.name}: {state!r} is final; a final state runs no handler",
                machine=self.name,
                state=state,
                field="handlers",
            )
        if state in self.handlers:
            raise InvalidDefinition(
                f"{self.name}: state {state!r} has a handler already", machine=self.name, state=state, field="handlers"
            )
        if not callable(fn):
            raise InvalidArgument(f"handler for {state!r} is not callable")
        label = name or getattr(fn, "__name__", None) or f"{state}_handler"
        if not isinstance(label, str) or not 1 <= len(label) <= 128:
            raise InvalidArgument(f"handler name must be 1 to 128 characters, got {label!r:.80}")
        if max_attempts is not None:
            _check_attempts(max_attempts)
        for event in (failure_event, self.failure_event):
            if event is not None and not self.machine.allows(state, event):
                raise InvalidDefinition(
                    f"{self.name}: failure event {event!r} is not allowed from {state!r}",
                    machine=self.name,
                    state=state,
                    event=event,
                    field="failure_event",
                )
        self.handlers[state] = HandlerSpec(
            state, fn, label, max_attempts, failure_event, _exception_types(non_retryable)
        )
        return fn

    def handler(self, state: str, **options: Any) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`register`: ``@process.handler("new")``."""

        def attach(fn: Handler) -> Handler:
            return self.register(state, fn, **options)

        return attach

    @classmethod
    def linear(
        cls,
        name: str,
        steps: Sequence[str],
        *,
        final: str = "done",
        topic: str | None = None,
        machine_options: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> Process:
        """A process of ordered steps: states ``steps`` then ``final``, with ``next`` moving
        forward one step and ``back`` one step backward (from every step but the first)."""
        if not isinstance(steps, list | tuple):
            raise InvalidDefinition(
                f"{name!r:.80}: steps must be a list of state names, got {type(steps).__name__}",
                machine=str(name)[:80],
                field="steps",
            )
        if machine_options is not None and (
            not isinstance(machine_options, Mapping) or not set(machine_options) <= MACHINE_OPTIONS
        ):
            raise InvalidDefinition(
                f"{name!r:.80}: machine_options must be a dict of "
                f"{', '.join(sorted(MACHINE_OPTIONS))}, got {machine_options!r:.80}",
                machine=str(name)[:80],
                field="machine_options",
            )
        names = list(steps)
        if not names:
            raise InvalidDefinition(f"{name}: a linear process needs at least one step", machine=name, field="steps")
        order = [*names, final]
        transitions = [("next", a, b) for a, b in itertools.pairwise(order)]
        transitions += [("back", b, a) for a, b in itertools.pairwise(names)]
        machine = Machine(
            name=name,
            states=order,
            start=[names[0]],
            final=[final],
            transitions=transitions,
            topic=topic,
            **dict(machine_options or {}),
        )
        return cls(machine, **settings)

    # -- running (pyfsm.engine does the work) ---------------------------------------------

    def handler_for(self, state: str) -> HandlerSpec | None:
        return self.handlers.get(state)

    def attempts_for(self, spec: HandlerSpec) -> int:
        return spec.max_attempts if spec.max_attempts is not None else self.max_attempts

    def run(self, store: Store, key: str) -> RunResult:
        """Run ``key``'s handlers in this process until it completes, pauses, waits, fails,
        or (with run_immediately off) one step is done and the rest is queued."""
        _check_store_and_key(store, key)
        return run_key(store, self, key)

    def start(
        self,
        store: Store,
        key: str,
        *,
        data: Mapping[str, Any] | None = None,
        lookup_key: str | None = None,
        run_immediately: bool | None = None,
    ) -> RunResult:
        """Create instance ``key`` in the first start state and run it (or queue it for a
        worker when ``run_immediately`` is False, for this instance from now on). An instance
        created otherwise is handed to the workers by ``store.enqueue`` (`pyfsm enqueue`)."""
        _check_store_and_key(store, key)
        if run_immediately is not None and not isinstance(run_immediately, bool):  # before the instance is created
            raise InvalidArgument(f"run_immediately must be True, False or None, got {run_immediately!r:.80}")
        return start(store, self, key, data=data, lookup_key=lookup_key, run_immediately=run_immediately)


def _check_store_and_key(store: object, key: object) -> None:
    from ..checks import check_key
    from ..store import Store

    if not isinstance(store, Store):
        raise InvalidArgument(f"store must be a pyfsm.Store, got {type(store).__name__}")
    check_key("key", key)


def _check_attempts(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise InvalidArgument(f"max_attempts must be an integer from 1 to 1000, got {value!r:.80}")


def _exception_types(value: object) -> tuple[type[BaseException], ...]:
    types = tuple(value) if isinstance(value, list | tuple) else (value,)
    if not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise InvalidArgument(f"non_retryable must be exception types, got {value!r:.80}")
    return types
