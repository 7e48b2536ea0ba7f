"""The README's demo: an order machine driven end to end.

Creates the database if needed, migrates, defines an order machine, creates a few hundred
orders and moves each along a random but allowed path, then prints the counts per state
and one order's history, including a rejected move the database refused. Then the
handler engine: see pyfsm/demo_process.py.
"""

from __future__ import annotations

import random
import time

import pymysql

from . import db
from .definition import Machine
from .errors import TransitionNotAllowed
from .store import Store

DEFAULT_DSN = "mysql://root@127.0.0.1:3306/pyfsm_demo"

ORDER = Machine(
    name="order",
    states=["new", "paid", "packed", "shipped", "delivered", "cancelled"],
    start=["new"],
    final=["delivered", "cancelled"],
    transitions=[
        ("pay", "new", "paid"),
        ("pack", "paid", "packed"),
        ("ship", "packed", "shipped"),
        ("deliver", "shipped", "delivered"),
        ("cancel", ["new", "paid", "packed"], "cancelled"),
        ("unpack", "packed", "paid"),
    ],
)

# How far each order goes: weights give a realistic spread over the states.
PATHS = [
    (["pay"], 2), (["pay", "pack"], 2), (["pay", "pack", "ship"], 3),
    (["pay", "pack", "ship", "deliver"], 8), (["cancel"], 1), (["pay", "pack", "unpack", "cancel"], 1), ([], 1),
]


def _ensure_database(settings: db.Settings) -> None:
    conn = pymysql.connect(**settings.connect_kwargs(database=False))
    try:
        conn.cursor().execute(
            f"CREATE DATABASE IF NOT EXISTS `{settings.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    finally:
        conn.close()


def run(dsn: str | None = None, *, orders: int = 300, workers: int = 3, seed: int = 7) -> None:
    settings = db.parse_dsn(dsn or DEFAULT_DSN)
    _ensure_database(settings)
    rng = random.Random(seed)
    with Store(settings.dsn()) as store:
        store.migrate()
        defined = store.define(ORDER)
        print(f"machine order: definition version {defined.version} ({'new' if defined.changed else 'unchanged'})")
        run_id = time.strftime("%H%M%S")
        paths, weights = zip(*PATHS, strict=True)
        started = time.perf_counter()
        moves = 0
        sample = None
        for n in range(orders):
            key = f"demo-{run_id}-{n:04d}"
            store.create("order", key, data={"total": rng.randint(5, 500)}, lookup_key=f"customer-{n % 40}")
            path = rng.choices(paths, weights)[0]
            for event in path:
                store.send("order", key, event, metadata={"by": "demo"})
                moves += 1
            if sample is None and path and path[-1] == "deliver":
                sample = key
        elapsed = time.perf_counter() - started
        print(f"created {orders} orders and applied {moves} transitions in {elapsed:.2f} s "
              f"({(orders + moves) / elapsed:.0f} per second)")

        sample = sample or f"demo-{run_id}-0000"
        try:
            store.send("order", sample, "pay")  # a delivered order cannot be paid again
        except TransitionNotAllowed as exc:
            print(f"refused by the database: {exc} [errno {exc.errno}]")

        print("\norders per state (all runs):")
        for state, count in sorted(store.counts("order").items(), key=lambda kv: ORDER.states.index(kv[0])):
            print(f"  {state:<10} {count:>6}")

        print(f"\nhistory of {sample}:")
        for h in store.history("order", sample):
            move = f"{h.from_state} --{h.event}--> {h.to_state}" if h.event else f"created in {h.to_state}"
            print(f"  #{h.sort_key} {h.created_at:%H:%M:%S.%f} {move}")

        from .demo_process import run as fulfil

        fulfil(store, settings.dsn(), run_id, orders=max(1, orders // 3), workers=workers)
