"""Instances upgraded to a newer definition version on a cluster (Store.upgrade_instances,
docs/changing-machines.md): one upgrade on the tests' Galera cluster (MariaDB pass) and one on
their Group Replication group (MySQL pass), each through the writer (a DSN naming every node,
the writer last) while two sender processes send events through the same DSN.

Each move is one transaction on the writer (history row, instance row, counters): the other
nodes apply it as a whole. Once the cluster has applied everything, every node holds every
instance at definition version 2, the same history rows, one 'upgrade' row per instance whose
states follow the map, a valid chain per instance (v1's rules before its move, v2's after),
every acknowledged send once, and state counters equal to a GROUP BY of its instance table.
"""

from __future__ import annotations

import multiprocessing
import random
import time
import traceback
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from helpers.galera_cluster import GaleraCluster
from helpers.group_replication import GroupReplication, group_replication_fixture  # noqa: F401  (the group)
from helpers.histories import check_upgraded_chains
from helpers.processes import collect
from helpers.relay import query

from pyfsm import FsmError, Machine, Store, TransitionNotAllowed
from pyfsm.db import Settings

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")
NAME = "orders"
SENDERS = 2
PER_STATE = {"new": 40, "paid": 25, "shipped": 20, "delivered": 10, "cancelled": 5}
PATHS = {
    "new": [],
    "paid": ["pay"],
    "shipped": ["pay", "ship"],
    "delivered": ["pay", "ship", "deliver"],
    "cancelled": ["cancel"],
}
EVENTS = ["pay", "ship", "deliver", "cancel", "refund"]
MAP = {"shipped": "sent"}

V1 = Machine(
    name=NAME,
    states=["new", "paid", "shipped", "delivered", "cancelled"],
    start=["new"],
    final=["delivered", "cancelled"],
    transitions=[
        ("pay", "new", "paid"),
        ("ship", "paid", "shipped"),
        ("deliver", "shipped", "delivered"),
        ("cancel", ["new", "paid"], "cancelled"),
    ],
)
# shipped renamed sent; delivered gains refund (no longer final); refunded added
V2 = Machine(
    name=NAME,
    states=["new", "paid", "sent", "delivered", "refunded", "cancelled"],
    start=["new"],
    final=["refunded", "cancelled"],
    transitions=[
        ("pay", "new", "paid"),
        ("ship", "paid", "sent"),
        ("deliver", "sent", "delivered"),
        ("refund", "delivered", "refunded"),
        ("cancel", ["new", "paid"], "cancelled"),
    ],
)


# -- the sender processes (module level: spawn imports them by name) -------------------------------


def sender(dsn: str, keys: list[str], seed: int, barrier: Any, stop: Any, out: Any) -> None:
    """Random events to random instances, each with a request id, until told to stop; a call
    that failed otherwise than TransitionNotAllowed is made again with the same request id
    (a repeat applies nothing twice). Reports the requests acknowledged and when
    (CLOCK_MONOTONIC: one clock for every process)."""
    rng = random.Random(seed)
    report: dict[str, Any] = {"acked": [], "times": [], "refused": 0, "kinds": {}, "error": None}
    try:
        with Store(dsn, pool_size=1) as store:
            store.get(NAME, keys[0])  # connected, before the start
            barrier.wait(timeout=120)
            n = 0
            while not stop.is_set():
                request, key, event = f"s{seed}-{n}", rng.choice(keys), rng.choice(EVENTS)
                n += 1
                given_up = time.monotonic() + 60
                while True:
                    try:
                        store.send(NAME, key, event, request_id=request)
                    except TransitionNotAllowed:  # not in the rules of the instance's version: nothing applied
                        report["refused"] += 1
                        break
                    except FsmError as exc:
                        kind = f"{type(exc).__name__} {exc.errno}"
                        report["kinds"][kind] = report["kinds"].get(kind, 0) + 1
                        assert time.monotonic() < given_up, f"{request} not acknowledged within 60 s: {exc}"
                        time.sleep(0.02)
                        continue
                    report["acked"].append(request)
                    report["times"].append(time.monotonic())
                    break
    except BaseException:  # reported, never a silent death that leaves the test waiting
        report["error"] = traceback.format_exc()
        barrier.abort()
    out.put(report)


