"""Concurrency invariants, proven with several *processes* (not only threads).

Every worker runs in its own interpreter (multiprocessing "spawn"), builds its own Store
from the DSN string and talks to the server over its own connections, so the only thing
serialising the workers is the database: the instance row lock and the unique keys of
the history table. The invariants checked after each race:

* one history row per instance carries most_recent = 1;
* sort_key runs 1, 2, 3, ... along the history and ends at the instance's version;
* every recorded (from_state, event, to_state) is allowed by the definition, and each
  row starts where the previous one ended (an unbroken chain from the creation row);
* nothing is lost or duplicated: the request ids in history are exactly the acknowledged
  ones, each once;
* a request id is applied once however many callers send it at the same moment.
"""

from __future__ import annotations

import itertools
import random
import traceback
from collections import Counter
from typing import Any

import pymysql
import pytest
from helpers.common import unique
from helpers.processes import run_processes

from pyfsm import Conflict, Deadlock, Machine, Store, TransitionNotAllowed
from pyfsm.db import parse_dsn

PROCESSES = 8
ATTEMPTS = 60  # per process in the main race: 480 attempts on one instance


def cycle_machine(name: str) -> Machine:
    """a -> b -> c -> a on ``next``, plus competing ``skip`` (a -> c) and ``back`` (b -> a)."""
    return Machine(
        name=name,
        states=["a", "b", "c"],
        start=["a"],
        transitions=[
            ("next", "a", "b"),
            ("next", "b", "c"),
            ("next", "c", "a"),
            ("skip", "a", "c"),
            ("back", "b", "a"),
        ],
    )


EVENTS = ("next", "skip", "back")


# -- worker processes (module level: spawn pickles them by qualified name) -----------------


def _ack(result: Any, request_id: str) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "transition_id": result.transition_id,
        "instance_id": result.instance_id,
        "event": result.event,
        "from_state": result.from_state,
        "to_state": result.to_state,
        "sort_key": result.sort_key,
        "version": result.version,
        "created": result.created,
        "replayed": result.replayed,
    }


def race_worker(dsn: str, machine: str, key: str, worker: int, attempts: int, barrier: Any, out: Any) -> None:
    """Test 1: random competing events on one instance, some with expected_version."""
    report: dict[str, Any] = {
        "worker": worker,
        "acks": [],
        "not_allowed": 0,
        "conflict": 0,
        "deadlock": 0,
        "error": None,
    }
    rng = random.Random(worker * 7919)
    store = Store(dsn, pool_size=1)
    try:
        store.get(machine, key)  # schema check and first connection happen before the start
        barrier.wait(timeout=60)
        for i in range(attempts):
            request_id = f"{worker}-{i}"
            event = rng.choice(EVENTS)
            expected = store.get(machine, key).version if rng.random() < 0.4 else None
            try:
                result = store.send(
                    machine,
                    key,
                    event,
                    request_id=request_id,
                    expected_version=expected,
                    metadata={"worker": worker, "attempt": i},
                )
            except TransitionNotAllowed:
                report["not_allowed"] += 1
            except Conflict:
                report["conflict"] += 1
            except Deadlock:
                report["deadlock"] += 1
            else:
                report["acks"].append(_ack(result, request_id))
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        store.close()
        out.put(report)


def create_worker(dsn: str, machine: str, keys: list[str], worker: int, barrier: Any, out: Any) -> None:
    """Test 2: for each new key, every worker sends ``next`` at the same moment (auto-create)."""
    report: dict[str, Any] = {"worker": worker, "acks": {}, "deadlock": 0, "error": None}
    store = Store(dsn, pool_size=1)
    try:
        store.counts(machine)  # schema check and first connection before the start
        for key in keys:
            barrier.wait(timeout=60)
            request_id = f"{key}-w{worker}"
            try:
                result = store.send(machine, key, "next", request_id=request_id)
            except Deadlock:
                report["deadlock"] += 1
            else:
                report["acks"][key] = _ack(result, request_id)
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        store.close()
        out.put(report)


