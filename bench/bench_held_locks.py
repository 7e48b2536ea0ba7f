"""What the index fsm_locks_held (revision 0016) saves its readers and costs the lock calls.

fsm_locks keeps one row per lock scope and account that ever took a lock. In one fresh
database ``pyfsm_bench_<random>`` (dropped at the end) with ``--accounts`` such rows (100 of
them held) this measures, with the index and with it dropped, in alternating rounds:

* the reads of the locks held: the metrics' count by kind and the web console's /locks
  query on fsm_held_locks_v1 (ms per read, median, and the rows the server read for one);
* ``Store.lock()`` + ``Lease.release()`` of a global lock, one client, on instances with
  distinct accounts (nothing contended): microseconds per pair and the server's CPU time per
  pair (from /proc, where the server runs on this machine);
* the ceiling, a single-row INSERT + COMMIT from one client, at the start and the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt

from pyfsm import Machine, Store
from pyfsm.db import Settings

MARK = ("<!-- bench-held-locks:start -->", "<!-- bench-held-locks:end -->")
READS = {
    "metrics: held locks by kind": "SELECT kind, COUNT(*) FROM fsm_held_locks_v1 GROUP BY kind",
    "console /locks": "SELECT * FROM fsm_held_locks_v1 ORDER BY expires_at, id LIMIT 200",
}
ADD = "ALTER TABLE fsm_locks ADD KEY fsm_locks_held (unlocked_at, expires_at)"
DROP = "ALTER TABLE fsm_locks DROP KEY fsm_locks_held"


def fill(conn: Any, accounts: int, held: int = 100) -> None:
    """``accounts`` lock rows, one per account, a tenth global; the first ``held`` held for an hour."""
    with conn.cursor() as cur:
        for start in range(0, accounts, 10_000):
            rows = []
            for n in range(start, min(start + 10_000, accounts)):
                live = n < held
                rows.append(
                    (
                        "*" if n % 10 == 0 else "order",
                        f"acct-{n}",
                        n + 1,
                        f"k-{n}",
                        f"api-{n % 7}",
                        n % 86_400,
                        None if live else n % 86_400,
                        3600 if live else -(n % 86_400) + 30,
                        f"fsm_lock_{n:08x}",
                    )
                )
            cur.executemany(
                "INSERT INTO fsm_locks (scope, lookup_key, machine, instance_id, instance_key, owner, locked_at, "
                "unlocked_at, expires_at, advisory_name) VALUES (%s, %s, 'order', %s, %s, %s, "
                "UTC_TIMESTAMP(6) - INTERVAL %s SECOND, UTC_TIMESTAMP(6) - INTERVAL %s SECOND + INTERVAL 1 SECOND, "
                "UTC_TIMESTAMP(6) + INTERVAL %s SECOND, %s)",
                rows,
            )
            conn.commit()
        cur.execute("ANALYZE TABLE fsm_locks")
        cur.fetchall()


def time_reads(conn: Any, repeats: int) -> dict[str, tuple[float, int]]:
    """Per read: (median ms, rows the server read for one, from the session's Handler_read counters)."""
    out = {}
    with conn.cursor() as cur:
        for label, sql in READS.items():
            cur.execute("FLUSH STATUS")
            cur.execute(sql)
            cur.fetchall()
            cur.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
            rows = sum(int(v) for _, v in cur.fetchall())
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                cur.execute(sql)
                cur.fetchall()
                times.append((time.perf_counter() - started) * 1000)
            out[label] = (statistics.median(times), rows)
    return out


def time_locks(store: Store, name: str, keys: list[str], pid: int | None) -> tuple[float, float | None]:
    """(us per acquire + release, server CPU us per pair or None)."""
    cpu_before, started = bt.server_cpu_seconds(pid), time.perf_counter()
    for key in keys:
        lease = store.lock(name, key, heartbeat=False)
        assert lease.release()
    elapsed = time.perf_counter() - started
    cpu_after = bt.server_cpu_seconds(pid)
    cpu = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) / len(keys) * 1e6
    return elapsed / len(keys) * 1e6, cpu


