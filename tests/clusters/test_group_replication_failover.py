"""Failover on a MySQL Group Replication group (issue 26, item 4): the primary is killed
(SIGKILL) while sender, worker and lock holder processes and two relay processes run; the
group elects a new primary, every process moves there through its DSN list, and the killed
member rejoins and catches up.

Every process is given a DSN naming every member, each list starting at another member (as
deployments that prefer a local member would): all of them write through the primary, since
pyfsm passes over members that are not (db.refuse_unless_writer). What is checked:
* every send a sender saw acknowledged is in the history exactly once, on every member (the
  rejoined one too); request ids make the repeats after a lost reply safe;
* sends are acknowledged again within seconds of the kill (measured, printed, bounded);
* the workers commit no step twice (each job: created, one, two, nothing more);
* no two lock holders of one account overlap, before, across and after the failover;
* every outbox row is published, and every event reaches Kafka, in order per instance.
"""

from __future__ import annotations

import itertools
import multiprocessing
import time
from collections import defaultdict
from typing import Any

import pytest
from helpers.common import order_machine, unique
from helpers.failover import JOBS, jobs, locker, worker
from helpers.flips import FLIP, INSTANCES
from helpers.group_flips import assert_acknowledged_once, rotated, sender
from helpers.group_replication import GroupReplication, group_replication_fixture  # noqa: F401  (the group)
from helpers.kafka_broker import Broker
from helpers.processes import collect
from helpers.relay import partition_order, query, relay_process, stop_process, wait_for

from pyfsm import Machine, Store
from pyfsm.db import Settings

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")
RUN_AFTER_KILL = 8.0  # seconds the processes go on after the kill
#: Sends must be acknowledged again this soon after the primary was killed. Measured: about 7 s
#: with the group's member_expel_timeout 0 (tests/helpers/group_replication.py); about 21 s with
#: MySQL's default of 5 s (docs/scaling.md).
WRITES_BACK_WITHIN = 45.0