# -- the upgrade and the checks ------------------------------------------------------------------


def populate(writer: Settings) -> tuple[list[str], int]:
    """v1, its instances in every state, then v2; the keys and the sends made."""
    keys, sends = [], 0
    with Store(writer.dsn()) as store:
        store.migrate()
        store.define(V1)
        for state, n in PER_STATE.items():
            for i in range(n):
                key = f"{state}-{i}"
                store.create(NAME, key)
                for event in PATHS[state]:
                    store.send(NAME, key, event)
                    sends += 1
                keys.append(key)
        store.define(V2)
        assert [(c.version, c.instances, c.is_current) for c in store.version_counts(NAME)] == [
            (1, len(keys), False),
            (2, 0, True),
        ]
    return keys, sends


def upgrade_under_senders(writer: Settings, keys: list[str], writer_host: tuple[str, int]) -> dict[str, Any]:
    """The upgrade through the writer while SENDERS processes send through it; run again until
    no instance is left at version 1 (a run meets instances the senders hold)."""
    barrier, stop, out = SPAWN.Barrier(SENDERS + 1), SPAWN.Event(), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=sender, args=(writer.dsn(), keys, seed, barrier, stop, out), daemon=True)
        for seed in range(SENDERS)
    ]
    for p in procs:
        p.start()
    moved: Counter[tuple[str, str | None]] = Counter()
    outcomes: Counter[str] = Counter()
    runs = batches = 0
    try:
        with Store(writer.dsn()) as store:
            store.get(NAME, keys[0])
            assert store.settings.in_use == writer_host, "the DSN names the writer last: it lands on it anyway"
            barrier.wait(timeout=120)
            time.sleep(0.3)  # the senders are under way
            began = time.monotonic()
            while True:
                report = store.upgrade_instances(NAME, states=MAP, batch=10)
                assert report.to_version == 2 and report.unmapped == 0, report.as_dict()
                runs, batches = runs + 1, batches + report.batches
                for g in report.groups:
                    outcomes[g.outcome] += g.instances
                    if g.outcome == "moved":
                        assert g.from_version == 1 and g.to_state == MAP.get(g.from_state, g.from_state), g
                        moved[(g.from_state, g.to_state)] += g.instances
                if not [c for c in store.version_counts(NAME) if c.version == 1 and c.instances]:
                    break
                assert runs < 20, f"instances still at version 1 after {runs} runs: {outcomes}"
            ended = time.monotonic()
            assert [(c.version, c.instances, c.is_current) for c in store.version_counts(NAME)] == [
                (1, 0, False),
                (2, len(keys), True),
            ]
            time.sleep(0.3)  # and go on a moment under v2's rules
    finally:
        stop.set()
        reports = collect(out, SENDERS)
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [r["error"] for r in reports if r["error"]]
    assert not errors, "\n".join(errors)
    assert sum(moved.values()) == len(keys), (moved, outcomes)
    during = sum(1 for r in reports for t in r["times"] if began <= t <= ended)
    return {
        "moved": moved,
        "outcomes": outcomes,
        "runs": runs,
        "batches": batches,
        "reports": reports,
        "seconds": ended - began,
        "during": during,
    }


