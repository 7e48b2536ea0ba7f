"""A worker's batch run side by side, each round of steps committed together (pyfsm.engine.batch,
fsm_{type}_steps_v1): the same outcomes as one run at a time, an instance refused alone,
and a round committed one by one when the batch procedure cannot be used.

Four worker processes draining 2,000 instances with the default batch are in
test_worker_processes.py; SIGKILL rounds in test_kill_rounds.py.
"""

from __future__ import annotations

from typing import Any

import pymysql
from helpers.common import fetch, unique

from pyfsm import ClaimLost, Context, Outcome, Process, Store, Worker
from pyfsm.engine.batch import run_claimed_batch
from pyfsm.engine.runner import ClaimKeeper, claim
from pyfsm.locks import new_owner

KEYS = ("ok-1", "ok-2", "boom", "wait", "pause", "asked-to-pause", "ok-3")


def mixed(name: str) -> Process:
    """Three steps; what a handler does depends on the instance's key."""
    process = Process.linear(name, ["one", "two", "three"], max_attempts=3, backoff=0.05)

    @process.handler("one")
    def one(ctx: Context) -> Outcome:
        ctx.data["trail"] = [*ctx.data.get("trail", []), f"one:{ctx.attempt}"]
        return ctx.pause() if ctx.key == "pause" else ctx.next()

    @process.handler("two")
    def two(ctx: Context) -> Outcome:
        if ctx.key == "boom" and ctx.attempt == 1:
            raise RuntimeError("card declined")
        ctx.data["trail"].append(f"two:{ctx.attempt}")
        return ctx.wait() if ctx.key == "wait" else ctx.next()

    @process.handler("three")
    def three(ctx: Context) -> Outcome:
        ctx.data["trail"].append("three")
        return ctx.next()

    return process


def outcome(store: Store, process: Process) -> dict[str, Any]:
    """Per key: state, status, data, and its history as (handler, from, to, data after)."""
    found = {}
    for key in KEYS:
        instance = store.get(process.name, key)
        history = [(h.handler, h.from_state, h.to_state, h.data_after) for h in store.history(process.name, key)]
        found[key] = (instance.state, instance.status, instance.data, history)
    return found


def drain(store: Store, process: Process, batch: int) -> None:
    for key in KEYS:
        store.create(process.name, key)
        store.enqueue(process.name, key)
    store.pause(process.name, "asked-to-pause")  # before any worker claims it
    Worker(store, [process], batch=batch, idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.5)


def test_a_batch_ends_where_one_run_at_a_time_ends(store: Store) -> None:
    side_by_side, one_by_one = mixed(unique("mixed")), mixed(unique("mixed"))
    for process in (side_by_side, one_by_one):
        store.define(process.machine)
    drain(store, side_by_side, batch=len(KEYS))
    drain(store, one_by_one, batch=1)
    got = outcome(store, side_by_side)
    assert got == outcome(store, one_by_one)
    assert {k: v[:2] for k, v in got.items()} == {
        "ok-1": ("done", "completed"),
        "ok-2": ("done", "completed"),
        "ok-3": ("done", "completed"),
        "boom": ("done", "completed"),
        "wait": ("two", "waiting"),
        "pause": ("one", "paused"),
        "asked-to-pause": ("one", "paused"),
    }
    assert got["boom"][2]["trail"] == ["one:1", "two:2", "three"]  # failed once, retried after its backoff
    assert got["ok-1"][3][1:] == [
        ("one", "one", "two", {"trail": ["one:1"]}),
        ("two", "two", "three", {"trail": ["one:1", "two:1"]}),
        ("three", "three", "done", {"trail": ["one:1", "two:1", "three"]}),
    ]
    errors = fetch(
        store_raw(store),
        "SELECT instance_key, attempt, error_type FROM fsm_errors WHERE machine = %s",
        (side_by_side.name,),
    )
    assert [(e["instance_key"], e["attempt"], e["error_type"]) for e in errors] == [
        ("boom", 1, "builtins.RuntimeError")
    ]


def store_raw(store: Store) -> pymysql.connections.Connection:
    return pymysql.connect(**store.settings.connect_kwargs())


