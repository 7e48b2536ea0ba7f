"""Client instructions per call, counted by valgrind (callgrind): Store.send beside a plain
PyMySQL CALL of the procedure it calls, and AsyncStore.send beside that CALL in an executor thread.

Client CPU time (bench_layers.py) moves by a third from run to run on a shared machine with
2 cores; the instructions the client process executes do not. Each approach runs in a child
process under callgrind twice, with ``--base`` and with ``--base + --count`` calls; the
difference divided by ``--count`` is its instructions per call (the start-up cancels out).
Needs valgrind (Debian package ``valgrind``). Issue 49's client target is 1.2x.

    .venv/bin/python bench/bench_client_instructions.py --dsn mysql://root@127.0.0.1:3306/test
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
from typing import Any

import bench_transitions as bt
import pymysql

from pyfsm import Machine, Store
from pyfsm.aio import AsyncStore
from pyfsm.db import parse_dsn
from pyfsm.schema import routines

MACHINE = Machine(name="bench_ci", states=["a", "b"], start=["a"], transitions=[("go", "a", "b"), ("back", "b", "a")])
KEYS = [f"k{n}" for n in range(8)]
#: each pyfsm approach and the plain call it is compared with
PAIRS = {"Store.send": "plain CALL", "AsyncStore.send": "plain CALL in a thread"}


def child(dsn: str, approach: str, count: int) -> None:
    """Make ``count`` calls the ``approach`` way (run under callgrind by the parent)."""
    raw = pymysql.connect(**{**parse_dsn(dsn).connect_kwargs(), "autocommit": True})
    with raw.cursor() as cur:
        cur.execute(f"SELECT instance_key, current_state FROM `fsm_{MACHINE.name}`")
        states = dict(cur.fetchall())
    sql = f"CALL `{routines.FIRE.name_for(MACHINE.name)}`(%s, %s)"  # the procedure Store.send calls
    store = Store(dsn, pool_size=1)
    store.get(MACHINE, KEYS[0])  # the schema check, once, outside the calls counted
    loop = asyncio.new_event_loop()
    async_store = AsyncStore(dsn, pool_size=1)

    def event(n: int) -> tuple[str, str]:
        key = KEYS[n % len(KEYS)]
        go = "go" if states[key] == "a" else "back"
        states[key] = "b" if go == "go" else "a"
        return key, go

    def plain(n: int) -> None:
        with raw.cursor() as cur:
            cur.execute(sql, event(n))
            cur.fetchall()

    async def plain_in_thread(n: int) -> None:
        await loop.run_in_executor(None, plain, n)

    async def async_send(n: int) -> None:
        await async_store.send(MACHINE, *event(n))

    calls: dict[str, Any] = {
        "plain CALL": plain,
        "Store.send": lambda n: store.send(MACHINE, *event(n)),
        "plain CALL in a thread": lambda n: loop.run_until_complete(plain_in_thread(n)),
        "AsyncStore.send": lambda n: loop.run_until_complete(async_send(n)),
    }
    call = calls[approach]
    call(0)  # the first call of a kind loads what it needs (a thread, a schema check)
    for n in range(1, count + 1):
        call(n)
    loop.run_until_complete(async_store.close())
    store.close()


def instructions(dsn: str, approach: str, count: int) -> int:
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            approach,
            "--count",
            str(count),
            "--dsn",
            dsn,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if not found:
        raise SystemExit(f"callgrind printed no count for {approach}:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--count", type=int, default=1000, help="calls counted per approach")
    parser.add_argument("--base", type=int, default=100, help="calls of the run subtracted")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.dsn, args.child, args.count)
        return
    with bt.migrated_database(args.dsn) as (settings, server):  # a fresh database, dropped after
        dsn = settings.dsn()
        with Store(dsn, pool_size=1) as store:
            store.define(MACHINE)
            for key in KEYS:
                store.create(MACHINE, key)
        per_call = {}
        for approach in ("plain CALL", "Store.send", "plain CALL in a thread", "AsyncStore.send"):
            low = instructions(dsn, approach, args.base)
            high = instructions(dsn, approach, args.base + args.count)
            per_call[approach] = (high - low) / args.count
    print(f"{server['version']}: client instructions per call (callgrind; {args.count} calls beyond {args.base})")
    print("| approach | instructions per call | vs its plain call |")
    print("|---|---:|---:|")
    for approach, n in per_call.items():
        plain = PAIRS.get(approach)
        ratio = f"{n / per_call[plain]:.3f}x ({n - per_call[plain]:+,.0f})" if plain else ""
        print(f"| {approach} | {n:,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
