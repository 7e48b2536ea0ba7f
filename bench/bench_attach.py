"""Issue 48's benchmark: machines on the application's own tables (Store.attach), on each server.

1. A transition of an attached table's row (``orders``, attached with Store.attach) through
   Store.send and through the application's raw ``UPDATE orders SET status = ...``, beside the
   same on a pyfsm-owned type (Store.send; raw ``UPDATE fsm_<type> SET current_state = ...``),
   at 1 and 8 client processes: tx/s and the server's CPU per transition.
   Target: attached <= 1.1x the owned type's cost.
2. An UPDATE of a non-state column of the attached table against the same UPDATE of a second
   table of the same schema without pyfsm's triggers. Target: <= 1.05x.
   Floors, measured beside them: the same UPDATE of a table whose BEFORE UPDATE trigger runs
   no statement (``orders_empty``: what any trigger costs), and of a table whose hand-written
   trigger hands a state change to a third type's instance row and does nothing else
   (``orders_glue``: no marks, no adoption, no key check; the least a trigger that enforces the
   machine can be). The same glue table's raw state UPDATE is the floor of item 1's raw path.
3. Adopting ``--adopt-rows`` existing rows (Store.adopt, batch sizes ``--batches``) in rows per
   second, beside the same run's single-row INSERT+COMMIT ceiling and a batched
   ``INSERT ... SELECT`` of the same number of rows into a plain table.

Every measurement runs in a fresh database; the approaches alternate A/B/A/B over ``--runs``
rounds and the table shows medians (other work may share the machine). Server CPU: the server
process's user + system time over the timed window (bench_transitions.server_cpu_seconds).

    .venv/bin/python bench/bench_attach.py --runs 3 --dsn mysql://root@127.0.0.1:3306/test \
        --dsn mysql://root@127.0.0.1:3307/test
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import bench_transitions as bt

from pyfsm import Machine, Store
from pyfsm.db import Settings

OWNED, ATTACHED, GLUE = "bench_own", "bench_att", "bench_glue"
MACHINE_KW: dict[str, Any] = {
    "states": ["open", "held"],
    "start": ["open"],
    "transitions": [("hold", "open", "held"), ("release", "held", "open")],
}
NEXT = {"open": ("hold", "held"), "held": ("release", "open")}
ORDERS = """CREATE TABLE `{name}` (
  id BIGINT NOT NULL PRIMARY KEY, status VARCHAR(32) NULL, customer_id BIGINT NOT NULL,
  amount DECIMAL(12,2) NOT NULL, note VARCHAR(100) NOT NULL DEFAULT '',
  updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB"""
APPROACHES = (
    "ceiling INSERT+COMMIT",
    "owned Store.send",
    "attached Store.send",
    "owned raw UPDATE fsm_<type>",
    "attached raw UPDATE orders.status",
    "plain UPDATE orders_plain.amount",
    "attached UPDATE orders.amount",
    "floor: glue raw UPDATE orders_glue.status",
    "floor: empty trigger UPDATE orders_empty.amount",
    "floor: glue UPDATE orders_glue.amount",
)
#: (floor, its reference): what no trigger of this design can go below
FLOORS = (
    ("floor: glue raw UPDATE orders_glue.status", "owned raw UPDATE fsm_<type>"),
    ("floor: empty trigger UPDATE orders_empty.amount", "plain UPDATE orders_plain.amount"),
    ("floor: glue UPDATE orders_glue.amount", "plain UPDATE orders_plain.amount"),
)
#: the hand-written triggers of the floors
EMPTY_TRIGGER = (
    "CREATE TRIGGER orders_empty_bu BEFORE UPDATE ON orders_empty FOR EACH ROW "
    "BEGIN IF NOT (NEW.status <=> OLD.status) THEN SET @bench_changed = 1; END IF; END"
)
GLUE_TRIGGER = (
    "CREATE TRIGGER orders_glue_bu BEFORE UPDATE ON orders_glue FOR EACH ROW "
    "BEGIN IF NOT (NEW.status <=> OLD.status) THEN "
    f"UPDATE `fsm_{GLUE}` SET current_state = NEW.status WHERE instance_key = CAST(OLD.id AS CHAR); END IF; END"
)
#: (attached, its reference, target ratio)
PAIRS = (
    ("attached Store.send", "owned Store.send", 1.1),
    ("attached raw UPDATE orders.status", "owned raw UPDATE fsm_<type>", 1.1),
    ("attached UPDATE orders.amount", "plain UPDATE orders_plain.amount", 1.05),
)
KEYS_PER_CLIENT = 8
Step = Callable[[int], Any]


@dataclass(frozen=True)
class Job:
    approach: str
    client: int
    settings: Settings
    seconds: float


def order_rows(conn: Any, table: str, job: Job) -> list[int]:
    """This client's rows of ``table`` (ids of its own range; on ``orders`` each is an instance)."""
    base = (APPROACHES.index(job.approach) * 1000 + job.client) * 1000
    ids = [base + j + 1 for j in range(KEYS_PER_CLIENT)]
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO `{table}` (id, customer_id, amount) VALUES (%s, %s, 10)", [(i, i % 97) for i in ids]
        )
    return ids


