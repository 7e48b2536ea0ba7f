"""Many transitions per call (issue 15's bulk path): Store.send_many, fsm_{type}_send_many_v2
and `pyfsm send-many`. Each item is checked, recorded and refused alone; nothing is
half-applied; concurrent single sends on the same instances keep every invariant."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import pymysql
import pytest
from helpers.common import fetch, order_machine, unique

from pyfsm import (
    Conflict,
    FsmError,
    InvalidArgument,
    InvalidData,
    Machine,
    RequestIdReused,
    Store,
    TransitionNotAllowed,
    TransitionResult,
    UnknownInstance,
)
from pyfsm.db import parse_dsn


def history_rows(raw: Any, machine: Machine) -> int:
    return int(fetch(raw, f"SELECT COUNT(*) AS n FROM `fsm_{machine.name}_transitions`")[0]["n"])


def test_each_item_is_applied_or_refused_alone(store: Store, order: Machine, raw: Any) -> None:
    store.create(order, "m-1")
    store.create(order, "m-2")
    store.send(order, "m-2", "pay")
    before = history_rows(raw, order)
    out = store.send_many(
        order,
        [
            ("m-2", "ship"),  # applied
            ("m-1", "ship"),  # refused: new -> ship
            {"key": "m-3", "event": "pay", "metadata": {"by": "bulk"}, "data": {"n": 3}},  # created, then paid
            {"key": "m-1", "event": "pay", "expected_version": 1, "handler": "bulk"},
            {"key": "m-1", "event": "pay"},  # refused: already paid by the item before
            {"key": "m-4", "event": "ship"},  # refused: no start state allows ship
            {"key": "m-2", "event": "deliver", "expected_version": 99},  # refused: version
        ],
    )
    kinds = [type(o) for o in out]
    assert kinds == [
        TransitionResult,
        TransitionNotAllowed,
        TransitionResult,
        TransitionResult,
        TransitionNotAllowed,
        UnknownInstance,
        Conflict,
    ]
    shipped, created, paid = out[0], out[2], out[3]
    assert isinstance(shipped, TransitionResult) and (
        shipped.key,
        shipped.from_state,
        shipped.to_state,
        shipped.version,
    ) == ("m-2", "paid", "shipped", 3)
    assert isinstance(created, TransitionResult) and created.created and created.to_state == "paid"
    assert isinstance(paid, TransitionResult) and (paid.key, paid.version) == ("m-1", 2)
    assert out[1].key == "m-1" and out[1].errno == 31005  # type: ignore[union-attr]
    # three transitions and one creation (with its transition) written; nothing of the refused
    assert history_rows(raw, order) == before + 4
    assert [h.event for h in store.history(order, "m-1")] == [None, "pay"]
    assert store.history(order, "m-1")[-1].handler == "bulk"
    assert store.get(order, "m-3").data == {"n": 3}
    assert store.history(order, "m-3")[-1].metadata == {"by": "bulk"}
    assert store.counts(order) == {"paid": 2, "shipped": 1}


def test_request_ids_make_items_safe_to_repeat(store: Store, order: Machine) -> None:
    items = [{"key": f"r-{n}", "event": "pay", "request_id": f"bulk-r-{n}"} for n in range(5)]
    first = store.send_many(order, items, chunk_size=2)
    again = store.send_many(order, items, chunk_size=3)
    assert all(isinstance(o, TransitionResult) and not o.replayed for o in first)
    assert all(isinstance(o, TransitionResult) and o.replayed for o in again)
    assert [o.transition_id for o in first] == [o.transition_id for o in again]  # type: ignore[union-attr]
    [reused] = store.send_many(order, [{"key": "r-0", "event": "cancel", "request_id": "bulk-r-1"}])
    assert isinstance(reused, RequestIdReused)
    assert store.get(order, "r-0").state == "paid"


def test_chunks_by_count_and_by_size(store: Store, order: Machine, raw: Any) -> None:
    calls = []
    real = store.gateway.primary.run

    def counting(sql: str, args: Any, **kwargs: Any) -> Any:
        calls.append(len(json.loads(args[0])))
        return real(sql, args, **kwargs)

    store.gateway.primary.run = counting  # type: ignore[method-assign]
    try:
        out = store.send_many(order, [(f"c-{n}", "pay") for n in range(10)], chunk_size=4)
        big = "x" * 400_000  # three items of 400 kB: no two fit in one 1 MiB call
        out += store.send_many(
            order, [{"key": f"b-{n}", "event": "pay", "data": {"s": big}} for n in range(3)], chunk_size=100
        )
    finally:
        del store.gateway.primary.run
    assert calls == [4, 4, 2, 2, 1]
    assert all(isinstance(o, TransitionResult) for o in out)
    assert store.get(order, "b-2").data == {"s": big}


@pytest.mark.parametrize(
    "items, error",
    [
        ("k-1 pay", InvalidArgument),
        ([("k-1",)], InvalidArgument),
        ([{"key": "k-1"}], InvalidArgument),
        ([{"key": "k-1", "event": "pay", "color": "red"}], InvalidArgument),
        ([("k-1", "pay"), ("k 2 ", "pay")], InvalidArgument),
        ([("k-1", "pay"), {"key": "k-2", "event": "pay", "data": [1]}], InvalidData),
        ([("k-1", "pay"), {"key": "k-2", "event": "pay", "expected_version": -1}], InvalidArgument),
        ([("k-1", "Not An Event")], InvalidArgument),
    ],
)
def test_bad_items_are_refused_before_anything_is_sent(
    store: Store, order: Machine, raw: Any, items: Any, error: type
) -> None:
    before = history_rows(raw, order)
    with pytest.raises(error):
        store.send_many(order, items)
    assert history_rows(raw, order) == before
    with pytest.raises(InvalidArgument, match="chunk_size"):
        store.send_many(order, [("k-1", "pay")], chunk_size=1001)
    assert store.send_many(order, []) == []


def test_the_procedure_reports_a_row_per_item_for_a_dba(store: Store, order: Machine, raw: Any) -> None:
    store.create(order, "d-1")
    items = [
        {"key": "d-1", "event": "pay"},
        7,
        {"key": "d-2"},
        {"key": "d-1", "event": "ship", "request_id": 5},
        {"key": "d-3", "event": "pay", "expected_version": "one"},
        {"key": "d-1", "event": "ship"},
    ]
    rows = fetch(raw, f"CALL `fsm_{order.name}_send_many_v2`(%s)", (json.dumps(items),))
    assert [(r["item"], r["instance_key"], r["to_state"], r["errno"]) for r in rows] == [
        (1, "d-1", "paid", None),
        (2, None, None, 31009),
        (3, "d-2", None, 31009),
        (4, "d-1", None, 31009),
        (5, "d-3", None, 31009),
        (6, "d-1", "shipped", None),
    ]
    assert [h.event for h in store.history(order, "d-1")] == [None, "pay", "ship"]
    assert fetch(raw, f"SELECT COUNT(*) AS n FROM `fsm_{order.name}` WHERE instance_key IN ('d-2', 'd-3')") == [
        {"n": 0}
    ]
    left = fetch(raw, "SELECT @fsm_event AS e, @fsm_request_id AS r, @fsm_source AS s, @fsm_guard AS g")
    assert left == [dict.fromkeys("ersg")]


# -- a race of bulk and single sends on the same instances -----------------------------------

KEYS = [f"race-{n}" for n in range(12)]
EVENTS = ("pay", "cancel", "refund", "ship", "deliver")


def race_worker(dsn: str, machine: str, worker: int, rounds: int, barrier: Any, out: Any) -> None:
    report: dict[str, Any] = {"error": None, "applied": Counter(), "refused": Counter()}
    store = Store(dsn, pool_size=1)
    rnd = random.Random(worker)
    try:
        barrier.wait(timeout=60)
        for _ in range(rounds):
            if worker % 2:  # bulk: a chunk of the shared keys, in a shuffled order
                items = [(rnd.choice(KEYS), rnd.choice(EVENTS)) for _ in range(8)]
                outcomes = store.send_many(machine, items)
            else:
                key, event = rnd.choice(KEYS), rnd.choice(EVENTS)
                try:
                    outcomes = [store.send(machine, key, event)]
                except FsmError as exc:  # refused, or a deadlock that outlasted the retries
                    outcomes = [exc]
            for o in outcomes:
                if isinstance(o, TransitionResult):
                    report["applied"][o.key] += 1
                else:
                    report["refused"][type(o).__name__] += 1
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        store.close()
        out.put(report)


def test_bulk_and_single_sends_racing_on_the_same_instances_keep_every_invariant(store: Store, dsn: str) -> None:
    from helpers.fault_checks import check_invariants
    from helpers.processes import run_processes

    machine = order_machine(unique("bulkrace"))
    store.define(machine)
    for key in KEYS:
        store.create(machine, key)
    reports = run_processes(race_worker, lambda w: (dsn, machine.name, w, 40), 6)
    applied = sum((r["applied"] for r in reports), Counter())
    refused = sum((r["refused"] for r in reports), Counter())
    assert sum(applied.values()) and refused["TransitionNotAllowed"]
    assert set(refused) <= {"TransitionNotAllowed", "UnknownInstance", "Deadlock"}, refused
    by_key = check_invariants(parse_dsn(dsn), machine.name)
    for key in KEYS:  # every acknowledged transition is in history once, and nothing else
        assert len(by_key[key]) - 1 == applied[key], key


# -- the CLI ---------------------------------------------------------------------------------


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyfsm", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def test_cli_sends_lines_from_a_file_or_stdin_in_chunks(store: Store, order: Machine, dsn: str, tmp_path: Path) -> None:
    lines = [f"f-{n}" for n in range(7)]
    path = tmp_path / "keys.txt"
    path.write_text("\n".join(lines) + "\n\n")
    done = run_cli("send-many", order.name, str(path), "--event", "pay", "--chunk", "3", "--dsn", dsn)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "7 items: 7 applied (0 replayed), 0 refused"
    assert store.counts(order) == {"paid": 7}
    mixed = (
        "f-0\tship\nf-1\tship\nf-1\tship\n"
        + json.dumps({"key": "f-2", "event": "cancel", "metadata": {"by": "cli"}})
        + "\n"
    )
    done = run_cli("send-many", order.name, "-", "--json", "--progress", "--dsn", dsn, stdin=mixed)
    assert done.returncode == 1  # one item was refused
    report = json.loads(done.stdout)
    assert (report["applied"], report["refused"]) == (3, 1)
    assert report["refusals"] == [
        {
            "key": "f-1",
            "event": "ship",
            "error": "TransitionNotAllowed",
            "errno": 31005,
            "message": report["refusals"][0]["message"],
        }
    ]
    assert "send-many" in done.stderr  # the bar, drawn on stderr when asked
    assert store.history(order, "f-2")[-1].metadata == {"by": "cli"}
    done = run_cli("send-many", order.name, "--dsn", dsn, stdin="f-5\n")
    assert done.returncode == 1 and "line 1: no event" in done.stderr
    assert fetch_state(dsn, order, "f-5") == "paid"


def fetch_state(dsn: str, machine: Machine, key: str) -> str:
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs())
    try:
        rows = fetch(conn, f"SELECT current_state FROM `fsm_{machine.name}` WHERE instance_key = %s", (key,))
        return str(rows[0]["current_state"])
    finally:
        conn.close()


def test_cli_says_how_far_it_got_when_the_input_goes_bad(
    store: Store, order: Machine, dsn: str, tmp_path: Path
) -> None:
    path = tmp_path / "keys.tsv"
    path.write_bytes(b"g-1\tpay\ng-2\tpay\ng-3\n" + b"g-4\tpay\n")  # line 3 names no event
    done = run_cli("send-many", order.name, str(path), "--chunk", "2", "--dsn", dsn)
    assert done.returncode == 1
    assert "stopped after 2 items: 2 applied, 0 refused" in done.stderr and "line 3: no event" in done.stderr
    assert [fetch_state(dsn, order, k) for k in ("g-1", "g-2")] == ["paid", "paid"]
    path.write_bytes(b"h-1\tpay\n" + b"h-\xff\tpay\n")  # not UTF-8
    done = run_cli("send-many", order.name, str(path), "--dsn", dsn)
    assert done.returncode == 1 and "InvalidEncoding (31024)" in done.stderr
    done = run_cli("send-many", order.name, str(tmp_path / "missing.tsv"), "--dsn", dsn)
    assert done.returncode == 1 and "cannot read" in done.stderr
