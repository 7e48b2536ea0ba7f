"""Store.send on a type holding 1,000,000 instances and 10,000,000 history rows, beside an empty type.

Issue 49, item 5: does a transition cost more when the type holds a lot? The big type is
bench_reporting's data set (the ``order`` type, loaded around the triggers, checked, with a
second small type beside it), built into ``--database`` (``pyfsm_bench_scale``) when it is not
there yet and kept; the empty type is the same definition in a fresh database, dropped at the
end. Every transition is ``Store.send`` (its own Store per client process, pool_size=1) of
``hold`` or ``release`` (paid <-> on_hold: the state changes, so the counters move, as in the
common case), measured as bench_transitions measures (one timed window per measurement, every
client warmed up first, errors counted and never retried):

* ``ceiling``: a single-row INSERT + COMMIT in the empty type's database;
* ``empty type``: each client's own 8 instances of the empty type, created and paid before;
* ``1M type, new instances``: the same on the big type, 8 new instances per client among the
  million (an application's live instances are mostly its recent ones);
* ``1M type, old instances``: each transition takes a random instance of the big type in paid or
  on_hold (about 50,000 of them, spread over the whole type, each with its own ~10 history
  rows), from a share of its own per client: the worst case, whose rows are rarely in memory.

Per measurement: transitions per second, latency p50 and p99 as the client sees it, the
server's CPU per transition (``/proc/<pid>`` of ``@@pid_file``, user + system, over the timed
window), the buffer pool's page reads per transition (``Innodb_buffer_pool_read_requests``: a
deeper index shows here first) and of those the reads from disk (``Innodb_buffer_pool_reads``),
both server-wide. ``--rounds`` rounds, the approaches in order and the next round in reverse;
medians. Ratios are to the empty type at the same number of clients, measured in the same run.

What a transition of an old instance costs depends on whether its pages are in memory: with
``--pool-mb`` the run sets ``innodb_buffer_pool_size`` (online, on both servers) to that many
MiB, reads every index of the big type's two tables into it once (a covering scan per index),
and sets the size back at the end; without it the server's own size stands.

    .venv/bin/python bench/bench_scale.py --dsn mysql://root@127.0.0.1:3306/test
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import random
import statistics
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_reporting as br
import bench_transitions as bt

from pyfsm import Store
from pyfsm.db import Settings, parse_dsn

APPROACHES = ("ceiling", "empty type", "1M type, new instances", "1M type, old instances")
NEXT = {"paid": "hold", "on_hold": "release"}
MOVING = tuple(NEXT)
Step = Callable[[int], Any]


@dataclass(frozen=True)
class Job:
    approach: str
    client: int
    clients: int
    settings: Settings
    seconds: float
    seed: int


def cycling(store: Store, states: dict[str, str]) -> Step:
    """A step that moves one of ``states``' instances (hold or release), in turn or at random."""
    keys = list(states)
    rng = random.Random(len(keys))

    def step(i: int) -> None:
        key = keys[i % len(keys)] if len(keys) <= bt.INSTANCES_PER_CLIENT else rng.choice(keys)
        try:
            states[key] = store.send(br.NAME, key, NEXT[states[key]]).to_state
        except BaseException:
            states[key] = store.get(br.NAME, key).state
            raise

    return step


def new_instances(job: Job) -> tuple[Store, Step]:
    """The client's own instances, created and paid now (on the empty or the big type)."""
    store = Store(job.settings.dsn(), pool_size=1)
    states = {}
    for j in range(bt.INSTANCES_PER_CLIENT):
        key = f"s-{uuid.uuid4().hex[:12]}-{j}"
        store.create(br.NAME, key)
        states[key] = store.send(br.NAME, key, "pay").to_state
    return store, cycling(store, states)


def old_instances(job: Job) -> tuple[Store, Step]:
    """This client's share of the big type's loaded instances in paid or on_hold (id % clients)."""
    store = Store(job.settings.dsn(), pool_size=1)
    conn = pymysql.connect(**job.settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT instance_key, current_state FROM `fsm_{br.NAME}` WHERE current_state IN (%s, %s) "
                "AND id %% %s = %s AND instance_key LIKE 'o-%%'",
                (*MOVING, job.clients, job.client),
            )
            states = {key: state for key, state in cur.fetchall()}
    finally:
        conn.close()
    if len(states) <= bt.INSTANCES_PER_CLIENT:
        raise RuntimeError(f"only {len(states)} loaded instances in paid or on_hold for client {job.client}")
    return store, cycling(store, states)


def ceiling(job: Job) -> tuple[None, Step]:
    step, _ = bt.ceiling_client(bt.Job("ceiling", job.client, job.settings, job.seconds), [])
    return None, step