def client_step(job: Job) -> Step:
    """A step of ``job.approach`` for one client (its setup not measured)."""
    conn = bt.plain_connect(job.settings)  # autocommit: each statement its own durable commit
    cur = conn.cursor()
    approach = job.approach
    if approach.startswith("ceiling"):
        conn.autocommit(False)

        def ceiling(i: int) -> None:
            cur.execute(
                "INSERT INTO bench_ceiling (client, n, created_at) VALUES (%s, %s, UTC_TIMESTAMP(6))", (job.client, i)
            )
            conn.commit()

        return ceiling
    if approach.endswith(".amount"):
        table = approach.rsplit(" ", 1)[1].removesuffix(".amount")
        ids = order_rows(conn, table, job)
        if table == "orders_glue":
            with Store(job.settings.dsn(), pool_size=1) as glue:
                for i in ids:
                    glue.create(GLUE, str(i))

        def amount(i: int) -> None:
            if cur.execute(f"UPDATE `{table}` SET amount = amount + 1 WHERE id = %s", (ids[i % len(ids)],)) != 1:
                raise RuntimeError("no row updated")

        return amount
    if approach.startswith("floor: glue raw"):
        ids = order_rows(conn, "orders_glue", job)
        with Store(job.settings.dsn(), pool_size=1) as glue:
            for i in ids:
                glue.create(GLUE, str(i))
        glue_states = dict.fromkeys(ids, "open")

        def glue_raw(i: int) -> None:
            key = ids[i % len(ids)]
            to_state = NEXT[glue_states[key]][1]
            if cur.execute("UPDATE orders_glue SET status = %s WHERE id = %s", (to_state, key)) != 1:
                raise RuntimeError(f"UPDATE of {key} changed no row")
            glue_states[key] = to_state

        return glue_raw
    attached = approach.startswith("attached")
    machine = ATTACHED if attached else OWNED
    store = Store(job.settings.dsn(), pool_size=1)
    if attached:
        keys = [str(i) for i in order_rows(conn, "orders", job)]  # the trigger makes each instance
    else:
        keys = [f"{APPROACHES.index(approach)}-{job.client}-{j}" for j in range(KEYS_PER_CLIENT)]
        for key in keys:
            store.create(machine, key)
    states = dict.fromkeys(keys, "open")
    if "Store.send" in approach:

        def send(i: int) -> None:
            key = keys[i % len(keys)]
            states[key] = store.send(machine, key, NEXT[states[key]][0]).to_state

        return send
    sql = (
        "UPDATE orders SET status = %s WHERE id = %s"
        if attached
        else f"UPDATE `fsm_{OWNED}` SET current_state = %s WHERE instance_key = %s"
    )

    def raw(i: int) -> None:
        key = keys[i % len(keys)]
        to_state = NEXT[states[key]][1]
        if cur.execute(sql, (to_state, key)) != 1:
            raise RuntimeError(f"UPDATE of {key} changed no row")
        states[key] = to_state

    return raw


def worker(job: Job, go: Any, out: Any) -> None:
    try:
        step = client_step(job)
        result = bt.Result(job.approach, 1)
        bt.timed_loop(step, bt.WARMUP_SECONDS, result.warmup_errors, [])
        go.wait()
        result.count, elapsed = bt.timed_loop(step, job.seconds, result.errors, result.latencies_ms)
        result.rate = result.count / elapsed
        out.put(result)
    except BaseException:
        go.abort()
        out.put(traceback.format_exc())


