"""What revision 0025 (issue 46) costs beside the procedures it replaced, each beside the INSERT+COMMIT ceiling.

Revision 0025 kept the old versions (deprecated), so both run in one database and one session:

1. **A transition with data.** ``fsm_{type}_send_v5`` has one more parameter than send_v4,
   ``p_data_patch``, and its UPDATE's data expression is ``IF(p_data_patch IS NULL,
   COALESCE(p_data, data), JSON_MERGE_PATCH(COALESCE(data, '{}'), p_data_patch))``. Measured:
   a transition replacing the data (``data``) by a direct CALL of send_v4 and of send_v5, and
   send_v5 with a ``data_patch`` of the same object (so the merge rewrites every key: the
   data keeps its size); ``Store.send(data=...)`` and ``Store.send(data_patch=...)`` (both
   send_v5); ``Store.send()`` without options (fire_v1, unchanged) for reference.
2. **Timers drained.** ``fsm_fire_timers_v3`` orders the firing cursor by (machine,
   instance_id, due_at, id) where v2 had (machine, instance_id, id). Each round arms two
   timers per instance with ``Store.send_at`` (go, then back just after it: one instance's two
   timers are neighbours in due order, so they share a batch and the per-instance order is
   exercised), moves them two hours into the past with an UPDATE of fsm_timers' due_at and
   fire_at (as tests/server/test_second_hour.py does), and drains them with ``CALL
   fsm_fire_timers_vN('bench-r25', 100, 30)`` until a batch comes back short; every timer
   must have fired (checked: the outcomes, nothing left armed).
3. **Statistics.** ``fsm_stats_v3`` adds one derived table per type (the type's runs in
   fsm_runs joined to its instances) to split running from idle. One CALL of v2 and of v3
   with a type of ``--stats-instances`` instances (raw multi-row INSERTs: all idle) of which
   ``--queued`` are handed to the engine with ``CALL fsm_enqueue_v2``.

One process, plain autocommit PyMySQL connections (a Store of pool_size 1 for the Store rows),
a fresh database of its own (``pyfsm_r25_<random>``, dropped at the end). Each part
interleaves its approaches round by round (their order reversed every other round) and
measures the ceiling in every round; the tables give medians, and "per round" the median of
the per-round ratios (a load that changes between rounds cancels out). Server CPU per call is the
server process's user + system time from /proc (bench_transitions.server_pid: both servers of
this machine; n/a for a remote one). Other work on the same server lands in that CPU time:
each measurement also counts the statements other connections sent meanwhile (the global
Questions counter less this run's own), and the CPU column is the median of the measurements
where they sent none when there are at least 3 such "quiet" ones, else of all (the table says
how many were quiet). The rows the plain connection's calls read (Handler_read_*, per call or
per timer) do not move with the load: the timers' and the statistics' tables give them too.

    .venv/bin/python bench/bench_revision_0025.py --dsn mysql://root@127.0.0.1:3306/test
    .venv/bin/python bench/bench_revision_0025.py --dsn mysql://root@127.0.0.1:3307/test --json r25.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt

from pyfsm import Machine, Store
from pyfsm.db import parse_dsn

STATES, EDGES = ["a", "b"], [("go", "a", "b"), ("back", "b", "a")]
SEND = Machine(name="bench_r25_send", states=STATES, start=["a"], transitions=EDGES)
TIMED = Machine(name="bench_r25_timers", states=STATES, start=["a"], transitions=EDGES)
STATS = Machine(name="bench_r25_stats", states=STATES, start=["a"], transitions=EDGES)
KEYS = [f"k{n}" for n in range(8)]
CEILING = "ceiling (INSERT+COMMIT)"
OWNER, BATCH, CLAIM_SECONDS = "bench-r25", 100, 30
INSERT_ROWS = 2000  # instances per multi-row INSERT
QUIET_ENOUGH = 3  # quiet measurements the CPU column needs to leave the others out


def payload(n: int) -> dict[str, Any]:
    """An order's data, about 200 bytes; ``n`` changes one value per call."""
    return {
        "customer": "c-000042",
        "total": n,
        "currency": "EUR",
        "note": "x" * 64,
        "address": {"city": "Lyon", "zip": "69001", "country": "FR"},
        "express": True,
    }


