"""The cost of taking and releasing pyfsm's locks, and contended throughput, against the ceiling.

Runs in a fresh database ``pyfsm_bench_<random>`` (dropped at the end), one server, one
driver (PyMySQL):

* ``acquire + release``, one client, per lock mode (none, global, local, both): ``Store.lock()``
  then ``Lease.release()`` on instances that all have different lookup keys, so nothing is
  contended. Microseconds per pair and round trips per pair, counted from the lease
  connection's own ``Questions`` counter (the leases reuse one connection).
* ``contended``: 8 client processes take the global lock of instances spread over only 4
  lookup keys (each acquisition with a few quick attempts, counted as refused when they
  all fail), hold it for a transition made as the holder, and release it. Reported:
  successful lock-transition-release cycles per second, refused acquisitions, and the
  ceiling (single-row INSERT + COMMIT) measured with 8 processes in the same run.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt

from pyfsm import LockNotAcquired, Machine, Store
from pyfsm.db import Settings

MARK = ("<!-- bench-locks:start -->", "<!-- bench-locks:end -->")
MODES = {
    "none": {},
    "global": {"uses_global_lock": True},
    "local": {"uses_local_lock": True},
    "both": {"uses_global_lock": True, "uses_local_lock": True},
}


def machine(name: str, **options: Any) -> Machine:
    return Machine(
        name=name, states=["a", "b"], start=["a"], transitions=[("go", "a", "b"), ("back", "b", "a")], **options
    )


def measure_mode(settings: Settings, mode: str, count: int) -> dict[str, float]:
    name = f"lk_{mode}"
    with Store(settings.dsn(), pool_size=2) as store:
        store.define(machine(name, **MODES[mode]))
        for n in range(count):
            store.create(name, f"k{n}", lookup_key=f"{mode}-acct-{n}")
        warm = store.lock(name, "k0", heartbeat=False)
        warm.release()
        conn = store._lease_connections._free[-1]  # the connection every lease below reuses
        before, started = bt.session_questions(conn.cursor()), time.perf_counter()
        for n in range(count):
            lease = store.lock(name, f"k{n}", heartbeat=False)
            assert lease.release()
        elapsed = time.perf_counter() - started
        trips = bt.session_questions(conn.cursor()) - before - 1
    return {"us": elapsed / count * 1e6, "trips": trips / count}


def contender(settings: Settings, name: str, keys: list[str], seconds: float, seed: int, go: Any, out: Any) -> None:
    try:
        rng = random.Random(seed)
        done = refused = 0
        with Store(settings.dsn(), pool_size=2) as store:
            store.get(name, keys[0])
            go.wait()
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                key = rng.choice(keys)
                try:
                    lease = store.lock(name, key, attempts=3, backoff=0.002, heartbeat=False)
                except LockNotAcquired:
                    refused += 1
                    continue
                with lease:
                    state = store.get(name, key).state
                    lease.send("go" if state == "a" else "back")
                done += 1
        out.put({"done": done, "refused": refused})
    except Exception:
        out.put(traceback.format_exc())


def measure_contended(settings: Settings, seconds: float, processes: int = 8, accounts: int = 4) -> dict[str, float]:
    name = "lk_contended"
    keys = [f"c{n}" for n in range(accounts * 4)]
    with Store(settings.dsn(), pool_size=2) as store:
        store.define(machine(name, uses_global_lock=True))
        for n, key in enumerate(keys):
            store.create(name, key, lookup_key=f"acct-{n % accounts}")
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=contender, args=(settings, name, keys, seconds, n, go, out)) for n in range(processes)]
    for p in procs:
        p.start()
    time.sleep(1.0)
    go.set()
    parts = [out.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    bad = [p for p in parts if isinstance(p, str)]
    if bad:
        raise RuntimeError(bad[0])
    return {
        "rate": sum(p["done"] for p in parts) / seconds,
        "refused": sum(p["refused"] for p in parts),
        "done": sum(p["done"] for p in parts),
    }


def report(
    server: dict[str, str],
    modes: dict[str, dict[str, float]],
    contended: dict[str, float],
    ceilings: dict[int, bt.Result],
    seconds: float,
) -> str:
    c1, c8 = ceilings[1], ceilings[8]
    lines = [
        f"Run {time.strftime('%Y-%m-%d')}: {os.cpu_count()} CPUs (load average {server['load']} at the start), "
        f"server {server['version']}, innodb_flush_log_at_trx_commit={server['flush']}; {seconds:g} s per "
        "timed measurement.",
        "",
        "| what | lock mode | processes | per operation | round trips (measured) | per second | vs ceiling |",
        "|---|---|---:|---:|---:|---:|---:|",
        f"| ceiling (INSERT+COMMIT) | | 1 | {1e6 / c1.rate:.0f} us | 2.00 | {c1.rate:,.0f} | 100% |",
    ]
    for mode, m in modes.items():
        lines.append(
            f"| acquire + release | {mode} | 1 | {m['us']:.0f} us | {m['trips']:.2f} | "
            f"{1e6 / m['us']:,.0f} | {1e6 / m['us'] / c1.rate:.0%} |"
        )
    lines += [
        f"| ceiling (INSERT+COMMIT) | | 8 | | 2.00 | {c8.rate:,.0f} | 100% |",
        f"| lock + transition + release, 4 lookup keys | global | 8 | | | {contended['rate']:,.0f} | "
        f"{contended['rate'] / c8.rate:.0%} |",
        "",
        f"Contended run: {int(contended['done']):,} cycles done, {int(contended['refused']):,} acquisitions refused "
        "after 3 quick attempts (LockNotAcquired: another process held that account).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each timed measurement")
    parser.add_argument("--count", type=int, default=500, help="acquire+release pairs per lock mode")
    parser.add_argument("--write", type=Path, help="update the locks block of this file (e.g. BENCHMARKS.md)")
    parser.add_argument("--json", type=Path, help="also write the measurements to this file as JSON")
    args = parser.parse_args(argv)
    with bt.migrated_database(args.dsn) as (settings, server):
        modes = {}
        for mode in MODES:
            print(f"measuring acquire + release ({mode})...", file=sys.stderr, flush=True)
            modes[mode] = measure_mode(settings, mode, args.count)
        print("measuring 8 contending processes...", file=sys.stderr, flush=True)
        contended = measure_contended(settings, args.seconds)
        ceilings = {k: bt.measure("ceiling", k, settings, args.seconds) for k in (1, 8)}
    text = report(server, modes, contended, ceilings, args.seconds)
    print(text)
    if args.write:
        bt.write_results(args.write, text, MARK)
    if args.json:
        bt.write_json(
            args.json,
            {
                "server": server,
                "modes": modes,
                "contended": contended,
                "ceilings": {k: bt.result_dict(r) for k, r in ceilings.items()},
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