def measure(approach: str, clients: int, settings: Settings, seconds: float, pid: int | None) -> bt.Result:
    """``clients`` processes doing ``approach`` together for ``seconds``; the server's CPU meanwhile."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Barrier(clients + 1, timeout=120), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(Job(approach, c, settings, seconds), go, out)) for c in range(clients)]
    for p in procs:
        p.start()
    total = bt.Result(approach, clients)
    try:
        try:
            go.wait()
        except threading.BrokenBarrierError:
            pass
        else:
            before = bt.server_cpu_seconds(pid)
            time.sleep(seconds)
            after = bt.server_cpu_seconds(pid)
            if before is not None and after is not None:
                total.server_cpu_s = after - before
        for _ in procs:
            part = out.get(timeout=seconds + 180)
            if isinstance(part, str):
                raise RuntimeError(f"a {approach} client failed:\n{part}")
            total.add(part)
        if total.errors:
            raise RuntimeError(f"{approach}: errors {dict(total.errors)}")
        return total
    finally:
        for p in procs:
            p.join(timeout=30)


def prepared(settings: Settings) -> None:
    """The two types (one attached to ``orders``) and the trigger-less ``orders_plain``."""
    conn = bt.plain_connect(settings)
    with conn.cursor() as cur:
        for name in ("orders", "orders_plain", "orders_empty", "orders_glue"):
            cur.execute(ORDERS.format(name=name))
    with Store(settings.dsn(), pool_size=1) as store:
        store.define(Machine(name=OWNED, **MACHINE_KW))
        store.define(Machine(name=ATTACHED, **MACHINE_KW))
        store.define(Machine(name=GLUE, **MACHINE_KW))
        store.attach(ATTACHED, table="orders", key="id", state="status")
        store.adopt(ATTACHED)  # no rows yet: adopted, so the update trigger is the adopted table's
    with conn.cursor() as cur:
        cur.execute(EMPTY_TRIGGER)
        cur.execute(GLUE_TRIGGER)
    conn.close()


def load(cur: Any, table: str, rows: int, chunk: int = 100_000) -> float:
    """``rows`` rows into ``table`` by INSERT ... SELECT from a numbers CTE, ``chunk`` a statement
    (each committed); the seconds it took."""
    start = time.perf_counter()
    for low in range(0, rows, chunk):
        n = min(chunk, rows - low)
        # both servers stop a recursive CTE at 1000 rows here, each by its own variable
        limit = "cte_max_recursion_depth" if MYSQL else "max_recursive_iterations"
        cur.execute(f"SET SESSION {limit} = %s", (n + 1,))
        cur.execute(
            f"INSERT INTO `{table}` (id, status, customer_id, amount) "
            "WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < %s) "
            "SELECT %s + n, IF(n %% 3 = 0, 'held', 'open'), n %% 97, 10 FROM seq",
            (n, low),
        )
    return time.perf_counter() - start


MYSQL: list[bool] = []


def adoption(settings: Settings, rows: int, batches: list[int]) -> dict[str, float]:
    """Rows per second: INSERT ... SELECT into a plain table, then Store.adopt of as many rows per batch size."""
    out: dict[str, float] = {}
    conn = bt.plain_connect(settings)
    with conn.cursor() as cur:
        cur.execute(ORDERS.format(name="adopt_plain"))
        out["INSERT ... SELECT (plain table)"] = rows / load(cur, "adopt_plain", rows)
        cur.execute("DROP TABLE adopt_plain")
        for size in batches:
            table, machine = f"adopt_{size}", f"bench_adopt_{size}"
            cur.execute(ORDERS.format(name=table))
            load(cur, table, rows)
            with Store(settings.dsn(), pool_size=1) as store:
                store.define(Machine(name=machine, **MACHINE_KW))
                store.attach(machine, table=table, key="id", state="status")
                start = time.perf_counter()
                report = store.adopt(machine, batch=size)
                elapsed = time.perf_counter() - start
            if report.adopted != rows:
                raise RuntimeError(f"adopted {report.adopted} of {rows}")
            out[f"Store.adopt batch={size}"] = rows / elapsed
            cur.execute(f"DROP TABLE `{table}`")
    conn.close()
    return out


def server_name(version: str) -> str:
    return f"MariaDB {version.split('-')[0]}" if "mariadb" in version.lower() else f"MySQL {version}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", action="append", help="a server (repeat for several)")
    parser.add_argument("--runs", type=int, default=3, help="alternating rounds (medians shown)")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--clients", default="1,8")
    parser.add_argument("--adopt-rows", type=int, default=1_000_000)
    parser.add_argument("--batches", default="1000,5000")
    parser.add_argument("--adopt-runs", type=int, default=1)
    parser.add_argument(
        "--adopt-only", action="store_true", help="adoption only (no transitions): 1 client's ceiling and adoption"
    )
    args = parser.parse_args(argv)
    dsns = args.dsn or ["mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3307/test"]
    clients = [1] if args.adopt_only else [int(c) for c in args.clients.split(",")]
    for dsn in dsns:
        samples: dict[tuple[str, int], list[bt.Result]] = {}
        adopt: dict[str, list[float]] = {}
        with bt.migrated_database(dsn) as (settings, server):
            pid = bt.server_pid(settings)
            MYSQL[:] = [] if "mariadb" in server["version"].lower() else [True]
            label = server_name(server["version"])
            print(f"== {label} (flush_log_at_trx_commit={server['flush']}, load {server['load']})", file=sys.stderr)
        for run in range(args.runs):
            for n in clients:
                # one fresh database per round: A/B/A/B, each approach beside the others in that round
                with bt.migrated_database(dsn) as (settings, _):
                    prepared(settings)
                    order = APPROACHES if run % 2 == 0 else APPROACHES[::-1]
                    if args.adopt_only:
                        order = ("ceiling INSERT+COMMIT",)
                    for approach in order:
                        r = measure(approach, n, settings, args.seconds, pid)
                        samples.setdefault((approach, n), []).append(r)
                        print(
                            f"  run {run + 1} {approach} x{n}: {r.rate:,.0f} tx/s {r.cpu_us() or 0:,.0f} us",
                            file=sys.stderr,
                        )
        for _ in range(args.adopt_runs):
            with bt.migrated_database(dsn) as (settings, _):
                for key, value in adoption(
                    settings, args.adopt_rows, [int(b) for b in args.batches.split(",")]
                ).items():
                    adopt.setdefault(key, []).append(value)
                    print(f"  {key}: {value:,.0f} rows/s", file=sys.stderr)
        print(report(label, server, samples, adopt, args, clients))
    return 0


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(
    label: str,
    server: dict[str, str],
    samples: dict[tuple[str, int], list[bt.Result]],
    adopt: dict[str, list[float]],
    args: argparse.Namespace,
    clients: list[int],
) -> str:
    rate = {k: med([r.rate for r in v]) for k, v in samples.items()}
    cpu = {k: med([r.cpu_us() or float("nan") for r in v]) for k, v in samples.items()}
    lines = [
        f"### {label}",
        "",
        f"Run {datetime.date.today().isoformat()}: {os.cpu_count()} CPUs, innodb_flush_log_at_trx_commit="
        f"{server['flush']}, load average {server['load']} at the start; medians of {args.runs} alternating "
        f"rounds of {args.seconds:g} s per approach.",
        "",
        "| approach | clients | tx/s | vs ceiling | server CPU us/tx |",
        "|---|---:|---:|---:|---:|",
    ]
    shown = [a for a in APPROACHES if all((a, n) in rate for n in clients)]
    for n in clients:
        ceiling = rate[("ceiling INSERT+COMMIT", n)]
        for a in shown:
            lines.append(f"| {a} | {n} | {rate[(a, n)]:,.0f} | {rate[(a, n)] / ceiling:.0%} | {cpu[(a, n)]:,.0f} |")
    if args.adopt_only:
        return "\n".join(lines + adoption_lines(rate, adopt, args, clients)) + "\n"
    lines += [
        "",
        "| attached vs reference | clients | CPU ratio | tx/s ratio (ref/att) | target | met |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for att, ref, target in PAIRS:
        for n in clients:
            c = cpu[(att, n)] / cpu[(ref, n)]
            t = rate[(ref, n)] / rate[(att, n)]
            met = "yes" if c <= target and t <= target else "no"
            lines.append(f"| {att} / {ref} | {n} | {c:.2f}x | {t:.2f}x | {target:g}x | {met} |")
    for floor, ref in FLOORS:
        for n in clients:
            c = cpu[(floor, n)] / cpu[(ref, n)]
            t = rate[(ref, n)] / rate[(floor, n)]
            lines.append(f"| {floor} / {ref} | {n} | {c:.2f}x | {t:.2f}x | (floor) | |")
    return "\n".join(lines + adoption_lines(rate, adopt, args, clients)) + "\n"


def adoption_lines(
    rate: dict[tuple[str, int], float], adopt: dict[str, list[float]], args: argparse.Namespace, clients: list[int]
) -> list[str]:
    if not adopt:
        return []
    ceiling1 = rate[("ceiling INSERT+COMMIT", clients[0])]
    lines = [
        "",
        f"Adoption of {args.adopt_rows:,} rows ({args.adopt_runs} run(s)):",
        "",
        "| what | rows/s | vs INSERT+COMMIT (1 client) |",
        "|---|---:|---:|",
        f"| single-row INSERT+COMMIT, 1 client | {ceiling1:,.0f} | 100% |",
    ]
    for key, values in adopt.items():
        lines.append(f"| {key} | {med(values):,.0f} | {med(values) / ceiling1:.1f}x |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