def database(dsn: str) -> str:
    """A fresh database of this run's own on the DSN's server."""
    settings = parse_dsn(dsn)
    name = f"pyfsm_r25_{uuid.uuid4().hex[:8]}"
    conn = pymysql.connect(**settings.connect_kwargs(database=False))
    conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    conn.close()
    return dsn.rsplit("/", 1)[0] + "/" + name


def one(cur: Any, column: int = 0) -> Any:
    """A column of the one row a statement returned."""
    row = cur.fetchone()
    assert row is not None
    return row[column]


def drain_results(cur: Any) -> None:
    while cur.nextset():
        pass


@dataclass
class Sample:
    """One measurement: wall and server CPU microseconds per unit, the statements other
    connections sent to the server meanwhile, and the rows read per unit."""

    wall_us: float
    cpu_us: float | None
    foreign: int
    reads: float  # rows this run's plain connection read (Handler_read_*) per unit


@dataclass
class Meter:
    """Times a piece of work: wall clock, the server's CPU (/proc), and whether others were busy."""

    raw: pymysql.connections.Connection
    store: Store
    pid: int | None
    # the status reads of one measurement count themselves: calibrated in calibrate()
    offset: int = 0
    reads_offset: int = 0

    def _questions(self, scope: str) -> int:
        with self.raw.cursor() as cur:
            cur.execute(f"SHOW {scope} STATUS LIKE 'Questions'")
            return int(one(cur, 1))

    def _reads(self) -> int:
        with self.raw.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
            return sum(int(v) for _, v in cur.fetchall())

    def _own(self) -> int:
        return self._questions("SESSION") + bt.store_questions(self.store)

    def run(self, work: Callable[[], int]) -> Sample:
        """Run ``work`` (it returns how many units it did: calls, timers) and measure it."""
        global_before, own_before, reads_before = self._questions("GLOBAL"), self._own(), self._reads()
        cpu_before, started = bt.server_cpu_seconds(self.pid), time.perf_counter()
        units = work()
        elapsed, cpu_after = time.perf_counter() - started, bt.server_cpu_seconds(self.pid)
        reads = self._reads() - reads_before - self.reads_offset
        own_after, global_after = self._own(), self._questions("GLOBAL")
        foreign = (global_after - global_before) - (own_after - own_before) - self.offset
        cpu = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) * 1e6 / units
        return Sample(elapsed * 1e6 / units, cpu, max(foreign, 0), reads / units)

    def calibrate(self) -> None:
        """What the status reads alone add (the least of a few empty measurements)."""
        empty = [self.run(lambda: 1) for _ in range(5)]
        self.offset, self.reads_offset = min(e.foreign for e in empty), round(min(e.reads for e in empty))


@dataclass
class Row:
    name: str
    samples: list[Sample] = field(default_factory=list)

    def wall(self) -> float:
        return statistics.median(s.wall_us for s in self.samples)

    def quiet(self) -> list[Sample]:
        return [s for s in self.samples if s.foreign == 0]

    def per_round(self, other: Row) -> float:
        """The median of this row's wall time over ``other``'s, round by round (measured minutes
        apart at most, so a change of the machine's load between rounds cancels out)."""
        return statistics.median(a.wall_us / b.wall_us for a, b in zip(self.samples, other.samples, strict=True))

    def reads(self) -> float:
        return statistics.median(s.reads for s in self.samples)

    def cpu(self) -> float | None:
        """The median over the quiet measurements when there are at least QUIET_ENOUGH, else over all."""
        pool = self.quiet() if len(self.quiet()) >= QUIET_ENOUGH else self.samples
        values = [s.cpu_us for s in pool if s.cpu_us is not None]
        return statistics.median(values) if values else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "wall_us": self.wall(),
            "cpu_us": self.cpu(),
            "quiet": len(self.quiet()),
            "reads": self.reads(),
            "samples": [vars(s) for s in self.samples],
        }


