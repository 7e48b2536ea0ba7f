"""Locks across real processes: mutual exclusion, parallel local locks, a holder killed with SIGKILL.

Every worker is its own interpreter (multiprocessing "spawn") with its own Store and
connections; the only thing that can serialise them is the database.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import signal
import time
import traceback
from collections import defaultdict
from typing import Any

import pymysql
import pytest
from helpers.common import order_machine, unique
from helpers.processes import collect

from pyfsm import LockNotAcquired, Store
from pyfsm.db import parse_dsn

SPAWN = multiprocessing.get_context("spawn")
TIMEOUT = 60


# -- worker processes (module level: spawn pickles them by name) ---------------------------


def hammer(dsn: str, targets: list[tuple[str, str, str]], worker: int, rounds: int, barrier: Any, out: Any) -> None:
    """Take the lock of a random instance, 'run a handler' for a few ms, record when it ran."""
    report: dict[str, Any] = {"worker": worker, "runs": [], "refused": 0, "error": None}
    rng = random.Random(worker)
    store = Store(dsn, pool_size=2)
    try:
        store.get(targets[0][0], targets[0][1])
        barrier.wait(timeout=60)
        for _ in range(rounds):
            machine, key, account = rng.choice(targets)
            try:
                lease = store.lock(machine, key, attempts=3, backoff=0.005)
            except LockNotAcquired:
                report["refused"] += 1
                continue
            with lease:
                entered = time.monotonic_ns()  # CLOCK_MONOTONIC: one clock for all processes
                state = store.get(machine, key).state
                time.sleep(rng.uniform(0.001, 0.004))
                lease.send("pay" if state == "new" else "refund")  # new <-> paid, under the lock
                left = time.monotonic_ns()
            report["runs"].append((account, entered, left, worker, machine, key))
    except Exception:
        report["error"] = traceback.format_exc()
    finally:
        store.close()
        out.put(report)


def hold(
    dsn: str,
    machine: str,
    key: str,
    seconds: float,
    lease_seconds: float | None,
    ready: Any,
    out: Any,
    release: Any = None,
) -> None:
    """Take a lock, say so, hold it ``seconds`` (or until ``release`` is set, or until killed), release it."""
    store = Store(dsn, pool_size=2)
    try:
        with store.lock(machine, key, lease_seconds=lease_seconds, attempts=1) as lease:
            out.put(("held", machine, key, lease.owner, time.monotonic_ns()))
            ready.set()
            if release is None:
                time.sleep(seconds)
            else:
                release.wait(seconds)
            out.put(("leaving", machine, key, lease.owner, time.monotonic_ns()))
    except LockNotAcquired as exc:
        out.put(("refused", machine, key, str(exc), time.monotonic_ns()))
        ready.set()
    finally:
        store.close()


# -- tests --------------------------------------------------------------------------------


def test_no_two_handlers_of_one_account_ever_overlap(store: Store, dsn: str) -> None:
    """6 processes x 40 rounds on 12 instances of two global-lock types sharing 3 accounts."""
    a, b = order_machine(uses_global_lock=True), order_machine(uses_global_lock=True)
    store.define(a)
    store.define(b)
    accounts = [unique("acct") for _ in range(3)]
    targets = []
    for i in range(12):
        machine, account = (a, b)[i % 2].name, accounts[i % 3]
        key = unique("o")
        store.create(machine, key, lookup_key=account)
        targets.append((machine, key, account))
    processes, rounds = 6, 40
    barrier, out = SPAWN.Barrier(processes), SPAWN.Queue()
    workers = [SPAWN.Process(target=hammer, args=(dsn, targets, w, rounds, barrier, out)) for w in range(processes)]
    for w in workers:
        w.start()
    reports = collect(out, processes)
    for w in workers:
        w.join(timeout=30)
    assert [r["error"] for r in reports if r["error"]] == []
    runs: dict[str, list[tuple[int, int, int, str, str]]] = defaultdict(list)
    for r in reports:
        for account, entered, left, worker, machine, _key in r["runs"]:
            runs[account].append((entered, left, worker, machine, _key))
    total = sum(len(v) for v in runs.values())
    refused = sum(r["refused"] for r in reports)
    assert total + refused == processes * rounds
    assert total >= processes * rounds // 4, (total, refused)  # real work happened ...
    assert refused > 0  # ... under real contention
    types_seen = set()
    for account, spans in runs.items():
        spans.sort()
        for (_e1, left1, w1, m1, k1), (entered2, _l2, w2, m2, k2) in itertools.pairwise(spans):
            assert entered2 >= left1, f"{account}: {m1} {k1} (worker {w1}) overlapped {m2} {k2} (worker {w2})"
        types_seen |= {m for _e, _l, _w, m, _k in spans}
    assert types_seen == {a.name, b.name}
    assert store.locks(lookup_key=accounts[0]) == []
    for machine, key, _account in targets:  # every run moved its instance once, under its lock
        assert store.get(machine, key).version == 1 + sum(
            1 for spans in runs.values() for _e, _l, _w, m, k in spans if (m, k) == (machine, key)
        )


def test_local_locks_let_other_types_of_the_account_run_in_parallel(store: Store, dsn: str) -> None:
    p, q = order_machine(uses_local_lock=True), order_machine(uses_local_lock=True)
    store.define(p)
    store.define(q)
    account = unique("acct")
    p1, p2, q1 = unique("p"), unique("p"), unique("q")
    store.create(p.name, p1, lookup_key=account)
    store.create(p.name, p2, lookup_key=account)
    store.create(q.name, q1, lookup_key=account)
    out = SPAWN.Queue()
    first_ready, release_first = SPAWN.Event(), SPAWN.Event()
    # p1 holds until the others are done, however long starting their processes takes
    first = SPAWN.Process(target=hold, args=(dsn, p.name, p1, TIMEOUT, None, first_ready, out, release_first))
    first.start()
    assert first_ready.wait(60)
    others, readies = [], []  # keep the events alive until the children have them
    for machine, key in ((q.name, q1), (p.name, p2)):
        readies.append(SPAWN.Event())
        proc = SPAWN.Process(target=hold, args=(dsn, machine, key, 0.2, None, readies[-1], out))
        proc.start()
        others.append(proc)
    try:
        events = collect(out, 4)  # first: held; q1: held + leaving; p2: refused
    finally:
        release_first.set()
    events += collect(out, 1)  # first: leaving
    for proc in [first, *others]:
        proc.join(timeout=30)
    by_key = defaultdict(list)
    for kind, _machine, key, _owner, at in events:
        by_key[key].append((kind, at))
    p1_held = dict(by_key[p1])
    assert [k for k, _ in by_key[q1]] == ["held", "leaving"]
    q1_held = dict(by_key[q1])
    assert p1_held["held"] < q1_held["held"] < p1_held["leaving"]  # ran while p1 was held
    assert [k for k, _ in by_key[p2]] == ["refused"]  # the same type for the same account did not


def test_a_holder_killed_with_sigkill(store: Store, dsn: str) -> None:
    """The advisory lock is free at once; the lock row holds until its expiry, then is free."""
    machine = order_machine(uses_global_lock=True)
    store.define(machine)
    account = unique("acct")
    key, other = unique("o"), unique("o")
    store.create(machine.name, key, lookup_key=account)
    store.create(machine.name, other, lookup_key=account)
    out, ready = SPAWN.Queue(), SPAWN.Event()
    victim = SPAWN.Process(target=hold, args=(dsn, machine.name, key, 600, 5.0, ready, out))
    victim.start()
    assert ready.wait(60)
    _held, _m, _k, owner, _at = out.get(timeout=10)
    os.kill(victim.pid, signal.SIGKILL)  # type: ignore[arg-type]
    victim.join(timeout=30)
    killed_at = time.monotonic()
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        deadline = time.monotonic() + 10
        while True:  # the server notices the dead connection and frees its advisory lock
            with conn.cursor() as cur:
                cur.execute("SELECT IS_USED_LOCK(CONCAT('fsm:g:', SHA2(%s, 224)))", (account,))
                if cur.fetchone()[0] is None:
                    break
            assert time.monotonic() < deadline, "the advisory lock outlived its connection by 10 s"
            time.sleep(0.05)
    finally:
        conn.close()
    freed_after = time.monotonic() - killed_at
    held = store.locks(lookup_key=account)
    assert [(h.owner, h.advisory_connection) for h in held] == [(owner, None)]
    assert time.monotonic() - killed_at < 4.0, "too slow to see the row still held (lease 5 s)"
    with pytest.raises(LockNotAcquired, match=owner):  # the row still holds: nobody else gets in yet
        store.lock(machine.name, other, attempts=1)
    deadline = time.monotonic() + 15
    while True:
        try:
            lease = store.lock(machine.name, other, attempts=1)
            break
        except LockNotAcquired:
            assert time.monotonic() < deadline, "the lock row outlived its expiry"
            time.sleep(0.1)
    with lease:
        assert lease.send("pay").to_state == "paid"
    waited = time.monotonic() - killed_at
    assert freed_after < waited  # the advisory lock went first, the row at its expiry (5 s lease)
    assert waited > 3.0  # most of the 5 s lease


def test_acquisition_gives_up_within_its_bound(store: Store, dsn: str) -> None:
    machine = order_machine(uses_global_lock=True)
    store.define(machine)
    account = unique("acct")
    key, other = unique("o"), unique("o")
    store.create(machine.name, key, lookup_key=account)
    store.create(machine.name, other, lookup_key=account)
    out, ready = SPAWN.Queue(), SPAWN.Event()
    holder = SPAWN.Process(target=hold, args=(dsn, machine.name, key, 5, None, ready, out))
    holder.start()
    try:
        assert ready.wait(60)
        for attempts, backoff in ((1, 0.0), (4, 0.05)):
            started = time.monotonic()
            with pytest.raises(LockNotAcquired) as caught:
                store.lock(machine.name, other, attempts=attempts, backoff=backoff)
            # the bound: the backoffs (at most 1.5x each, jitter) plus a little per attempt
            bound = sum(min(backoff * 2**i, 1.0) * 1.5 for i in range(attempts - 1)) + 0.5 * attempts
            assert time.monotonic() - started < bound
            assert caught.value.fields["holders"][0].instance_key == key
    finally:
        holder.kill()
        holder.join(timeout=30)
