"""Upgrading instances to a new definition version (issue 35, revision 0021): instances per
second of Store.upgrade_instances, and what an upgrade running does to the latency of
concurrent Store.send calls, each beside the same run's references.

Runs in a fresh database ``pyfsm_bench_<random>`` (bench_transitions.migrated_database,
dropped at the end), one server, one driver (PyMySQL):

1. ``--instances`` (N) instances of a two-state type (a -go-> b -back-> a, version 1) are
   created with raw multi-row INSERTs into ``fsm_{type}`` (the triggers fill in the rest and
   write each creation's history row): timed and printed, not the result. Version 2 is
   defined (a final state ``z`` and a transition ``end`` from a and b added: no map needed)
   and the dry run is timed.
2. The INSERT+COMMIT ceiling (bench_transitions' ``measure("ceiling")``: one single-row INSERT
   + COMMIT per transaction, commits per second) with 1 client and with ``--senders``
   clients, and ``Store.send()`` with 1 client on the same type (its own instances, created
   at version 2), at the start and again at the end.
3. ``Store.upgrade_instances(type, batch=--batch)`` moves the N instances, timed from the
   call to its return. Once ``--send-start`` of them have moved (its progress callback),
   ``--senders`` processes (``Store.send``, a Store each, pool_size=1, go/back without pause,
   8 instances each of the N, spread over the id range) send for ``--rounds`` rounds of two
   ``--window``-second windows: one with the upgrade running, one with it paused between two
   batches (the progress callback sleeps: no CALL, no open transaction), in the order
   running/paused, paused/running, ... (ABBA, so that a drift of the machine's load falls
   on both alike). Each send is counted in the window it started in. The senders then stop
   and the upgrade goes on alone. Its instances per second: over the run without the
   pauses, in the batches beside the senders, and in those alone (the server's CPU per
   instance from /proc over the latter, where the server runs on this machine). A paused
   window still has the background work the upgrade left (purge, page flushing): it is no
   cleaner than a server after an upgrade.
4. Checks: every instance at version 2, one history row with source 'upgrade' per instance
   moved.
5. With ``--profile P`` (a server with performance_schema, MySQL's default): P instances of a
   second type of the same definitions are upgraded while another connection reads the
   upgrading connection's events_statements_history every few milliseconds; the statements
   it caught (inside the procedure and its triggers), grouped by text, give where an
   instance's time goes (a sample: each statement's mean time; nested ones count inside the
   statement that fired them).

The machine is shared and noisy: the ratios against the same run's ceiling and the
interleaved windows are what to read. Server-wide status counters (fsyncs, buffer pool
reads) include whatever else the server did meanwhile.

    .venv/bin/python bench/bench_upgrade.py --dsn mysql://root@127.0.0.1:3306/test   # N = 1,000,000
    .venv/bin/python bench/bench_upgrade.py --instances 20000 --window 5 --rounds 4   # a short run
"""

from __future__ import annotations

import argparse
import datetime
import functools
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt

from pyfsm import Machine, Store
from pyfsm.db import Settings
from pyfsm.versions import UpgradeReport

NAME = "bench_up"
EDGES = [("go", "a", "b"), ("back", "b", "a")]  # bench_transitions' NEXT
V1 = Machine(name=NAME, states=["a", "b"], start=["a"], transitions=EDGES)
V2 = Machine(
    name=NAME, states=["a", "b", "z"], start=["a"], final=["z"], transitions=[*EDGES, ("end", ["a", "b"], "z")]
)
KEYS_PER_SENDER = 8
STATUS = (
    "Handler_commit",
    "Innodb_data_fsyncs",
    "Innodb_os_log_fsyncs",
    "Innodb_buffer_pool_reads",
    "Innodb_buffer_pool_read_requests",
    "Innodb_rows_read",
)
MARKS = {
    "mariadb": ("<!-- bench-upgrade-mariadb:start -->", "<!-- bench-upgrade-mariadb:end -->"),
    "mysql": ("<!-- bench-upgrade-mysql:start -->", "<!-- bench-upgrade-mysql:end -->"),
}