def replay_worker(dsn: str, machine: str, rounds: list[tuple[str, str]], worker: int, barrier: Any, out: Any) -> None:
    """Test 3: every worker sends the same (key, event, request_id) at the same moment."""
    report: dict[str, Any] = {"worker": worker, "acks": {}, "deadlock": 0, "deadlocked": [], "error": None}
    store = Store(dsn, pool_size=1)
    try:
        store.counts(machine)
        for key, request_id in rounds:
            barrier.wait(timeout=60)
            try:
                result = store.send(machine, key, "next", request_id=request_id)
            except Deadlock:
                report["deadlock"] += 1
                report["deadlocked"].append(request_id)
            else:
                report["acks"][request_id] = _ack(result, request_id)
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        store.close()
        out.put(report)


def idempotent_worker(dsn: str, machine: str, op: str, keys: list[str], worker: int, barrier: Any, out: Any) -> None:
    """Every worker makes the same creating call (same key, same request id) at the same moment."""
    report: dict[str, Any] = {"worker": worker, "acks": {}, "error": None}
    store = Store(dsn, pool_size=1)
    try:
        store.counts(machine)
        for key in keys:
            barrier.wait(timeout=60)
            request_id = f"once-{key}"
            if op == "create":
                result = store.create(machine, key, request_id=request_id)
            else:  # a send that must create the instance: expected_version=0
                result = store.send(machine, key, "next", expected_version=0, request_id=request_id)
            report["acks"][key] = _ack(result, request_id)
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        store.close()
        out.put(report)


def raw_connection(dsn: str) -> pymysql.connections.Connection:
    return pymysql.connect(**parse_dsn(dsn).connect_kwargs())


def check_history(machine: Machine, history: list[Any], final_version: int, final_state: str) -> None:
    """The structural invariants of one instance's history."""
    creation = history[0]
    assert creation.event is None and creation.from_state is None
    assert creation.to_state in machine.start
    assert sum(1 for h in history if h.event is None) == 1, "more than one creation row"
    assert [h.most_recent for h in history].count(True) == 1
    assert history[-1].most_recent is True
    sort_keys = [h.sort_key for h in history]
    assert sort_keys == list(range(1, len(history) + 1)), f"sort keys not 1..n: {sort_keys}"
    assert sort_keys[-1] == final_version
    for prev, row in itertools.pairwise(history):
        assert row.from_state == prev.to_state, f"broken chain at sort_key {row.sort_key}"
        assert machine.target(row.from_state, row.event) == row.to_state, (
            f"disallowed transition recorded: {row.from_state} --{row.event}--> {row.to_state}"
        )
    assert history[-1].to_state == final_state


# -- tests ---------------------------------------------------------------------------------