CLIENTS: dict[str, Callable[[Job], tuple[Store | None, Step]]] = {
    "ceiling": ceiling,
    "empty type": new_instances,
    "1M type, new instances": new_instances,
    "1M type, old instances": old_instances,
}


def worker(job: Job, go: Any, out: Any) -> None:
    try:
        store, step = CLIENTS[job.approach](job)
        result = bt.Result(job.approach, 1)
        bt.timed_loop(step, bt.WARMUP_SECONDS, result.warmup_errors, [])
        go.wait()
        result.count, elapsed = bt.timed_loop(step, job.seconds, result.errors, result.latencies_ms)
        result.rate = result.count / elapsed
        if store is not None:
            store.close()
        out.put(result)
    except BaseException:
        go.abort()
        out.put(traceback.format_exc())


def page_reads(settings: Settings) -> tuple[int, int]:
    """The buffer pool's (page reads, of which from disk) so far, server-wide."""
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SHOW GLOBAL STATUS WHERE Variable_name IN "
                "('Innodb_buffer_pool_read_requests', 'Innodb_buffer_pool_reads')"
            )
            status = {name.lower(): int(value) for name, value in cur.fetchall()}
            return status["innodb_buffer_pool_read_requests"], status["innodb_buffer_pool_reads"]
    finally:
        conn.close()


@dataclass
class Measured:
    result: bt.Result
    page_reads: int
    disk_reads: int


def measure(approach: str, clients: int, settings: Settings, seconds: float, pid: int | None, seed: int) -> Measured:
    ctx = mp.get_context("spawn")
    go, out = ctx.Barrier(clients + 1, timeout=300), ctx.Queue()
    jobs = [Job(approach, c, clients, settings, seconds, seed) for c in range(clients)]
    procs = [ctx.Process(target=worker, args=(job, go, out)) for job in jobs]
    for p in procs:
        p.start()
    try:
        total = bt.Result(approach, clients)
        pages = reads = 0
        try:
            go.wait()
        except threading.BrokenBarrierError:
            pass
        else:
            before, reads_before = bt.server_cpu_seconds(pid), page_reads(settings)
            time.sleep(seconds)
            after, reads_after = bt.server_cpu_seconds(pid), page_reads(settings)
            pages, reads = (a - b for a, b in zip(reads_after, reads_before, strict=True))
            if before is not None and after is not None:
                total.server_cpu_s = after - before
        for _ in procs:
            part = out.get(timeout=seconds + 300)
            if isinstance(part, str):
                raise RuntimeError(f"a {approach} client failed:\n{part}")
            total.add(part)
        return Measured(total, pages, reads)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()


def big_database(dsn: str, database: str) -> dict[str, str]:
    """bench_reporting's data set in ``database``: reused when complete (with this checkout's
    objects), else built; returns its bench_meta."""
    br.main(["--dsn", dsn, "--database", database, "--reuse-if-present", "--load-only"])
    conn = pymysql.connect(**parse_dsn(dsn).with_database(database).connect_kwargs())
    try:
        with conn.cursor() as cur:
            return br.meta(cur)
    finally:
        conn.close()


def pool_size(settings: Settings) -> int:
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@innodb_buffer_pool_size")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def resize_pool(settings: Settings, size: int) -> None:
    """Set innodb_buffer_pool_size and wait until the server has done it (it resizes in the background)."""
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL innodb_buffer_pool_size = %s", (size,))
            cur.execute("SELECT @@innodb_buffer_pool_size, @@innodb_page_size")
            wanted, page = map(int, cur.fetchone())  # the size rounded to the server's chunk size
            for _ in range(600):
                cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_total'")
                if int(cur.fetchone()[1]) * page >= wanted * 0.95 or size < wanted * 0.95:
                    break
                time.sleep(1)
        print(f"innodb_buffer_pool_size is {wanted // 2**20} MiB", file=sys.stderr, flush=True)
    finally:
        conn.close()


