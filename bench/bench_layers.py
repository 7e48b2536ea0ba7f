"""What pyfsm's Python layers cost per call: the client CPU of Store.send and Store.get beside
the same procedure CALLed through a bare PyMySQL cursor, AsyncStore.send beside that bare CALL
run in a thread of an asyncio loop's executor, and the INSERT+COMMIT ceiling.

Client CPU (``time.process_time``) is what the facade, the gateway and the pool add; it moves
little with the server's noise, unlike wall time. One process, one connection at a time,
``--rounds`` rounds of ``--count`` calls per approach, the approaches interleaved round by
round; the table gives each approach's median over the rounds. To compare two checkouts,
run it from each with ``PYTHONPATH=<checkout>`` (the pyfsm it imports is the one measured).

    .venv/bin/python bench/bench_layers.py --dsn mysql://root@127.0.0.1:3306/test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import pymysql

import pyfsm
from pyfsm import Machine, Store
from pyfsm.aio import AsyncStore
from pyfsm.db import parse_dsn
from pyfsm.schema import routines

MACHINE = Machine(
    name="bench_layers", states=["a", "b"], start=["a"], transitions=[("go", "a", "b"), ("back", "b", "a")]
)


def database(dsn: str) -> str:
    """A fresh database of this run's own on the DSN's server."""
    settings = parse_dsn(dsn)
    name = f"pyfsm_bl_{uuid.uuid4().hex[:8]}"
    conn = pymysql.connect(**settings.connect_kwargs(database=False))
    conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    conn.close()
    return dsn.rsplit("/", 1)[0] + "/" + name


def measure(call: Callable[[int], Any], count: int) -> tuple[float, float]:
    """(wall us, client CPU us) per call over ``count`` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for n in range(count):
        call(n)
    return (time.perf_counter() - wall) / count * 1e6, (time.process_time() - cpu) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the medians to this file")
    args = parser.parse_args()
    dsn = database(args.dsn)
    store = Store(dsn, pool_size=1)
    store.migrate()
    store.define(MACHINE)
    keys = [f"k{n}" for n in range(8)]
    for key in keys:
        store.create(MACHINE, key)
    raw = pymysql.connect(**{**parse_dsn(dsn).connect_kwargs(), "autocommit": True})
    raw.cursor().execute("CREATE TABLE bl_ceiling (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
    states = dict.fromkeys(keys, "a")

    def event(n: int) -> tuple[str, str]:
        key = keys[n % len(keys)]
        go = "go" if states[key] == "a" else "back"
        states[key] = "b" if go == "go" else "a"
        return key, go

    def ceiling(n: int) -> None:
        with raw.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("INSERT INTO bl_ceiling (v) VALUES (%s)", (n,))
            cur.execute("COMMIT")

    send_sql = f"CALL `{routines.FIRE.name_for(MACHINE.name)}`(%s, %s)"  # the procedure Store.send calls

    def bare_call(n: int) -> None:
        with raw.cursor() as cur:
            cur.execute(send_sql, event(n))
            cur.fetchall()

    def store_send(n: int) -> None:
        store.send(MACHINE, *event(n))

    def store_get(n: int) -> None:
        store.get(MACHINE, keys[n % len(keys)])

    # asyncio: each call awaited in turn on one loop, as a request handler would; the bare CALL
    # runs in the loop's default executor, AsyncStore.send in its own pool (one thread here)
    loop = asyncio.new_event_loop()
    async_store = AsyncStore(dsn, pool_size=1)

    def in_loop(make: Callable[[int], Any]) -> Callable[[int], None]:
        def call(n: int) -> None:
            loop.run_until_complete(make(n))

        return call

    async def bare_in_thread(n: int) -> None:
        await loop.run_in_executor(None, bare_call, n)

    async def async_send(n: int) -> None:
        await async_store.send(MACHINE, *event(n))

    approaches = {
        "ceiling (INSERT+COMMIT)": ceiling,
        "bare CALL of the fire procedure (PyMySQL)": bare_call,
        "Store.send": store_send,
        "Store.get": store_get,
        "bare CALL in a thread (asyncio)": in_loop(bare_in_thread),
        "AsyncStore.send": in_loop(async_send),
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in approaches}
    for call in approaches.values():
        measure(call, 50)  # warm up
    for _round in range(args.rounds):
        for name, call in approaches.items():
            results[name].append(measure(call, args.count))
    medians = {
        name: (statistics.median(w for w, _c in r), statistics.median(c for _w, c in r)) for name, r in results.items()
    }
    ceiling_wall = medians["ceiling (INSERT+COMMIT)"][0]
    # each pyfsm call beside the plain call it stands for (issue 49's client target: 1.2x at most)
    baseline = {
        "Store.send": "bare CALL of the fire procedure (PyMySQL)",
        "Store.get": "bare CALL of the fire procedure (PyMySQL)",
        "AsyncStore.send": "bare CALL in a thread (asyncio)",
    }
    print(f"pyfsm {pyfsm.__version__} from {pyfsm.__file__}; {args.rounds} rounds x {args.count} calls, medians")
    print("| approach | wall us/call | vs ceiling (wall) | client CPU us/call | client CPU vs its plain call |")
    print("|---|---:|---:|---:|---:|")
    for name, (wall, cpu) in medians.items():
        plain = baseline.get(name)
        extra = f"{cpu / medians[plain][1]:.2f}x ({cpu - medians[plain][1]:+.0f} us)" if plain else ""
        print(f"| {name} | {wall:,.0f} | {wall / ceiling_wall:.2f}x | {cpu:,.0f} | {extra} |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"pyfsm": pyfsm.__file__, "medians": medians}, out, indent=1)
    loop.run_until_complete(async_store.close())
    loop.close()
    store.close()
    raw.cursor().execute(f"DROP DATABASE `{parse_dsn(dsn).database}`")
    raw.close()


if __name__ == "__main__":
    main()