def test_processes_racing_one_instance_keep_history_consistent(store: Store, dsn: str) -> None:
    machine = cycle_machine(unique("race"))
    store.define(machine)
    key = "shared"
    store.create(machine, key)

    reports = run_processes(race_worker, lambda w: (dsn, machine.name, key, w, ATTEMPTS))

    acks = [a for r in reports for a in r["acks"]]
    not_allowed = sum(r["not_allowed"] for r in reports)
    conflicts = sum(r["conflict"] for r in reports)
    deadlocks = sum(r["deadlock"] for r in reports)
    print(
        f"\nrace: {len(acks)} acknowledged, {not_allowed} not allowed, {conflicts} conflicts, "
        f"{deadlocks} deadlocks of {PROCESSES * ATTEMPTS} attempts"
    )
    assert len(acks) + not_allowed + conflicts + deadlocks == PROCESSES * ATTEMPTS
    assert acks, "no transition was acknowledged"
    assert not_allowed + conflicts > 0, "nothing was rejected: the workers did not really race"

    instance = store.get(machine, key)
    history = store.history(machine, key)
    check_history(machine, history, instance.version, instance.state)

    # every acknowledgement is a fresh, allowed transition, at most one per sort key
    for a in acks:
        assert a["replayed"] is False and a["created"] is False
        assert a["sort_key"] == a["version"]
        assert machine.target(a["from_state"], a["event"]) == a["to_state"]
    assert len({a["sort_key"] for a in acks}) == len(acks), "two acknowledgements share a sort_key"
    # each process's own calls are sequential, so the versions it is told must increase
    for r in reports:
        seen = [a["sort_key"] for a in r["acks"]]
        assert seen == sorted(seen) and len(set(seen)) == len(seen), f"worker {r['worker']} went back in time"

    # nothing lost, nothing duplicated, and history says what the callers were told
    recorded = [h.request_id for h in history[1:]]
    assert all(recorded), "a transition without its request id"
    assert len(recorded) == len(set(recorded)), "a request id recorded twice"
    assert set(recorded) == {a["request_id"] for a in acks}
    by_request = {h.request_id: h for h in history[1:]}
    for a in acks:
        row = by_request[a["request_id"]]
        assert (row.id, row.sort_key, row.event, row.from_state, row.to_state) == (
            a["transition_id"],
            a["sort_key"],
            a["event"],
            a["from_state"],
            a["to_state"],
        )
    assert len(history) == 1 + len(acks)

    # and directly in SQL, as a DBA would check it
    conn = raw_connection(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT COUNT(*), SUM(t.most_recent = 1), COUNT(DISTINCT t.request_id), MAX(t.sort_key), "
                f"MAX(i.version), MAX(i.current_state) "
                f"FROM `fsm_{machine.name}_transitions` t JOIN `fsm_{machine.name}` i ON i.id = t.instance_id "
                f"WHERE i.instance_key = %s",
                (key,),
            )
            rows, recent, distinct_requests, max_sort, version, state = cur.fetchone()
            cur.execute(
                f"SELECT COUNT(*) FROM `fsm_{machine.name}_transitions` t "
                f"JOIN `fsm_{machine.name}` i ON i.id = t.instance_id "
                f"WHERE i.instance_key = %s AND t.most_recent = 1",
                (key,),
            )
            assert cur.fetchone()[0] == 1
            cur.execute(
                f"SELECT to_state FROM `fsm_{machine.name}_transitions` t "
                f"JOIN `fsm_{machine.name}` i ON i.id = t.instance_id "
                f"WHERE i.instance_key = %s AND t.most_recent = 1",
                (key,),
            )
            latest_to = cur.fetchone()[0]
    finally:
        conn.close()
    assert rows == len(history) == 1 + len(acks)
    assert recent == 1
    assert distinct_requests == len(acks)
    assert max_sort == version == rows
    assert state == latest_to == history[-1].to_state


def test_processes_auto_creating_one_new_key_make_one_instance(store: Store, dsn: str) -> None:
    machine = cycle_machine(unique("birth"))
    store.define(machine)
    keys = [f"new-{i}" for i in range(6)]

    reports = run_processes(create_worker, lambda w: (dsn, machine.name, keys, w))

    deadlocks = sum(r["deadlock"] for r in reports)
    acked = sum(len(r["acks"]) for r in reports)
    print(f"\nauto-create: {acked} acknowledged, {deadlocks} deadlocks of {PROCESSES * len(keys)} sends")

    conn = raw_connection(dsn)
    try:
        for key in keys:
            acks = [r["acks"][key] for r in reports if key in r["acks"]]
            with conn.cursor() as cur:
                cur.execute(f"SELECT COUNT(*) FROM `fsm_{machine.name}` WHERE instance_key = %s", (key,))
                assert cur.fetchone()[0] == 1, f"{key}: not exactly one instance"
                cur.execute(
                    f"SELECT COUNT(*) FROM `fsm_{machine.name}_transitions` t "
                    f"JOIN `fsm_{machine.name}` i ON i.id = t.instance_id "
                    f"WHERE i.instance_key = %s AND t.event IS NULL",
                    (key,),
                )
                assert cur.fetchone()[0] == 1, f"{key}: not exactly one creation row"
            instance = store.get(machine, key)
            history = store.history(machine, key)
            check_history(machine, history, instance.version, instance.state)
            assert history[0].to_state == "a"

            assert len({a["instance_id"] for a in acks}) <= 1
            assert {a["instance_id"] for a in acks} <= {instance.id}
            # the creating transaction committed, so its caller was told created=True; nobody else was
            assert sum(a["created"] for a in acks) == 1, f"{key}: created reported {acks}"
            recorded = [h.request_id for h in history[1:]]
            assert len(recorded) == len(set(recorded))
            assert set(recorded) == {a["request_id"] for a in acks}, f"{key}: lost or unacknowledged transitions"
            assert len(history) == 1 + len(acks)
            assert sorted(a["sort_key"] for a in acks) == list(range(2, 2 + len(acks)))
    finally:
        conn.close()
    # ``next`` is allowed from every state, so every send should have gone through
    assert deadlocks == 0, f"{deadlocks} concurrent auto-creating sends failed with Deadlock"
    assert acked == PROCESSES * len(keys)


