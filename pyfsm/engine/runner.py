"""Running a Process: handlers around the database's transitions.

One claimed instance at a time: take its locks if its type uses them, run the handler of
its state, commit the step with ``fsm_{type}_step_v2`` (one round trip: the transition through
the trigger, then the status and the queue), and go on while the outcome says so. A worker
runs its batch side by side instead (pyfsm.engine.batch), with the same steps and guarantees.

What is guaranteed, and what is not:

* A step's transition is applied at most once. ``fsm_{type}_step_v2`` checks that the caller
  still holds the claim and that the instance is at the version the step started from;
  a step re-run after a crash, or by a second worker whose claim replaced an expired one,
  fails that check and writes nothing.
* A handler runs at least once per committed step, and may run more than once: when a
  worker dies after the handler returned but before the commit, the step is run again by
  the next claimer. While a worker is alive a heartbeat keeps its claims, so a slow
  handler is never run twice at the same time (and a handler that hangs keeps its claim:
  give slow outside calls their own timeouts). Handlers that
  call the outside world should make that call idempotent with ``ctx.step_id`` as the
  idempotency key: it is the same for every run, retry and resumption of the same step.
* A claim that ran out without being given back counts as an attempt of the step, so a
  step that keeps killing its worker ends like any failing step (failed, or its failure
  event) after max_attempts.
* save_after_step on (the default): every step is committed on its own; a crash loses at
  most the step in progress. Off: up to ``batch_steps`` consecutive steps are committed
  together, so a crash loses (and re-runs) every step since the last commit.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import traceback
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..db.jsondata import dump_object
from ..errors import (
    ClaimLost,
    Conflict,
    DatabaseUnavailable,
    Deadlock,
    FsmError,
    InvalidArgument,
    InvalidData,
    LockHeld,
    LockLost,
    LockNotAcquired,
)
from ..locks import Lease, new_owner
from ..schema import routines
from ..schema.routines import Routine
from .context import Context, Outcome, ProcessLike, RunResult, copy_data

if TYPE_CHECKING:
    from ..store import Store
    from .metrics import WorkerMetrics

log = logging.getLogger("pyfsm.engine")

#: How long an instance whose lock is busy waits before it is due again.
LOCK_BUSY_REQUEUE_SECONDS = 0.5


class ClaimedRun:
    """One claimed instance being run: the state the loop carries between steps."""

    def __init__(
        self,
        store: Store,
        process: ProcessLike,
        row: Mapping[str, Any],
        owner: str,
        stop: threading.Event | None,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.store, self.process, self.owner, self.stop = store, process, owner, stop
        self.metrics = metrics  # a worker's WorkerMetrics: handler and commit times (None: not timed)
        self.key: str = row["instance_key"]
        self.lookup_key: str | None = row["lookup_key"]
        self.state: str = row["current_state"]
        self.status: str = row["status"]
        self.version: int = int(row["version"])
        raw = row["data"]
        self.data: dict[str, Any] = json.loads(raw) if isinstance(raw, str | bytes) else dict(raw or {})
        self.attempt = int(row["attempt"])  # failed attempts of the current step so far
        self.instance_id = int(row["id"])
        self.entered = int(row["entered"]) if row.get("entered") is not None else self.version
        self.pause_requested = bool(row["pause_requested"])
        override = row["run_immediately"]
        self.run_immediately = process.run_immediately if override is None else bool(override)
        self.save_after_step = bool(row["save_after_step"]) if row["save_after_step"] is not None else True
        self.uses_locks = bool(row["uses_global_lock"]) or bool(row["uses_local_lock"])
        self.pending: list[dict[str, Any]] = []
        self.committed_data = self.data
        self.committed_version = self.version
        self.steps = 0
        self.error: str | None = None
        self.lease: Lease | None = None

    # -- database calls (through the lease's connection when the instance is locked) -------

    def _call(self, routine: Routine, args: tuple[Any, ...]) -> dict[str, Any]:
        context = {"machine": self.process.name, "key": self.key}
        if self.lease is not None:
            return self.lease.call(routine, args, writes=True, **context)[0]
        return self.store.gateway.call_one(routine, args, retry_connection=False, writes=True, **context)

    def commit(self, status: str, *, go_on: bool = False, requeue_seconds: float | None = None) -> bool:
        """Commit the pending steps and what happens next; True if the run goes on."""
        return self.committed(self.commit_call(self.step_args(status, go_on, requeue_seconds)))

    def commit_call(self, args: tuple[Any, ...]) -> dict[str, Any]:
        """step_v2 with these arguments (timed when the worker keeps metrics)."""

        def call() -> dict[str, Any]:
            return self._call(routines.STEP, args)

        return call() if self.metrics is None else self.metrics.time_commit(self.process.name, call)

    def step_args(self, status: str, go_on: bool = False, requeue_seconds: float | None = None) -> tuple[Any, ...]:
        """step_v2's arguments for committing the pending steps and what happens next.

        Data a handler changed without firing an event (it paused, completed or waits) is
        written with the status."""
        last = self.pending[-1]["data"] if self.pending else self.committed_data
        data = None if self.data == last else json.dumps(self.data, separators=(",", ":"), ensure_ascii=False)
        return (
            self.key,
            self.owner,
            self.committed_version,
            json.dumps(self.pending, separators=(",", ":"), ensure_ascii=False),
            status,
            int(go_on),
            self.process.claim_seconds,
            requeue_seconds,
            data,
        )

    def committed(self, row: Mapping[str, Any]) -> bool:
        """Take in where a commit left the instance (step_v2's row); True if the run goes on."""
        self.committed_data = self.data
        self.steps += len(self.pending)
        self.state, self.status = row["state"], row["status"]
        self.version = self.committed_version = int(row["version"])
        if self.pending:
            self.attempt = 0
            self.entered = self.version  # the last step's transition: its sort_key is the version
        self.pending = []
        return bool(int(row["continue"]))

    def failed(
        self,
        spec_name: str,
        exc: BaseException,
        *,
        retryable: bool,
        failure_event: str | None,
        attempt: int | None = None,
    ) -> None:
        """Record a failed attempt: retry later, fire the failure event, or fail."""
        if self.pending:  # the steps before this one succeeded: keep them
            self.commit("running", go_on=True)
        attempt = self.attempt + 1 if attempt is None else attempt
        spec = self.process.handler_for(self.state)
        limit = self.process.attempts_for(spec) if spec is not None else 1
        retry_in = None
        if retryable and attempt < limit:
            delay = min(self.process.max_backoff, self.process.backoff * 2 ** (attempt - 1))
            retry_in = delay * random.uniform(0.5, 1.5)
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        row = self._call(
            routines.STEP_FAILED,
            (
                self.process.name,
                self.key,
                self.owner,
                self.committed_version,
                spec_name,
                attempt,
                f"{type(exc).__module__}.{type(exc).__qualname__}"[-255:],
                str(exc)[:1000],
                text[-4000:],
                retry_in,
                None if retry_in is not None else failure_event,
            ),
        )
        self.state, self.status, self.version = row["state"], row["status"], int(row["version"])
        self.committed_version = self.version
        if isinstance(exc, _HandlerFailed):  # ctx.fail(): on purpose, never retried
            self.error = f"failed by its handler: {exc}"
            log.warning(
                "pyfsm: %s %s: handler %s failed the instance on purpose (ctx.fail; not retried): %s -> %s",
                self.process.name,
                self.key,
                spec_name,
                exc,
                row["outcome"],
            )
            return
        self.error = f"{type(exc).__name__}: {exc}"
        log.warning(
            "pyfsm: %s %s: %s failed (attempt %d of %d): %s -> %s",
            self.process.name,
            self.key,
            spec_name,
            attempt,
            limit,
            self.error,
            row["outcome"],
        )

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> RunResult:
        try:
            if self.uses_locks and self.status == "running" and not self.pause_requested:
                try:
                    self.lease = self.store.lock(self.process.name, self.key, attempts=2)
                except LockNotAcquired as exc:
                    self.error = str(exc)
                    self.commit("running", requeue_seconds=LOCK_BUSY_REQUEUE_SECONDS * random.uniform(0.5, 1.5))
                    return self.result()
            self.loop()
        finally:
            lease, self.lease = self.lease, None  # a hand-back after this goes through the pool
            if lease is not None:
                lease.release()
        return self.result()

    def loop(self) -> None:
        while (request := self.advance()) is not None and self.commit(**request):
            pass

    def advance(self) -> dict[str, Any] | None:
        """Run the instance's next handler (with save_after_step off, possibly several) and say
        what to commit: step_v2's status, go_on and requeue_seconds, or None when the run is
        over (a failure was recorded). A commit that returns False ends the run too."""
        machine = self.process.machine
        while True:
            if self.status != "running":  # claimed while paused, waiting or done: give the claim back
                return {"status": self.status}
            if self.pause_requested:
                return {"status": "running"}  # step_v2 turns a requested pause into 'paused'
            if self.stop is not None and self.stop.is_set():
                return {"status": "running"}  # hand back: due now for any worker
            if self.pending and self._pause_requested():  # batch mode: a pause waits for no commit
                return {"status": "running"}
            spec = self.process.handler_for(self.state)
            if spec is None:  # a final state (the trigger completed it) or one without a handler
                return {"status": "completed" if self.state in machine.final else "waiting"}
            non_retryable = spec.non_retryable + self.process.non_retryable
            failure_event = spec.failure_event or self.process.failure_event
            if self.attempt >= self.process.attempts_for(spec):  # its claims ran out: the worker died or hung
                self.failed(
                    spec.name,
                    StepAbandoned(
                        f"step {self.state!r} was claimed {self.attempt} time(s) without finishing: its worker died "
                        "while it ran"
                    ),
                    retryable=False,
                    failure_event=failure_event,
                    attempt=self.attempt,
                )
                return None
            ctx = Context(
                machine=self.process.name,
                key=self.key,
                lookup_key=self.lookup_key,
                state=self.state,
                data=copy_data(self.data),
                attempt=self.attempt + 1,
                version=self.version,
                step_id=f"{self.process.name}:{self.key}:{self.entered}",
            )
            try:
                outcome = (
                    spec.fn(ctx)
                    if self.metrics is None
                    else self.metrics.run_handler(self.process.name, self.state, spec.fn, ctx)
                )
                step = self._checked(ctx, outcome)
            except Exception as exc:
                # a handler bug or unserializable data fails the same way every time
                retryable = not isinstance(exc, (*non_retryable, _HandlerBug, InvalidData))
                self.failed(spec.name, exc, retryable=retryable, failure_event=failure_event)
                return None
            if outcome is None or outcome.kind == "wait":
                self.data = ctx.data
                return {"status": "waiting"}
            if outcome.kind == "fire":
                # with guards, the rule the data picks, as the database will (it checks at commit)
                target = machine.target(self.state, step or "", ctx.data)
                if target is None and self.pending:
                    # its guards refuse it here: the steps before it commit without it, and the
                    # next run judges it alone (its handler runs again, as after any lost run)
                    return {"status": "running", "go_on": self.run_immediately}
                self.pending.append({"event": step, "handler": spec.name, "data": ctx.data})
                self.data = ctx.data
                if (
                    self.save_after_step
                    or len(self.pending) >= self.process.batch_steps
                    or not self.run_immediately
                    or target is None
                ):
                    return {"status": "running", "go_on": self.run_immediately}
                # save_after_step off: go on in memory; the database checks the batch at commit
                self.state = target
                self.version += 1
                self.entered = self.version
                continue
            if outcome.kind == "fail":
                self.failed(
                    spec.name,
                    _HandlerFailed(outcome.reason or "the handler failed the instance"),
                    retryable=False,
                    failure_event=None,
                )
                return None
            self.data = ctx.data
            return {"status": "paused" if outcome.kind == "pause" else "completed"}

    def _pause_requested(self) -> bool:
        info = self.store.run_info(self.process.name, self.key)
        return bool(info and info.pause_requested)

    def _checked(self, ctx: Context, outcome: Outcome | None) -> str | None:
        """Refuse, before anything is written, what a handler must not return."""
        if outcome is not None and not isinstance(outcome, Outcome):
            raise _HandlerBug(
                f"handler returned {outcome!r:.80}; return ctx.fire(event), ctx.next(), ctx.pause(), "
                "ctx.complete(), ctx.fail() or ctx.wait()"
            )
        if not isinstance(ctx.data, dict):
            raise _HandlerBug(f"ctx.data must stay a dict, got {type(ctx.data).__name__}")
        dump_object("data", ctx.data)  # InvalidData for what JSON cannot hold, non-string keys too
        if outcome is not None and outcome.kind == "fire":
            machine = self.process.machine
            if not machine.allows(self.state, outcome.event or ""):  # its guards are the database's to test
                events = list(dict.fromkeys(t.event for t in machine.edges))
                if outcome.event not in events:
                    raise _HandlerBug(
                        f"event {outcome.event!r} is not allowed from {self.state!r}: machine type "
                        f"{machine.name!r} has no such event; its events: {', '.join(events)}"
                    )
                raise _HandlerBug(f"event {outcome.event!r} is not allowed from {self.state!r}")
            return outcome.event
        return None

    def result(self) -> RunResult:
        return RunResult(self.key, self.state, self.status, self.version, self.steps, self.error)


class _HandlerBug(InvalidArgument):
    """A handler returned something the engine cannot apply; never retried."""


class _HandlerFailed(Exception):
    """A handler returned ctx.fail(reason)."""


class StepAbandoned(Exception):
    """A step's claims ran out max_attempts times without the step finishing."""


StepAbandoned.__module__ = "pyfsm"


_HandlerFailed.__module__ = "pyfsm"
_HandlerFailed.__qualname__ = "HandlerFailed"


def run_claimed(
    store: Store,
    process: ProcessLike,
    row: Mapping[str, Any],
    owner: str,
    stop: threading.Event | None = None,
    metrics: WorkerMetrics | None = None,
) -> RunResult:
    """Run one instance the caller has claimed (a row of fsm_claim_v1).

    A database error never leaves the claim to run out: a lost claim is someone else's
    now; a version conflict (someone moved the instance meanwhile) or a passing failure
    hands the run back; anything else (e.g. a lock-using instance without a lookup key)
    is recorded in fsm_errors and fails the step, since running it again cannot help.
    """
    run = ClaimedRun(store, process, row, owner, stop, metrics)
    try:
        return run.run()
    except FsmError as exc:
        return recover(run, exc)


def recover(run: ClaimedRun, error: FsmError) -> RunResult:
    """After a database error in ``run``: never leave its claim to run out (see run_claimed)."""
    store, process = run.store, run.process
    if isinstance(error, ClaimLost):
        log.warning("pyfsm: %s %s: claim lost, another worker runs it: %s", process.name, run.key, error)
        return RunResult(run.key, run.state, run.status, run.version, run.steps, str(error))
    # what the failed commit carried is dropped: steps, and data that no transition
    # wrote; the hand-back or the failure below writes neither
    run.pending, run.data = [], run.committed_data
    try:
        if isinstance(error, Conflict | DatabaseUnavailable | Deadlock | LockHeld | LockLost):
            current = store.get(process.name, run.key)
            run.committed_version, run.data = current.version, current.data
            run.committed_data = run.data
            # a conflict means someone moved the instance: run it again at once; a passing
            # failure (server, deadlock, lock) gets a moment first
            run.commit("running", requeue_seconds=None if isinstance(error, Conflict) else LOCK_BUSY_REQUEUE_SECONDS)
        else:
            spec = process.handler_for(run.state)
            run.failed(spec.name if spec else "pyfsm", error, retryable=False, failure_event=None)
    except FsmError as again:  # the claim runs out and the run is due again then
        log.warning("pyfsm: %s %s: %s; and could not hand the run back: %s", process.name, run.key, error, again)
    return RunResult(run.key, run.state, run.status, run.version, run.steps, str(error))


class ClaimKeeper:
    """Renews the claims a worker or caller is holding, every third of their claim_seconds.

    Only the claims registered with :meth:`add` and not yet :meth:`discard`-ed are renewed,
    each with its own process's claim_seconds: a claim whose hand-back failed is left to run
    out, and a dead claimer's claims run out. The heartbeat does not watch the handler: a
    handler that hangs keeps its claim; give slow outside calls their own timeouts.
    """

    def __init__(self, store: Store, owner: str) -> None:
        self.store, self.owner = store, owner
        self._claims: dict[str, tuple[float, set[int]]] = {}  # machine -> (claim_seconds, instance ids)
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ClaimKeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, process: ProcessLike, instance_ids: list[int]) -> None:
        with self._mutex:
            _seconds, ids = self._claims.setdefault(process.name, (process.claim_seconds, set()))
            ids.update(instance_ids)
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name=f"pyfsm-claims-{self.owner}", daemon=True)
                self._thread.start()

    def discard(self, process: ProcessLike, instance_id: int) -> None:
        with self._mutex:
            if process.name in self._claims:
                self._claims[process.name][1].discard(instance_id)

    def held(self, process: ProcessLike) -> set[int]:
        """The instance ids of ``process`` being renewed now."""
        with self._mutex:
            return set(self._claims.get(process.name, (0.0, set()))[1])

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join()

    def _beat(self) -> None:
        while True:
            with self._mutex:
                active = [secs for secs, ids in self._claims.values() if ids]
            if self._stop.wait(min(active) / 3 if active else 0.2):
                return
            with self._mutex:
                due = [(m, secs, ",".join(map(str, sorted(ids)))) for m, (secs, ids) in self._claims.items() if ids]
            for machine, seconds, ids in due:
                try:
                    self.store.gateway.call(
                        routines.RENEW_CLAIMS, (self.owner, machine, ids, seconds), retry_connection=True, writes=True
                    )
                except Exception as exc:
                    log.warning("pyfsm: renewing the claims of %s failed: %s", self.owner, exc)