def interleaved(meter: Meter, approaches: dict[str, Callable[[], int]], rounds: int, label: str) -> dict[str, Row]:
    """Every approach once per round, the order reversed every other round."""
    rows = {name: Row(name) for name in approaches}
    for r in range(rounds):
        print(f"{label}: round {r + 1} of {rounds}", file=sys.stderr, flush=True)
        names = list(approaches) if r % 2 == 0 else list(reversed(approaches))
        for name in names:
            rows[name].samples.append(meter.run(approaches[name]))
    return rows


def ceiling_work(raw: pymysql.connections.Connection, count: int) -> Callable[[], int]:
    def work() -> int:
        with raw.cursor() as cur:
            for n in range(count):
                cur.execute("BEGIN")
                cur.execute("INSERT INTO r25_ceiling (v) VALUES (%s)", (n,))
                cur.execute("COMMIT")
        return count

    return work


# -- 1. a transition with data -----------------------------------------------------------------


def part_send(meter: Meter, rounds: int, count: int) -> dict[str, Row]:
    raw, store = meter.raw, meter.store
    store.define(SEND)
    for key in KEYS:
        store.create(SEND, key, data=payload(0))
    states = dict.fromkeys(KEYS, "a")
    serial = iter(range(1, 1 << 62))

    def step() -> tuple[str, str, int]:
        """The next (key, event, n): the keys in turn, each going a -> b -> a."""
        n = next(serial)
        key = KEYS[n % len(KEYS)]
        event = "go" if states[key] == "a" else "back"
        states[key] = "b" if event == "go" else "a"
        return key, event, n

    v4 = f"CALL `fsm_{SEND.name}_send_v4`(%s, %s, %s, NULL, NULL, NULL, NULL, NULL)"
    v5 = f"CALL `fsm_{SEND.name}_send_v5`(%s, %s, %s, NULL, NULL, NULL, NULL, NULL, %s)"

    def direct(sql: str, patch: bool) -> Callable[[], int]:
        def work() -> int:
            with raw.cursor() as cur:
                for _ in range(count):
                    key, event, n = step()
                    data = json.dumps(payload(n))
                    if sql == v4:
                        cur.execute(sql, (key, event, data))
                    else:
                        cur.execute(sql, (key, event, None, data) if patch else (key, event, data, None))
                    drain_results(cur)
            return count

        return work

    def through_store(option: str | None) -> Callable[[], int]:
        def work() -> int:
            for _ in range(count):
                key, event, n = step()
                if option is None:
                    store.send(SEND, key, event)
                elif option == "data":
                    store.send(SEND, key, event, data=payload(n))
                else:
                    store.send(SEND, key, event, data_patch=payload(n))
            return count

        return work

    # the patch path merges: a key it adds is there, one it sets to null is gone
    store.send(SEND, KEYS[0], "go", data_patch={"probe": 1})
    assert store.get(SEND, KEYS[0]).data == {**payload(0), "probe": 1}
    store.send(SEND, KEYS[0], "back", data_patch={"probe": None})
    assert store.get(SEND, KEYS[0]).data == payload(0)
    approaches = {
        CEILING: ceiling_work(raw, count),
        "CALL send_v4, data": direct(v4, patch=False),
        "CALL send_v5, data": direct(v5, patch=False),
        "CALL send_v5, data_patch": direct(v5, patch=True),
        "Store.send(data=...) (send_v5)": through_store("data"),
        "Store.send(data_patch=...) (send_v5)": through_store("data_patch"),
        "Store.send() without options (fire_v1, unchanged)": through_store(None),
    }
    for work in approaches.values():  # warm up
        work()
    rows = interleaved(meter, approaches, rounds, "send")
    for key in KEYS:  # every call landed: the last data written is a payload
        data = store.get(SEND, key).data
        assert set(data) == set(payload(0)), data
    return rows


