"""A worker's own metrics: what it ran and how long its handlers and commits took.

Kept in the worker's process (``Worker(metrics=WorkerMetrics())``, `pyfsm worker
--metrics-port`), in a registry of its own: nothing here reads the database. Every label is
bounded by the definitions: the machine type, the state a handler ran in, a run's status, a
timer's outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram

if TYPE_CHECKING:
    from ..models import TimerOutcome
    from .context import RunResult

T = TypeVar("T")

#: Handlers call the outside world: from a millisecond to a minute.
HANDLER_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: A step's commit is a round trip and a durable commit: about a millisecond when all is well.
COMMIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
#: A timer fires within the poll interval of the firing loop (about a second) when all is
#: well; minutes or hours late when nothing fired timers for a while.
TIMER_LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class WorkerMetrics:
    """Counters and histograms a Worker updates as it runs (``registry``: where they live;
    a new CollectorRegistry by default, never prometheus_client's global one)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True) if registry is None else registry
        self.steps = Counter(
            "pyfsm_worker_steps",
            "Steps (handler transitions) this worker committed",
            ["machine"],
            registry=self.registry,
        )
        self.runs = Counter(
            "pyfsm_worker_runs",
            "Runs this worker finished, by the status they left the instance in",
            ["machine", "status"],
            registry=self.registry,
        )
        self.errors = Counter(
            "pyfsm_worker_errors",
            "Database errors this worker met claiming or running",
            ["machine"],
            registry=self.registry,
        )
        self.handler_seconds = Histogram(
            "pyfsm_handler_seconds",
            "Seconds a handler took, by the state it ran in",
            ["machine", "state"],
            buckets=HANDLER_BUCKETS,
            registry=self.registry,
        )
        self.handler_exceptions = Counter(
            "pyfsm_handler_exceptions",
            "Handlers that raised, by the state they ran in",
            ["machine", "state"],
            registry=self.registry,
        )
        self.commit_seconds = Histogram(
            "pyfsm_worker_step_commit_seconds",
            "Seconds the call committing a step (or a round of steps) took",
            ["machine"],
            buckets=COMMIT_BUCKETS,
            registry=self.registry,
        )
        self.timers = Counter(
            "pyfsm_worker_timers",
            "Timers this worker handled: fired, dropped (their event was "
            "not allowed then) or held (instance paused or locked: it stays armed)",
            ["machine", "outcome"],
            registry=self.registry,
        )
        self.timer_lag = Histogram(
            "pyfsm_worker_timer_firing_lag_seconds",
            "Seconds from a timer's due time to its firing by this worker",
            ["machine"],
            buckets=TIMER_LAG_BUCKETS,
            registry=self.registry,
        )

    def run_handler(self, machine: str, state: str, handler: Callable[[Any], T], ctx: Any) -> T:
        """Call ``handler(ctx)``, timing it; a handler that raises is counted and re-raised."""
        with (
            self.handler_seconds.labels(machine, state).time(),
            self.handler_exceptions.labels(machine, state).count_exceptions(BaseException),
        ):
            return handler(ctx)

    def time_commit(self, machine: str, commit: Callable[[], T]) -> T:
        """``commit()``, the call committing a step or a round of steps; its time is recorded
        when it succeeds (a failed one is counted by :meth:`error`, not timed)."""
        started = time.perf_counter()
        result = commit()
        self.commit_seconds.labels(machine).observe(time.perf_counter() - started)
        return result

    def finished(self, machine: str, result: RunResult) -> None:
        self.runs.labels(machine, result.status).inc()
        if result.steps:
            self.steps.labels(machine).inc(result.steps)

    def error(self, machine: str) -> None:
        self.errors.labels(machine).inc()

    def observe_timer_outcomes(self, outcomes: Iterable[TimerOutcome]) -> None:
        """Count one firing call's timers by outcome, and the lag of those that fired (a held
        timer is tried again later: its lag then is the one that counts)."""
        for o in outcomes:
            self.timers.labels(o.machine, o.outcome).inc()
            if o.outcome == "fired":
                self.timer_lag.labels(o.machine).observe(max(0.0, o.lag_seconds))