def test_the_primary_killed_under_load(group_replication: GroupReplication, kafka: Broker, tmp_path: Any) -> None:
    group = group_replication
    databases = group.database("pyfsm_gr_failover")
    lists = [rotated(group, databases, n).dsn() for n in range(len(databases))]
    topic = unique("t.grfailover")
    kafka.create_topic(topic)
    flip = Machine(name=FLIP.name, states=FLIP.states, start=FLIP.start, transitions=FLIP.transitions, topic=topic)
    name = unique("jobs")
    locked = order_machine(uses_global_lock=True)
    targets = []
    with Store(lists[0]) as store:
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
    group.wait_applied()

    victim = group.primary_index()
    alive = databases[(victim + 1) % len(databases)]
    stop, out = SPAWN.Event(), {kind: SPAWN.Queue() for kind in ("send", "work", "lock")}
    logs = {r: tmp_path / f"{r}.log" for r in ("A", "B")}
    relays = {
        r: relay_process(rotated(group, databases, n + 1), kafka, r, logs[r], "--lease", "3")
        for n, r in enumerate(logs)
    }
    procs = [SPAWN.Process(target=sender, args=(lists[seed % 3], seed, stop, out["send"])) for seed in range(3)]
    procs += [SPAWN.Process(target=worker, args=(lists[n + 1], name, stop, out["work"])) for n in range(2)]
    procs += [
        SPAWN.Process(target=locker, args=(lists[seed % 3], targets, seed, stop, out["lock"])) for seed in range(3)
    ]
    killed_at = 0.0
    try:
        for p in procs:
            p.start()
        wait_for(
            lambda: _count(databases[victim], f"SELECT COUNT(*) FROM `fsm_{name}_transitions`") > JOBS + 60,
            "the workers to be under way",
            timeout=60,
        )
        wait_for(
            lambda: (
                _count(
                    databases[victim],
                    "SELECT COUNT(*) FROM (SELECT SUBSTRING_INDEX(request_id, '-', 1) "
                    "AS s FROM fsm_flip_transitions WHERE request_id IS NOT NULL "
                    "GROUP BY s HAVING COUNT(*) >= 5) t",
                )
                == 3
            ),
            "every sender to be under way",
            timeout=60,
        )  # so that the waits measured span the kill
        wait_for(
            lambda: _count(databases[victim], f"SELECT COUNT(*) FROM `fsm_{locked.name}_transitions`") > 6 + 10,
            "the lock holders to be under way",
            timeout=60,
        )
        killed_at = time.monotonic()
        group.members[victim].kill()  # SIGKILL: the member every process writes through
        time.sleep(RUN_AFTER_KILL)
        wait_for(
            lambda: _count(alive, f"SELECT COUNT(*) FROM `fsm_{name}_transitions`") == 3 * JOBS,
            "the workers to finish on the new primary",
            timeout=120,
        )
        elected = group.primary_index()
    finally:
        stop.set()
        sent = collect(out["send"], 3)
        worked = collect(out["work"], 2)
        locks = collect(out["lock"], 3)
        for p in procs:
            p.join(timeout=60)
    try:
        rejoined = group.restart(victim)
        wait_for(
            lambda: _count(alive, "SELECT COUNT(*) FROM fsm_outbox WHERE published_at IS NULL") == 0,
            "the relays to publish everything",
            timeout=120,
        )
    finally:
        for proc in relays.values():
            stop_process(proc)
    group.wait_applied()

    errors = [r["error"] for r in (*sent, *worked, *locks) if r["error"]]
    assert not errors, "\n".join(errors)
    assert elected != victim
    # senders: every acknowledged request once in the history, on every member (the rejoined one too)
    moves = assert_acknowledged_once(databases, sent)
    assert all(r["times"] and min(r["times"]) < killed_at for r in sent), "every sender was under way before the kill"
    back = min(t for r in sent for t in r["times"] if t > killed_at) - killed_at
    longest = max(b - a for r in sent for a, b in itertools.pairwise(r["times"]))
    assert back < WRITES_BACK_WITHIN, f"no send was acknowledged within {WRITES_BACK_WITHIN} s of the kill"
    # workers: no step committed twice
    per_job = query(
        alive,
        f"SELECT i.instance_key, COUNT(*) AS n, MAX(i.current_state) AS state FROM "
        f"`fsm_{name}_transitions` t JOIN `fsm_{name}` i ON i.id = t.instance_id "
        "GROUP BY i.instance_key",
    )
    assert len(per_job) == JOBS and {(r["n"], r["state"]) for r in per_job} == {(3, "done")}
    # lock holds, per account (checked last: the print says how they went)
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for report in locks:
        for account, entered, left in report["runs"]:
            spans[account].append((entered, left))
    # relays: every outbox row published; every event in Kafka, in order per instance
    events = len(query(alive, "SELECT id FROM fsm_outbox WHERE machine = %s", (flip.name,)))
    creations = len(query(alive, "SELECT id FROM fsm_flip"))
    assert events == moves + creations
    messages = kafka.read(topic, count=events)
    assert partition_order(messages) == {key: list(range(1, n + 2)) for key, n in _moves_per_key(alive).items()}, (
        "every event, in order per instance"
    )
    ids = {m.event["id"] for m in messages}
    assert len(ids) == events, "every outbox row published"
    repeated = len(messages) - len(ids)  # at least once: a batch produced but not marked when the primary died
    print(
        f"\ngroup replication failover: primary (member {victim}) killed; member {elected} elected; the first "
        f"send acknowledged {back:.2f} s after the kill, the longest wait between two sends of a sender "
        f"{longest:.2f} s; {sum(len(r['acked']) for r in sent)} sends acknowledged (attempts failed and "
        f"repeated: {[r['kinds'] for r in sent]}); {JOBS} jobs done by {sum(r['runs'] for r in worked)} runs; "
        f"{sum(len(h) for h in spans.values())} lock holds ({sum(r['failed'] for r in locks)} ended by the kill: "
        f"{[r['kinds'] for r in locks]}); {len(messages)} messages for {events} events ({repeated} repeated); "
        f"the member rejoined in {rejoined:.1f} s"
    )
    # locks: one holder per account at a time
    for account, held in spans.items():
        held.sort()
        for (_e1, left1), (entered2, _l2) in itertools.pairwise(held):
            assert entered2 >= left1, f"{account}: two holders overlapped"
    assert sum(len(h) for h in spans.values()) >= 10, [
        (len(r["runs"]), r["refused"], r["failed"], r["kinds"]) for r in locks
    ]


def _moves_per_key(settings: Settings) -> dict[str, int]:
    rows = query(
        settings,
        "SELECT i.instance_key AS k, COUNT(*) - 1 AS n FROM fsm_flip_transitions t "
        "JOIN fsm_flip i ON i.id = t.instance_id GROUP BY i.instance_key",
    )
    return {str(r["k"]): int(r["n"]) for r in rows}


def _count(settings: Settings, sql: str) -> int:
    return int(next(iter(query(settings, sql)[0].values())))
