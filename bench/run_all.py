"""Every benchmark of the project in one run, and one table of their headline numbers beside the ceiling.

The INSERT+COMMIT ceiling (bench_transitions.measure("ceiling", ...), the same function every
script uses) is measured here with 1, 2, 4 and 8 client processes once at the start and once
at the end of the run; each headline number is set against the mean of the two at its own
concurrency (throughput) or against the 1-client ceiling's p50 (latency). Then each script
runs as a subprocess with ``--json`` (and ``--write`` for its own section, as before), in this
order: bench_transitions, bench_counters, bench_locks, bench_engine, bench_relay,
bench_reporting (``--reuse-if-present``: the 1M/10M data set is loaded the first time, about
3 minutes, and kept in ``pyfsm_bench_reporting``). The scripts' tables go to log files; their
progress goes to stderr. At the end: one table, printed and (``--write``) put at the top of
BENCHMARKS.md between the ``bench-all`` marks.

    .venv/bin/python bench/run_all.py --write BENCHMARKS.md    # make bench; about 15 minutes
    .venv/bin/python bench/run_all.py --quick                  # about 4 minutes, writes nothing

``--quick`` makes every measurement short and runs the reporting benchmark on a small data
set of its own (20,000 instances, ``pyfsm_bench_reporting_quick``); its numbers are not
comparable with a full run, so it never writes BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transitions as bt

from pyfsm.db import parse_dsn

HERE = Path(__file__).resolve().parent
MARK = ("<!-- bench-all:start -->", "<!-- bench-all:end -->")
SECTION = "## All benchmarks in one run"
CONCURRENCY = (1, 2, 4, 8)
REPORTING_MS = 10.0  # "answers in milliseconds": p50 under this, every table access by index

#: script -> (arguments of a full run, of a quick run); ``--write`` is added for a full run that writes
SCRIPTS: dict[str, tuple[list[str], list[str]]] = {
    "bench_transitions": ([], ["--seconds", "1.5"]),
    "bench_counters": ([], ["--rounds", "1", "--seconds", "1.5"]),
    "bench_locks": ([], ["--seconds", "1", "--count", "100"]),
    "bench_engine": ([], ["--seconds", "1", "--instances", "150"]),
    "bench_relay": ([], ["--events", "10000", "--seconds", "3"]),
    "bench_reporting": (
        ["--reuse-if-present"],
        [
            "--reuse-if-present",
            "--database",
            "pyfsm_bench_reporting_quick",
            "--instances",
            "20000",
            "--history-per-instance",
            "5",
            "--reps",
            "20",
            "--ceiling-seconds",
            "1",
        ],
    ),
}
WRITES = {"bench_transitions", "bench_counters", "bench_locks", "bench_engine", "bench_reporting"}  # have --write


@dataclass
class Row:
    bench: str
    what: str
    value: float | None
    unit: str
    ceiling: float | None = None  # the same unit as value
    ceiling_label: str = ""
    target: str = ""
    met: bool | None = None
    note: str = ""

    def ratio(self) -> str:
        if self.value is None or not self.ceiling:
            return ""
        r = self.value / self.ceiling
        return f"{r:.0%}" if self.unit.endswith("/s") else f"{r:.1f}x"


@dataclass
class Ceilings:
    """The ceiling per client count, measured at the start and at the end."""

    start: dict[int, bt.Result] = field(default_factory=dict)
    end: dict[int, bt.Result] = field(default_factory=dict)

    def rate(self, clients: int) -> float:
        return statistics.mean(r[clients].rate for r in (self.start, self.end) if clients in r)

    def p50(self) -> float:
        return statistics.mean(r[1].pct(50) for r in (self.start, self.end) if 1 in r)


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit in ("ms", "round trips", "x"):
        return f"{value:.2f}"
    if unit in ("%", "queries", "claims"):
        return f"{value:.0f}"
    return f"{value:,.0f}"


def verdict(row: Row) -> str:
    if not row.target:
        return ""
    return "MET" if row.met else "MISSED" if row.met is not None else "NOT MEASURED"


# -- the rows of each benchmark --------------------------------------------------------------


def rows_transitions(d: dict[str, Any], c: Ceilings) -> list[Row]:
    by = {(r["approach"], r["clients"]): r for r in d["results"]}
    out = []
    p1, p8, h8, b8 = (by.get(k) for k in (("pyfsm", 1), ("pyfsm", 8), ("hand-written", 8), ("bare CALL", 8)))
    if p1:  # issue 15's targets, against the bare CALL's floor
        out.append(Row("transitions", "pyfsm Store.send(), 1 client", p1["rate"], "tx/s", c.rate(1), "1 client"))
        out.append(
            Row(
                "transitions",
                "pyfsm Store.send(), 1 client, p50 latency",
                p1["p50_ms"],
                "ms",
                c.p50(),
                "p50, 1 client",
                "<= 1.5x the ceiling's p50",
                p1["p50_ms"] <= 1.5 * c.p50(),
            )
        )
        out.append(
            Row(
                "transitions",
                "round trips per transition (measured)",
                p1["round_trips"],
                "round trips",
                target="1 (one CALL)",
                met=p1["round_trips"] < 1.05,
            )
        )
    if p8:
        out.append(Row("transitions", "pyfsm Store.send(), 8 clients", p8["rate"], "tx/s", c.rate(8), "8 clients"))
    if p8 and b8:
        out.append(
            Row(
                "transitions",
                "pyfsm / bare CALL tx/s, 8 clients",
                p8["rate"] / b8["rate"],
                "x",
                target=">= 0.75x",
                met=p8["rate"] >= 0.75 * b8["rate"],
            )
        )
        cpu_p, cpu_b = p8.get("server_cpu_us"), b8.get("server_cpu_us")
        out.append(
            Row(
                "transitions",
                "server CPU per transition, Store.send / bare CALL, 8 clients",
                cpu_p / cpu_b if cpu_p and cpu_b else None,
                "x",
                target="<= 1.3x",
                met=cpu_p <= 1.3 * cpu_b if cpu_p and cpu_b else None,
                note=f"{cpu_p:,.0f} vs {cpu_b:,.0f} us" if cpu_p and cpu_b else "server not on this machine",
            )
        )
    if h8:
        out.append(
            Row(
                "transitions",
                "hand-written 6-statement transition, 8 clients",
                h8["rate"],
                "tx/s",
                c.rate(8),
                "8 clients",
            )
        )
    for clients in (1, 8):  # the floor: the bare statements in one CALL, nothing around them
        bare = by.get(("bare CALL", clients))
        if bare:
            out.append(
                Row(
                    "transitions",
                    f"bare CALL (no trigger, checks or counters), {clients} client(s)",
                    bare["rate"],
                    "tx/s",
                    c.rate(clients),
                    f"{clients} client(s)",
                    note=f"p50 {bare['p50_ms']:.2f} ms",
                )
            )
    for clients in (1, 8):  # the procedure Store.send() called before revision 0006, same trigger
        v1 = by.get(("pyfsm, send_v1", clients))
        if v1:
            out.append(
                Row(
                    "transitions",
                    f"pyfsm through send_v1 (before 0006), {clients} client(s)",
                    v1["rate"],
                    "tx/s",
                    c.rate(clients),
                    f"{clients} client(s)",
                    note=f"p50 {v1['p50_ms']:.2f} ms",
                )
            )
    # Store.send() on a type with an older revision's triggers, to show what a later one changed
    for approach, label in (
        ("pyfsm, 0009 triggers", "the 0009 triggers (before 0010)"),
        ("pyfsm, 0016 history triggers", "the 0016 history triggers (before 0017)"),
    ):
        for clients in (1, 8):
            old = by.get((approach, clients))
            if old:
                out.append(
                    Row(
                        "transitions",
                        f"pyfsm with {label}, {clients} client(s)",
                        old["rate"],
                        "tx/s",
                        c.rate(clients),
                        f"{clients} client(s)",
                        note=f"p50 {old['p50_ms']:.2f} ms",
                    )
                )
    return out


def rows_counters(d: dict[str, Any], c: Ceilings) -> list[Row]:
    k, med = int(d["clients"]), d["median_rate"]
    v3, v2 = med["current (counters)"], med["v2 (no counters)"]
    return [
        Row(
            "counters",
            f"current triggers (state counters), send_v1, {k} clients, median of {d['rounds']}",
            v3,
            "tx/s",
            c.rate(k),
            f"{k} clients",
        ),
        Row(
            "counters",
            f"v2 triggers (no counters), send_v1, {k} clients, median of {d['rounds']}",
            v2,
            "tx/s",
            c.rate(k),
            f"{k} clients",
        ),
        Row(
            "counters",
            "what the counters cost (current vs v2 tx/s)",
            100 * (1 - v3 / v2),
            "%",
            note="noisy: compare the rounds in its section",
        ),
    ]


def rows_locks(d: dict[str, Any], c: Ceilings) -> list[Row]:
    out = [
        Row(
            "locks",
            f"acquire + release, lock mode {mode}, 1 client",
            1e6 / m["us"],
            "pairs/s",
            c.rate(1),
            "1 client",
            note=f"{m['trips']:.2f} round trips",
        )
        for mode, m in d["modes"].items()
        if mode in ("none", "global", "both")
    ]
    out.append(
        Row(
            "locks",
            "lock + transition + release, 8 processes on 4 lookup keys",
            d["contended"]["rate"],
            "cycles/s",
            c.rate(8),
            "8 clients",
            note=f"{int(d['contended']['refused']):,} refused",
        )
    )
    return out


def rows_engine(d: dict[str, Any], c: Ceilings) -> list[Row]:
    step = d["step"]
    out = [
        Row(
            "engine",
            "engine step in the caller (20-step process), 1 client",
            1e6 / step["us"],
            "steps/s",
            c.rate(1),
            "1 client",
        ),
        Row(
            "engine",
            "round trips per step (save_after_step on)",
            step["trips"],
            "round trips",
            target="<= 3",
            met=step["trips"] <= 3,
        ),
    ]
    # "4x10": 4 workers, batch 10
    workers = {tuple(int(n) for n in key.split("x")): w for key, w in d["workers"].items()}
    for (k, batch), w in sorted(workers.items()):
        # the target is the default Worker's (batch 10); batch 1 is there for comparison
        target, met = (">= 30% of the ceiling", w["rate"] >= 0.30 * c.rate(k)) if k == 4 and batch > 1 else ("", None)
        how = "one run at a time" if batch == 1 else f"batch {batch}, side by side"
        out.append(
            Row(
                "engine",
                f"{k} worker process(es), {d['worker_steps']}-step process, {how}",
                w["rate"],
                "steps/s",
                c.rate(k),
                f"{k} client(s)",
                target,
                met,
            )
        )
    empty = sum(int(w["empty_with_work"]) for w in workers.values())
    out.append(
        Row("engine", "claims that came back empty while due work existed", empty, "claims", target="0", met=empty == 0)
    )
    return out


def rows_relay(d: dict[str, Any], c: Ceilings) -> list[Row]:
    return [
        Row(
            "relay",
            f"backlog of {d['events']:,} events relayed",
            d["drain_rate"],
            "events/s",
            c.rate(1),
            "1 client",
            ">= 10,000 events/s",
            d["drain_rate"] >= 10_000,
        ),
        Row(
            "relay",
            f"commit to broker acknowledgement at {d['rate']}/s, p50",
            d["ack_p50_ms"],
            "ms",
            c.p50(),
            "p50, 1 client",
        ),
        Row(
            "relay",
            f"commit to broker acknowledgement at {d['rate']}/s, p99",
            d["ack_p99_ms"],
            "ms",
            c.p50(),
            "p50, 1 client",
            "< 100 ms",
            d["ack_p99_ms"] < 100,
        ),
        Row("relay", f"commit to consumer at {d['rate']}/s, p99", d["consumer_p99_ms"], "ms", c.p50(), "p50, 1 client"),
    ]


REPORTING_HEADLINES: tuple[tuple[str, str, bool], ...] = (  # (label starts with, row name, has the target)
    ("in-state first page: fsm_v_order (biggest", "first page of the biggest state, fsm_v_order", True),
    ("in-state first page: CALL fsm_order_in_state_v1 (biggest", "first page of the biggest state, CALL", True),
    ("history: fsm_v_order_transitions", "one instance's history, fsm_v_order_transitions", True),
    ("history: CALL fsm_order_history_v1", "one instance's history, CALL", True),
    ("counts: CALL fsm_counts_v2", "counts per state, CALL fsm_counts_v2", True),
    ("counts, for comparison", "counts per state by GROUP BY (what the counters replace)", False),
    ("one instance: fsm_v_order", "one instance, fsm_v_order", True),
    (
        "in-state first page: fsm_v_instances WHERE machine AND current_state (biggest",
        "first page of the biggest state, cross-type fsm_v_instances",
        False,
    ),
)


def rows_reporting(d: dict[str, Any], c: Ceilings) -> list[Row]:
    size = f"{d['instances']:,}/{d['history_rows']:,}"
    out = []
    for prefix, name, targeted in REPORTING_HEADLINES:
        q = next((q for q in d["queries"] if q["label"].startswith(prefix)), None)
        if q is None:
            continue
        target, met = (
            (f"index only, p50 < {REPORTING_MS:g} ms", not q["flagged"] and q["p50_ms"] < REPORTING_MS)
            if targeted
            else ("", None)
        )
        out.append(
            Row(
                "reporting",
                f"{name} ({size})",
                q["p50_ms"],
                "ms",
                c.p50(),
                "p50, 1 client",
                target,
                met,
                note=f"{q['rows_read']:,.0f} rows read",
            )
        )
    flagged = [q["label"] for q in d["queries"] if q["flagged"] and not q["by_design"]]
    out.append(
        Row(
            "reporting",
            "queries flagged (scan or many rows read), not by design",
            len(flagged),
            "queries",
            note="; ".join(flagged),
        )
    )
    return out


ROWS: dict[str, Callable[[dict[str, Any], Ceilings], list[Row]]] = {
    "bench_transitions": rows_transitions,
    "bench_counters": rows_counters,
    "bench_locks": rows_locks,
    "bench_engine": rows_engine,
    "bench_relay": rows_relay,
    "bench_reporting": rows_reporting,
}


# -- running --------------------------------------------------------------------------------------


def measure_ceilings(settings: Any, seconds: float, into: dict[int, bt.Result], when: str) -> None:
    for k in CONCURRENCY:
        print(f"run_all: ceiling with {k} client(s) ({when})...", file=sys.stderr, flush=True)
        into[k] = bt.measure("ceiling", k, settings, seconds)


def run_script(name: str, args: list[str], logs: Path) -> tuple[dict[str, Any] | None, float, str]:
    """Run one benchmark script; its JSON, its wall time and, if it failed, why."""
    out_json, log = logs / f"{name}.json", logs / f"{name}.txt"
    command = [sys.executable, str(HERE / f"{name}.py"), *args, "--json", str(out_json)]
    print(f"run_all: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    started = time.monotonic()
    tail: collections.deque[str] = collections.deque(maxlen=30)
    with log.open("w") as stdout:
        proc = subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=HERE.parent)
        assert proc.stderr is not None
        for line in proc.stderr:  # progress to the terminal, the last lines kept for the reason
            sys.stderr.write(line)
            tail.append(line.rstrip())
        code = proc.wait()
    elapsed = time.monotonic() - started
    if code != 0 or not out_json.exists():
        errors = [line for line in tail if "Error" in line or "Exception" in line]
        reason = (errors or list(tail) or [""])[-1][:200]
        return None, elapsed, f"exit code {code}: {reason}; see {log}"
    return json.loads(out_json.read_text()), elapsed, ""


def server_info(dsn: str) -> dict[str, str]:
    conn = pymysql.connect(**parse_dsn(dsn).connect_kwargs(database=False))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@version, @@innodb_flush_log_at_trx_commit, @@innodb_buffer_pool_size")
            version, flush, pool = cur.fetchone()
    finally:
        conn.close()
    return {"version": str(version), "flush": str(flush), "pool_mib": str(int(pool) // 2**20)}


def table(rows: list[Row], failed: dict[str, str], ceilings: Ceilings, info: dict[str, Any]) -> str:
    times = ", ".join(f"{name.removeprefix('bench_')} {seconds:.0f} s" for name, seconds in info["times"].items())
    lines = [
        f"Run {info['date']} with `bench/run_all.py{' --quick' if info['quick'] else ''}`: {os.cpu_count()} CPUs "
        f"(load average {info['load_start']} at the start, {info['load_end']} at the end), server "
        f"{info['server']['version']}, innodb_flush_log_at_trx_commit={info['server']['flush']}, buffer pool "
        f"{info['server']['pool_mib']} MiB; {info['minutes']:.0f} minutes in all ({times}).",
        "",
        f"The ceiling (one single-row INSERT + COMMIT per transaction, bench_transitions' function, "
        f"{info['ceiling_seconds']:g} s per measurement), at the start and at the end of this run:",
        "",
        "| ceiling | " + " | ".join(f"{k} client{'s' if k > 1 else ''}" for k in CONCURRENCY) + " | p50 ms, 1 client |",
        "|---|" + "---:|" * (len(CONCURRENCY) + 1),
    ]
    for label, found in (("start", ceilings.start), ("end", ceilings.end)):
        rates = " | ".join(f"{found[k].rate:,.0f} tx/s" if k in found else "" for k in CONCURRENCY)
        p50 = f"{found[1].pct(50):.2f}" if 1 in found else ""
        lines.append(f"| {label} | {rates} | {p50} |")
    if ceilings.start and ceilings.end:
        lines.append(
            "| **mean (used below)** | "
            + " | ".join(f"**{ceilings.rate(k):,.0f} tx/s**" for k in CONCURRENCY)
            + f" | **{ceilings.p50():.2f}** |"
        )
        moved = {
            k: abs(ceilings.start[k].rate - ceilings.end[k].rate) / ceilings.rate(k)
            for k in CONCURRENCY
            if k in ceilings.start and k in ceilings.end
        }
        worst = max(moved, key=lambda k: moved[k])
        lines += [
            "",
            f"The ceiling moved by up to {moved[worst]:.0%} between the start and the end ({worst} "
            f"client{'s' if worst > 1 else ''})"
            + (
                ": the machine was busy with other work during this run, so read the ratios below as rough."
                if moved[worst] > 0.25
                else "."
            ),
        ]
    lines += [
        "",
        "Each row is a headline number of one benchmark script, against the mean ceiling at the same concurrency "
        "(throughput) or the 1-client ceiling's p50 (latency). The scripts' own sections below set the same "
        "numbers against the ceiling each measured itself, so their ratios and verdicts can differ a little.",
        "",
        "| benchmark | measurement | value | unit | ceiling (this run) | vs ceiling | target | verdict | note |",
        "|---|---|---:|---|---:|---:|---|---|---|",
    ]
    for r in rows:
        unit = "tx/s" if r.unit.endswith("/s") else r.unit
        ceiling = f"{fmt(r.ceiling, unit)} {unit} ({r.ceiling_label})" if r.ceiling else ""
        lines.append(
            f"| {r.bench} | {r.what} | {fmt(r.value, r.unit)} | {r.unit} | {ceiling} | {r.ratio()} | "
            f"{r.target} | {verdict(r)} | {r.note} |"
        )
    for name, why in failed.items():
        lines.append(f"| {name.removeprefix('bench_')} | FAILED | | | | | | | {why} |")
    targets = [r for r in rows if r.target]
    met = sum(1 for r in targets if r.met)
    lines += [
        "",
        f"Targets: {met} of {len(targets)} met"
        + (
            f"; missed: {'; '.join(f'{r.bench}: {r.what} ({r.target})' for r in targets if not r.met)}."
            if met < len(targets)
            else "."
        ),
    ]
    if info.get("retried"):
        lines.append("Run again after a failure: " + "; ".join(f"{k}: {v}" for k, v in info["retried"].items()) + ".")
    if failed:
        lines.append(f"Failed: {', '.join(failed)} (their rows are missing).")
    return "\n".join(lines)


def write_block(path: Path, text: str) -> None:
    """Replace the bench-all block of ``path``; the first time, put the section at the top."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    if MARK[0] in old and MARK[1] in old:
        bt.write_results(path, text, MARK)
        return
    intro = (
        f"{SECTION}\n\n`make bench` (`bench/run_all.py --write BENCHMARKS.md`) runs every benchmark below in "
        "one run, each updating its own section, and puts their headline numbers in this one table, beside the "
        "INSERT+COMMIT ceiling measured at the start and at the end of the same run. `--quick` is a short "
        "smoke run that writes nothing. The machine is shared and noisy: compare ratios, and rerun before "
        "drawing a conclusion from one number.\n\n"
    )
    block = f"{intro}{MARK[0]}\n{text}\n{MARK[1]}\n\n"
    head, _, rest = old.partition("\n")
    if head.startswith("# "):  # after the title (and the blank line after it)
        path.write_text(f"{head}\n\n{block}{rest.lstrip(chr(10))}")
    else:
        path.write_text(block + old)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306/test", help="server (its database is ignored)")
    parser.add_argument(
        "--quick", action="store_true", help="short measurements, a small reporting data set, writes nothing"
    )
    parser.add_argument(
        "--write", type=Path, help="update this file (BENCHMARKS.md): the one table and each script's own section"
    )
    parser.add_argument("--only", default="", help="comma-separated script names to run (default: all)")
    parser.add_argument("--logs", type=Path, help="directory for the scripts' output (default: a new temporary one)")
    parser.add_argument("--retries", type=int, default=1, help="times a script that failed is run again (1)")
    args = parser.parse_args(argv)
    if args.quick and args.write:
        print(
            "run_all: --quick writes nothing (its numbers are not comparable with a full run); "
            f"ignoring --write {args.write}",
            file=sys.stderr,
        )
        args.write = None
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in SCRIPTS]
    if unknown:
        parser.error(f"--only: no script {unknown}; choose from {', '.join(SCRIPTS)}")
    logs = args.logs or Path(tempfile.mkdtemp(prefix="pyfsm-bench-"))
    logs.mkdir(parents=True, exist_ok=True)
    write = args.write.resolve() if args.write else None
    started = time.monotonic()
    info: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "load_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "server": server_info(args.dsn),
        "times": {},
        "ceiling_seconds": 1.5 if args.quick else 5.0,
    }
    ceilings = Ceilings()
    rows: list[Row] = []
    failed: dict[str, str] = {}
    retried: dict[str, str] = {}
    data: dict[str, dict[str, Any]] = {}
    with bt.migrated_database(args.dsn) as (settings, _server):
        measure_ceilings(settings, info["ceiling_seconds"], ceilings.start, "start")
        for name, (full, quick) in SCRIPTS.items():
            if only and name not in only:
                continue
            extra = list(quick if args.quick else full)
            if write and name in WRITES:
                extra += ["--write", str(write)]
            extra += ["--dsn", args.dsn]
            found, elapsed, why = run_script(name, extra, logs)
            for attempt in range(args.retries):
                if found is not None:
                    break
                print(f"run_all: {name} failed ({why}); running it again", file=sys.stderr, flush=True)
                retried[name] = f"failed once ({why.split(';')[0]}), run again"
                (logs / f"{name}.txt").rename(logs / f"{name}.failed-{attempt + 1}.txt")
                found, more, why = run_script(name, extra, logs)
                elapsed += more
            info["times"][name] = elapsed
            if found is None:
                failed[name] = why
                print(f"run_all: {name} FAILED: {why}", file=sys.stderr, flush=True)
            else:
                data[name] = found
        measure_ceilings(settings, info["ceiling_seconds"], ceilings.end, "end")
    for name, found in data.items():
        try:
            rows += ROWS[name](found, ceilings)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            failed[name] = f"its JSON could not be read: {type(exc).__name__}: {exc}"
    info["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    info["minutes"] = (time.monotonic() - started) / 60
    info["retried"] = retried
    text = table(rows, failed, ceilings, info)
    print(text)
    print(f"\nrun_all: each script's own output is in {logs}", file=sys.stderr)
    if write:
        write_block(write, text)
        print(f"run_all: updated {write}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