# Store.send with 1 client on this type (bench_transitions' client: 8 instances of its own,
# created under the type's current version). Registered at import so that the spawned
# processes of bt.measure, which import this script again, find it.
bt.CLIENTS["Store.send, 1 client"] = functools.partial(bt.pyfsm_client, machine=NAME)


def key(n: int) -> str:
    return f"u-{n}"


def create(settings: Settings, count: int, rows: int) -> float:
    """``count`` instances by raw ``rows``-row INSERTs (the triggers do the rest); the seconds it took."""
    conn = bt.raw_connect(settings, autocommit=True)
    started = time.perf_counter()
    try:
        with conn.cursor() as cur:
            for first in range(0, count, rows):
                keys = [key(n) for n in range(first, min(count, first + rows))]
                cur.execute(f"INSERT INTO `fsm_{NAME}` (instance_key) VALUES " + ",".join(["(%s)"] * len(keys)), keys)
                if first and first % 100_000 < rows:
                    print(
                        f"  created {first + len(keys):,} of {count:,} ({time.perf_counter() - started:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        conn.close()
    return time.perf_counter() - started


def sender_keys(count: int, senders: int) -> list[list[str]]:
    """KEYS_PER_SENDER instances of the N per sender, spread evenly over the id range."""
    total = senders * KEYS_PER_SENDER
    spread = [key((2 * j + 1) * count // (2 * total)) for j in range(total)]
    return [spread[c::senders] for c in range(senders)]


def sender(dsn: str, keys: list[str], seconds: float, ready: Any, go: Any, stop: Any, out: Any) -> None:
    """One sending process: Store.send on its instances without pause, from ``go`` for
    ``seconds`` or until ``stop`` (``ready`` released once warmed up); each send's start
    (time.monotonic, the same clock in every process) and latency. Errors are counted, not
    retried."""
    try:
        with Store(dsn, pool_size=1) as store:
            states = {k: store.get(NAME, k).state for k in keys}

            def step(i: int) -> None:
                k = keys[i % len(keys)]
                try:
                    states[k] = store.send(NAME, k, bt.NEXT[states[k]][0]).to_state
                except BaseException:
                    states[k] = store.get(NAME, k).state
                    raise

            bt.timed_loop(step, bt.WARMUP_SECONDS, Counter(), [])
            ready.release()
            go.wait()
            errors: list[tuple[float, str]] = []
            sends: list[tuple[float, float]] = []
            start = time.monotonic()
            i = 0
            while not stop.is_set() and time.monotonic() < start + seconds:
                at, t = time.monotonic(), time.perf_counter()
                try:
                    step(i)
                except Exception as exc:
                    errors.append((at, f"{type(exc).__name__}: {str(exc)[:100]}"))
                sends.append((at, (time.perf_counter() - t) * 1000))
                i += 1
            out.put({"sends": sends, "errors": errors})
    except BaseException:
        go.abort()
        out.put(traceback.format_exc())


class Senders:
    """``len(keys)`` sending processes, warmed up and waiting at a barrier; ``start()`` lets
    them go (they run ``seconds`` or until ``stop()``), ``results()`` collects them."""

    def __init__(self, settings: Settings, keys: list[list[str]], seconds: float) -> None:
        ctx = mp.get_context("spawn")
        self.go, self.stop_event, self.out = ctx.Barrier(len(keys) + 1, timeout=3600), ctx.Event(), ctx.Queue()
        self.ready = ctx.Semaphore(0)
        self.procs = [
            ctx.Process(
                target=sender, args=(settings.dsn(), k, seconds, self.ready, self.go, self.stop_event, self.out)
            )
            for k in keys
        ]
        for p in self.procs:
            p.start()

    def wait_ready(self, timeout: float = 120) -> None:
        """Until every sender is warmed up (or one failed: start() then says so)."""
        deadline = time.monotonic() + timeout
        for _ in self.procs:
            while not self.ready.acquire(timeout=1):
                if time.monotonic() > deadline or not all(q.is_alive() for q in self.procs) or self.go.broken:
                    return

    def start(self) -> None:
        try:
            self.go.wait()
        except threading.BrokenBarrierError:
            pass  # a sender failed: its report says why

    def stop(self) -> None:
        self.stop_event.set()

    def results(self, timeout: float) -> list[dict[str, Any]]:
        try:
            parts = [self.out.get(timeout=timeout) for _ in self.procs]
        finally:
            self.stop_event.set()
            for p in self.procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.terminate()
        failed = [p for p in parts if isinstance(p, str)]
        if failed:
            raise RuntimeError("a sender failed:\n" + "\n".join(failed))
        return parts


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else float("nan")


def status(settings: Settings) -> dict[str, int]:
    """Server-wide status counters of STATUS (those this server has)."""
    conn = bt.raw_connect(settings, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (" + ",".join(["%s"] * len(STATUS)) + ")", STATUS)
            return {str(name): int(value) for name, value in cur.fetchall()}
    finally:
        conn.close()


def references(settings: Settings, pid: int | None, senders: int, seconds: float) -> dict[str, bt.Result]:
    out = {}
    for approach, clients in dict.fromkeys([("ceiling", 1), ("ceiling", senders), ("Store.send, 1 client", 1)]):
        print(f"measuring {approach}, {clients} client(s)...", file=sys.stderr, flush=True)
        res = out[f"{approach}/{clients}"] = bt.measure(approach, clients, settings, seconds, pid)
        print(f"  {res.rate:,.0f}/s, p50 {res.pct(50):.2f} ms", file=sys.stderr, flush=True)
    return out


def upgrade(settings: Settings, pid: int | None, args: argparse.Namespace, keys: list[list[str]]) -> dict[str, Any]:
    """The upgrade, with the senders' interleaved windows once ``--send-start`` of the N have moved."""
    schedule = [
        kind for n in range(args.rounds) for kind in (("running", "paused") if n % 2 == 0 else ("paused", "running"))
    ]
    senders = Senders(settings, keys, len(schedule) * args.window + 600)
    threshold = args.send_start * args.instances
    samples: list[tuple[float, int, float | None]] = []  # (monotonic time, moved so far, server CPU s)
    windows: list[tuple[str, float, float, int]] = []  # (kind, start, end, instances moved in it)
    state: dict[str, Any] = {"next": None}  # the next window: (index, kind, start, planned end, moved at its start)

    def sample(moved: int) -> None:
        samples.append((time.monotonic(), moved, bt.server_cpu_seconds(pid)))

    def pace(moved: int) -> None:
        """Between two batches: close the window whose time is up, and sleep through paused ones."""
        while state["next"] is not None:
            index, kind, start, until, moved_then = state["next"]
            now = time.monotonic()
            if kind == "paused":
                time.sleep(max(0.0, until - now))
                now = time.monotonic()
            elif now < until:
                return  # running: go on with the next batch
            windows.append((kind, start, now, moved - moved_then))
            if index + 1 < len(schedule):
                state["next"] = (index + 1, schedule[index + 1], now, now + args.window, moved)
            else:
                state["next"] = None
                senders.stop()
                sample(moved)
                state["end_sample"] = len(samples) - 1
                print(f"  senders stopped after {moved:,} moved", file=sys.stderr, flush=True)

    def progress(report: UpgradeReport) -> None:
        sample(report.moved)
        if "start_sample" not in state and report.moved >= threshold:
            state["start_sample"] = len(samples) - 1
            senders.start()  # they wait at the barrier, warmed up: at once
            now = time.monotonic()
            state["next"] = (0, schedule[0], now, now + args.window, report.moved)
            print(f"  senders started after {report.moved:,} moved", file=sys.stderr, flush=True)
        elif report.batches % 200 == 0:
            print(
                f"  moved {report.moved:,} of {args.instances:,} ({samples[-1][0] - samples[0][0]:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        pace(report.moved)

    senders.wait_ready()  # spawned and warmed up before the upgrade starts
    before = status(settings)
    with Store(settings.dsn(), pool_size=1) as store:
        sample(0)
        if threshold <= 0:
            progress(UpgradeReport(NAME, 0, False))
        started = time.perf_counter()
        result = store.upgrade_instances(NAME, batch=args.batch, progress=progress)
        elapsed = time.perf_counter() - started
    if state["next"] is not None:  # the upgrade ended first: close the window it was in
        _index, kind, start, _until, moved_then = state["next"]
        windows.append((kind, start, time.monotonic(), result.moved - moved_then))
        sample(result.moved)
        state["end_sample"] = len(samples) - 1
    senders.stop()
    after = status(settings)
    if "start_sample" not in state:  # it ended before the threshold: the senders never ran
        senders.start()
    parts = senders.results(600)
    paused = sum(end - start for kind, start, end, _ in windows if kind == "paused")
    print(
        f"  moved {result.moved:,} in {elapsed:.1f} s ({paused:.1f} s of it paused; "
        f"{result.moved / (elapsed - paused):,.0f}/s)",
        file=sys.stderr,
        flush=True,
    )
    return {
        "report": result,
        "seconds": elapsed,
        "paused": paused,
        "samples": samples,
        "windows": windows,
        "start_sample": state.get("start_sample"),
        "end_sample": state.get("end_sample"),
        "sends": sorted(x for part in parts for x in part["sends"]),
        "errors": sorted(x for part in parts for x in part["errors"]),
        "status": {k: after[k] - before[k] for k in after if k in before},
    }


def windows_of(part: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The sends per kind of window (each counted in the window it started in), and the
    instances the upgrade moved in the running windows."""
    out: dict[str, dict[str, Any]] = {}
    for kind, start, end, moved in part["windows"]:
        lat = [ms for at, ms in part["sends"] if start <= at < end]
        errs = [e for at, e in part["errors"] if start <= at < end]
        w = out.setdefault(
            kind, {"windows": 0, "seconds": 0.0, "latencies": [], "errors": Counter(), "moved": 0, "p50s": []}
        )
        w["windows"] += 1
        w["seconds"] += end - start
        w["latencies"] += lat
        w["errors"].update(errs)
        w["moved"] += moved
        w["p50s"].append(pct(lat, 50))
    return out


def alone(part: dict[str, Any]) -> dict[str, Any]:
    """The upgrade's batches without the senders: before their first window and after their last."""
    samples, first, last = part["samples"], part["start_sample"], part["end_sample"]
    spans = (
        [(samples[0], samples[-1])] if first is None else [(samples[0], samples[first]), (samples[last], samples[-1])]
    )
    moved = sum(b[1] - a[1] for a, b in spans)
    secs = sum(b[0] - a[0] for a, b in spans)
    cpu = [b[2] - a[2] for a, b in spans if a[2] is not None and b[2] is not None]
    return {
        "moved": moved,
        "seconds": secs,
        "cpu_us": sum(cpu) * 1e6 / moved if len(cpu) == len(spans) and moved else None,
    }


def profile(settings: Settings, count: int, rows: int) -> dict[str, Any] | None:
    """Where an upgraded instance's time goes: statement events of the upgrading connection
    sampled from performance_schema.events_statements_history (its last 10 per thread), on a
    type of its own. None where the server has no performance_schema."""
    name = f"{NAME}_prof"
    conn = bt.raw_connect(settings, autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT @@performance_schema")
    if not int(cur.fetchone()[0]):
        conn.close()
        return None
    with Store(settings.dsn(), pool_size=1) as store:
        store.define(Machine(name=name, states=V1.states, start=V1.start, transitions=V1.transitions))
        with conn.cursor() as c:
            for first in range(0, count, rows):
                keys = [key(n) for n in range(first, min(count, first + rows))]
                c.execute(f"INSERT INTO `fsm_{name}` (instance_key) VALUES " + ",".join(["(%s)"] * len(keys)), keys)
        store.define(Machine(name=name, states=V2.states, start=V2.start, final=V2.final, transitions=V2.transitions))
        with store.gateway.primary.connection() as pooled, pooled.cursor() as c:
            c.execute("SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()")
            thread = c.fetchone()[0]
        seen: dict[int, tuple[str, int]] = {}
        done = threading.Event()

        def events() -> list[tuple[int, str, int]]:
            cur.execute(
                "SELECT EVENT_ID, SQL_TEXT, TIMER_WAIT FROM performance_schema.events_statements_history "
                "WHERE THREAD_ID = %s AND END_EVENT_ID IS NOT NULL",
                (thread,),
            )
            return [(int(e), " ".join(str(t).split()), int(w or 0)) for e, t, w in cur.fetchall()]

        earlier = {e for e, _t, _w in events()}  # the define's statements, before the upgrade

        def sample() -> None:
            while not done.is_set():
                for event, text, wait in events():
                    if event not in earlier:
                        seen[event] = (text, wait)
                time.sleep(0.003)

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.perf_counter()
        try:
            moved = store.upgrade_instances(name).moved
        finally:
            elapsed = time.perf_counter() - started
            done.set()
            sampler.join()
    conn.close()
    groups: dict[str, list[int]] = {}
    for text, wait in seen.values():
        if not text.startswith("CALL `fsm_"):  # the batches themselves
            groups.setdefault(text, []).append(wait)
    return {
        "instances": moved,
        "seconds": elapsed,
        "sampled": len(seen),
        "statements": sorted(((t, len(w), statistics.fmean(w) / 1e6) for t, w in groups.items()), key=lambda g: -g[2]),
    }


def check(settings: Settings) -> dict[str, Any]:
    conn = bt.raw_connect(settings, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT definition_version, COUNT(*) FROM `fsm_{NAME}` GROUP BY definition_version")
            versions = {int(v): int(n) for v, n in cur.fetchall()}
            cur.execute(
                f"SELECT COUNT(*), COUNT(DISTINCT instance_id) FROM `fsm_{NAME}_transitions` WHERE source = 'upgrade'"
            )
            rows, distinct = map(int, cur.fetchone())
    finally:
        conn.close()
    return {"versions": versions, "upgrade_rows": rows, "upgrade_instances": distinct}


def ms(x: float) -> str:
    return f"{x:.2f}"


def report(r: dict[str, Any], args: argparse.Namespace) -> str:
    k = args.senders
    start, end = r["refs_start"], r["refs_end"]

    def both(name: str, attr: str = "rate") -> tuple[float, float, float]:
        """(start, end, mean) of a reference's rate or server CPU per operation."""
        a, b = getattr(start[name], attr), getattr(end[name], attr)
        a, b = (a() if callable(a) else a), (b() if callable(b) else b)
        return a, b, (a + b) / 2 if a is not None and b is not None else (a if b is None else b)

    c1, ck, s1 = both("ceiling/1"), both(f"ceiling/{k}"), both("Store.send, 1 client/1")
    up, rep = r["upgrade"], r["upgrade"]["report"]
    win, lone = windows_of(up), alone(up)
    running, paused = win.get("running"), win.get("paused")
    rate = rep.moved / (up["seconds"] - up["paused"])
    beside = (
        f"{running['moved'] / running['seconds']:,.0f} ({running['moved']:,} in {running['seconds']:.1f} s)"
        if running and running["seconds"] > 0
        else "n/a"
    )
    lone_text = (
        f"{lone['moved'] / lone['seconds']:,.0f} ({lone['moved']:,} in {lone['seconds']:.1f} s)"
        if lone["seconds"] > 0
        else "n/a"
    )
    lines = [
        f"{args.instances:,} instances created by raw {args.insert_rows:,}-row INSERTs in {r['create_s']:.1f} s "
        f"({args.instances / r['create_s']:,.0f} instances/s, with their creation history; not the result); version "
        f"2 defined in {r['define_s']:.2f} s; the dry run read them in {r['dry_s']:.2f} s. One "
        f"Store.upgrade_instances call, batch {args.batch}, moved them in {up['seconds']:,.1f} s, of which "
        f"{up['paused']:.1f} s paused for the senders' paused windows (not counted below):",
        "",
        "| instances | upgrade s (without pauses) | instances/s | ceiling commits/s, 1 client (start / end; mean) "
        "| upgrade vs ceiling | instances/s alone | instances/s beside the senders | batches "
        "| moved / waiting / unmapped |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---|",
        f"| {rep.moved:,} | {up['seconds'] - up['paused']:,.1f} | {rate:,.0f} | {c1[0]:,.0f} / {c1[1]:,.0f}; "
        f"{c1[2]:,.0f} | {rate / c1[2]:.2f}x | {lone_text} | {beside} | {rep.batches:,} | "
        f"{rep.moved:,} / {rep.waiting:,} / {rep.unmapped:,} |",
        "",
        "Per operation, one client (wall time and the server's CPU time from /proc, which counts everything the "
        "server did meanwhile; ceiling and Store.send: mean of start and end; the upgrade: its batches alone):",
        "",
        "| operation | per second | wall us each | vs ceiling | server CPU us each | CPU vs ceiling |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    cpu_c1 = both("ceiling/1", "cpu_us")[2]
    lone_rate = lone["moved"] / lone["seconds"] if lone["seconds"] > 0 else rate
    for name, per_s, cpu in (
        ("INSERT + COMMIT (ceiling)", c1[2], cpu_c1),
        ("Store.send transition", s1[2], both("Store.send, 1 client/1", "cpu_us")[2]),
        ("upgrade, per instance moved", lone_rate, lone["cpu_us"]),
    ):
        cpu_text = "n/a" if cpu is None else f"{cpu:,.0f}"
        cpu_ratio = f"{cpu / cpu_c1:.2f}x" if cpu is not None and cpu_c1 else "n/a"
        lines.append(
            f"| {name} | {per_s:,.0f} | {1e6 / per_s:,.0f} | {c1[2] / per_s:.2f}x | {cpu_text} | {cpu_ratio} |"
        )
    if up["status"] and rep.moved:
        lines += [
            "",
            "Server-wide status counters over the upgrade, per instance moved (they include the senders' "
            "windows and anything else the server did): "
            + ", ".join(f"{name} {n / rep.moved:,.2f}" for name, n in up["status"].items())
            + ".",
        ]
    lines += [
        "",
        f"Store.send latency, {k} sender processes (a Store each, {KEYS_PER_SENDER} instances each of the N, go/back "
        f"without pause), {args.rounds} rounds of a {args.window:g} s window with the upgrade running and one with "
        f"it paused between batches (ABBA order), from {args.send_start:.0%} of the N moved; the ceiling with {k} "
        f"clients {ck[0]:,.0f} / {ck[1]:,.0f} commits/s (start / end; mean {ck[2]:,.0f}):",
        "",
        "| send load | windows | seconds | sends | sends/s | vs ceiling, same clients | p50 ms | p99 ms | max ms "
        "| p50 per window, ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, w in (("upgrade running", running), ("upgrade paused", paused)):
        if not w:
            lines.append(f"| {name} | 0 | | | | | | | | | |")
            continue
        lat, errors = w["latencies"], sum(w["errors"].values())
        detail = "" if not errors else " " + str(dict(w["errors"]))
        per_s = len(lat) / w["seconds"] if w["seconds"] else float("nan")
        lines.append(
            f"| {name} | {w['windows']} | {w['seconds']:.1f} | {len(lat):,} | {per_s:,.0f} | "
            f"{per_s / ck[2]:.0%} | {pct(lat, 50):.2f} | {pct(lat, 99):.2f} | {max(lat, default=0):.1f} | "
            f"{' / '.join(f'{x:.2f}' for x in w['p50s'])} | {errors}{detail} |"
        )
    if running and paused and running["latencies"] and paused["latencies"]:
        ra, pa = running["latencies"], paused["latencies"]
        ratio = len(ra) / running["seconds"] / (len(pa) / paused["seconds"])
        lines.append(
            f"| **running / paused** | | | | **{ratio:.2f}x** | | **{pct(ra, 50) / pct(pa, 50):.2f}x** | "
            f"**{pct(ra, 99) / pct(pa, 99):.2f}x** | | | |"
        )
    prof = r.get("profile")
    if prof:
        per = prof["seconds"] / prof["instances"] * 1e6
        lines += [
            "",
            f"Where an instance's time goes (--profile: {prof['instances']:,} instances of a second type "
            f"upgraded in {prof['seconds']:.1f} s, {per:,.0f} us each; {prof['sampled']:,} statement events "
            "sampled from performance_schema.events_statements_history; the statements inside the batches "
            "with a mean of 50 us or more that are run for each instance (caught in at least 0.1% of the "
            "samples: a batch's own statements, such as its result, once per batch, are caught in about "
            "0.01%), a trigger's statements inside the UPDATE that fired them):",
            "",
            "| statement (inside fsm_{type}_upgrade_v1 and its triggers) | sampled | mean us | of an instance's time |",
            "|---|---:|---:|---:|",
        ]
        for text, n, mean_us in prof["statements"]:
            if mean_us >= 50 and n >= prof["sampled"] / 1000:
                lines.append(
                    f"| `{text[:90]}{'...' if len(text) > 90 else ''}` | {n:,} | {mean_us:,.0f} | {mean_us / per:.0%} |"
                )
    elif args.profile:
        lines += ["", "--profile: this server has no performance_schema (MariaDB's default): not profiled."]
    chk = r["check"]
    lines += [
        "",
        f"Checks: instances per definition version after the upgrade {chk['versions']} (the N, and the "
        "1-client Store.send's own instances, created at version 2); history rows with source 'upgrade': "
        f"{chk['upgrade_rows']:,} ({chk['upgrade_instances']:,} instances); moved {rep.moved:,} of the "
        f"{args.instances:,} version-1 instances.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument("--instances", type=int, default=1_000_000, help="instances to upgrade (N)")
    parser.add_argument("--senders", type=int, default=2, help="sending processes (part b)")
    parser.add_argument("--window", type=float, default=15.0, help="seconds per send window")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of a running and a paused window")
    parser.add_argument(
        "--send-start", type=float, default=0.1, help="the senders' windows start once this share of the N has moved"
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each ceiling / Store.send measurement")
    parser.add_argument("--batch", type=int, default=500, help="Store.upgrade_instances' batch")
    parser.add_argument("--insert-rows", type=int, default=2000, help="rows per INSERT when creating the N")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="P",
        help="also sample where an instance's time goes, upgrading P instances of a second type "
        "(needs performance_schema: MySQL)",
    )
    parser.add_argument("--write", type=Path, help="update this server's block of this file (e.g. BENCHMARKS.md)")
    args = parser.parse_args(argv)
    began, load_start = time.perf_counter(), " ".join(f"{x:.2f}" for x in os.getloadavg())
    keys = sender_keys(args.instances, args.senders)
    r: dict[str, Any] = {}
    with bt.migrated_database(args.dsn) as (settings, server):
        conn = bt.raw_connect(settings, autocommit=True)
        with conn.cursor() as cur:
            cur.execute("SELECT @@log_bin, @@sync_binlog, @@innodb_buffer_pool_size")
            server["log_bin"], server["sync_binlog"], pool = map(str, cur.fetchone())
            server["pool_mib"] = str(int(pool) // 2**20)
        conn.close()
        pid = bt.server_pid(settings)
        with Store(settings.dsn(), pool_size=1) as store:
            store.define(V1)
        print(f"creating {args.instances:,} instances...", file=sys.stderr, flush=True)
        r["create_s"] = create(settings, args.instances, args.insert_rows)
        print(f"  {r['create_s']:.1f} s", file=sys.stderr, flush=True)
        with Store(settings.dsn(), pool_size=1) as store:
            t = time.perf_counter()
            store.define(V2)
            r["define_s"] = time.perf_counter() - t
            t = time.perf_counter()
            plan = store.upgrade_instances(NAME, dry_run=True)
            r["dry_s"] = time.perf_counter() - t
            assert plan.moved == args.instances, plan
        # after version 2: the 1-client Store.send's own instances are created at version 2 (not moved)
        r["refs_start"] = references(settings, pid, args.senders, args.seconds)
        print("upgrading...", file=sys.stderr, flush=True)
        r["upgrade"] = upgrade(settings, pid, args, keys)
        r["refs_end"] = references(settings, pid, args.senders, args.seconds)
        r["check"] = check(settings)
        if args.profile:
            print(f"profiling an upgrade of {args.profile:,} instances...", file=sys.stderr, flush=True)
            r["profile"] = profile(settings, args.profile, args.insert_rows)
    load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    header = (
        f"Run {datetime.date.today().isoformat()}: {os.cpu_count()} CPUs (load average {load_start} at the "
        f"start, {load_end} at the end), server {server['version']}, innodb_flush_log_at_trx_commit="
        f"{server['flush']}, log_bin={server['log_bin']}, sync_binlog={server['sync_binlog']}, buffer pool "
        f"{server['pool_mib']} MiB; {time.perf_counter() - began:.0f} s in all."
    )
    text = header + "\n\n" + report(r, args)
    print(text)
    if args.write:
        bt.write_results(args.write, text, MARKS["mariadb" if "mariadb" in server["version"].lower() else "mysql"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
