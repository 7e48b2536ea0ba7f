"""The transition benchmark on several servers (MariaDB 10.11, MariaDB 11.8, MySQL 9.7), side by side.

Runs ``bench_transitions.py`` against each ``--dsn`` in turn (back to back, each with its own
INSERT+COMMIT ceiling measured in its own run), ``--runs`` times over (the servers
alternate: run 1 on each, then run 2 on each), and prints one table per run: every approach's
tx/s, p50 and p99 and its ratio to the ceiling of its own server, with the settings each
server ran with, and for every server after the first its ratio over the first's.
``--write BENCHMARKS.md`` puts the tables between the ``bench-servers``
marks; ``--from DIR`` renders the tables of an earlier run's ``--logs DIR`` again without
measuring. Each server's own table (round trips, errors, targets) goes to a log file
(``--logs DIR``, default a temporary directory).

    .venv/bin/python bench/bench_servers.py --runs 2 --write BENCHMARKS.md   # the three servers
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import bench_transitions as bt

HERE = Path(__file__).resolve().parent
MARKS = ("<!-- bench-servers:start -->", "<!-- bench-servers:end -->")
#: MariaDB 10.11 (the system's), MySQL 9.7 (scripts/mysql-server), MariaDB 11.8 (scripts/mariadb-server)
DEFAULT_DSNS = (
    "mysql://root@127.0.0.1:3306/test",
    "mysql://root@127.0.0.1:3307/test",
    "mysql://root@127.0.0.1:3308/test",
)


def run_one(dsn: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """bench_transitions.py against ``dsn``: its JSON (its table goes to ``out``.txt)."""
    command = [
        sys.executable,
        str(HERE / "bench_transitions.py"),
        "--dsn",
        dsn,
        "--seconds",
        str(args.seconds),
        "--clients",
        args.clients,
        "--json",
        str(out.with_suffix(".json")),
    ]
    if args.only:
        command += ["--only", args.only]
    print(f"bench_servers: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    with out.with_suffix(".txt").open("w") as log:
        subprocess.run(command, stdout=log, check=True, cwd=HERE.parent)
    return dict(json.loads(out.with_suffix(".json").read_text()))


def name(server: dict[str, str]) -> str:
    """'MySQL 9.7.4-2' or 'MariaDB 10.11.14-MariaDB-0+deb12u2' from @@version."""
    version = server["version"]
    return f"MariaDB {version.split('-')[0]}" if "mariadb" in version.lower() else f"MySQL {version}"


def fmt_ratio(x: float | None) -> str:
    return "" if x is None else f"{x:.0%}"


def table(runs: list[dict[str, Any]], seconds: float) -> str:
    """One run's table: every approach, for each server its numbers and ratio to its own ceiling."""
    names = [name(r["server"]) for r in runs]
    by = [{(x["approach"], x["clients"]): x for x in r["results"]} for r in runs]
    keys = list(dict.fromkeys((x["approach"], x["clients"]) for r in runs for x in r["results"]))
    keys.sort(key=lambda k: (k[1], bt.APPROACHES.index(k[0]) if k[0] in bt.APPROACHES else 99))
    head = "| approach | clients | " + " | ".join(
        f"{n} tx/s | vs its ceiling | p50 ms | p99 ms | server CPU us/tx" for n in names
    )
    # every server after the first beside it: its ratio to its ceiling over the first server's
    others = range(1, len(runs))
    lines = [
        head + "".join(f" | vs ceiling, {names[i]} / {names[0]}" for i in others) + " |",
        "|---|---:|" + "---:|---:|---:|---:|---:|" * len(runs) + "---:|" * len(others),
    ]
    for approach, clients in keys:
        cells, ratios = [], []
        for found in by:
            x, c = found.get((approach, clients)), found.get(("ceiling", clients))
            if x is None:
                cells.append(" | | | | ")
                ratios.append(None)
                continue
            ratio = x["rate"] / c["rate"] if c and c["rate"] else None
            ratios.append(ratio)
            cpu = x.get("server_cpu_us")
            errors = f" ({x['errors']} errors)" if x.get("errors") else ""
            cells.append(
                f"{x['rate']:,.0f}{errors} | {fmt_ratio(ratio)} | {x['p50_ms']:.2f} | {x['p99_ms']:.2f} | "
                + ("n/a" if cpu is None else f"{cpu:,.0f}")
            )
        against = "".join(f" | {ratios[i] / ratios[0]:.2f}x" if ratios[0] and ratios[i] else " | " for i in others)
        lines.append(f"| {approach} | {clients} | " + " | ".join(cells) + against + " |")
    settings = "; ".join(
        f"{name(r['server'])}: innodb_flush_log_at_trx_commit={r['server']['flush']}, "
        f"sync_binlog={r['server']['sync_binlog']}, log_bin={r['server']['log_bin']} "
        f"(load average {r['server']['load']} at its start)"
        for r in runs
    )
    lines = [f"{seconds:g} s per measurement. Settings: {settings}.", "", *lines, ""]
    # what the binary log costs, where a server has it on: the same run's approaches without it
    for n, found in zip(names, by, strict=True):
        parts = []
        for clients in sorted({k[1] for k in found}):
            for approach in ("ceiling", "direct CALL"):
                on, off = found.get((approach, clients)), found.get((approach + bt.NO_BINLOG, clients))
                if on and off and on["rate"]:
                    parts.append(
                        f"{approach} {off['rate'] / on['rate']:.2f}x the tx/s without it at {clients} "
                        f"client{'s' if clients > 1 else ''} (p50 {on['p50_ms']:.2f} -> "
                        f"{off['p50_ms']:.2f} ms)"
                    )
        if parts:
            lines.append(f"Binary log on {n} (the same run, the session with sql_log_bin=0): " + "; ".join(parts) + ".")
    # a ceiling below what a transition reached in the same run was disturbed (the machine is shared)
    for n, r, found in zip(names, runs, by, strict=True):
        for clients in sorted({k[1] for k in found}):
            c = found.get(("ceiling", clients))
            above = [
                a
                for (a, k), x in found.items()
                if k == clients
                and c
                and x["rate"] > c["rate"]
                and a != "ceiling"
                and not a.endswith(bt.NO_BINLOG)
                and a != "pyfsm send_many"
            ]
            if above:
                lines.append(
                    f"Noise: {n}'s {clients}-client ceiling was below {len(above)} transition approaches "
                    f"of its own run (load average {r['server']['load']} at its start, "
                    f"{os.cpu_count()} CPUs): its {clients}-client ratios are not meaningful in this run."
                )
    for i in others:
        parts = []
        for clients in sorted({k[1] for k in keys}):
            a, b = by[0].get(("ceiling", clients)), by[i].get(("ceiling", clients))
            if a and b and a["rate"]:
                parts.append(f"{b['rate'] / a['rate']:.2f}x at {clients} client{'s' if clients > 1 else ''}")
        if parts:
            lines.append(f"{names[i]}'s ceiling against {names[0]}'s: " + ", ".join(parts) + ".")
    return "\n".join(lines).rstrip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument(
        "--dsn",
        action="append",
        help=f"a server, once per server, in the table's order (default: {' and '.join(DEFAULT_DSNS)})",
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each measurement (5)")
    parser.add_argument("--clients", default="1,8", help="comma-separated numbers of client processes (1,8)")
    parser.add_argument("--runs", type=int, default=1, help="runs over every server, one table each (1)")
    parser.add_argument("--only", help="approaches, separated by ; (the ceiling always is), as bench_transitions")
    parser.add_argument("--write", type=Path, help="update the bench-servers block of this file (BENCHMARKS.md)")
    parser.add_argument("--logs", type=Path, help="directory for each run's output (default: a temporary one)")
    parser.add_argument(
        "--from",
        dest="source",
        type=Path,
        help="measure nothing: the tables of an earlier run's --logs directory (its JSON files)",
    )
    args = parser.parse_args(argv)
    dsns = args.dsn or list(DEFAULT_DSNS)
    logs = args.source or args.logs or Path(tempfile.mkdtemp(prefix="pyfsm-bench-servers-"))
    logs.mkdir(parents=True, exist_ok=True)
    texts = []
    if args.source:
        args.runs = len(list(args.source.glob("run*-server1.json")))
    for run in range(1, args.runs + 1):
        if args.source:
            found = [json.loads(f.read_text()) for f in sorted(args.source.glob(f"run{run}-server*.json"))]
            args.seconds = found[0]["seconds"]
        else:
            found = [run_one(dsn, args, logs / f"run{run}-server{i + 1}") for i, dsn in enumerate(dsns)]
        day = (
            datetime.date.fromtimestamp(min(f.stat().st_mtime for f in args.source.glob(f"run{run}-*.json")))
            if args.source
            else datetime.date.today()
        )
        texts.append(
            f"Run {run} of {args.runs}, {day.isoformat()}, {os.cpu_count()} CPUs, "
            f"servers one after the other. {table(found, args.seconds)}"
        )
    text = "\n\n".join(texts)
    print(text)
    print(f"\nbench_servers: each server's own table is in {logs}", file=sys.stderr)
    if args.write:
        bt.write_results(args.write, text, MARKS)
        print(f"bench_servers: updated {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