def test_an_instance_refused_in_a_round_is_rolled_back_alone(store: Store) -> None:
    """Its claim taken over between claim and commit: its step is not applied, its history
    stays, and the others of the batch go on to the end."""
    process = mixed(unique("mixed"))
    store.define(process.machine)
    for key in ("ok-1", "ok-2", "ok-3"):
        store.create(process.name, key)
        store.enqueue(process.name, key)
    owner = new_owner()
    rows = claim(store, process, owner, limit=3)
    raw = store_raw(store)
    try:
        raw.cursor().execute(
            "UPDATE fsm_runs SET claimed_by = 'thief:1' WHERE machine = %s AND instance_key = 'ok-2'", (process.name,)
        )
        raw.commit()
        with ClaimKeeper(store, owner) as keeper:
            keeper.add(process, [int(r["id"]) for r in rows])
            results = {r.key: r for r in run_claimed_batch(store, process, rows, owner)}
    finally:
        raw.close()
    assert (results["ok-1"].status, results["ok-1"].steps) == ("completed", 3)
    assert (results["ok-3"].status, results["ok-3"].steps) == ("completed", 3)
    assert results["ok-2"].steps == 0 and "thief:1" not in (results["ok-2"].error or "x")
    assert "not claimed by" in (results["ok-2"].error or "")
    assert [h.event for h in store.history(process.name, "ok-2")] == [None]  # nothing of its step
    assert store.get(process.name, "ok-2").state == "one"
    assert ClaimLost.errno == 31021


def test_an_instance_moved_by_someone_else_is_handed_back_and_finished_later(store: Store) -> None:
    """A send from outside between the claim and the commit: that item's commit is refused
    (31007), the others' are not, and the instance is run again from where the send left it;
    no transition is applied twice."""
    process = Process.linear(unique("moved"), ["one", "two", "three"])
    sent: list[str] = []

    def step(ctx: Context) -> Outcome:
        if ctx.key == "moved" and not sent:
            sent.append(ctx.key)
            store.send(process.name, ctx.key, "next")  # someone else moves it meanwhile
        return ctx.next()

    for state in ("one", "two", "three"):
        process.register(state, step)
    store.define(process.machine)
    for key in ("a", "moved", "b"):
        store.create(process.name, key)
        store.enqueue(process.name, key)
    Worker(store, [process], batch=3, idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.5)
    for key in ("a", "moved", "b"):
        history = store.history(process.name, key)
        assert [(h.from_state, h.to_state) for h in history[1:]] == [
            ("one", "two"),
            ("two", "three"),
            ("three", "done"),
        ], key
        assert store.get(process.name, key).status == "completed"
    assert [h.handler for h in store.history(process.name, "moved")[1:]] == [None, "step", "step"]


def test_without_the_batch_procedure_a_round_is_committed_one_by_one(store: Store) -> None:
    """A type whose steps_v1 is missing (a schema older than this pyfsm, say): the worker
    still finishes every instance, through step_v2."""
    process = mixed(unique("mixed"))
    store.define(process.machine)
    raw = store_raw(store)
    try:
        raw.cursor().execute(f"DROP PROCEDURE `fsm_{process.name}_steps_v1`")
    finally:
        raw.close()
    for key in ("ok-1", "ok-2", "ok-3"):
        store.create(process.name, key)
        store.enqueue(process.name, key)
    stats = Worker(store, [process], batch=3, idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.3)
    assert (stats.runs, stats.steps) == (3, 9)
    assert store.counts(process.name) == {"done": 3}


