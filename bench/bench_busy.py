"""One busy instance: Store.send on the current transition trigger beside revision 0028's (bu_v12).

Issue 49, item 5. Each transition turns off the previous history row's most_recent. bu_v12
found that row through the unique key (instance_id, most_recent), whose entry (instance, 1)
every transition delete-marks; until the server's purge removes the marked entries, a lookup
there meets all of them and reads each one's row. bu_v13 (revision 0029) finds the row through
(instance_id, sort_key), whose entries never change. The more often one instance moves, the
more marked entries wait for the purge: here one client moves one instance of each type as
fast as it can, ``--count`` transitions per round, the two types in turn (the order reversed
every other round), in one fresh database (dropped at the end).

Per round and type: the client's time per transition, the server's CPU per transition
(``/proc/<pid>`` of ``@@pid_file``), the buffer pool's page reads per transition
(``Innodb_buffer_pool_read_requests``, server-wide: the purge's reads are in it) and the
server's history list length at the end of the round (``SHOW ENGINE INNODB STATUS``: how far
the purge lags). Medians over ``--rounds``; nothing else should run meanwhile.

    .venv/bin/python bench/bench_busy.py --dsn mysql://root@127.0.0.1:3306/test
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
from pyfsm.schema import install as schema

CURRENT = Machine(name="busy", states=["a", "b"], start=["a"], transitions=[("go", "a", "b"), ("back", "b", "a")])
OLDER = Machine(name="busy_0028", states=CURRENT.states, start=CURRENT.start, transitions=CURRENT.transitions)
LABELS = {CURRENT.name: "bu_v13 (revision 0029)", OLDER.name: "bu_v12 (revision 0028)"}
NEXT = {"a": "go", "b": "back"}


def server_status(cur: Any) -> tuple[int, int]:
    """(buffer pool page reads so far, history list length now)."""
    cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_read_requests'")
    reads = int(cur.fetchone()[1])
    cur.execute("SHOW ENGINE INNODB STATUS")
    text = cur.fetchone()[2]
    return reads, int(text.split("History list length")[1].split()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--count", type=int, default=3000, help="transitions per round and type")
    parser.add_argument("--rounds", type=int, default=4, help="rounds")
    args = parser.parse_args(argv)
    rows: dict[str, list[tuple[float, float | None, float, int]]] = {CURRENT.name: [], OLDER.name: []}
    with bt.migrated_database(args.dsn) as (settings, server):
        with Store(settings.dsn(), pool_size=1) as store:
            store.define(CURRENT)
            swap = [(schema.current_template("trigger_bu"), "trigger_bu_v12")]
            bt.define_with_older_triggers(store, OLDER, swap, "v18", rendered=bt.rendered_0028)
            pid = bt.server_pid(settings)
            admin = pymysql.connect(**settings.connect_kwargs())
            cur = admin.cursor()
            states = {name: store.create(name, "k").to_state for name in rows}
            for r in range(args.rounds):
                order = list(rows) if r % 2 == 0 else list(reversed(rows))
                for name in order:
                    reads, _ = server_status(cur)
                    cpu = bt.server_cpu_seconds(pid)
                    started = time.perf_counter()
                    for _ in range(args.count):
                        states[name] = store.send(name, "k", NEXT[states[name]]).to_state
                    elapsed = time.perf_counter() - started
                    cpu_after = bt.server_cpu_seconds(pid)
                    reads_after, history = server_status(cur)
                    rows[name].append(
                        (
                            elapsed * 1e6 / args.count,
                            None if cpu is None or cpu_after is None else (cpu_after - cpu) * 1e6 / args.count,
                            (reads_after - reads) / args.count,
                            history,
                        )
                    )
            admin.close()
    print(
        f"Server {server['version']}, innodb_flush_log_at_trx_commit={server['flush']}; one client, one instance "
        f"per type, {args.count:,} transitions per round and type, {args.rounds} rounds, medians.\n"
    )
    print("| transition trigger | client us/tx | server CPU us/tx | page reads/tx | history list length |")
    print("|---|---:|---:|---:|---:|")
    for name, measured in rows.items():
        columns = zip(*measured, strict=True)
        client, cpu, reads, history = (statistics.median(x for x in col if x is not None) for col in columns)
        print(f"| {LABELS[name]} | {client:,.0f} | {cpu:,.0f} | {reads:,.0f} | {history:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
