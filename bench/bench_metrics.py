"""What a Prometheus scrape of pyfsm's database costs at 1,000,000 instances.

Uses the data set bench/bench_reporting.py builds and keeps in ``pyfsm_bench_reporting``
(1,000,000 instances and 10,000,000 history rows of ``order``, 2,000 of ``ticket``; build it
once with ``bench/bench_reporting.py --load-only``, about 3 minutes). The data set has no
engine queue and no outbox, so for the run this script adds ``--runs`` rows to fsm_runs
(a tenth overdue by an hour, a fifth due now, a twentieth claimed, a tenth delayed, the rest
waiting) and ``--outbox`` unpublished outbox rows (one in a hundred parked), and removes
exactly those afterwards (rows above the highest ids found before; nothing else writes
there), so the data set stays what bench_reporting.py measures.

Measured, each ``--scrapes`` times (warm, after 3 untimed scrapes) through
pyfsm.metrics.DatabaseCollector and a root Store, as Prometheus would see it (the whole
exposition built): a steady scrape (no new history), and a scrape that catches up on 15,000
and on 100,000 new history rows (one full page: the collector's cursor is set back that far,
so nothing is written). Then each of the scrape's statements alone, on one connection,
and the INSERT+COMMIT ceiling of bench_transitions in the same run, so that the scrape can
be read as a multiple of it. ``--write BENCHMARKS.md`` replaces this script's section there.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import bench_transitions as bt
import pymysql

from pyfsm import Store
from pyfsm.db import Settings, parse_dsn
from pyfsm.metrics.database import _events_sql, _rows, _snapshot_sql
from pyfsm.metrics.server import DatabaseCollector

MARK = ("<!-- bench-metrics:start -->", "<!-- bench-metrics:end -->")
SECTION = "## Metrics: what a scrape costs"
CEILING_TABLE = (
    "CREATE TABLE IF NOT EXISTS bench_ceiling (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, "
    "client INT NOT NULL, n BIGINT NOT NULL, created_at DATETIME(6) NOT NULL) ENGINE=InnoDB"
)


def pct(times: list[float], q: int) -> float:
    return statistics.quantiles(times, n=100, method="inclusive")[q - 1]


def timed(fn: Callable[[], object], n: int, warm: int = 3) -> list[float]:
    for _ in range(warm):
        fn()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return times


def add_queue(cur: pymysql.cursors.Cursor, runs: int, outbox: int) -> tuple[int, int]:
    """Add runs and unpublished outbox rows; the highest ids before, to remove them by."""
    cur.execute("SELECT COALESCE(MAX(id), 0) FROM fsm_runs")
    runs_before = int(cur.fetchone()[0])
    cur.execute("SELECT COALESCE(MAX(id), 0) FROM fsm_outbox")
    outbox_before = int(cur.fetchone()[0])
    # instances with no run yet, spread over the table; the due_at mix by id modulo 20
    cur.execute(
        "INSERT INTO fsm_runs (machine, instance_id, instance_key, due_at, claimed_by, attempt, created_at, "
        "updated_at) "
        "SELECT 'order', i.id, i.instance_key, CASE "
        " WHEN MOD(i.id, 20) < 2 THEN UTC_TIMESTAMP(6) - INTERVAL 3600 + MOD(i.id, 600) SECOND "  # overdue: stuck
        " WHEN MOD(i.id, 20) < 6 THEN UTC_TIMESTAMP(6) - INTERVAL MOD(i.id, 60) SECOND "  # due now
        " WHEN MOD(i.id, 20) < 7 THEN UTC_TIMESTAMP(6) + INTERVAL 60 SECOND "  # claimed
        " WHEN MOD(i.id, 20) < 9 THEN UTC_TIMESTAMP(6) + INTERVAL 300 SECOND "  # delayed (a retry's backoff)
        " ELSE NULL END, IF(MOD(i.id, 20) = 6, 'bench-worker:1', NULL), 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) "
        "FROM fsm_order i LEFT JOIN fsm_runs r ON r.machine = 'order' AND r.instance_id = i.id "
        "WHERE r.id IS NULL AND MOD(i.id, 97) = 0 ORDER BY i.id LIMIT %s",
        (runs,),
    )
    cur.execute(
        "INSERT INTO fsm_outbox (machine, topic, instance_id, instance_key, lookup_key, transition_id, sort_key, "
        "event, from_state, to_state, data, metadata, occurred_at, parked_at, last_error) "
        "SELECT 'order', 'bench.orders', h.instance_id, CONCAT('bench-', h.instance_id), NULL, h.id, h.sort_key, "
        "h.event, h.from_state, h.to_state, NULL, '{}', UTC_TIMESTAMP(6) - INTERVAL 30 SECOND, "
        "IF(MOD(h.id, 100) = 0, UTC_TIMESTAMP(6), NULL), IF(MOD(h.id, 100) = 0, 'bench: parked', NULL) "
        "FROM fsm_order_transitions h LEFT JOIN fsm_outbox o ON o.machine = 'order' AND o.transition_id = h.id "
        "WHERE o.id IS NULL AND h.id > (SELECT MAX(id) FROM fsm_order_transitions) - %s ORDER BY h.id",
        (outbox,),
    )
    return runs_before, outbox_before


def remove_queue(cur: pymysql.cursors.Cursor, runs_before: int, outbox_before: int) -> None:
    cur.execute("DELETE FROM fsm_runs WHERE id > %s", (runs_before,))
    cur.execute("DELETE FROM fsm_outbox WHERE id > %s", (outbox_before,))


def measure(settings: Settings, scrapes: int) -> list[tuple[str, list[float], str]]:
    rows: list[tuple[str, list[float], str]] = []
    with Store(settings.dsn(), pool_size=2) as store:
        collector = DatabaseCollector(store, settle_seconds=0)
        list(collector.collect())  # the first scrape: the per-event cursor starts here
        top = dict(collector._cursor or {})
        rows.append(
            ("scrape, steady (no new history)", timed(lambda: list(collector.collect()), scrapes), "4 round trips")
        )
        for behind in (15_000, 100_000):

            def catch_up(behind: int = behind) -> None:
                collector._cursor = {m: max(0, v - behind) if m == "order" else v for m, v in top.items()}
                list(collector.collect())

            rows.append(
                (f"scrape, {behind:,} new history rows to count by event", timed(catch_up, scrapes), "5 round trips")
            )
        got = {f.name: f for f in collector.collect()}
        assert got["pyfsm_up"].samples[0].value == 1, "the scrape failed: see the log"
    conn = pymysql.connect(**settings.connect_kwargs())
    try:
        with conn.cursor() as cur:
            machines = [str(r[0]) for r in _rows(cur, "CALL fsm_stats_v2()")]
            top_order = top["order"]
            for label, statement in (
                ("CALL fsm_stats_v2() (status counts read the (status, id) index)", "CALL fsm_stats_v2()"),
                ("CALL fsm_outbox_lag_v1()", "CALL fsm_outbox_lag_v1()"),
                ("SELECT of the counters, locks, highest ids and queue", _snapshot_sql(machines, 300.0, None, 5.0)[0]),
                ("SELECT by event, 15,000 new rows", _events_sql({"order": (top_order - 15_000, top_order)}, 100_000)),
                (
                    "SELECT by event, 100,000 new rows",
                    _events_sql({"order": (top_order - 100_000, top_order)}, 100_000),
                ),
            ):
                rows.append((f"  {label}", timed(lambda s=statement: _rows(cur, s), scrapes), ""))
    finally:
        conn.close()
    return rows


def report(
    rows: list[tuple[str, list[float], str]],
    ceiling: bt.Result,
    server: dict[str, str],
    runs: int,
    outbox: int,
    ceiling_seconds: float,
    scrapes: int,
) -> str:
    c50, c95 = ceiling.pct(50), ceiling.pct(95)
    lines = [
        f"Run {datetime.date.today().isoformat()}: {os.cpu_count()} CPUs (load average {server['load']}), server "
        f"{server['version']}, innodb_buffer_pool_size {int(server['pool']) // 2**20} MiB, "
        f"innodb_flush_log_at_trx_commit={server['flush']}. Database `pyfsm_bench_reporting` (bench_reporting.py: "
        "1,000,000 `order` instances, 10,000,000 history rows, 2,000 `ticket` instances) plus, for the run, "
        f"{runs:,} runs in fsm_runs (a tenth overdue by an hour, a fifth due, a twentieth claimed) and {outbox:,} "
        "unpublished outbox rows (1% parked), removed afterwards. Each line warm (3 untimed first), "
        f"{scrapes} runs; a scrape is `DatabaseCollector.collect()` through a Store, every family built. "
        f"Ceiling: one INSERT+COMMIT, 1 client, {ceiling_seconds:g} s, same run.",
        "",
        "| what | p50 ms | p95 ms | p50 / ceiling p50 | |",
        "|---|---:|---:|---:|---|",
        f"| ceiling: INSERT+COMMIT | {c50:.2f} | {c95:.2f} | 1.0x | |",
    ]
    for label, times, note in rows:
        lines.append(
            f"| {label} | {pct(times, 50):.2f} | {pct(times, 95):.2f} | {pct(times, 50) / c50:.1f}x | {note} |"
        )
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    old = path.read_text()
    if MARK[0] not in old:
        path.write_text(
            old.rstrip("\n") + f"\n\n{SECTION}\n\n"
            "`bench/bench_metrics.py` times a Prometheus scrape of the database (docs/metrics.md) on the\n"
            'data set of "Reporting at scale", with a realistic queue and outbox added for the run.\n'
            "Reproduce:\n\n```sh\n.venv/bin/python bench/bench_reporting.py --load-only   # once\n"
            ".venv/bin/python bench/bench_metrics.py --write BENCHMARKS.md\n```\n"
        )
    bt.write_results(path, text, MARK)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--database", default="pyfsm_bench_reporting", help="the data set of bench_reporting.py")
    parser.add_argument("--scrapes", type=int, default=50, help="timed scrapes per line (default 50)")
    parser.add_argument("--runs", type=int, default=10_000, help="fsm_runs rows added for the run (default 10,000)")
    parser.add_argument("--outbox", type=int, default=5_000, help="unpublished outbox rows added (default 5,000)")
    parser.add_argument("--ceiling-seconds", type=float, default=5.0, help="length of the ceiling measurement")
    parser.add_argument("--write", type=Path, help="update this script's section of this file (BENCHMARKS.md)")
    args = parser.parse_args(argv)
    settings = parse_dsn(args.dsn).with_database(args.database)
    admin = pymysql.connect(**settings.connect_kwargs(database=False))
    with admin.cursor() as cur:
        server = bt.server_info(cur)
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = 'bench_meta'",
            (args.database,),
        )
        present = cur.fetchone()[0] == 1
        if present:
            cur.execute(f"SELECT value FROM `{args.database}`.bench_meta WHERE name = 'complete'")
            present = (cur.fetchone() or ("0",))[0] == "1"
    admin.close()
    if not present:
        parser.error(
            f"there is no complete data set in {args.database}: build it with "
            f"`bench/bench_reporting.py --load-only --database {args.database}` (about 3 minutes)"
        )
    conn = pymysql.connect(**settings.connect_kwargs())
    conn.autocommit(True)
    try:
        with conn.cursor() as cur:
            cur.execute(CEILING_TABLE)
            before = add_queue(cur, args.runs, args.outbox)
        try:
            print(f"timing {args.scrapes} scrapes per line...", file=sys.stderr, flush=True)
            rows = measure(settings, args.scrapes)
        finally:
            with conn.cursor() as cur:
                remove_queue(cur, *before)
                cur.execute("TRUNCATE TABLE bench_ceiling")
    finally:
        conn.close()
    print("measuring the INSERT+COMMIT ceiling...", file=sys.stderr, flush=True)
    ceiling = bt.measure("ceiling", 1, settings, args.ceiling_seconds)
    conn = pymysql.connect(**settings.connect_kwargs())
    with conn.cursor() as cur:
        cur.execute("TRUNCATE TABLE bench_ceiling")  # leave the data set as it was
    conn.close()
    text = report(rows, ceiling, server, args.runs, args.outbox, args.ceiling_seconds, args.scrapes)
    print(text)
    if args.write:
        write_section(args.write, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