# -- 2. timers drained ---------------------------------------------------------------------------


def part_timers(meter: Meter, rounds: int, count: int, instances: int) -> tuple[dict[str, Row], int]:
    raw, store = meter.raw, meter.store
    store.define(TIMED)
    keys = [f"t{n}" for n in range(instances)]
    for key in keys:
        store.create(TIMED, key)

    def arm() -> None:
        """Two timers per instance, due in an hour, each instance's back just after its go."""
        base = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(hours=1)
        for n, key in enumerate(keys):
            at = base + datetime.timedelta(milliseconds=n)
            store.send_at(TIMED, key, "go", at=at)
            store.send_at(TIMED, key, "back", at=at + datetime.timedelta(microseconds=500))
        with raw.cursor() as cur:  # two hours pass for them, their order kept
            cur.execute(
                "UPDATE fsm_timers SET due_at = due_at - INTERVAL 2 HOUR, fire_at = fire_at - INTERVAL 2 HOUR "
                "WHERE machine = %s",
                (TIMED.name,),
            )

    def drain(version: int) -> Callable[[], int]:
        """CALL in batches of BATCH until one comes back short (the timers armed before, untimed)."""

        def work() -> int:
            outcomes: Counter[str] = Counter()
            with raw.cursor() as cur:
                while True:
                    cur.execute(f"CALL fsm_fire_timers_v{version}(%s, %s, %s)", (OWNER, BATCH, CLAIM_SECONDS))
                    rows = cur.fetchall()
                    drain_results(cur)
                    outcomes.update(row[6] for row in rows)
                    if len(rows) < BATCH:
                        break
            assert outcomes == {"fired": 2 * instances}, outcomes
            return 2 * instances

        return work

    def none_left() -> None:
        with raw.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM fsm_timers WHERE machine = %s", (TIMED.name,))
            assert one(cur) == 0, "timers left armed"

    drains = {"fire_timers_v2": drain(2), "fire_timers_v3": drain(3)}
    rows = {name: Row(name) for name in [CEILING, *drains]}
    ceiling = ceiling_work(raw, count)
    for work in drains.values():  # warm up
        arm()
        work()
        none_left()
    for r in range(rounds):
        print(f"timers: round {r + 1} of {rounds}", file=sys.stderr, flush=True)
        rows[CEILING].samples.append(meter.run(ceiling))
        for name in list(drains) if r % 2 == 0 else list(reversed(drains)):
            arm()
            sample = meter.run(drains[name])
            none_left()
            rows[name].samples.append(sample)
    return rows, 2 * instances


# -- 3. statistics -------------------------------------------------------------------------------