def claim(
    store: Store, process: ProcessLike, owner: str, *, limit: int = 1, key: str | None = None
) -> list[dict[str, Any]]:
    # a type not defined: the gateway's error says which ones are
    return store.gateway.call(
        routines.CLAIM,
        (process.name, owner, limit, process.claim_seconds, key),
        retry_connection=False,
        writes=True,
        machine=process.name,
        key=key,
    )


def release_claims(store: Store, process: ProcessLike, owner: str, keep: Iterable[int] = ()) -> int:
    """Give back the claims of ``owner`` on ``process`` other than ``keep`` (fsm_release_claims_v1).

    After a claim call failed on the way back, the claim may have committed all the same:
    given back at once, its run is due again with its attempt unchanged, instead of running
    out and counting an attempt as if a worker had died running it. Safe to repeat.
    """
    rows = store.gateway.call(
        routines.RELEASE_CLAIMS,
        (owner, process.name, ",".join(str(i) for i in sorted(keep))),
        retry_connection=True,
        writes=True,
        machine=process.name,
    )
    return int(rows[0]["released"]) if rows else 0


def run_key(store: Store, process: ProcessLike, key: str) -> RunResult:
    """Claim ``key`` for this caller and run it (RunClaimed if a worker is running it now)."""
    owner = new_owner()
    try:
        rows = claim(store, process, owner, key=key)
    except DatabaseUnavailable:
        with contextlib.suppress(FsmError):  # a lost reply: the claim may have committed; give it back
            release_claims(store, process, owner)
        raise
    with ClaimKeeper(store, owner) as keeper:
        keeper.add(process, [int(rows[0]["id"])])
        return run_claimed(store, process, rows[0], owner)


def start(
    store: Store,
    process: ProcessLike,
    key: str,
    *,
    data: Mapping[str, Any] | None,
    lookup_key: str | None,
    run_immediately: bool | None,
) -> RunResult:
    """Create ``key`` and run its first step here (all of them with run_immediately on).

    The per-instance choice is recorded with the run first, due only after a claim's
    length: a worker takes over if this caller dies before it gets going.
    """
    store.create(process.name, key, data=data, lookup_key=lookup_key)
    if run_immediately is not None:
        store.enqueue(process.name, key, run_immediately=run_immediately, delay_seconds=process.claim_seconds)
    return run_key(store, process, key)
