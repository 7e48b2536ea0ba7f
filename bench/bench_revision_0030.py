"""What revision 0030 (issue 49, item 4) saves: each writer's context in one variable, beside the ceiling.

Revision 0030 kept the old versions (deprecated), and the new transition trigger takes both
contexts, so old and new run in one database and one session, interleaved round by round:

1. **A send with options**: ``CALL fsm_{type}_send_v5`` and ``send_v6`` with metadata and a
   handler (what ``Store.send(metadata=..., handler=...)`` calls), per call.
2. **send_many**: ``CALL fsm_{type}_send_many_v3`` and ``send_many_v4`` of ``--items`` items
   (event, metadata) over as many instances, per item.
3. **An engine's steps**: ``Process.start`` of a linear process of ``--steps`` steps (the calls a
   worker makes for an instance it runs: one ``fsm_{type}_step_vN`` per step), with
   ``pyfsm.schema.routines.STEP`` pointed at step_v2 for the "before" rows (a bench's own
   patch of the routine registry, set back after each measurement), per step.
4. **Timers drained**: two timers per instance armed with ``Store.send_at``, moved into the
   past, drained with ``CALL fsm_fire_timers_v3`` and ``_v4`` in batches of 100, per timer
   (every timer must have fired).

The measuring (wall time, the server's CPU from /proc, the quiet measurements, the ceiling of
every round, medians and per-round ratios) is bench_revision_0025's (``Meter``).

    .venv/bin/python bench/bench_revision_0030.py --dsn mysql://root@127.0.0.1:3306/test
    .venv/bin/python bench/bench_revision_0030.py --dsn mysql://root@127.0.0.1:3307/test --json r30.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_revision_0025 as r25
import bench_transitions as bt
from bench_engine import linear

from pyfsm import Machine, Store
from pyfsm.db import parse_dsn
from pyfsm.schema import routines

STATES, EDGES = ["a", "b"], [("go", "a", "b"), ("back", "b", "a")]
SEND = Machine(name="bench_r30_send", states=STATES, start=["a"], transitions=EDGES)
MANY = Machine(name="bench_r30_many", states=STATES, start=["a"], transitions=EDGES)
CEILING = r25.CEILING
METADATA = json.dumps({"by": "bench", "ticket": "OPS-7"})
#: each new approach and the old one it replaces
TWINS = {
    "CALL send_v6, metadata + handler": "CALL send_v5, metadata + handler",
    "CALL send_many_v4": "CALL send_many_v3",
    "Process.start, step_v3": "Process.start, step_v2",
    "fire_timers_v4": "fire_timers_v3",
}


def flipper(keys: list[str]) -> Callable[[str], str]:
    """The next event of each key (a -> b -> a ...)."""
    states = dict.fromkeys(keys, "a")

    def next_event(key: str) -> str:
        event = "go" if states[key] == "a" else "back"
        states[key] = "b" if event == "go" else "a"
        return event

    return next_event


def part_send(meter: r25.Meter, count: int) -> dict[str, Callable[[], int]]:
    raw, store = meter.raw, meter.store
    store.define(SEND)
    keys = [f"k{n}" for n in range(8)]
    for key in keys:
        store.create(SEND, key)
    event = flipper(keys)

    def call(version: int) -> Callable[[], int]:
        sql = f"CALL fsm_{SEND.name}_send_v{version}(%s, %s, NULL, %s, NULL, NULL, 'bench', NULL, NULL)"

        def work() -> int:
            with raw.cursor() as cur:
                for n in range(count):
                    key = keys[n % len(keys)]
                    cur.execute(sql, (key, event(key), METADATA))
                    r25.drain_results(cur)
            return count

        return work

    return {"CALL send_v5, metadata + handler": call(5), "CALL send_v6, metadata + handler": call(6)}


def part_many(meter: r25.Meter, items: int, calls: int) -> dict[str, Callable[[], int]]:
    raw, store = meter.raw, meter.store
    store.define(MANY)
    keys = [f"m{n}" for n in range(items)]
    for key in keys:
        store.create(MANY, key)
    event = flipper(keys)

    def call(version: int) -> Callable[[], int]:
        def work() -> int:
            with raw.cursor() as cur:
                for _ in range(calls):
                    batch = [{"key": k, "event": event(k), "metadata": {"by": "bench"}} for k in keys]
                    cur.execute(f"CALL fsm_{MANY.name}_send_many_v{version}(%s)", (json.dumps(batch),))
                    rows = cur.fetchall()
                    r25.drain_results(cur)
                    assert all(row[10] is None for row in rows), rows  # errno: every item applied
            return calls * items

        return work

    return {"CALL send_many_v3": call(3), "CALL send_many_v4": call(4)}


@contextlib.contextmanager
def step_routine(name: str) -> Iterator[None]:
    """routines.STEP pointed at another version of the step procedure, for this block only."""
    current = routines.STEP
    routines.STEP = routines.Routine(name, current.params)
    try:
        yield
    finally:
        routines.STEP = current


def part_steps(meter: r25.Meter, steps: int, processes: int) -> dict[str, Callable[[], int]]:
    store = meter.store
    process = linear("bench_r30_steps", steps)
    store.define(process.machine)
    serial = iter(range(1 << 62))

    def run(name: str) -> Callable[[], int]:
        def work() -> int:
            with step_routine(name):
                for _ in range(processes):
                    result = process.start(store, f"p{next(serial)}")
                    assert result.steps == steps, result
            return steps * processes

        return work

    return {
        "Process.start, step_v2": run("fsm_{type}_step_v2"),
        "Process.start, step_v3": run(routines.STEP.name),
    }


def table(rows: dict[str, r25.Row], unit: str) -> list[str]:
    ceiling = rows[CEILING]
    lines = [
        f"| approach | {unit}/s | us/{unit} | vs ceiling's us/commit | vs before | vs before, per round "
        f"| server CPU us/{unit} | vs ceiling | vs before | quiet |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        before = rows.get(TWINS.get(name, ""))
        lines.append(
            f"| {name} | {r25.fmt(1e6 / row.wall())} | {r25.fmt(row.wall())} | "
            f"{r25.ratio(row.wall(), ceiling.wall())} | "
            f"{r25.ratio(row.wall(), before.wall()) if before else ''} | "
            f"{f'{row.per_round(before):.2f}x' if before else ''} | {r25.fmt(row.cpu())} | "
            f"{r25.ratio(row.cpu(), ceiling.cpu())} | {r25.ratio(row.cpu(), before.cpu()) if before else ''} | "
            f"{len(row.quiet())}/{len(row.samples)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--count", type=int, default=500, help="calls per measurement (part 1, the ceilings)")
    parser.add_argument("--items", type=int, default=100, help="items per send_many call")
    parser.add_argument("--many-calls", type=int, default=5, help="send_many calls per measurement")
    parser.add_argument("--steps", type=int, default=20, help="steps of the process")
    parser.add_argument("--processes", type=int, default=20, help="processes started per measurement")
    parser.add_argument("--timer-instances", type=int, default=500, help="instances armed with two timers each")
    parser.add_argument("--parts", default="send,many,steps,timers")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    dsn = r25.database(args.dsn)
    settings = parse_dsn(dsn)
    raw = bt.raw_connect(settings, autocommit=True)
    started = time.perf_counter()
    out: dict[str, Any] = {}
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT VERSION(), @@log_bin, @@innodb_flush_log_at_trx_commit")
            version, log_bin, flush = cur.fetchone() or (None, None, None)
            cur.execute("CREATE TABLE r25_ceiling (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
        with Store(dsn, pool_size=1) as store:
            store.migrate()
            meter = r25.Meter(raw, store, bt.server_pid(settings))
            meter.calibrate()
            header = (
                f"{version} (log_bin {log_bin}, innodb_flush_log_at_trx_commit {flush}); approaches interleaved "
                f"round by round with the ceiling; medians; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
            )
            print(header, flush=True)
            out["server"] = header
            ceiling = r25.ceiling_work(raw, args.count)
            simple = [
                ("send", "call", lambda: part_send(meter, args.count), f"A send with options ({args.count} calls)"),
                (
                    "many",
                    "item",
                    lambda: part_many(meter, args.items, args.many_calls),
                    f"send_many ({args.many_calls} calls of {args.items} items)",
                ),
                (
                    "steps",
                    "step",
                    lambda: part_steps(meter, args.steps, args.processes),
                    f"An engine's steps ({args.processes} processes of {args.steps} steps)",
                ),
            ]
            for number, (part, unit, make, title) in enumerate(simple, start=1):
                if part not in parts:
                    continue
                approaches = make()
                for work in approaches.values():  # warm: each routine parsed, each counter row there
                    work()
                rows = r25.interleaved(meter, {CEILING: ceiling, **approaches}, args.rounds, part)
                out[part] = {name: row.as_dict() for name, row in rows.items()}
                print(f"\n{number}. {title}, {args.rounds} rounds")
                print("\n".join(table(rows, unit)), flush=True)
            if "timers" in parts:
                rows, timers = r25.part_timers(meter, args.rounds, args.count, args.timer_instances, (3, 4))
                out["timers"] = {name: row.as_dict() for name, row in rows.items()}
                print(f"\n4. Timers drained ({args.rounds} rounds; batches of {r25.BATCH}, {timers:,} per drain)")
                print("\n".join(table(rows, "timer")))
        print(f"\n{time.perf_counter() - started:.0f} s", file=sys.stderr)
        if args.json:
            args.json.write_text(json.dumps(out, indent=1))
    finally:
        with raw.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{settings.database}`")
        raw.close()


if __name__ == "__main__":
    main()
