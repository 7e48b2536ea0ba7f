"""The Kafka relay on a MySQL Group Replication group (issue 26, item 4): three relays, one
leader, and the primary killed under them.

Each relay's DSN names every member, each list starting at another member: all of them
connect to the primary (pyfsm passes over the secondaries). One leads (a row of
fsm_relay_leaders); the others stand by. Sender processes flip instances through their own
DSN lists; the primary is killed (SIGKILL); the group elects another and a relay leads
again through its DSN list. Every event arrives, in order per instance; only events the
leader had produced but not yet marked when the primary died may arrive twice."""

from __future__ import annotations

import itertools
import multiprocessing
import time
from typing import Any

import pytest
from helpers.common import unique
from helpers.flips import FLIP, INSTANCES
from helpers.group_flips import assert_acknowledged_once, rotated, sender
from helpers.group_replication import GroupReplication, group_replication_fixture  # noqa: F401  (the group)
from helpers.kafka_broker import Broker
from helpers.relay import partition_order, query, relay_process, stop_process, wait_for

from pyfsm import Machine, Store
from pyfsm.db import Settings

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")
LEASE = 3.0
#: A relay must publish again this soon after the primary was killed (the group's failover,
#: about 7 s here, and then the lease: docs/scaling.md).
LEADS_AGAIN_WITHIN = 45.0


def test_relays_through_the_dsn_list_lead_again_after_the_primary_died(
    group_replication: GroupReplication, kafka: Broker, tmp_path: Any
) -> None:
    group = group_replication
    databases = group.database("pyfsm_gr_relay")
    topic = unique("t.grrelay")
    kafka.create_topic(topic)
    machine = Machine(name=FLIP.name, states=FLIP.states, start=FLIP.start, transitions=FLIP.transitions, topic=topic)
    with Store(rotated(group, databases, 0).dsn()) as store:
        store.migrate()
        store.define(machine)
        for n in range(INSTANCES):
            store.create(machine.name, f"k-{n}")
    group.wait_applied()
    victim = group.primary_index()
    names = [f"R{n}" for n in range(len(databases))]
    logs = {name: tmp_path / f"{name}.log" for name in names}
    relays = {
        name: relay_process(rotated(group, databases, n), kafka, name, logs[name], "--lease", str(LEASE))
        for n, name in enumerate(names)
    }
    stop, out = SPAWN.Event(), SPAWN.Queue()
    senders = [
        SPAWN.Process(target=sender, args=(rotated(group, databases, seed).dsn(), seed, stop, out)) for seed in range(3)
    ]
    try:
        first = wait_for(lambda: _leader(databases[victim]), "a relay to lead", timeout=30)
        for name in names:
            if name != first:
                log = logs[name]
                wait_for(lambda log=log: "standby:" in log.read_text(), f"{name} to stand by", timeout=30)  # type: ignore[misc]
        for p in senders:
            p.start()
        wait_for(lambda: _published(databases[victim]) > 100, "the leader to publish")
        killed_at = time.monotonic()
        group.members[victim].kill()
        alive = databases[(victim + 1) % len(databases)]
        wait_for(lambda: _elected(group, victim), "the group to elect another primary", timeout=60)
        before = _published(alive)
        wait_for(lambda: _published(alive) > before, "a relay to publish again", timeout=LEADS_AGAIN_WITHIN)
        again = time.monotonic() - killed_at
        second = wait_for(lambda: _leader(alive), "a relay to lead", timeout=30)
        time.sleep(2)  # the senders go on a little on the new primary
        stop.set()
        reports = [out.get(timeout=180) for _ in senders]
        for p in senders:
            p.join(timeout=60)
        errors = [r["error"] for r in reports if r["error"]]
        assert not errors, "\n".join(errors)
        wait_for(
            lambda: query(alive, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE published_at IS NULL")[0]["n"] == 0,
            "the relays to publish everything",
            timeout=120,
        )
        leaders = query(alive, "SELECT holder FROM fsm_relay_leaders WHERE expires_at > UTC_TIMESTAMP(6)")
        assert len(leaders) == 1, leaders
    finally:
        stop.set()
        for proc in relays.values():
            stop_process(proc)
    group.restart(victim)
    group.wait_applied()
    moves = assert_acknowledged_once(databases, reports)  # the rejoined member too
    events = int(query(alive, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE machine = %s", (machine.name,))[0]["n"])
    assert events == moves + INSTANCES
    messages = kafka.read(topic, count=events)
    per_key = {
        str(r["k"]): int(r["n"])
        for r in query(
            alive,
            "SELECT i.instance_key AS k, COUNT(*) AS n FROM fsm_flip_transitions t "
            "JOIN fsm_flip i ON i.id = t.instance_id GROUP BY i.instance_key",
        )
    }
    assert partition_order(messages) == {key: list(range(1, n + 1)) for key, n in per_key.items()}, (
        "every event, in order per instance"
    )
    ids = {m.event["id"] for m in messages}
    assert len(ids) == events
    by_partition: dict[int, list[str]] = {}
    for m in sorted(messages, key=lambda m: (m.partition, m.offset)):
        by_partition.setdefault(m.partition, []).append(str((m.headers.get("relay") or b"").decode()))
    for partition, seq in by_partition.items():  # one leader at a time: at most one hand-over per partition
        changes = sum(1 for a, b in itertools.pairwise(seq) if a != b)
        assert changes <= 1 and seq[0] == first, (partition, changes, first)
    for name, proc in relays.items():
        assert proc.returncode == 0, logs[name].read_text()[-3000:]
    print(
        f"\ngroup replication relay: {len(messages)} messages for {events} events ({len(messages) - len(ids)} "
        f"repeated); relay {first} led; the primary (member {victim}) killed; relay {second} published "
        f"again {again:.1f} s later (lease {LEASE} s)"
    )


def _leader(settings: Settings) -> str | None:
    try:
        held = query(settings, "SELECT holder FROM fsm_relay_leaders WHERE expires_at > UTC_TIMESTAMP(6)")
    except Exception:  # the member is down or not there yet
        return None
    return str(held[0]["holder"]).split(":")[0] if held else None


def _published(settings: Settings) -> int:
    return int(query(settings, "SELECT COUNT(*) AS n FROM fsm_outbox WHERE published_at IS NOT NULL")[0]["n"])


def _elected(group: GroupReplication, victim: int) -> bool:
    try:
        return group.primary_index() != victim
    except AssertionError:
        return False