def part_stats(meter: Meter, rounds: int, count: int, calls: int, instances: int, queued: int) -> dict[str, Row]:
    raw, store = meter.raw, meter.store
    store.define(STATS)
    print(f"stats: {instances:,} instances, {queued:,} queued...", file=sys.stderr, flush=True)
    with raw.cursor() as cur:
        for first in range(0, instances, INSERT_ROWS):
            keys = [f"s{n}" for n in range(first, min(instances, first + INSERT_ROWS))]
            cur.execute(f"INSERT INTO `fsm_{STATS.name}` (instance_key) VALUES " + ",".join(["(%s)"] * len(keys)), keys)
        step = max(1, instances // queued)
        for n in range(0, step * queued, step):
            cur.execute("CALL fsm_enqueue_v2(%s, %s, NULL, NULL)", (STATS.name, f"s{n}"))
            drain_results(cur)
        cur.execute("ANALYZE TABLE fsm_runs")
        cur.fetchall()
        cur.execute(f"ANALYZE TABLE `fsm_{STATS.name}`")
        cur.fetchall()

    def stats(version: int) -> Callable[[], int]:
        def work() -> int:
            with raw.cursor() as cur:
                for _ in range(calls):
                    cur.execute(f"CALL fsm_stats_v{version}()")
                    rows = cur.fetchall()
                    drain_results(cur)
            line = next(row for row in rows if row[0] == STATS.name)
            if version == 3:  # running: queued by the engine; idle: the rest
                assert (line[2], line[3], line[4]) == (instances, queued, instances - queued), line
            else:
                assert (line[2], line[3]) == (instances, instances), line
            return calls

        return work

    approaches = {CEILING: ceiling_work(raw, count), "fsm_stats_v2": stats(2), "fsm_stats_v3": stats(3)}
    for work in approaches.values():  # warm up
        work()
    return interleaved(meter, approaches, rounds, "stats")


# -- the tables ----------------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    return "" if a is None or not b else f"{a / b:.2f}x"


def send_table(rows: dict[str, Row]) -> list[str]:
    ceiling = rows[CEILING]
    twins = {
        "CALL send_v5, data": "CALL send_v4, data",
        "CALL send_v5, data_patch": "CALL send_v4, data",
        "Store.send(data_patch=...) (send_v5)": "Store.send(data=...) (send_v5)",
    }
    lines = [
        "| approach | us/call | vs ceiling | vs | vs, per round | server CPU us/call | vs ceiling | vs | quiet |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        twin = rows.get(twins.get(name, ""))
        twin_label = "" if twin is None else f" ({twins[name].split(',')[0].split('(')[0].strip()})"
        lines.append(
            f"| {name} | {fmt(row.wall())} | {ratio(row.wall(), ceiling.wall())} | "
            f"{ratio(row.wall(), twin.wall()) if twin else ''}{twin_label if twin else ''} | "
            f"{f'{row.per_round(twin):.2f}x' if twin else ''} | "
            f"{fmt(row.cpu())} | {ratio(row.cpu(), ceiling.cpu())} | "
            f"{ratio(row.cpu(), twin.cpu()) if twin else ''} | {len(row.quiet())}/{len(row.samples)} |"
        )
    return lines


def timers_table(rows: dict[str, Row], timers: int) -> list[str]:
    ceiling = rows[CEILING]
    lines = [
        f"| approach | timers/s ({timers:,} per drain) | us/timer | vs ceiling's us/commit | vs v2 | "
        "vs v2, per round | server CPU us/timer | vs ceiling | vs v2 | rows read/timer | quiet |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {CEILING} | {fmt(1e6 / ceiling.wall())} commits/s | {fmt(ceiling.wall())} | 1.00x | | | "
        f"{fmt(ceiling.cpu())} | 1.00x | | {fmt(ceiling.reads(), 1)} | {len(ceiling.quiet())}/{len(ceiling.samples)} |",
    ]
    v2 = rows["fire_timers_v2"]
    for name in ("fire_timers_v2", "fire_timers_v3"):
        row = rows[name]
        lines.append(
            f"| {name} | {fmt(1e6 / row.wall())} | {fmt(row.wall())} | {ratio(row.wall(), ceiling.wall())} | "
            f"{ratio(row.wall(), v2.wall()) if row is not v2 else ''} | "
            f"{f'{row.per_round(v2):.2f}x' if row is not v2 else ''} | {fmt(row.cpu())} | "
            f"{ratio(row.cpu(), ceiling.cpu())} | {ratio(row.cpu(), v2.cpu()) if row is not v2 else ''} | "
            f"{fmt(row.reads(), 1)} | {len(row.quiet())}/{len(row.samples)} |"
        )
    return lines


def stats_table(rows: dict[str, Row]) -> list[str]:
    ceiling, v2 = rows[CEILING], rows["fsm_stats_v2"]
    lines = [
        "| approach | us/call | vs ceiling | vs v2 | vs v2, per round | server CPU us/call | vs ceiling | vs v2 "
        "| rows read/call | quiet |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        versus = ratio(row.wall(), v2.wall()) if name == "fsm_stats_v3" else ""
        if name == "fsm_stats_v3":
            versus += f" | {row.per_round(v2):.2f}x"
        else:
            versus += " |"
        cpu_versus = ratio(row.cpu(), v2.cpu()) if name == "fsm_stats_v3" else ""
        lines.append(
            f"| {name} | {fmt(row.wall())} | {ratio(row.wall(), ceiling.wall())} | {versus} | {fmt(row.cpu())} | "
            f"{ratio(row.cpu(), ceiling.cpu())} | {cpu_versus} | {fmt(row.reads())} | "
            f"{len(row.quiet())}/{len(row.samples)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--rounds", type=int, default=9, help="rounds of parts 1 and 2")
    parser.add_argument("--count", type=int, default=500, help="calls per measurement (part 1, the ceilings)")
    parser.add_argument("--timer-instances", type=int, default=1000, help="instances armed with two timers each")
    parser.add_argument("--stats-instances", type=int, default=100_000)
    parser.add_argument("--queued", type=int, default=1000)
    parser.add_argument("--stats-calls", type=int, default=3, help="CALLs of fsm_stats_vN per measurement")
    parser.add_argument("--stats-rounds", type=int, default=21)
    parser.add_argument("--parts", default="send,timers,stats")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    dsn = database(args.dsn)
    settings = parse_dsn(dsn)
    raw = bt.raw_connect(settings, autocommit=True)
    started = time.perf_counter()
    out: dict[str, Any] = {}
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT VERSION(), @@log_bin, @@innodb_flush_log_at_trx_commit")
            version, log_bin, flush = cur.fetchone() or (None, None, None)
            cur.execute("CREATE TABLE r25_ceiling (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
        with Store(dsn, pool_size=1) as store:
            store.migrate()
            meter = Meter(raw, store, bt.server_pid(settings))
            meter.calibrate()
            header = (
                f"{version} (log_bin {log_bin}, innodb_flush_log_at_trx_commit {flush}); approaches interleaved "
                f"round by round; medians; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
            )
            print(header, flush=True)
            out["server"] = header
            if "send" in parts:
                rows = part_send(meter, args.rounds, args.count)
                out["send"] = {name: row.as_dict() for name, row in rows.items()}
                print(f"\n1. A transition with data ({args.rounds} rounds of {args.count} calls per approach)")
                print("\n".join(send_table(rows)))
            if "timers" in parts:
                rows, timers = part_timers(meter, args.rounds, args.count, args.timer_instances)
                out["timers"] = {name: row.as_dict() for name, row in rows.items()}
                print(
                    f"\n2. Timers drained ({args.rounds} rounds; CALL in batches of {BATCH}, "
                    f"{timers:,} timers per drain)"
                )
                print("\n".join(timers_table(rows, timers)))
            if "stats" in parts:
                rows = part_stats(
                    meter, args.stats_rounds, args.count, args.stats_calls, args.stats_instances, args.queued
                )
                out["stats"] = {name: row.as_dict() for name, row in rows.items()}
                print(
                    f"\n3. One CALL of fsm_stats_vN ({args.stats_instances:,} instances of which {args.queued:,} "
                    f"queued; {args.stats_rounds} rounds of {args.stats_calls} calls per approach)"
                )
                print("\n".join(stats_table(rows)))
        print(
            f"\nquiet: measurements during which no other connection sent a statement (the CPU column's median "
            f"is over those); {time.perf_counter() - started:.0f} s in all"
        )
    finally:
        with raw.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{settings.database}`")
        raw.close()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
