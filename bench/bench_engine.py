"""The handler engine's cost per step and its workers' throughput, against the INSERT+COMMIT ceiling.

Runs in a fresh database ``pyfsm_bench_<random>`` (dropped at the end), on one server, with
one driver (PyMySQL), all handlers no-ops (so what is measured is the engine):

* ``send``: ``Store.send()`` on one instance after another, one client: the price of one
  transition without the engine, for comparison.
* ``engine step``: ``Process.start()`` of a 20-step linear process in the caller,
  run_immediately and save_after_step on: every step is committed on its own. Reported per
  step: microseconds, and round trips counted from the connection's own ``Questions``
  counter (the create and the claim of each instance included, spread over its 20 steps).
* ``workers``: 1, 2 and 4 worker processes (``pyfsm.Worker``) drain instances of a 5-step
  process queued beforehand; steps per second from the first claim to the last commit,
  beside the ceiling measured with the same number of client processes. Each worker also
  counts the claims that came back empty while due, unclaimed work existed (a claim
  query that skipped work it should have found); the target is zero.

The ceiling is bench_transitions' (one single-row INSERT + COMMIT per transaction).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt

from pyfsm import Context, Outcome, Process, Store
from pyfsm.db import Settings
from pyfsm.engine.batch import run_claimed_batch
from pyfsm.engine.runner import claim, run_claimed
from pyfsm.locks import new_owner

MARK = ("<!-- bench-engine:start -->", "<!-- bench-engine:end -->")
LONG_STEPS = 20
WORKER_STEPS = 5


def noop(ctx: Context) -> Outcome:
    return ctx.next()


def linear(name: str, steps: int, **settings: Any) -> Process:
    process = Process.linear(name, [f"s{i}" for i in range(steps)], **settings)
    for state in process.machine.states[:-1]:
        process.register(state, noop)
    return process


def questions(store: Store) -> int:
    return store.gateway.on_primary(lambda conn: bt.session_questions(conn.cursor()))


def measure_send(settings: Settings, count: int) -> dict[str, float]:
    with Store(settings.dsn(), pool_size=1) as store:
        machine = linear("bench_send", 2).machine
        store.define(machine)
        store.create("bench_send", "s")
        before, started = questions(store), time.perf_counter()
        for n in range(count):
            store.send("bench_send", "s", "next" if n % 2 == 0 else "back")
        elapsed = time.perf_counter() - started
        trips = questions(store) - before - 1
    return {"us": elapsed / count * 1e6, "trips": trips / count}


def measure_steps(settings: Settings, instances: int) -> dict[str, float]:
    process = linear("bench_steps", LONG_STEPS)
    with Store(settings.dsn(), pool_size=1) as store:
        store.define(process.machine)
        process.start(store, "warm")
        before, started = questions(store), time.perf_counter()
        for n in range(instances):
            result = process.start(store, f"i{n}")
            assert result.steps == LONG_STEPS, result
        elapsed = time.perf_counter() - started
        trips = questions(store) - before - 1
    steps = instances * LONG_STEPS
    return {"us": elapsed / steps * 1e6, "trips": trips / steps}


def worker_main(settings: Settings, name: str, batch: int, go: Any, out: Any) -> None:
    try:
        process = linear(name, WORKER_STEPS)
        owner = new_owner()
        empty_with_work = claims = steps = 0
        last = first = 0.0
        with Store(settings.dsn(), pool_size=2) as store:
            store.counts(name)
            go.wait()
            first = time.perf_counter()
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 0.5:
                since = store.gateway.on_primary(lambda c: _server_now(c))
                rows = claim(store, process, owner, limit=batch)
                claims += 1
                if not rows:
                    empty_with_work += _due_unclaimed(store, name, since) > 0
                    time.sleep(0.01)
                    continue
                if len(rows) > 1:  # what Worker(batch=n) does: side by side, each round committed together
                    steps += sum(r.steps for r in run_claimed_batch(store, process, rows, owner))
                else:
                    steps += run_claimed(store, process, rows[0], owner).steps
                last = time.perf_counter()
                idle_since = time.monotonic()  # after the batch: a batch longer than the idle limit is not idleness
        out.put({"steps": steps, "first": first, "last": last, "claims": claims, "empty_with_work": empty_with_work})
    except Exception:
        out.put(traceback.format_exc())


def _server_now(conn: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute("SELECT UTC_TIMESTAMP(6)")
        return cur.fetchone()[0]


def _due_unclaimed(store: Store, name: str, since: Any) -> int:
    def count(conn: Any) -> int:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM fsm_runs WHERE machine = %s AND due_at <= %s AND claimed_by IS NULL",
                (name, since),
            )
            return int(cur.fetchone()[0])

    return store.gateway.on_primary(count)


def measure_workers(settings: Settings, workers: int, instances: int, batch: int) -> dict[str, float]:
    name = f"bench_w{workers}_b{batch}"
    process = linear(name, WORKER_STEPS)
    with Store(settings.dsn(), pool_size=1) as store:
        store.define(process.machine)
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            for start in range(0, instances, 500):
                keys = [f"w{n}" for n in range(start, min(instances, start + 500))]
                cur.execute(f"INSERT INTO `fsm_{name}` (instance_key) VALUES " + ", ".join(["(%s)"] * len(keys)), keys)
            cur.execute(
                "INSERT INTO fsm_runs (machine, instance_id, instance_key, due_at, created_at, updated_at) "
                f"SELECT %s, id, instance_key, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) "
                f"FROM `fsm_{name}`",
                (name,),
            )
    finally:
        conn.close()
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=worker_main, args=(settings, name, batch, go, out)) for _ in range(workers)]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let every worker connect before the start
    deadlocks = _deadlocks(settings)
    go.set()
    parts = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    bad = [p for p in parts if isinstance(p, str)]
    if bad:
        raise RuntimeError(bad[0])
    steps = sum(p["steps"] for p in parts)
    assert steps == instances * WORKER_STEPS, (steps, instances * WORKER_STEPS)
    elapsed = max(p["last"] for p in parts) - min(p["first"] for p in parts)
    return {
        "rate": steps / elapsed,
        "claims": sum(p["claims"] for p in parts),
        "deadlocks": _deadlocks(settings) - deadlocks,
        "empty_with_work": sum(p["empty_with_work"] for p in parts),
    }


def _deadlocks(settings: Settings) -> int:
    """The server's count of deadlocks so far (server-wide: other clients' count too)."""
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
            row = cur.fetchone()
            return int(row[1]) if row else 0
    finally:
        conn.close()


def report(
    server: dict[str, str],
    send: dict[str, float],
    step: dict[str, float],
    ceilings: dict[int, bt.Result],
    workers: dict[tuple[int, int], dict[str, float]],
    seconds: float,
) -> str:
    c1 = ceilings[1]
    lines = [
        f"Run {time.strftime('%Y-%m-%d')}: {os.cpu_count()} CPUs (load average {server['load']} at the start), "
        f"server {server['version']}, innodb_flush_log_at_trx_commit={server['flush']}; no-op handlers; ceiling: "
        f"{seconds:g} s per measurement.",
        "",
        "| what | processes | per step | round trips per step (measured) | steps/s | vs ceiling at that concurrency |",
        "|---|---:|---:|---:|---:|---:|",
        f"| ceiling (INSERT+COMMIT) | 1 | {1e6 / c1.rate:.0f} us | 2.00 | {c1.rate:,.0f} | 100% |",
        f"| send (one transition, no engine) | 1 | {send['us']:.0f} us | {send['trips']:.2f} | "
        f"{1e6 / send['us']:,.0f} | {1e6 / send['us'] / c1.rate:.0%} |",
        f"| engine step in the caller | 1 | {step['us']:.0f} us | {step['trips']:.2f} | {1e6 / step['us']:,.0f} | "
        f"{1e6 / step['us'] / c1.rate:.0%} |",
    ]
    for k in sorted({k for k, _b in workers}):
        lines.append(f"| ceiling (INSERT+COMMIT) | {k} | | 2.00 | {ceilings[k].rate:,.0f} | 100% |")
        for (kk, batch), w in sorted(workers.items()):
            if kk == k:
                what = "one run at a time" if batch == 1 else f"batch {batch}, side by side"
                lines.append(
                    f"| workers ({WORKER_STEPS}-step process, {what}) | {k} | | | {w['rate']:,.0f} | "
                    f"{w['rate'] / ceilings[k].rate:.0%} |"
                )
    empty = {key: int(w["empty_with_work"]) for key, w in workers.items()}
    lines += [
        "",
        f"Engine overhead per step beyond a plain transition: {step['us'] - send['us']:.0f} us "
        f"({step['us']:.0f} vs {send['us']:.0f} us).",
        "Claims that came back empty while due, unclaimed work existed: "
        + ", ".join(f"{k} worker(s), batch {b}: {n} of {int(workers[k, b]['claims'])}" for (k, b), n in empty.items())
        + ".",
        "Deadlocks while the workers ran (the server's Innodb_deadlocks, server-wide): "
        + ", ".join(f"{k} worker(s), batch {b}: {int(w.get('deadlocks', 0))}" for (k, b), w in workers.items())
        + ".",
        "",
        "Targets:",
        "",
        f"- {'MET' if step['trips'] <= 3 else 'MISSED'}: at most 3 round trips per step with save_after_step on "
        f"({step['trips']:.2f})",
    ]
    for (k, batch), w in sorted(workers.items()):
        if k == 4:  # the target is the default Worker's (batch 10); batch 1 is there for comparison
            ratio = w["rate"] / ceilings[4].rate
            verdict = ("MET" if ratio >= 0.30 else "MISSED") if batch > 1 else "for comparison, no target"
            lines.append(
                f"- {verdict}: 4 workers (batch {batch}) at least 30% of the ceiling with 4 clients "
                f"({w['rate']:,.0f} vs {ceilings[4].rate:,.0f} steps/s = {ratio:.0%})"
            )
    lines.append(
        f"- {'MET' if not any(empty.values()) else 'MISSED'}: the claim query never came back empty "
        "while due work existed"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each ceiling measurement")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated numbers of worker processes")
    parser.add_argument("--instances", type=int, default=600, help="queued instances per worker measurement")
    parser.add_argument(
        "--batch", default="1,10", help="comma-separated Worker batch sizes (runs claimed and run side by side)"
    )
    parser.add_argument("--write", type=Path, help="update the engine block of this file (e.g. BENCHMARKS.md)")
    parser.add_argument("--json", type=Path, help="also write the measurements to this file as JSON")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.workers.split(",")]
    batches = [int(b) for b in args.batch.split(",")]
    with bt.migrated_database(args.dsn) as (settings, server):
        print("measuring send and engine steps...", file=sys.stderr, flush=True)
        send = measure_send(settings, 1000)
        step = measure_steps(settings, 60)
        ceilings, workers = {}, {}
        for k in sorted({1, *counts}):
            print(f"measuring the ceiling with {k} client(s)...", file=sys.stderr, flush=True)
            ceilings[k] = bt.measure("ceiling", k, settings, args.seconds)
        for k in counts:
            for batch in batches:
                print(f"measuring {k} worker(s), batch {batch}...", file=sys.stderr, flush=True)
                workers[k, batch] = measure_workers(settings, k, args.instances, batch)
    text = report(server, send, step, ceilings, workers, args.seconds)
    print(text)
    if args.write:
        bt.write_results(args.write, text, MARK)
    if args.json:
        workers_json = {f"{k}x{b}": w for (k, b), w in workers.items()}
        bt.write_json(
            args.json,
            {
                "server": server,
                "send": send,
                "step": step,
                "workers": workers_json,
                "worker_steps": WORKER_STEPS,
                "ceilings": {k: bt.result_dict(r) for k, r in ceilings.items()},
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