def warm(settings: Settings) -> None:
    """Read every index of the big type's instance and history tables once (a covering scan each)."""
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            # the primary key through a column of the row itself, so that each of its pages is read
            for table, row_column in ((f"fsm_{br.NAME}", "data"), (f"fsm_{br.NAME}_transitions", "data_after")):
                cur.execute(f"SHOW INDEX FROM `{table}`")
                first = {row[2]: row[4] for row in cur.fetchall() if row[3] == 1}  # index -> its first column
                for index, column in first.items():
                    column = row_column if index == "PRIMARY" else column
                    started = time.perf_counter()
                    cur.execute(f"SELECT SUM(CRC32(`{column}`)) FROM `{table}` FORCE INDEX (`{index}`)")
                    cur.fetchall()
                    print(f"read {table} {index} in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    finally:
        conn.close()


def med(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def fmt(x: float | None, spec: str = ",.0f") -> str:
    return "n/a" if x is None else format(x, spec)


def report(runs: dict[tuple[str, int], list[Measured]], server: dict[str, str], info: dict[str, str], args: Any) -> str:
    pool_mb = int(server["pool"]) // 2**20
    lines = [
        f"Run {datetime.date.today().isoformat()}: {os.cpu_count()} CPUs (load average {server['load']} at the "
        f"start), server {server['version']}, innodb_buffer_pool_size {pool_mb} MiB, "
        f"innodb_flush_log_at_trx_commit={server['flush']}; the big type: {int(info['instances']):,} instances and "
        f"{int(info['history_rows']):,} history rows (loaded {info['loaded_on']}). {args.rounds} rounds of "
        f"{args.seconds:g} s per measurement, medians; Store.send of hold/release; ratios to the empty type at the "
        "same number of clients.",
        "",
        "| approach | clients | tx/s | p50 ms | p99 ms | server CPU us/tx | page reads/tx | disk reads/tx "
        "| CPU vs empty | p99 vs empty | tx/s vs ceiling |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for clients in args.client_counts:
        base = runs[("empty type", clients)]
        base_cpu = med([m.result.cpu_us() for m in base])
        base_p99 = med([m.result.pct(99) for m in base])
        ceiling_rate = med([m.result.rate for m in runs[("ceiling", clients)]])
        for approach in APPROACHES:
            ms = runs[(approach, clients)]
            rate = med([m.result.rate for m in ms])
            cpu = med([m.result.cpu_us() for m in ms])
            p99 = med([m.result.pct(99) for m in ms])
            pages = med([m.page_reads / m.result.count if m.result.count else None for m in ms])
            reads = med([m.disk_reads / m.result.count if m.result.count else None for m in ms])
            errors = sum(sum(m.result.errors.values()) for m in ms)
            vs_cpu = "" if approach == "ceiling" or not (cpu and base_cpu) else f"{cpu / base_cpu:.2f}x"
            vs_p99 = "" if approach == "ceiling" or not (p99 and base_p99) else f"{p99 / base_p99:.2f}x"
            label = approach + (f" ({errors} errors)" if errors else "")
            lines.append(
                f"| {label} | {clients} | {fmt(rate)} | {fmt(med([m.result.pct(50) for m in ms]), '.2f')} | "
                f"{fmt(p99, '.2f')} | {fmt(cpu)} | {fmt(pages)} | {fmt(reads, '.2f')} | {vs_cpu} | {vs_p99} | "
                f"{fmt(rate / ceiling_rate if rate and ceiling_rate else None, '.0%')} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--database", default="pyfsm_bench_scale", help="the big type's database (built if missing)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the order reversed every other round)")
    parser.add_argument("--clients", default="1,8", help="comma-separated numbers of client processes")
    parser.add_argument("--pool-mb", type=int, help="innodb_buffer_pool_size for the run (set back after)")
    args = parser.parse_args(argv)
    args.client_counts = [int(c) for c in args.clients.split(",")]
    if not args.database.startswith("pyfsm_bench"):
        parser.error("--database must start with pyfsm_bench")
    info = big_database(args.dsn, args.database)
    big = parse_dsn(args.dsn).with_database(args.database)
    runs: dict[tuple[str, int], list[Measured]] = {}
    pool_before = pool_size(big)
    try:
        if args.pool_mb:
            resize_pool(big, args.pool_mb * 2**20)
            warm(big)
        server = measure_all(args, big, runs)
    finally:
        if args.pool_mb:
            resize_pool(big, pool_before)
    print(report(runs, server, info, args))
    return 0


def measure_all(args: Any, big: Settings, runs: dict[tuple[str, int], list[Measured]]) -> dict[str, str]:
    """Every approach at every number of clients, ``args.rounds`` times; returns what the server said of itself."""
    with bt.migrated_database(args.dsn) as (empty, _):
        with Store(empty.dsn(), pool_size=1) as store:
            store.define(br.MACHINE)
        admin = pymysql.connect(**empty.connect_kwargs())
        with admin.cursor() as cur:
            server = bt.server_info(cur)
        admin.close()
        pid = bt.server_pid(empty)
        where = {"ceiling": empty, "empty type": empty}
        for r in range(args.rounds):
            order = APPROACHES if r % 2 == 0 else tuple(reversed(APPROACHES))
            for clients in args.client_counts:
                for approach in order:
                    print(f"round {r + 1}: {approach}, {clients} client(s)...", file=sys.stderr, flush=True)
                    m = measure(approach, clients, where.get(approach, big), args.seconds, pid, r)
                    runs.setdefault((approach, clients), []).append(m)
    return server


if __name__ == "__main__":
    sys.exit(main())
