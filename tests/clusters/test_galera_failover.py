"""Failover on a Galera cluster (issue 16, part 3): the node everything writes through is
killed (SIGKILL) while senders, workers, lock holders and two relays run; they move to a
surviving node through the DSN list, and the killed node rejoins and catches up.

Every process is given a DSN naming every node: all of them write through the cluster's
writer node (pyfsm connects to no other, galera_writes=one), the topology docs/scaling.md
supports; when it dies, the cluster names another and they move there. What is checked:
* every send a sender saw acknowledged is in the history exactly once (request ids make
  the repeats after a lost reply safe), and sends succeed again within 10 s of the kill;
* the workers commit no step twice (each instance: created, one, two, nothing more);
* no two lock holders of one account overlap, before, across and after the failover;
* the relays publish every event, in order per instance;
* the killed node rejoins, and every node holds the same valid histories.
"""

from __future__ import annotations

import itertools
import multiprocessing
import random
import time
import traceback
from collections import defaultdict
from dataclasses import replace
from typing import Any

import pytest
from helpers.common import order_machine, unique
from helpers.failover import JOBS, jobs, locker, worker
from helpers.flips import FLIP, INSTANCES
from helpers.galera_cluster import GaleraCluster
from helpers.histories import check_chains
from helpers.kafka_broker import Broker
from helpers.processes import collect
from helpers.relay import partition_order, query, relay_process, stop_process, wait_for

from pyfsm import FsmError, Machine, Store
from pyfsm.db import Settings

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")
RUN_AFTER_KILL = 8.0  # seconds the processes go on after the kill


def writer(nodes: list[Settings]) -> Settings:
    """What an application uses: every node in the DSN, writes through the writer node only
    (``galera_writes=one``, the default): every process finds the same node."""
    return replace(nodes[0].with_hosts([(s.host, s.port) for s in nodes]), galera_writes="one")


# -- the processes (module level: spawn imports them by name) ------------------------------------


def sender(dsn: str, seed: int, stop: Any, out: Any) -> None:
    """Flip random instances with request ids until told to stop; report what was acknowledged
    and the longest wait between two acknowledgements."""
    rng = random.Random(seed)
    acked: list[str] = []
    longest, last, failures, error = 0.0, time.monotonic(), 0, None
    try:
        with Store(dsn, pool_size=1) as store:
            n = 0
            while not stop.is_set():
                request = f"s{seed}-{n}"
                key = f"k-{rng.randrange(INSTANCES)}"
                while True:  # the same request until it is acknowledged: a repeat applies nothing twice
                    try:
                        store.send("flip", key, "flip", request_id=request)
                        break
                    except FsmError:
                        failures += 1
                        time.sleep(0.05)
                now = time.monotonic()
                longest, last = max(longest, now - last), now
                acked.append(request)
                n += 1
                time.sleep(0.01)
    except Exception:
        error = traceback.format_exc()
    out.put({"acked": acked, "longest": longest, "failures": failures, "error": error})


# -- the test -------------------------------------------------------------------------------------


