"""Workers: drain the engine's queue (fsm_runs) for one or more processes.

Run as many worker processes on as many hosts as you like: each claims due runs with
``FOR UPDATE SKIP LOCKED`` (fsm_claim_v1), so they never wait for each other, and a claim
is a lease, renewed by a heartbeat thread while the worker lives, so the runs of a worker
that dies (or hangs) are due again when its claims run out, and only then.

A worker runs the runs it claims side by side (``batch``, 10 by default; pyfsm.engine.batch): a
round runs the next step of each, and one transaction commits them all.

A worker also fires due timers (state timeouts and scheduled events, docs/timers.md) in a
thread of its own, claiming them with SKIP LOCKED as it claims runs, so a deployment with
workers needs no other timer process (``timers=False`` turns that off).

SIGTERM or SIGINT (Ctrl-C) stop a worker gracefully: the instances it is running finish
their current step and are handed back (due now), the runs it claimed but had not started
are handed back untouched, and the worker returns.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import DatabaseUnavailable, FsmError, InvalidArgument, UnknownMachine
from ..locks import check_owner, new_owner
from ..schema import routines
from ..timers import MAX_BATCH, TimerLoop
from .batch import run_claimed_batch
from .context import RunResult
from .process import Process
from .runner import ClaimKeeper, claim, release_claims, run_claimed

if TYPE_CHECKING:
    from ..store import Store
    from .metrics import WorkerMetrics

log = logging.getLogger("pyfsm.worker")


@dataclass
class WorkerStats:
    """What a worker did: runs started, steps committed, runs handed back, errors."""

    runs: int = 0
    steps: int = 0
    handed_back: int = 0
    errors: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    timers_fired: int = 0
    timers_dropped: int = 0
    timers_held: int = 0


def not_installed(name: str, defined: bool, installed: Iterable[str], source: str | None = None) -> UnknownMachine:
    """UnknownMachine (31002) for a worker of process ``name`` whose machine type is not
    installed: what is wrong, and the `pyfsm install` to run (of ``source``, the
    ``module.path:attribute`` the process was loaded from, when known)."""
    listed = sorted(installed)
    what = (
        f"machine type {name!r} is defined but its tables are not installed"
        if defined
        else f"machine type {name!r} is not installed in this database (installed: {', '.join(listed) or 'none'})"
    )
    fix = (
        f"run `pyfsm install {source}` as the owner of pyfsm's schema"
        if source
        else "install it as the owner of pyfsm's schema (store.define(process.machine), or `pyfsm install "
        "module.path:attribute` naming the process)"
    )
    return UnknownMachine(
        f"{what}, so a worker of process {source or name!r} would claim nothing: {fix}, then start the worker again",
        machine=name,
        installed=listed,
    )


class Worker:
    """Claims due runs of ``processes`` and runs them until stopped.

    ``batch``: runs claimed per query and run side by side (10 by default): each round runs
    the next handler of every run of the batch, then commits all of those steps in one
    transaction (see pyfsm.engine.batch), which at least doubles the steps per second a worker
    gets out of the database. The price is latency: a run's next step waits for the round's
    other handlers. With slow handlers where latency matters, or handlers that must not
    run beside each other, use 1: one run at a time, each step committed alone.
    ``idle_min``/``idle_max``: the poll delay grows from
    the first to the second while there is nothing to do, and drops back at once when work
    appears. ``on_run`` is called after each run with its RunResult (e.g. for progress).
    ``owner``: a name for this worker in ``fsm_runs.claimed_by`` and the logs (1-55 of
    ``[A-Za-z0-9._:-]``); a random suffix is added, since two workers must never share an
    owner token (each gives back the claims its token holds after a lost reply). By default
    ``host:pid:random``. ``metrics``: a pyfsm.metrics.WorkerMetrics to count steps, runs and
    errors and time handlers and commits in (see docs/metrics.md); None keeps none.
    ``timers``: fire due timers while running (in a thread; ``timer_batch`` per call, polled
    every ``timer_poll`` seconds while none are due); False leaves them to other workers or
    to `pyfsm timers run`.
    """

    def __init__(
        self,
        store: Store,
        processes: Iterable[Process],
        *,
        batch: int = 10,
        idle_min: float = 0.02,
        idle_max: float = 1.0,
        owner: str | None = None,
        on_run: Callable[[Any], None] | None = None,
        metrics: WorkerMetrics | None = None,
        timers: bool = True,
        timer_batch: int = 100,
        timer_poll: float = 1.0,
    ) -> None:
        self.store = store
        self.processes = list(processes)
        if not self.processes or not all(isinstance(p, Process) for p in self.processes):
            raise InvalidArgument("Worker needs one or more pyfsm.Process objects")
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 1000:
            raise InvalidArgument(f"batch must be an integer from 1 to 1000, got {batch!r:.80}")
        if not 0 < idle_min <= idle_max <= 60:
            raise InvalidArgument("need 0 < idle_min <= idle_max <= 60")
        self.batch, self.idle_min, self.idle_max = batch, idle_min, idle_max
        if owner is not None and (not isinstance(owner, str) or not owner):
            raise InvalidArgument(f"owner must be 1 to 55 characters of [A-Za-z0-9._:-], got {owner!r:.80}")
        self.owner = check_owner(f"{owner}:{uuid.uuid4().hex[:8]}") if owner else new_owner()
        self._release_pending: set[str] = set()  # processes whose last claim's reply was lost
        self.on_run = on_run
        self.metrics = metrics
        self.stop_event = threading.Event()
        self.stats = WorkerStats()
        self._keeper: ClaimKeeper | None = None
        self._sources: dict[str, str] = {}  # process name -> how it was loaded (check_installed)
        self._installed = False  # every process's type was found installed
        if isinstance(timer_batch, bool) or not isinstance(timer_batch, int) or not 1 <= timer_batch <= MAX_BATCH:
            raise InvalidArgument(f"timer_batch must be an integer from 1 to {MAX_BATCH}, got {timer_batch!r:.80}")
        if not 0 < timer_poll <= 60:
            raise InvalidArgument(f"timer_poll must be more than 0 and at most 60 seconds, got {timer_poll!r:.80}")
        self._timer_loop = (
            TimerLoop(
                lambda: self.store.fire_timers(owner=self.owner, limit=timer_batch),
                limit=timer_batch,
                poll_seconds=timer_poll,
                on_outcomes=None if metrics is None else metrics.observe_timer_outcomes,
            )
            if timers
            else None
        )

    def close(self) -> None:
        """Stop the claims' heartbeat (run() does this when it returns; call it after run_once())."""
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None

    def stop(self) -> None:
        """Ask the worker to stop after the current step (thread-safe; what signals do)."""
        self.stop_event.set()

    def check_installed(self, sources: Mapping[str, str] | None = None) -> None:
        """Raise UnknownMachine (31002), saying what to run, unless the machine type of every
        process is installed (defined, with its tables): a worker of a type that is not would
        claim nothing, ever. :meth:`run` checks first; `pyfsm worker` checks before it starts.

        ``sources``: how each process was loaded, by process name (``module.path:attribute``),
        for the message to name the `pyfsm install` to run. A check that cannot be made now
        (the server is down, the schema is not this pyfsm's) is left to the claims, which ride
        out an outage and say what is wrong.
        """
        self._sources.update(sources or {})
        gateway = self.store.gateway
        try:
            gateway.ensure_schema()
        except FsmError as exc:
            log.debug("pyfsm worker %s: could not check that its types are installed: %s", self.owner, exc)
            return
        for process in self.processes:
            try:
                defined, installed = gateway.types(process.name)
            except FsmError as exc:
                log.debug("pyfsm worker %s: could not check that %s is installed: %s", self.owner, process.name, exc)
                return
            if process.name not in installed:
                raise not_installed(process.name, defined, installed, self._sources.get(process.name))
        self._installed = True

    def run_once(self) -> int:
        """Claim one batch per process and run it; the number of runs done."""
        if self._keeper is None:  # renews the claims this worker holds, the batch's waiting rows too
            self._keeper = ClaimKeeper(self.store, self.owner)
        keeper = self._keeper
        done = 0
        for process in self.processes:
            if self.stop_event.is_set():
                break
            if process.name in self._release_pending and self._release_unknown_claims(process, keeper):
                self._release_pending.discard(process.name)  # given back once more before claiming: see below
            try:
                rows = claim(self.store, process, self.owner, limit=self.batch)
            except FsmError as exc:
                self._error(process)
                if isinstance(exc, UnknownMachine) and exc.errno == UnknownMachine.errno:
                    self._installed = False  # the procedure says so (31002): fail, saying what to run
                    self.check_installed()
                log.warning("pyfsm worker %s: claiming %s failed: %s", self.owner, process.name, exc)
                if isinstance(exc, DatabaseUnavailable):
                    # The claim may have committed (or still be running on the server): give back
                    # now what this token holds, and again before the next claim, in case the
                    # lost claim committed after this release read the table.
                    self._release_pending.add(process.name)
                    self._release_unknown_claims(process, keeper)
                continue
            keeper.add(process, [int(row["id"]) for row in rows])
            if len(rows) > 1:  # side by side, each round of steps committed together (pyfsm.engine.batch)
                try:
                    self._record(
                        process, run_claimed_batch(self.store, process, rows, self.owner, self.stop_event, self.metrics)
                    )
                finally:
                    for row in rows:
                        keeper.discard(process, int(row["id"]))
                done += len(rows)
                continue
            for index, row in enumerate(rows):
                if self.stop_event.is_set():
                    self._hand_back(process, rows[index:])
                    for rest in rows[index:]:
                        keeper.discard(process, int(rest["id"]))
                    break
                try:
                    self._run(process, row)
                finally:
                    keeper.discard(process, int(row["id"]))
                done += 1
        return done

    def run(self, *, handle_signals: bool = True, until_idle: float | None = None) -> WorkerStats:
        """Work until stopped (SIGTERM/SIGINT or :meth:`stop`), or, with ``until_idle``,
        until there was nothing to do for that many seconds.

        First UnknownMachine (31002) unless every process's type is installed
        (:meth:`check_installed`); so does a claim that finds a type gone, rather than claim
        in vain for ever."""
        if not self._installed:
            self.check_installed()
        previous = self._install_signals() if handle_signals else {}
        delay, idle_since = self.idle_min, time.monotonic()
        timer_thread = None
        if self._timer_loop is not None:
            self._timer_loop.stopping.clear()
            timer_thread = threading.Thread(target=self._timer_loop.run, name=f"pyfsm-timers-{self.owner}", daemon=True)
            timer_thread.start()
        try:
            while not self.stop_event.is_set():
                if self.run_once():
                    delay, idle_since = self.idle_min, time.monotonic()
                    continue
                if until_idle is not None and time.monotonic() - idle_since >= until_idle:
                    break
                self.stop_event.wait(delay)
                delay = min(delay * 2, self.idle_max)
        finally:
            if timer_thread is not None and self._timer_loop is not None:
                self._timer_loop.stop()  # a batch being fired finishes (one transaction) first
                timer_thread.join()
                loop = self._timer_loop  # it counted what it fired: the stats take its totals
                self.stats.timers_fired, self.stats.timers_dropped, self.stats.timers_held = (
                    loop.fired,
                    loop.dropped,
                    loop.held,
                )
            self.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return self.stats

    # -- internals ------------------------------------------------------------------------

    def _run(self, process: Process, row: dict[str, Any]) -> None:
        try:
            result = run_claimed(self.store, process, row, self.owner, self.stop_event, self.metrics)
        except FsmError as exc:  # the database refused; the claim runs out and another try follows
            self._error(process)
            log.warning("pyfsm worker %s: %s %s: %s", self.owner, process.name, row.get("instance_key"), exc)
            return
        self._record(process, [result])

    def _record(self, process: Process, results: list[RunResult]) -> None:
        for result in results:
            self.stats.runs += 1
            self.stats.steps += result.steps
            self.stats.by_status[result.status] = self.stats.by_status.get(result.status, 0) + 1
            if self.metrics is not None:
                self.metrics.finished(process.name, result)
            if self.on_run is not None:
                self.on_run(result)

    def _error(self, process: Process) -> None:
        self.stats.errors += 1
        if self.metrics is not None:
            self.metrics.error(process.name)

    def _release_unknown_claims(self, process: Process, keeper: ClaimKeeper) -> bool:
        """The claim's reply was lost, perhaps after it committed: give back what this worker
        may hold without knowing it, so that the runs do not wait for the claim to run out
        and then count an attempt of their step as if a worker had died running them.
        Whether the server answered."""
        try:
            released = release_claims(self.store, process, self.owner, keeper.held(process))
        except FsmError as exc:  # still down: tried again before the next claim (or they run out)
            log.warning("pyfsm worker %s: could not give back unknown claims of %s: %s", self.owner, process.name, exc)
            return False
        if released:
            self.stats.handed_back += released
            log.info(
                "pyfsm worker %s: gave back %d claim(s) of %s whose reply was lost", self.owner, released, process.name
            )
        return True

    def _hand_back(self, process: Process, rows: list[dict[str, Any]]) -> None:
        """Claimed but not started: due again now, for any worker."""
        for row in rows:
            try:
                self.store.gateway.call_one(
                    routines.STEP,
                    (
                        row["instance_key"],
                        self.owner,
                        int(row["version"]),
                        "[]",
                        "running",
                        0,
                        process.claim_seconds,
                        None,
                        None,
                    ),
                    writes=True,
                    retry_connection=False,
                    machine=process.name,
                    key=row["instance_key"],
                )
                self.stats.handed_back += 1
            except FsmError as exc:  # its claim simply runs out
                log.warning("pyfsm worker %s: could not hand back %s: %s", self.owner, row["instance_key"], exc)

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda _signum, _frame: self.stop())
        return previous
