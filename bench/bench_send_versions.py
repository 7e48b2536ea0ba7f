"""What fsm_{type}_send_v3 costs beside fsm_{type}_send_v2, which it replaces (revision 0020).

v3 answers an event the type does not have with 31028 instead of 31005/31003; it looks the
event up only in its error handler, after a refusal. So: a transition should cost the same
through both, and a refusal a little more through v3. Measured here, each beside the
INSERT+COMMIT ceiling of the same run: one process, one plain autocommit connection, ``--rounds``
rounds of ``--count`` calls per approach, the approaches interleaved round by round; the table
gives each approach's median wall time and its ratio to the ceiling and to v2's.

    .venv/bin/python bench/bench_send_versions.py --dsn mysql://root@127.0.0.1:3306/test
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable

import pymysql

from pyfsm import Machine, Store
from pyfsm.db import parse_dsn

MACHINE = Machine(
    name="bench_sv",
    states=["a", "b", "z"],
    start=["a"],
    final=["z"],
    transitions=[("go", "a", "b"), ("back", "b", "a"), ("end", "b", "z")],
)
KEYS = [f"k{n}" for n in range(8)]


def database(dsn: str) -> str:
    """A fresh database of this run's own on the DSN's server."""
    settings = parse_dsn(dsn)
    name = f"pyfsm_bsv_{uuid.uuid4().hex[:8]}"
    conn = pymysql.connect(**settings.connect_kwargs(database=False))
    conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    conn.close()
    return dsn.rsplit("/", 1)[0] + "/" + name


def measure(call: Callable[[int], object], count: int) -> float:
    """Wall microseconds per call over ``count`` calls."""
    started = time.perf_counter()
    for n in range(count):
        call(n)
    return (time.perf_counter() - started) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    dsn = database(args.dsn)
    with Store(dsn, pool_size=1) as store:
        store.migrate()
        store.define(MACHINE)
        for key in KEYS:
            store.create(MACHINE, key)
    raw = pymysql.connect(**{**parse_dsn(dsn).connect_kwargs(), "autocommit": True})
    raw.cursor().execute("CREATE TABLE bsv_ceiling (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
    states = dict.fromkeys(KEYS, "a")

    def ceiling(n: int) -> None:
        with raw.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("INSERT INTO bsv_ceiling (v) VALUES (%s)", (n,))
            cur.execute("COMMIT")

    def transition(version: int) -> Callable[[int], None]:
        sql = f"CALL `fsm_{MACHINE.name}_send_v{version}`(%s, %s, NULL, NULL, NULL, NULL, NULL, NULL)"

        def call(n: int) -> None:
            key = KEYS[n % len(KEYS)]
            event = "go" if states[key] == "a" else "back"
            with raw.cursor() as cur:
                cur.execute(sql, (key, event))
                while cur.nextset():
                    pass
            states[key] = "b" if event == "go" else "a"

        return call

    def refusal(version: int, event: str, expected: int) -> Callable[[int], None]:
        """An event refused on an existing key: "pay" the type lacks (v2 31005, v3 31028), or
        "end" it has but not from "a" (31005 from both: v3 looks it up and finds it)."""
        sql = f"CALL `fsm_{MACHINE.name}_send_v{version}`(%s, %s, NULL, NULL, NULL, NULL, NULL, NULL)"

        def call(n: int) -> None:
            key = next(k for k in KEYS if states[k] == "a")
            try:
                with raw.cursor() as cur:
                    cur.execute(sql, (key, event))
                    while cur.nextset():
                        pass
            except pymysql.err.MySQLError as exc:
                assert exc.args[0] == expected, exc
            else:
                raise AssertionError(f"{event} was not refused")

        return call

    approaches = {
        "ceiling (INSERT+COMMIT)": ceiling,
        "transition, send_v2": transition(2),
        "transition, send_v3": transition(3),
        "refused, event the type has (31005), send_v2": refusal(2, "end", 31005),
        "refused, event the type has (31005), send_v3": refusal(3, "end", 31005),
        "refused, misspelt event, send_v2 (31005)": refusal(2, "pay", 31005),
        "refused, misspelt event, send_v3 (31028)": refusal(3, "pay", 31028),
    }
    # each v3 row beside the v2 row of the same call
    twins = {name: list(approaches)[i - 1] for i, name in enumerate(approaches) if "send_v3" in name}
    results: dict[str, list[float]] = {name: [] for name in approaches}
    for call in approaches.values():
        measure(call, 50)  # warm up
    for _round in range(args.rounds):
        for name, call in approaches.items():
            results[name].append(measure(call, args.count))
    medians = {name: statistics.median(r) for name, r in results.items()}
    with raw.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = cur.fetchone()[0]
    ceiling_us = medians["ceiling (INSERT+COMMIT)"]
    print(f"{version}; {args.rounds} rounds x {args.count} calls, interleaved; medians")
    print("| approach | us/call | vs ceiling | vs send_v2's |")
    print("|---|---:|---:|---:|")
    for name, us in medians.items():
        twin = twins.get(name)
        versus = f"{us / medians[twin]:.2f}x" if twin else ""
        print(f"| {name} | {us:,.0f} | {us / ceiling_us:.2f}x | {versus} |")
    raw.cursor().execute(f"DROP DATABASE `{parse_dsn(dsn).database}`")
    raw.close()


if __name__ == "__main__":
    main()