def test_steps_v1_applies_each_item_or_refuses_it_alone(store: Store) -> None:
    """From SQL: one call, one transaction; the refused items are reported with their error
    numbers and leave nothing behind, the others are committed."""
    import json

    process = mixed(unique("mixed"))
    store.define(process.machine)
    for key in ("k-1", "k-2", "k-3"):
        store.create(process.name, key)
        store.enqueue(process.name, key)
    owner = new_owner()
    claim(store, process, owner, limit=3)
    step = [{"event": "next", "handler": "one", "data": {"n": 1}}]
    items = [
        {"key": "k-1", "version": 1, "steps": step, "status": "running", "continue": 1},
        {"key": "k-2", "version": 9, "steps": step, "status": "running", "continue": 1},  # wrong version
        {"key": "k-3", "version": 1, "steps": [{"event": "nope"}], "status": "running", "continue": 1},
        {"key": "k-404", "version": 1, "steps": [], "status": "running", "continue": 0},
        "not an object",
    ]
    raw = store_raw(store)
    try:
        rows = fetch(raw, f"CALL `fsm_{process.name}_steps_v1`(%s, 60, %s)", (owner, json.dumps(items)))
    finally:
        raw.close()
    results = json.loads(rows[0]["results"])
    assert results[0] == {
        "key": "k-1",
        "instance_id": results[0]["instance_id"],
        "state": "two",
        "status": "running",
        "version": 2,
        "continue": 1,
    }
    assert [(r["key"], r.get("errno")) for r in results[1:]] == [
        ("k-2", 31007),
        ("k-3", 31005),
        ("k-404", 31003),
        (None, 31009),
    ]
    assert store.get(process.name, "k-1").data == {"n": 1}
    for key in ("k-2", "k-3"):
        assert (store.get(process.name, key).version, len(store.history(process.name, key))) == (1, 1), key
    assert store.counts(process.name) == {"one": 2, "two": 1}
    # back to the queue, due in 30 s (and a null requeue_seconds is 0: due now)
    again = [
        {"key": "k-1", "version": 2, "steps": [], "status": "running", "continue": 0, "requeue_seconds": 30},
        {
            "key": "k-3",
            "version": 1,
            "steps": [],
            "status": "running",
            "continue": 0,
            "requeue_seconds": None,
            "data": None,
        },
    ]
    raw = store_raw(store)
    try:
        rows = fetch(raw, f"CALL `fsm_{process.name}_steps_v1`(%s, 60, %s)", (owner, json.dumps(again)))
        assert [r.get("errno") for r in json.loads(rows[0]["results"])] == [None, None]
        due = {
            r["instance_key"]: r
            for r in fetch(
                raw,
                "SELECT instance_key, claimed_by, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), due_at) AS due_in "
                "FROM fsm_runs WHERE machine = %s AND instance_key IN ('k-1', 'k-3')",
                (process.name,),
            )
        }
    finally:
        raw.close()
    assert due["k-1"]["claimed_by"] is None and 25 <= int(due["k-1"]["due_in"]) <= 30
    assert due["k-3"]["claimed_by"] is None and int(due["k-3"]["due_in"]) <= 0


def test_a_round_of_large_data_is_split_into_several_calls(store: Store, monkeypatch: Any) -> None:
    """Steps carrying 300 KB of data each: a round of 6 is more than one call may carry
    (MAX_CALL_BYTES), so it is committed in several, and every step lands once."""
    import pyfsm.engine.batch as batch_module

    calls: list[int] = []
    commit_group = batch_module._commit_group

    def counting(store_: Store, process_: Process, group: list[Any], *args: Any) -> list[Any]:
        calls.append(len(group))
        return commit_group(store_, process_, group, *args)

    monkeypatch.setattr(batch_module, "_commit_group", counting)
    process = Process.linear(unique("big"), ["one", "two"])

    def fill(ctx: Context) -> Outcome:
        ctx.data[ctx.state] = "x" * 300_000
        return ctx.next()

    process.register("one", fill)
    process.register("two", fill)
    store.define(process.machine)
    for n in range(6):
        store.create(process.name, f"b-{n}")
        store.enqueue(process.name, f"b-{n}")
    stats = Worker(store, [process], batch=6, idle_min=0.01, idle_max=0.05).run(handle_signals=False, until_idle=0.3)
    assert (stats.runs, stats.steps) == (6, 12)
    # round 1: 300 KB per step, three to a call of at most 1 MiB; round 2: 600 KB, one each
    assert calls == [3, 3, 1, 1, 1, 1, 1, 1]
    for n in range(6):
        instance = store.get(process.name, f"b-{n}")
        assert (instance.state, len(instance.data["one"]), len(instance.data["two"])) == ("done", 300_000, 300_000)
        assert len(store.history(process.name, f"b-{n}")) == 3