def test_the_writer_node_killed_under_load(galera: GaleraCluster, kafka: Broker, tmp_path: Any) -> None:
    nodes = galera.database("pyfsm_galera_failover")
    dsn = writer(nodes).dsn()
    topic = unique("t.failover")
    kafka.create_topic(topic)
    flip = Machine(name=FLIP.name, states=FLIP.states, start=FLIP.start, transitions=FLIP.transitions, topic=topic)
    name = unique("jobs")
    locked = order_machine(uses_global_lock=True)
    targets = []
    with Store(dsn) as store:
        store.migrate()
        store.define(flip)
        store.define(jobs(name).machine)
        store.define(locked)
        for n in range(INSTANCES):
            store.create(flip.name, f"k-{n}")
        for n in range(JOBS):
            store.create(name, f"j-{n}")
            store.enqueue(name, f"j-{n}")
        accounts = [unique("acct") for _ in range(2)]
        for n in range(6):
            key = unique("o")
            store.create(locked.name, key, lookup_key=accounts[n % 2])
            targets.append((locked.name, key, accounts[n % 2]))
    galera.wait_synced()

    stop, out = SPAWN.Event(), {kind: SPAWN.Queue() for kind in ("send", "work", "lock")}
    logs = {r: tmp_path / f"{r}.log" for r in ("A", "B")}
    relays = {r: relay_process(writer(nodes), kafka, r, logs[r], "--lease", "3") for r in logs}
    procs = [SPAWN.Process(target=sender, args=(dsn, seed, stop, out["send"])) for seed in range(3)]
    procs += [SPAWN.Process(target=worker, args=(dsn, name, stop, out["work"])) for _ in range(2)]
    procs += [SPAWN.Process(target=locker, args=(dsn, targets, seed, stop, out["lock"])) for seed in range(3)]
    try:
        for p in procs:
            p.start()
        wait_for(
            lambda: _count(nodes[0], f"SELECT COUNT(*) FROM `fsm_{name}_transitions`") > JOBS + 60,
            "the workers to be under way",
            timeout=60,
        )
        # the lock holders too: 13 moves under a lock (6 creations before them) leave at least
        # 10 whole holds in their reports even if each of the 3 loses its last one to the kill
        wait_for(
            lambda: _count(nodes[0], f"SELECT COUNT(*) FROM `fsm_{locked.name}_transitions`") >= 6 + 13,
            "the lock holders to be under way",
            timeout=60,
        )
        victim = galera.writer_index()
        galera.nodes[victim].kill()  # SIGKILL: the node every process writes through
        time.sleep(RUN_AFTER_KILL)
        alive = nodes[(victim + 1) % len(nodes)]
        wait_for(
            lambda: _count(alive, f"SELECT COUNT(*) FROM `fsm_{name}_transitions`") == 3 * JOBS,
            "the workers to finish on the surviving nodes",
            timeout=120,
        )
    finally:
        stop.set()
        sent = [out["send"].get(timeout=120) for _ in range(3)]
        worked = [out["work"].get(timeout=120) for _ in range(2)]
        locks = collect(out["lock"], 3)
        for p in procs:
            p.join(timeout=60)
    rejoined = galera.restart(victim)
    try:
        wait_for(
            lambda: _count(alive, "SELECT COUNT(*) FROM fsm_outbox WHERE published_at IS NULL") == 0,
            "the relays to publish everything",
            timeout=120,
        )
    finally:
        for proc in relays.values():
            stop_process(proc)

    errors = [r["error"] for r in (*sent, *worked, *locks) if r["error"]]
    assert not errors, "\n".join(errors)
    # senders: every acknowledged request once in the history, on every node (the rejoined one too)
    acked = [request for r in sent for request in r["acked"]]
    moves = [check_chains(settings, flip) for settings in nodes]
    assert all(m == moves[1] for m in moves), "every node holds the same histories"
    history = query(nodes[0], "SELECT request_id FROM fsm_flip_transitions WHERE request_id IS NOT NULL")
    assert sorted(r["request_id"] for r in history) == sorted(acked), "acknowledged = applied, once each"
    longest = max(r["longest"] for r in sent)
    assert longest < 10, f"sends stalled {longest:.1f} s around the kill"
    # workers: no step committed twice
    per_job = query(
        nodes[0],
        f"SELECT i.instance_key, COUNT(*) AS n, MAX(i.current_state) AS state FROM "
        f"`fsm_{name}_transitions` t JOIN `fsm_{name}` i ON i.id = t.instance_id "
        "GROUP BY i.instance_key",
    )
    assert len(per_job) == JOBS and {(r["n"], r["state"]) for r in per_job} == {(3, "done")}
    # locks: one holder per account at a time
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for report in locks:
        for account, entered, left in report["runs"]:
            spans[account].append((entered, left))
    for account, held in spans.items():
        held.sort()
        for (_e1, left1), (entered2, _l2) in itertools.pairwise(held):
            assert entered2 >= left1, f"{account}: two holders overlapped"
    assert sum(len(h) for h in spans.values()) >= 10, [
        (len(r["runs"]), r["refused"], r["failed"], r["kinds"]) for r in locks
    ]
    # relays: every event, in order per instance
    total = sum(moves[0].values()) + len(moves[0])
    messages = kafka.read(topic, count=total)
    assert partition_order(messages) == {key: list(range(1, n + 2)) for key, n in moves[0].items()}
    print(
        f"\ngalera failover: writer node killed; the longest wait for a send {longest:.2f} s; "
        f"{len(acked)} sends acknowledged ({sum(r['failures'] for r in sent)} attempts failed and were "
        f"repeated), {JOBS} jobs done by {sum(r['runs'] for r in worked)} runs, "
        f"{sum(len(h) for h in spans.values())} lock holds ({sum(r['failed'] for r in locks)} ended by the "
        f"kill: {[r['kinds'] for r in locks]}), {len(messages)} messages for {total} events; the node rejoined in {rejoined:.1f} s"
    )


def _count(settings: Settings, sql: str) -> int:
    return int(next(iter(query(settings, sql)[0].values())))