def check_node(
    settings: Settings, keys: list[str], setup_sends: int, acked: list[str]
) -> tuple[list[tuple[Any, ...]], Counter[tuple[str, str]]]:
    """The invariants on one node; its history rows (for comparing the nodes) and its moves."""
    instances = query(
        settings,
        f"SELECT instance_key, current_state, version, definition_version FROM `fsm_{NAME}` ORDER BY instance_key",
    )
    assert sorted(r["instance_key"] for r in instances) == sorted(keys)
    assert {r["definition_version"] for r in instances} == {2}, "every instance at version 2"
    by_key = check_upgraded_chains(settings, NAME, V1, V2, MAP, all_moved=True)
    assert sorted(by_key) == sorted(keys), "history rows of no instance, or an instance without history"
    rows = [row for key in sorted(by_key) for row in by_key[key]]
    moves: Counter[tuple[str, str]] = Counter(
        (r["from_state"], r["to_state"]) for r in rows if r["source"] == "upgrade"
    )
    # every acknowledged send once (and nothing else): the setup's sends and the senders'
    sent = [r for r in rows if r["source"] != "upgrade" and r["sort_key"] > 1]
    assert len(sent) == setup_sends + len(acked), "a send lost or applied twice"
    assert sorted(r["request_id"] for r in sent if r["request_id"] is not None) == sorted(acked)
    compared = [
        (
            r["instance_key"],
            r["sort_key"],
            r["event"],
            r["from_state"],
            r["to_state"],
            r["source"],
            r["request_id"],
            r["dv"],
        )
        for r in rows
    ]
    return compared, moves


def upgrade_on_cluster(
    nodes: list[Settings], writer: Settings, writer_host: tuple[str, int], wait: Any, label: str
) -> None:
    began = time.monotonic()
    keys, setup_sends = populate(writer)
    wait()
    done = upgrade_under_senders(writer, keys, writer_host)
    wait()
    acked = [request for r in done["reports"] for request in r["acked"]]
    per_node = [check_node(settings, keys, setup_sends, acked) for settings in nodes]
    rows, moves = per_node[0]
    for n, (other_rows, other_moves) in enumerate(per_node[1:], start=1):
        assert other_rows == rows, f"node {n} holds other history rows than node 0"
        assert other_moves == moves
    assert moves == done["moved"], "the report's moves are the history's"
    assert done["during"] > 0, "no send was acknowledged while the upgrade ran"
    kinds: Counter[str] = Counter()
    for r in done["reports"]:
        kinds.update(r["kinds"])
    print(
        f"\n{label}: {len(keys)} instances moved in {done['runs']} run(s), {done['batches']} batches, "
        f"{done['seconds']:.2f} s ({dict(done['outcomes'])}); {len(acked)} sends acknowledged "
        f"({done['during']} while the upgrade ran), {sum(r['refused'] for r in done['reports'])} refused, "
        f"repeated: {dict(kinds)}; {len(rows)} history rows the same on {len(nodes)} nodes; "
        f"{time.monotonic() - began:.1f} s in all"
    )


# -- the tests -----------------------------------------------------------------------------------


def test_an_upgrade_through_the_galera_writer_under_senders_is_the_same_on_every_node(galera: GaleraCluster) -> None:
    galera.wait_synced()
    nodes = galera.database("pyfsm_galera_upgrade")
    writer = galera.writer_index()
    order = [*(n for n in range(len(nodes)) if n != writer), writer]
    listed = replace(nodes[0].with_hosts([(nodes[n].host, nodes[n].port) for n in order]), galera_writes="one")
    upgrade_on_cluster(nodes, listed, (nodes[writer].host, nodes[writer].port), galera.wait_synced, "galera upgrade")


def test_an_upgrade_through_the_group_primary_under_senders_is_the_same_on_every_member(
    group_replication: GroupReplication,
) -> None:
    group = group_replication
    databases = group.database("pyfsm_gr_upgrade")
    primary = group.primary_index()
    listed = group.listing(databases, [*(n for n in range(len(databases)) if n != primary), primary])
    upgrade_on_cluster(
        databases,
        listed,
        (databases[primary].host, databases[primary].port),
        group.wait_applied,
        "group replication upgrade",
    )
