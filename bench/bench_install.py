"""How long installing pyfsm takes: a fresh install of the base schema, and each machine type.

Issue 18's targets: a fresh install (``Store.migrate()`` on an empty database) in < 2 s, and
< 1 s per type defined (``Store.define``: tables, triggers, procedures, views, the union views
rebuilt). Measured ``--rounds`` times (5), each on a new database, beside:

* the road a fresh install no longer takes: replaying every revision (0001 to the head);
* the INSERT+COMMIT ceiling of bench_transitions (one client, p50), in the same run, so that
  the times can be read against how fast this server commits at all (the machines are noisy).

Defining a type rebuilds the union views over every type, so the time per type grows with
the number of types: ``--types`` (10) are defined one after another and the first and the
last are reported. Prints a table (medians); ``--write BENCHMARKS.md`` replaces its section.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt

from pyfsm import Machine, Store
from pyfsm.db import Settings, parse_dsn
from pyfsm.schema import install as schema

MARK = ("<!-- bench-install:start -->", "<!-- bench-install:end -->")
ORDER_STATES = ["new", "paid", "packed", "shipped", "delivered", "cancelled"]
ORDER_TRANSITIONS = [
    ("pay", "new", "paid"),
    ("pack", "paid", "packed"),
    ("ship", "packed", "shipped"),
    ("deliver", "shipped", "delivered"),
    ("cancel", ["new", "paid"], "cancelled"),
]


def new_database(server: Settings) -> Settings:
    settings = server.with_database(f"pyfsm_bench_install_{uuid.uuid4().hex[:8]}")
    conn = pymysql.connect(**settings.connect_kwargs(database=False))
    conn.cursor().execute(f"CREATE DATABASE `{settings.database}`")
    conn.close()
    return settings


def drop(settings: Settings) -> None:
    conn = pymysql.connect(**settings.connect_kwargs(database=False))
    conn.cursor().execute(f"DROP DATABASE IF EXISTS `{settings.database}`")
    conn.close()


def one_round(server: Settings, types: int) -> dict[str, float]:
    times: dict[str, float] = {}
    fresh = new_database(server)
    try:
        start = time.perf_counter()
        schema.migrate(fresh)
        times["fresh install"] = time.perf_counter() - start
        with Store(fresh.dsn(), pool_size=1) as store:
            for n in range(types):
                machine = Machine(
                    name=f"bench_type_{n}",
                    states=ORDER_STATES,
                    start=["new"],
                    final=["delivered", "cancelled"],
                    transitions=ORDER_TRANSITIONS,
                )
                start = time.perf_counter()
                store.define(machine)
                times[f"define type {n + 1}"] = time.perf_counter() - start
    finally:
        drop(fresh)
    replay = new_database(server)
    try:
        start = time.perf_counter()
        schema.migrate(replay, revision=schema.known_revisions()[-2])  # every revision but the head, one by one
        schema.migrate(replay)
        times["replay 0001..head"] = time.perf_counter() - start
    finally:
        drop(replay)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument(
        "--dsn",
        default="mysql://root@127.0.0.1:3306/pyfsm_bench",
        help="the server (databases of its own are created and dropped)",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--types", type=int, default=10)
    parser.add_argument("--write", type=Path, help="replace the install section of this file (BENCHMARKS.md)")
    args = parser.parse_args(argv)
    server = parse_dsn(args.dsn)
    rounds = [one_round(server, args.types) for _ in range(args.rounds)]
    with bt.migrated_database(args.dsn) as (settings, info):
        ceiling = bt.measure("ceiling", 1, settings, 3.0)
    ceiling_ms = ceiling.pct(50)
    rows = ["fresh install", "define type 1", f"define type {args.types}", "replay 0001..head"]
    lines = [
        f"Server {info['version']}, innodb_flush_log_at_trx_commit={info['flush']}, load {info['load']}; "
        f"{args.rounds} rounds, medians; ceiling (INSERT+COMMIT, 1 client) p50 {ceiling_ms:.2f} ms.",
        "",
        "| step | median s | min s | max s | x ceiling p50 | target |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    targets = {"fresh install": "< 2 s", "define type 1": "< 1 s", f"define type {args.types}": "< 1 s"}
    for row in rows:
        values = [r[row] for r in rounds]
        med = statistics.median(values)
        lines.append(
            f"| {row} | {med:.3f} | {min(values):.3f} | {max(values):.3f} | {med * 1000 / ceiling_ms:.0f}x | "
            f"{targets.get(row, '')} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.write:
        bt.write_results(args.write, text, MARK)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