def run(settings: Settings, accounts: int, rounds: int, count: int, repeats: int) -> dict[str, Any]:
    pid = bt.server_pid(settings)
    ceilings = [bt.measure("ceiling", 1, settings, 3.0)]
    conn = pymysql.connect(**settings.connect_kwargs())
    results: dict[str, dict[str, list[Any]]] = {
        "with": {"reads": [], "locks": []},
        "without": {"reads": [], "locks": []},
    }
    try:
        print(f"filling fsm_locks with {accounts:,} accounts...", file=sys.stderr, flush=True)
        fill(conn, accounts)
        with Store(settings.dsn(), pool_size=2) as store:
            name = "held_bench"
            store.define(
                Machine(
                    name=name, states=["a", "b"], start=["a"], transitions=[("go", "a", "b")], uses_global_lock=True
                )
            )
            keys = [f"i-{n}" for n in range(count)]
            for n, key in enumerate(keys):
                store.create(name, key, lookup_key=f"bench-acct-{n}")
            time_locks(store, name, keys[:50], pid)  # warm the lease connection and the rows
            indexed = True
            for r in range(rounds * 2):
                label = "with" if indexed else "without"
                print(f"round {r + 1} of {rounds * 2}: {label} the index", file=sys.stderr, flush=True)
                results[label]["reads"].append(time_reads(conn, repeats))
                results[label]["locks"].append(time_locks(store, name, keys, pid))
                with conn.cursor() as cur:
                    cur.execute(DROP if indexed else ADD)
                indexed = not indexed
            if not indexed:
                with conn.cursor() as cur:
                    cur.execute(ADD)
    finally:
        conn.close()
    ceilings.append(bt.measure("ceiling", 1, settings, 3.0))
    return {"results": results, "ceilings": ceilings, "accounts": accounts, "count": count, "rounds": rounds}


def report(server: dict[str, str], data: dict[str, Any]) -> str:
    ceiling_us = statistics.median(1e6 / c.rate for c in data["ceilings"])
    res = data["results"]
    lines = [
        f"Run {time.strftime('%Y-%m-%d')}: server {server['version']}, load average {server['load']} at the "
        f"start; fsm_locks with {data['accounts']:,} accounts (100 held); {data['rounds']} rounds with and "
        f"{data['rounds']} without the index, alternating, medians of the rounds; ceiling (INSERT+COMMIT, one "
        f"client) {ceiling_us:.0f} us, the median of the start and the end.",
        "",
        "| what | with fsm_locks_held | without | rows read with / without | with vs ceiling |",
        "|---|---:|---:|---:|---:|",
    ]
    for label in READS:
        w = [r[label] for r in res["with"]["reads"]]
        wo = [r[label] for r in res["without"]["reads"]]
        w_ms, wo_ms = statistics.median(x[0] for x in w), statistics.median(x[0] for x in wo)
        lines.append(
            f"| read: {label} | {w_ms:.2f} ms | {wo_ms:.1f} ms | {w[0][1]:,} / {wo[0][1]:,} | "
            f"{w_ms * 1000 / ceiling_us:.1f}x |"
        )
    w_us = statistics.median(x[0] for x in res["with"]["locks"])
    wo_us = statistics.median(x[0] for x in res["without"]["locks"])
    lines.append(
        f"| `Store.lock()` + `release()`, global, per pair | {w_us:.0f} us | {wo_us:.0f} us | | "
        f"{w_us / ceiling_us:.1f}x |"
    )
    w_cpu = [x[1] for x in res["with"]["locks"] if x[1] is not None]
    wo_cpu = [x[1] for x in res["without"]["locks"] if x[1] is not None]
    if w_cpu and wo_cpu:
        lines.append(
            f"| server CPU per lock + release | {statistics.median(w_cpu):.0f} us | "
            f"{statistics.median(wo_cpu):.0f} us | | |"
        )
    lines += [
        "",
        f"Lock pairs per round: {data['count']:,}. Per round, with: "
        + ", ".join(f"{x[0]:.0f}" for x in res["with"]["locks"])
        + " us; without: "
        + ", ".join(f"{x[0]:.0f}" for x in res["without"]["locks"])
        + " us.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--accounts", type=int, default=1_000_000, help="lock rows in fsm_locks, one per account")
    parser.add_argument("--rounds", type=int, default=3, help="rounds with and rounds without the index")
    parser.add_argument("--count", type=int, default=300, help="lock + release pairs per round")
    parser.add_argument("--repeats", type=int, default=15, help="reads per query per round")
    parser.add_argument("--write", type=Path, help="update the held-locks block of this file (e.g. BENCHMARKS.md)")
    args = parser.parse_args(argv)
    with bt.migrated_database(args.dsn) as (settings, server):
        data = run(settings, args.accounts, args.rounds, args.count, args.repeats)
    text = report(server, data)
    print(text)
    if args.write:
        bt.write_results(args.write, text, MARK)
    return 0


if __name__ == "__main__":
    sys.exit(main())