@pytest.mark.parametrize("existing", [True, False], ids=["existing-instance", "new-instance"])
def test_same_request_id_from_several_processes_applies_once(store: Store, dsn: str, existing: bool) -> None:
    machine = cycle_machine(unique("replay"))
    store.define(machine)
    n = 6
    rounds = [(f"k-{i}" if not existing else "k", f"req-{i}") for i in range(6)]
    if existing:
        store.create(machine, "k")

    reports = run_processes(replay_worker, lambda w: (dsn, machine.name, rounds, w), n=n)

    deadlocks = sum(r["deadlock"] for r in reports)
    print(f"\nreplay ({'existing' if existing else 'new'}): {deadlocks} deadlocks of {n * len(rounds)} sends")
    for key, request_id in rounds:
        results = [r["acks"][request_id] for r in reports if request_id in r["acks"]]
        refused = sum(r["deadlocked"].count(request_id) for r in reports)
        assert len(results) + refused == n
        history = store.history(machine, key)
        carrying = [h for h in history if h.request_id == request_id]
        assert len(carrying) == 1, f"{request_id} recorded {len(carrying)} times"
        row = carrying[0]
        assert {a["transition_id"] for a in results} == {row.id}, f"{request_id}: callers told different transitions"
        # the caller whose transaction wrote the row committed, so it was told replayed=False
        assert Counter(a["replayed"] for a in results) == Counter({False: 1, True: len(results) - 1})
        fields = {(a["instance_id"], a["event"], a["from_state"], a["to_state"], a["sort_key"]) for a in results}
        assert fields == {(row.instance_id, "next", row.from_state, row.to_state, row.sort_key)}
    for key in {k for k, _ in rounds}:
        instance = store.get(machine, key)
        history = store.history(machine, key)
        check_history(machine, history, instance.version, instance.state)
        # one transition per request id sent to this key, no more
        assert len(history) == 1 + sum(1 for k, _ in rounds if k == key)
    # a repeated request id must be answered with the original transition, never refused
    assert deadlocks == 0, f"{deadlocks} of {n * len(rounds)} sends of a repeated request id failed with Deadlock"


@pytest.mark.parametrize("op", ["create", "send-expecting-new"])
def test_repeated_creating_call_replays_under_concurrency(store: Store, dsn: str, op: str) -> None:
    """A creating call repeated at once (what a retry after a lost connection does) replays,
    it is never refused as a conflict or a reused request id."""
    machine = cycle_machine(unique("once"))
    store.define(machine)
    keys = [f"k-{i}" for i in range(5)]

    reports = run_processes(idempotent_worker, lambda w: (dsn, machine.name, op, keys, w), n=6)

    for key in keys:
        acks = [r["acks"][key] for r in reports]
        assert len(acks) == 6, f"{key}: a caller got no answer"
        assert len({a["transition_id"] for a in acks}) == 1, f"{key}: callers told different transitions"
        assert sum(not a["replayed"] for a in acks) == 1, f"{key}: exactly one caller applies it: {acks}"
        history = store.history(machine, key)
        assert [h.request_id for h in history].count(f"once-{key}") == 1
        assert len(history) == (1 if op == "create" else 2)
