"""Workers as real processes: a worker killed mid-handler, a graceful SIGTERM, four workers
draining 2,000 instances.

Handlers write their side effects to the table ``side_effects`` on their own autocommitted
connection (tests/helpers/engine_fixtures.py), so the tests can tell how often a handler really
ran, apart from how often its transition was applied (history).
"""

from __future__ import annotations

import os
import queue
import signal
import time
from collections import Counter
from typing import Any

import pymysql
import pytest
from helpers.common import unique
from helpers.engine_fixtures import build
from helpers.workers import SPAWN, effects, spawn_worker

from pyfsm import Store, Worker
from pyfsm.db import parse_dsn

TIMEOUT = 90


def wait_for(check: Any, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_worker_killed_mid_handler_and_another_finishes_after_the_claim_expires(
    store: Store, dsn: str, side: Any
) -> None:
    name = unique("killed")
    settings = {"claim_seconds": 2.0}
    process = build("slow", name, **settings)
    store.define(process.machine)
    store.create(name, "k-1")
    store.enqueue(name, "k-1")
    out, start = SPAWN.Queue(), SPAWN.Event()
    start.set()
    victim = spawn_worker(dsn, "slow", name, settings, {"PYFSM_SLOW_SECONDS": "60"}, 60, start, out)
    wait_for(lambda: ("k-1", "charge-start") in [(k, w) for k, w, _ in effects(side, name)], "the handler to start")
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(timeout=30)
    killed_at = time.monotonic()
    assert store.get(name, "k-1").state == "charge"  # reserve was committed; charge was not
    rescuer = spawn_worker(dsn, "slow", name, settings, {"PYFSM_SLOW_SECONDS": "0"}, 4, start, out)
    report = out.get(timeout=TIMEOUT)
    rescuer.join(timeout=30)
    assert report["error"] is None, report["error"]
    assert time.monotonic() - killed_at >= 1.0  # it had to wait for the claim to run out
    instance = store.get(name, "k-1")
    assert (instance.state, instance.status) == ("done", "completed")
    history = store.history(name, "k-1")
    assert [(h.event, h.handler) for h in history] == [
        (None, None),
        ("next", "counted"),
        ("next", "slow_charge"),
        ("next", "counted"),
    ]  # every transition once
    runs = Counter(w for _k, w, _p in effects(side, name))
    assert runs == {"reserve": 1, "charge-start": 2, "charge-end": 1, "ship": 1}  # the handler ran twice
    assert {p for _k, w, p in effects(side, name) if w == "charge-end"} == {report["pid"]}


def test_sigterm_finishes_the_current_step_and_hands_the_instance_back(store: Store, dsn: str, side: Any) -> None:
    name = unique("graceful")
    process = build("slow", name)
    store.define(process.machine)
    store.create(name, "g-1")
    store.enqueue(name, "g-1")
    out, start = SPAWN.Queue(), SPAWN.Event()
    start.set()
    worker = spawn_worker(dsn, "slow", name, {}, {"PYFSM_SLOW_SECONDS": "1.5"}, 60, start, out)
    wait_for(lambda: ("g-1", "charge-start") in [(k, w) for k, w, _ in effects(side, name)], "the handler to start")
    os.kill(worker.pid, signal.SIGTERM)
    report = out.get(timeout=30)
    worker.join(timeout=30)
    assert report["error"] is None, report["error"] and worker.exitcode == 0
    instance = store.get(name, "g-1")
    assert (instance.state, instance.status) == ("ship", "running")  # charge finished and was committed
    info = store.run_info(name, "g-1")
    assert info is not None and info.claimed_by is None and info.due_at is not None  # handed back, due
    assert Worker(store, [process]).run(handle_signals=False, until_idle=0.3).steps == 1
    assert store.get(name, "g-1").status == "completed"


def test_four_workers_drain_2000_instances_each_completed_exactly_once(store: Store, dsn: str, side: Any) -> None:
    name = unique("drain")
    process = build("drain", name)
    store.define(process.machine)
    keys = [f"d-{i:04d}" for i in range(2000)]
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())  # autocommit, like pyfsm
    try:
        for i in range(0, len(keys), 500):  # raw INSERTs start instances like create() does
            chunk = keys[i : i + 500]
            conn.cursor().execute(
                f"INSERT INTO `fsm_{name}` (instance_key) VALUES " + ", ".join(["(%s)"] * len(chunk)), chunk
            )
    finally:
        conn.close()
    for key in keys:
        store.enqueue(name, key)
    out, start = SPAWN.Queue(), SPAWN.Event()
    workers = [spawn_worker(dsn, "drain", name, {}, {}, 1.5, start, out) for _ in range(4)]
    start.set()
    reports = []
    deadline = time.monotonic() + TIMEOUT
    while len(reports) < len(workers):
        try:
            reports.append(out.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            pytest.fail(f"{len(reports)} of 4 workers reported within {TIMEOUT} s")
    for w in workers:
        w.join(timeout=30)
    assert [r["error"] for r in reports if r["error"]] == []
    assert sum(r["runs"] for r in reports) == 2000 and sum(r["steps"] for r in reports) == 4000
    assert all(r["runs"] > 0 for r in reports), [r["runs"] for r in reports]  # all four took part
    assert store.counts(name) == {"done": 2000}
    admin = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        with admin.cursor() as cur:
            cur.execute(
                f"SELECT COUNT(*), COUNT(DISTINCT instance_id), MIN(n), MAX(n) FROM (SELECT instance_id, "
                f"COUNT(*) AS n FROM `fsm_{name}_transitions` GROUP BY instance_id) t"
            )
            assert cur.fetchone() == (2000, 2000, 3, 3)  # created + one + two, once each
            cur.execute("SELECT COUNT(*) FROM fsm_runs WHERE machine = %s", (name,))
            assert cur.fetchone() == (0,)
    finally:
        admin.close()
    ran = Counter((k, w) for k, w, _p in effects(side, name))
    assert len(ran) == 4000 and set(ran.values()) == {1}  # no crash: every handler ran exactly once


def test_slow_handlers_longer_than_the_claim_run_once_with_two_workers(store: Store, dsn: str, side: Any) -> None:
    """The claim heartbeat keeps a live worker's claims, the waiting rows of its batch too."""
    name = unique("slowclaim")
    settings = {"claim_seconds": 0.6}
    process = build("slow", name, **settings)
    store.define(process.machine)
    for key in ("s-1", "s-2", "s-3"):
        store.create(name, key)
        store.enqueue(name, key)
    out, start = SPAWN.Queue(), SPAWN.Event()
    workers = [
        spawn_worker(dsn, "slow", name, settings, {"PYFSM_SLOW_SECONDS": "1.0"}, 1.5, start, out) for _ in range(2)
    ]
    start.set()
    reports = [out.get(timeout=TIMEOUT) for _ in workers]
    for w in workers:
        w.join(timeout=30)
    assert [r["error"] for r in reports if r["error"]] == []
    assert store.counts(name) == {"done": 3}
    runs = Counter((k, w) for k, w, _p in effects(side, name))
    assert {k: runs[(k, "charge-start")] for k in ("s-1", "s-2", "s-3")} == {"s-1": 1, "s-2": 1, "s-3": 1}
